"""Device timing with CUDA events, and robust statistics of the samples.

The measurement follows ``triton.testing.do_bench``: warm up, flush L2 with a
memset outside the timed region before every call, record one pair of events
around each call, and read the events only after a device-wide synchronization
(so no stream's work is left running). It differs in three ways: it rotates
over several input sets, it keeps sampling in batches until the 95% confidence
interval of the *median* is within ``target_ci`` (or a time budget ends), and it
reports the median with quartiles instead of a mean, because single samples
can be far off (preemption, clock changes) and a mean follows them.

The statistics are pure functions, tested on synthetic samples.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

from skillbase.models import TimingStats

_Z95 = 1.959963984540054


def quantile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolated quantile ``q`` in [0, 1] of an ascending list."""
    if not sorted_xs:
        raise ValueError("quantile of no samples")
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def median_ci(sorted_xs: list[float], z: float = _Z95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median (binomial order statistics).

    With n samples the median lies between the j-th and k-th order statistics,
    j = n/2 - z*sqrt(n)/2 and k = n/2 + z*sqrt(n)/2 (normal approximation of the
    binomial). No assumption about the shape of the distribution.
    """
    n = len(sorted_xs)
    if n == 0:
        raise ValueError("confidence interval of no samples")
    half = z * math.sqrt(n) / 2
    j = max(0, math.floor(n / 2 - half) - 1)
    k = min(n - 1, math.ceil(n / 2 + half) - 1)
    return sorted_xs[j], sorted_xs[k]


def center(samples_ms: list[float], n_sets: int = 1) -> tuple[float, float]:
    """The timing estimate and its 95% CI half-width, both in ms.

    Sample ``i`` was taken on input set ``i % n_sets``. A kernel can run at a
    different but steady speed on each set (the sets sit at different addresses);
    pooled, the samples form one cluster per set and their median falls in a gap
    between clusters, where it moves from run to run. So the estimate is the mean
    over sets of each set's median, and its CI combines the sets' CIs.
    """
    groups = [sorted(samples_ms[i::n_sets]) for i in range(max(1, n_sets))]
    groups = [g for g in groups if g]
    if not groups:
        raise ValueError("no timing samples")
    medians, halves = [], []
    for g in groups:
        lo, hi = median_ci(g)
        medians.append(quantile(g, 0.5))
        halves.append((hi - lo) / 2)
    k = len(groups)
    return sum(medians) / k, math.sqrt(sum(h * h for h in halves)) / k


def summarize(samples_ms: list[float], method: str, n_sets: int = 1) -> TimingStats:
    """Center (see ``center``), quartiles, extremes, mean, CV and the relative CI half-width."""
    xs = sorted(float(x) for x in samples_ms)
    n = len(xs)
    if n == 0:
        raise ValueError("no timing samples")
    med, half = center([float(x) for x in samples_ms], n_sets)
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    return TimingStats(
        median_ms=med,
        q1_ms=quantile(xs, 0.25),
        q3_ms=quantile(xs, 0.75),
        min_ms=xs[0],
        max_ms=xs[-1],
        mean_ms=mean,
        cv=math.sqrt(var) / mean if mean > 0 else 0.0,
        ci_rel=half / med if med > 0 else 0.0,
        n=n,
        method=method,
    )


def ci_is_tight(samples_ms: list[float], target: float, min_n: int, n_sets: int = 1) -> bool:
    """True when there are at least ``min_n`` samples and the estimate's CI is within ``target``."""
    if len(samples_ms) < min_n:
        return False
    med, half = center(samples_ms, n_sets)
    return med > 0 and half / med <= target


@dataclass(frozen=True)
class TimingPlan:
    """How long and how precisely to time: stop when the median's 95% CI is within
    ``target_ci`` (relative half-width) after at least ``min_reps`` samples, or when
    ``budget_s`` of wall time has been spent, or at ``max_reps`` samples."""

    budget_s: float = 1.0
    target_ci: float = 0.01
    min_reps: int = 25
    max_reps: int = 20_000
    warmup_ms: float = 25.0
    batch_ms: float = 40.0


class Clock:
    """CUDA timing primitives captured when the worker starts, before any candidate
    code is imported, so a candidate that patches ``torch.cuda`` cannot change them."""

    def __init__(self, torch_module: Any):
        cuda = torch_module.cuda
        self.Event = cuda.Event
        self.record = cuda.Event.record
        self.elapsed = cuda.Event.elapsed_time
        self.synchronize = cuda.synchronize
        self.empty = torch_module.empty
        self.zero_ = torch_module.Tensor.zero_
        self.int32 = torch_module.int32
        self._clock_rate = getattr(cuda, "clock_rate", None)
        self.sleep = getattr(cuda, "_sleep", None)  # a spin kernel of N cycles

    def sm_mhz(self) -> int | None:
        """The SM clock now (NVML through torch), or None where it cannot be read."""
        try:
            return int(self._clock_rate()) if self._clock_rate else None
        except Exception:  # no NVML on this machine
            return None


def flush_buffer(clock: Clock, device: Any, l2_bytes: int | None):
    """A buffer whose memset evicts L2: at least 256 MB and twice the L2 size (like do_bench)."""
    nbytes = max(256 * 1024 * 1024, 2 * (l2_bytes or 0))
    return clock.empty(nbytes // 4, dtype=clock.int32, device=device)


# Below this many ms per call the host's launch time can exceed the flush's GPU time, and the GPU
# would wait for the host between the start event and the first kernel: a spin kernel before the
# start event gives the host time to queue the whole call, so the events see only device time.
HOLD_BELOW_MS = 1.0
HOLD_MAX_US = 2000.0


def hold_cycles(host_us: float, sm_mhz: int | None) -> int:
    """Cycles of the spin kernel that keeps the GPU busy while the host queues one call:
    twice the slowest host enqueue seen, at least 20 µs, at most HOLD_MAX_US."""
    us = min(HOLD_MAX_US, max(20.0, 2.0 * host_us))
    return int(us * (sm_mhz or 2000))


def measure(
    call: Callable[[int], Any],
    n_sets: int,
    clock: Clock,
    flush: Any,
    plan: TimingPlan,
    progress: Callable[[float, str], None] | None = None,
) -> tuple[list[float], str]:
    """Time ``call(k)`` (k selects the input set) on the GPU; returns samples in ms and how.

    Each sample is one call between two CUDA events on the current stream, with
    an L2-flushing memset before it (outside the events). Samples are read after a
    device-wide synchronization at the end of each batch. For calls under
    HOLD_BELOW_MS, a spin kernel between the flush and the start event holds the
    GPU until the host has queued the call, so a slow host (launch overhead,
    Python) never shows up in the device time.
    """
    start = time.perf_counter()
    clock.synchronize()
    mhz_before = clock.sm_mhz()
    # Warm up: JIT compilation, autotuning, allocator growth, clocks ramping up.
    warm_t0 = time.perf_counter()
    i = 0
    host_us = 0.0
    while i < 3 or (time.perf_counter() - warm_t0) * 1e3 < plan.warmup_ms:
        t0 = time.perf_counter()
        call(i % n_sets)
        if i >= 2:  # the first calls compile and autotune
            host_us = max(host_us, (time.perf_counter() - t0) * 1e6)
        i += 1
        if i % 8 == 0:
            clock.synchronize()
    clock.synchronize()
    est_ms = _estimate(call, n_sets, clock, flush)
    hold = hold_cycles(host_us, mhz_before) if est_ms < HOLD_BELOW_MS and clock.sleep is not None else 0
    per_batch = max(5, min(1000, int(plan.batch_ms / max(est_ms, 1e-3))))
    samples: list[float] = []
    empty: list[float] = []  # held event pairs around nothing, interleaved with the batches
    k = 0
    while True:
        starts = [clock.Event(enable_timing=True) for _ in range(per_batch)]
        ends = [clock.Event(enable_timing=True) for _ in range(per_batch)]
        for b in range(per_batch):
            clock.zero_(flush)
            if hold:
                clock.sleep(hold)
            clock.record(starts[b])
            call(k % n_sets)
            clock.record(ends[b])
            k += 1
        pairs = _held_event_pairs(clock, flush, hold, max(8, per_batch // 8)) if hold else []
        clock.synchronize()  # device-wide: every stream's work is done before events are read
        samples += [clock.elapsed(s, e) for s, e in zip(starts, ends)]
        empty += [clock.elapsed(s, e) for s, e in pairs]
        spent = time.perf_counter() - start
        if progress:
            progress(min(1.0, spent / plan.budget_s), f"timing: {len(samples)} samples")
        tight = ci_is_tight(samples, plan.target_ci, plan.min_reps, n_sets)
        if tight or spent > plan.budget_s or len(samples) >= plan.max_reps:
            break
    empty_ms = sorted(empty)[len(empty) // 2] if empty else 0.0
    if empty_ms:
        # Held, an event pair costs the GPU about a microsecond or two of its own beside the kernels
        # (what Nsight Compute's gpu__time_duration leaves out): measured here, taken off every sample.
        samples = [max(x - empty_ms, 0.0) for x in samples]
    mhz_after = clock.sm_mhz()
    # Compute-bound kernels follow the SM clock, which power and temperature move by several
    # percent between runs: report it so a spread can be read against it.
    clocks = f"; SM clock {mhz_before} -> {mhz_after} MHz" if mhz_before and mhz_after else ""
    held = (f"; the GPU held by a {hold / (mhz_before or 2000):.0f} µs spin kernel before each start event so the "
            f"host (up to {host_us:.0f} µs to queue a call) never delays the call: device time, less the "
            f"{empty_ms * 1e3:.2f} µs an empty held event pair measures") if hold else ""
    method = (
        f"CUDA events around each call; L2 flushed by a {flush.numel() * 4 // 2**20} MB memset before each call "
        f"(outside the events); {n_sets} input set(s) rotated; {len(samples)} samples in batches of {per_batch} "
        "read after device-wide synchronization; "
        + ("median with 95% CI" if n_sets == 1 else f"mean over the {n_sets} sets of each set's median, with 95% CI")
        + held + clocks
    )
    return samples, method


def _held_event_pairs(clock: Clock, flush: Any, hold: int, n: int) -> list[tuple[Any, Any]]:
    """Queue ``n`` pairs of CUDA events around nothing, each behind the flush and the spin kernel exactly
    as a timed call is: their elapsed times are the GPU-side cost of the event pair itself."""
    pairs = [(clock.Event(enable_timing=True), clock.Event(enable_timing=True)) for _ in range(n)]
    for s, e in pairs:
        clock.zero_(flush)
        clock.sleep(hold)
        clock.record(s)
        clock.record(e)
    return pairs


def host_per_call(call: Callable[[int], Any], n_sets: int, clock: Clock, budget_s: float = 0.2,
                  batches: int = 5) -> float:
    """What a caller pays per call, launches included: the wall time of back-to-back calls (no
    flush, one synchronization per batch) over the calls made, median of ``batches`` batches, ms."""
    clock.synchronize()
    t0 = time.perf_counter()
    call(0)
    clock.synchronize()
    one = max(time.perf_counter() - t0, 1e-6)
    m = max(5, min(2000, int(budget_s / batches / one)))
    per = []
    for _ in range(batches):
        clock.synchronize()
        t0 = time.perf_counter()
        for j in range(m):
            call(j % n_sets)
        clock.synchronize()
        per.append((time.perf_counter() - t0) * 1e3 / m)
    return quantile(sorted(per), 0.5)


def _estimate(call, n_sets, clock: Clock, flush) -> float:
    """Rough ms per call (flush included), to size the batches."""
    s, e = clock.Event(enable_timing=True), clock.Event(enable_timing=True)
    clock.record(s)
    for i in range(5):
        clock.zero_(flush)
        call(i % n_sets)
    clock.record(e)
    clock.synchronize()
    return clock.elapsed(s, e) / 5
