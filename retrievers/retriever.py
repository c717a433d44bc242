"""The Retriever: the one entry point the API layer calls.

    retriever = Retriever(store, settings)
    result = retriever.recall(task=info, source=candidate_source, report=bench_report, arch="sm_90")
    for item in result.items: print(item.kind, item.title, item.why)
    for s in retriever.suggest(task=info, attempts=store.list_attempts(task=info.name)): print(s.technique, s.why)

``recall`` reads the store only; feedback on what was used is recorded by the
API layer through the Store.
"""

from __future__ import annotations

import time
from typing import Any

from skillbase.retrievers import hybrid
from skillbase.retrievers.catalog import Catalog
from skillbase.retrievers.gate import GateResult
from skillbase.retrievers.graph import GraphRetriever
from skillbase.retrievers.hits import KINDS, Hit, combine_where
from skillbase.retrievers.lexical import LexicalRetriever
from skillbase.retrievers.query import Query, build_query
from skillbase.retrievers.suggest import RULES, default_seed, rank, suggestions, task_memory
from skillbase.retrievers.tokens import tokenize
from skillbase.retrievers.values import Posterior, applicability
from skillbase.retrievers.vector import DEFAULT_WHERE, VectorRetriever

from skillbase.config import Settings
from skillbase.errors import InvalidInput, NotFound
from skillbase.models import (
    Attempt,
    BenchReport,
    ProfileReport,
    RecallItem,
    RecallResult,
    Suggestion,
    TaskInfo,
    Tolerance,
)

MODES = ("hybrid", "vector", "lexical", "graph")
MAX_K = 50
POOL = 30  # candidates each retriever contributes per kind before fusion


