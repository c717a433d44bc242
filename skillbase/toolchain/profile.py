"""Profiling a candidate: the worker side (run ncu, or the torch profiler when ncu cannot run)
and the parent side (turn what came back into a ``ProfileReport``).

The worker runs ``ncu`` on ``profile_runner`` as a child process in the worker's own
process group, so the pool's timeout kills it with the worker; its own, shorter
timeout kills the whole ncu process tree first and answers "ncu_timeout". When ncu is
missing, may not read the counters, fails or times out, the runner is run once more
under the torch profiler: the kernel list with durations is what was measured instead.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from skillbase.models import (
    CompileReport,
    Hardware,
    KernelProfile,
    NcuRun,
    ProfileReport,
    TaskInfo,
    TimedKernel,
    content_hash,
)
from skillbase.toolchain import diagnose, ncu, roofline, static
from skillbase.toolchain.profiling import own_kernels

NCU_TIMEOUT_S = 150.0
TORCH_TIMEOUT_S = 120.0
MAX_CSV_CHARS = 200_000
NCU_PATHS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
_REJECTED: set[str] = set()  # metrics ncu refused on this worker's GPU: not asked for again


def find_ncu() -> str | None:
    """The ncu executable: $SKILLBASE_NCU, then PATH, then the CUDA toolkit's usual places."""
    explicit = os.environ.get("SKILLBASE_NCU")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return shutil.which("ncu") or next((p for p in NCU_PATHS if Path(p).is_file()), None)


# ---------------------------------------------------------------------------
# Worker side
# ---------------------------------------------------------------------------


def profile_request(req: dict, workdir: Path, progress) -> dict:
    """Run the candidate under ncu (or the torch profiler); returns the raw outputs for the parent."""
    source = req["source"]
    sol = workdir / f"solution_{content_hash(source)}.py"
    sol.write_text(source)
    run_req = {"task_path": req["task_path"], "shape": req.get("shape"), "solution_path": str(sol), "warmup": 3}
    out: dict = {"tool": "none", "unavailable": None, "detail": "", "csv": "", "log": "", "torch_kernels": []}
    exe = find_ncu() if not req.get("no_ncu") else None
    if exe is None:
        out.update(
            unavailable="ncu_missing",
            detail="Nsight Compute (ncu) is not on PATH nor in /usr/local/cuda/bin"
            + (" (profiling without ncu was asked for)" if req.get("no_ncu") else ""),
        )
    else:
        progress(0.1, "running Nsight Compute")
        kernels = static.kernel_names(source)
        argv = [
            sys.executable,
            "-m",
            "skillbase.toolchain.profile_runner",
            _write(workdir / "ncu_req.json", {**run_req, "mode": "ncu"}),
            str(workdir / "ncu_out.json"),
        ]
        timeout = float(req.get("ncu_timeout_s", NCU_TIMEOUT_S))
        start = time.perf_counter()
        metrics = [m for m in ncu.metric_names() if m not in _REJECTED]
        cmd = ncu.command(exe, argv, kernels, metrics)
        code, stdout, stderr = _run(cmd, workdir, timeout)
        bad = ncu.rejected_metrics(stdout + "\n" + stderr, metrics) if code else []
        if bad and time.perf_counter() - start < timeout / 2:
            # A metric this GPU or ncu version does not know fails the whole run: drop it (for the life of
            # this worker) and run once more; the records say it is missing and why.
            _REJECTED.update(bad)
            out["dropped_metrics"] = bad
            cmd = ncu.command(exe, argv, kernels, [m for m in metrics if m not in bad])
            code, stdout, stderr = _run(cmd, workdir, timeout - (time.perf_counter() - start))
        log = stdout + "\n" + stderr
        out["ncu"] = {
            "command": " ".join(cmd[:-2] + ["REQUEST", "RESULT"]),
            "wall_s": round(time.perf_counter() - start, 2),
            "passes": ncu.passes(log),
            "exit_code": code,
            "clock_control": "none",
        }
        out["csv"] = stdout[-MAX_CSV_CHARS:]
        out["log"] = stderr[-4000:]
        if code is None:
            out.update(unavailable="ncu_timeout", detail=f"ncu exceeded its {timeout:g} s limit and was killed")
        elif ncu.not_permitted(log):
            out.update(
                unavailable="ncu_not_permitted",
                detail="ncu may not read the GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or "
                "set NVreg_RestrictProfilingToAdminUsers=0 for the nvidia driver",
            )
        elif code != 0 or not ncu.parse_csv(stdout):
            tail = " | ".join(stderr.strip().splitlines()[-3:])[-500:]
            out.update(
                unavailable="ncu_failed" if code != 0 else "no_own_kernels",
                detail=(
                    f"ncu exited {code}: {tail}"
                    if code != 0
                    else "ncu profiled no kernel of the solution inside the profiled forward "
                    f"(looked for: {', '.join(sorted(kernels)) or 'any kernel'})"
                ),
            )
        else:
            out["tool"] = "ncu"
    if out["unavailable"] is not None and not req.get("no_fallback"):
        progress(0.6, "listing kernels with the torch profiler instead")
        tk = workdir / "torch_out.json"
        code, _, stderr = _run(
            [
                sys.executable,
                "-m",
                "skillbase.toolchain.profile_runner",
                _write(workdir / "torch_req.json", {**run_req, "mode": "torch"}),
                str(tk),
            ],
            workdir,
            TORCH_TIMEOUT_S,
        )
        if code == 0 and tk.is_file():
            out["tool"] = "torch_profiler"
            out["torch_kernels"] = json.loads(tk.read_text())["kernels"]
        else:
            out["torch_error"] = (f"exit {code}: " if code is not None else "timed out: ") + stderr[-1500:]
    return out


