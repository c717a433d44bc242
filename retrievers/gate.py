"""Machine-checkable gating of skills: does this skill apply to this query?

A skill's ``applies_when`` names the families, bottlenecks, dtypes, minimum
architecture and code features under which it helps. ``gate`` checks each
against what the query knows and returns a verdict with its reasons:

- ``filter``: the skill cannot apply (the GPU is too old for it, the candidate
  already does what it teaches, or it is deprecated). Hybrid recall drops it.
- ``demote``: it probably does not apply (another family, bottleneck or dtype,
  or a code feature it builds on is missing). Its score is multiplied by
  ``factor`` (< 1), one factor per failed condition.
- ``pass``: nothing known contradicts it; ``matched`` lists what was checked.

Conditions the query does not know (no source, no arch) are skipped, never
held against the skill. Facts guessed from free text weigh less than facts
from a task or a benchmark report.
"""

from __future__ import annotations

from dataclasses import dataclass

from skillbase.retrievers.query import Query

from skillbase.models import CODE_FEATURES, Skill, arch_number, parse_metric_condition

DEMOTE_FAMILY = 0.3
DEMOTE_PART = 0.55  # written for a family that is one part of the task (the norm after its convolution)
DEMOTE_DTYPE = 0.4
DEMOTE_BOTTLENECK = 0.6
DEMOTE_MISSING_FEATURE = 0.6
DEMOTE_LANGUAGE = 0.8
DEMOTE_DRAFT = 0.8
PROFILE_MATCH = 2.5  # a measured metric condition of the skill holds
DEMOTE_PROFILE = 0.6
# At the DRAM limit only moving fewer bytes helps: fusing, one pass instead of several, reuse on chip,
# narrower types; or stopping.
AT_DRAM_LIMIT = {
    "elementwise-fusion",
    "epilogue-fusion",
    "roofline-stop",
    "online-softmax",
    "one-pass-row-reduction",
    "welford",
    "recompute",
    "smem-tiling",
    "register-tiling",
    "program-swizzle",
    "flash-attention",
    "mixed-precision",
    "quantization",
}
GUESS_SOFTENING = 0.5  # a condition checked against a guess costs half as much (in log terms)


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict on one skill for one query."""

    skill: str
    verdict: str  # pass | demote | filter
    factor: float  # score multiplier: 1 for pass, below 1 for demote, 0 for filter
    reasons: tuple[str, ...] = ()  # why it was demoted or filtered
    matched: tuple[str, ...] = ()  # conditions known to hold
    specific: bool = False  # a condition that singles the skill out held (its family, or code features it needs)

    def line(self) -> str:
        """One sentence for a person or an agent."""
        if self.verdict == "pass":
            return f"applies ({', '.join(self.matched)})" if self.matched else "nothing known rules it out"
        return f"{self.verdict}ed: " + "; ".join(self.reasons)


def _profile_gate(skill: Skill, q: Query, factor: float, reasons: list, matched: list) -> float:
    """Measured counters beat every estimate: a skill whose metric condition holds is raised,
    one whose conditions all fail is demoted, and at the DRAM limit only fusion or stopping is kept up."""
    held, failed = [], []
    for cond in skill.applies_when.metrics:
        verdict = metric_condition(cond, q.profile_metrics)
        if verdict is True:
            held.append(cond)
        elif verdict is False:
            failed.append(cond)
    if held:
        matched.append(f"profile: {held[0]}")
        return factor * PROFILE_MATCH
    if failed:
        reasons.append(f"the profile does not show {failed[0]}")
        factor *= DEMOTE_PROFILE
    if q.profile_state == "dram-bound" and not set(skill.techniques) & AT_DRAM_LIMIT:
        reasons.append(
            "the profile shows DRAM at its peak: only moving fewer bytes (fusion, one pass, reuse) or stopping helps"
        )
        factor *= DEMOTE_PROFILE
    return factor


def metric_condition(cond: str, metrics: dict) -> bool | None:
    """Evaluate 'METRIC OP VALUE' (OP one of < <= > >= == !=) against ``metrics``; None when the metric
    is unknown there or the condition does not parse (``lint`` reports the latter)."""
    parsed = parse_metric_condition(cond)
    if parsed is None or parsed[0] not in metrics:
        return None
    have, op, want = metrics[parsed[0]], parsed[1], parsed[2]
    if isinstance(have, str):
        return (have == want) if op == "==" else (have != want) if op == "!=" else None
    try:
        x = float(want)
    except ValueError:
        return None
    return {"<": have < x, "<=": have <= x, ">": have > x, ">=": have >= x, "==": have == x, "!=": have != x}[op]


def _soft(factor: float, guessed: bool) -> float:
    return factor**GUESS_SOFTENING if guessed else factor


def gate(skill: Skill, q: Query) -> GateResult:
    """Check a skill's applies_when, status and languages against the query."""
    w = skill.applies_when
    factor, reasons, matched, filtered = 1.0, [], [], []
    if skill.status == "deprecated":
        filtered.append("the skill is deprecated")
    elif skill.status == "draft":
        factor *= DEMOTE_DRAFT
        reasons.append("a draft, not yet approved")

    need, have = arch_number(w.min_arch), arch_number(q.arch)
    if need is not None and have is not None:
        if have < need:
            filtered.append(f"needs {w.min_arch} or newer; the query is for {q.arch}")
        else:
            matched.append(f"{q.arch} >= {w.min_arch}")

    guessed_family = "task" not in q.inputs and "report" not in q.inputs
    if w.families and q.family:
        broader = [f for f in q.lineage if f in w.families]
        part = [f for f in q.parts if f in w.families]
        if q.family in w.families:
            matched.append(f"family {q.family}")
        elif broader:
            matched.append(f"family {broader[0]} (this is {q.family})")
        elif part:
            factor *= DEMOTE_PART
            reasons.append(f"written for {part[0]}, one part of this {q.family} task")
        else:
            factor *= _soft(DEMOTE_FAMILY, guessed_family)
            reasons.append(
                f"written for {', '.join(w.families[:4])}{', ...' if len(w.families) > 4 else ''}, not {q.family}"
            )
    if w.dtypes and q.dtype:
        if q.dtype in w.dtypes:
            matched.append(f"dtype {q.dtype}")
        else:
            factor *= _soft(DEMOTE_DTYPE, guessed_family)
            reasons.append(f"for {'/'.join(w.dtypes)} data, not {q.dtype}")
    if w.bottlenecks and q.bottleneck and q.bottleneck != "unknown":
        if q.bottleneck in w.bottlenecks:
            matched.append(f"{q.bottleneck}-bound")
        else:
            factor *= _soft(DEMOTE_BOTTLENECK, q.bottleneck_from != "report")
            reasons.append(
                f"helps {'/'.join(w.bottlenecks)}-bound kernels; this one is {q.bottleneck}-bound"
                + (" (estimated)" if q.bottleneck_from != "report" else "")
            )

    if q.profile_metrics:
        factor = _profile_gate(skill, q, factor, reasons, matched)

    code = q.code
    if code is not None and (code.features or code.kernels):
        unsure = code.parse_error is not None
        asked = set(skill.techniques) & set(q.techniques)
        present = [f for f in w.excludes_features if f in code.features]
        if present:
            what = ", ".join(CODE_FEATURES.get(f, f) for f in present)
            if asked or unsure:
                factor *= DEMOTE_MISSING_FEATURE
                reasons.append(f"the candidate seems to do this already ({what})")
            else:
                filtered.append(f"the candidate already does this ({what})")
        missing = [f for f in w.requires_features if f not in code.features]
        if missing:
            factor *= _soft(DEMOTE_MISSING_FEATURE, unsure)
            reasons.append("builds on " + ", ".join(missing) + ", which the candidate lacks")
        elif w.requires_features:
            matched.append("has " + ", ".join(w.requires_features))
        if code.language and skill.languages and code.language not in skill.languages:
            factor *= DEMOTE_LANGUAGE
            reasons.append(f"written for {'/'.join(skill.languages)}, the candidate is {code.language}")

    specific = any(m.startswith(("family ", "has ", "profile: ")) for m in matched)
    if filtered:
        return GateResult(skill.name, "filter", 0.0, tuple(filtered + reasons), tuple(matched), specific)
    verdict = "pass" if factor >= 0.999 else "demote"
    return GateResult(skill.name, verdict, round(factor, 4), tuple(reasons), tuple(matched), specific)
