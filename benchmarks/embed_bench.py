"""The embedding model under ONNX Runtime (float and int8) against sentence-transformers (torch),
on this machine's CPU.

    python benchmarks/embed_bench.py [--texts 60] [--rounds 2] [--out benchmarks/results/cpu-DATE/embed_bench.json]

All three run the packaged all-MiniLM-L6-v2 with the thread count the store uses (half the cores,
1-4), on the same lesson-sized texts (about 50 word pieces, each distinct, so no cache answers): one
text per model call (what a lone record_lesson or an uncached query costs) and batches of 64 (what
the index follower sends when writes pile up; the int8 model still runs them one text a call).
The runtimes take turns, in reverse order every other round. Reported: ms per text (median over
calls, each round and their mean), the largest element difference between torch's and the float
export's vectors, the smallest cosine between the int8 and the float vectors, and how long a fresh
process takes from start to its first vector through the store's default embedder (int8) with the
exports already on disk (and whether it imported torch).
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
    ap.add_argument("--texts", type=int, default=60, help="one-text calls per runtime and round (batches: 4 of 64)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of all three runtimes, alternating their order")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    result: dict = {"load_average_before": [round(x, 2) for x in os.getloadavg()]}
    kinds = {"torch": {"backend": "torch"}, "onnx": {"backend": "onnx", "precision": "fp32"},
             "onnx-int8": {"backend": "onnx", "precision": "int8"}}
    embedders = {k: Embedder(**kw) for k, kw in kinds.items()}
    for e in embedders.values():
        e.embed(["warm up"])
    vectors = {k: e._m.encode([LESSON.format(i=j) for j in range(16)], None) for k, e in embedders.items()}
    for k, e in embedders.items():
        result[k] = {"runtime": e.runtime, "vectors": e.name, "threads": e._m.threads,
                     "one_text_ms": [], "batch_64_ms_per_text": []}
    for r in range(args.rounds):
        for k in (list(kinds) if r % 2 == 0 else list(kinds)[::-1]):
            tag = f"{k}-r{r}-"
            single = [LESSON.format(i=f"{tag}{i}") for i in range(args.texts)]
            batched = [LESSON.format(i=f"{tag}b{i}") for i in range(256)]
            result[k]["one_text_ms"].append(round(per_text_ms(embedders[k], single, 1), 2))
            result[k]["batch_64_ms_per_text"].append(round(per_text_ms(embedders[k], batched, 64), 2))
            print(k, f"round {r}:", result[k]["one_text_ms"][-1], result[k]["batch_64_ms_per_text"][-1], flush=True)
    mean = {k: {m: statistics.fmean(result[k][m]) for m in ("one_text_ms", "batch_64_ms_per_text")} for k in kinds}
    for k in kinds:
        result[k].update({f"{m}_mean": round(v, 2) for m, v in mean[k].items()})
    result["max_abs_diff_torch_onnx"] = float(abs(vectors["torch"] - vectors["onnx"]).max())
    result["min_cos_int8_onnx"] = float((vectors["onnx-int8"] * vectors["onnx"]).sum(axis=1).min())
    for m, short in (("one_text_ms", "one_text"), ("batch_64_ms_per_text", "batch_64")):
        result[f"ratio_{short}_torch_over_onnx"] = round(mean["torch"][m] / mean["onnx"][m], 2)
        result[f"ratio_{short}_onnx_over_int8"] = round(mean["onnx"][m] / mean["onnx-int8"][m], 2)
    out = subprocess.run([sys.executable, "-c", FIRST_VECTOR], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    secs, runtime, torch_imported = json.loads(out.stdout.strip().splitlines()[-1])
    result["fresh_process_first_vector_s"] = round(secs, 2)
    result["fresh_process_runtime"] = runtime
    result["fresh_process_imported_torch"] = torch_imported
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({k: v for k, v in result.items() if k not in kinds}, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
