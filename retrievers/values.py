"""What a technique is worth in the query's context, with its uncertainty.

The reasoning graph keeps, per context (everything, a family, a task class,
a task class in a bottleneck state) and architecture, running statistics of
the log-speedup each technique gave. Specific contexts have few samples;
general ones are biased toward other kinds of kernels. ``posteriors`` combines
them as a hierarchy of Gaussians, from the most general context to the most
specific, each level's effect drawn around its parent's with variance
``LEVEL_VAR``:

- samples of a context that are not in the query's next, more specific
  context are siblings' evidence about it (variance ``noise`` plus the next
  level's spread each), whether or not the query's own context has samples:
  a technique measured only on convolutions says little about a softmax;
- only the most specific context's samples are direct evidence (``noise``);
- contexts below the family where nothing was measured are left out (an
  empty context splits nothing and would only add variance);
- kernel families differ far more than task classes within a family
  (``FAMILY_VAR`` > ``LEVEL_VAR``): im2col pays x14 on a direct convolution
  and nothing on a row softmax;
- a technique no skill writes for the query's family (``out_of_scope``) takes
  no evidence from other families at all, only from the family down;
- a skill that applies to the query adds a prior pseudo-observation at the
  family level (``SKILL_PRIOR``), one gated out adds a negative one: the cold
  start when the graph knows nothing yet.

The result per technique is a Normal posterior on the mean log-gain, plus the
chance an application is correct at all (failures and broken candidates).

Measured gains say what a technique gave where somebody chose to apply it,
not how often it applies: a rewrite that doubled the one kernel with the
structure for it says little about the family's next kernel, while a step
that made nine of ten tasks of a family faster is that family's recipe.
``applicability`` estimates the chance a technique pays on a new task of the
query's family from the share of the family's measured tasks it made faster,
each task counted once however many steps it took, shrunk toward the same
share over the broader families it belongs to (``APPLY_PRIOR`` pseudo-tasks),
and toward 1/2 where nothing was measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from skillbase.memory.graph import TechniqueValue

from skillbase.models import FAMILIES, family_lineage

ROOT_PRIOR = (0.0, 0.09)  # mean, variance of a technique's log-gain before any evidence (sd 0.3: x0.74-x1.35)
LEVEL_VAR = 0.03  # how far a task class, bottleneck state or arch may stray from its parent context (sd 0.17)
FAMILY_VAR = 0.15  # how far a family's effect may stray from the all-kernels mean (sd 0.39: x0.68-x1.47)
NOISE_VAR = 0.04  # spread of one measured step around its context's mean (sd 0.2)
SKILL_PRIOR = (0.10, 0.06)  # an applicable skill: about x1.1, sd 0.25
GATED_PRIOR = (-0.10, 0.06)  # a skill written for other kernels
APPLY_PRIOR = 2.0  # pseudo-tasks of the broader families' share behind a family's own count


@dataclass
class Applicability:
    """The chance a technique pays on a new task of a family, from the tasks before it."""

    rates: dict[str, float]
    default: float = 0.5  # a technique that made none of the tasks counted faster
    tasks: int = 0  # tasks of the family itself that were counted
    improved: dict[str, int] | None = None  # per technique, how many of those it made faster

    def rate(self, technique: str) -> float:
        return self.rates.get(technique, self.default)

    def line(self, technique: str) -> str:
        """'faster on 3 of the family's 4 measured tasks', or '' with no task of the family counted."""
        if not self.tasks:
            return ""
        n = (self.improved or {}).get(technique, 0)
        return f"faster on {n} of the family's {self.tasks} measured tasks"


