"""The isolated worker process: ``python -m skillbase.toolchain.worker --kind K --requests FD --replies FD``.

The parent (``pool.py``) starts it in its own session (process group), with
rlimits, a scrubbed environment and a private temp directory as cwd. Requests
and replies are JSON lines on two private pipes; file descriptor 1 is pointed
at stderr (the worker log) before any candidate code runs, so a candidate's
prints cannot corrupt the protocol. Replies to one request are zero or more
``{"id", "progress", "message"}`` lines and then one ``{"id", "ok", ...}`` line.

Kinds: ``cuda`` (one GPU; evaluate and measure peaks), ``cpu`` (Triton
interpreter; evaluate without timing) and ``compile`` (ahead-of-time compile).
The worker stays warm between requests: torch imported, CUDA context created,
Triton's disk cache in place. After each candidate it drops the candidate's
modules, restores the environment and checks that nothing was patched; if
anything was, or a sticky CUDA error happened, it asks to be recycled.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import traceback
from pathlib import Path


class Channel:
    """JSON-lines protocol on private file descriptors."""

    def __init__(self, req_fd: int, rep_fd: int):
        self.reader = os.fdopen(req_fd, "r", encoding="utf-8")
        self.writer = os.fdopen(rep_fd, "w", encoding="utf-8", buffering=1)
        self.lock = threading.Lock()

    def send(self, msg: dict) -> None:
        line = json.dumps(msg, default=str)
        with self.lock:
            self.writer.write(line + "\n")
            self.writer.flush()

    def requests(self):
        for line in self.reader:
            if line.strip():
                yield json.loads(line)


def _isolate_stdout() -> None:
    """Point fd 1 (and sys.stdout) at stderr: candidate prints go to the worker log."""
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def setup(kind: str):
    """Import torch and the toolchain, install the guards, snapshot integrity."""
    import torch
    import torch.profiler  # noqa: F401  (imported before any candidate so its modules are snapshotted)
    import triton  # noqa: F401
    import triton.testing  # noqa: F401

    from skillbase.toolchain import buildcache, evaluate, guards, profiling, roofline, timing, verify  # noqa: F401
    from skillbase.toolchain import compile as _compile  # noqa: F401
    from skillbase.toolchain.evaluate import WorkerEnv

    buildcache.install(torch)  # before the integrity snapshot: the wrapper is part of the baseline

    recorder = guards.LaunchRecorder()
    recorder.install()
    workdir = Path.cwd()
    device, clock, l2, poison = "cpu", None, None, None
    if kind == "cuda":
        from skillbase.toolchain import verify_kernels  # noqa: F401  (in the integrity snapshot)

        torch.cuda.init()
        torch.cuda.set_device(0)
        torch.empty(1, device="cuda").fill_(0)  # create the context now, not inside a timed call
        device = "cuda:0"
        clock = timing.Clock(torch)
        l2 = roofline.describe_cuda(torch, 0).l2_bytes
        poison = verify.GPU_POISON_BYTE
    elif os.environ.get("MALLOC_PERTURB_") == verify.CPU_MALLOC_PERTURB:
        poison = verify.CPU_POISON_BYTE
    _settle_lazy_imports(torch, kind, clock)
    env = WorkerEnv(
        torch=torch,
        device=device,
        kind="cuda" if kind == "cuda" else "cpu",
        integrity=guards.Integrity(torch),
        recorder=recorder,
        workdir=workdir,
        clock=clock,
        l2_bytes=l2,
        poison_byte=poison,
    )
    if kind != "compile":
        _self_test(env)
    return env


_SELF_TEST_TASK = """
import torch
import torch.nn as nn
N = 4099
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(N)]
def get_init_inputs():
    return []
