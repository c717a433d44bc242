"""Ahead-of-time compilation of a candidate for a target GPU, with per-kernel resources.

Triton: the solution's forward is run once with the JIT launch path replaced by
a recorder (tensors on the ``meta`` device at the task's real shape, or real CPU
tensors at its small shape when meta does not work), so we learn which kernels
it launches with which signature, constexprs, warps and stages; each is then
compiled with ``triton.compile`` for ``GPUTarget('cuda', arch, 32)`` and its PTX
assembled with ``ptxas -v`` for registers, spills and stack. No GPU is needed.

CUDA C++: the ``load_inline`` call is intercepted during import to capture its
sources; the CUDA sources are compiled with ``nvcc -cubin -Xptxas -v`` under
``#line`` directives so errors point into the solution file. A device-only
pass (host functions and torch headers blanked out, line numbers kept) takes
about a second; when it cannot stand alone the full translation unit with
torch's headers is compiled instead. Where torch has CUDA the extension is also
built for real.

Runs inside a worker process: it imports candidate code.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbase.models import CompileReport, Diagnostic, KernelReport, arch_number, content_hash
from skillbase.toolchain import diagnostics, static
from skillbase.toolchain.cuda_source import blank_host_code, cxxfilt, demangle, needs_full, source_start_line
from skillbase.toolchain.tasks import import_module_at, load_task_module, shape_globals

MAX_AUTOTUNE_CONFIGS = 16
_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


@dataclass
class TraceRecord:
    kernel: Any
    signature: dict
    constexprs: dict
    attrs: dict
    options: Any


@dataclass
class Captured:
    """What a load_inline call was given."""

    name: str
    cuda_sources: list[str]
    cpp_sources: list[str]
    extra_cuda_cflags: list[str]
    extra_include_paths: list[str]


@dataclass
class CompileJob:
    source: str
    run_path: Path
    display: str
    arch: str
    workdir: Path
    diagnostics: list[Diagnostic] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------
# Triton
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def recording_launches(arch: int, records: list[TraceRecord]):
    """Replace Triton's launch path (JIT, autotuner) by a recorder of what would be compiled."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction, create_function_from_signature

    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    saved = (JITFunction.run, Autotuner.run)

    def jit_run(self, *args, grid, warmup, **kwargs):
        binder = create_function_from_signature(self.signature, self.params, backend)
        bound, spec, opts = binder(*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound, spec, opts)
        records.append(TraceRecord(self, signature, constexprs, attrs, options))
        return None

    def autotune_run(self, *args, **kwargs):
        for cfg in self.configs[:MAX_AUTOTUNE_CONFIGS]:
            # A config's pre_hook may size what the kernel sees (TMA descriptors' block
            # shapes, zeroed accumulators): run it as the autotuner would before a launch.
            if cfg.pre_hook:
                cfg.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **cfg.all_kwargs()})
            self.fn.run(*args, **{**kwargs, **cfg.all_kwargs()})
        return None

    JITFunction.run, Autotuner.run = jit_run, autotune_run
    try:
        yield target
    finally:
        JITFunction.run, Autotuner.run = saved


def _trace_forward(torch, task_path: Path, shape: dict | None, device: str, module) -> dict:
    tm = load_task_module(task_path, shape)
    with torch.device(device), torch.no_grad():
        torch.manual_seed(0)
        model = module.ModelNew(*tm.get_init_inputs())
        inputs = list(tm.get_inputs())
        model(*inputs)
    return shape_globals(tm)


