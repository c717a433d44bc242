"""MCP load: many agents calling one `skillbase serve --transport http` at once.

    nice -n 10 python benchmarks/mcp_load.py                                 # 1, 4, 16, 64 clients, memory mix
    nice -n 10 python benchmarks/mcp_load.py --clients 16 --calls 100 --mix bench     # the load bar
    nice -n 10 python benchmarks/mcp_load.py --clients 16 --chroma server             # chroma in server mode
    python benchmarks/mcp_load.py --home /path/to/store --clients 1 --calls 60        # a copy of a big store
    python benchmarks/mcp_load.py --clients 16 --profile /tmp/prof                    # py-spy the server
    python benchmarks/mcp_load.py --clients 16 --profile /tmp/prof --profile-cpu --profile-clients  # and the clients
    python benchmarks/mcp_load.py --clients 16 --calls 150 --rate 48,96,144                # paced: latency at a given load
    python benchmarks/mcp_load.py --clients 16 --calls 150 --servers 2 --chroma server     # two server processes, one store
    python benchmarks/mcp_load.py --clients 16 --calls 150 --workers 2 --chroma server     # the same on one port
    python benchmarks/mcp_load.py --clients 16 --calls 150 --server-cpus 0,1 --client-cpus 2-9   # clients off the server's cores
    python benchmarks/mcp_load.py --clients 16 --calls 150 --workers 2 --chroma server --novel-queries   # every query new
    python benchmarks/mcp_load.py --canned --clients 16 --calls 150 --servers 2                # the MCP stack alone
    python benchmarks/mcp_load.py --canned --burn recall=9,record_lesson=1.5 --clients 16 --calls 150 --servers 2

The server is the real one, started as a subprocess (``python -m skillbase serve --transport
http`` with a bearer token, on a loopback port) over a seeded store (a fresh one, or a copy of
``--home``; the original is never written). N clients are real MCP streamable-HTTP sessions
(the SDK's ``Client``), spread over a few client processes so the load generator is not one
GIL, started together behind a barrier after every session is initialized. Each client makes
``--calls`` calls of a fixed mix, rotated per client so every tool runs all the time:

- ``memory``: recall (task or plain-words queries, rotating; with ``--novel-queries`` every plain-words
  query unique, so the server's cache never has its vector), record_lesson (a unique lesson text per
  call, tagged with this run's session), attempt_history;
- ``bench``: the same plus benchmark_kernel of a built-in solution on the CPU (Triton interpreter).

By default each client calls again as soon as it is answered (a closed loop with no think time: the
server runs flat out, and its throughput is the figure). With ``--rate R`` the 16 (or N) clients
together offer R calls/s: each calls on a fixed schedule, every N/R s, their phases spread evenly; a
call whose slot has passed (its client still waiting on the previous one) is sent at once, and its
latency counts from its slot, not from when it was sent, so a server that falls behind shows it in
the figures instead of slowing the clients down (no coordinated omission).

Reported per tool: latency p50/p95/p99 (client round trip, time.perf_counter around call_tool; paced: from the call's slot),
again over the calls begun 2 s or more after the start (every client starts at one instant, and
its first calls meet every queue at once), and the server's in-tool time
(``_meta['skillbase/work_ms']``); throughput (calls answered / wall seconds from the barrier to the
last answer); CPU per answered call of the server (by thread role,
from /proc: event loop, tool threads, index follower, chroma's native threads) and of the client
processes (uvloop when installed, ``--loop``); the load average around the run; errors; records
written (ids answered) versus found in the ledger afterwards (by session) and duplicates (same
lesson text stored twice). Alongside the load, a probe in the parent process records a lesson
with a unique phrase through one session and polls recall through another until the lesson comes
back: the cross-client visibility delay. For a poll that misses it (up to three a probe) the probe
reports what that answer held instead, with the score parts (``missed``).

With ``--servers N`` the store is served by N ``skillbase serve`` processes at once, each on its own
port (the scale-out docs/scale.md describes: several servers over one store, here without a balancer
in front): client process ``g`` talks to server ``g mod N``, the probe writes through the first server
and polls through the last (a lesson crossing processes), and the server CPU is the sum over all N.
``--chroma server`` is the arrangement meant for it (one consistent index for every process); with the
embedded index every process reopens its chroma client after another one wrote. ``--workers N`` is the
same store served by one ``skillbase serve --workers N`` on one port (N worker processes, each client
connection handed to one of them by the kernel); the server CPU is the sum over its workers.

``--server-cpus`` / ``--client-cpus`` pin each side (``sched_setaffinity``, inherited by the server's
workers and a chroma server): on a host with cores to spare, a server held to two of them with the
clients on others measures the server alone, as agents on other machines would load it; both on the
same two is this benchmark's 2-core arrangement, for comparing the host's cores with another
machine's. The busy share of each side's CPUs is reported apart.

``--canned`` runs the same load against the same server whose three tools answer from memory
(``mcp_canned_server.py``): what the MCP SDK on both sides, HTTP and the server's own wrapper cost,
and how fast the loop can go with skillbase's work taken out. ``--burn tool=ms,...`` puts a known
CPU cost back into each canned call (a Python loop, holding the interpreter lock): latency as a
function of what a call costs, for setting a budget.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import multiprocessing as mp
import os
import platform
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

from json_report import write_report  # this folder is the script's first path entry

ROOT = Path(__file__).resolve().parents[1]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The client processes inherit the token through the environment (they import this module afresh).
TOKEN = os.environ.setdefault("SKILLBASE_LOAD_TOKEN", "load-" + uuid.uuid4().hex)
RECALLS = [{"task": "row_softmax", "k": 5}, {"query": "softmax rows too wide for registers", "k": 5},
           {"task": "matmul", "k": 5}, {"query": "shared memory bank conflicts in a transpose", "k": 5},
           {"task": "layernorm", "k": 5}, {"query": "memory bound elementwise kernel, vectorized loads", "k": 5}]
TASKS = ["row_softmax", "matmul", "layernorm", "relu"]
LESSONS = ["Splitting each row across two programs halved the time once rows no longer fit in registers",
           "Loading 16 bytes per thread made the copy reach 90% of the memory roof",
           "Padding the shared tile by one column removed the bank conflicts of the transpose",
           "Fusing the bias and GELU into the GEMM epilogue saved one full read of the output"]
STARTUP_S = 2.0  # calls begun this long after the start also get latencies of their own ("after start")
MIXES = {"memory": ("recall", "record_lesson", "attempt_history"),
         "bench": ("recall", "record_lesson", "benchmark_kernel", "attempt_history")}
BENCH_SOLUTION = ROOT / "seeds" / "tasks" / "relu" / "optimized.py"


# ---------------------------------------------------------------------------
# the server
# ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python_path() -> str:
    """This checkout first, then whatever the caller's PYTHONPATH holds (wheels unpacked to a folder
    on a machine without a package index: benchmarks/gpu_suite.sh)."""
    return os.pathsep.join([str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])


def seed_home(home: Path, source: Path | None, chroma_url: str | None) -> None:
    """A store to load: a copy of ``source`` (never written), or a fresh one seeded by ``skillbase init``."""
    if source is not None:
        shutil.copytree(source, home, ignore=shutil.ignore_patterns("*.lock"))
    env = {**os.environ, "SKILLBASE_HOME": str(home), "PYTHONPATH": python_path()}
    if chroma_url:
        env["SKILLBASE_CHROMA_URL"] = chroma_url
    if source is None or chroma_url:
        subprocess.run([sys.executable, "-m", "skillbase", "init", "--json"], env=env, check=True,
                       stdout=subprocess.DEVNULL)


def parse_cpus(text: str | None) -> set[int] | None:
    """'0,1' or '2-9' or '0,4-7' -> the CPU numbers; None when not given."""
    if not text:
        return None
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def _pinned(cpus: set[int] | None):
    """A ``preexec_fn`` that runs the child on ``cpus`` only (its own children inherit that)."""
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def start_chroma(path: Path, cpus: set[int] | None = None) -> tuple[subprocess.Popen, str]:
    """A real `chroma run` server on a loopback port (the CLI the chromadb wheel ships), on ``cpus``."""
    exe = Path(sys.executable).parent / "chroma"
    port = _free_port()
    log = open(path / "chroma.log", "wb")
    proc = subprocess.Popen([str(exe if exe.exists() else shutil.which("chroma")), "run", "--path",
                             str(path / "chroma-data"), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, preexec_fn=_pinned(cpus))
    url = f"http://127.0.0.1:{port}"
    _wait(lambda: urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).read(), proc, "chroma")
    return proc, url


def start_server(home: Path, port: int, chroma_url: str | None, log_path: Path, workers: int = 1,
                 cpus: set[int] | None = None, canned: bool = False, stateless: bool = False,
                 burn: str | None = None) -> subprocess.Popen:
    """`skillbase serve --transport http` with a token on 127.0.0.1:port (``workers`` processes), on ``cpus``;
    with ``canned``, the same server answering from memory (mcp_canned_server.py; ``stateless`` as a worker)."""
    env = {**os.environ, "SKILLBASE_HOME": str(home), "SKILLBASE_TOKEN": TOKEN, "PYTHONPATH": python_path(),
           "SKILLBASE_DEVICE": "cpu"}
    if chroma_url:
        env["SKILLBASE_CHROMA_URL"] = chroma_url
    cmd = [sys.executable, "-m", "skillbase", "serve", "--transport", "http", "--port", str(port),
           "--root", str(ROOT), *(["--workers", str(workers)] if workers > 1 else [])]
    if canned:
        cmd = [sys.executable, str(Path(__file__).resolve().parent / "mcp_canned_server.py"), "--port", str(port),
               *(["--stateless"] if stateless else []), *(["--burn", burn] if burn else [])]
    proc = subprocess.Popen(cmd, env=env, cwd=str(ROOT), stdout=open(log_path, "wb"), stderr=subprocess.STDOUT,
                            preexec_fn=_pinned(cpus))

    def ready():
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass

    _wait(ready, proc, "skillbase serve", log_path)
    return proc


def attach_py_spy(pid: int, out_dir: Path, cpu: bool = False, name: str = "server",
                  gil: bool = False) -> subprocess.Popen:
    """py-spy sampling every thread of a warmed-up process until stopped: the profile covers
    the load only, not the process's start. Wall clock (waiting threads too) by default; with
    ``cpu``, only threads running on a CPU (where the process's CPU time goes); with ``gil``,
    only the thread holding the interpreter lock (where the process's serial time goes)."""
    spy = Path(sys.executable).parent / "py-spy"
    kind = "gil." if gil else "cpu." if cpu else ""
    out = out_dir / f"{name}.{kind}pyspy.txt"
    log = out_dir / f"py-spy.{name}.log"
    mode = ["--gil"] if gil else [] if cpu else ["--idle"]
    proc = subprocess.Popen([str(spy), "record", "--pid", str(pid), *mode, "--threads",
                             "--rate", "200", "--format", "raw", "--nonblocking", "-o", str(out)],
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    time.sleep(1.0)
    if proc.poll() is not None:
        raise SystemExit(f"py-spy could not attach: {log.read_text()[-1000:]}")
    return proc


def _wait(check, proc: subprocess.Popen, what: str, log_path: Path | None = None) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            check()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                tail = log_path.read_text()[-2000:] if log_path and log_path.exists() else ""
                raise SystemExit(f"{what} did not start: {tail}")
            time.sleep(0.2)


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(2)  # SIGINT: uvicorn shuts down cleanly, py-spy writes its profile
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------------------
# the clients
# ---------------------------------------------------------------------------


def call_args(tool: str, client: int, n: int, label: str, novel: bool = False) -> dict:
    """The arguments of call ``n`` of ``client``: fixed, rotating, each lesson text unique; with
    ``novel``, each plain-words recall query unique too (the model embeds every one)."""
    if tool == "recall":
        args = RECALLS[(client + n) % len(RECALLS)]
        if novel and "query" in args:
            args = {**args, "query": f"{args['query']} ({label} client {client} call {n})"}
        return args
    if tool == "record_lesson":
        return {"lesson": f"{LESSONS[(client + n) % len(LESSONS)]} ({label} client {client} call {n})",
                "task": TASKS[(client + n) % len(TASKS)], "session": label}
    if tool == "attempt_history":
        return {"task": TASKS[(client + n) % len(TASKS)], "limit": 20}
    if tool == "benchmark_kernel":
        return {"task": "relu", "source_path": str(BENCH_SOLUTION), "device": "cpu", "session": label}
    raise ValueError(tool)


def _session(url: str):
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    import httpx2

    http = create_mcp_http_client(headers={"authorization": f"Bearer {TOKEN}"},
                                  timeout=httpx2.Timeout(600.0, connect=60.0))
    return http, Client(streamable_http_client(url, http_client=http))


async def _client(url: str, client: int, calls: int, mix: tuple[str, ...], label: str, opened, go,
                  pace: tuple[float, float] | None = None, novel: bool = False) -> list[dict]:
    """One MCP session's calls. ``pace``: (seconds between its calls, its phase): call n's slot is
    phase + n x interval after the start; latency counts from the slot (see the module's text)."""
    from skillbase.mcp_server.server import WORK_MS_KEY

    rows = []
    http, session = _session(url)
    async with http, session as c:
        await c.list_tools()
        opened()
        await go.wait()
        t0 = time.perf_counter()
        for n in range(calls):
            tool = mix[(client + n) % len(mix)]
            args = call_args(tool, client, n, label, novel)
            start = time.perf_counter()
            if pace is not None:
                slot = t0 + pace[1] + n * pace[0]
                if slot > start:
                    await asyncio.sleep(slot - start)
                start = slot
            try:
                res = await c.call_tool(tool, args)
                ms = (time.perf_counter() - start) * 1e3
                data = res.structured_content or {}
                err = res.content[0].text[:300] if res.is_error else None
                rows.append({"tool": tool, "ms": ms, "end": time.time(), "error": err, "client": client,
                             "work_ms": (res.meta or {}).get(WORK_MS_KEY),
                             "id": data.get("id") or data.get("attempt_id")})
            except Exception as e:  # a dropped connection counts as an unanswered call
                rows.append({"tool": tool, "ms": (time.perf_counter() - start) * 1e3, "end": time.time(),
                             "error": f"{type(e).__name__}: {e}"[:300], "work_ms": None, "id": None,
                             "client": client})
    return rows


def _run_loop(coro, loop: str):
    """Run ``coro`` on asyncio's own event loop or on uvloop's (same API, less CPU per call)."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


def client_group(url: str, clients: list[int], calls: int, mix: tuple[str, ...], label: str, barrier, out,
                 loop: str = "asyncio", rate: float | None = None, n_clients: int = 1,
                 cpus: set[int] | None = None, novel: bool = False) -> None:
    """One client process: its MCP sessions open, wait at the barrier, then run their calls (paced
    when ``rate``, the calls/s all ``n_clients`` offer together), on ``cpus`` when given; ``novel``:
    see ``call_args``."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    interval = n_clients / rate if rate else None

    async def main():
        go = asyncio.Event()
        ready = {"n": 0}

        def opened():
            ready["n"] += 1

        tasks = [asyncio.create_task(_client(url, i, calls, mix, label, opened, go,
                                             (interval, interval * i / n_clients) if interval else None, novel))
                 for i in clients]
        while ready["n"] < len(clients):
            if any(t.done() for t in tasks):
                break
            await asyncio.sleep(0.05)
        await asyncio.to_thread(barrier.wait)  # every session is open
        await asyncio.to_thread(barrier.wait)  # the parent has attached its profilers: go
        cpu0 = time.process_time()
        go.set()
        rows = [r for t in await asyncio.gather(*tasks, return_exceptions=True)
                for r in (t if isinstance(t, list) else [{"tool": "session", "ms": 0, "end": time.time(),
                                                          "error": repr(t)[:300], "work_ms": None, "id": None}])]
        return rows, time.process_time() - cpu0

    out.put(_run_loop(main(), loop))


def worker_pids(pid: int) -> list[int]:
    """The worker processes of `skillbase serve --workers N` (its children started by multiprocessing)."""
    out = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
            out.append(int(child))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """User + system CPU seconds of every live thread of a process, by native thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Python thread names by native thread id (``py-spy dump``); empty without py-spy."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        return {}
    got = subprocess.run([str(spy), "dump", "--pid", str(pid), "--nonblocking"], capture_output=True, text=True)
    names = {}
    for line in got.stdout.splitlines():
        if line.startswith("Thread ") and '"' in line:
            tid = line.split()[1]
            if tid.isdigit():
                names[int(tid)] = line.split('"')[1]
    return names


def _comm(pid: int, tid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/task/{tid}/comm")).read_text().strip()
    except OSError:
        return "?"


THREAD_ROLES = {"MainThread": "event loop (HTTP, MCP SDK, JSON)", "AnyIO worker thread": "tool calls (worker threads)",
                "skillbase-index-follower": "index follower (embedding, chroma upsert)"}


def server_cpu_by_role(pid: int, cpu0: float, threads0: dict[int, float], calls: int) -> dict:
    """Server CPU ms per answered call by thread role, from /proc per-thread times since
    ``threads0`` (process total ``cpu0``); threads that ended during the run are "ended threads"."""
    after, names = thread_cpu_seconds(pid), thread_names(pid)
    if not names:
        return {}
    roles: dict[str, float] = {}
    for tid, cpu in after.items():
        name = names.get(tid)
        if name is None:  # no Python frames: a library's own thread (chroma's runtime, torch's pool)
            name = "native: " + _comm(pid, tid)
        role = THREAD_ROLES.get(name, name)
        roles[role] = roles.get(role, 0.0) + cpu - threads0.get(tid, 0.0)
    roles["ended threads"] = max(0.0, cpu_seconds(pid) - cpu0 - sum(roles.values()))
    return {k: round(1e3 * v / max(1, calls), 2) for k, v in sorted(roles.items(), key=lambda kv: -kv[1])}


async def visibility_probe(write_url: str, read_url: str, label: str, probes: int, gap_s: float,
                           stop_at: float) -> list[dict]:
    """Write a lesson with a unique phrase through one session (to ``write_url``); poll recall
    through another (to ``read_url``: the same server, or another process of the same store) until
    it comes back. Returns the delay per probe (seconds from the write's answer)."""
    out = []
    hw, writer = _session(write_url)
    hr, reader = _session(read_url)
    async with hw, writer as w, hr, reader as r:
        for p in range(probes):
            phrase = f"probe {uuid.uuid4().hex[:10]} lesson {label}"
            text = f"Visibility {phrase}: a lesson written by one agent must reach the others"
            res = await w.call_tool("record_lesson", {"lesson": text, "task": "row_softmax", "session": label + "-probe"})
            if res.is_error:
                out.append({"error": res.content[0].text[:300]})
                continue
            exp_id, written = res.structured_content["id"], time.perf_counter()
            delay, polls, missed = None, 0, []
            while time.perf_counter() - written < 10:
                polls += 1
                asked = time.perf_counter() - written
                got = await r.call_tool("recall", {"query": text, "k": 5})
                ids = [i.get("id") for i in (got.structured_content or {}).get("items", [])]
                if exp_id in ids:
                    delay = time.perf_counter() - written
                    break
                if len(missed) < 3:  # why it missed: what came first, with the score parts
                    missed.append({"asked_after_s": round(asked, 4),
                                   "error": got.content[0].text[:300] if got.is_error and got.content else None,
                                   "first": [[i.get("kind"), i.get("id"), i.get("score"), i.get("parts")]
                                             for i in (got.structured_content or {}).get("items", [])]})
                await asyncio.sleep(0.02)
            out.append({"id": exp_id, "visible_after_s": None if delay is None else round(delay, 4), "polls": polls,
                        **({"missed": missed} if missed else {})})
            if time.time() > stop_at:
                break
            await asyncio.sleep(gap_s)
    return out


# ---------------------------------------------------------------------------
# one run
# ---------------------------------------------------------------------------


def quantiles(values: list[float]) -> dict:
    """n, p50/p95/p99/max/mean (ms, nearest-rank on the sorted values)."""
    if not values:
        return {"n": 0}
    v = sorted(values)

    def q(p):
        return round(v[min(len(v) - 1, max(0, round(p * (len(v) - 1))))], 2)

    return {"n": len(v), "p50_ms": q(0.5), "p95_ms": q(0.95), "p99_ms": q(0.99), "max_ms": round(v[-1], 2),
            "mean_ms": round(statistics.fmean(v), 2)}


def ledger_counts(home: Path, label: str) -> dict:
    """Lessons and attempts of this run's session in the ledger, and lesson texts stored twice."""
    conn = sqlite3.connect(f"file:{home / 'ledger.sqlite3'}?mode=ro", uri=True)
    try:
        lessons = conn.execute("SELECT id, json_extract(record, '$.lesson') FROM experiences WHERE session=?",
                               (label,)).fetchall()
        attempts = conn.execute("SELECT id FROM attempts WHERE session=?", (label,)).fetchall()
    finally:
        conn.close()
    texts = [t for _, t in lessons]
    return {"lesson_ids": {i for i, _ in lessons}, "attempt_ids": {i for (i,) in attempts},
            "duplicate_lessons": len(texts) - len(set(texts))}


def run_load(urls: list[str], home: Path, n_clients: int, calls: int, mix_name: str, procs: int, probes: int,
             server_pids: list[int], loop: str = "asyncio", profile_clients: Path | None = None,
             profile_cpu: bool = False, rate: float | None = None, chroma_pid: int | None = None,
             client_cpus: set[int] | None = None, server_cpus: set[int] | None = None,
             canned: bool = False, novel: bool = False) -> dict:
    """N clients x ``calls`` calls against the running servers (``urls``, one per server process,
    ``server_pids`` in the same order), plus the visibility probe. ``chroma_pid``: the chroma
    server's process, whose CPU is reported beside the servers'.
    ``profile_clients``: py-spy every client process during the load (one raw profile each, there).
    ``rate``: the calls/s the clients offer together (paced); None: each calls again once answered.
    ``client_cpus`` / ``server_cpus``: where the client processes run, and the server's CPUs, whose
    busy share is reported apart. ``canned``: the servers answer from memory (mcp_canned_server.py) and
    store nothing, so no probe runs and no records are counted. ``novel``: every plain-words recall
    query unique (``call_args``)."""
    mix = MIXES[mix_name]
    if canned:
        probes = 0
    label = f"load-{uuid.uuid4().hex[:8]}"
    procs = max(1, min(procs, n_clients))
    if procs < len(urls):
        raise SystemExit(f"{n_clients} clients in {procs} client processes cannot reach {len(urls)} servers: "
                         "give every server a client process (--procs, and at least that many clients)")
    groups = [list(range(n_clients))[g::procs] for g in range(procs)]
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(procs + 1), ctx.Queue()
    workers = [ctx.Process(target=client_group,
                           args=(urls[i % len(urls)], g, calls, mix, label, barrier, out, loop, rate, n_clients,
                                 client_cpus, novel),
                           daemon=True)
               for i, g in enumerate(groups)]
    for w in workers:
        w.start()
    barrier.wait(timeout=600)  # every session is open
    spies = []
    if profile_clients is not None:
        spies = [attach_py_spy(w.pid, profile_clients, profile_cpu, name=f"client{i}") for i, w in enumerate(workers)]
    load_before = os.getloadavg()
    barrier.wait(timeout=600)  # go
    t0 = time.time()
    server_cpu0 = {pid: cpu_seconds(pid) for pid in server_pids}
    threads0 = {pid: thread_cpu_seconds(pid) for pid in server_pids}
    chroma_cpu0 = cpu_seconds(chroma_pid) if chroma_pid else 0.0
    machine0 = _cpu_times()
    per_cpu0 = _per_cpu_times()

    async def probe_and_collect():
        probe = asyncio.create_task(visibility_probe(urls[0], urls[-1], label, probes, 1.0, stop_at=time.time() + 3600))
        rows, cpu = [], 0.0
        for _ in workers:
            got, used = await asyncio.to_thread(out.get)
            rows, cpu = rows + got, cpu + used
        return rows, cpu, await probe

    rows, client_cpu, probe = asyncio.run(probe_and_collect())
    server_cpu_each = [cpu_seconds(pid) - server_cpu0[pid] for pid in server_pids]
    server_cpu = sum(server_cpu_each)
    chroma_cpu = cpu_seconds(chroma_pid) - chroma_cpu0 if chroma_pid else None
    machine_busy = _busy_share(machine0, _cpu_times())
    per_cpu1 = _per_cpu_times()
    pinned_busy = {name: _busy_share(*_summed(per_cpu0, per_cpu1, cpus))
                   for name, cpus in (("server_cpus", server_cpus), ("client_cpus", client_cpus)) if cpus}
    n_answered = len([r for r in rows if r["error"] is None])
    by_role: dict[str, float] = {}
    for pid in server_pids:  # the N servers' threads by role, added up
        for role, ms in server_cpu_by_role(pid, server_cpu0[pid], threads0[pid], n_answered).items():
            by_role[role] = round(by_role.get(role, 0.0) + ms, 2)
    for w in workers:
        w.join(30)
    for spy in spies:
        stop(spy)
    wall = max(r["end"] for r in rows) - t0
    stored = ledger_counts(home, label) if not canned else None
    answered = [r for r in rows if r["error"] is None]
    written_lessons = {r["id"] for r in answered if r["tool"] == "record_lesson"}
    written_attempts = {r["id"] for r in answered if r["tool"] == "benchmark_kernel" and r["id"]}
    tools = {}
    for tool in sorted({r["tool"] for r in rows}):
        mine = [r for r in rows if r["tool"] == tool]
        ok = [r for r in mine if r["error"] is None]
        tools[tool] = {"latency": quantiles([r["ms"] for r in ok]),
                       # Secondary: calls begun STARTUP_S or more after the barrier. All clients start
                       # at one instant; their first calls meet every queue at once (a herd the
                       # steady state never sees again). The primary figures keep those calls.
                       "latency_after_start": quantiles([r["ms"] for r in ok
                                                         if r["end"] - r["ms"] / 1e3 - t0 >= STARTUP_S]),
                       "in_server_work": quantiles([r["work_ms"] for r in ok if r["work_ms"] is not None]),
                       "errors": len(mine) - len(ok),
                       "first_errors": sorted({r["error"] for r in mine if r["error"]})[:3]}
    delays = [p["visible_after_s"] for p in probe if p.get("visible_after_s") is not None]
    # How evenly the load fell: each server process's cores, and each client's median recall (with
    # several processes on one port the kernel hashes each connection to one of them).
    by_client: dict[int, list[float]] = {}
    for r in answered:
        if r["tool"] == "recall":
            by_client.setdefault(r["client"], []).append(r["ms"])
    client_p50 = sorted(statistics.median(v) for v in by_client.values())
    return {
        "clients": n_clients, "calls_per_client": calls, "mix": list(mix), "novel_queries": novel,
        "client_processes": procs,
        "server_processes": len(server_pids), "ports": len(urls),
        "offered_calls_per_s": rate,
        "client_event_loop": loop, "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "calls": len(rows), "answered": len(answered), "errors": len(rows) - len(answered),
        "wall_s": round(wall, 2), "throughput_calls_per_s": round(len(answered) / wall, 1),
        # CPU per answered call (process CPU time over the run, the probe's calls included on the
        # server side; every server process added up): what one call costs the server, and what
        # the load generator spends. The share is in cores (N servers can hold up to N).
        "server_cpu_ms_per_call": round(1e3 * server_cpu / max(1, len(answered)), 2),
        "client_cpu_ms_per_call": round(1e3 * client_cpu / max(1, len(answered)), 2),
        "server_cpu_share": round(server_cpu / wall, 2),
        "chroma_server_cpu_ms_per_call": (None if chroma_cpu is None
                                          else round(1e3 * chroma_cpu / max(1, len(answered)), 2)),
        # The share of all the machine's cores busy over the run (/proc/stat, every process): below 1,
        # the cores were not what the calls waited for.
        "machine_busy_share": machine_busy,
        # With --server-cpus / --client-cpus: the CPUs each side was pinned to, and their busy share.
        "server_cpus": sorted(server_cpus) if server_cpus else None,
        "client_cpus": sorted(client_cpus) if client_cpus else None,
        "server_cpus_busy_share": pinned_busy.get("server_cpus"),
        "client_cpus_busy_share": pinned_busy.get("client_cpus"),
        "server_cpu_ms_per_call_by_thread": by_role,
        "server_cores_by_process": sorted((round(c / wall, 2) for c in server_cpu_each), reverse=True),
        "recall_p50_ms_by_client": [round(x, 1) for x in client_p50],
        "tools": tools,
        "canned": canned,
        # A canned server stores nothing: no records to count, no probe.
        "records": None if canned else {
            "lessons_written": len(written_lessons), "lessons_found": len(stored["lesson_ids"]),
            "lessons_lost": len(written_lessons - stored["lesson_ids"]),
            "lessons_unexpected": len(stored["lesson_ids"] - written_lessons),
            "duplicate_lessons": stored["duplicate_lessons"],
            "attempts_written": len(written_attempts), "attempts_found": len(stored["attempt_ids"]),
            "attempts_lost": len(written_attempts - stored["attempt_ids"])},
        "visibility": None if canned else {
            "probes": probe, "max_s": max(delays) if delays else None,
            "all_within_1s": bool(delays) and len(delays) == len(probe) and max(delays) <= 1.0},
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="1,4,16,64", help="comma-separated client counts (default 1,4,16,64)")
    ap.add_argument("--calls", type=int, default=30, help="calls per client (default 30)")
    ap.add_argument("--mix", choices=sorted(MIXES), default="memory")
    ap.add_argument("--chroma", choices=("embedded", "server"), default="embedded")
    ap.add_argument("--home", type=Path, help="a store to copy and load (default: a fresh seeded one)")
    ap.add_argument("--procs", type=int, default=4, help="client processes (default 4)")
    ap.add_argument("--probes", type=int, default=5, help="cross-client visibility probes per run (default 5)")
    ap.add_argument("--profile", type=Path, help="run the server under py-spy; write the raw stacks here")
    ap.add_argument("--profile-cpu", action="store_true", help="with --profile: on-CPU samples only")
    ap.add_argument("--profile-gil", action="store_true",
                    help="with --profile: only samples of the thread holding the interpreter lock")
    ap.add_argument("--profile-clients", action="store_true",
                    help="with --profile: py-spy the client processes too (one raw profile each)")
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default=None,
                    help="the client processes' event loop (default: uvloop when installed: less CPU per call)")
    ap.add_argument("--rate", default=None,
                    help="paced: comma-separated calls/s the clients offer together, one run each (default: closed "
                         "loop, each client calls again once answered)")
    ap.add_argument("--servers", type=int, default=1,
                    help="server processes over the one store, each on its own port (default 1); the client "
                         "processes are spread over them")
    ap.add_argument("--workers", type=int, default=1,
                    help="`skillbase serve --workers N`: N processes on one port (needs --chroma server)")
    ap.add_argument("--server-cpus", default=None,
                    help="run the server processes (and a chroma server) on these CPUs only, e.g. 0,1 "
                         "(sched_setaffinity; the server sizes its threads for them)")
    ap.add_argument("--client-cpus", default=None,
                    help="run the client processes (and this driver) on these CPUs only, e.g. 2-9: the load "
                         "generator off the server's cores, as clients on other machines would be")
    ap.add_argument("--canned", action="store_true",
                    help="the MCP stack alone: servers whose recall, record_lesson and attempt_history answer "
                         "from memory (mcp_canned_server.py; stateless with --servers above 1, as workers are); "
                         "memory mix only, nothing stored, so no records or visibility")
    ap.add_argument("--burn", default=None,
                    help="with --canned: CPU each call spends before its answer, e.g. recall=6,record_lesson=1 "
                         "(milliseconds, in Python: a stand-in for skillbase's work of that cost)")
    ap.add_argument("--novel-queries", action="store_true",
                    help="make every plain-words recall query unique, as agents' own words are: each one then "
                         "costs a run of the embedding model (by default the mix rotates three, which the "
                         "server's cache answers after their first call)")
    ap.add_argument("--out", type=Path, help="write the JSON here (default: print the summary only)")
    args = ap.parse_args(argv)
    try:
        server_cpus, client_cpus = parse_cpus(args.server_cpus), parse_cpus(args.client_cpus)
    except ValueError:
        ap.error("--server-cpus / --client-cpus take CPU numbers and ranges, e.g. 0,1 or 2-9")
    for cpus in (server_cpus, client_cpus):
        if cpus and not cpus <= os.sched_getaffinity(0):
            ap.error(f"CPUs {sorted(cpus - os.sched_getaffinity(0))} are not available here "
                     f"(this process may use {sorted(os.sched_getaffinity(0))})")
    if args.servers < 1:
        ap.error("--servers takes 1 or more")
    if args.workers > 1 and (args.servers > 1 or args.chroma != "server"):
        ap.error("--workers N (one port) takes --chroma server and one --servers")
    if args.canned and (args.workers > 1 or args.mix != "memory" or args.chroma != "embedded"):
        ap.error("--canned takes the memory mix, the embedded index and --servers N instead of --workers N")
    if args.canned and args.novel_queries:
        ap.error("--novel-queries has nothing to embed with --canned")
    if args.burn and not args.canned:
        ap.error("--burn takes --canned")
    if args.burn:
        from mcp_canned_server import parse_burn

        try:
            parse_burn(args.burn)
        except ValueError as e:
            ap.error(str(e))
    if args.servers > args.procs:
        ap.error(f"--servers {args.servers} needs at least as many client processes (--procs {args.procs})")
    rates: list[float | None] = [float(x) for x in args.rate.split(",")] if args.rate else [None]
    if any(r is not None and r <= 0 for r in rates):
        ap.error("--rate takes calls per second above 0")

    loop = args.loop or ("uvloop" if importlib.util.find_spec("uvloop") else "asyncio")
    tmp = Path(tempfile.mkdtemp(prefix="skillbase-load-"))
    chroma = None
    try:
        if args.chroma == "server":
            chroma, chroma_url = start_chroma(tmp, server_cpus)
        else:
            chroma_url = None
        home = tmp / "home"
        t_seed = time.perf_counter()
        seed_home(home, args.home, chroma_url)
        seed_s = time.perf_counter() - t_seed
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
        servers, urls = [], []
        for i in range(args.servers):
            port = _free_port()
            servers.append(start_server(home, port, chroma_url, tmp / f"server{i or ''}.log", args.workers,
                                        server_cpus, args.canned, stateless=args.servers > 1, burn=args.burn))
            urls.append(f"http://127.0.0.1:{port}/mcp")
        if client_cpus:  # the driver (warm-up, probes, counting) runs beside the clients
            os.sched_setaffinity(0, client_cpus)
        runs = []
        load_before = os.getloadavg()
        cpu_before = _cpu_times()
        try:
            # One uncounted warm-up session per server: each opens the store and the model once.
            for url in urls:
                asyncio.run(_warm(url))
            # The yardstick after the warm-ups: a server still starting would slow it.
            speed_ms, model_ms = python_speed_ms(), model_speed_ms()
            # With several servers, the first one is profiled; with `--workers N`, its first worker (the
            # process on the port only starts and watches the workers).
            spy = None
            if args.profile:
                first = worker_pids(servers[0].pid)[0] if args.workers > 1 else servers[0].pid
                spy = attach_py_spy(first, args.profile, args.profile_cpu, gil=args.profile_gil)
            try:
                for n in [int(x) for x in args.clients.split(",")]:
                    for rate in rates:
                        pids = worker_pids(servers[0].pid) if args.workers > 1 else [p.pid for p in servers]
                        r = run_load(urls, home, n, args.calls, args.mix, args.procs, args.probes,
                                     pids, loop,
                                     args.profile if args.profile and args.profile_clients else None,
                                     args.profile_cpu, rate, chroma.pid if chroma is not None else None,
                                     client_cpus, server_cpus, args.canned, args.novel_queries)
                        runs.append(r)
                        try:
                            _print(r)
                        except BrokenPipeError:  # piped into `head`, which has exited: the runs and --out go on
                            sys.stdout = open(os.devnull, "w")
            finally:
                if spy is not None:
                    stop(spy)
        finally:
            for server in servers:
                stop(server)
        result = {
            "benchmark": "mcp_load", "transport": "streamable HTTP with a bearer token", "chroma": args.chroma,
            "server_processes": args.servers, "workers": args.workers,
            "canned": args.canned, "burn_ms": args.burn,
            "store": str(args.home) if args.home else "fresh, seeded by skillbase init",
            "method": ("mcp_canned_server.py (`skillbase serve`'s server answering from memory)" if args.canned
                       else "real `skillbase serve --transport http`")
                      + f" subprocess (x{args.servers}, one store, client "
                      "process g on server g mod N); N MCP SDK Client sessions over "
                      f"{args.procs} client processes ({loop} event loop), released together by a barrier; "
                      "latency = perf_counter around call_tool (paced runs: from each call's slot); "
                      "throughput = answered calls / seconds from the barrier to the last answer"
                      + ("" if args.canned else "; records counted in the ledger by session afterwards"),
            "runs": runs,
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                        "cpu_model": _cpu_model(), "python": platform.python_version(),
                        "load_average_before": [round(x, 2) for x in load_before],
                        "load_average_after": [round(x, 2) for x in os.getloadavg()],
                        "python_loop_ms": speed_ms, "model_run_cpu_ms": model_ms,
                        "cpu_stolen_share": _stolen_share(cpu_before, _cpu_times())},
            "seed_s": round(seed_s, 1),
        }
        stolen = result["machine"]["cpu_stolen_share"]
        print(f"machine speed: a 2M-iteration Python loop in {speed_ms} ms (best of 3), an int8 model run on a "
              f"lesson in {model_ms} ms of CPU (best of 20); CPU time stolen by the "
              f"hypervisor during the runs: {'unknown' if stolen is None else f'{100 * stolen:.1f} %'}")
        if args.profile:
            result["profile"] = str(args.profile / ("server.cpu.pyspy.txt" if args.profile_cpu else "server.pyspy.txt"))
        write_report(args.out, result, indent=1)
        return result
    finally:
        if chroma is not None:
            stop(chroma)
        shutil.rmtree(tmp, ignore_errors=True)


def python_speed_ms() -> float:
    """Milliseconds this machine takes for a fixed pure-Python loop (best of 3): how fast a core is
    today. The same code's figures from two days compare only in these units: the machines this runs
    on are virtual, and their speed has been seen to differ twofold from one day to the next."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i
        best = min(best, time.perf_counter() - start)
    return round(best * 1e3, 1)


def model_speed_ms() -> float | None:
    """CPU milliseconds of one int8 embedding model run on a lesson-sized text (one thread, best of 20),
    or None where that model is not made yet. A second yardstick beside the Python loop: vector code over
    a few megabytes of weights: the model itself is about a quarter of a loaded server's CPU here."""
    from skillbase.memory.embeddings import default_model_path
    from skillbase.memory.onnx_encoder import open_encoder

    def no_torch():
        raise RuntimeError("only an int8 model made already is timed")

    try:
        model = Path(os.environ.get("SKILLBASE_EMBEDDING_MODEL") or default_model_path())
        enc, _ = open_encoder(model, 1, no_torch, quantized=True)
    except Exception:
        return None
    if enc is None:
        return None
    text = f"{LESSONS[0]} (a yardstick, not a lesson)"
    best = float("inf")
    for i in range(23):
        start = time.thread_time()
        enc.encode([text])
        if i >= 3:  # the first runs warm the session's buffers
            best = min(best, time.thread_time() - start)
    return round(best * 1e3, 2)


def _cpu_times() -> list[int] | None:
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None  # not Linux


def _per_cpu_times() -> dict[int, list[int]]:
    """/proc/stat's counters of each CPU ('cpuN' lines); empty off Linux."""
    try:
        with open("/proc/stat") as f:
            return {int(p[0][3:]): [int(x) for x in p[1:]] for p in (line.split() for line in f)
                    if p and p[0].startswith("cpu") and p[0][3:].isdigit()}
    except (OSError, ValueError):
        return {}


def _summed(before: dict[int, list[int]], after: dict[int, list[int]], cpus: set[int]):
    """(before, after) counters of ``cpus`` added up, for ``_busy_share``."""
    def total(times):
        rows = [times[c] for c in cpus if c in times]
        return [sum(col) for col in zip(*rows)] if rows and len(rows) == len(cpus) else None

    return total(before), total(after)


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        return None


def _stolen_share(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of the machine's CPU time its hypervisor gave to others meanwhile (/proc/stat's steal)."""
    if not before or not after or len(before) < 8:
        return None
    spent = [b - a for a, b in zip(before, after)]
    return round(spent[7] / sum(spent), 3) if sum(spent) else None


def _busy_share(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of the machine's CPU time (all cores) spent busy meanwhile: not idle, not waiting for I/O."""
    if not before or not after or len(before) < 5:
        return None
    spent = [b - a for a, b in zip(before, after)]
    return round(1 - (spent[3] + spent[4]) / sum(spent), 3) if sum(spent) else None


async def _warm(url: str) -> None:
    http, session = _session(url)
    async with http, session as c:
        for args in RECALLS:
            await c.call_tool("recall", args)
        await c.call_tool("attempt_history", {"task": "relu", "limit": 5})


def _print(r: dict) -> None:
    offered = r.get("offered_calls_per_s")
    servers = r.get("server_processes", 1)
    chroma_cpu = (f", chroma server {r['chroma_server_cpu_ms_per_call']} ms"
                  if r.get("chroma_server_cpu_ms_per_call") is not None else "")
    busy = "?" if r.get("machine_busy_share") is None else f"{100 * r['machine_busy_share']:.0f} %"
    print(f"{r['clients']} clients x {r['calls_per_client']} calls"
          f"{f' on {servers} server processes' if servers > 1 else ''}"
          f"{f', paced at {offered:g} calls/s offered (latency from each slot)' if offered else ''}"
          f"{', every plain-words query new' if r.get('novel_queries') else ''}: "
          f"{r['throughput_calls_per_s']} calls/s "
          f"({r['answered']}/{r['calls']} answered in {r['wall_s']} s, wall clock); CPU per call: server "
          f"{r['server_cpu_ms_per_call']} ms ({r['server_cpu_share']} cores), clients {r['client_cpu_ms_per_call']} ms "
          f"(process CPU time){chroma_cpu}; the machine's cores {busy} busy")
    if r.get("server_cpus"):
        share = r.get("server_cpus_busy_share")
        print(f"  pinned: server on CPUs {r['server_cpus']} ({'?' if share is None else f'{100 * share:.0f} %'} busy), "
              f"clients on {r['client_cpus'] or 'any'}"
              + (f" ({100 * r['client_cpus_busy_share']:.0f} % busy)" if r.get("client_cpus_busy_share") is not None
                 else ""))
    for tool, t in r["tools"].items():
        lat = t["latency"]
        if lat.get("n"):
            print(f"  {tool:17s} p50 {lat['p50_ms']:8.1f}  p95 {lat['p95_ms']:8.1f}  p99 {lat['p99_ms']:8.1f} ms "
                  f"(round trip, n={lat['n']}); in-server p50 {t['in_server_work'].get('p50_ms', 0):.1f} ms; "
                  f"errors {t['errors']}")
            late = t.get("latency_after_start", {})
            if late.get("n"):
                print(f"  {'':17s} p50 {late['p50_ms']:8.1f}  p95 {late['p95_ms']:8.1f}  p99 {late['p99_ms']:8.1f} ms "
                      f"(calls begun {STARTUP_S:g} s or more after the start, n={late['n']})")
    rec, vis = r["records"], r["visibility"]
    if r.get("canned"):
        print("  canned answers: nothing stored, no records or visibility to report")
    else:
        print(f"  lessons written {rec['lessons_written']}, found {rec['lessons_found']}, lost {rec['lessons_lost']}, "
              f"duplicated {rec['duplicate_lessons']}; attempts written {rec['attempts_written']}, found "
              f"{rec['attempts_found']}; visibility max {vis['max_s']} s over {len(vis['probes'])} probes")
    by_client = r.get("recall_p50_ms_by_client") or []
    if servers > 1 and by_client:
        print(f"  balance: server processes' cores {r['server_cores_by_process']}; clients' recall p50 "
              f"{by_client[0]:.0f}-{by_client[-1]:.0f} ms")


if __name__ == "__main__":
    main()