"""

_SELF_TEST_SOLUTION = """
import torch
import torch.nn as nn
import triton
import triton.language as tl
@triton.jit
def selftest_relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        selftest_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
"""


def _self_test(env) -> None:
    """Run one honest evaluation end to end before serving, then accept the resulting state.

    The first Triton launch, profile and timing on a device initialize more of
    torch and Triton lazily; doing that here, on our own kernel, keeps those
    changes from ever being blamed on a candidate.
    """
    from skillbase.toolchain.evaluate import drop_candidate_modules, evaluate

    task = env.workdir / "selftest_task.py"
    task.write_text(_SELF_TEST_TASK)
    req = {
        "task_path": str(task),
        "shape": None,
        "source": _SELF_TEST_SOLUTION,
        "solution_path": "selftest.py",
        "language": "triton",
        "trials": 5,
        "tolerance": {"atol": 0.0, "rtol": 0.0},
        "extra_shapes": [],
        "output_bytes": [4 * 4099],
        "baselines": [],
        "timing": {"budget_s": 0.05, "target_ci": 0.05} if env.kind == "cuda" else None,
    }
    result = evaluate(env, req, lambda f, m: None)
    if result["verdict"] != "correct":
        sys.stderr.write(f"worker self-test: {result['verdict']}: {result['message']}\n")
    drop_candidate_modules()
    env.integrity.rebaseline()


def _settle_lazy_imports(torch, kind: str, clock) -> None:
    """Trigger torch's lazy imports now, so the integrity snapshot sees torch as it will stay.

    torch rebinds some functions and registers library kernels on first use
    (dynamo wrappers when a dispatch mode is first entered, the profiler,
    inductor for the torch.compile baseline); those changes must not be
    mistaken for a candidate's patches. Every path an evaluation takes is run
    once here on a tiny tensor.
    """
    from skillbase.toolchain import guards, profiling, timing

    torch.manual_seed(0)
    x = torch.randn(64, device="cuda" if kind == "cuda" else "cpu")
    with guards.op_tracer():
        torch.relu(x).sum()
    with guards.ReferenceProbe(__file__).active():
        pass
    if kind != "cuda":
        return
    import torch._inductor.compile_fx  # noqa: F401  (the torch.compile baseline)
    import torch._inductor.config

    torch._inductor.config.compile_threads = 1  # no compile pool outliving the baseline
    profiling.profile_call(torch, lambda: torch.relu(x), clock)
    flush = torch.empty(1 << 20, dtype=torch.int32, device="cuda")
    timing.measure(lambda k: torch.relu(x), 1, clock, flush, timing.TimingPlan(budget_s=0.05, min_reps=5))
    torch.cuda.mem_get_info()


def prepare(req: dict) -> dict:
    """Point the compile caches at this request's layers and write its task where the worker can read
    it (the jail shows no file of the host's); both are undone by ``cleanup``."""
    os.environ.update(req.pop("cache_env", None) or {})
    source = req.pop("task_source", None)
    if source is not None:
        import hashlib

        folder = (
            Path("/tmp" if Path("/tmp").is_dir() else Path.cwd())
            / "skillbase-tasks"
            / hashlib.sha256(source.encode()).hexdigest()[:16]
        )
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / Path(req["task_path"]).name
        path.write_text(source, encoding="utf-8")  # written afresh for each request: nothing left before counts
        req["task_path"] = str(path)
    return req


def handle(env, kind: str, req: dict, channel: Channel) -> dict:
    """Dispatch one request by its op."""
    req = prepare(req)
    op = req.get("op")
    rid = req.get("id")

    def progress(fraction: float, message: str) -> None:
        channel.send({"id": rid, "progress": round(float(fraction), 3), "message": message})

    if op == "ping":
        return {"pid": os.getpid(), "kind": kind}
    if op == "evaluate":
        from skillbase.toolchain.evaluate import evaluate

        return evaluate(env, req, progress)
    if op == "compile":
        from skillbase.toolchain.compile import compile_request

        return compile_request(env.torch, req, env.workdir)
    if op == "profile":
        from skillbase.toolchain.profile import profile_request

        return profile_request(req, env.workdir, progress)
    if op == "describe":
        from skillbase.toolchain import roofline

        hw = roofline.describe_cuda(env.torch, 0) if kind == "cuda" else roofline.cpu_hardware()
        return {"hardware": hw.model_dump()}
    if op == "hardware":
        from skillbase.toolchain import roofline

        if kind != "cuda":
            return {"hardware": roofline.cpu_hardware().model_dump()}
        progress(0.1, "measuring memory bandwidth and matmul peaks")
        return {"hardware": roofline.measure_peaks(env.torch, 0, env.clock).model_dump()}
    raise ValueError(f"unknown op {op!r}")


# A warm worker keeps its allocator's cached blocks, but no live tensors past this between candidates.
HELD_MEMORY_RECYCLE_BYTES = 4 << 30


def cleanup(env, environ: dict) -> list[str]:
    """Drop the candidate's traces; return reasons this worker must be recycled."""
    from skillbase.toolchain.evaluate import drop_candidate_modules

    reasons = []
    stray = reap_strays()
    if stray:
        reasons.append(f"killed {len(stray)} process(es) the candidate left running: {', '.join(stray[:5])}")
    drop_candidate_modules()
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(env.workdir)
    if environ.get("SKILLBASE_JAILED") == "1":
        forget_files(env.workdir, env.keep)
    if env.kind == "cuda":
        # Device memory held in reference cycles (the candidate's module and model) is freed by a
        # young-generation collection; cached blocks stay with the allocator for the next candidate.
        gc.collect(1)
        if env.torch.cuda.memory_allocated() > (1 << 30):
            gc.collect()  # older garbage still holds device memory: a full collection is worth its time
        held = env.torch.cuda.memory_allocated()
        if held > HELD_MEMORY_RECYCLE_BYTES:
            # Something outlived its candidate (a cache, a global): the next large task would run out of
            # memory in this worker and be reported as a runtime error that is not its own.
            reasons.append(f"{held / 2**30:.1f} GiB of device memory still allocated after the candidate")
        try:
            env.torch.cuda.synchronize()
        except Exception as e:  # a sticky CUDA error poisons the context for good
            reasons.append(f"CUDA context unusable: {type(e).__name__}: {str(e)[:200]}")
    bad = env.integrity.violations()
    if bad:
        reasons.append(f"patched: {', '.join(bad[:5])}")
    if threading.active_count() > env.threads:
        reasons.append(f"{threading.active_count() - env.threads} thread(s) left running")
    return reasons


def forget_files(workdir: Path, keep: set[str]) -> None:
    """Empty the jail's private /tmp and the worker's folder (but for what it made at start-up and the
    caches' layers, which the parent promotes and empties): the next candidate finds nothing of this one."""
    import shutil

    for folder, spare in ((Path("/tmp"), set()), (workdir, keep | {"layers"})):
        for entry in list(folder.iterdir()) if folder.is_dir() else []:
            if entry.name in spare:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphans of anything this worker started (a daemon that double-forked, a process that called
    setsid) become this worker's children, so that ``reap_strays`` finds them."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def reap_strays() -> list[str]:
    """Kill every process this worker's candidate started and left running; returns their names."""
    import signal

    kids, found, todo = _children(), [], [os.getpid()]
    while todo:
        for pid in kids.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
    names = []
    for pid in found:
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip() or str(pid))
            os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
    for pid in found:
        try:
            os.waitpid(pid, 0)
        except (ChildProcessError, OSError):
            pass
    return names


