"""Page times of the curation web UI (skillbase.ui) on a large store.

    python -m benchmarks.ui_bench build --home /work/stores/scale-100k     # once: 100k attempts + 20k lessons
    python -m benchmarks.ui_bench measure --home /work/stores/scale-100k --out benchmarks/results/cpu-2026-11-25/ui_bench.json

build: the seeded store (``SkillBase.init``: techniques, the 40 seed skills, the
measured seed experiences) plus the memory benchmark's corpus
(benchmarks/memory_bench.py, seed 0: 400 synthetic tasks, lineages of 3-15
attempts, one lesson per five attempts) cut at 100k attempts. It is recorded in
passes of 10,000 distinct attempts: each pass regenerates the same records
under fresh ids, so only the first pass's ~12k texts are embedded and the rest
come from the embedding cache (as benchmarks/retrieval_eval.py --scale-distinct
does). A file ``<home>.READY`` is touched when the store is complete.

measure: `skillbase ui`'s app (no token) under uvicorn on a loopback port in this
process, asked by an httpx client: page time = wall clock of one GET, request sent
to the whole body received (HTML rendered; the browser's drawing of the plots is
not included). Each page kind is asked ``--repeat`` times over a sample of its
subjects (tasks, skills, attempts) after one warm-up request per kind; the
first request of each kind after the server starts is reported apart ("cold").
The store is only read (the UI opens it as any SkillBase does).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def measure(home: Path, repeat: int, seed: int) -> dict:
    """Page times of the UI over the store at ``home`` (see the module docstring)."""
    import socket
    import threading

    import httpx
    import uvicorn

    from skillbase.api import SkillBase
    from skillbase.config import Settings
    from skillbase.ui import standalone_app

    rng = random.Random(seed)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    sb = SkillBase(Settings.from_env(env={}, home=home))
    counts = sb.memory.ledger.counts()
    opened_s = time.perf_counter() - t0
    app = standalone_app(sb, host="127.0.0.1", port=port, token=None)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}/ui"
    client = httpx.Client(timeout=120)

    def get(path: str) -> float:
        start = time.perf_counter()
        r = client.get(base + path)
        ms = (time.perf_counter() - start) * 1e3
        if r.status_code != 200:
            raise SystemExit(f"{path}: HTTP {r.status_code}: {r.text[:300]}")
        return ms

    view = sb.views
    cold = {"tasks list": get("/tasks")}
    tasks, _ = view.task_rows(sort="attempts", limit=10_000)
    skills = [s.name for s in sb.list_skills("approved") if s.evidence]
    attempt_ids = [r["id"] for t in rng.sample(tasks, min(20, len(tasks)))
                   for r in view.attempt_rows(task=t["task"], limit=5)[0]]
    families = sorted({t["family"] for t in tasks})
    gpus = view.facets()["hardware"]
    kinds = {
        "tasks list": lambda: "/tasks",
        "tasks list, filtered (family, GPU, sort)": lambda: (
            f"/tasks?family={rng.choice(families)}&gpu={rng.choice(gpus)}&sort=eager"),
        "tasks list, page 5": lambda: "/tasks?page=5",
        "task page": lambda: f"/tasks/{rng.choice(tasks)['task']}",
        "attempt page": lambda: f"/attempts/{rng.choice(attempt_ids)}",
        "skills list": lambda: "/skills",
        "skill page": lambda: f"/skills/{rng.choice(skills)}",
        "review queue": lambda: "/review",
    }
    cold["task page"] = get(kinds["task page"]())
    cold["skill page"] = get(kinds["skill page"]())
    out = {}
    for name, path in kinds.items():
        get(path())  # warm-up
        times = [get(path()) for _ in range(repeat)]
        out[name] = {"n": repeat, "p50_ms": round(statistics.median(times), 1), "p95_ms": round(_pct(times, 0.95), 1),
                     "max_ms": round(max(times), 1)}
        log(f"{name}: p50 {out[name]['p50_ms']} ms, p95 {out[name]['p95_ms']} ms")
    biggest = tasks[0]
    server.should_exit = True
    thread.join(10)
    sb.close()
    return {"home": str(home), "counts": counts, "store_open_s": round(opened_s, 2),
            "cold_ms": {k: round(v, 1) for k, v in cold.items()}, "pages": out,
            "largest_task": {"task": biggest["task"], "attempts": biggest["attempts"]},
            "load_average": os.getloadavg(), "machine": f"{platform.node()}, {os.cpu_count()} CPUs",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def markdown(r: dict) -> str:
    """The results as the table docs/performance.md shows."""
    lines = [f"Store: {r['counts']['attempts']:,} attempts, {r['counts']['experiences']:,} lessons, "
             f"{r['counts'].get('skills', 0)} skills; load average during the run {', '.join(f'{x:.1f}' for x in r['load_average'])}.",
             "", "| page | n | p50 (ms) | p95 (ms) | max (ms) |", "|---|---|---|---|---|"]
    for name, p in r["pages"].items():
        lines.append(f"| {name} | {p['n']} | {p['p50_ms']} | {p['p95_ms']} | {p['max_ms']} |")
    lines += ["", "First request of a kind after the server started (ms): "
              + ", ".join(f"{k} {v}" for k, v in r["cold_ms"].items())]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the 100k-attempt store")
    b.add_argument("--home", type=Path, required=True)
    b.add_argument("--attempts", type=int, default=100_000)
    b.add_argument("--distinct", type=int, default=10_000)
    m = sub.add_parser("measure", help="page times over a store")
    m.add_argument("--home", type=Path, required=True)
    m.add_argument("--repeat", type=int, default=60, help="requests per page kind")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--out", type=Path, default=None, help="write JSON here and markdown beside it (.md)")
    a = p.parse_args()
    if a.cmd == "build":
        print(json.dumps(build(a.home, a.attempts, a.distinct), indent=1))
    else:
        r = measure(a.home, a.repeat, a.seed)
        text = markdown(r)
        if a.out:
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps(r, indent=1))
            a.out.with_suffix(".md").write_text(text + "\n")
        print(text)


if __name__ == "__main__":
    main()