def trace_triton(
    torch, job: CompileJob, task_path: Path, shape: dict | None, small: dict | None
) -> tuple[list[TraceRecord], dict | None, Any]:
    """Kernels launched by one forward: traced on meta at ``shape``, else on CPU at ``small``."""
    records: list[TraceRecord] = []
    with recording_launches(arch_number(job.arch) or 90, records) as target:
        module = import_module_at(job.run_path, kind="solution")
        if not hasattr(module, "ModelNew"):
            raise LookupError("solution defines no `ModelNew` class")
        errors = []
        attempts = [("meta", shape)]
        if small is not None:
            attempts += [("cuda", small)] if torch.cuda.is_available() else []
            attempts += [("cpu", small)]
        for device, at in attempts:
            records.clear()
            try:
                traced = _trace_forward(torch, task_path, at, device, module)
                return records, traced, target
            except Exception as e:
                errors.append((device, e))
                if records:
                    job.log.append(
                        f"trace on {device} stopped early ({type(e).__name__}: {e}); "
                        f"compiling the {len(records)} launch(es) seen before"
                    )
                    return records, at, target
        device, exc = errors[-1]
        raise exc


def compile_triton(
    torch, job: CompileJob, task_path: Path, shape: dict | None, small: dict | None
) -> tuple[list[KernelReport], dict | None]:
    """Trace the forward's launches and compile each distinct (kernel, signature, constexprs, warps, stages)."""
    import triton
    from triton.compiler import ASTSource

    records, traced, target = trace_triton(torch, job, task_path, shape, small)
    if not records:
        job.diagnostics.append(Diagnostic(severity="warning", message="the forward launched no Triton kernel"))
    kernels, seen = [], set()
    for rec in records:
        key = (
            id(rec.kernel),
            repr(sorted(rec.signature.items())),
            repr(sorted(rec.constexprs.items())),
            rec.options.num_warps,
            rec.options.num_stages,
        )
        if key in seen:
            continue
        seen.add(key)
        compiled = triton.compile(
            ASTSource(rec.kernel, rec.signature, rec.constexprs, rec.attrs), target=target, options=rec.options.__dict__
        )
        kernels.append(_triton_report(rec, compiled, job))
    return kernels, traced


def _triton_report(rec: TraceRecord, compiled, job: CompileJob) -> KernelReport:
    md = compiled.metadata
    names = list(rec.kernel.arg_names)
    config = {names[p[0]] if len(p) == 1 else str(p): _plain(v) for p, v in rec.constexprs.items()}
    res = ptxas_resources(compiled.asm["ptx"], job)
    return KernelReport(
        name=md.name,
        language="triton",
        registers=res.get("registers"),
        spill_store_bytes=res.get("spill_store", 0),
        spill_load_bytes=res.get("spill_load", 0),
        stack_bytes=res.get("stack", 0),
        shared_bytes=int(md.shared),
        num_warps=md.num_warps,
        num_stages=md.num_stages,
        config=config,
        signature={k: str(v) for k, v in rec.signature.items()},
    )


def _plain(v):
    return v if isinstance(v, (int, float, str, bool, type(None))) else str(v)


