"""Next techniques to try on a task: a Bayesian bandit over technique values.

Each candidate technique has a Normal posterior on its log-speedup in the
task's context (``skillbase.retrievers.values``: measured steps of the reasoning graph,
shrunk across task class, family and everything, with the skills that apply as
the cold-start prior). The attempts already made on this task are short-term
memory:

- a technique in the current best candidate is already applied: not suggested;
- one whose last try on this task failed or came out slower is not suggested
  again, unless the evidence says retry: it pays well elsewhere and, this
  task's failures counted, still usually ends correct (a bug in that
  candidate, not a bad idea) — at most ``RETRY_MAX`` failures per task;
- the task's own measured steps update the posterior as direct evidence;
- a technique no skill is written for the task's family, never measured on
  that family nor tried on this task, is not a candidate at all.

The default ranking rule is expected improvement: a technique is applied
to the best candidate and kept only if it is faster, and once kept it cannot
pay again on this task, so each try is worth a * p_ok * E[max(0, g)] with g the
log-gain one try would measure (posterior plus step noise) and a the chance
the technique pays on this task at all (``values.applicability``: the share
of the family's measured tasks it made faster, each task counted once).
Without a, one large gain measured on the one kernel that had the structure
for it outranks a technique that paid on every other task of the family. Uncertainty still
earns its option value (a wide posterior can pay a lot and costs at most one
step), without the within-task exploration a repeated-arm bandit needs.
Thompson sampling (draw a log-gain from each posterior, scale by the chance
an attempt ends correct, sort) and Bayes-UCB (mean plus ``sqrt(2 ln t)``
standard deviations) are available as ``rule``. Deterministic for a given
seed (and, without one, for a given task and number of attempts).
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field

from skillbase.retrievers.gate import GateResult
from skillbase.retrievers.values import NOISE_VAR, Applicability, Posterior

from skillbase.models import Attempt, Suggestion

RULES = ("ei", "thompson", "ucb")
NOT_A_SPEEDUP = {"roofline-stop", "masking"}  # stopping and correctness, not steps that make a kernel faster
SLOWER = 0.98  # a step this much slower (or worse) counts as a failure of the idea
RETRY_MIN_GAIN = math.log(1.15)
RETRY_MIN_P_OK = 0.5  # chance a try is correct, this task's failures counted
RETRY_MAX = 2  # failures on one task after which a technique is dropped for it


@dataclass
class TaskMemory:
    """What the attempts on this task say, per technique."""

    applied: set[str] = field(default_factory=set)  # in the current best candidate
    best: Attempt | None = None
    gains: dict[str, list[float]] = field(default_factory=dict)  # measured log-gains of steps that applied it
    tries: dict[str, int] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)  # verdicts of failed steps
    last: dict[str, str] = field(default_factory=dict)  # outcome of the latest step: ok | slower | <verdict>


def task_memory(attempts: list[Attempt]) -> TaskMemory:
    """Read a task's attempts (any order) into per-technique outcomes."""
    mem = TaskMemory()
    by_id = {a.id: a for a in attempts}
    ordered = sorted(attempts, key=lambda a: a.created_at)
    correct = [a for a in ordered if a.verdict == "correct" and a.median_ms]
    if correct:
        mem.best = min(correct, key=lambda a: a.median_ms)
        mem.applied = set(mem.best.techniques)
    elif ordered:
        # Nothing correct yet: the next candidate is a fix of the latest one, which has what it applied.
        mem.applied = set(ordered[-1].techniques)
    for a in ordered:
        parent = by_id.get(a.parent_id) if a.parent_id else None
        step = [t for t in a.techniques if not parent or t not in parent.techniques] or list(a.techniques)
        if parent is None and not a.parent_id:
            continue  # a root attempt applies nothing relative to anything
        gain = None
        if (
            a.verdict == "correct"
            and parent is not None
            and parent.verdict == "correct"
            and parent.median_ms
            and a.median_ms
            and parent.hardware == a.hardware
        ):
            gain = parent.median_ms / a.median_ms
        for t in step:
            mem.tries[t] = mem.tries.get(t, 0) + 1
            if a.verdict != "correct":
                mem.failures.setdefault(t, []).append(a.verdict)
                mem.last[t] = a.verdict
            elif gain is not None:
                mem.gains.setdefault(t, []).append(math.log(gain))
                mem.last[t] = "ok" if gain >= SLOWER else "slower"
    return mem


def _seed(task_name: str, n_attempts: int, seed: int | None) -> int:
    if seed is not None:
        return seed
    return int(hashlib.sha256(f"{task_name}\x00{n_attempts}".encode()).hexdigest()[:12], 16)


def rank(
    beliefs: dict[str, Posterior],
    mem: TaskMemory,
    *,
    k: int,
    seed: int,
    rule: str = "ei",
    exclude: set[str] = frozenset(),
    applies: Applicability | None = None,
) -> list[tuple[str, float, Posterior, str]]:
    """(technique, score, task-updated posterior, note) for the ``k`` best
    candidates under ``rule``; ``applies`` (None: every technique alike) scales
    each try's value by the chance the technique pays on this task."""
    rng = random.Random(seed)
    t_total = sum(mem.tries.values()) + 1
    rows = []
    for name in sorted(beliefs):
        if name in NOT_A_SPEEDUP or name in exclude:
            continue
        b = beliefs[name]
        if not b.in_scope and not b.samples and name not in mem.tries:
            continue  # written for other kinds of kernels and never measured on this kind
        verdict, note = _short_term(name, b, mem)
        if verdict == "skip":
            continue
        post = _with_task_evidence(b, mem, name)
        # Tried on this task already: what that try measured is direct evidence, in the posterior.
        a = 1.0 if applies is None or name in mem.tries else applies.rate(name)
        if rule == "ei":
            score = a * post.p_ok * expected_improvement(post.mean, math.sqrt(post.var + NOISE_VAR))
        elif rule == "ucb":
            score = a * (post.p_ok * post.mean + math.sqrt(2 * math.log(t_total + 1)) * post.std)
        elif rule == "thompson":
            score = a * post.p_ok * rng.gauss(post.mean, post.std)
        else:
            raise ValueError(f"unknown rule {rule!r}; one of {RULES}")
        rows.append((name, score, post, note))
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows[:k]


