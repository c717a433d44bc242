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
    ("embedding: model compute (ONNX or torch)", r"\((torch|transformers|sentence_transformers|tokenizers|onnxruntime)/"),
    ("embedding: waiting for the model", r"_Model\.(encode|load) \(memory/embeddings\.py"),
    ("ledger: group commit (waiting for the batch's fsync)", r"Ledger\._commit \(memory/ledger\.py"),
    ("index: waiting for the follower", r"Follower\.wait \(memory/"),
    ("embedding: cache (SQLite)", r"EmbeddingCache\.\w+ \(memory/embeddings\.py"),
    ("chroma", r"\(chromadb/"),
    # peek_seq as the innermost frame: waiting for the thread lock it took before this branch.
    ("index lock (file + thread)", r"\(filelock/|VectorIndex\.(session|peek_seq) \(memory/vectors\.py"),
    ("index mirror (SQLite)", r"Mirror\.\w+ \(memory/vectors\.py"),
    ("ledger (SQLite I/O and its lock)", r"\(memory/ledger\.py"),
    ("reasoning graph", r"\(memory/graph\.py|Store\.(graph|_catch_up_graph|_load_graph) \(memory/store\.py|networkx/"),
    ("lexical index", r"\(retrievers/lexical\.py|bm25s/"),
    ("retrieval (python)", r"\(retrievers/"),
    ("pydantic validation / dumps", r"\(pydantic|pydantic_core"),
    ("toolchain (benchmark worker)", r"\(skillbase/toolchain/"),
    ("store bookkeeping", r"\(memory/(?!batching)"),  # a batcher frame: its caller says which
    ("tool layer", r"\(skillbase/|\(mcp_server/"),
]
TOOL = re.compile(r"^(\w+) \(skillbase/tools\.py:\d+\)$")
IDLE_LOOP = re.compile(r"select \(selectors\.py|_run_once \(asyncio/base_events\.py|run_forever|Runner\.run \(asyncio")


def idle_worker(frames: list[str]) -> bool:
    """A worker thread waiting for work: nothing below anyio's loop but the queue."""
    i = next((k for k, f in enumerate(frames) if f.startswith("WorkerThread.run (anyio/")), None)
    return i is None or all(re.match(r"(Queue\.get|Condition\.wait) ", f) for f in frames[i + 1:])


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
    per_tool: dict[str, Counter[str]] = {}
    leaves: Counter[str] = Counter()
    loop: Counter[str] = Counter()
    follower: Counter[str] = Counter()
    idle_workers = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        thread, _, rest = stack.partition(";")
        frames = rest.split(";") if rest else []
        if "AnyIO worker thread" in thread:
            if idle_worker(frames):
                idle_workers += n
                continue
            b = bucket(frames)
            workers[b] += n
            tool = next((m.group(1) for f in frames if (m := TOOL.match(f))), "other")
            per_tool.setdefault(tool, Counter())[b] += n
            leaves[frames[-1]] += n
        elif "index-follower" in thread:
            waiting = bool(frames) and frames[-1].startswith("Condition.wait") and any(
                f.startswith("Follower._loop") for f in frames[-3:])
            follower["waiting for writes" if waiting else bucket(frames)] += n
        elif "MainThread" in thread:
            leaf = frames[-1] if frames else ""
            loop["event loop idle (waiting for I/O)" if IDLE_LOOP.search(leaf)
                 else "event loop busy (HTTP, MCP SDK, JSON)"] += n
    busy = sum(workers.values()) or 1
    out = [f"tool-call (worker) thread samples: {busy} busy, {idle_workers} idle (py-spy --idle: wall-clock sampling)"]
    for name, n in workers.most_common():
        out.append(f"  {100 * n / busy:5.1f}%  {name}")
    for tool, c in sorted(per_tool.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(c.values())
        parts = ", ".join(f"{name} {100 * k / total:.0f}%" for name, k in c.most_common(6))
        out.append(f"  {tool}: {total} samples = {parts}")
    total_f = sum(follower.values())
    if total_f:
        out.append(f"follower thread samples: {total_f}")
        for name, n in follower.most_common(6):
            out.append(f"  {100 * n / total_f:5.1f}%  {name}")
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
