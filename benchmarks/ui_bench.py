"""Page times of the curation web UI (skillbase.ui) on a large store.

    python benchmarks/ui_bench.py build --home /work/stores/scale-100k     # once: 100k attempts + 20k lessons
    python benchmarks/ui_bench.py measure --home /work/stores/scale-100k --out benchmarks/results/cpu-2026-11-25/ui_bench.json

build: the seeded store (``SkillBase.init``: techniques, the 40 seed skills, the
measured seed experiences) plus the memory benchmark's corpus
(benchmarks/memory_bench.py, seed 0: 400 synthetic tasks, lineages of 3-15
attempts, one lesson per five attempts) cut at 100k attempts. It is recorded in
passes of 10,000 distinct attempts: each pass regenerates the same records
under fresh ids, so only the first pass's ~12k texts are embedded and the rest
come from the embedding cache (as benchmarks/retrieval_eval.py --scale-distinct
does). A file ``<home>.READY`` is touched when the store is complete.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build(home: Path, n_attempts: int, distinct: int) -> dict:
    """Build the scale store at ``home`` (which must not hold a ledger yet)."""
    from benchmarks.retrieval_eval import _record, scale_batches
    from skillbase.api import SkillBase
    from skillbase.config import Settings

    if (home / "ledger.sqlite3").exists():
        raise SystemExit(f"{home} already holds a store; remove it first or measure it")
    t0 = time.monotonic()
    with SkillBase(Settings.from_env(env={}, home=home)) as sb:
        seeded = sb.init()
        store = sb.memory
        computed0 = store.embedder.computed
        done = 0
        for atts, _ in _record(store, scale_batches(n_attempts, distinct)):
            done += len(atts)
            if done % 10_000 < len(atts):
                log(f"{done} attempts recorded ({time.monotonic() - t0:.0f} s)")
        store.sync()
        info = {"attempts_planned": n_attempts, "distinct_attempts_per_pass": distinct,
                "seeded": seeded.model_dump(mode="json"),
                "texts_embedded_during_ingest": store.embedder.computed - computed0,
                "ingest_s": round(time.monotonic() - t0, 1), "counts": store.ledger.counts(),
                "built_by": "benchmarks/ui_bench.py build"}
    (home / "scale_build.json").write_text(json.dumps(info, indent=1))
    Path(f"{home}.READY").touch()
    return info


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the 100k-attempt store")
    b.add_argument("--home", type=Path, required=True)
    b.add_argument("--attempts", type=int, default=100_000)
    b.add_argument("--distinct", type=int, default=10_000)
    a = p.parse_args()
    if a.cmd == "build":
        print(json.dumps(build(a.home, a.attempts, a.distinct), indent=1))


if __name__ == "__main__":
    main()
