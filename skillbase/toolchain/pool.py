"""The parent side of the workers: start, talk to, time out, kill and restart them.

One warm worker per GPU (``cuda:N``, pinned with CUDA_VISIBLE_DEVICES), one CPU
worker running the Triton interpreter, and one compile worker. Each is started
in its own session so a timeout kills its whole process group (compilers and
anything the candidate spawned), with file-size and core rlimits (and an
address-space limit for CPU workers; CUDA reserves huge virtual ranges), a
scrubbed environment and a fresh temp directory. A worker that dies, hangs or
asks to be recycled costs one restart; the caller gets ``WorkerDied`` with the
reason and the tail of the worker's log, never a hung call.
"""

from __future__ import annotations

import json
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from skillbase.config import Settings, usable_cores
from skillbase.toolchain import layered_cache, limits, sandbox, seccomp
from skillbase.toolchain.cache import toolchain_versions
from skillbase.toolchain.verify import CPU_MALLOC_PERTURB

STARTUP_TIMEOUT_S = 180.0
_KEEP = re.compile(
    r"^(PATH|HOME|USER|LOGNAME|LANG|LANGUAGE|LC_\w+|TZ|TMPDIR|TERM|SHELL|PYTHONPATH|PYTHONHASHSEED|"
    r"VIRTUAL_ENV|LD_LIBRARY_PATH|LIBRARY_PATH|CPATH|CC|CXX|CUDA_\w+|NVIDIA_\w+|NVCC_\w+|"
    r"TRITON_\w+|TORCHINDUCTOR_\w+|TORCH_\w+|PYTORCH_\w+|OMP_NUM_THREADS|MKL_\w+|"
    r"XDG_CACHE_HOME|HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE|MAX_JOBS)$"
)
_SECRET = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|ANTHROPIC|OPENAI|AWS_|"
    r"GITHUB|HF_TOKEN|AZURE|GOOGLE",
    re.IGNORECASE,
)
REPO_ROOT = Path(__file__).resolve().parents[2]


class WorkerDied(Exception):
    """The worker timed out, crashed or failed to start; it has been killed."""

    def __init__(self, reason: str, detail: str, log_tail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail, self.log_tail = reason, detail, log_tail


def scrub_env(env: dict[str, str]) -> dict[str, str]:
    """Keep what compilers and CUDA need; drop anything that looks like a credential."""
    return {k: v for k, v in env.items() if _KEEP.match(k) and not _SECRET.search(k)}


def worker_env(
    settings: Settings, kind: str, gpu: int | None, base: dict[str, str] | None = None, home: Path | None = None
) -> dict[str, str]:
    """The environment of a worker of ``kind``: scrubbed, plus its own folders and the device pin.

    ``home`` is the worker's own folder: HOME and the compile caches' writable layer live there until
    each evaluation points the caches at its own layer (``layered_cache``)."""
    env = scrub_env(dict(os.environ if base is None else base))
    own = home if home is not None else settings.cache_dir / "worker"
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p),
            "PYTHONUNBUFFERED": "1",
            "HOME": str(own),
            "TMPDIR": "/tmp",
            "TRITON_CACHE_DIR": str(own / "triton" / "_worker"),
            "TORCHINDUCTOR_CACHE_DIR": str(own / "inductor" / "_worker"),
            "TORCH_EXTENSIONS_DIR": str(own / "torch_extensions" / "_worker"),
            "TRITON_DEFAULT_FP_FUSION": env.get("TRITON_DEFAULT_FP_FUSION", "1"),
            # CUDA C++ extension builds (ninja) use every core this process may run on.
            "MAX_JOBS": env.get("MAX_JOBS") or str(usable_cores()),
        }
    )
    env.pop("TRITON_INTERPRET", None)
    if kind == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["OMP_NUM_THREADS"] = "1"  # small shapes; several CPU workers share the cores
        env["MALLOC_PERTURB_"] = CPU_MALLOC_PERTURB  # fresh host allocations hold 0x7F bytes: unwritten outputs show
    elif kind == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        # Autotuning results persist in the cache with the kernels (keyed by kernel source, key values and
        # configs): re-evaluating an unchanged autotuned kernel does not re-time every config.
        env["TRITON_CACHE_AUTOTUNING"] = "1"
    return env


