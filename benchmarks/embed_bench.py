"""The embedding model under ONNX Runtime against sentence-transformers (torch), on this machine's CPU.

    python benchmarks/embed_bench.py [--texts 60] [--out benchmarks/results/cpu-DATE/embed_bench.json]

Both run the packaged all-MiniLM-L6-v2 with the thread count the store uses (half the cores, 1-4),
on the same lesson-sized texts (about 50 word pieces, each distinct, so no cache answers): one text
per model call (what a lone record_lesson or an uncached query costs) and batches of 64 (what the
index follower sends when writes pile up). Reported: ms per text (median over calls), the largest
element difference between the two runtimes' vectors, and how long a fresh process takes from
start to its first vector through the store's embedder with the export already on disk (and
whether it imported torch).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from skillbase.memory.embeddings import Embedder  # noqa: E402

LESSON = ("Split-K with a tf32x3 epilogue on the 256x524288x256 GEMM gained x{i} because the square tiles "
          "left most SMs idle; autotuning the split count balanced the grid (lesson {i}).")

FIRST_VECTOR = (
    "import json, sys, time\n"
    "t0 = time.perf_counter()\n"
    "from skillbase.memory.embeddings import Embedder\n"
    "e = Embedder()\n"
    "e.embed(['a first vector'])\n"
    "print(json.dumps([time.perf_counter() - t0, e.runtime.split(' (')[0], 'torch' in sys.modules]))\n"
)


def per_text_ms(embedder: Embedder, texts: list[str], batch: int) -> float:
    """Median ms per text over model calls of ``batch`` texts (each text new to the model)."""
    times = []
    for i in range(0, len(texts) - batch + 1, batch):
        t0 = time.perf_counter()
        embedder._m.encode(texts[i:i + batch], None)
        times.append((time.perf_counter() - t0) * 1e3 / batch)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=60, help="one-text calls per runtime (batches: 4 of 64)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    result: dict = {"load_average_before": [round(x, 2) for x in os.getloadavg()]}
    vectors = {}
    for backend in ("torch", "onnx"):
        e = Embedder(backend=backend)
        e.embed(["warm up"])
        tag = f"{backend}-"
        single = [LESSON.format(i=f"{tag}{i}") for i in range(args.texts)]
        batched = [LESSON.format(i=f"{tag}b{i}") for i in range(256)]
        result[backend] = {"runtime": e.runtime, "threads": e._m.threads,
                           "one_text_ms": round(per_text_ms(e, single, 1), 2),
                           "batch_64_ms_per_text": round(per_text_ms(e, batched, 64), 2)}
        vectors[backend] = e._m.encode([LESSON.format(i=j) for j in range(16)], None)
        print(backend, result[backend], flush=True)
    result["max_abs_diff"] = float(abs(vectors["torch"] - vectors["onnx"]).max())
    result["ratio_one_text"] = round(result["torch"]["one_text_ms"] / result["onnx"]["one_text_ms"], 2)
    result["ratio_batch_64"] = round(result["torch"]["batch_64_ms_per_text"] / result["onnx"]["batch_64_ms_per_text"], 2)
    out = subprocess.run([sys.executable, "-c", FIRST_VECTOR], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    secs, runtime, torch_imported = json.loads(out.stdout.strip().splitlines()[-1])
    result["fresh_process_first_vector_s"] = round(secs, 2)
    result["fresh_process_runtime"] = runtime
    result["fresh_process_imported_torch"] = torch_imported
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({k: v for k, v in result.items() if k not in ("torch", "onnx")}, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
