"""Hybrid recall: fuse the retrievers' rankings, rerank by what is known to
work, and keep the final list diverse.

1. Reciprocal-rank fusion: an item ranked r by a retriever gets
   ``weight / (RRF_K + r)`` from it; the parts add up.
2. Rerank by multiplying factors, each kept in the item's ``parts``:
   ``gate`` (skills: applies / demoted / filtered out), ``applied`` (the
   candidate already uses the item's technique), ``value`` (the best
   measured log-gain of the item's techniques in the query's context, or an
   experience's own measured gain), ``context`` (an experience from the same
   task, class or family), ``hardware`` (measured on the query's GPU or
   another), ``recency`` and ``feedback`` (how often recalling it helped).
3. Diversity: greedy selection where an item sharing techniques with one
   already chosen is multiplied down (``diversity``), so five results are not
   five write-ups of one idea.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

from skillbase.retrievers.gate import GateResult
from skillbase.retrievers.hits import Hit
from skillbase.retrievers.query import Query, family_affinity
from skillbase.retrievers.values import Posterior

from skillbase.models import Evidence, RecallItem

RRF_K = 5  # small pools (tens of items): the top ranks must count
WEIGHTS = {"vector": 1.0, "lexical": 1.0, "graph": 1.0}
DIVERSITY = 0.3  # an item whose techniques all repeat a chosen one keeps 70% of its score
SAME_IDEA_ACROSS_KINDS = 0.25  # a skill and a lesson on one technique complement each other
RECENCY_DAYS = 180.0
APPLIED = 0.6  # a skill or lesson whose technique the candidate already uses


@dataclass(slots=True)
class Scored:
    """One fused item and how its score was built."""

    kind: str
    id: str
    parts: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)
    techniques: tuple[str, ...] = ()
    score: float = 0.0


def graph_weight(q: Query) -> float:
    """How much the graph's ranking counts. Measured facts about the kernel
    (a benchmark report: class, measured bottleneck, distance to the floor)
    make the graph's measured values the strongest signal; a task or code
    gives its class; words only guess it; nothing known, nothing to say."""
    if "report" in q.inputs and q.family:
        return 1.5
    if {"task", "source"} & set(q.inputs) and q.family:
        return 1.0
    if q.family or q.techniques:
        return 0.5
    return 0.0


def fuse(lists: dict[str, list[Hit]], weights: dict[str, float] | None = None) -> dict[tuple[str, str], Scored]:
    """Reciprocal-rank fusion of ranked hit lists keyed by retriever name
    (several lists per retriever are allowed, e.g. one per kind, keyed
    ``'vector:skill'``)."""
    weights = {**WEIGHTS, **(weights or {})}
    fused: dict[tuple[str, str], Scored] = {}
    for key, hits in lists.items():
        source = key.split(":", 1)[0]
        weight = weights[source]
        if not weight:
            continue
        for rank, h in enumerate(hits, 1):
            s = fused.get((h.kind, h.id))
            if s is None:
                s = fused[h.kind, h.id] = Scored(h.kind, h.id)
            parts, ranks = s.parts, s.ranks
            parts[source] = parts.get(source, 0.0) + weight / (RRF_K + rank)
            if source not in ranks or rank < ranks[source]:
                ranks[source] = rank
            if h.note and source not in s.notes:
                s.notes[source] = h.note
    for s in fused.values():
        s.parts["rrf"] = sum(s.parts.get(k, 0.0) for k in WEIGHTS)
    return fused


def rerank(
    q: Query,
    fused: dict[tuple[str, str], Scored],
    *,
    skills: dict,
    experiences: dict,
    gates: dict[str, GateResult],
    beliefs: dict[str, Posterior],
    feedback,
) -> list[Scored]:
    """Apply the rerank factors; skills the gate filters out are dropped."""
    now = time.time()
    out = []
    center = statistics.median(b.lower for b in beliefs.values()) if beliefs else 0.0
    # Measured value ranks what to read for a known kernel; a question in
    # plain words is answered by relevance alone.
    structured = graph_weight(q) >= 1.0
    for (kind, item_id), s in fused.items():
        if kind == "skill":
            skill = skills.get(item_id)
            g = gates.get(item_id)
            if skill is None or g is None or g.verdict == "filter":
                continue
            s.techniques = tuple(skill.techniques)
            s.parts["gate"] = g.factor
            if s.techniques[:1] and s.techniques[0] in q.applied and s.techniques[0] not in q.techniques:
                s.parts["applied"] = APPLIED
            if structured:
                s.parts["value"] = _technique_value(s.techniques, beliefs, q.techniques, center)
        elif kind == "experience":
            e = experiences.get(item_id)
            if e is None:
                continue
            s.techniques = tuple(e.techniques)
            if s.techniques and set(s.techniques) <= set(q.applied) and not set(s.techniques) & set(q.techniques):
                s.parts["applied"] = APPLIED
            if structured:
                s.parts["value"] = _lesson_value(e, s.techniques, beliefs, center)
            s.parts["context"] = _context(q, e.task, e.task_signature, e.family)
            s.parts["hardware"] = _hardware(q.arch, e.arch)
            s.parts["recency"] = 0.9 + 0.1 * math.exp(-(now - e.created_at.timestamp()) / 86400 / RECENCY_DAYS)
        else:
            s.techniques = tuple(s.techniques)
        s.parts["feedback"] = _feedback(feedback(kind, item_id))
        s.score = s.parts["rrf"]
        for f in ("gate", "applied", "value", "context", "hardware", "recency", "feedback"):
            s.score *= s.parts.get(f, 1.0)
        out.append(s)
    out.sort(key=lambda x: (-x.score, x.kind, x.id))
    return out


def diversify(items: list[Scored], k: int, topic: tuple[str, ...] = ()) -> list[Scored]:
    """Greedy pick of ``k`` items; each candidate's score is multiplied by
    ``1 - DIVERSITY * overlap`` with the most similar item already picked
    (overlap: Jaccard of technique sets, a quarter across kinds). Techniques
    the query itself names (``topic``) are what it asks about, so sharing
    them is not repetition."""
    chosen: list[Scored] = []
    # Only the head of the ranking competes: a penalty of at most DIVERSITY
    # does not reach items far below the top k.
    pool = list(items[: max(4 * k, 20)])
    while pool and len(chosen) < k:
        best, best_score, best_mult = None, -math.inf, 1.0
        for s in pool:
            overlap = max((_overlap(s, c, topic) for c in chosen), default=0.0)
            mult = 1.0 - DIVERSITY * overlap
            if s.score * mult > best_score:
                best, best_score, best_mult = s, s.score * mult, mult
        pool.remove(best)
        best.parts["diversity"] = round(best_mult, 4)
        best.score = best_score
        chosen.append(best)
    return chosen


def _overlap(a: Scored, b: Scored, topic: tuple[str, ...] = ()) -> float:
    sa, sb = set(a.techniques) - set(topic), set(b.techniques) - set(topic)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb) * (1.0 if a.kind == b.kind else SAME_IDEA_ACROSS_KINDS)


def _technique_value(
    techniques: tuple[str, ...], beliefs: dict[str, Posterior], asked: tuple[str, ...], center: float
) -> float:
    """exp(half of how much the skill's best technique is expected to beat the
    median technique here, pessimistically), within [0.86, 1.16]; never
    below 1 for a technique the query names."""
    vals = [beliefs[t].lower for t in techniques[:3] if t in beliefs]
    if not vals:
        return 1.0
    v = max(-0.3, min(0.3, max(vals) - center))
    if set(techniques) & set(asked):
        v = max(v, 0.0)
    return math.exp(0.5 * v)


def _lesson_value(e, techniques, beliefs, center: float) -> float:
    """From how much the lesson's techniques are worth here (pessimistic,
    relative to the median technique) and its own measured gain, within
    [0.86, 1.16]: what made kernels like this one faster comes first."""
    tv = max((beliefs[t].lower for t in techniques if t in beliefs), default=center) - center
    own = math.log(e.gain) if e.gain else 0.0
    return math.exp(0.5 * max(-0.3, min(0.3, 0.5 * tv + 0.5 * own)))


def _context(q: Query, task, signature, family) -> float:
    """A lesson from this task, its class, its family, a related family or
    another one; a family guessed from words weighs half as much."""
    if q.task_name and task == q.task_name:
        return 1.3
    if q.task_class and signature == q.task_class:
        return 1.15
    if not q.family:
        return 1.0
    factor = 0.6 + 0.4 * family_affinity(q.family, family) if family else 0.9
    guessed = not ({"task", "report", "source"} & set(q.inputs))
    return math.sqrt(factor) if guessed else factor


def _hardware(want: str | None, have: str | None) -> float:
    if not want or not have:
        return 1.0
    return 1.05 if want == have else 0.93


def _feedback(fb: dict[str, int]) -> float:
    n, improved = fb.get("n", 0), fb.get("improved", 0)
    if not n:
        return 1.0
    return max(0.8, min(1.25, 2.0 * (improved + 1) / (n + 2)))


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def skill_item(s: Scored, skill, g: GateResult, beliefs: dict[str, Posterior], arch: str | None) -> RecallItem:
    main = max(skill.techniques, key=lambda t: beliefs[t].mean if t in beliefs else -9) if skill.techniques else None
    evidence = list(skill.evidence[:3])
    b = beliefs.get(main) if main else None
    if b is not None and b.timed:
        evidence.append(
            Evidence(
                gain=round(b.expected_gain, 3),
                hardware=arch,
                note=(
                    f"{main}: x{b.expected_gain:.2f} expected here (posterior over {b.samples} measured steps; "
                    f"{b.timed} in {b.context}, {b.successes} of {b.tries} faster)"
                ),
            )
        )
    reasons = _retriever_reasons(s)
    reasons.append(g.line())
    if b is not None and b.timed:
        reasons.append(f"{main} measured x{b.expected_gain:.2f} in similar kernels")
    return RecallItem(
        kind="skill",
        id=skill.name,
        title=skill.name,
        summary=skill.description[:400],
        techniques=list(skill.techniques),
        score=round(s.score, 6),
        parts=_round(s.parts),
        why=_sentence("Skill", reasons),
        evidence=evidence,
    )


def experience_item(s: Scored, e) -> RecallItem:
    ev = Evidence(
        experience_id=e.id,
        attempt_id=e.after_attempt,
        task=e.task,
        gain=e.gain,
        hardware=e.hardware or e.arch,
        note=f"{e.source} lesson" + (f"; {e.conditions}" if e.conditions else ""),
    )
    reasons = _retriever_reasons(s)
    if e.gain:
        reasons.append(f"measured x{e.gain:.2f}" + (f" on {e.arch}" if e.arch else ""))
    ctx = s.parts.get("context", 1.0)
    if ctx >= 1.3:
        reasons.append("from this very task")
    elif ctx >= 1.15:
        reasons.append("from the same task class")
    summary = e.lesson.strip()[:400] + (f" (held when: {e.conditions})" if e.conditions else "")
    return RecallItem(
        kind="experience",
        id=e.id,
        title=(e.title or e.lesson[:70]).strip(),
        summary=summary,
        techniques=list(e.techniques),
        score=round(s.score, 6),
        parts=_round(s.parts),
        why=_sentence("Lesson", reasons),
        evidence=[ev],
    )


def attempt_item(s: Scored, a) -> RecallItem:
    ev = Evidence(
        attempt_id=a.id,
        task=a.task,
        gain=a.speedup_vs_eager,
        hardware=a.hardware,
        note=f"{a.verdict}, {a.bottleneck}-bound" + (f", {a.pct_sol:.0f}% of speed of light" if a.pct_sol else ""),
    )
    title = f"{a.task} attempt" + (f" at {a.speedup_vs_eager:.2f}x vs eager" if a.speedup_vs_eager else "")
    summary = (", ".join(a.techniques) or "no techniques claimed") + (f". {a.notes[:300]}" if a.notes else "")
    return RecallItem(
        kind="attempt",
        id=a.id,
        title=title,
        summary=summary,
        techniques=list(a.techniques),
        score=round(s.score, 6),
        parts=_round(s.parts),
        why=_sentence("Attempt", _retriever_reasons(s)),
        evidence=[ev],
    )


def _retriever_reasons(s: Scored) -> list[str]:
    out = []
    if "vector" in s.ranks:
        out.append(f"close in meaning to the query (#{s.ranks['vector']})")
    if "lexical" in s.ranks:
        out.append(f"shares its exact terms (#{s.ranks['lexical']})")
    if "graph" in s.ranks and s.notes.get("graph"):
        out.append(s.notes["graph"])
    return out


def _sentence(head: str, reasons: list[str]) -> str:
    reasons = [r for r in reasons if r]
    return f"{head}: " + "; ".join(reasons[:4]) + "." if reasons else f"{head} retrieved for the query."


def _round(parts: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in parts.items()}
