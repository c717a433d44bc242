"""Task understanding and recall on KernelBench's own problem files.

    python -m benchmarks.kernelbench_eval --kernelbench KB_DIR --out DIR

KB_DIR is a checkout of ScalingIntelligence/KernelBench, read in place (the
level1 to level4 folders of its KernelBench folder); no problem file and no
path of it enters this repository or the results. The labels are ours:
benchmarks/data/kernelbench_labels.yaml gives, per level-1 and level-2 problem,
the primary family we judge correct, and for 65 of them the techniques an
expert would try first (written before any ranking was looked at).

Reported (JSON and markdown under ``--out``):

- **families**: primary-family accuracy per level against the labels, with every miss;
- **loads**: every problem of levels 1-4 described by ``Toolchain.load_task``; a
  failure is either a missing third-party module (named) or anything else;
- **floor**: FLOPs and bytes present (> 0) for every level-1 and level-2 problem;
- **describe latency**: the first description of each problem (it traces the
  forward), then a second in the same process (in-memory cache) and one in a new
  Toolchain (on-disk cache), wall-clock ms;
- **recall**: for each problem with expected techniques, ``recall(task=...)``
  per retriever (vector, lexical, graph, hybrid) on the evaluation store of
  benchmarks/retrieval_eval.py (seed skills, the built-in H100 lineages, the
  synthetic lessons); a hit is an expected technique among the techniques of
  the top 3 items (also top 1 and top 5). ``hybrid, family other`` is the same
  recall with the task described as before this work (family 'other', no
  families, no trace), the baseline the issue measured;
- **dev set**: the built-in dev set's nDCG@10 per mode on the same store.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import yaml  # noqa: E402

from benchmarks.memory_bench import pct  # noqa: E402
from skillbase.config import Settings  # noqa: E402

LABELS = ROOT / "benchmarks" / "data" / "kernelbench_labels.yaml"
RECALL_MODES = ("vector", "lexical", "graph", "hybrid")
BASELINE = "hybrid, family other"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def problems_dir(kb: Path) -> Path:
    """The folder holding level1..level4: the checkout's ``KernelBench`` folder, or ``kb`` itself."""
    for cand in (kb / "KernelBench", kb):
        if (cand / "level1").is_dir():
            return cand
    raise SystemExit(f"no level1 folder under {kb} or {kb / 'KernelBench'}: pass the KernelBench checkout")


def problem_files(root: Path, level: int) -> list[Path]:
    files = [p for p in (root / f"level{level}").glob("*.py") if p.name.split("_")[0].isdigit()]
    return sorted(files, key=lambda p: int(p.name.split("_")[0]))


def missing_module(message: str) -> str | None:
    """The module a load failure names as missing, if that is what it was."""
    marker = "No module named "
    if marker in message:
        return message.split(marker, 1)[1].split()[0].strip("'\":;,")
    return None


def needs_network(message: str) -> bool:
    """A problem that downloads model files when imported (level 4's Hugging Face models)."""
    return "huggingface.co" in message or "offline mode" in message


# ---------------------------------------------------------------------------
# Describing every problem
# ---------------------------------------------------------------------------


def describe_all(root: Path, home: Path) -> tuple[dict, dict]:
    """Load every problem of levels 1-4: {path: TaskInfo or None}, and the per-level load report."""
    from skillbase.toolchain.facade import Toolchain

    infos: dict[str, object] = {}
    loads: dict = {}
    lat = {"first": [], "same_process": [], "new_toolchain": []}
    settings = Settings.from_env(env={}, home=home)
    with Toolchain(settings) as tc:
        for level in (1, 2, 3, 4):
            rows = []
            for p in problem_files(root, level):
                t0 = time.perf_counter()
                try:
                    info = tc.load_task(str(p))
                    first = (time.perf_counter() - t0) * 1000
                    t0 = time.perf_counter()
                    tc.load_task(str(p))
                    lat["same_process"].append((time.perf_counter() - t0) * 1000)
                    lat["first"].append(first)
                    infos[str(p)] = info
                    rows.append({"problem": p.stem, "ok": True, "ms": round(first, 1), "family": info.family,
                                 "traced": info.understanding.traced})
                except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the run
                    # Problems are named by stem: no path of the checkout goes into the results.
                    msg = f"{type(e).__name__}: {e}".replace(str(p), p.name)
                    infos[str(p)] = None
                    rows.append({"problem": p.stem, "ok": False, "error": msg[:400],
                                 "missing_module": missing_module(msg), "needs_network": needs_network(msg)})
            failed = [r for r in rows if not r["ok"]]
            loads[f"level{level}"] = {
                "problems": len(rows), "loaded": len(rows) - len(failed),
                "missing_module": sorted({r["missing_module"] for r in failed if r["missing_module"]}),
                "needs_network": sum(1 for r in failed if r["needs_network"]),
                "other_failures": [r for r in failed if not r["missing_module"] and not r["needs_network"]],
                "failures": failed,
                "traced": {k: sum(1 for r in rows if r.get("traced") == k)
                           for k in ("meta", "meta_after_cpu_init", "cpu_shrunk", "failed")},
                "families": dict(Counter(r["family"] for r in rows if r["ok"]).most_common()),
            }
            log(f"level {level}: {len(rows) - len(failed)}/{len(rows)} described")
    with Toolchain(settings) as tc:  # a new process: the on-disk cache answers
        for p, info in infos.items():
            if info is not None:
                t0 = time.perf_counter()
                tc.load_task(p)
                lat["new_toolchain"].append((time.perf_counter() - t0) * 1000)
    loads["describe_ms"] = {k: {"p50": round(pct(v, 0.5), 2), "p95": round(pct(v, 0.95), 2),
                                "max": round(max(v), 1), "n": len(v)} for k, v in lat.items() if v}
    return infos, loads


