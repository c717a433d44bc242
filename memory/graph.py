"""The reasoning graph: which techniques pay off where, and how lineages went.

A networkx MultiDiGraph derived from the ledger by applying its change log in
order, and snapshotted to JSON with the ledger seq it reflects. Node ids carry
their kind as a prefix:

- ``task:<name>``, ``class:<family:dtype:regime>``, ``family:<family>``
- ``bottleneck:<b>``, ``state:<class>|<b>`` (a bottleneck state of a task class),
  ``fstate:<family>|<b>``, ``all``
- ``tech:<name>``, ``skill:<name>``, ``att:<id>``, ``exp:<id>``, ``hw:<arch>``

Edges (the multigraph key names the relation): ``attempt-of`` (attempt ->
task), ``derived-from`` (parent -> child, with the step's techniques and the
measured gain = parent median / child median when both are correct and timed on
the same hardware), ``transition`` (technique -> technique that followed it in a
lineage, with running statistics), ``value|<arch>`` (context -> technique, with
running statistics: tries, successes (gain > 1.02), Welford mean and variance
of log-gain, last seen), ``implements`` (skill -> technique), ``teaches``
(experience -> technique), ``before``/``after`` (experience -> attempt),
``similar-to`` (task -> task of the same family), ``instance-of`` (task ->
class), ``in-family`` (class -> family), ``measured-on`` (task -> hardware),
``sub-family-of`` (family -> the broader family it belongs to: conv_transpose
-> conv), ``has-family`` (task -> each further family its traced forward
shows, with its rank: the group norm after a convolution), ``in-state`` (attempt ->
``pstate:<state>``, the discretised bottleneck state its profile showed). Steps from a
parent whose profile is known also count in ``pstate:<state>`` and
``pfstate:<family>|<state>`` contexts: what each technique was worth in that state.

A step's techniques are those the child claims beyond its parent's (all of the
child's when it claims nothing new); the context of a value sample is the
parent's task class and bottleneck: the state the technique was applied in.
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field
from skillbase.memory.records import Change

from skillbase.models import family_lineage

SNAPSHOT_FORMAT = 1
SUCCESS_GAIN = 1.02  # a step "succeeds" when it is at least 2% faster
TOP_PER_CLASS = 16
SIMILAR_PER_FAMILY = 32
PRIOR_VAR = 0.25  # prior variance of a log-gain: a standard deviation of 0.5 (x1.65)
UNTIMED_SCORE = -1.0  # tried, never measured faster or slower: only failures
VALUE_TABLES_MAX = 4096  # technique_values answers kept (dropped together when full)


class TechniqueValue(BaseModel):
    """What applying a technique has been worth in one context. Frozen: the graph hands the same
    instances to every caller until the context's values change."""

    model_config = ConfigDict(frozen=True)

    technique: str
    context: str = Field(description="graph context node, e.g. 'class:softmax:fp32:large' or 'after:online-softmax'")
    arch: str | None = Field(description="architecture, or None when pooled over all")
    tries: int = Field(description="steps that applied it from a correct, timed parent")
    successes: int = Field(description=f"steps at least {SUCCESS_GAIN}x faster than their parent")
    timed: int = Field(description="steps with a measured gain")
    mean_log_gain: float | None = Field(description="mean of ln(parent ms / child ms)")
    var_log_gain: float | None = Field(description="sample variance of the log-gain (None under 2 samples)")
    std_err: float | None = Field(
        description="standard error of mean_log_gain, with one pseudo-sample of the prior variance (0.25)"
    )
    expected_gain: float | None = Field(description="exp(mean_log_gain): geometric-mean speedup")
    success_rate: float = Field(description="(successes + 1) / (tries + 2), Laplace-smoothed")
    last_seen: datetime | None
    score: float = Field(description="mean_log_gain minus one standard error (pessimistic); -1 when never timed")


class LineageStep(BaseModel):
    attempt_id: str
    techniques: list[str]
    gain: float | None = Field(description="speedup over the previous step, same hardware; None if not measurable")
    verdict: str
    speedup_vs_eager: float | None


class Lineage(BaseModel):
    task: str
    signature: str
    attempt_id: str
    speedup_vs_eager: float
    arch: str | None
    steps: list[LineageStep] = Field(description="root first")