def ptxas_resources(ptx: str, job: CompileJob) -> dict:
    """Registers, spills and stack of the (single) entry in ``ptx``, from Triton's bundled ptxas -v."""
    from triton.backends.nvidia.compiler import get_ptxas

    arch = arch_number(job.arch) or 90
    target = re.search(r"^\.target\s+(\S+)", ptx, re.MULTILINE)
    gpu = target.group(1) if target else f"sm_{arch}"
    path = job.workdir / f"k_{content_hash(ptx)}.ptx"
    path.write_text(ptx)
    proc = subprocess.run(
        [get_ptxas(arch).path, "-v", f"--gpu-name={gpu}", str(path), "-o", str(path) + ".cubin"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    job.log.append(proc.stderr)
    entries = parse_ptxas(proc.stderr)
    return next(iter(entries.values()), {})


def parse_ptxas(log: str) -> dict[str, dict]:
    """Per-entry resources from ``ptxas -v`` output: registers, spill_store, spill_load, stack, smem."""
    out: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = _PTXAS_ENTRY.search(line)
        if m:
            current = m.group(1)
            out.setdefault(current, {})
            continue
        if "Function properties for" in line:
            current = line.rsplit("for", 1)[1].strip()
            out.setdefault(current, {})
            continue
        if current is None:
            continue
        m = _PTXAS_PROPS.search(line)
        if m:
            out[current].update(stack=int(m.group(1)), spill_store=int(m.group(2)), spill_load=int(m.group(3)))
        m = _PTXAS_USED.search(line)
        if m:
            out[current]["registers"] = int(m.group(1))
            if m.group(2):
                out[current]["smem"] = int(m.group(2))
    return out


# ---------------------------------------------------------------------------
# CUDA C++
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def capturing_load_inline(captured: list[Captured]):
    """Make load_inline record its arguments and return a stand-in module instead of building."""
    import torch.utils.cpp_extension as ext

    saved = ext.load_inline

    def fake(
        name,
        cpp_sources,
        cuda_sources=None,
        *args,
        functions=None,
        extra_cuda_cflags=None,
        extra_include_paths=None,
        **kwargs,
    ):
        def as_list(x):
            return [x] if isinstance(x, str) else list(x or [])

        captured.append(
            Captured(
                name,
                as_list(cuda_sources),
                as_list(cpp_sources),
                list(extra_cuda_cflags or []),
                list(extra_include_paths or []),
            )
        )
        stub = types.ModuleType(name)
        fn_names = functions if isinstance(functions, (list, tuple)) else list((functions or {}).keys())
        for f in fn_names:
            setattr(stub, f, _not_built(name, f))
        return stub

    ext.load_inline = fake
    try:
        yield
    finally:
        ext.load_inline = saved


def _not_built(ext_name: str, fn: str):
    def call(*args, **kwargs):
        raise RuntimeError(f"{ext_name}.{fn} was not built (compile-only mode)")

    return call


def capture_cuda(torch, job: CompileJob) -> list[Captured]:
    """Import the solution with load_inline intercepted; the sources it would have built."""
    captured: list[Captured] = []
    with capturing_load_inline(captured):
        module = import_module_at(job.run_path, kind="solution")
        if not captured and hasattr(module, "ModelNew"):
            with contextlib.suppress(Exception), torch.device("meta"):
                module.ModelNew()
    return captured


def _nvcc() -> str | None:
    for cand in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).exists():
            return cand
    return None


def _torch_includes(workdir: Path) -> list[str]:
    """torch's include paths, plus a shim for the one generated CUDA header CPU-only wheels leave out."""
    from torch.utils.cpp_extension import include_paths

    paths = [*include_paths(), sysconfig.get_paths()["include"]]
    macros = Path(paths[0]) / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    if not macros.exists():
        shim = workdir / "include_shim" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
        shim.parent.mkdir(parents=True, exist_ok=True)
        shim.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        paths.append(str(workdir / "include_shim"))
    return paths


def _safe_cflags(flags: list[str]) -> list[str]:
    """Candidate nvcc flags that only affect code generation (no output paths, no host compiler)."""
    ok = re.compile(
        r"^(-O[0-3]|--use_fast_math|-use_fast_math|-lineinfo|--ptxas-options=.*|-Xptxas=.*|"
        r"-maxrregcount=\d+|--maxrregcount=\d+|-D\w+(=\S*)?|-U\w+|--expt-relaxed-constexpr|"
        r"--extended-lambda|--expt-extended-lambda|-std=c\+\+\d+|--restrict|-ftz=\w+|-prec-div=\w+|"
        r"-prec-sqrt=\w+|-fmad=\w+)$"
    )
    return [f for f in flags if ok.match(f)]


def nvcc_compile(job: CompileJob, text: str, cap: Captured, *, full: bool, timeout: float) -> tuple[int, str]:
    """Compile one translation unit to a cubin with ptxas -v; returns nvcc's exit status and output."""
    nvcc = _nvcc()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found on PATH or in /usr/local/cuda/bin")
    tag = "full" if full else "device"
    cu = job.workdir / f"{cap.name}_{content_hash(text)}_{tag}.cu"
    cu.write_text(text)
    # Keep an arch-specific suffix (sm_90a): wgmma and setmaxnreg exist only there. The
    # -gencode form is used because the -arch=sm_90a shorthand can also run a plain sm_90 pass.
    arch = f"{arch_number(job.arch) or 90}{'a' if job.arch.endswith('a') else ''}"
    flags = [f for f in dict.fromkeys(["-O3", *_safe_cflags(cap.extra_cuda_cflags)])]
    cmd = [
        nvcc,
        f"-gencode=arch=compute_{arch},code=sm_{arch}",
        "-cubin",
        "-Xptxas",
        "-v",
        "-std=c++17",
        *flags,
        "-o",
        str(cu.with_suffix(".cubin")),
        str(cu),
    ]
    if full:
        cmd[1:1] = [f"-I{p}" for p in _torch_includes(job.workdir) + cap.extra_include_paths]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=job.workdir)
    log = f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    job.log.append(log)
    return proc.returncode, proc.stdout + proc.stderr