def family_accuracy(root: Path, labels: dict, infos: dict) -> dict:
    out = {}
    for level in (1, 2):
        rows = labels[f"level{level}"]
        misses, floor_missing, correct = [], [], 0
        for e in rows:
            info = infos.get(str(root / f"level{level}" / f"{e['stem']}.py"))
            got = info.family if info is not None else "not loaded"
            if got == e["family"]:
                correct += 1
            else:
                misses.append({"n": e["n"], "problem": e["stem"], "label": e["family"], "got": got,
                               "families": info.families if info is not None else []})
            if info is None or not (info.flops > 0 and info.bytes_moved > 0):
                floor_missing.append(e["stem"])
        out[f"level{level}"] = {"problems": len(rows), "correct": correct,
                                "accuracy": round(correct / len(rows), 4), "misses": misses,
                                "flops_and_bytes_present": len(rows) - len(floor_missing),
                                "floor_missing": floor_missing}
    return out


# ---------------------------------------------------------------------------
# Recall
# ---------------------------------------------------------------------------


def eval_recall(retriever, root: Path, labels: dict, infos: dict) -> dict:
    """Top-k hit rates of the expected techniques per retriever, and per problem what came back."""
    from skillbase.models import TaskInfo

    rows = []
    for level in (1, 2):
        for e in labels[f"level{level}"]:
            if not e.get("techniques"):
                continue
            info = infos.get(str(root / f"level{level}" / f"{e['stem']}.py"))
            if not isinstance(info, TaskInfo):
                rows.append({"problem": e["stem"], "level": level, "error": "not loaded"})
                continue
            expected = set(e["techniques"])
            row = {"problem": e["stem"], "level": level, "family": info.family, "expected": sorted(expected)}
            before = info.model_copy(update={"family": "other", "families": [], "understanding": None})
            for mode, task in [(m, info) for m in RECALL_MODES] + [(BASELINE, before)]:
                res = retriever.recall(task=task, k=10, mode=mode.split(",")[0])
                techs = [list(i.techniques) for i in res.items]
                first = next((n for n, t in enumerate(techs, 1) if expected & set(t)), None)
                row[mode] = {"first_hit": first, "top3": [f"{i.kind}:{i.id}" for i in res.items[:3]],
                             "ms": res.latency_ms}
            rows.append(row)
    summary = {}
    done = [r for r in rows if "error" not in r]
    for mode in (*RECALL_MODES, BASELINE):
        firsts = [r[mode]["first_hit"] for r in done]
        summary[mode] = {f"hit@{k}": round(sum(1 for f in firsts if f is not None and f <= k) / len(firsts), 4)
                         for k in (1, 3, 5)} | {
            "mrr@10": round(statistics.mean(1 / f if f else 0.0 for f in firsts), 4), "n": len(firsts),
            "latency_ms_p50": round(pct([r[mode]["ms"] for r in done], 0.5), 1)}
    for level in (1, 2):
        sub = [r for r in done if r["level"] == level]
        summary[f"hybrid, level {level}"] = {
            "hit@3": round(sum(1 for r in sub if (r["hybrid"]["first_hit"] or 99) <= 3) / max(1, len(sub)), 4),
            "n": len(sub)}
    return {"summary": summary, "problems": rows,
            "misses_hybrid_top3": [{"problem": r["problem"], "expected": r["expected"], "top3": r["hybrid"]["top3"]}
                                   for r in done if (r["hybrid"]["first_hit"] or 99) > 3]}