class ExperienceRef(BaseModel):
    id: str
    gain: float | None
    family: str | None
    arch: str | None
    created_at: datetime


class TechniqueCoverage(BaseModel):
    """How many of a family's tasks each technique was applied to."""

    family: str
    tasks: int = Field(description="tasks of the family with at least one step from a correct, timed parent")
    tried: dict[str, int] = Field(description="per technique, on how many of those tasks a step applied it")
    improved: dict[str, int] = Field(
        description=f"per technique, on how many of those tasks a step applying it was at least {SUCCESS_GAIN}x faster"
    )


class SkillRef(BaseModel):
    name: str
    status: str
    version: int


# ---------------------------------------------------------------------------
# Running statistics
# ---------------------------------------------------------------------------


def _new_stats() -> dict[str, float]:
    return {"tries": 0, "succ": 0, "n": 0, "mean": 0.0, "m2": 0.0, "last": 0.0}


def _update(stats: dict[str, float], gain: float | None, when: float) -> None:
    stats["tries"] += 1
    stats["last"] = max(stats["last"], when)
    if gain is None:
        return
    stats["succ"] += int(gain > SUCCESS_GAIN)
    x = math.log(gain)
    stats["n"] += 1
    d = x - stats["mean"]
    stats["mean"] += d / stats["n"]
    stats["m2"] += d * (x - stats["mean"])


