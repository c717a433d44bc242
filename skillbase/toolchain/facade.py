"""``Toolchain``: the one entry point the API, CLI and MCP server use to load, compile and benchmark.

Everything that runs candidate code happens in a worker process (``pool.py``);
this side loads tasks (on torch's meta device, costing no memory), picks the
device and shape, consults the content-addressed caches, and turns the worker's
answer into a ``BenchReport`` or ``CompileReport``. A candidate that fails to
compile, crashes, hangs or cheats yields a report with that verdict; exceptions
are for bad arguments (unknown task, unreadable or oversized file, no GPU when
one is required).

    with Toolchain(Settings.from_env()) as tc:
        task = tc.load_task("row_softmax")              # or a path to a KernelBench-format file
        cand = tc.resolve_solution(task, "optimized")    # or a path to a solution file
        report = tc.benchmark(task, cand)                # BenchReport: verdict, checks, timing, roofline
        compiled = tc.compile(task, cand, arch="sm_90")  # CompileReport: registers, spills, diagnostics
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable

from skillbase.config import Settings, usable_cores
from skillbase.errors import InvalidInput, NotFound, TaskError, ToolchainUnavailable
from skillbase.models import (
    BenchReport,
    Candidate,
    Check,
    CompileReport,
    CorrectnessReport,
    Diagnostic,
    ErrorInfo,
    Hardware,
    ProfileReport,
    TaskInfo,
    TimingStats,
    content_hash,
)
from skillbase.toolchain import profile as profiler
from skillbase.toolchain import roofline, shrink, static, tasks
from skillbase.toolchain.cache import JsonCache, make_key, toolchain_versions
from skillbase.toolchain.diagnostics import truncate
from skillbase.toolchain.pool import STARTUP_TIMEOUT_S, Pool, WorkerDied
from skillbase.toolchain.schedule import Durations, Picker
from skillbase.toolchain.source import check_source_size, detect_language, read_source

Progress = Callable[[float, str], None]

TRIALS = 5
DESCRIBED_MAX = 256  # task descriptions kept in memory
# The interpreter runs every program in Python: work, not only bytes, bounds what it can check.
CPU_FLOP_LIMIT = 2 * 10**9
# torch.compile's max-autotune mode is the strongest stock baseline (autotuned GEMM and convolution
# templates); agents rarely beat it, so reports carry it beside eager and the default mode.
BASELINES = ("eager", "torch_compile", "torch_compile_max_autotune")


class Toolchain:
    """Compile, verify and benchmark KernelBench-format candidates in isolated, warm workers.

    Use as a context manager (or call ``close()``) so the workers are stopped.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        timing_budget_s: float = 1.0,
        target_ci: float = 0.01,
        cpu_workers: int | None = None,
    ):
        self.settings = settings
        self.cpu_workers = cpu_workers or min(2, usable_cores())
        remote = None
        if settings.ray_address:  # evaluations go to a Ray cluster's actors (skillbase[ray])
            from skillbase.toolchain.ray_pool import RayBackend

            remote = RayBackend(settings)
        self.pool = Pool(settings, remote)
        self.results = JsonCache(settings.cache_dir, "results")
        self.compiles = JsonCache(settings.cache_dir, "compiles")
        self.baseline_cache = JsonCache(settings.cache_dir, "baselines")
        self.peaks = JsonCache(settings.cache_dir, "hardware")
        self.shrunk = JsonCache(settings.cache_dir, "shrunk_shapes")
        self.understood = JsonCache(settings.cache_dir, "tasks")
        # Described tasks by path, content hash and solutions: a recall on a task file costs a file read.
        self._described: OrderedDict[tuple, TaskInfo] = OrderedDict()
        self._described_lock = threading.Lock()
        self.durations = Durations(JsonCache(settings.cache_dir, "durations"))
        self.timing = {"budget_s": timing_budget_s, "target_ci": target_ci}
        self._hw: dict[str, Hardware] = {}
        self._traces: dict[str, tasks.Trace] = {}
        self._gpus: int | None = None
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> "Toolchain":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker."""
        self.pool.close()

    # ---------------------------------------------------------------- tasks

    def list_tasks(self) -> list[TaskInfo]:
        """Every built-in task (``seeds/tasks``), described at its default shape."""
        return [self.load_task(name) for name in tasks.builtin_names()]

    def load_task(self, name_or_path: str) -> TaskInfo:
        """A task by built-in name or file path, with its metadata, shapes, bytes and FLOPs.

        Raises NotFound for an unknown name, LimitExceeded for an oversized file and
        TaskError for a file that does not import or lacks Model / get_inputs / get_init_inputs.
        """
        path, builtin = tasks.resolve_task_path(name_or_path)
        source = read_source(path, self.settings.max_source_bytes, what="task")
        key = (str(path), builtin, content_hash(source), tuple(sorted(tasks.solutions_of(path).items())))
        with self._described_lock:
            hit = self._described.get(key)
            if hit is not None:
                self._described.move_to_end(key)
                return hit.model_copy(deep=True)
        info = tasks.describe(path, builtin=builtin, max_bytes=self.settings.max_source_bytes, cache=self.understood)
        with self._described_lock:
            self._described[key] = info
            while len(self._described) > DESCRIBED_MAX:
                self._described.popitem(last=False)
        return info.model_copy(deep=True)

    def resolve_solution(self, task: TaskInfo, name_or_path: str) -> Candidate:
        """A candidate by built-in solution name ('optimized', or 'row_softmax/optimized') or by file path."""
        path = task.solutions.get(name_or_path)
        if path is None and "/" in name_or_path and not Path(name_or_path).exists():
            task_name, sol = name_or_path.split("/", 1)
            try:
                other = self.load_task(task_name)
            except NotFound:
                other = None
            path = other.solutions.get(sol) if other else None
        if path is None and Path(name_or_path).expanduser().is_file():
            path = str(Path(name_or_path).expanduser().resolve())
        if path is None:
            known = ", ".join(task.solutions) or "none"
            if name_or_path.endswith((".py", ".cu")) or "/" in name_or_path or "\\" in name_or_path:
                raise NotFound(
                    f"the solution file {name_or_path!r} does not exist",
                    hint="check the path (relative paths start where you run the command)"
                    + (f"; built-in solutions of {task.name}: {known}" if task.solutions else ""),
                )
            raise NotFound(
                f"no solution {name_or_path!r} for task {task.name}",
                hint=f"pass a file path or one of the built-in solutions: {known}",
            )
        source = read_source(path, self.settings.max_source_bytes, what="solution")
        return Candidate(source=source, language=detect_language(source), path=str(path))

    # --------------------------------------------------------------- devices

    def _gpu_count(self) -> int:
        if self._gpus is None:
            import torch

            self._gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if self.pool.remote is not None:  # the cluster's GPUs, wherever this process runs
                self._gpus = self.pool.remote.gpus()
        return self._gpus

    def _device_kind(self, device: str) -> str:
        d = self.settings.device if device == "auto" else device
        if d.startswith("cuda:"):
            d = "cuda"
        if d == "auto":
            d = "cuda" if self._gpu_count() else "cpu"
        if d not in ("cuda", "cpu"):
            raise InvalidInput(f"unknown device {device!r}", hint="use 'auto', 'cuda' or 'cpu'")
        if d == "cuda" and not self._gpu_count():
            raise ToolchainUnavailable(
                "no CUDA GPU is visible", hint="use --device cpu to verify under the Triton interpreter"
            )
        return d

    def hardware(self, device: str = "auto") -> Hardware:
        """The device with its measured peaks (bandwidth: the best streaming probe; matmul TFLOP/s), measured once and cached."""
        kind = self._device_kind(device)
        if kind == "cpu":
            return roofline.cpu_hardware()
        index = int(device.split(":", 1)[1]) if device.startswith("cuda:") else 0
        return self._hardware_of(f"cuda:{index}")

    def _lock(self, name: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(name, threading.Lock())

    def _hardware_of(self, worker: str) -> Hardware:
        if worker in self._hw:
            return self._hw[worker]
        with self._lock(f"hardware:{worker}"):  # one description and peak measurement per worker
            if worker not in self._hw:
                self._describe(worker)
        return self._hw[worker]

    def _describe(self, worker: str) -> None:
        w = self.pool.get(worker)
        try:
            described = Hardware(**_ok(w.request({"op": "describe"}, timeout=300))["hardware"])
            key = make_key(
                "peaks",
                described.name,
                described.arch,
                described.memory_bytes,
                self.pool.versions(worker)["torch"],
                roofline.PEAKS_METHOD,
            )
            cached = self.peaks.get(key)
            if cached is None:
                cached = _ok(w.request({"op": "hardware"}, timeout=600))["hardware"]
                self.peaks.put(key, cached)
        except WorkerDied as d:
            raise ToolchainUnavailable(
                f"the {worker} worker failed while describing its device: {d.detail}", hint=d.log_tail[-500:] or None
            ) from d
        self._hw[worker] = Hardware(**cached)

    # -------------------------------------------------------------- compile

    def compile(
        self, task: TaskInfo, candidate: Candidate, arch: str = "sm_90", *, use_cache: bool = True
    ) -> CompileReport:
        """Compile the candidate's kernels for ``arch`` and report registers, spills and shared memory per kernel.

        Triton kernels are traced from one forward at the task's shape and compiled
        ahead of time; CUDA C++ sources are compiled with nvcc. Works without a GPU.
        """
        check_source_size(candidate.source, self.settings.max_source_bytes)
        language = candidate.language or detect_language(candidate.source) or "triton"
        versions = toolchain_versions()
        key = make_key("compile", task.source_hash, candidate.source, arch, versions)
        if use_cache and (hit := self.compiles.get(key)):
            return CompileReport(**hit)
        req = {
            "op": "compile",
            "task_path": task.path,
            "shape": None,
            "small": task.small_shape,
            "cache_ns": candidate.source_hash,
            "source": candidate.source,
            "solution_path": candidate.path,
            "language": language,
            "arch": arch,
            "timeout_s": self.settings.compile_timeout_s,
            # compile stays on this host: a cluster's GPUs say nothing about a CUDA build here
            "full_build": language == "cuda" and self.pool.remote is None and self._gpu_count() > 0,
        }
        start = time.perf_counter()
        try:
            reply = self.pool.get("compile").request(req, timeout=self.settings.compile_timeout_s + 30)
        except WorkerDied as d:
            return CompileReport(
                ok=False,
                language=language,
                arch=arch,
                toolchain=versions,
                diagnostics=[Diagnostic(severity="error", message=f"compile {d.reason}: {d.detail}")],
                log=truncate(d.log_tail, self.settings.max_log_chars)[0],
                duration_s=time.perf_counter() - start,
            )
        if not reply.get("ok"):
            return CompileReport(
                ok=False,
                language=language,
                arch=arch,
                toolchain=versions,
                diagnostics=[Diagnostic(severity="error", message=reply.get("error", "compile failed"))],
                log=truncate(reply.get("traceback", ""), self.settings.max_log_chars)[0],
            )
        result = reply["result"]
        report = CompileReport(**result["report"])
        log, cut = truncate(result.get("log", ""), self.settings.max_log_chars)
        log_path = self._save_log(key, result.get("log", ""))
        report = report.model_copy(
            update={
                "log": log,
                "log_truncated": cut,
                "full_log_path": log_path,
                "toolchain": versions,
                "duration_s": time.perf_counter() - start,
            }
        )
        self.compiles.put(key, report.model_dump(mode="json"))
        return report

    def _save_log(self, key: str, text: str) -> str:
        path = self.settings.cache_dir / "logs" / f"compile_{key}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return str(path)

    # ------------------------------------------------------------ benchmark

    def benchmark(
        self,
        task: TaskInfo,
        candidate: Candidate,
        device: str = "auto",
        *,
        progress: Progress | None = None,
        use_cache: bool = True,
    ) -> BenchReport:
        """Verify the candidate against the reference (5+ fresh-input trials and every anti-cheat check) and,
        on a GPU, time it with baselines and a roofline. On the CPU, verification runs under the Triton
        interpreter at the task's small shape (``cpu_shape``: META['small'], or one shrunk automatically)
        and timing is reported as unavailable."""
        kind = self._device_kind(device)
        if self.pool.remote is not None and not device.startswith("cuda:"):
            with self.pool.remote.lease(self.worker_names(kind)) as worker:  # any idle actor of the cluster
                return self._evaluate(task, candidate, worker, progress, use_cache)
        worker = "cpu" if kind == "cpu" else (device if device.startswith("cuda:") else "cuda:0")
        return self._evaluate(task, candidate, worker, progress, use_cache)

    def profile(
        self,
        task: TaskInfo,
        candidate: Candidate,
        device: str = "auto",
        *,
        progress: Progress | None = None,
        ncu: bool = True,
    ) -> ProfileReport:
        """Profile the candidate's own kernels with Nsight Compute in a worker (see ``toolchain/profile.py``):
        per-kernel counters, a diagnosis and a bottleneck state. Without a GPU, or when ncu is missing or not
        permitted, a ProfileReport with ``available=False``, the reason, and what was measured instead
        (torch profiler kernel list on a GPU; the compile report and the roofline always). Never raises for
        a missing GPU; the candidate is not verified here (benchmark does that)."""
        start = time.perf_counter()
        check_source_size(candidate.source, self.settings.max_source_bytes)
        try:
            kind = self._device_kind(device)
        except ToolchainUnavailable as e:
            kind, why = "cpu", f"{e.message}: Nsight Compute needs a CUDA GPU"
        else:
            why = "profiling needs a CUDA GPU; this run is on the CPU (Triton interpreter)"
        worker = device if device.startswith("cuda:") else "cuda:0"
        hw = self._hardware_of(worker) if kind == "cuda" else None
        try:
            compiled = self.compile(task, candidate, hw.arch if hw and hw.arch.startswith("sm_") else "sm_90")
        except Exception as e:  # noqa: BLE001  (the profile still stands without it)
            compiled, why = None, why + f"; the compile report failed too: {e}"
        chash = candidate.source_hash
        if kind == "cpu":
            report = profiler.unavailable_report(task, chash, "cpu", None, "no_gpu", why, compiled)
            return report.model_copy(update={"wall_s": round(time.perf_counter() - start, 3)})
        req = {
            "op": "profile",
            "task_path": task.path,
            "shape": None,
            "source": candidate.source,
            "cache_ns": candidate.source_hash,
            "ncu_timeout_s": profiler.NCU_TIMEOUT_S,
            "no_ncu": not ncu,
        }
        try:
            reply = self.pool.get(worker).request(
                req, timeout=profiler.NCU_TIMEOUT_S + profiler.TORCH_TIMEOUT_S + 60, progress=progress
            )
        except WorkerDied as d:
            reason = "ncu_timeout" if d.reason == "timeout" else "candidate_failed"
            report = profiler.unavailable_report(task, chash, worker, hw, reason, d.detail, compiled)
            return report.model_copy(update={"wall_s": round(time.perf_counter() - start, 3)})
        if not reply.get("ok"):
            report = profiler.unavailable_report(
                task, chash, worker, hw, "candidate_failed", str(reply.get("error"))[:1000], compiled
            )
        else:
            report = profiler.assemble(task, chash, worker, hw, reply["result"], candidate.source, compiled)
        return report.model_copy(update={"wall_s": round(time.perf_counter() - start, 3)})

    def worker_names(self, device: str = "auto", workers: int | None = None) -> list[str]:
        """The workers a batch on ``device`` spreads over: every GPU of the host (or the first
        ``workers``), or ``workers`` CPU interpreter workers (default ``cpu_workers``)."""
        kind = self._device_kind(device)
        if kind == "cpu":
            n = max(1, workers or (self.pool.remote.cpu_slots() if self.pool.remote else self.cpu_workers))
            return ["cpu"] + [f"cpu:{i}" for i in range(1, n)]
        names = [f"cuda:{i}" for i in range(self._gpu_count())]
        return names[:workers] if workers else names

    def start_workers(self, device: str = "auto", workers: int | None = None) -> threading.Thread:
        """Start every worker a batch on ``device`` spreads over, and describe each GPU and measure (or read)
        its peaks, all at once and in the background: per-GPU set-up then overlaps across GPUs and with
        whatever the caller prepares meanwhile. Returns the thread doing it (join it to wait). A worker
        that fails to start is left for the batch to report with its first candidate."""
        names = self.worker_names(device, workers)

        def warm(name: str) -> None:
            try:
                if name.startswith("cuda"):
                    self._hardware_of(name)
                else:
                    self.pool.get(name).request({"op": "ping"}, timeout=STARTUP_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - reported by the batch that needs this worker
                pass

        def warm_all() -> None:
            threads = [threading.Thread(target=warm, args=(n,), daemon=True) for n in names]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        runner = threading.Thread(target=warm_all, daemon=True, name="skillbase-start-workers")
        runner.start()
        return runner

    def expected_eval_s(self, task: TaskInfo, device: str = "auto", candidate: Candidate | None = None) -> float:
        """Expected wall seconds of evaluating one candidate of ``task`` here: the last evaluation of any
        candidate of it on this kind of device, else an estimate from its eager baseline or its floor, plus
        the baselines' own time while they are not cached (and ``candidate`` would have them measured).
        Only used to put the longest first."""
        kind = self._device_kind(device)
        eager = self.known_baseline_ms(task, "eager") if kind == "cuda" else None
        known = (
            kind != "cuda"
            or (candidate is not None and not self.needs_baselines(candidate))
            or (eager is not None and self.known_baseline_ms(task, "torch_compile") is not None)
        )
        return self.durations.expected_s(task, kind, baselines_known=known, eager_ms=eager)

    @staticmethod
    def needs_baselines(candidate: Candidate) -> bool:
        """Whether timing ``candidate`` against the baselines can ever happen: a source defining no kernel
        (no @triton.jit function, no CUDA ``__global__``) always fails own_kernel_launched, so its
        evaluation does not measure the task's baselines (torch.compile alone takes seconds)."""
        return bool(static.kernel_names(candidate.source))

    def benchmark_many(
        self,
        jobs: list[tuple[TaskInfo, Candidate]],
        device: str = "auto",
        *,
        workers: int | None = None,
        on_done: Callable[[int, BenchReport], None] | None = None,
        on_error: Callable[[int, BaseException], None] | None = None,
        use_cache: bool = True,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[BenchReport | None]:
        """Evaluate several candidates over every GPU of the host (one warm worker each), all workers
        started at once. A worker takes a job only once it is ready, then the first job in the order given
        whose task's baselines no other worker is measuring: callers put the longest expected first
        (``expected_eval_s``). ``on_done(i, report)`` is called as each finishes (from a worker thread).
        Without ``on_error`` the first exception stops the batch and is raised; with it, a job's exception
        is handed over and the rest go on (its slot in the returned list stays None). When ``should_stop()``
        turns true, no further job starts (their slots stay None)."""
        names = self.worker_names(device, workers)
        kind = "cpu" if names[0].startswith("cpu") else "cuda"
        results: list[BenchReport | None] = [None] * len(jobs)
        errors: list[BaseException] = []
        order: list[int] = []
        for i, (task, cand) in enumerate(jobs):
            try:
                self._language(task, cand, kind)  # argument errors surface before any work starts
            except BaseException as e:
                if on_error is None:
                    raise
                on_error(i, e)
                continue
            order.append(i)

        measured: set[str] = set()  # tasks whose baselines are cached: they stay cached

        def busy_key(i: int) -> str | None:
            task, cand = jobs[i]
            if kind != "cuda" or task.source_hash in measured or not self.needs_baselines(cand):
                return None
            if (
                self.known_baseline_ms(task, "eager") is not None
                and self.known_baseline_ms(task, "torch_compile") is not None
            ):
                measured.add(task.source_hash)
                return None
            return task.source_hash

        picker = Picker(order, busy_key)

        def drain(worker: str) -> None:
            try:  # ready before taking a job: a slow start must not hold a job another worker could run
                if kind == "cuda":
                    self._hardware_of(worker)
                else:
                    self.pool.get(worker).request({"op": "ping"}, timeout=STARTUP_TIMEOUT_S)
            except BaseException:  # noqa: BLE001 - the job that meets it again reports it
                pass
            while not errors:
                if should_stop is not None and should_stop():
                    picker.stop()
                i = picker.take()
                if i is None:
                    return
                task, cand = jobs[i]
                try:
                    results[i] = self._evaluate(task, cand, worker, None, use_cache)
                except BaseException as e:
                    picker.done(i)
                    if on_error is None:
                        errors.append(e)
                    else:
                        on_error(i, e)
                    continue
                picker.done(i)
                if on_done is not None:
                    on_done(i, results[i])

        threads = [threading.Thread(target=drain, args=(n,), daemon=True) for n in names[: max(1, len(order))]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results

    def _language(self, task: TaskInfo, cand: Candidate, kind: str) -> str | None:
        check_source_size(cand.source, self.settings.max_source_bytes)
        lang = cand.language or detect_language(cand.source)
        if kind == "cpu" and lang == "cuda":
            raise ToolchainUnavailable(
                "CUDA C++ candidates need a GPU to run",
                hint="use compile() for a register and spill report of its kernels without a GPU",
            )
        return lang

    def _trace(self, task: TaskInfo, shape: dict | None) -> tasks.Trace:
        key = make_key(task.path, task.source_hash, shape)
        if key not in self._traces:
            tm = tasks.load_task_module(Path(task.path), shape)
            try:
                self._traces[key] = tasks.trace_reference(tm, fallbacks=True)
            except TaskError:
                # A reference that cannot be traced is still benchmarked: its inputs are known.
                self._traces[key] = tasks.untraced(tm)
        return self._traces[key]

    def _shape_for(self, task: TaskInfo, kind: str) -> dict | None:
        """The shape overrides an evaluation runs at (see ``cpu_shape``): none on a GPU."""
        return None if kind == "cuda" else self.cpu_shape(task)[0]

    def cpu_shape(self, task: TaskInfo) -> tuple[dict | None, str | None]:
        """The shape a CPU (Triton interpreter) evaluation runs at, and a note when it was shrunk
        automatically: the task's META['small'], else its own shape when one forward moves at most
        ``settings.cpu_shape_mb`` MiB and does at most CPU_FLOP_LIMIT FLOPs, else one found by halving its
        sizes (``shrink.py``), cached by the task's content. TaskError when no such shape exists."""
        if task.small_shape:
            return task.small_shape, None
        limit = self.settings.cpu_shape_mb * 2**20
        tr = self._trace(task, None)
        if tr.input_bytes + tr.output_bytes + tr.param_bytes <= limit and tr.flops <= CPU_FLOP_LIMIT:
            return None, None
        key = make_key("shrink", task.source_hash, limit, CPU_FLOP_LIMIT, toolchain_versions()["toolchain"])
        if (hit := self.shrunk.get(key)) is None:
            found = shrink.shrink_shape(Path(task.path), limit, CPU_FLOP_LIMIT)
            hit = {"shape": found.shape, "moved_bytes": found.moved_bytes, "original_bytes": found.original_bytes}
            self.shrunk.put(key, hit)
        note = (
            f"shape shrunk automatically for the Triton interpreter: {json.dumps(hit['shape'])} "
            f"(one forward moves {hit['moved_bytes'] / 2**20:.1f} MiB instead of "
            f"{hit['original_bytes'] / 2**20:.0f} MiB; limit {self.settings.cpu_shape_mb} MiB)"
        )
        return hit["shape"], note

    def _evaluate(
        self, task: TaskInfo, cand: Candidate, worker: str, progress: Progress | None, use_cache: bool
    ) -> BenchReport:
        start = time.perf_counter()
        kind = "cpu" if worker.startswith("cpu") else "cuda"
        lang = self._language(task, cand, kind)
        hw = roofline.cpu_hardware() if kind == "cpu" else self._hardware_of(worker)
        versions = self.pool.versions(worker)
        problem = static.precheck(cand.source)
        if problem is not None:  # answered here, before any worker: a file that cannot run is known at once
            return BenchReport(
                task=task.name,
                task_signature=task.signature,
                solution_hash=cand.source_hash,
                language=lang,
                device=worker if kind == "cuda" else "cpu",
                hardware=hw,
                toolchain=versions,
                verdict="invalid",
                message=problem,
                timing_unavailable=f"not run: {problem}",
                wall_s=time.perf_counter() - start,
            )
        shape = self._shape_for(task, kind)
        options = {
            "trials": TRIALS,
            "kind": kind,
            "timing": self.timing if kind == "cuda" else None,
            "extra_shapes": task.extra_shapes if kind == "cuda" else [],
        }
        key = make_key("bench", task.source_hash, shape, cand.source, versions, hw.key, options)
        if use_cache and (hit := self.results.get(key)):
            report = BenchReport(**hit)
            return report.model_copy(update={"cached": True, "wall_s": time.perf_counter() - start})
        trace = self._trace(task, shape)
        baseline_keys = {
            b: make_key(
                "baseline",
                b,
                task.source_hash,
                shape,
                task.dtype,
                hw.key,
                {k: v for k, v in versions.items() if k != "toolchain"},
            )
            for b in BASELINES
        }
        cached_baselines = {b: self.baseline_cache.get(k) for b, k in baseline_keys.items()} if kind == "cuda" else {}
        req = {
            "op": "evaluate",
            "task_path": task.path,
            "shape": shape,
            "source": cand.source,
            "cache_ns": cand.source_hash,
            "solution_path": cand.path,
            "language": lang,
            "trials": TRIALS,
            "tolerance": task.tolerance.model_dump(),
            "extra_shapes": options["extra_shapes"],
            "output_bytes": [trace.output_bytes],
            "timing": options["timing"],
            "baselines": [b for b, v in cached_baselines.items() if v is None] if self.needs_baselines(cand) else [],
            "baseline_compile_s": self.settings.baseline_compile_s,
        }
        base = dict(
            task=task.name,
            task_signature=task.signature,
            solution_hash=cand.source_hash,
            language=lang,
            device=worker if kind == "cuda" else "cpu",
            hardware=hw,
            toolchain=versions,
        )
        try:
            reply = self.pool.get(worker).request(req, timeout=self.settings.eval_timeout_s, progress=progress)
        except WorkerDied as d:
            return self._died(base, d, start)
        if not reply.get("ok"):
            return BenchReport(
                **base,
                verdict="runtime_error",
                message=f"the evaluation failed inside the worker: {reply.get('error')}",
                error=ErrorInfo(
                    type="WorkerError",
                    message=str(reply.get("error")),
                    traceback=str(reply.get("traceback", ""))[-4000:],
                ),
                wall_s=time.perf_counter() - start,
            )
        result = reply["result"]
        if reply.get("recycle"):  # what the worker found after the candidate and undid by starting afresh
            result = {
                **result,
                "notes": [
                    *(result.get("notes") or []),
                    *(
                        f"after the candidate: {r}; the worker was restarted"
                        for r in reply["recycle"]
                        if r != "requested by the evaluation"
                    ),
                ],
            }
        baselines, baseline_host = self._baselines(result, cached_baselines, baseline_keys)
        report = self._assemble(base, task, trace, hw, result, baselines, kind, shape)
        wall = time.perf_counter() - start
        host = {**baseline_host, **(result.get("host_ms") or {})}
        phases = {k: round(v, 3) for k, v in (result.get("phases_s") or {}).items()}
        report = report.model_copy(
            update={"wall_s": wall, "host_ms_per_call": host, "phases_s": {**phases, "total": round(wall, 3)}}
        )
        if report.verdict not in ("timeout", "crashed"):
            self.results.put(key, report.model_dump(mode="json"))
        self.durations.note(task, kind, wall, phases, report.verdict)
        return report

    def _died(self, base: dict, d: WorkerDied, start: float) -> BenchReport:
        if d.reason == "start_failed":  # the environment, not the candidate
            raise ToolchainUnavailable(d.detail, hint=d.log_tail[-500:] or None)
        verdict = "timeout" if d.reason == "timeout" else "crashed"
        what = (
            f"timed out: {d.detail}"
            if verdict == "timeout"
            else f"crashed: {d.detail} (a segfault, illegal memory access or abort in the candidate); "
            "the worker was restarted"
        )
        return BenchReport(
            **base,
            verdict=verdict,
            message=what,
            error=ErrorInfo(
                type=f"Worker{d.reason.title().replace('_', '')}", message=d.detail, traceback=d.log_tail[-4000:]
            ),
            timing_unavailable=f"not timed: the candidate {verdict.replace('_', ' ')}",
            wall_s=time.perf_counter() - start,
        )

    def _baselines(self, result: dict, cached: dict, keys: dict) -> tuple[dict[str, TimingStats], dict[str, float]]:
        """Baseline device timings and host-inclusive ms per call: measured now (and cached) or from the cache."""
        out, host = {}, {}
        for name, key in keys.items():
            stats = (result.get("baselines") or {}).get(name)
            if stats is not None:
                stats = {**stats, "host_ms": (result.get("baseline_host_ms") or {}).get(name)}
                self.baseline_cache.put(key, stats)
            elif why := (result.get("baseline_unavailable") or {}).get(name):
                self.baseline_cache.put(key, {"unavailable": why})  # bounded once, not again per candidate
            stats = dict(stats or cached.get(name) or {})
            if stats.get("unavailable"):
                if name not in (result.get("baseline_notes") or {}):
                    result.setdefault("baseline_notes", {})[name] = f"not measured: {stats['unavailable']}"
                continue
            if stats:
                if stats.get("host_ms") is not None:
                    host[name] = stats["host_ms"]
                stats.pop("host_ms", None)
                out[name] = TimingStats(**stats)
        return out, host

    def known_baseline_ms(self, task: TaskInfo, name: str = "eager") -> float | None:
        """The median of a baseline measured before for this task on any GPU of this host, if cached
        (used to schedule the longest evaluations first)."""
        versions = {k: v for k, v in toolchain_versions().items() if k != "toolchain"}
        for hw in list(self._hw.values()):
            hit = self.baseline_cache.get(
                make_key("baseline", name, task.source_hash, None, task.dtype, hw.key, versions)
            )
            if hit:
                return float(hit["median_ms"])
        return None

    def _assemble(
        self,
        base: dict,
        task: TaskInfo,
        trace: tasks.Trace,
        hw: Hardware,
        result: dict,
        baselines: dict[str, TimingStats],
        kind: str,
        shape: dict | None,
    ) -> BenchReport:
        correctness = CorrectnessReport(**result["correctness"]) if result.get("correctness") else None
        timing = TimingStats(**result["timing"]) if result.get("timing") else None
        verdict, message = result["verdict"], result["message"]
        notes = list(result.get("notes") or [])
        notes += [f"{name} baseline unavailable: {why}" for name, why in (result.get("baseline_notes") or {}).items()]
        if kind == "cpu" and (shrunk := self.cpu_shape(task)[1]):
            notes.insert(0, shrunk)
        roof = None
        if timing is not None:
            roof = roofline.analyze(task.bytes_moved, task.flops, timing.median_ms, hw, task.dtype)
            floor_bytes = min(
                task.bytes_moved,
                roofline.dram_bytes_floor(trace.input_bytes + trace.param_bytes, trace.output_bytes, hw.l2_bytes),
            )
            floor = roofline.floor_ms(floor_bytes, task.flops, hw.peak_gbps, roofline.peak_rate(hw, task.dtype))
            check = self._physics(timing.median_ms, floor)
            if correctness is not None:
                correctness = correctness.model_copy(
                    update={
                        "checks": [c for c in correctness.checks if c.name != "physically_possible"] + [check],
                        "passed": correctness.passed and check.passed,
                    }
                )
            if not check.passed:
                verdict, message = "rejected", f"rejected by physically_possible: {check.detail}"
            elif roof.pct_sol is not None and roof.pct_sol > 100:
                notes.append(over_the_roof(roof.pct_sol, hw))
        error = ErrorInfo(**result["error"]) if result.get("error") else None
        report = BenchReport(
            **base,
            verdict=verdict,
            message=message,
            correctness=correctness,
            timing=timing,
            baselines=baselines,
            roofline=roof,
            custom_kernels=result.get("custom_kernels") or [],
            error=error,
            notes=notes,
            precision=result.get("precision"),
        )
        if timing is not None and timing.median_ms > 0:  # 0: below what an event pair resolves (no speedup)
            eager, comp = baselines.get("eager"), baselines.get("torch_compile")
            tuned = baselines.get("torch_compile_max_autotune")
            report = report.model_copy(
                update={
                    "speedup_vs_eager": eager.median_ms / timing.median_ms if eager else None,
                    "speedup_vs_compile": comp.median_ms / timing.median_ms if comp else None,
                    "speedup_vs_max_autotune": tuned.median_ms / timing.median_ms if tuned else None,
                }
            )
        if verdict == "correct":
            report = report.model_copy(update={"message": self._summary(report, kind, shape)})
        if timing is None:
            report = report.model_copy(update={"timing_unavailable": self._why_untimed(verdict, kind)})
        return report

    @staticmethod
    def _physics(median_ms: float, floor: float | None) -> Check:
        if floor is None:
            return Check(name="physically_possible", passed=True, skipped=True, detail="no measured peaks")
        if roofline.impossible(median_ms, floor):
            return Check(
                name="physically_possible",
                passed=False,
                detail=f"median {median_ms * 1e3:.2f} µs is below {roofline.IMPOSSIBLE_FRACTION:.0%} of the "
                f"physical floor {floor * 1e3:.2f} µs (bytes / measured bandwidth, FLOPs / measured "
                "rate): work escaped the timed region or was skipped",
            )
        return Check(
            name="physically_possible",
            passed=True,
            detail=f"median {median_ms * 1e3:.2f} µs >= floor {floor * 1e3:.2f} µs",
        )

    @staticmethod
    def _why_untimed(verdict: str, kind: str) -> str:
        if kind == "cpu":
            return (
                "timing needs a CUDA GPU: on the CPU the Triton interpreter only checks correctness, "
                "and its speed says nothing about GPU speed"
            )
        return f"not timed: verdict is {verdict}"

    @staticmethod
    def _summary(r: BenchReport, kind: str, shape: dict | None) -> str:
        c = r.correctness
        trials = f"correct on {c.trials} trials" if c else "correct"
        if kind == "cpu" or r.timing is None:
            where = f" at the small shape {json.dumps(shape)}" if shape else ""
            return f"{trials}{where} under the Triton interpreter (CPU); not timed: timing needs a GPU"
        t = r.timing
        parts = [
            f"{trials}; median {t.median_ms * 1e3:.2f} µs (IQR {t.q1_ms * 1e3:.2f}-{t.q3_ms * 1e3:.2f} µs, "
            f"n={t.n}, CUDA events, L2 flushed)"
        ]
        if r.speedup_vs_eager:
            parts.append(f"{r.speedup_vs_eager:.2f}x vs eager")
        if r.speedup_vs_compile:
            parts.append(f"{r.speedup_vs_compile:.2f}x vs torch.compile")
        if r.roofline and r.roofline.pct_sol is not None:
            parts.append(f"{r.roofline.pct_sol:.0f}% of speed of light ({r.roofline.bound}-bound)")
        return "; ".join(parts)


def over_the_roof(pct_sol: float, hw: Hardware) -> str:
    """Why an honest kernel reads above 100% of speed of light: the roofs are measured, not stated."""
    sheet = f"; the datasheet states {hw.datasheet_gbps:.0f} GB/s" if hw.datasheet_gbps else ""
    return (
        f"{pct_sol:.0f}% of speed of light: above the measured roof ({hw.peak_gbps or 0:.0f} GB/s, the best "
        f"of the streaming probes{sheet}, and the measured matmul rates); the kernel moved memory faster than "
        "every probe, or fewer bytes than the task's count (data reused from L2)"
    )


def _ok(reply: dict) -> dict:
    if not reply.get("ok"):
        raise ToolchainUnavailable(f"worker request failed: {reply.get('error')}")
    return reply["result"]


def candidate_from_source(source: str, path: str | None = None) -> Candidate:
    """A Candidate from source text (language detected)."""
    return Candidate(source=source, language=detect_language(source), path=path)


__all__ = ["Toolchain", "candidate_from_source"]
