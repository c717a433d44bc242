"""Leave one KernelBench campaign problem out: does suggest name the technique of its best step?

    python -m benchmarks.campaign_loo [--campaign seeds/campaign.jsonl] [--samples 200] [--out loo.json]

The store of each query holds what ``skillbase init`` loads (the seed skills, the built-in measured
experiences, the campaign's tasks, attempts and lessons) minus every trace of the left-out problem:
its task record, its attempts, its lessons and the skill evidence measured on it. Given only the
problem's first kernel (its root attempt: source, benchmark report, bottleneck), each policy ranks the
next techniques; a hit at k is the best measured step's technique among its first k. The best step is
the step with the largest measured gain over a correct parent (a problem whose steps never gained more
than 2% has no best step and is counted apart).

Policies, all over the same store and the same candidate techniques (those of the skills written for
the problem's family and the broader families it belongs to, plus every technique measured in the
store; stopping and masking excluded):

- suggest: ``Retriever.suggest`` with its default rule (expected improvement), exactly what
  ``skillbase suggest`` answers;
- uniform random; most popular overall (most tried anywhere in the store, the usual popularity
  baseline); most popular in the family (most tried in the problem's family, else anywhere: a
  popularity baseline that already uses the memory's task understanding);
- KernelBlaster-style: a table from the bottleneck state (family and bottleneck of the current
  kernel, falling back to the bottleneck alone, then everything) to techniques with their predicted
  speedup (the measured geometric-mean gain; 1.0 when unmeasured), sampled without replacement with a
  softmax over the predicted speedups at temperature 0.5;
- ReGraphT-style: Monte-Carlo rollouts over the technique-transition graph (benchmarks/retrieval_eval.py).

Random policies are averaged over ``--samples`` draws. Two ablations run suggest on other stores: the
built-in seeds only (what the campaign's agent had when it started), and the campaign data without the
campaign's four skills. Also reported: when the campaign tried suggest's first technique on the
left-out problem (a measured step applying it from a correct parent), how often it improved the kernel.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.retrieval_eval import (  # noqa: E402
    GraphTPolicy, LedgerStore, PopularPolicy, RandomPolicy, SessionContext, seed_skills,
)
from skillbase import seeds  # noqa: E402
from skillbase.config import Settings  # noqa: E402
from skillbase.models import Attempt, TaskInfo, family_lineage  # noqa: E402

IMPROVED = 1.02  # a step this much faster than its parent improved the kernel
CAMPAIGN_SKILLS = ("tf32-numerics-follow-the-reference", "channels-last-for-library-convolutions",
                   "fp32-gemm-on-tensor-cores-tf32x3", "reuse-the-second-read-from-l2")


def read_records(path: Path) -> tuple[dict, list[dict]]:
    """(header, records) of a JSONL memory export."""
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return lines[0], lines[1:]


def write_records(path: Path, header: dict, records: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in [header, *records]) + "\n")
    return path


class Case:
    """One campaign problem: its task, its attempts and its best measured step."""

    def __init__(self, info: TaskInfo, attempts: list[Attempt]):
        self.info, self.attempts = info, sorted(attempts, key=lambda a: a.created_at)
        by_id = {a.id: a for a in self.attempts}
        self.root = next(a for a in self.attempts if a.parent_id is None)
        self.steps = []  # (gain, step techniques, child)
        for a in self.attempts:
            p = by_id.get(a.parent_id) if a.parent_id else None
            if p is None or p.verdict != "correct" or not p.median_ms:
                continue
            step = [t for t in a.techniques if t not in p.techniques] or list(a.techniques)
            gain = p.median_ms / a.median_ms if a.verdict == "correct" and a.median_ms else 0.0
            self.steps.append((gain, step, a))
        best = max(self.steps, key=lambda s: s[0], default=None)
        self.best = best if best is not None and best[0] > IMPROVED else None

    @property
    def truth(self) -> set[str]:
        return set(self.best[1]) if self.best else set()

    def tried(self, technique: str) -> list[float]:
        """Gains of the measured steps (from a correct parent) that applied ``technique``."""
        return [g for g, step, _ in self.steps if technique in step]


class SuggestEI:
    name = "suggest (skillbase, default rule)"

    def ranked(self, ctx, k):
        return [s.technique for s in ctx.retriever.suggest(task=ctx.task, attempts=ctx.attempts, k=k, rule="ei")]


class PopularOverall:
    """Most popular with no task context at all: the techniques tried most often anywhere in the store."""

    name = "most popular overall (most tried anywhere)"

    def ranked(self, ctx, k):
        tries = {v.technique: v.tries for v in ctx.retriever.store.graph.technique_values()}
        return sorted(ctx.open_candidates(), key=lambda t: (-tries.get(t, 0), t))[:k]


class BlasterTable:
    """KernelBlaster-style: bottleneck state -> techniques with predicted speedups, softmax (tau 0.5)."""

    name = "KernelBlaster-style (state table, softmax tau=0.5)"
    tau = 0.5

    def ranked(self, ctx, k):
        g = ctx.retriever.store.graph
        root = ctx.attempts[0]
        bn = root.bottleneck if root.bottleneck not in (None, "unknown") else None
        table = (g.technique_values(family=ctx.task.family, bottleneck=bn) if bn else []) \
            or (g.technique_values(bottleneck=bn) if bn else []) or g.technique_values()
        pred = {v.technique: v.expected_gain or 1.0 for v in table}
        pool = {t: pred.get(t, 1.0) for t in ctx.open_candidates()}
        out = []
        while pool and len(out) < k:
            names = list(pool)
            top = max(pool.values())
            pick = ctx.rng.choices(names, weights=[math.exp((pool[n] - top) / self.tau) for n in names])[0]
            out.append(pick)
            del pool[pick]
        return out


def candidates(retriever, info: TaskInfo) -> list[str]:
    """What a baseline may pick for a task: the techniques of skills written for its family lineage (or
    for any family), and every technique measured in the store."""
    from skillbase.retrievers.suggest import NOT_A_SPEEDUP

    fams = set(family_lineage(info.family))
    out = set()
    for s in retriever.catalog.skills.values():
        if s.status != "deprecated" and (not s.applies_when.families or fams & set(s.applies_when.families)):
            out.update(s.techniques)
    out.update(v.technique for v in retriever.store.graph.technique_values())
    return sorted(out - NOT_A_SPEEDUP)


def build_store(home: Path, leave_out: str | None, campaign: Path | None, skills_kept) -> tuple:
    """A ledger-only store (no embeddings: suggest reads the ledger and the graph) with the seed skills
    (minus the evidence measured on ``leave_out``; only those ``skills_kept`` allows), the built-in
    experiences and the campaign without ``leave_out``."""
    from skillbase.memory.jsonl import import_jsonl
    from skillbase.retrievers.retriever import Retriever

    home.mkdir(parents=True)
    store = LedgerStore(home / "ledger.sqlite3")
    for s in seed_skills(evidence_except={leave_out} if leave_out else set()):
        if skills_kept(s.name):
            store.ledger.put_skill(s, author="skillbase-seeds", reason="seed playbook")
    import_jsonl(store.ledger, seeds.EXPERIENCES_FILE)
    if campaign is not None:
        header, records = read_records(campaign)
        kept = [r for r in records if not _of_task(r, leave_out)]
        import_jsonl(store.ledger, write_records(home / "campaign.jsonl", header, kept))
    return store, Retriever(store, Settings.from_env(env={}, home=home))


def _of_task(record: dict, task: str | None) -> bool:
    r = record["record"]
    return task is not None and (r.get("task") == task or (record["kind"] == "task" and r.get("name") == task))


def evaluate(cases: list[Case], campaign: Path, work: Path, samples: int) -> dict:
    """Hit rates at 1 and 3 per policy (and the ablations), per problem and overall."""
    policies = [SuggestEI(), RandomPolicy(), PopularOverall(), PopularPolicy(), BlasterTable(), GraphTPolicy()]
    variants = {
        "suggest, built-in seeds only (no campaign memory)": (None, lambda n: n not in CAMPAIGN_SKILLS),
        "suggest, campaign data without the campaign skills": (campaign, lambda n: n not in CAMPAIGN_SKILLS),
    }
    rows = []
    for i, case in enumerate(cases):
        name = case.info.name
        t0 = time.perf_counter()
        row = {"task": name, "family": case.info.family, "root": case.root.id,
               "root_bottleneck": case.root.bottleneck, "best_gain": round(case.best[0], 3) if case.best else None,
               "truth": sorted(case.truth), "policies": {}}
        store, retriever = build_store(work / f"loo-{i}", name, campaign, lambda n: True)
        cand = candidates(retriever, case.info)
        row["candidates"] = len(cand)
        for pol in policies:
            draws = 1 if isinstance(pol, SuggestEI) else samples
            tops = [pol.ranked(SessionContext(retriever, case.info, [case.root], cand, random.Random(s)), 3)
                    for s in range(draws)]
            row["policies"][pol.name] = {
                "top1": statistics.mean(bool(set(t[:1]) & case.truth) for t in tops),
                "top3": statistics.mean(bool(set(t[:3]) & case.truth) for t in tops),
                "first": tops[0][:3]}
        first = row["policies"][SuggestEI.name]["first"][:1]
        gains = case.tried(first[0]) if first else []
        row["suggest_first_tried"] = bool(gains)
        row["suggest_first_improved"] = any(g > IMPROVED for g in gains) if gains else None
        retriever.close()
        store.close()
        for label, (camp, kept) in variants.items():
            store, retriever = build_store(work / f"loo-{i}-{len(row['policies'])}", name, camp, kept)
            top = SuggestEI().ranked(SessionContext(retriever, case.info, [case.root], cand, random.Random(0)), 3)
            row["policies"][label] = {"top1": float(bool(set(top[:1]) & case.truth)),
                                      "top3": float(bool(set(top[:3]) & case.truth)), "first": top}
            retriever.close()
            store.close()
        rows.append(row)
        print(f"[{i + 1}/{len(cases)}] {name}: truth {row['truth']}, suggest {row['policies'][SuggestEI.name]['first']}"
              f" ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    return summarize(rows)


def summarize(rows: list[dict]) -> dict:
    scored = [r for r in rows if r["truth"]]
    table = defaultdict(dict)
    for r in scored:
        for pol, v in r["policies"].items():
            table[pol].setdefault("top1", []).append(v["top1"])
            table[pol].setdefault("top3", []).append(v["top3"])
    tried = [r for r in scored if r["suggest_first_tried"]]
    return {
        "problems": len(rows), "with_best_step": len(scored),
        "without_best_step": [r["task"] for r in rows if not r["truth"]],
        "policies": {p: {k: round(statistics.mean(v), 3) for k, v in d.items()} for p, d in table.items()},
        "suggest_first_tried": len(tried),
        "suggest_first_improved": sum(1 for r in tried if r["suggest_first_improved"]),
        "rows": rows,
    }


def load_cases(campaign: Path) -> list[Case]:
    _, records = read_records(campaign)
    infos = {r["record"]["name"]: TaskInfo(**r["record"]["info"]) for r in records
             if r["kind"] == "task" and r["record"].get("info")}
    by_task = defaultdict(list)
    for r in records:
        if r["kind"] == "attempt":
            by_task[r["record"]["task"]].append(Attempt(**r["record"]))
    return [Case(infos[t], atts) for t, atts in sorted(by_task.items()) if t in infos]


def markdown(r: dict) -> str:
    lines = [f"{r['with_best_step']} of {r['problems']} problems have a step that gained more than "
             f"{IMPROVED}x (the others are not scored: {', '.join(r['without_best_step']) or 'none'}).", "",
             "| policy | best step's technique in top 1 | in top 3 |", "|---|---|---|"]
    for p, v in r["policies"].items():
        lines.append(f"| {p} | {v['top1']:.0%} | {v['top3']:.0%} |")
    lines += ["", f"Suggest's first technique was tried on {r['suggest_first_tried']} of these problems in the "
              f"campaign and improved the kernel on {r['suggest_first_improved']} of them."]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--campaign", type=Path, default=seeds.CAMPAIGN_FILE)
    ap.add_argument("--samples", type=int, default=200, help="draws per random policy and problem")
    ap.add_argument("--out", type=Path, help="write the JSON here (and the table beside it as .md)")
    args = ap.parse_args(argv)
    cases = load_cases(args.campaign)
    with tempfile.TemporaryDirectory(prefix="sb-loo-") as work:
        result = evaluate(cases, args.campaign, Path(work), args.samples)
    md = markdown(result)
    print(md)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
