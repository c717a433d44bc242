"""The KernelBench campaign's figures, from the seed memory alone (seeds/campaign.jsonl).

    python benchmarks/campaign/figures.py [--campaign seeds/campaign.jsonl] [--out figures.md]

Every figure comes from the benchmark reports the seeds keep (one per measured candidate, as the
H100 suite run wrote it): the median device time (CUDA events, L2 flushed) of the candidate and of
the eager and torch.compile baselines, and the report's roofline (% of speed of light). A problem
stands for its best candidate: correct and fastest. Per level: the share of problems with a correct
kernel, fast_1 (correct and faster than the baseline) against eager and torch.compile, and the
geometric-mean speedup of the best kernels over each baseline (over the problems with a correct one).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from skillbase.seeds import CAMPAIGN_FILE  # noqa: E402


def problems(path: Path) -> list[dict]:
    """One row per campaign problem: its level and number, family, baselines and best candidate."""
    records = [json.loads(x) for x in path.read_text().splitlines()[1:] if x.strip()]
    tasks = {r["record"]["name"]: r["record"] for r in records if r["kind"] == "task"}
    by_task = defaultdict(list)
    for r in records:
        if r["kind"] == "attempt":
            by_task[r["record"]["task"]].append(r["record"])
    rows = []
    for name, atts in by_task.items():
        info = tasks[name]["info"] or {}
        level, number = (info.get("path") or "kb:?/?")[3:].split("/")
        correct = [a for a in atts if a["verdict"] == "correct" and a["median_ms"]]
        best = min(correct, key=lambda a: a["median_ms"]) if correct else None
        ref = (best or atts[0])["bench_report"]
        base = {k: v["median_ms"] for k, v in (ref.get("baselines") or {}).items()}
        roof = (best["bench_report"].get("roofline") or {}) if best else {}
        rows.append({
            "level": int(level), "number": int(number), "task": name, "family": tasks[name]["family"],
            "candidates": len(atts), "steps": sum(1 for a in atts if a["parent_id"]),
            "eager_ms": base.get("eager"), "compile_ms": base.get("torch_compile"),
            "best_ms": best["median_ms"] if best else None, "best": best["id"] if best else None,
            "techniques": best["techniques"] if best else [],
            "pct_sol": roof.get("pct_sol"), "bound": roof.get("bound"),
        })
    return sorted(rows, key=lambda r: (r["level"], r["number"]))


def geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def level_figures(rows: list[dict]) -> dict:
    """Correctness, fast_1 and geometric means over the rows (problems) given."""
    ok = [r for r in rows if r["best_ms"]]
    out = {"problems": len(rows), "correct": len(ok)}
    for base in ("eager", "compile"):
        sp = [r[f"{base}_ms"] / r["best_ms"] for r in ok if r[f"{base}_ms"]]
        out[f"fast_1_{base}"] = sum(1 for s in sp if s > 1.0) / len(rows) if rows else None
        out[f"geomean_{base}"] = geomean(sp)
    return out


def _ms(x):
    return f"{x:.3f}" if x else "-"


def markdown(rows: list[dict]) -> str:
    out = ["| level/problem | family | eager ms | torch.compile ms | best ms | vs eager | vs compile | % SOL "
           "(bound) | best step's techniques |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ve = f"{r['eager_ms'] / r['best_ms']:.2f}x" if r["best_ms"] and r["eager_ms"] else "miss"
        vc = f"{r['compile_ms'] / r['best_ms']:.2f}x" if r["best_ms"] and r["compile_ms"] else "miss"
        sol = f"{r['pct_sol']:.0f}% ({r['bound']})" if r["pct_sol"] else "-"
        out.append(f"| {r['level']}/{r['number']} | {r['family']} | {_ms(r['eager_ms'])} | {_ms(r['compile_ms'])} | "
                   f"{_ms(r['best_ms'])} | {ve} | {vc} | {sol} | {', '.join(r['techniques']) or '-'} |")
    out += ["", "| level | problems | correct | fast_1 vs eager | fast_1 vs torch.compile | geomean vs eager | "
            "geomean vs torch.compile |", "|---|---|---|---|---|---|---|"]
    for label, sub in (("level 1", [r for r in rows if r["level"] == 1]),
                       ("level 2", [r for r in rows if r["level"] == 2]), ("all", rows)):
        f = level_figures(sub)
        if not f["problems"]:
            continue
        out.append(f"| {label} | {f['problems']} | {f['correct']} ({f['correct'] / f['problems']:.0%}) | "
                   f"{f['fast_1_eager']:.0%} | {f['fast_1_compile']:.0%} | {f['geomean_eager'] or 0:.2f}x | "
                   f"{f['geomean_compile'] or 0:.2f}x |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--campaign", type=Path, default=CAMPAIGN_FILE)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--json", type=Path, help="write the per-problem rows here")
    args = ap.parse_args(argv)
    rows = problems(args.campaign)
    md = markdown(rows)
    print(md)
    if args.out:
        args.out.write_text(md + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