class Worker:
    """One worker process and the two pipes to it. Thread-safe: one request at a time."""

    def __init__(self, settings: Settings, kind: str, gpu: int | None = None, jail: sandbox.Jail | None = None):
        self.settings, self.kind, self.gpu = settings, kind, gpu
        self.jail = jail if jail is not None else sandbox.choose(settings.sandbox)
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.starts = 0
        self._buf = b""
        self._req_w = self._rep_r = None
        self.base: Path | None = None  # the worker's host folder: its log, and its jail's folder (workdir)
        self.workdir: Path | None = None
        self.group: limits.ProcessGroup | None = None

    @property
    def name(self) -> str:
        if self.kind == "cuda":
            return f"cuda:{self.gpu}"
        return f"{self.kind}:{self.gpu}" if self.gpu else self.kind

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _limits(self) -> None:
        mb = 1024 * 1024
        if self.group is not None:
            self.group.enter()  # before exec: nothing the worker starts escapes the process limit
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        fsize = self.settings.worker_file_mb * mb
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        cpu = int(self.settings.worker_cpu_s)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        if os.geteuid() != 0:  # root is exempt from RLIMIT_NPROC: the process group's limit bounds it
            n = self.settings.worker_max_procs
            resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
        if self.kind == "cpu":
            mem = self.settings.worker_memory_mb * mb
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

    @property
    def layers(self) -> Path:
        """Where this worker's evaluations write compiled kernels before they are promoted."""
        assert self.workdir is not None
        return self.workdir / "layers"

    def start(self) -> None:
        """Spawn the worker (in its jail) and wait until it has imported torch and is ready."""
        self.kill()
        if not self.jail.confined and self.settings.require_sandbox:
            raise WorkerDied(
                "start_failed",
                f"this server runs clients' code only in a sandbox, and none can be built here: {self.jail.reason}",
                "install bubblewrap (Debian: apt-get install bubblewrap), or start the server with "
                "--trust-clients if every client may run code as this server's user",
            )
        self.base = Path(tempfile.mkdtemp(prefix=f"skillbase-{self.name.replace(':', '')}-"))
        self.workdir = self.base / "jail"  # the only folder the jailed worker may write; the log stays outside
        self.workdir.mkdir()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        log = open(self.base / "worker.log", "ab")
        env = worker_env(self.settings, self.kind, self.gpu, home=self.workdir)
        filter_fd = None
        if self.jail.confined:
            env["SKILLBASE_JAILED"] = "1"  # the worker may then empty its /tmp and folder between candidates
            bpf = seccomp.program()
            if bpf is not None:
                filter_fd, w = os.pipe()
                os.write(w, bpf)  # a few hundred bytes: fits the pipe's buffer
                os.close(w)
        cmd = sandbox.argv(
            self.jail,
            [
                sys.executable,
                "-m",
                "skillbase.toolchain.worker",
                "--kind",
                self.kind,
                "--requests",
                str(req_r),
                "--replies",
                str(rep_w),
            ],
            workdir=self.workdir,
            readonly=[self.settings.cache_dir / k for k in ("triton", "torch_extensions")],
            gpu=self.kind == "cuda",
            pythonpath=env["PYTHONPATH"].split(os.pathsep),
            tmp_bytes=self.settings.worker_tmp_mb << 20,
            seccomp_fd=filter_fd,
        )
        self.group = limits.ProcessGroup.create(self.name, self.settings.worker_max_procs)
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self.workdir,
                env=env,
                pass_fds=(req_r, rep_w) + ((filter_fd,) if filter_fd is not None else ()),
                start_new_session=True,
                preexec_fn=self._limits,
            )
        finally:
            os.close(req_r)
            os.close(rep_w)
            if filter_fd is not None:
                os.close(filter_fd)
            log.close()
        self._req_w, self._rep_r, self._buf = req_w, rep_r, b""
        self.starts += 1
        try:
            msg = self._read(None, time.monotonic() + STARTUP_TIMEOUT_S, None)
        except WorkerDied as d:
            raise WorkerDied("start_failed", f"{self.name} worker did not start: {d.detail}", d.log_tail) from d
        if not msg.get("ready"):
            detail, tail = msg.get("error", "no ready message"), self.log_tail()
            self.kill()
            raise WorkerDied("start_failed", f"{self.name} worker did not start: {detail}", tail)

    def log_tail(self, chars: int = 3000) -> str:
        if self.base is None:
            return ""
        try:
            data = (self.base / "worker.log").read_bytes()
        except OSError:
            return ""
        return data[-chars:].decode("utf-8", errors="replace")

    def request(self, payload: dict, timeout: float, progress: Callable[[float, str], None] | None = None) -> dict:
        """Send one request and wait for its reply (relaying progress); kills the worker on timeout or death.

        The task travels as its source (the jail shows the worker no file of the host's), and the
        compile caches of the request's ``cache_ns`` (the candidate's hash) are layered for it; what it
        compiled is promoted into the shared cache once the reply is in."""
        with self.lock:
            if not self.alive:
                self.start()
            payload = dict(payload)
            namespace = str(payload.pop("cache_ns", None) or "_worker")
            if "task_path" in payload and "task_source" not in payload:
                payload["task_source"] = Path(payload["task_path"]).read_text(encoding="utf-8")
            payload["cache_env"] = layered_cache.layer_env(self.settings.cache_dir, self.layers, namespace)
            rid = os.urandom(6).hex()
            line = json.dumps({**payload, "id": rid}, default=str).encode() + b"\n"
            try:
                os.write(self._req_w, line)
            except OSError as e:
                tail = self.log_tail()
                self.kill()
                raise WorkerDied("crashed", f"{self.name} worker pipe closed: {e}", tail) from e
            reply = self._read(rid, time.monotonic() + timeout, progress, timeout)
            if namespace != "_worker":
                layered_cache.promote(self.layers, self.settings.cache_dir, namespace)
            if reply.get("recycle"):
                self.kill(graceful=True)
            return reply

    def _read(self, rid: str | None, deadline: float, progress, limit_s: float = STARTUP_TIMEOUT_S) -> dict:
        while True:
            while b"\n" in self._buf:
                raw, self._buf = self._buf.split(b"\n", 1)
                if not raw.strip():
                    continue
                msg = json.loads(raw)
                if "progress" in msg:
                    if progress is not None:
                        progress(float(msg["progress"]), str(msg.get("message", "")))
                    continue
                if rid is None or msg.get("id") == rid:
                    return msg
            self._check_disk()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                tail = self.log_tail()
                self.kill()
                raise WorkerDied("timeout", f"{self.name} worker exceeded its {limit_s:g} s limit and was killed", tail)
            ready, _, _ = select.select([self._rep_r], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(self._rep_r, 1 << 20)
            if not chunk:
                raise self._died()
            self._buf += chunk

    def _check_disk(self) -> None:
        """Kill the worker when what it wrote on the host's disk passes its quota (a private /tmp is a
        size-limited tmpfs; its own folder is a host folder)."""
        now = time.monotonic()
        if self.workdir is None or now - getattr(self, "_disk_at", 0.0) < 1.0:
            return
        self._disk_at = now
        used = sandbox.tree_bytes(self.workdir)
        if used > self.settings.worker_disk_mb * 1024 * 1024:
            tail = self.log_tail()
            self.kill()
            raise WorkerDied(
                "crashed",
                f"{self.name} worker wrote {used / 2**20:.0f} MiB, over its "
                f"{self.settings.worker_disk_mb} MiB disk quota, and was killed",
                tail,
            )

    def _died(self) -> WorkerDied:
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        tail = self.log_tail()
        self.kill()
        if code is not None and self.jail.confined and code > 128:
            code = -(code - 128)  # bwrap exits 128 + N when the worker it runs dies of signal N
        if code is not None and code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = f"signal {-code}"
            return WorkerDied("crashed", f"{self.name} worker was killed by {sig}", tail)
        return WorkerDied("crashed", f"{self.name} worker exited with status {code}", tail)

    def kill(self, graceful: bool = False) -> None:
        """Stop the worker's whole process group and close the pipes."""
        if self.proc is not None:
            if graceful and self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            else:
                # The leader is gone; anything it spawned in its group goes too.
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for fd in (self._req_w, self._rep_r):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._req_w = self._rep_r = None
        self.proc = None
        if self.group is not None:
            self.group.close()  # kills what is left in it, then removes it
            self.group = None
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = self.workdir = None

    def close(self) -> None:
        """Ask the worker to exit, then make sure it has."""
        with self.lock:
            if self.alive and self._req_w is not None:
                try:
                    os.write(self._req_w, b'{"op": "shutdown"}\n')
                except OSError:
                    pass
            self.kill(graceful=True)


class Pool:
    """Warm workers by name: ``cuda:N`` for each GPU of the host, ``cpu`` (and ``cpu:N`` for parallel
    interpreter runs) and ``compile``. With a ``remote`` back end (``ray_pool.RayBackend``), ``cuda:N``
    and ``cpu[:N]`` are the same workers run by Ray actors on a cluster; ``compile`` stays here."""

    def __init__(self, settings: Settings, remote=None):
        self.settings = settings
        self.workers: dict[str, Worker] = {}
        self.lock = threading.Lock()
        self.remote = remote  # a ray_pool.RayBackend, or None for this host's workers

    def get(self, name: str) -> Worker:
        """The worker of that name (started on its first request)."""
        with self.lock:
            w = self.workers.get(name)
            if w is None:
                kind, _, index = name.partition(":")
                if self.remote is not None and name != "compile":
                    w = self.remote.worker(name)
                elif kind == "cuda" and index.isdigit():
                    w = Worker(self.settings, "cuda", int(index))
                elif kind == "cpu" and (not index or index.isdigit()):
                    w = Worker(self.settings, "cpu", int(index or 0))
                elif name == "compile":
                    w = Worker(self.settings, name)
                else:
                    raise ValueError(f"unknown worker {name!r}")
                self.workers[name] = w
            return w

    def close(self) -> None:
        """Stop every worker."""
        with self.lock:
            workers = list(self.workers.values())
            self.workers.clear()
        for w in workers:
            w.close()
        if self.remote is not None:
            self.remote.close()

    def versions(self, name: str) -> dict[str, str]:
        """The toolchain versions worker ``name`` evaluates with (a Ray node's own, for a remote worker)."""
        w = self.get(name)
        return w.versions() if hasattr(w, "versions") else toolchain_versions()

    def stats(self) -> dict[str, Any]:
        """Per worker: alive, how many times it was started, its pid."""
        return {
            n: {"alive": w.alive, "starts": w.starts, "pid": w.proc.pid if w.proc else None}
            for n, w in self.workers.items()
        }