def _cuda_unit(job: CompileJob, src: str, full: bool) -> str:
    start = source_start_line(job.source, src)
    where = f'#line {start} "{job.display}"' if start else '#line 1 "cuda_sources"'
    prelude = (
        ("#include <torch/types.h>\n" if full else "")
        + "#include <cuda.h>\n#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include <cstdint>\n"
    )
    body = src if full else blank_host_code(src)
    return f"{prelude}{where}\n{body}\n"


def compile_cuda(torch, job: CompileJob, timeout: float) -> list[KernelReport]:
    """Per-kernel resources of every CUDA source the solution passes to load_inline."""
    captured = capture_cuda(torch, job)
    if not captured:
        job.diagnostics.append(Diagnostic(severity="error", message="no load_inline call with CUDA sources was found"))
        return []
    kernels: list[KernelReport] = []
    for cap in captured:
        for src in cap.cuda_sources:
            kernels += _compile_cuda_source(job, cap, src, timeout)
    return kernels


def _compile_cuda_source(job: CompileJob, cap: Captured, src: str, timeout: float) -> list[KernelReport]:
    defined = static.kernel_names(src)
    rc, out = nvcc_compile(job, _cuda_unit(job, src, full=False), cap, full=False, timeout=timeout)
    entries = parse_ptxas(out)
    if rc != 0 and not needs_full(out, src) or rc == 0 and entries:
        found = {demangle(e) for e in entries}
        missing = sorted(defined - found)
        if rc == 0 and missing:
            job.diagnostics.append(
                Diagnostic(
                    severity="note",
                    message=f"kernels {missing} are templates instantiated only from host code; "
                    "their resources appear in the full build on a GPU machine",
                )
            )
    else:
        rc, out = nvcc_compile(job, _cuda_unit(job, src, full=True), cap, full=True, timeout=timeout)
        entries = parse_ptxas(out)
    file_map = {job.display: job.display}
    job.diagnostics += [
        d
        for d in diagnostics.parse_compiler_log(out, source_lines=job.source.splitlines(), file_map=file_map)
        if d.severity != "note"
    ]
    pretty = cxxfilt(list(entries))
    return [_cuda_report(name, res, pretty.get(name)) for name, res in entries.items()]


def _cuda_report(mangled: str, res: dict, pretty: str | None = None) -> KernelReport:
    template = re.search(r"<(.*)>\s*\(", pretty or "")
    return KernelReport(
        name=demangle(mangled),
        language="cuda",
        registers=res.get("registers"),
        spill_store_bytes=res.get("spill_store", 0),
        spill_load_bytes=res.get("spill_load", 0),
        stack_bytes=res.get("stack", 0),
        shared_bytes=res.get("smem", 0),
        config={"template_args": template.group(1)} if template else {},
        signature={"mangled": mangled, **({"demangled": pretty} if pretty else {})},
    )


# The solution imported for real, through the same content-keyed load_inline as the GPU workers
# (buildcache): the extension lands in the folder their import of the same source looks in, so
# benchmark_kernel after compile_kernel loads it instead of building it again.
_FULL_BUILD = (
    "import runpy, sys, torch\n"
    "from skillbase.toolchain import buildcache\n"
    "buildcache.install(torch)\n"
    "runpy.run_path(sys.argv[1])\n"
)