def dev_set(retriever, tasks) -> dict:
    from benchmarks import retrieval_eval as reval

    dev = reval.load_dev(tasks)
    res = reval.eval_recall(retriever, dev, modes=("vector", "lexical", "graph", "hybrid"))
    return {m: {"ndcg@10": res["summary"][m]["all"]["ndcg@10"], "recall@5": res["summary"][m]["all"]["recall@5"],
                "mrr": res["summary"][m]["all"]["mrr"], "n": res["summary"][m]["all"]["n"]}
            for m in ("vector", "lexical", "graph", "hybrid")}


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def markdown(r: dict) -> str:
    lines = [f"KernelBench understanding and recall ({r['when']}, {r['machine']}, load {r.get('load_average')})", ""]
    if "families" in r:
        lines += ["| level | problems | primary family correct | FLOPs and bytes present |", "|---|---|---|---|"]
        for lv, f in r["families"].items():
            lines.append(f"| {lv} | {f['problems']} | {f['correct']} ({f['accuracy']:.1%}) | "
                         f"{f['flops_and_bytes_present']} |")
        for lv, f in r["families"].items():
            for m in f["misses"]:
                lines.append(f"- miss {lv} {m['problem']}: labelled {m['label']}, got {m['got']}")
        lines.append("")
    if "loads" in r:
        lines += ["| level | problems | described | missing modules | model files to download | other failures | "
                  "traced meta / cpu-init / shrunk / untraceable |", "|---|---|---|---|---|---|---|"]
        for lv, d in r["loads"].items():
            if not lv.startswith("level"):
                continue
            t = d["traced"]
            lines.append(f"| {lv} | {d['problems']} | {d['loaded']} | {', '.join(d['missing_module']) or '-'} | "
                         f"{d['needs_network']} | {len(d['other_failures'])} | {t['meta']} / {t['meta_after_cpu_init']} / {t['cpu_shrunk']} "
                         f"/ {t['failed']} |")
        for lv, d in r["loads"].items():
            if lv.startswith("level") and d["families"]:
                lines.append(f"- {lv} families: " + ", ".join(f"{f} {n}" for f, n in d["families"].items()))
        for k, v in r["loads"]["describe_ms"].items():
            lines.append(f"- describe, {k}: p50 {v['p50']} ms, p95 {v['p95']} ms, max {v['max']} ms (n={v['n']}, "
                         "wall clock)")
        lines.append("")
    if "recall" in r:
        s = r["recall"]["summary"]
        lines += ["| retriever | hit@1 | hit@3 | hit@5 | MRR@10 | n |", "|---|---|---|---|---|---|"]
        for mode in (*RECALL_MODES, BASELINE):
            v = s[mode]
            lines.append(f"| {mode} | {v['hit@1']:.3f} | {v['hit@3']:.3f} | {v['hit@5']:.3f} | {v['mrr@10']:.3f} | "
                         f"{v['n']} |")
        lines.append("")
        for m in r["recall"]["misses_hybrid_top3"]:
            lines.append(f"- hybrid top-3 miss {m['problem']}: expected {', '.join(m['expected'])}; got "
                         f"{', '.join(m['top3'])}")
        lines.append("")
    if "dev" in r:
        lines += ["| dev set | nDCG@10 | Recall@5 | MRR |", "|---|---|---|---|"]
        for mode, v in r["dev"].items():
            lines.append(f"| {mode} | {v['ndcg@10']:.3f} | {v['recall@5']:.3f} | {v['mrr']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", type=Path, required=True, help="a KernelBench checkout (read in place)")
    ap.add_argument("--out", type=Path, help="folder for kernelbench_eval.json and .md")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--only", choices=("describe", "recall"), action="append")
    args = ap.parse_args()
    only = set(args.only or ("describe", "recall"))
    root = problems_dir(args.kernelbench.expanduser())
    labels = yaml.safe_load(LABELS.read_text())
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sb-kb-eval-"))
    workdir.mkdir(parents=True, exist_ok=True)
    r: dict = {"when": time.strftime("%Y-%m-%d"),
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"}
    log("describing every problem of levels 1-4")
    infos, loads = describe_all(root, workdir / "describe")
    if "describe" in only:
        r["loads"] = loads
        r["families"] = family_accuracy(root, labels, infos)
    if "recall" in only:
        from benchmarks import retrieval_eval as reval
        from skillbase.memory.embeddings import Embedder
        from skillbase.retrievers.retriever import Retriever

        embedder = Embedder()
        embedder.embed([f"warm up {time.time_ns()}"])
        tasks = reval.load_tasks()
        log("building the evaluation store")
        store = reval.build_eval_store(workdir / "eval", embedder, tasks)
        retriever = Retriever(store, Settings.from_env(env={}, home=workdir / "eval"))
        retriever.recall(text="warm up", arch="sm_90")
        log("recall on KernelBench problems")
        r["recall"] = eval_recall(retriever, root, labels, infos)
        log("recall on the built-in dev set")
        r["dev"] = dev_set(retriever, tasks)
        retriever.close()
        store.close()
    r["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "kernelbench_eval.json").write_text(json.dumps(r, indent=1, default=str))
        (args.out / "kernelbench_eval.md").write_text(markdown(r))
    print(markdown(r))


if __name__ == "__main__":
    main()
