"""What each ledger record looks like in the vector index: the text that is
embedded, the document kept beside it, and the metadata that filters apply to.

Metadata keys per collection (chroma ``where`` filters use these names):

- attempts: task, signature, family, dtype, regime, language, verdict, arch,
  hardware, bottleneck, speedup (vs eager), speedup_vs_compile, median_ms,
  techniques (list; filter with ``{"techniques": {"$contains": name}}``),
  has_parent (bool), created (unix seconds), run (the suite run it came from).
- experiences: task, signature, family, dtype, arch, hardware, bottleneck,
  gain, source, techniques (list), created.
- skills: name, status, version, techniques, languages, families,
  bottlenecks, dtypes (lists), min_arch.

Keys whose value is unknown are left out (chroma metadata cannot hold None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillbase.memory.embeddings import kernel_excerpt, summarize_source

from skillbase.models import Attempt, Experience, Skill

COLLECTIONS = ("experiences", "skills", "attempts")

# The model's cost grows with the word pieces it reads, and kernel sources run
# to hundreds of them (a median of 330 for the benchmark's attempts): an
# attempt is embedded as its outcome, structural summary and techniques
# (a median of 78 word pieces there) plus, as room permits, the start of the
# kernel body: 96 in all, where a kernel's summary says more per word piece
# than its code.
ATTEMPT_MAX_TOKENS = 96
ATTEMPT_CODE_CHARS = 480  # enough source to fill the budget; tokenizing more is waste
ATTEMPT_NOTES_CHARS = 120
TEXT_MAX_TOKENS = 256


@dataclass(frozen=True)
class IndexDoc:
    """One record as the index stores it."""

    collection: str
    id: str
    text: str
    metadata: dict[str, Any]
    max_tokens: int


def _meta(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None and v != [] and v != ""}


def attempt_text(a: Attempt) -> str:
    """The embedded text of an attempt: what it is, how it did, its structural
    summary and techniques on one line, then the first lines of the kernel
    code itself (the whole is cut at ATTEMPT_MAX_TOKENS word pieces)."""
    outcome = a.verdict
    if a.speedup_vs_eager is not None:
        outcome += f", {a.speedup_vs_eager:.2f}x vs eager"
    if a.bottleneck != "unknown":
        outcome += f", {a.bottleneck}-bound"
    summary = summarize_source(a.source, family=a.family, language=a.language)
    parts = [f"{a.task} ({a.task_signature}), {outcome}.", summary + "."]
    if a.techniques:
        parts.append("techniques: " + ", ".join(a.techniques) + ".")
    if a.notes.strip():
        parts.append(a.notes.strip()[:ATTEMPT_NOTES_CHARS])
    return " ".join(parts) + "\n" + kernel_excerpt(a.source, max_chars=ATTEMPT_CODE_CHARS)


def attempt_doc(a: Attempt) -> IndexDoc:
    metadata = _meta(
        task=a.task,
        signature=a.task_signature,
        family=a.family,
        dtype=a.dtype,
        regime=a.task_signature.rsplit(":", 1)[-1],
        language=a.language,
        verdict=a.verdict,
        arch=a.arch,
        hardware=a.hardware,
        bottleneck=a.bottleneck,
        speedup=a.speedup_vs_eager,
        speedup_vs_compile=a.speedup_vs_compile,
        median_ms=a.median_ms,
        techniques=list(a.techniques),
        has_parent=a.parent_id is not None,
        created=a.created_at.timestamp(),
        run=a.run,
    )
    return IndexDoc("attempts", a.id, attempt_text(a), metadata, ATTEMPT_MAX_TOKENS)


def experience_text(e: Experience) -> str:
    """The embedded text of an experience: title, lesson, where it held (a
    title that only repeats the lesson's opening is left out)."""
    title, lesson = e.title.strip(), e.lesson.strip()
    parts = [lesson] if lesson.startswith(title.rstrip(". ")) else [title, lesson]
    if e.conditions.strip():
        parts.append("Held when: " + e.conditions.strip())
    context = " ".join(x for x in (e.family, e.dtype, e.bottleneck and f"{e.bottleneck}-bound", e.arch) if x)
    if context:
        parts.append(f"({context})")
    if e.techniques:
        parts.append("techniques: " + ", ".join(e.techniques))
    return "\n".join(p for p in parts if p)


def experience_doc(e: Experience) -> IndexDoc:
    metadata = _meta(
        task=e.task,
        signature=e.task_signature,
        family=e.family,
        dtype=e.dtype,
        arch=e.arch,
        hardware=e.hardware,
        bottleneck=e.bottleneck,
        gain=e.gain,
        source=e.source,
        techniques=list(e.techniques),
        created=e.created_at.timestamp(),
    )
    return IndexDoc("experiences", e.id, experience_text(e), metadata, TEXT_MAX_TOKENS)


def skill_text(s: Skill) -> str:
    """The embedded text of a skill: name, description, effect, then the body."""
    parts = [s.name.replace("-", " ") + ": " + s.description.strip()]
    if s.techniques:
        parts.append("techniques: " + ", ".join(s.techniques))
    if s.expected_effect.strip():
        parts.append(s.expected_effect.strip())
    if s.body.strip():
        parts.append(s.body.strip()[:2000])
    return "\n".join(parts)


def skill_doc(s: Skill) -> IndexDoc:
    w = s.applies_when
    metadata = _meta(
        name=s.name,
        status=s.status,
        version=s.version,
        techniques=list(s.techniques),
        languages=list(s.languages),
        families=list(w.families),
        bottlenecks=list(w.bottlenecks),
        dtypes=list(w.dtypes),
        min_arch=w.min_arch,
    )
    return IndexDoc("skills", s.name, skill_text(s), metadata, TEXT_MAX_TOKENS)