def _merge(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    n = a["n"] + b["n"]
    out = {
        "tries": a["tries"] + b["tries"],
        "succ": a["succ"] + b["succ"],
        "n": n,
        "last": max(a["last"], b["last"]),
        "mean": 0.0,
        "m2": 0.0,
    }
    if n:
        d = b["mean"] - a["mean"]
        out["mean"] = a["mean"] + d * b["n"] / n
        out["m2"] = a["m2"] + b["m2"] + d * d * a["n"] * b["n"] / n
    return out


def _value(technique: str, context: str, arch: str | None, s: dict[str, float]) -> TechniqueValue:
    n = int(s["n"])
    mean = s["mean"] if n else None
    var = s["m2"] / (n - 1) if n > 1 else None
    # One pseudo-observation of the prior variance keeps a single lucky
    # sample from outranking a well-measured technique.
    se = math.sqrt((s["m2"] + PRIOR_VAR) / n / n) if n else None
    score = mean - se if mean is not None and se is not None else UNTIMED_SCORE
    return TechniqueValue(
        technique=technique,
        context=context,
        arch=arch,
        tries=int(s["tries"]),
        successes=int(s["succ"]),
        timed=n,
        mean_log_gain=mean,
        var_log_gain=var,
        std_err=se,
        expected_gain=math.exp(mean) if mean is not None else None,
        success_rate=(s["succ"] + 1) / (s["tries"] + 2),
        last_seen=datetime.fromtimestamp(s["last"], timezone.utc) if s["last"] else None,
        score=score,
    )


def _epoch(iso: str | None) -> float:
    return datetime.fromisoformat(iso).timestamp() if iso else 0.0


def context_node(task_class: str | None = None, family: str | None = None, bottleneck: str | None = None) -> str:
    """The graph node that holds value statistics for this combination."""
    bn = bottleneck if bottleneck and bottleneck != "unknown" else None
    if task_class and bn:
        return f"state:{task_class}|{bn}"
    if task_class:
        return f"class:{task_class}"
    if family and bn:
        return f"fstate:{family}|{bn}"
    if family:
        return f"family:{family}"
    if bn:
        return f"bottleneck:{bn}"
    return "all"


def state_node(state: str, family: str | None = None) -> str:
    """The graph node holding value statistics of steps taken from kernels in profile state ``state``."""
    return f"pfstate:{family}|{state}" if family else f"pstate:{state}"


def _state_contexts(family: str | None, state: str | None) -> list[str]:
    if not state:
        return []
    return [state_node(state)] + ([state_node(state, family)] if family else [])


def _contexts(signature: str | None, family: str | None, bottleneck: str | None) -> list[str]:
    out = ["all"]
    if family:
        out.append(context_node(family=family))
    if signature:
        out.append(context_node(task_class=signature))
    if bottleneck and bottleneck != "unknown":
        out.append(context_node(bottleneck=bottleneck))
        if family:
            out.append(context_node(family=family, bottleneck=bottleneck))
        if signature:
            out.append(context_node(task_class=signature, bottleneck=bottleneck))
    return out


# ---------------------------------------------------------------------------
# The graph
# ---------------------------------------------------------------------------


class ReasoningGraph:
    """The graph and the ledger seq it reflects. Thread-safe.

    Build with ``ReasoningGraph(store_id)`` or ``ReasoningGraph.load(path,
    store_id)``, then ``catch_up(ledger)`` before answering queries (the
    Store does both).
    """

    def __init__(self, store_id: str):
        self.store_id = store_id
        self.g = nx.MultiDiGraph()
        self.seq = 0
        self.snapshot_seq = 0
        self._lock = threading.RLock()
        # Lessons per (technique, family) and per (technique, None), as
        # (-gain, -created, node): built on the first lookup, kept up to date
        # by _put_experience, sorted again only where something was added.
        self._lessons: dict[tuple[str, str | None], list[tuple[float, float, str]]] | None = None
        self._lessons_unsorted: set[tuple[str, str | None]] = set()
        # Per family, the techniques each task stepped and those that made it faster: (seq it
        # reflects, {task: (tried, improved)}), built on lookup.
        self._coverage: dict[str, tuple[int, dict[str, tuple[frozenset[str], frozenset[str]]]]] = {}
        # technique_values answers, per (context, arch, min_tries), until a value edge changes: a recall
        # asks for some 30 tables, and lessons and attempts without techniques change none of them.
        self._values: dict[tuple[str, str | None, int], list[TechniqueValue]] = {}
        # Change counters for answers derived outside the graph: technique values (any value edge),
        # and attempts or tasks (lineages, coverage, which attempts exist).
        self.values_version = 0
        self.attempts_version = 0

    # -- building ------------------------------------------------------------

    def catch_up(self, ledger, *, batch: int = 5000) -> int:
        """Apply the ledger's changes after ``self.seq``; returns how many."""
        applied = 0
        with self._lock, _collector_paused():
            while True:
                changes = ledger.changes_after(self.seq, limit=batch)
                if changes:
                    self.apply(ledger, changes)
                    applied += len(changes)
                if len(changes) < batch:  # the log's end: no need to ask again
                    return applied

    def apply(self, ledger, changes: list[Change]) -> None:
        """Apply changes (in seq order), reading their records from the ledger."""
        ids: dict[str, list[str]] = {}
        for c in changes:
            ids.setdefault(c.kind, []).append(c.item_id)
        rows: dict[tuple[str, str], Any] = {}
        for r in ledger.attempt_rows(ids.get("attempt", [])):
            rows["attempt", r["id"]] = r
        for r in ledger.experience_rows(ids.get("experience", [])):
            rows["experience", r["id"]] = r
        for r in ledger.feedback_rows(ids.get("feedback", [])):
            rows["feedback", r["id"]] = r
        for r in ledger.profile_rows(ids.get("profile", [])) if ids.get("profile") else []:
            rows["profile", r["id"]] = r
        for name in dict.fromkeys(ids.get("skill", [])):
            rows["skill", name] = ledger.get_skill(name)
        for name in dict.fromkeys(ids.get("technique", [])):
            rows["technique", name] = ledger.get_technique(name)
        for name in dict.fromkeys(ids.get("task", [])):
            found = ledger.list_task_records([name])
            if found:
                rows["task", name] = found[0]
        with self._lock:
            for c in changes:
                row = rows.get((c.kind, c.item_id))
                if row is not None and c.op == "put":
                    getattr(self, f"_put_{c.kind}")(row)
                self.seq = c.seq

    def _node(self, node: str, **attrs: Any) -> dict[str, Any]:
        """The node's attributes, creating it or filling the ones it lacks (a
        context node made by a lesson gains its task-class fields later)."""
        if node not in self.g:
            self.g.add_node(node, **attrs)
            return self.g.nodes[node]
        data = self.g.nodes[node]
        for k, v in attrs.items():
            data.setdefault(k, v)
        return data

    def _edge(self, u: str, v: str, key: str, **attrs: Any) -> dict[str, Any]:
        if not self.g.has_edge(u, v, key):
            self.g.add_edge(u, v, key=key, **attrs)
        return self.g.edges[u, v, key]

    def _count_value(self, ctx: str, technique: str, arch: str, gain: float | None, when: float) -> None:
        """One application of ``technique`` in context ``ctx`` on ``arch``, with its gain (None: failed or untimed)."""
        stats = self._edge(ctx, f"tech:{technique}", f"value|{arch}", kind="value", arch=arch, stats=_new_stats())
        _update(stats["stats"], gain, when)
        self._values.clear()
        self.values_version += 1

    def _tech(self, name: str) -> str:
        node = f"tech:{name}"
        self._node(node, kind="technique")
        return node

    def _put_technique(self, t) -> None:
        attrs = self._node(self._tech(t.name))
        attrs.update(title=t.title, category=t.category)

    def _put_task(self, rec) -> None:
        """A task's traced families beyond its primary one, as ``has-family`` edges."""
        self.attempts_version += 1
        info = rec.info
        if info is None or len(info.families) < 2:
            return
        node = self._task(rec.name, rec.signature, rec.family, rec.dtype, rec.regime)
        for _, v, key in list(self.g.out_edges(node, keys=True)):
            if key == "has-family":
                self.g.remove_edge(node, v, key)
        for rank, family in enumerate(info.families[1:], 1):
            self._family(family)
            self._edge(node, f"family:{family}", "has-family", rank=rank)

    def _family(self, family: str) -> dict[str, Any]:
        """The family's node, linked to the broader families it belongs to."""
        node = f"family:{family}"
        new = node not in self.g
        attrs = self._node(node, kind="family", recent=[])
        if new:
            for parent in family_lineage(family)[1:]:
                self._node(f"family:{parent}", kind="family", recent=[])
                self._edge(node, f"family:{parent}", "sub-family-of")
        return attrs

    def _task(self, name: str, signature: str, family: str, dtype: str, regime: str) -> str:
        node = f"task:{name}"
        new = node not in self.g
        if new:
            self.g.add_node(node, kind="task", signature=signature, family=family, best=None)
        # A task seen at another shape regime or dtype joins that class too.
        cls = f"class:{signature}"
        self._node(cls, kind="class", family=family, dtype=dtype, regime=regime, top=[])
        fam = f"family:{family}"
        recent = self._family(family)["recent"]
        self._edge(node, cls, "instance-of")
        self._edge(cls, fam, "in-family")
        if new:
            for other in recent:
                same = self.g.nodes[other]["signature"] == signature
                self._edge(node, other, "similar-to", weight=1.0 if same else 0.5)
                self._edge(other, node, "similar-to", weight=1.0 if same else 0.5)
            recent.append(node)
            del recent[:-SIMILAR_PER_FAMILY]
        return node

    def _put_attempt(self, r: dict[str, Any]) -> None:
        node = f"att:{r['id']}"
        if node in self.g:
            return
        self.attempts_version += 1
        task = self._task(r["task"], r["signature"], r["family"], r["dtype"], r["regime"])
        when = _epoch(r["created_at"])
        parent = f"att:{r['parent_id']}" if r["parent_id"] else None
        parent_attrs = self.g.nodes[parent] if parent in self.g else None
        step = list(r["techniques"])
        if parent_attrs is not None:
            new = [t for t in step if t not in parent_attrs["techs"]]
            step = new or step
        self.g.add_node(
            node,
            kind="attempt",
            task=r["task"],
            sig=r["signature"],
            verdict=r["verdict"],
            ms=r["median_ms"],
            speedup=r["speedup"],
            arch=r["arch"],
            hw=r["hardware"],
            bn=r["bottleneck"],
            techs=list(r["techniques"]),
            step=step,
            created=when,
            parent=parent if parent_attrs is not None else None,
        )
        self.g.add_edge(node, task, key="attempt-of")
        for t in step:
            self._tech(t)
        if r["arch"]:
            hw = self._node(f"hw:{r['arch']}", kind="hardware", names=[])
            if r["hardware"] and r["hardware"] not in hw["names"]:
                hw["names"].append(r["hardware"])
            self._edge(task, f"hw:{r['arch']}", "measured-on")
        if parent_attrs is not None:
            self._derive(parent, node, step, when)
        self._rank(node, task)

    def _derive(self, parent: str, child: str, step: list[str], when: float) -> None:
        p, c = self.g.nodes[parent], self.g.nodes[child]
        timed_parent = p["verdict"] == "correct" and (p["ms"] or 0) > 0
        gain = None
        if timed_parent and c["verdict"] == "correct" and (c["ms"] or 0) > 0 and p["hw"] == c["hw"]:
            gain = p["ms"] / c["ms"]
        self.g.add_edge(parent, child, key="derived-from", techniques=step, gain=gain)
        # A correct child without a comparable timing says nothing about value.
        if not timed_parent or (c["verdict"] == "correct" and gain is None):
            return
        arch = c["arch"] or "any"
        family = self.g.nodes[f"class:{p['sig']}"]["family"]
        for ctx in _contexts(p["sig"], family, p["bn"]) + _state_contexts(family, p.get("ps")):
            self._node(ctx, kind=ctx.split(":", 1)[0])
            for t in step:
                self._count_value(ctx, t, arch, gain, when)
        for a in p["step"]:
            for b in step:
                if a != b:
                    stats = self._edge(
                        self._tech(a), self._tech(b), "transition", kind="transition", stats=_new_stats()
                    )
                    _update(stats["stats"], gain, when)

    def _rank(self, node: str, task: str) -> None:
        a = self.g.nodes[node]
        if a["verdict"] != "correct" or a["speedup"] is None:
            return
        t = self.g.nodes[task]
        if t["best"] is None or a["speedup"] > self.g.nodes[t["best"]]["speedup"]:
            t["best"] = node
        top = self.g.nodes[f"class:{a['sig']}"]["top"]
        top.append([a["speedup"], node])
        top.sort(key=lambda x: -x[0])
        del top[TOP_PER_CLASS:]

    def _put_experience(self, r: dict[str, Any]) -> None:
        node = f"exp:{r['id']}"
        if node in self.g:
            return
        when = _epoch(r["created_at"])
        self.g.add_node(
            node,
            kind="experience",
            gain=r["gain"],
            family=r["family"],
            sig=r["signature"],
            arch=r["arch"],
            created=when,
        )
        for t in r["techniques"]:
            self.g.add_edge(node, self._tech(t), key="teaches")
            if self._lessons is not None:
                self._index_lesson(t, node, self.g.nodes[node])
        for rel in ("before", "after"):
            if r[rel] and f"att:{r[rel]}" in self.g:
                self.g.add_edge(node, f"att:{r[rel]}", key=rel)
        if r["task"] and f"task:{r['task']}" in self.g:
            self.g.add_edge(node, f"task:{r['task']}", key="about")
        # A lesson without an after-attempt is the only record of its gain;
        # with one, the attempt's derived-from edge already counted it.
        if r["gain"] and r["techniques"] and not r["after"]:
            arch = r["arch"] or "any"
            for ctx in _contexts(r["signature"], r["family"], r["bottleneck"]):
                self._node(ctx, kind=ctx.split(":", 1)[0])
                for t in r["techniques"]:
                    self._count_value(ctx, t, arch, r["gain"], when)

    def _put_profile(self, r: dict[str, Any]) -> None:
        """An attempt's profile state: the attempt joins its state node, and the steps already taken
        from it count in the state's contexts (a profile may arrive after its children)."""
        node, state = f"att:{r['attempt_id']}", r["state"]
        if node not in self.g or not state or self.g.nodes[node].get("ps"):
            return  # the first profile of an attempt fixes its state; a re-profile must not count steps twice
        a = self.g.nodes[node]
        a["ps"] = state
        self._node(f"pstate:{state}", kind="pstate")
        self.g.add_edge(node, f"pstate:{state}", key="in-state")
        if a["verdict"] != "correct" or not (a["ms"] or 0) > 0:
            return
        family = self.g.nodes[f"class:{a['sig']}"]["family"]
        for _, child, key, data in list(self.g.out_edges(node, keys=True, data=True)):
            if key != "derived-from":
                continue
            c = self.g.nodes[child]
            if c["verdict"] == "correct" and data.get("gain") is None:
                continue
            arch = c["arch"] or "any"
            for ctx in _state_contexts(family, state):
                self._node(ctx, kind=ctx.split(":", 1)[0])
                for t in data["techniques"]:
                    self._count_value(ctx, t, arch, data.get("gain"), c["created"])

    def _put_skill(self, skill) -> None:
        node = f"skill:{skill.name}"
        attrs = self._node(node, kind="skill")
        attrs.update(status=skill.status, version=skill.version)
        for _, v, key in list(self.g.out_edges(node, keys=True)):
            if key == "implements":
                self.g.remove_edge(node, v, key)
        for t in skill.techniques:
            self.g.add_edge(node, self._tech(t), key="implements")

    def _put_feedback(self, r: dict[str, Any]) -> None:
        prefix = {"skill": "skill", "experience": "exp", "attempt": "att", "technique": "tech"}[r["item_kind"]]
        node = f"{prefix}:{r['item_id']}"
        if node not in self.g:
            return
        attrs = self.g.nodes[node]
        attrs["fb_n"] = attrs.get("fb_n", 0) + 1
        attrs["fb_used"] = attrs.get("fb_used", 0) + int(bool(r["used"]))
        attrs["fb_improved"] = attrs.get("fb_improved", 0) + int(bool(r["improved"]))

    # -- queries -------------------------------------------------------------

    def technique_values(
        self,
        task_class: str | None = None,
        family: str | None = None,
        bottleneck: str | None = None,
        arch: str | None = None,
        *,
        min_tries: int = 1,
        profile_state: str | None = None,
    ) -> list[TechniqueValue]:
        """Techniques ranked by measured value in the most specific context
        given (task class and bottleneck > task class > family and bottleneck >
        family > bottleneck > everything), on ``arch`` or pooled over all
        architectures. Best first by ``score`` (mean log-gain minus one
        standard error)."""
        ctx = state_node(profile_state, family) if profile_state else context_node(task_class, family, bottleneck)
        pooled: dict[str, dict[str, float]] = {}
        key = (ctx, arch, min_tries)
        with self._lock:
            known = self._values.get(key)
            if known is not None:
                return list(known)
            if ctx not in self.g:
                return []
            for _, v, data in self.g.out_edges(ctx, data=True):
                if data.get("kind") != "value" or (arch is not None and data["arch"] != arch):
                    continue
                t = v.split(":", 1)[1]
                pooled[t] = _merge(pooled[t], data["stats"]) if t in pooled else dict(data["stats"])
            values = sorted(
                (_value(t, ctx, arch, s) for t, s in pooled.items() if s["tries"] >= min_tries),
                key=lambda v: (-v.score, -v.tries, v.technique),
            )
            if len(self._values) >= VALUE_TABLES_MAX:
                self._values.clear()
            self._values[key] = values
        return list(values)

    def transitions_from(self, technique: str, *, min_tries: int = 1) -> list[TechniqueValue]:
        """Techniques applied right after ``technique`` in lineages, with how
        those next steps paid, best first."""
        node = f"tech:{technique}"
        with self._lock:
            if node not in self.g:
                return []
            out = [
                _value(v.split(":", 1)[1], f"after:{technique}", None, data["stats"])
                for _, v, key, data in self.g.out_edges(node, keys=True, data=True)
                if key == "transition" and data["stats"]["tries"] >= min_tries
            ]
        return sorted(out, key=lambda v: (-v.score, -v.tries, v.technique))

    def best_lineages(
        self, *, task_signature: str | None = None, family: str | None = None, arch: str | None = None, k: int = 5
    ) -> list[Lineage]:
        """The best correct attempts (by speedup vs eager) on tasks of a class
        or family, one per task, each with its path from the root attempt."""
        with self._lock:
            if task_signature:
                classes = [f"class:{task_signature}"]
            elif family:
                fam = f"family:{family}"
                classes = (
                    [u for u, _, key in self.g.in_edges(fam, keys=True) if key == "in-family"] if fam in self.g else []
                )
            else:
                classes = [n for n, d in self.g.nodes(data=True) if d.get("kind") == "class"]
            cands = []
            for cls in classes:
                if cls in self.g:
                    cands += [
                        (s, n) for s, n in self.g.nodes[cls]["top"] if arch is None or self.g.nodes[n]["arch"] == arch
                    ]
            cands.sort(key=lambda x: -x[0])
            seen, out = set(), []
            for speedup, node in cands:
                a = self.g.nodes[node]
                if a["task"] in seen:
                    continue
                seen.add(a["task"])
                out.append(
                    Lineage(
                        task=a["task"],
                        signature=a["sig"],
                        attempt_id=node[4:],
                        speedup_vs_eager=speedup,
                        arch=a["arch"],
                        steps=self._path(node),
                    )
                )
                if len(out) == k:
                    break
        return out

    def technique_coverage(self, family: str, *, exclude_task: str | None = None) -> TechniqueCoverage:
        """On how many of ``family``'s tasks (primary family; ``exclude_task`` left out) each technique
        was applied in a step from a correct, timed parent: the steps ``technique_values`` counts as
        tries, counted once per task however often a task repeated them."""
        with self._lock:
            cached = self._coverage.get(family)
            if cached is None or cached[0] != self.seq:
                cached = (self.seq, self._stepped_per_task(family))
                self._coverage[family] = cached
            per_task = cached[1]
        tried: dict[str, int] = {}
        improved: dict[str, int] = {}
        tasks = 0
        for task, (techs, faster) in per_task.items():
            if task == exclude_task:
                continue
            tasks += 1
            for t in techs:
                tried[t] = tried.get(t, 0) + 1
            for t in faster:
                improved[t] = improved.get(t, 0) + 1
        return TechniqueCoverage(family=family, tasks=tasks, tried=tried, improved=improved)

    def _stepped_per_task(self, family: str) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
        """{task: (techniques its steps applied, those of them that made it faster)}."""
        fam = f"family:{family}"
        if fam not in self.g:
            return {}
        classes = [u for u, _, key in self.g.in_edges(fam, keys=True) if key == "in-family"]
        tasks = {u for cls in classes for u, _, key in self.g.in_edges(cls, keys=True) if key == "instance-of"}
        out = {}
        for task in tasks:
            stepped: set[str] = set()
            faster: set[str] = set()
            for node, _, key in self.g.in_edges(task, keys=True):
                if key != "attempt-of":
                    continue
                a = self.g.nodes[node]
                p = self.g.nodes[a["parent"]] if a.get("parent") else None
                if p is None or p["verdict"] != "correct" or not (p["ms"] or 0) > 0:
                    continue
                gain = self.g.edges[a["parent"], node, "derived-from"]["gain"]
                if a["verdict"] == "correct" and gain is None:
                    continue  # not comparable (other hardware): not a try, as in _derive
                stepped.update(a["step"])
                if gain is not None and gain > SUCCESS_GAIN:
                    faster.update(a["step"])
            if stepped:
                out[task[5:]] = (frozenset(stepped), frozenset(faster))
        return out

    def _path(self, node: str) -> list[LineageStep]:
        chain = [node]
        while self.g.nodes[chain[-1]]["parent"] and len(chain) < 10_000:
            chain.append(self.g.nodes[chain[-1]]["parent"])
        steps = []
        for i, n in enumerate(reversed(chain)):
            a = self.g.nodes[n]
            gain = None
            if i > 0:
                gain = self.g.edges[a["parent"], n, "derived-from"]["gain"]
            steps.append(
                LineageStep(
                    attempt_id=n[4:],
                    techniques=a["step"],
                    gain=gain,
                    verdict=a["verdict"],
                    speedup_vs_eager=a["speedup"],
                )
            )
        return steps

    def experiences_for_technique(
        self, technique: str, *, k: int = 10, family: str | None = None
    ) -> list[ExperienceRef]:
        """Experiences that teach ``technique`` (in ``family`` when given),
        largest measured gain first, then newest."""
        key = (technique, family)
        with self._lock:
            if self._lessons is None:
                self._lessons = {}
                for t in [n for n in self.g if n.startswith("tech:")]:
                    for u, _, kind in self.g.in_edges(t, keys=True):
                        if kind == "teaches":
                            self._index_lesson(t[5:], u, self.g.nodes[u])
            entries = self._lessons.get(key, [])
            if key in self._lessons_unsorted:
                entries.sort()
                self._lessons_unsorted.discard(key)
            top = [(node, self.g.nodes[node]) for _, _, node in entries[:k]]
        return [
            ExperienceRef(
                id=node[4:],
                gain=e["gain"],
                family=e["family"],
                arch=e["arch"],
                created_at=datetime.fromtimestamp(e["created"], timezone.utc),
            )
            for node, e in top
        ]

    def _index_lesson(self, technique: str, node: str, e: dict[str, Any]) -> None:
        entry = (-(e["gain"] or 0.0), -e["created"], node)
        for key in {(technique, None), (technique, e["family"])}:
            self._lessons.setdefault(key, []).append(entry)
            self._lessons_unsorted.add(key)

    def skills_for_technique(self, technique: str) -> list[SkillRef]:
        """Skills that implement ``technique``: approved first, then drafts, then deprecated."""
        node = f"tech:{technique}"
        order = {"approved": 0, "draft": 1, "deprecated": 2}
        with self._lock:
            if node not in self.g:
                return []
            skills = [
                SkillRef(name=u[6:], status=self.g.nodes[u]["status"], version=self.g.nodes[u]["version"])
                for u, _, key in self.g.in_edges(node, keys=True)
                if key == "implements"
            ]
        return sorted(skills, key=lambda s: (order.get(s.status, 3), s.name))

    def similar_tasks(self, task: str, *, k: int = 20) -> list[tuple[str, float]]:
        """Tasks of the same family (weight 1.0 for the same class, 0.5
        otherwise), most similar first."""
        node = f"task:{task}"
        with self._lock:
            if node not in self.g:
                return []
            out = [
                (v[5:], d["weight"])
                for _, v, key, d in self.g.out_edges(node, keys=True, data=True)
                if key == "similar-to"
            ]
        return sorted(out, key=lambda x: (-x[1], x[0]))[:k]

    def feedback(self, kind: str, item_id: str) -> dict[str, int]:
        """Feedback counters of an item: times recalled with feedback, used, improved."""
        prefix = {"skill": "skill", "experience": "exp", "attempt": "att", "technique": "tech"}[kind]
        with self._lock:
            attrs = self.g.nodes.get(f"{prefix}:{item_id}", {})
            return {k: attrs.get(f"fb_{k}", 0) for k in ("n", "used", "improved")}

    def ids(self, kind: str) -> list[str]:
        """Ids (without their prefix) of the nodes of one kind, e.g. 'task'."""
        with self._lock:
            return [n.split(":", 1)[1] for n, k in self.g.nodes(data="kind") if k == kind]

    def counts(self) -> dict[str, int]:
        """Nodes per kind and edges per relation, e.g. {'attempt': 2000, 'edge:derived-from': 1500}."""
        out: dict[str, int] = {}
        with self._lock:
            for _, kind in self.g.nodes(data="kind"):
                out[kind] = out.get(kind, 0) + 1
            for _, _, key in self.g.edges(keys=True):
                rel = "edge:" + key.split("|", 1)[0]
                out[rel] = out.get(rel, 0) + 1
        return out

    # -- snapshots -----------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write a snapshot atomically (temp file + rename)."""
        with self._lock:
            data = {
                "format": SNAPSHOT_FORMAT,
                "store_id": self.store_id,
                "seq": self.seq,
                "nodes": [[n, d] for n, d in self.g.nodes(data=True)],
                "edges": [[u, v, k, d] for u, v, k, d in self.g.edges(keys=True, data=True)],
            }
            seq = self.seq
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.snapshot_seq = seq

    @classmethod
    def load(cls, path: Path, store_id: str, max_seq: int) -> "ReasoningGraph":
        """The snapshot at ``path`` if it belongs to this store and is not ahead
        of the ledger; ValueError (with the reason) otherwise."""
        with open(path) as f, _collector_paused():
            data = json.load(f)
        if data.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"snapshot format {data.get('format')!r}, expected {SNAPSHOT_FORMAT}")
        if data.get("store_id") != store_id:
            raise ValueError("snapshot belongs to another store")
        if data["seq"] > max_seq:
            raise ValueError(f"snapshot seq {data['seq']} is ahead of the ledger ({max_seq})")
        graph = cls(store_id)
        with _collector_paused():
            graph.g.add_nodes_from(data["nodes"])
            graph.g.add_edges_from(data["edges"])
        graph.seq = graph.snapshot_seq = data["seq"]
        return graph


@contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector while the graph grows by many
    objects: otherwise it re-scans the growing graph again and again (loading
    a 100k-attempt snapshot took 12.7 s with it, 2.9 s without). The graph's
    dicts and tuples form no cycles, so reference counting frees them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def snapshot_seq_of(path: Path) -> int | None:
    """The ledger seq a snapshot file reflects, read from its first bytes
    (None when there is no readable snapshot)."""
    try:
        with open(path) as f:
            head = f.read(256)
    except OSError:
        return None
    m = re.search(r'"seq":(\d+)', head)
    return int(m.group(1)) if m else None
