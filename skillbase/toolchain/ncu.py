"""Nsight Compute: the fixed metric set, the command line, and its CSV read into typed per-kernel records.

The command profiles only the candidate's own kernels (those launched inside
the NVTX range the runner opens around one forward, further narrowed by a
kernel-name filter when the solution's kernel names are known), once each,
with kernel replay. ncu groups the metrics into as few replay passes as the
counters allow; the pass count of each kernel is read from its log and
reported.

Clocks: ``--clock-control none``. ncu's default locks the GPU to its base
clock while profiling; our timings run at the clocks the driver picks, so
locked durations would not compare with them, and a lock taken by a profile
would also slow any benchmark running beside it on the same GPU (and outlive
an ncu that is killed mid-run). Percent-of-peak metrics are relative to the
clock in effect, so they stay meaningful unlocked. Caches: ncu's default
(flushed before each replay pass), so every pass sees the same cold state.

The CSV (``--csv --page raw --print-units base``) has one header row (the
identity columns ID, Process ID, Process Name, Host Name, Kernel Name,
Context, Stream, Block Size, Grid Size, Device, CC, then one column per
metric), one row of units, then one row per profiled kernel. Values may carry
thousands separators; unsupported metrics read "n/a". The parser also reads
the long form (``--page details``: one row per metric with "Metric Name",
"Metric Unit" and "Metric Value" columns). A metric without a value is None
in the record, with the reason in ``missing``.
"""

from __future__ import annotations

import csv
import io
import math
import re

from skillbase.models import KernelProfile, StallShare

NVTX_RANGE = "skillbase_profile"

# field -> ncu metric(s); the first present wins (names differ slightly across GPUs and ncu versions).
METRICS: dict[str, tuple[str, ...]] = {
    "duration": ("gpu__time_duration.sum",),
    "dram_pct": ("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
    "l2_pct": ("lts__throughput.avg.pct_of_peak_sustained_elapsed",),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "tensor_pct": (
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    ),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "limit_registers": ("launch__occupancy_limit_registers",),
    "limit_shared_memory": ("launch__occupancy_limit_shared_mem",),
    "limit_block_size": ("launch__occupancy_limit_warps",),
    "limit_blocks": ("launch__occupancy_limit_blocks",),
    "registers": ("launch__registers_per_thread",),
    "waves": ("launch__waves_per_multiprocessor",),
    "grid_size": ("launch__grid_size",),
    "block_size": ("launch__block_size",),
    "sm_count": ("device__attribute_multiprocessor_count",),
    "local_ld_sectors": ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",),
    "local_st_sectors": ("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",),
    "l1_hit_pct": ("l1tex__t_sector_hit_rate.pct",),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct",),
    "ld_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "ld_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",),
    "st_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",),
    "st_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",),
    "ld_efficiency_pct": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",),
    "st_efficiency_pct": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",),
    "smem_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",),
    "smem_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",),
}
STALL_REASONS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
TOP_STALLS = 4
MAX_KERNELS = 32  # launches profiled per candidate at most: bounds ncu's time on a many-kernel forward

_TIME_US = {
    "nsecond": 1e-3,
    "ns": 1e-3,
    "usecond": 1.0,
    "us": 1.0,
    "µs": 1.0,
    "msecond": 1e3,
    "ms": 1e3,
    "second": 1e6,
    "s": 1e6,
}
_BYTES = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kibyte": 1024, "mibyte": 2**20, "gibyte": 2**30}
_IDENTITY = {
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Kernel Time",
    "Section Name",
    "Metric Name",
    "Metric Unit",
    "Metric Value",
    "Rule Name",
    "Rule Type",
    "Rule Description",
    "Estimated Speedup Type",
    "Estimated Speedup",
}
_PASSES = re.compile(r'==PROF== Profiling "([^"]+)".*?(\d+) pass')
_NOT_PERMITTED = ("ERR_NVGPUCTRPERM", "permission to access NVIDIA GPU Performance Counters")


def metric_names() -> list[str]:
    """Every ncu metric the profile asks for."""
    names = [n for alts in METRICS.values() for n in alts]
    return names + [STALL_METRIC.format(r) for r in STALL_REASONS]


def command(ncu: str, argv: list[str], kernels: set[str] | None = None, metrics: list[str] | None = None) -> list[str]:
    """The ncu command line profiling ``argv`` (the runner): own kernels only, fixed metrics, CSV."""
    cmd = [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--clock-control",
        "none",
        "--replay-mode",
        "kernel",
        "--nvtx",
        "--nvtx-include",
        f"{NVTX_RANGE}/",
        "--launch-count",
        str(MAX_KERNELS),
        "--metrics",
        ",".join(metrics or metric_names()),
    ]
    if kernels:
        cmd += ["-k", "regex:" + "|".join(re.escape(k) for k in sorted(kernels))]
    return cmd + list(argv)


