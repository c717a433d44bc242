"""Graph retrieval: from what the query is (task class, bottleneck, arch) to
the techniques worth most there, and the skills and experiences attached.

1. ``technique_beliefs``: a posterior per technique (``skillbase.retrievers.values``)
   from the reasoning graph's measured steps, with the gated skills as prior.
2. Skills are ranked by the best belief among their techniques (their first,
   main technique counting most), times their gate factor.
3. Experiences are those of the query's own task and those teaching the best
   techniques in its family, ranked by the technique's belief, the lesson's
   measured gain and how close its context is to the query's.
4. Attempts are the best attempts of similar tasks (best lineages).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

from skillbase.retrievers.catalog import Catalog
from skillbase.retrievers.gate import GateResult, gate
from skillbase.retrievers.hits import Hit
from skillbase.retrievers.memo import Memo
from skillbase.retrievers.query import Query, family_affinity
from skillbase.retrievers.values import GATED_PRIOR, SKILL_PRIOR, Posterior, posteriors

from skillbase.models import family_lineage

TOP_TECHNIQUES = 10
MEMO_MAX = 256  # query contexts whose gates and beliefs are kept
STOP = "roofline-stop"
NEAR_FLOOR_PCT = 85.0  # percent of speed of light past which stopping is the advice


def near_floor(q: Query) -> bool:
    """Whether the report (or the words) put the kernel close to its floor."""
    return q.pct_sol is not None and q.pct_sol >= NEAR_FLOOR_PCT


EXPERIENCES_PER_TECHNIQUE = 12
SECONDARY_WEIGHT = 0.6  # a skill's later techniques count this much of its first
PROFILE_TECHNIQUES = 4  # the diagnosis's first techniques get a prior
PROFILE_PRIOR = (0.25, 0.05)  # about x1.28, sd 0.22: a measured bottleneck names what to fix


def skill_priors(
    q: Query, gates: dict[str, GateResult], skills: dict, measured: set[str] | frozenset[str] = frozenset()
) -> dict[str, tuple[float, float]]:
    """Prior (mean, variance) of each technique's log-gain from the skills
    implementing it: the cold start before anything is measured.

    An applicable skill says its technique is worth a little (x1.05), more when
    it was written for few kinds of kernels and this is one of them, or for
    this bottleneck, or builds on code features the candidate has; a skill's
    later techniques count half. Measured evidence on the skill replaces the
    guess. A skill gated out for this query says its technique does not fit.
    The most favourable skill per technique wins.

    Evidence whose attempt is in ``measured`` (the store holds it) is left out:
    its step is already in the graph's statistics, each in its own family, and
    counted again here as a prior of the query's family it would pass a gain
    measured on other kernels (one x14 convolution step) for knowledge about
    this one."""
    out: dict[str, tuple[float, float]] = {}
    for name, g in gates.items():
        skill = skills[name]
        if skill.status == "deprecated":
            continue
        w = skill.applies_when
        mean = 0.05
        if q.family and set(q.lineage) & set(w.families):
            mean += 0.06 * min(1.0, 3 / len(w.families))
        if q.bottleneck and q.bottleneck in w.bottlenecks:
            mean += 0.02 * min(1.0, 2 / len(w.bottlenecks))
        if w.requires_features and q.code and all(f in q.code.features for f in w.requires_features):
            mean += 0.03
        gains = [e.gain for e in skill.evidence if e.gain and e.gain > 0 and e.attempt_id not in measured]
        if gains:
            mean = sum(math.log(x) for x in gains) / len(gains)
        lo = GATED_PRIOR[0]
        mean = lo if g.verdict == "filter" else lo + (mean - lo) * g.factor
        for i, t in enumerate(skill.techniques):
            m = mean if i == 0 or mean <= 0 else mean * 0.5
            if t not in out or m > out[t][0]:
                out[t] = (m, SKILL_PRIOR[1])
    return out


def technique_families(skills: dict) -> dict[str, set[str] | None]:
    """The kernel families each technique is written for, from the skills
    that teach it (None: some skill applies to any family)."""
    out: dict[str, set[str] | None] = {}
    for skill in skills.values():
        if skill.status == "deprecated":
            continue
        fams = set(skill.applies_when.families)
        for t in skill.techniques:
            if t in out and out[t] is None:
                continue
            out[t] = None if not fams else out.get(t, set()) | fams
    return out


def out_of_family(family: str | None, skills: dict) -> set[str]:
    """Techniques that no skill is written for ``family`` or a broader family
    it belongs to (empty if the family is unknown): measured gains elsewhere
    do not carry over to it."""
    if not family:
        return set()
    lineage = set(family_lineage(family))
    return {t for t, fams in technique_families(skills).items() if fams is not None and not fams & lineage}


class GraphRetriever:
    """Technique values, skills and experiences from the reasoning graph."""

    def __init__(self, store, catalog: Catalog):
        self.store = store
        self.catalog = catalog
        # Gates and beliefs per query context, until the skills, a technique value or the attempts
        # change: agents asking about the same kind of kernel in other words share one answer.
        self.memo = Memo(MEMO_MAX)

    def experience_refs(self, technique: str, family: str | None) -> list:
        """The graph's experiences teaching ``technique`` (in ``family``, else in the broader
        families it belongs to), best first."""
        graph = self.store.graph
        refs = graph.experiences_for_technique(technique, k=EXPERIENCES_PER_TECHNIQUE, family=family)
        for broader in family_lineage(family)[1:]:
            if len(refs) >= EXPERIENCES_PER_TECHNIQUE:
                break
            refs += graph.experiences_for_technique(technique, k=EXPERIENCES_PER_TECHNIQUE - len(refs), family=broader)
        return refs

    def _measured(self, skills: dict) -> set[str]:
        """The skills' evidence attempts that the store holds (their steps are in the graph)."""
        ids = sorted({e.attempt_id for s in skills.values() for e in s.evidence if e.attempt_id})
        return self.store.ledger.existing_attempt_ids(ids) if ids else set()

    def gates(self, q: Query) -> Mapping[str, GateResult]:
        """The gate's verdict on every skill for this query (read-only)."""
        skills = self.catalog.skills
        return self.memo.get(
            ("gates", q.context_key(), self.catalog.version),
            lambda: MappingProxyType({name: gate(s, q) for name, s in skills.items()}),
        )

    def technique_beliefs(self, q: Query, gates: Mapping[str, GateResult]) -> Mapping[str, Posterior]:
        """Posterior log-gain per technique in the query's context (read-only)."""
        skills = self.catalog.skills
        graph = self.store.graph
        key = (
            "beliefs",
            q.context_key(),
            tuple(sorted((n, g.verdict, g.factor) for n, g in gates.items())),
            self.catalog.version,
            id(graph),
            graph.values_version,
            graph.attempts_version,
        )
        return self.memo.get(key, lambda: MappingProxyType(self._beliefs(q, gates, skills, graph)))

    def _beliefs(self, q: Query, gates: Mapping[str, GateResult], skills: dict, graph) -> dict[str, Posterior]:
        # A family nothing was measured on yet learns from the nearest broader one that was.
        family = next((f for f in q.lineage if graph.technique_values(family=f)), q.family)
        task_class = q.task_class if family == q.family else None
        priors = skill_priors(q, gates, skills, self._measured(skills))
        for i, t in enumerate(q.profile_techniques[:PROFILE_TECHNIQUES]):
            # What the profile's diagnosis names is a measured reason to try it, stronger than a skill's word.
            m = PROFILE_PRIOR[0] * (1 - 0.15 * i)
            if t not in priors or m > priors[t][0]:
                priors[t] = (m, PROFILE_PRIOR[1])
        return posteriors(
            graph,
            family=family,
            task_class=task_class,
            bottleneck=q.bottleneck,
            arch=q.arch,
            skill_priors=priors,
            techniques=list(q.techniques),
            out_of_scope=out_of_family(q.family, skills) - set(q.techniques),
            profile_state=q.profile_state,
        )

    # -- skills --------------------------------------------------------------

    def skills(self, q: Query, gates: dict[str, GateResult], beliefs: dict[str, Posterior], n: int) -> list[Hit]:
        """Skills ranked by the value of what they teach here, gate applied."""
        scored = []
        for name, skill in self.catalog.skills.items():
            g = gates[name]
            if g.verdict == "filter" or not skill.techniques:
                continue
            # Only skills the query's facts speak for: a condition of theirs
            # holds, or the query names one of their techniques.
            if (
                not g.specific
                and not set(skill.techniques) & set(q.techniques)
                and not (STOP in skill.techniques and near_floor(q))
            ):
                continue
            best, best_t = -math.inf, skill.techniques[0]
            for i, t in enumerate(skill.techniques):
                b = beliefs.get(t)
                v = (b.lower if b else 0.0) * (1.0 if i == 0 else SECONDARY_WEIGHT)
                if t in q.applied and t not in q.techniques:
                    v = min(v, 0.0) - 0.2  # already in the candidate: nothing left to gain from it
                if t in q.techniques:
                    v += 0.3
                if v > best:
                    best, best_t = v, t
            # Specific matches (family, bottleneck, features) beat generic skills.
            score = math.exp(best) * g.factor * (1.0 + 0.03 * len(g.matched))
            b = beliefs.get(best_t)
            note = (
                f"{best_t} is worth x{math.exp(b.mean):.2f} here"
                + (f" ({b.timed} measured in {b.context})" if b and b.timed else " (prior from skills)")
                if b
                else ""
            )
            if STOP in skill.techniques and near_floor(q):
                score, note = score * 3.0, f"the kernel is at {q.pct_sol:.0f}% of its speed of light"
            scored.append(Hit("skill", name, score, note, {"technique": best_t}))
        scored.sort(key=lambda h: (-h.score, h.id))
        return scored[:n]

    # -- experiences ---------------------------------------------------------

    def experiences(self, q: Query, beliefs: dict[str, Posterior], n: int) -> list[Hit]:
        """Lessons of this task and lessons teaching the best techniques here."""
        top = [b for b in sorted(beliefs.values(), key=lambda b: -b.lower) if b.technique not in q.applied]
        top = top[:TOP_TECHNIQUES]
        wanted = {b.technique for b in top if b.lower > 0} | set(q.techniques) | ({STOP} if near_floor(q) else set())
        ids: dict[str, str] = {}
        if q.task_name:
            for e in self.store.list_experiences(task=q.task_name, limit=20):
                ids.setdefault(e.id, "a lesson of this task")
        if q.family or wanted:
            for t in sorted(wanted):
                for ref in self.experience_refs(t, q.family):
                    ids.setdefault(ref.id, f"teaches {t}")
        exps = self.catalog.experiences(list(ids))
        hits = []
        for eid, e in exps.items():
            tech_value = max((beliefs[t].lower for t in e.techniques if t in beliefs), default=0.0)
            gain = math.log(e.gain) if e.gain else 0.0
            score = tech_value + 0.5 * max(-0.5, min(1.0, gain)) + _context_bonus(q, e)
            hits.append(Hit("experience", eid, math.exp(score), ids[eid]))
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits[:n]

    # -- attempts ------------------------------------------------------------

    def attempts(self, q: Query, n: int) -> list[Hit]:
        """The best attempts of similar tasks (one per task), fastest first."""
        if not (q.task_class or q.family):
            return []
        graph = self.store.graph
        lineages = graph.best_lineages(task_signature=q.task_class, arch=q.arch, k=n) if q.task_class else []
        for family in q.lineage:
            if len(lineages) >= n:
                break
            seen = {ln.attempt_id for ln in lineages}
            lineages += [ln for ln in graph.best_lineages(family=family, arch=q.arch, k=n) if ln.attempt_id not in seen]
        return [
            Hit(
                "attempt",
                ln.attempt_id,
                ln.speedup_vs_eager,
                f"best of {ln.task}: {ln.speedup_vs_eager:.2f}x vs eager in {len(ln.steps)} steps",
            )
            for ln in lineages[:n]
        ]


def _context_bonus(q: Query, e) -> float:
    """How close a lesson's context is to the query's (log scale)."""
    bonus = 0.0
    if q.task_name and e.task == q.task_name:
        bonus += 0.4
    if q.task_class and e.task_signature == q.task_class:
        bonus += 0.2
    if q.family and e.family:
        bonus += 0.1 if e.family == q.family else (-0.1 if family_affinity(q.family, e.family) else -0.3)
    if STOP in e.techniques and near_floor(q):
        bonus += 0.5
    if q.bottleneck and e.bottleneck == q.bottleneck:
        bonus += 0.05
    if q.arch and e.arch:
        bonus += 0.05 if e.arch == q.arch else -0.1
    return bonus
