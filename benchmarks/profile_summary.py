"""Where a loaded server's time goes, from a py-spy raw profile (``mcp_load.py --profile DIR``).

    python benchmarks/profile_summary.py /tmp/prof/server.pyspy.txt [--top 20]

py-spy samples every thread at a fixed rate (``--idle``: waiting threads too), so a thread's
samples are its wall time. Each sample of a tool-call thread (anyio's worker threads) is put in
one bucket by the innermost frame that says what it is doing: computing embeddings, waiting for
the model, chroma, the ledger (SQLite I/O or its lock), the index lock, the reasoning graph,
retrieval in Python, validation and serialization. The event-loop thread (uvicorn, the MCP SDK)
is counted apart: busy or idle. Percentages are shares of the worker threads' busy samples.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# (bucket, pattern on one frame "func (file:line)"), tried from the innermost frame outwards.
RULES = [
    ("embedding: model compute (torch)", r"\((torch|transformers|sentence_transformers|tokenizers)/"),
    ("embedding: waiting for the model", r"_Model\.(encode|load) \(memory/embeddings\.py|_Batcher\.\w+ \(memory/"),
    ("embedding: cache (SQLite)", r"EmbeddingCache\.\w+ \(memory/embeddings\.py"),
    ("chroma", r"\(chromadb/"),
    ("index lock (file + thread)", r"\(filelock/|VectorIndex\.session \(memory/vectors\.py"),
    ("index mirror (SQLite)", r"Mirror\.\w+ \(memory/vectors\.py"),
    ("ledger (SQLite I/O and its lock)", r"\(memory/ledger\.py"),
    ("reasoning graph", r"\(memory/graph\.py|Store\.(graph|_catch_up_graph|_load_graph) \(memory/store\.py|networkx/"),
    ("lexical index", r"\(retrievers/lexical\.py|bm25s/"),
    ("retrieval (python)", r"\(retrievers/"),
    ("pydantic validation / dumps", r"\(pydantic|pydantic_core"),
    ("toolchain (benchmark worker)", r"\(skillbase/toolchain/"),
    ("store bookkeeping", r"\(memory/"),
    ("tool layer", r"\(skillbase/|\(mcp_server/"),
]
IDLE_WORKER = re.compile(r"WorkerThread\.run \(anyio/_backends/_asyncio\.py:\d+\)$")


def bucket(frames: list[str]) -> str:
    """The bucket of one worker-thread stack (frames outermost first)."""
    for frame in reversed(frames):
        for name, pattern in RULES:
            if re.search(pattern, frame):
                return name
    return "other"


def summarize(path: Path, top: int = 15) -> str:
    """A text report of the profile at ``path``."""
    workers: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    loop: Counter[str] = Counter()
    idle_workers = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        thread, _, rest = stack.partition(";")
        frames = rest.split(";") if rest else []
        if "AnyIO worker thread" in thread:
            if not frames or IDLE_WORKER.search(frames[-1]):
                idle_workers += n
                continue
            workers[bucket(frames)] += n
            leaves[frames[-1]] += n
        elif "MainThread" in thread or "process" in thread:
            leaf = frames[-1] if frames else ""
            idle = re.search(r"select \(selectors\.py|_run_once \(asyncio/base_events\.py|run_forever", leaf)
            loop["event loop idle (waiting for I/O)" if idle else "event loop busy (HTTP, MCP SDK, JSON)"] += n
    busy = sum(workers.values()) or 1
    out = [f"worker-thread samples: {busy} busy, {idle_workers} idle (py-spy --idle, wall-clock sampling)"]
    for name, n in workers.most_common():
        out.append(f"  {100 * n / busy:5.1f}%  {name}")
    total_loop = sum(loop.values()) or 1
    out.append(f"event-loop thread samples: {total_loop}")
    for name, n in loop.most_common():
        out.append(f"  {100 * n / total_loop:5.1f}%  {name}")
    out.append(f"top {top} innermost frames of busy worker threads:")
    for frame, n in leaves.most_common(top):
        out.append(f"  {100 * n / busy:5.1f}%  {frame}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", type=Path)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    print(summarize(args.profile, args.top))


if __name__ == "__main__":
    main()