def applicability(graph, family: str | None, *, exclude_task: str | None = None) -> Applicability:
    """Per technique, the chance it pays on a new task of ``family``: the share of measured tasks it
    made faster, the broader families' tasks first (pooled), then the family's own, each level a
    Beta prior of ``APPLY_PRIOR`` pseudo-tasks centred on the level above (1/2 at the top), as
    ``_p_ok`` does for correctness. Every technique gets the same rate where no task of the lineage
    was measured, so the ranking is then the posterior's alone. (Not used with a measured profile
    state: the retriever then ranks by the state's own contexts.)"""
    lineage = family_lineage(family)
    if not lineage:
        return Applicability({})
    levels = []
    for fams in (lineage[1:], lineage[:1]):
        tasks, improved = 0, {}
        for f in fams:
            cov = graph.technique_coverage(f, exclude_task=exclude_task)
            tasks += cov.tasks
            for t, n in cov.improved.items():
                improved[t] = improved.get(t, 0) + n
        levels.append((tasks, improved))
    default, rates = 0.5, {}
    for tasks, improved in levels:
        if not tasks:
            continue
        rates = {
            t: (improved.get(t, 0) + APPLY_PRIOR * rates.get(t, default)) / (tasks + APPLY_PRIOR)
            for t in set(rates) | set(improved)
        }
        default = APPLY_PRIOR * default / (tasks + APPLY_PRIOR)
    own_tasks, own_improved = levels[1]
    return Applicability(rates, default, own_tasks, own_improved)


@dataclass
class Posterior:
    """Belief about one technique's log-gain in the query's context."""

    technique: str
    mean: float
    var: float
    tries: int = 0  # steps that applied it in the most specific context with data
    timed: int = 0
    successes: int = 0
    p_ok: float = 0.5  # chance an application ends correct and timed
    context: str = "prior"  # the most specific context that had samples
    samples: int = 0  # timed samples used over all levels
    direct_mean: float | None = None  # mean log-gain in that context, unshrunk
    in_scope: bool = True  # some skill is written for the query's family (or for any), or nothing is known

    @property
    def std(self) -> float:
        return math.sqrt(self.var)

    @property
    def lower(self) -> float:
        """Mean minus one standard deviation: the value recall ranks by, so a
        technique known to pay here beats one merely hoped to."""
        return self.mean - self.std

    @property
    def expected_gain(self) -> float:
        """Geometric-mean speedup the posterior expects."""
        return math.exp(self.mean)

    @property
    def value(self) -> float:
        """Expected log-gain of trying it once, counting failed attempts as no gain."""
        return self.p_ok * self.mean


def _stats(v: TechniqueValue) -> tuple[int, float, int, int]:
    return v.timed, (v.mean_log_gain or 0.0) * v.timed, v.tries, v.successes


def _update(mean: float, var: float, n: int, total: float, obs_var: float) -> tuple[float, float]:
    if n <= 0:
        return mean, var
    precision = 1.0 / var + n / obs_var
    return (mean / var + total / obs_var) / precision, 1.0 / precision


def levels_for(
    family: str | None, task_class: str | None, bottleneck: str | None, profile_state: str | None = None
) -> list[dict]:
    """Contexts from general to specific, as technique_values keyword sets. A measured profile
    state replaces the task class and roofline bottleneck below the family."""
    bn = bottleneck if bottleneck and bottleneck != "unknown" else None
    out: list[dict] = [{}]
    if profile_state:
        return out + (
            [{"family": family}, {"family": family, "profile_state": profile_state}]
            if family
            else [{"profile_state": profile_state}]
        )
    if family:
        out.append({"family": family})
        if task_class:
            out.append({"task_class": task_class})
            if bn:
                out.append({"task_class": task_class, "bottleneck": bn})
        elif bn:
            out.append({"family": family, "bottleneck": bn})
    elif bn:
        out.append({"bottleneck": bn})
    return out


def _level_vars(levels: list[dict], arch: str | None) -> list[float]:
    """How far each level's effect may stray from its parent's (0 for the root)."""
    out = [0.0] + [FAMILY_VAR if set(kw) == {"family"} else LEVEL_VAR for kw in levels[1:]]
    return out + ([LEVEL_VAR] if arch else [])