def full_extension_build(job: CompileJob, cap_source_module: Path, timeout: float) -> tuple[bool, str]:
    """Import the solution for real (load_inline builds the extension into the store's build cache);
    returns (ok, log)."""
    proc = subprocess.run(
        [sys.executable, "-c", _FULL_BUILD, str(cap_source_module)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=job.workdir,
    )
    return proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------
# Entry point (worker side)
# ---------------------------------------------------------------------------


# Largest shared memory one block may use (opt-in dynamic limit), bytes, by compute capability.
_SMEM_LIMIT = {
    70: 98_304,
    75: 65_536,
    80: 166_912,
    86: 101_376,
    87: 166_912,
    89: 101_376,
    90: 232_448,
    100: 232_448,
    120: 101_376,
}


def resource_diagnostics(kernels: list[KernelReport], arch: str) -> list[Diagnostic]:
    """Warnings an agent can act on: register spills, and shared memory beyond what the target allows."""
    out = []
    limit = _SMEM_LIMIT.get(arch_number(arch) or 0)
    for k in kernels:
        if k.spill_store_bytes or k.spill_load_bytes:
            out.append(
                Diagnostic(
                    severity="warning",
                    message=(
                        f"{k.name} spills registers ({k.spill_store_bytes} B stored, {k.spill_load_bytes} B loaded per "
                        f"thread at {k.registers} registers): smaller tiles or fewer live values avoid local-memory traffic"
                    ),
                )
            )
        if limit and k.shared_bytes > limit:
            out.append(
                Diagnostic(
                    severity="error",
                    message=(
                        f"{k.name} needs {k.shared_bytes} B of shared memory per block; {arch} allows {limit} B: "
                        "it will fail to launch (reduce num_stages or the block sizes)"
                    ),
                )
            )
    return out


def compile_request(torch, req: dict, workdir: Path) -> dict:
    """Compile a candidate for ``req['arch']``; returns a CompileReport as a dict plus the full log."""
    start = time.perf_counter()
    source = req["source"]
    display = req.get("solution_path") or "solution.py"
    run_path = workdir / f"solution_{content_hash(source)}.py"
    run_path.write_text(source)
    job = CompileJob(source, run_path, display, req.get("arch", "sm_90"), workdir)
    language = req.get("language") or "triton"
    kernels: list[KernelReport] = []
    traced = None
    try:
        if language == "cuda":
            kernels = compile_cuda(torch, job, float(req.get("timeout_s", 180)))
            if req.get("full_build"):
                built, log = full_extension_build(job, run_path, float(req.get("timeout_s", 180)))
                job.log.append(log)
                if not built:
                    tail = " | ".join(log.strip().splitlines()[-3:])[-400:]
                    job.diagnostics += diagnostics.parse_compiler_log(log) or [
                        Diagnostic(severity="error", message=f"the full extension build failed: {tail}")
                    ]
        else:
            kernels, traced = compile_triton(torch, job, Path(req["task_path"]), req.get("shape"), req.get("small"))
    except subprocess.TimeoutExpired as e:
        job.diagnostics.append(Diagnostic(severity="error", message=f"compiler timed out after {e.timeout:.0f} s"))
    except Exception as e:  # candidate faults become diagnostics, not worker failures
        diag, info = diagnostics.from_exception(e, source=source, run_path=str(run_path), display_path=display)
        job.diagnostics.insert(0, diag)
        job.log.append(info.traceback)
    job.diagnostics += resource_diagnostics(kernels, job.arch)
    errors = [d for d in job.diagnostics if d.severity == "error"]
    ok = not errors and (bool(kernels) or language != "cuda")
    report = CompileReport(
        ok=ok,
        language=language,
        arch=job.arch,
        kernels=kernels,
        diagnostics=job.diagnostics,
        traced_shape=traced,
        duration_s=time.perf_counter() - start,
    )
    return {"report": report.model_dump(), "log": "\n".join(x for x in job.log if x)}
