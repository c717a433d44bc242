"""Sum up where recalls spent their time, from the lines benchmarks/phases/sitecustomize.py wrote.

    SKILLBASE_PHASES_DIR=/tmp/ph PYTHONPATH=benchmarks/phases python benchmarks/mcp_load.py --clients 16 --calls 100
    python benchmarks/recall_phases.py /tmp/ph [--skip-s 2] [--out phases.json]

Per phase (a timed step inside the retriever's recall; nested steps count in their parents too): how
many recalls entered it, its per-recall ms at p50 / p95 / p99, and its mean ms in the slowest 5 % of
recalls against the rest, which names what the tail is made of. ``--skip-s`` leaves out each
process's first seconds (the clients' synchronized start).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p * (len(s) - 1))))] if s else 0.0


def summarize(rows: list[dict]) -> dict:
    rows = sorted(rows, key=lambda r: r["wall_ms"])
    cut = max(1, len(rows) // 20)
    slow, rest = rows[-cut:], rows[:-cut]
    names = sorted({p for r in rows for p in r["phases"]})

    def ms(r: dict, p: str) -> float:
        return r["phases"].get(p, [0.0, 0])[0]

    out = {"recalls": len(rows),
           "wall_ms": {"p50": pct([r["wall_ms"] for r in rows], .5), "p95": pct([r["wall_ms"] for r in rows], .95),
                       "p99": pct([r["wall_ms"] for r in rows], .99)},
           "thread_cpu_ms_p50": pct([r.get("thread_cpu_ms", 0.0) for r in rows], .5),
           "slowest_5pct": {"n": len(slow), "wall_ms_mean": statistics.fmean(r["wall_ms"] for r in slow),
                            "thread_cpu_ms_mean": statistics.fmean(r.get("thread_cpu_ms", 0.0) for r in slow)},
           "rest_wall_ms_mean": statistics.fmean(r["wall_ms"] for r in rest) if rest else 0.0,
           "phases": {}}
    for p in names:
        v = [ms(r, p) for r in rows]
        out["phases"][p] = {"entered": sum(p in r["phases"] for r in rows), "p50": pct(v, .5), "p95": pct(v, .95),
                            "p99": pct(v, .99), "slowest_mean": statistics.fmean(ms(r, p) for r in slow),
                            "rest_mean": statistics.fmean(ms(r, p) for r in rest) if rest else 0.0}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--skip-s", type=float, default=2.0, help="leave out each process's first seconds (default 2)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows: list[dict] = []
    for f in sorted(args.dir.glob("*.jsonl")):
        mine = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        if mine:
            start = min(r["t"] for r in mine)
            rows += [r for r in mine if r["t"] - start >= args.skip_s]
    if not rows:
        raise SystemExit(f"no recall lines in {args.dir} (was SKILLBASE_PHASES_DIR set for the server?)")
    s = summarize(rows)
    w = s["wall_ms"]
    print(f"{s['recalls']} recalls: wall p50 {w['p50']:.1f} / p95 {w['p95']:.1f} / p99 {w['p99']:.1f} ms; "
          f"thread CPU p50 {s['thread_cpu_ms_p50']:.1f} ms; slowest 5 %: mean {s['slowest_5pct']['wall_ms_mean']:.1f} ms "
          f"({s['slowest_5pct']['thread_cpu_ms_mean']:.1f} of it on CPU), the rest {s['rest_wall_ms_mean']:.1f}")
    print(f"{'phase':<22}{'entered':>8}{'p50':>8}{'p95':>8}{'p99':>8}{'slow 5%':>9}{'rest':>8}  (ms a recall)")
    for p, v in sorted(s["phases"].items(), key=lambda kv: -kv[1]["slowest_mean"]):
        print(f"{p:<22}{v['entered']:>8}{v['p50']:>8.1f}{v['p95']:>8.1f}{v['p99']:>8.1f}{v['slowest_mean']:>9.1f}"
              f"{v['rest_mean']:>8.1f}")
    if args.out:
        args.out.write_text(json.dumps(s, indent=1))


if __name__ == "__main__":
    main()
