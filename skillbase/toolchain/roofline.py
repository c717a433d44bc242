"""Roofline: achieved throughput, the physical floor, speed of light, and the peaks behind them.

The floor of a task is ``max(bytes / peak bandwidth, FLOPs / peak rate)`` with
the peaks *measured* on the device (the best of several large streaming operations,
each counting the bytes it must move; large dense matmuls per dtype), and the
vendor's stated bandwidth kept beside the measured one. ``measure_peaks`` runs in the
GPU worker; everything else is pure arithmetic.
"""

from __future__ import annotations

from typing import Any

from skillbase.models import Bottleneck, Hardware, Roofline

# The rate a dtype's matmuls can reach: fp32 tasks may use TF32 tensor cores
# (Triton's tl.dot does by default), fp8/int8 are bounded by twice the bf16 rate.
_RATE_KEYS = {
    "fp32": ("tf32", "fp32"),
    "fp16": ("fp16", "bf16"),
    "bf16": ("bf16", "fp16"),
    "mixed": ("bf16", "fp16"),
    "fp8": ("fp8",),
    "int8": ("int8",),
}

# A result faster than this fraction of the floor is impossible, not fast: the
# margin absorbs measurement noise and peaks measured a little below the spec.
IMPOSSIBLE_FRACTION = 0.7
LATENCY_UTILIZATION = 0.3
LAUNCH_BOUND_MS = 0.005


def peak_rate(hw: Hardware, dtype: str) -> float | None:
    """Peak dense TFLOP/s usable by a task of ``dtype`` on ``hw``, or None if unmeasured."""
    for key in _RATE_KEYS.get(dtype, ("bf16",)):
        if key in hw.peak_tflops:
            return hw.peak_tflops[key]
    if dtype in ("fp8", "int8") and "bf16" in hw.peak_tflops:
        return 2 * hw.peak_tflops["bf16"]
    return max(hw.peak_tflops.values()) if hw.peak_tflops else None


def floor_ms(bytes_moved: int, flops: int, peak_gbps: float | None, peak_tflops: float | None) -> float | None:
    """The least time any kernel can take: the larger of the memory and the compute term, in ms."""
    terms = []
    if peak_gbps:
        terms.append(bytes_moved / (peak_gbps * 1e6))
    if peak_tflops and flops:
        terms.append(flops / (peak_tflops * 1e9))
    return max(terms) if terms else None


def dram_bytes_floor(input_bytes: int, output_bytes: int, l2_bytes: int | None) -> int:
    """Bytes that must reach DRAM inside a timed call with a flushed L2.

    Inputs are read from DRAM (L2 was flushed before the call). Outputs that fit
    in L2 may stay there until after the end event (write-back), so only the part
    of the outputs beyond the L2 size is sure to be written inside the timing.
    """
    return input_bytes + max(0, output_bytes - (l2_bytes or 0))


def classify(median_ms: float, mem_ms: float | None, cmp_ms: float | None) -> Bottleneck:
    """memory / compute when that unit is at least 30% busy, else latency (or launch for tiny calls)."""
    if median_ms <= 0:
        return "unknown"
    mem_u = (mem_ms or 0.0) / median_ms
    cmp_u = (cmp_ms or 0.0) / median_ms
    if max(mem_u, cmp_u) >= LATENCY_UTILIZATION:
        return "memory" if mem_u >= cmp_u else "compute"
    if mem_ms is None and cmp_ms is None:
        return "unknown"
    return "launch" if median_ms < LAUNCH_BOUND_MS else "latency"


def analyze(bytes_moved: int, flops: int, median_ms: float, hw: Hardware, dtype: str) -> Roofline:
    """Achieved GB/s and TFLOP/s, the floor, % of speed of light and the bound of one timing."""
    rate = peak_rate(hw, dtype)
    mem_ms = bytes_moved / (hw.peak_gbps * 1e6) if hw.peak_gbps else None
    cmp_ms = flops / (rate * 1e9) if rate and flops else None
    floor = floor_ms(bytes_moved, flops, hw.peak_gbps, rate)
    return Roofline(
        bytes_moved=bytes_moved,
        flops=flops,
        achieved_gbps=bytes_moved / (median_ms * 1e6) if median_ms > 0 else 0.0,
        achieved_tflops=flops / (median_ms * 1e9) if median_ms > 0 else 0.0,
        peak_gbps=hw.peak_gbps,
        peak_tflops=rate,
        floor_ms=floor,
        pct_sol=100.0 * floor / median_ms if floor and median_ms > 0 else None,
        bound=classify(median_ms, mem_ms, cmp_ms),
    )