def _write(path: Path, obj: dict) -> str:
    path.write_text(json.dumps(obj))
    return str(path)


def _run(cmd: list[str], cwd: Path, timeout: float) -> tuple[int | None, str, str]:
    """Run ``cmd``; on timeout kill it and every process under it. Returns (exit code or None, stdout, stderr)."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        return proc.returncode, stdout, stderr
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        stdout, stderr = proc.communicate()
        return None, stdout or "", stderr or ""


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and its descendants (ncu starts the profiled process as its child)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children.get(p, [])
    for p in seen:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


# ---------------------------------------------------------------------------
# Parent side
# ---------------------------------------------------------------------------


def unavailable_report(
    task: TaskInfo,
    solution_hash: str,
    device: str,
    hw: Hardware | None,
    reason: str,
    detail: str,
    compiled: CompileReport | None,
) -> ProfileReport:
    """The typed "unavailable" answer: why, and the compile report and roofline regime measured instead."""
    report = ProfileReport(
        task=task.name,
        task_signature=task.signature,
        solution_hash=solution_hash,
        device=device,
        hardware=hw,
        available=False,
        unavailable=reason,
        unavailable_detail=detail,
        compile=compiled,
        **_roofline_fields(task, hw),
    )
    return with_instead(report)


def assemble(
    task: TaskInfo,
    solution_hash: str,
    device: str,
    hw: Hardware,
    raw: dict,
    source: str,
    compiled: CompileReport | None,
) -> ProfileReport:
    """A ProfileReport from the worker's raw answer: parsed kernels, findings, state, diagnosis."""
    base = dict(
        task=task.name,
        task_signature=task.signature,
        solution_hash=solution_hash,
        device=device,
        hardware=hw,
        compile=compiled,
        **_roofline_fields(task, hw),
    )
    run = NcuRun(**{**raw["ncu"], "kernels": 0}) if raw.get("ncu") else None
    if raw.get("tool") != "ncu":
        timed = [
            TimedKernel(name=k["name"], duration_us=round(k["duration_us"], 3)) for k in raw.get("torch_kernels", [])
        ]
        notes = [f"torch profiler failed too: {raw['torch_error'][:500]}"] if raw.get("torch_error") else []
        report = ProfileReport(
            **base,
            available=False,
            unavailable=raw.get("unavailable") or "ncu_failed",
            unavailable_detail=raw.get("detail", ""),
            torch_kernels=timed,
            ncu=run,
            raw_csv=raw.get("csv", "")[:20_000],
            notes=notes,
            kernel_time_us=_total([k.duration_us for k in timed]),
        )
        return with_instead(report)
    kernels = [ncu.kernel_profile(k) for k in ncu.parse_csv(raw["csv"])]
    mine = set(own_kernels([k.name for k in kernels], static.kernel_names(source)))
    notes = []
    if mine and len(mine) < len({k.name for k in kernels}):
        notes.append(
            "kernels not defined by the solution were left out: "
            + ", ".join(sorted({k.name for k in kernels} - mine))[:300]
        )
        kernels = [k for k in kernels if k.name in mine]
    kernels = _with_spills(kernels, compiled)
    if raw.get("dropped_metrics"):
        notes.append(
            "ncu does not know these metrics on this GPU (dropped, their fields are None): "
            + ", ".join(raw["dropped_metrics"])
        )
    findings, state = diagnose.diagnose(kernels, task.family)
    main = max(kernels, key=lambda k: k.duration_us or 0.0) if kernels else None
    return ProfileReport(
        **base,
        available=True,
        kernels=kernels,
        findings=findings,
        state=state,
        metrics=main.metrics() if main else {},
        diagnosis=diagnose.summary(findings, state),
        techniques=diagnose.techniques_of(findings, state),
        ncu=run.model_copy(update={"kernels": len(kernels)}) if run else None,
        raw_csv=raw["csv"],
        kernel_time_us=_total([k.duration_us for k in kernels]),
        notes=notes,
    )