def not_permitted(text: str) -> bool:
    """True when ncu's output says the user may not read the GPU's performance counters."""
    return any(s in text for s in _NOT_PERMITTED)


def rejected_metrics(log: str, asked: list[str]) -> list[str]:
    """Metrics of ``asked`` that ncu's error lines name: unknown on this GPU or ncu version."""
    errors = [ln for ln in log.splitlines() if "ERROR" in ln or "not found" in ln.lower() or "failed" in ln.lower()]
    return [m for m in asked if any(m in ln for ln in errors)]


PASSES_METRIC = "profiler__replayer_passes"


def passes(log: str) -> list[int]:
    """Replay passes per profiled kernel, from ncu's '==PROF== Profiling "k" ... - N passes' lines or,
    where ncu prints none (2025.3.1 with --csv does not), the raw page's profiler__replayer_passes column."""
    found = [int(m.group(2)) for m in _PASSES.finditer(log)]
    if found:
        return found
    return [int(v) for k in parse_csv(log) if (v := k["values"].get(PASSES_METRIC, (None, ""))[0]) is not None]


# ---------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------


def parse_csv(text: str) -> list[dict]:
    """Kernels of an ncu CSV (raw page or details page), in launch order, each
    ``{"name", "block", "grid", "values": {metric: (value or None, unit)}}``. Lines
    before the header (the application's output, ``==PROF==`` messages) are skipped."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("==")]
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    if "Metric Name" in header:
        return _long_form(header, rows[1:])
    units: list[str] = [""] * len(header)
    body = rows[1:]
    if body and not (body[0][0] or "").strip():  # the units row has empty identity columns
        units, body = body[0], body[1:]
    out = []
    for row in body:
        if len(row) < len(header):
            continue
        rec = dict(zip(header, row))
        out.append(
            {
                "name": rec.get("Kernel Name", ""),
                "block": rec.get("Block Size"),
                "grid": rec.get("Grid Size"),
                "values": {
                    h: (_number(v), units[i] if i < len(units) else "")
                    for i, (h, v) in enumerate(zip(header, row))
                    if h not in _IDENTITY
                },
            }
        )
    return out


def _long_form(header: list[str], body: list[list[str]]) -> list[dict]:
    by_id: dict[str, dict] = {}
    for row in body:
        if len(row) < len(header):
            continue
        rec = dict(zip(header, row))
        k = by_id.setdefault(
            rec["ID"],
            {
                "name": rec.get("Kernel Name", ""),
                "block": rec.get("Block Size"),
                "grid": rec.get("Grid Size"),
                "values": {},
            },
        )
        k["values"][rec["Metric Name"]] = (_number(rec.get("Metric Value")), rec.get("Metric Unit", ""))
    return list(by_id.values())


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------


def kernel_profile(parsed: dict) -> KernelProfile:
    """A typed record from one parsed kernel; metrics without a value are None with the reason in ``missing``."""
    vals, missing = parsed["values"], {}

    def get(field: str) -> float | None:
        for name in METRICS[field]:
            if name in vals:
                v, unit = vals[name]
                if v is None:
                    missing[field] = f"{name}: n/a (not measured on this GPU or ncu version)"
                    return None
                return _scale(v, unit)
        missing[field] = f"{METRICS[field][0]}: not in ncu's output"
        return None

    dur = get("duration")
    dur_us = None
    if dur is not None:
        unit = _unit_of(vals, METRICS["duration"])
        dur_us = dur * _TIME_US.get(unit.lower(), 1e-3)  # base unit of time is nanoseconds
    local = [get("local_ld_sectors"), get("local_st_sectors")]
    rec = KernelProfile(
        name=parsed["name"],
        grid=parsed.get("grid"),
        block=parsed.get("block"),
        duration_us=_r(dur_us, 3),
        dram_pct=_r(get("dram_pct")),
        l2_pct=_r(get("l2_pct")),
        sm_pct=_r(get("sm_pct")),
        tensor_pct=_r(get("tensor_pct")),
        achieved_occupancy_pct=_r(get("achieved_occupancy_pct")),
        theoretical_occupancy_pct=_r(get("theoretical_occupancy_pct")),
        occupancy_limiter=_limiter(
            {k: get(f"limit_{k}") for k in ("registers", "shared_memory", "block_size", "blocks")}
        ),
        registers=_int(get("registers")),
        local_bytes=None if all(v is None for v in local) else sum(v or 0.0 for v in local) * 32,
        l1_hit_pct=_r(get("l1_hit_pct")),
        l2_hit_pct=_r(get("l2_hit_pct")),
        ld_sectors_per_request=_ratio(get("ld_sectors"), get("ld_requests")),
        st_sectors_per_request=_ratio(get("st_sectors"), get("st_requests")),
        ld_efficiency_pct=_r(get("ld_efficiency_pct")),
        st_efficiency_pct=_r(get("st_efficiency_pct")),
        smem_conflict_pct=_pct(get("smem_conflicts"), get("smem_wavefronts")),
        waves=_r(get("waves"), 3),
        stalls=_stalls(vals),
    )
    idle = tail_idle_pct(rec.waves, get("grid_size"), get("sm_count"))
    rec = rec.model_copy(update={"tail_idle_pct": _r(idle)})
    if rec.local_bytes is not None:  # one of the two is enough
        missing.pop("local_ld_sectors", None)
        missing.pop("local_st_sectors", None)
    rec.missing = missing
    return uncounted_efficiency(rec)


def uncounted_efficiency(rec: KernelProfile) -> KernelProfile:
    """Global load/store efficiency set to None (with the reason in ``missing``) where the number says
    nothing about coalescing: 0% with sectors fetched (the SASS metric counts plain LDG/STG only, and
    Triton's tl.dot operands arrive by cp.async or TMA), or one sector per request (a warp storing one
    value uses 4 of 32 bytes, as coalesced as it can be)."""
    update, missing = {}, dict(rec.missing)
    for kind, spr, eff in (
        ("ld", rec.ld_sectors_per_request, rec.ld_efficiency_pct),
        ("st", rec.st_sectors_per_request, rec.st_efficiency_pct),
    ):
        if eff is None or not spr:
            continue
        if eff == 0:
            missing[f"{kind}_efficiency_pct"] = (
                "0% with sectors fetched: no plain LDG/STG counted (cp.async or "
                "TMA copies); says nothing about coalescing"
            )
        elif spr <= 1.0:
            missing[f"{kind}_efficiency_pct"] = (
                f"{eff:g}% at one sector per request: a warp accesses one value; says nothing about coalescing"
            )
        else:
            continue
        update[f"{kind}_efficiency_pct"] = None
    return rec.model_copy(update={**update, "missing": missing}) if update else rec


def tail_idle_pct(waves: float | None, grid: float | None, sms: float | None) -> float | None:
    """Share of the GPU's block slots idle in the last wave, %: SMs without any block when the grid is
    smaller than the GPU; otherwise the unfilled part of the last wave (of the blocks per SM when the
    whole grid fits at once)."""
    if grid and sms and grid < sms:
        return 100.0 * (1 - grid / sms)
    if waves is None or waves <= 0:
        return None
    w = waves
    if w < 1 and grid and sms:
        w = grid / sms  # all resident at once: blocks per SM is what is (un)even
    full = math.ceil(w - 1e-9)
    return 100.0 * (full - w) / full if full else None


def _unit_of(vals: dict, names: tuple[str, ...]) -> str:
    for n in names:
        if n in vals:
            return vals[n][1] or ""
    return ""


def _scale(v: float, unit: str) -> float:
    u = (unit or "").strip().lower()
    return v * _BYTES[u] if u in _BYTES else v


def _limiter(limits: dict[str, float | None]) -> str | None:
    """The resource allowing the fewest resident blocks per SM (ties: registers, shared memory, block size)."""
    known = {k: v for k, v in limits.items() if v is not None}
    if not known:
        return None
    return min(known, key=lambda k: (known[k], list(limits).index(k)))


def _stalls(vals: dict) -> list[StallShare]:
    got = {
        r: vals[STALL_METRIC.format(r)][0]
        for r in STALL_REASONS
        if STALL_METRIC.format(r) in vals and vals[STALL_METRIC.format(r)][0] is not None
    }
    # Issuing ("selected") is not a stall.
    total = sum(v for r, v in got.items() if r != "selected")
    if total <= 0:
        return []
    ranked = sorted(((r, v) for r, v in got.items() if r != "selected"), key=lambda x: -x[1])
    return [StallShare(reason=r, share_pct=round(100 * v / total, 1)) for r, v in ranked[:TOP_STALLS]]


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def _pct(a: float | None, b: float | None) -> float | None:
    return round(100 * a / b, 1) if a is not None and b else (0.0 if a == 0 else None)


def _r(v: float | None, nd: int = 2) -> float | None:
    return None if v is None else round(v, nd)


def _int(v: float | None) -> int | None:
    return None if v is None else int(round(v))