def impossible(median_ms: float, floor: float | None) -> bool:
    """True when a measured median is below what the hardware can physically do."""
    return floor is not None and floor > 0 and median_ms < IMPOSSIBLE_FRACTION * floor


def cpu_hardware() -> Hardware:
    """The CPU 'device' (Triton interpreter): no peaks, never timed."""
    import platform

    return Hardware(kind="cpu", name=platform.processor() or platform.machine() or "cpu", arch="cpu")


def describe_cuda(torch: Any, index: int) -> Hardware:
    """Name, arch, SMs, memory and L2 of a CUDA device, without peaks."""
    p = torch.cuda.get_device_properties(index)
    return Hardware(
        kind="cuda",
        name=p.name,
        arch=f"sm_{p.major}{p.minor}",
        sm_count=p.multi_processor_count,
        memory_bytes=int(p.total_memory),
        l2_bytes=int(getattr(p, "L2_cache_size", 0)) or None,
        driver=str(torch.version.cuda),
    )


# Peaks are cached per device; a change in how they are measured names itself here (part of the cache key).
PEAKS_METHOD = "bandwidth: best of five streaming probes"

# Bandwidth the vendor states for a device (GB/s), shown beside the measured roof. Matched on the name
# the driver reports; most specific first.
DATASHEET_GBPS = (
    ("H200", 4800.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100", 1555.0),
    ("L40S", 864.0),
    ("B200", 8000.0),
)


def datasheet_gbps(name: str) -> float | None:
    """The vendor's stated memory bandwidth of a device by its driver name, if listed."""
    return next((gbps for key, gbps in DATASHEET_GBPS if key in name), None)


def measure_peaks(torch: Any, index: int, clock: Any) -> Hardware:
    """Measure memory bandwidth and dense matmul rates on CUDA device ``index`` (a few seconds).

    Bandwidth: the best of five well-tuned streaming operations over 1 GiB (a copy, a read-only
    sum, a write-only fill, an elementwise add, a 2 GiB copy), each counting the bytes it must
    move: a plain copy alone read below what simple kernels reach (2,889 GB/s against about
    3.0 TB/s on an H100), so honest kernels showed above 100% of speed of light. Rates: 8192^3
    matmuls in bf16, fp16, TF32 and true fp32. Each is the median of 10 timed runs.
    """
    hw = describe_cuda(torch, index)
    dev = torch.device("cuda", index)
    n = (1 << 30) // 4
    src = torch.randn(n, device=dev)
    dst = torch.empty_like(src)
    probes = {  # name -> (operation, bytes it moves)
        "copy": (lambda: dst.copy_(src), 2 * n * 4),
        "sum": (lambda: src.sum(), n * 4),
        "fill": (lambda: dst.fill_(1.0), n * 4),
        "add": (lambda: torch.add(src, 1.0, out=dst), 2 * n * 4),
    }
    gbps = {name: round(moved / (_median_time(fn, clock) * 1e6), 1) for name, (fn, moved) in probes.items()}
    src = dst = None  # the GiB freed before the next probe (the probes above are done with it)
    try:
        big = torch.empty(2 * n, device=dev)
        big_dst = torch.empty_like(big)
        gbps["copy_2gib"] = round(2 * 2 * n * 4 / (_median_time(lambda: big_dst.copy_(big), clock) * 1e6), 1)
        big = big_dst = None
    except RuntimeError:  # a device without 4 GiB to spare: the 1 GiB probes stand
        pass
    rates: dict[str, float] = {}
    size = 8192
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for key, dtype, tf32 in (
            ("bf16", torch.bfloat16, False),
            ("fp16", torch.float16, False),
            ("tf32", torch.float32, True),
            ("fp32", torch.float32, False),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(size, size, device=dev, dtype=dtype)
            b = torch.randn(size, size, device=dev, dtype=dtype)
            ms = _median_time(lambda: torch.mm(a, b), clock)
            rates[key] = round(2 * size**3 / (ms * 1e9), 1)
            a = b = None
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    torch.cuda.empty_cache()
    return hw.model_copy(
        update={
            "peak_gbps": max(gbps.values()),
            "bandwidth_probes_gbps": gbps,
            "datasheet_gbps": datasheet_gbps(hw.name),
            "peak_tflops": rates,
        }
    )


def _median_time(fn, clock, reps: int = 10) -> float:
    for _ in range(3):
        fn()
    clock.synchronize()
    times = []
    for _ in range(reps):
        s, e = clock.Event(enable_timing=True), clock.Event(enable_timing=True)
        clock.record(s)
        fn()
        clock.record(e)
        clock.synchronize()
        times.append(clock.elapsed(s, e))
    times.sort()
    return times[len(times) // 2]
