"""The int8 embedding model's threads on this machine: latency and CPU a text, spinning or not.

The store runs its model one text a call, one call at a time per process, with ONNX Runtime's
intra-op pool of ``threads`` (half the cores, 1-4). By default that pool's threads spin between
operators and after each call; on a many-core server they then hold their cores while the process
does anything else. For each thread count and spinning setting this embeds distinct lesson-sized
texts one at a time, with a pause between calls like a server's (``--gap-ms``), and reports the
median ms a text (wall clock) and the process's CPU ms a text (every thread's, spinning included).

    python benchmarks/embed_threads.py [--threads 1,2,4] [--texts 200] [--gap-ms 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LESSON = ("Split-K with a tf32x3 epilogue on the 256x524288x256 GEMM gained x{i} because the square tiles "
          "left most SMs idle; autotuning the split count balanced the grid (lesson {i}, run {r}).")


def encoder_path() -> tuple[Path, Path]:
    """The int8 export the store would open, and its model folder (made by opening the store's embedder)."""
    from skillbase.memory.embeddings import Embedder, default_model_path
    from skillbase.memory.onnx_encoder import cache_dir, model_key, quantized_path

    model_dir = Path(os.environ.get("SKILLBASE_EMBEDDING_MODEL") or default_model_path())
    path = quantized_path(cache_dir() / f"{model_key(model_dir)}.onnx")
    if not path.is_file():
        Embedder(os.environ.get("SKILLBASE_EMBEDDING_MODEL"), device="cpu").embed(["warm"])
    return path, model_dir


def measure(path: Path, model_dir: Path, threads: int, spin: bool, texts: int, gap_s: float, run: int) -> dict:
    from skillbase.memory.onnx_encoder import OnnxEncoder

    enc = OnnxEncoder(path, model_dir, threads, one_at_a_time=True, spin=spin)
    for i in range(10):
        enc.encode([LESSON.format(i=-i, r=run)])
    walls = []
    cpu0, t0 = time.process_time(), time.perf_counter()
    for i in range(texts):
        s = time.perf_counter()
        enc.encode([LESSON.format(i=i, r=run)])
        walls.append((time.perf_counter() - s) * 1e3)
        time.sleep(gap_s)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    return {"threads": threads, "spin": spin, "texts": texts, "gap_ms": gap_s * 1e3,
            "ms_per_text_p50": round(statistics.median(walls), 3),
            "ms_per_text_p95": round(sorted(walls)[int(0.95 * (len(walls) - 1))], 3),
            "cpu_ms_per_text": round(cpu * 1e3 / texts, 3),
            "cores_busy": round(cpu / elapsed, 3)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--texts", type=int, default=200)
    ap.add_argument("--gap-ms", type=float, default=2.0, help="pause between calls (default 2 ms)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds over every setting, order reversed in each other one")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    path, model_dir = encoder_path()
    settings = [(int(t), spin) for t in args.threads.split(",") for spin in (True, False)]
    results = []
    for r in range(args.rounds):
        for threads, spin in (settings if r % 2 == 0 else settings[::-1]):
            row = measure(path, model_dir, threads, spin, args.texts, args.gap_ms / 1e3, r)
            row["round"] = r
            results.append(row)
            print(f"threads {threads} spin {'on ' if spin else 'off'}: {row['ms_per_text_p50']:6.2f} ms a text "
                  f"(p95 {row['ms_per_text_p95']:6.2f}), CPU {row['cpu_ms_per_text']:6.2f} ms a text, "
                  f"{row['cores_busy']:.2f} cores busy", flush=True)
    out = {"benchmark": "embed_threads", "cores": os.cpu_count(), "model": str(path.name), "results": results}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