def expected_improvement(mean: float, sd: float) -> float:
    """E[max(0, g)] for a log-gain g ~ Normal(mean, sd): what one try adds
    when a slower result is simply not kept."""
    if sd <= 0:
        return max(mean, 0.0)
    z = mean / sd
    return mean * 0.5 * (1.0 + math.erf(z / math.sqrt(2))) + sd * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _short_term(name: str, b: Posterior, mem: TaskMemory) -> tuple[str, str]:
    """('skip' | 'ok', note) from what this task's attempts say about a technique."""
    if name in mem.applied:
        return "skip", "already in the best candidate"
    last = mem.last.get(name)
    if last is None or last == "ok":
        return "ok", ""
    if last == "slower":
        return "skip", "was slower on this task"
    fails = mem.failures.get(name, [])
    # Counting this task's failed tries against its record elsewhere: a
    # technique that usually works and pays well failed here by a bug in
    # that candidate, not because the idea does not fit. Bounded: after
    # RETRY_MAX failures here it is not suggested again.
    p_ok_here = (b.timed + 1) / (b.tries + len(fails) + 2)
    if len(fails) <= RETRY_MAX and b.mean >= RETRY_MIN_GAIN and p_ok_here >= RETRY_MIN_P_OK:
        tries = "the one try" if len(fails) == 1 else f"{len(fails)} tries"
        return "ok", (
            f"retry: {tries} here ended {', '.join(fails)}, but it gained x{b.expected_gain:.2f} "
            f"elsewhere and {b.p_ok:.0%} of its tries there were correct"
        )
    return "skip", f"just tried and {last}"


def _with_task_evidence(b: Posterior, mem: TaskMemory, name: str) -> Posterior:
    gains = mem.gains.get(name, [])
    fails = len(mem.failures.get(name, []))
    mean, var = b.mean, b.var
    if gains:
        precision = 1.0 / var + len(gains) / NOISE_VAR
        mean = (mean / var + sum(gains) / NOISE_VAR) / precision
        var = 1.0 / precision
    tries, timed = b.tries + len(gains) + fails, b.timed + len(gains)
    # This task's tries update the context's rate (a Beta prior of two pseudo-tries centred on it).
    p_ok = (len(gains) + 2 * b.p_ok) / (len(gains) + fails + 2)
    return Posterior(
        technique=name,
        mean=mean,
        var=var,
        tries=tries,
        timed=timed,
        successes=b.successes + sum(1 for g in gains if g > math.log(1.02)),
        p_ok=p_ok,
        context=b.context,
        samples=b.samples + len(gains),
        direct_mean=b.direct_mean,
    )


def suggestions(
    ranked: list[tuple[str, float, Posterior, str]],
    *,
    titles: dict[str, str],
    skills_for: dict[str, list[str]],
    gates: dict[str, GateResult],
    mem: TaskMemory,
    rule: str,
    applies: Applicability | None = None,
) -> list[Suggestion]:
    """Suggestion records with their evidence and a one-line why."""
    out = []
    for name, score, post, note in ranked:
        applicable = [s for s in skills_for.get(name, []) if s in gates and gates[s].verdict != "filter"]
        applicable.sort(key=lambda s: -gates[s].factor)
        why = _why(name, post, note, applicable, gates, mem, rule, applies)
        out.append(
            Suggestion(
                technique=name,
                title=titles.get(name, name),
                score=round(score, 5),
                expected_gain=round(post.expected_gain, 4),
                uncertainty=round(post.std, 4),
                tries=post.tries,
                successes=post.successes,
                why=why,
                skills=applicable[:3],
            )
        )
    return out


def _why(
    name, post: Posterior, note, skills, gates, mem: TaskMemory, rule: str, applies: Applicability | None = None
) -> str:
    bits = []
    if post.timed:
        bits.append(
            f"x{post.expected_gain:.2f} expected from {post.samples} measured steps "
            f"({post.timed} in {post.context}, {post.successes} faster)"
        )
    elif skills:
        bits.append(f"no measurements yet; skill {skills[0]} applies ({gates[skills[0]].line()})")
    else:
        bits.append("no measurements yet")
    if applies is not None and applies.line(name):
        bits.append(applies.line(name))
    if post.std > 0.2:
        bits.append(
            {
                "thompson": f"uncertain (sd {post.std:.2f} in log-gain), worth exploring",
                "ucb": f"uncertain (sd {post.std:.2f}), optimistic bound",
            }.get(rule, f"uncertain (sd {post.std:.2f}): a try may pay more or nothing")
        )
    if mem.tries.get(name):
        gains = mem.gains.get(name, [])
        bits.append(f"tried {mem.tries[name]}x on this task" + (f", best x{math.exp(max(gains)):.2f}" if gains else ""))
    if note:
        bits.append(note)
    return "; ".join(bits) + "."


def default_seed(task_name: str, attempts: list[Attempt], seed: int | None) -> int:
    """The seed a suggestion uses: the caller's, or one fixed by the task and
    how many attempts it has."""
    return _seed(task_name, len(attempts), seed)