def rediagnose(report: ProfileReport, family: str | None = None) -> ProfileReport:
    """The same counters diagnosed again with the current rules: findings, state, diagnosis and
    techniques recomputed from the report's kernels (a saved profile read after the rules changed)."""
    if not report.available or not report.kernels:
        return report
    if family is None and report.task_signature:
        family = report.task_signature.split(":", 1)[0]
    kernels = [ncu.uncounted_efficiency(k) for k in report.kernels]
    findings, state = diagnose.diagnose(kernels, family)
    main = max(kernels, key=lambda k: k.duration_us or 0.0)
    return report.model_copy(
        update={
            "kernels": kernels,
            "findings": findings,
            "state": state,
            "metrics": {
                n: float(v) if isinstance(v, int) else v  # as validation would
                for n, v in main.metrics().items()
            },
            "diagnosis": diagnose.summary(findings, state),
            "techniques": diagnose.techniques_of(findings, state),
        }
    )


def with_instead(report: ProfileReport) -> ProfileReport:
    """Say what was measured instead of the counters."""
    instead = []
    if report.torch_kernels:
        instead.append(
            f"torch profiler: {len(report.torch_kernels)} kernel launches with durations "
            f"({report.kernel_time_us:.1f} µs in all)"
        )
    if report.compile is not None:
        instead.append(
            "compile report: registers, spills and shared memory per kernel"
            if report.compile.ok
            else "compile report (the compile failed: see its diagnostics)"
        )
    instead.append(
        f"roofline: {report.bound}-bound estimate from bytes and FLOPs"
        + (f", floor {report.floor_us:.1f} µs on this GPU" if report.floor_us else "")
    )
    diagnosis = f"Counters unavailable ({report.unavailable}): {report.unavailable_detail}"
    return report.model_copy(update={"measured_instead": instead, "diagnosis": diagnosis})


def _roofline_fields(task: TaskInfo, hw: Hardware | None) -> dict:
    u = task.understanding
    bound = (u.regime if u and u.regime else None) or "unknown"
    floor = None
    if hw is not None and hw.kind == "cuda":
        floor = roofline.floor_ms(task.bytes_moved, task.flops, hw.peak_gbps, roofline.peak_rate(hw, task.dtype))
    return {
        "bound": bound,
        "bytes_moved": task.bytes_moved,
        "flops": task.flops,
        "floor_us": round(floor * 1e3, 3) if floor else None,
    }


def _with_spills(kernels: list[KernelProfile], compiled: CompileReport | None) -> list[KernelProfile]:
    """Spill bytes per thread from the compile report, matched by kernel name."""
    if compiled is None or not compiled.kernels:
        return kernels
    spills = {k.name: k.spill_store_bytes + k.spill_load_bytes for k in compiled.kernels}
    out = []
    for k in kernels:
        hit = next((v for n, v in spills.items() if n and n in k.name), None)
        out.append(k.model_copy(update={"spill_bytes": hit}) if hit is not None else k)
    return out


def _total(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return round(sum(got), 3) if got else None