def main(argv: list[str] | None = None) -> int:
    """Serve requests until shutdown, recycling, or the parent closes the pipe."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=("cuda", "cpu", "compile"), required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--replies", type=int, required=True)
    args = ap.parse_args(argv)
    channel = Channel(args.requests, args.replies)
    _isolate_stdout()
    become_subreaper()
    try:
        env = setup(args.kind)
    except Exception as e:
        channel.send({"ready": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        return 1
    environ = dict(os.environ)
    env.threads = threading.active_count()
    env.keep = {p.name for p in env.workdir.iterdir()}
    channel.send({"ready": True, "pid": os.getpid(), "kind": args.kind})
    for req in channel.requests():
        if req.get("op") == "shutdown":
            sys.stderr.flush()
            os._exit(0)  # nothing to tear down: the parent owns the temp dir; skip interpreter teardown
        rid = req.get("id")
        try:
            result = handle(env, args.kind, req, channel)
            reply = {"id": rid, "ok": True, "result": result}
        except Exception as e:
            reply = {"id": rid, "ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        reasons = cleanup(env, environ)
        if reasons or (reply.get("result") or {}).get("recycle"):
            reply["recycle"] = reasons or ["requested by the evaluation"]
        channel.send(reply)
        if reply.get("recycle"):
            sys.stderr.write(f"recycling this worker: {reply['recycle']}\n")
            sys.stderr.flush()
            os._exit(0)  # a fresh process replaces this one; tearing this one down buys nothing
    return 0


if __name__ == "__main__":
    sys.exit(main())