class Retriever:
    """Recall and next-technique suggestions over one Store."""

    def __init__(self, store, settings: Settings):
        self.store = store
        self.settings = settings
        self.catalog = Catalog(store)
        self.vector = VectorRetriever(store)
        self.lexical = LexicalRetriever(store, settings.cache_dir)
        self.graph = GraphRetriever(store, self.catalog)

    def close(self) -> None:
        """Release the lexical index's files (the store stays open)."""
        self.lexical.close()

    # -- recall ----------------------------------------------------------------

    def recall(
        self,
        *,
        text: str | None = None,
        task: TaskInfo | str | None = None,
        source: str | None = None,
        report: BenchReport | None = None,
        arch: str | None = None,
        k: int = 5,
        kinds: tuple[str, ...] = ("skill", "experience"),
        mode: str = "hybrid",
        run: str | None = None,
        profile: ProfileReport | None = None,
    ) -> RecallResult:
        """The ``k`` skills, experiences (and, if asked, attempts) most likely
        to make this kernel faster, each with its score parts and why.

        Give any of: ``text`` (plain words), ``task`` (a TaskInfo, or the name
        of a task the store has seen), ``source`` (the current candidate),
        ``report`` (its BenchReport), and ``arch`` ('sm_90'). ``mode`` picks
        'hybrid' (default) or one retriever alone ('vector', 'lexical',
        'graph'). When a task is given, ``suggestions`` holds the next
        techniques to try. ``run`` (a suite run's name) keeps only that run's
        attempts and the experiences tied to them (skills belong to no run: with
        ``run``, the default kinds are attempts and experiences). ``profile`` (a
        ProfileReport with counters) conditions the gate and the technique values on
        its measured bottleneck state. InvalidInput
        for an empty query or bad arguments; NotFound for an unknown task name
        given alone.
        """
        t0 = time.perf_counter()
        with self.store.ledger.pinned_seq():  # one seq for every cache this recall consults
            return self._recall(text, task, source, report, arch, k, kinds, mode, run, profile, t0)

    def _recall(self, text, task, source, report, arch, k, kinds, mode, run, profile, t0) -> RecallResult:
        if run is not None and tuple(kinds) == ("skill", "experience"):
            kinds = ("attempt", "experience")
        k, kinds = _check(k, kinds, mode)
        notes: list[str] = []
        info = self._task(task, notes, alone=not (text or source or report or profile))
        known = self._attempt_of(report) if report is not None else None
        if known is not None:
            notes.append(f"the report is of attempt {known.id} ({', '.join(known.techniques) or 'no techniques'})")
        q = build_query(
            text=text,
            task=info,
            source=source,
            report=report,
            arch=arch,
            matcher=self.catalog.matcher,
            max_source_bytes=self.settings.max_source_bytes,
            applied=known.techniques if known is not None else (),
            profile=profile,
        )
        notes = list(q.notes) + notes
        gates = self.graph.gates(q)
        beliefs = self.graph.technique_beliefs(q, gates) if mode in ("hybrid", "graph") else {}
        lists = self._retrieve(q, kinds, mode, gates, beliefs, run)
        if run is not None:
            lists = self._only_run(lists, run, notes)
        if mode == "hybrid":
            items = self._hybrid(q, lists, k, gates, beliefs)
            dropped = [
                g
                for g in gates.values()
                if g.verdict == "filter"
                and any(h.id == g.skill for key, hs in lists.items() if key.endswith(":skill") for h in hs)
            ]
            if dropped:
                notes.append("gated out: " + "; ".join(f"{g.skill} ({g.reasons[0]})" for g in dropped[:5]))
        else:
            items = self._single(mode, lists, k)
        result_suggestions: list[Suggestion] = []
        if info is not None and mode == "hybrid":
            result_suggestions = self._recall_suggestions(q, info, gates, beliefs)
        return RecallResult(
            query=q.describe(),
            family=q.family,
            bottleneck=q.bottleneck,
            arch=q.arch,
            features=list(q.features),
            items=items,
            suggestions=result_suggestions,
            notes=notes,
            latency_ms=round((time.perf_counter() - t0) * 1000, 2),
        )

    def _retrieve(self, q: Query, kinds, mode: str, gates, beliefs, run: str | None = None) -> dict[str, list[Hit]]:
        lists: dict[str, list[Hit]] = {}
        extra = {"attempt": {"run": run}} if run is not None else {}
        if mode in ("hybrid", "vector"):
            for kind in kinds:
                lists[f"vector:{kind}"] = self.vector.search(q, kind, POOL, extra.get(kind))
        if mode in ("hybrid", "lexical"):
            tokens = tokenize(q.lexical)
            for kind in kinds:
                found = self.lexical.search(tokens, kind, POOL, combine_where(DEFAULT_WHERE[kind], extra.get(kind)))
                lists[f"lexical:{kind}"] = [Hit(kind, i, s, f"bm25 {s:.1f}", m) for i, s, m in found]
        if mode in ("hybrid", "graph"):
            if "skill" in kinds:
                lists["graph:skill"] = self.graph.skills(q, gates, beliefs, POOL)
            if "experience" in kinds:
                lists["graph:experience"] = self.graph.experiences(q, beliefs, POOL)
            if "attempt" in kinds:
                lists["graph:attempt"] = self.graph.attempts(q, POOL)
        return lists

    def _only_run(self, lists: dict[str, list[Hit]], run: str, notes: list[str]) -> dict[str, list[Hit]]:
        """The hits that belong to suite run ``run``: its attempts, and experiences about them."""
        ids = self.store.ledger.attempt_ids_of_run(run)
        if not ids:
            notes.append(f"no attempts of run {run!r} in the store")
        exp_ids = [h.id for key, hs in lists.items() if key.endswith(":experience") for h in hs]
        exps = self.catalog.experiences(exp_ids)
        tied = {i for i, e in exps.items() if e.before_attempt in ids or e.after_attempt in ids}
        keep = {"attempt": ids, "experience": tied, "skill": set()}
        return {key: [h for h in hs if h.id in keep[h.kind]] for key, hs in lists.items()}

    def _hybrid(self, q: Query, lists, k: int, gates, beliefs) -> list[RecallItem]:
        fused = hybrid.fuse(lists, {"graph": hybrid.graph_weight(q)})
        exps = self.catalog.experiences([i for kind, i in fused if kind == "experience"])
        graph = self.store.graph
        ranked = hybrid.rerank(
            q,
            fused,
            skills=self.catalog.skills,
            experiences=exps,
            gates=gates,
            beliefs=beliefs,
            feedback=graph.feedback,
        )
        chosen = hybrid.diversify(ranked, k, q.techniques)
        return self._items(chosen, exps, gates, beliefs, q.arch)

    def _single(self, mode: str, lists: dict[str, list[Hit]], k: int) -> list[RecallItem]:
        """One retriever's ranking: by cosine similarity for vector search
        (comparable across collections), by rank for the others."""
        if mode == "vector":
            hits = sorted((h for hs in lists.values() for h in hs), key=lambda h: -h.score)
            chosen = []
            for h in hits[:k]:
                s = hybrid.Scored(
                    h.kind,
                    h.id,
                    parts={"vector": round(h.score, 6)},
                    ranks={"vector": len(chosen) + 1},
                    notes={"vector": h.note},
                )
                s.score = h.score
                chosen.append(s)
        else:
            fused = hybrid.fuse(lists)
            chosen = sorted(fused.values(), key=lambda s: (-s.parts["rrf"], s.kind, s.id))[:k]
            for s in chosen:
                s.score = s.parts["rrf"]
        exps = self.catalog.experiences([s.id for s in chosen if s.kind == "experience"])
        return self._items(chosen, exps, {}, {}, None)

    def _items(self, chosen, exps, gates: dict[str, GateResult], beliefs, arch) -> list[RecallItem]:
        attempts = {a.id: a for a in self.store.ledger.get_attempts([s.id for s in chosen if s.kind == "attempt"])}
        out = []
        for s in chosen:
            if s.kind == "skill" and s.id in self.catalog.skills:
                skill = self.catalog.skills[s.id]
                g = gates.get(s.id) or GateResult(s.id, "pass", 1.0)
                out.append(hybrid.skill_item(s, skill, g, beliefs, arch))
            elif s.kind == "experience" and s.id in exps:
                out.append(hybrid.experience_item(s, exps[s.id]))
            elif s.kind == "attempt" and s.id in attempts:
                out.append(hybrid.attempt_item(s, attempts[s.id]))
        return out

    # -- suggest ---------------------------------------------------------------

    def suggest(
        self,
        *,
        task: TaskInfo | str,
        attempts: list[Attempt] | None = None,
        arch: str | None = None,
        k: int = 3,
        seed: int | None = None,
        rule: str = "ei",
        profile: ProfileReport | None = None,
        use_profiles: bool = True,
    ) -> list[Suggestion]:
        """The ``k`` techniques to try next on ``task``, given the attempts
        already made on it (None: read them from the store). Never repeats a
        technique in the current best candidate, nor one whose last try here
        failed or was slower unless the evidence says retry. ``rule`` is
        'ei' (expected improvement of one try, the default), 'thompson'
        (sampling; deterministic for a seed) or 'ucb'. ``profile`` conditions the
        ranking on a measured bottleneck state; without one, the profile stored with
        the best attempt is used (``use_profiles=False``: the roofline alone)."""
        if not isinstance(k, int) or not 1 <= k <= 20:
            raise InvalidInput(f"k must be an integer from 1 to 20, got {k!r}")
        if rule not in RULES:
            raise InvalidInput(f"unknown rule {rule!r}", hint=f"one of {', '.join(RULES)}")
        info = self._task(task, [], alone=True)
        if attempts is None:
            attempts = self.store.list_attempts(task=info.name, limit=500)
        if not isinstance(attempts, list) or not all(isinstance(a, Attempt) for a in attempts):
            raise InvalidInput("attempts must be a list of Attempt records", hint="store.list_attempts(task=...)")
        mem = task_memory(attempts)
        best = mem.best
        if profile is None and use_profiles:
            profile = self._stored_profile(best or (max(attempts, key=lambda a: a.created_at) if attempts else None))
        q = build_query(
            task=info,
            source=best.source if best else None,
            report=best.bench_report if best else None,
            arch=arch or (best.arch if best and best.arch != "cpu" else None),
            matcher=self.catalog.matcher,
            max_source_bytes=self.settings.max_source_bytes,
            profile=profile if use_profiles else None,
        )
        gates = self.graph.gates(q)
        beliefs = self.graph.technique_beliefs(q, gates)
        return self._suggest(q, info, attempts, gates, beliefs, k, seed, rule)

    def _recall_suggestions(self, q: Query, info: TaskInfo, gates, beliefs) -> list[Suggestion]:
        """The 3 techniques recall suggests next, kept until the task's attempts, the technique
        values, the skills or the query's context change (reading and validating up to 500
        attempts was a tenth of a recall)."""
        graph = self.store.graph
        key = (
            "suggest",
            info.name,
            info.family,
            q.context_key(),
            self.catalog.version,
            id(graph),
            graph.values_version,
            graph.attempts_version,
            self.store.ledger.attempts_mark(info.name),
        )

        def build() -> tuple[Suggestion, ...]:
            attempts = self.store.list_attempts(task=info.name, limit=500)
            return tuple(self._suggest(q, info, attempts, gates, beliefs, 3, None, "ei"))

        return list(self.graph.memo.get(key, build))

    def _suggest(self, q, info: TaskInfo, attempts, gates, beliefs: dict[str, Posterior], k, seed, rule):
        mem = task_memory(attempts)
        # With a measured profile state, the state's own contexts say what pays on this kernel; a
        # family-wide share of tasks improved would pull back toward what the family's usual state needed.
        applies = None if q.profile_state else applicability(self.store.graph, info.family, exclude_task=info.name)
        ranked = rank(beliefs, mem, k=k, seed=default_seed(info.name, attempts, seed), rule=rule, applies=applies)
        skills_for: dict[str, list[str]] = {}
        for name, s in self.catalog.skills.items():
            for t in s.techniques:
                skills_for.setdefault(t, []).append(name)
        titles = {t: self.catalog.title(t) for t, *_ in ranked}
        return suggestions(
            ranked, titles=titles, skills_for=skills_for, gates=gates, mem=mem, rule=rule, applies=applies
        )

    def _stored_profile(self, attempt: Attempt | None) -> ProfileReport | None:
        if attempt is None:
            return None
        getter = getattr(self.store.ledger, "get_profile", None)
        return getter(attempt.id) if getter is not None else None

    def _attempt_of(self, report: BenchReport) -> Attempt | None:
        """The recorded attempt a report was made from (same task and source
        hash), if the store has it: what it already applied is then known."""
        if not isinstance(report, BenchReport) or not report.solution_hash.strip("0"):
            return None
        for a in self.store.list_attempts(task=report.task, limit=500):
            if a.source_hash == report.solution_hash:
                return a
        return None

    # -- tasks -----------------------------------------------------------------

    def _task(self, task: Any, notes: list[str], *, alone: bool) -> TaskInfo | None:
        """A TaskInfo from a TaskInfo or a task name the store knows."""
        if task is None or isinstance(task, TaskInfo):
            return task
        if not isinstance(task, str) or not task.strip():
            raise InvalidInput(f"task must be a TaskInfo or a task name, got {task!r}")
        try:
            rec = self.store.get_task(task.strip())
        except NotFound:
            if alone:
                raise NotFound(
                    f"no task {task!r} in the store",
                    hint="pass a TaskInfo (Toolchain.load_task) or describe the kernel in text",
                ) from None
            notes.append(f"unknown task {task!r}: recalled from the other inputs")
            return None
        if rec.info is not None:
            return rec.info
        # Known only by its class (attempts were recorded without its TaskInfo).
        return TaskInfo(
            name=rec.name,
            path="",
            family=rec.family,
            dtype=rec.dtype,
            regime=rec.regime,
            bytes_moved=0,
            flops=0,
            tolerance=Tolerance(atol=0.0, rtol=0.0),
        )


def _check(k: Any, kinds: Any, mode: Any) -> tuple[int, tuple[str, ...]]:
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    if mode not in MODES:
        raise InvalidInput(f"unknown mode {mode!r}", hint=f"one of {', '.join(MODES)}")
    if isinstance(kinds, str):
        kinds = (kinds,)
    kinds = tuple(dict.fromkeys(kinds or ()))
    bad = [x for x in kinds if x not in KINDS]
    if not kinds or bad:
        raise InvalidInput(f"kinds must name some of {', '.join(KINDS)}, got {kinds!r}")
    return k, kinds