def posteriors(
    graph,
    *,
    family: str | None,
    task_class: str | None,
    bottleneck: str | None,
    arch: str | None,
    skill_priors: dict[str, tuple[float, float]] | None = None,
    techniques: list[str] | None = None,
    out_of_scope: set[str] | frozenset[str] = frozenset(),
    profile_state: str | None = None,
) -> dict[str, Posterior]:
    """Posterior per technique (those with data, with a skill prior, or named
    in ``techniques``) for the query's context on ``arch``. Techniques in
    ``out_of_scope`` (no skill is written for this family) learn only from
    measurements in the query's family."""
    levels = levels_for(family, task_class, bottleneck, profile_state)
    tables = [{v.technique: v for v in graph.technique_values(**kw, arch=None)} for kw in levels]
    if profile_state and not tables[-1]:
        # Nothing measured from this state yet: the task class and roofline bottleneck say more than nothing.
        levels = levels_for(family, task_class, bottleneck)
        tables = [{v.technique: v for v in graph.technique_values(**kw, arch=None)} for kw in levels]
    family_level = 1 if family else 0
    # A context below the family where nothing at all was measured (no step
    # recorded its bottleneck state, no class sibling yet) splits nothing:
    # modelling its deviation would only add variance.
    while len(tables) > family_level + 1 and not tables[-1]:
        tables.pop()
        levels.pop()
    siblings = _sibling_families(graph, family) if family else {}
    arch_table = {v.technique: v for v in graph.technique_values(**levels[-1], arch=arch)} if arch else {}
    if arch and not arch_table:
        arch = None
    names = set().union(*tables) | set(skill_priors or {}) | set(techniques or [])
    spread = _level_vars(levels, arch)
    out: dict[str, Posterior] = {}
    for t in sorted(names):
        scoped = not (family and t in out_of_scope)
        chain = [tab.get(t) for tab in tables] + ([arch_table.get(t)] if arch else [])
        if not scoped:
            chain[:family_level] = [None] * family_level
        sib = [tab[t] for tab in siblings.values() if t in tab] if scoped else None
        p = _posterior(t, chain, spread, family_level, (skill_priors or {}).get(t), sib)
        p.in_scope = scoped
        out[t] = p
    return out


def _p_ok(chain: list) -> float:
    """The chance an application ends correct and timed, from general to specific: each context's
    count updates a Beta prior centred on the broader context's rate (two pseudo-tries), so one try
    in a narrow context does not undo what many tries in its family said."""
    rate = 0.5
    for v in chain:
        if v is not None and v.tries:
            rate = (v.timed + 2 * rate) / (v.tries + 2)
    return rate


def _sibling_families(graph, family: str) -> dict[str, dict]:
    """Per other family, its technique table: the root level's evidence, one family at a time."""
    out = {}
    for f in FAMILIES:
        if f != family:
            table = {v.technique: v for v in graph.technique_values(family=f)}
            if table:
                out[f] = table
    return out


def _posterior(
    t: str,
    chain: list,
    spread: list[float],
    prior_level: int,
    skill_prior: tuple[float, float] | None,
    siblings: list | None = None,
) -> Posterior:
    """Walk the contexts from general to specific: the samples of a level
    outside the next one are siblings' evidence (each strays from the query's
    branch by the next level's spread); the deepest level's are direct.

    With ``siblings`` (the technique's statistics in each other family), the
    root level counts each sibling family once, its mean observed with variance
    ``FAMILY_VAR + NOISE_VAR / n``: samples of one family share that family's
    effect, so ten steps on matrix products say about a normalization only what
    one family's mean can."""
    mean, var = ROOT_PRIOR
    used = 0
    deepest = len(chain) - 1
    for i, v in enumerate(chain):
        var += spread[i]
        if i == prior_level and skill_prior is not None:
            mean, var = _update(mean, var, 1, skill_prior[0], skill_prior[1])
        if i == 0 and siblings is not None and prior_level == 1 and deepest >= 1:
            for s in siblings:
                n, total, _, _ = _stats(s)
                if n > 0:
                    mean, var = _update(mean, var, 1, total / n, spread[1] + NOISE_VAR / n)
                    used += n
            continue
        if v is None:
            continue
        n, total, _, _ = _stats(v)
        if i < deepest:
            # Deeper levels are subsets: a level without a row has no samples.
            cn, ctotal, _, _ = _stats(chain[i + 1]) if chain[i + 1] is not None else (0, 0.0, 0, 0)
            mean, var = _update(mean, var, n - cn, total - ctotal, NOISE_VAR + spread[i + 1])
            used += n - cn
        else:
            mean, var = _update(mean, var, n, total, NOISE_VAR)
            used += n
    specific = next((c for c in reversed(chain) if c is not None), None)
    p = Posterior(technique=t, mean=mean, var=var, samples=used)
    if specific is not None:
        p.tries, p.timed, p.successes = specific.tries, specific.timed, specific.successes
        p.p_ok = _p_ok(chain)
        p.context = specific.context + (f" on {specific.arch}" if specific.arch else "")
        p.direct_mean = specific.mean_log_gain
    return p
