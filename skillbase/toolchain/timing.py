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
        self.wait = cuda.Event.synchronize  # until one event has completed
        self.empty = torch_module.empty
        self.zero_ = torch_module.Tensor.zero_
        self.int32 = torch_module.int32
        self._clock_rate = getattr(cuda, "clock_rate", None)
        self._nvml_handle = getattr(cuda, "_get_pynvml_handler", None)
        self.sleep = getattr(cuda, "_sleep", None)  # a spin kernel of N cycles
        # What an empty held event pair costs the GPU, measured by this worker's first held timing and
        # taken off every held sample after it (see ``measure``); with how many pairs it was measured.
        self.pair_ms: float | None = None
        self.pair_n = 0

    def sm_mhz(self) -> int | None:
        """The SM clock now (NVML through torch), or None where it cannot be read."""
        try:
            return int(self._clock_rate()) if self._clock_rate else None
        except Exception:  # no NVML on this machine
            return None

    def power_limited(self) -> bool | None:
        """Whether NVML says the SM clock is held down now by power or temperature (its clock event
        reasons: software power cap, hardware slowdown, thermal slowdown, power brake), or None where
        it cannot be read. A GPU already at its power limit when settling starts shows no fall of the
        SM clock from the highest one read, so the clock alone misses it."""
        try:
            import pynvml

            handle = self._nvml_handle()
            read = (
                getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            return bool(int(read(handle)) & LIMITER_REASONS)
        except Exception:  # no NVML, or a driver without the query
            return None


def input_set_count(input_bytes: int, free_bytes: int) -> int:
    """How many input sets to rotate over while timing: up to 4, together within a fifth of free memory."""
    return max(1, min(4, int(0.2 * free_bytes // max(input_bytes, 1))))


def flush_buffer(clock: Clock, device: Any, l2_bytes: int | None):
    """A buffer whose memset evicts L2: at least 256 MB and twice the L2 size (like do_bench)."""
    nbytes = max(256 * 1024 * 1024, 2 * (l2_bytes or 0))
    return clock.empty(nbytes // 4, dtype=clock.int32, device=device)


# A call whose own GPU time is under this many ms, or whose host enqueue takes more than half the GPU
# time of a flush and a call, could have the GPU wait for the host between the start event and its
# first kernel: a spin kernel before the start event gives the host time to queue the whole call, so
# the events see only device time. Longer calls are timed exactly as do_bench times them: a held
# GPU rests between calls, and a compute-bound kernel of a few hundred µs then runs at clocks that
# back-to-back calls do not keep (-6 to -10% against do_bench on the seed matmuls when every call
# under 1 ms was held).
HOLD_BELOW_MS = 0.05
HOLD_MAX_US = 2000.0
# The usual hold: long enough for any host seen so far to queue a small call, and the same in every
# evaluation, so the GPU is in the same state before each start event from one evaluation to the next.
HOLD_US = 250.0
# One empty held event pair after every this many timed calls, inside the batch.
EMPTY_EVERY = 4
# Held (launch-bound) timing takes at least this many samples: a call of a few µs is then known to a few
# tens of ns, so ten evaluations agree to a few percent, where a 1% CI on a hundred samples is not enough
# (the event pair's own cost, subtracted, moves by more than that between small sets).
HELD_MIN_SAMPLES = 800
# Sampled back to back (not held), a call whose host takes nearly as long to queue it as the GPU takes to
# run it can have the GPU wait for the host between a start event and the call: those samples read the
# host's pace. Settling ran the same calls back to back without events around each; samples whose median
# is more than this share above what a call took there (its flush taken off) are taken for host waits,
# and the call is timed again held. H200: 17 unheld evaluations read 0.91-1.01 of it, the one the host
# slowed 1.16 (a 72 µs layernorm read 82.9 µs, its IQR 13 µs, against 71.6 held and by do_bench).
HOST_WAIT_TOLERANCE = 0.05


# Before sampling a call that is not held, it runs back to back (each call after its flush, as sampled)
# in windows of SETTLE_WINDOW_MS. A compute-bound kernel starting from a rested GPU runs at boost clocks
# for its first tens of ms, then the power limiter pulls the SM clock down in steps over about a second
# (an H100 on the seed TMA GEMM: 1980 -> 1560 MHz within 0.2 s, 828 -> 942 µs a call, power still rising
# at 0.8 s), so an evaluation that followed idle time read 8-10% faster than one that followed other
# GPU work. Once the SM clock has fallen below the highest it read, or NVML gives power or temperature
# as a reason for the clock (a GPU still at its limit from earlier work shows no fall), the limiter is
# acting: the call runs for SETTLE_MAX_MS in all, and is sampled in the state sustained work runs in (after 2 s of load, one
# pass of do_bench and this timer agreed within 0.7% on the three seed GEMMs, in one process). A call that leaves the clock alone stops as soon as
# a window is no slower than the one before it (by more than SETTLE_FLAT): two windows, for most.
SETTLE_WINDOW_MS = 50.0
SETTLE_FLAT = 0.015
SETTLE_MAX_MS = 1000.0
SETTLE_CLOCK_DROP_MHZ = 30
# NVML clock event reasons that mean the limiter is acting: software power cap (0x4), hardware slowdown
# (0x8), software and hardware thermal slowdown (0x20, 0x40), hardware power brake (0x80).
LIMITER_REASONS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
# Under the limiter the clock does not settle at one value: it swings, and back-to-back passes of
# do_bench on the seed TMA GEMM alternated 906, 966, 923, 961, 934 µs (H100, 5 passes of about 0.6 s).
# A sample of 40 ms lands anywhere in that swing, so a call the limiter acts on is sampled for at
# least this long, and its median is the swing's middle.
THROTTLED_SAMPLE_MS = 1000.0


@dataclass
class Settled:
    """What settling did: per-call µs of each window, the ms spent, whether the SM clock fell."""

    windows: list[float]
    spent_ms: float
    throttled: bool
    top_mhz: int = 0  # the highest SM clock read (0: none could be read)


def settle(call: Callable[[int], Any], n_sets: int, clock: Clock, flush: Any, *, throttled: bool = False) -> Settled:
    """Run ``call`` back to back until the GPU's clocks and power are in the state sustained work runs
    in: SETTLE_MAX_MS where the power limiter lowers the SM clock (or ``throttled`` says it will), else
    until the speed stops falling."""
    began = time.perf_counter()
    windows: list[float] = []
    top, k = 0, 0
    while (time.perf_counter() - began) * 1e3 < SETTLE_MAX_MS:
        s, e = clock.Event(enable_timing=True), clock.Event(enable_timing=True)
        t0, n = time.perf_counter(), 0
        clock.record(s)
        while n < 2 or (time.perf_counter() - t0) * 1e3 < SETTLE_WINDOW_MS:
            clock.zero_(flush)
            call(k % n_sets)
            k, n = k + 1, n + 1
            if n % 16 == 0:
                clock.synchronize()
        clock.record(e)
        clock.synchronize()
        windows.append(clock.elapsed(s, e) * 1e3 / n)
        mhz = clock.sm_mhz() or 0
        top = max(top, mhz)
        throttled = throttled or _limiter_began(clock, top, mhz)
        if not throttled and len(windows) >= 2 and windows[-1] <= windows[-2] * (1 + SETTLE_FLAT):
            break
    return Settled(windows, (time.perf_counter() - began) * 1e3, throttled, top)


def hold_cycles(host_us: float, sm_mhz: int | None) -> int:
    """Cycles of the spin kernel that keeps the GPU busy while the host queues one call: HOLD_US, or
    twice the host's enqueue time (``host_us``) when that is longer, at most HOLD_MAX_US."""
    us = min(HOLD_MAX_US, max(HOLD_US, 2.0 * host_us))
    return int(us * (sm_mhz or 2000))


def measure(
    call: Callable[[int], Any],
    n_sets: int,
    clock: Clock,
    flush: Any,
    plan: TimingPlan,
    progress: Callable[[float, str], None] | None = None,
    *,
    _force_hold: bool = False,
    _limiter_late: bool = False,
) -> tuple[list[float], str]:
    """Time ``call(k)`` (k selects the input set) on the GPU; returns samples in ms and how.

    Each sample is one call between two CUDA events on the current stream, with
    an L2-flushing memset before it (outside the events). Calls run back to back: a
    batch is read while the next one runs, and the last after a device-wide
    synchronization. For calls under
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
    host: list[float] = []
    while i < 3 or (time.perf_counter() - warm_t0) * 1e3 < plan.warmup_ms:
        t0 = time.perf_counter()
        call(i % n_sets)
        if i >= 2:  # the first calls compile and autotune
            host.append((time.perf_counter() - t0) * 1e6)
        i += 1
        if i % 8 == 0:
            clock.synchronize()
    clock.synchronize()
    # What queueing one call takes the host: the median, not the slowest. One slow warm-up call (a
    # garbage collection, a page fault) made 200 µs matmuls look host-bound and held them, and a held
    # compute-bound kernel, rested between calls, ran 3-6% faster than do_bench's back-to-back calls.
    host_us = quantile(sorted(host), 0.5) if host else 0.0
    est_ms = _estimate(call, n_sets, clock, flush)
    flush_ms = _estimate_flush(clock, flush)
    call_ms = max(est_ms - flush_ms, 0.0)
    needs_hold = _force_hold or call_ms < HOLD_BELOW_MS or host_us * 1e-3 > 0.5 * est_ms
    hold = hold_cycles(host_us, mhz_before) if needs_hold and clock.sleep is not None else 0
    settled, throttled, top_mhz, paced_ms = (
        ("", False, 0, 0.0) if hold else _settled(call, n_sets, clock, flush, _limiter_late)
    )
    start = time.perf_counter()  # the sampling budget starts after the settling
    # Under the power limiter, sample across its swing (THROTTLED_SAMPLE_MS), whatever the CI says.
    span_s = THROTTLED_SAMPLE_MS / 1e3 if throttled else 0.0
    budget_s = max(plan.budget_s, span_s)
    # The empty pair's cost: measured beside the calls by the worker's first held timing, then kept.
    # Measured again in every evaluation, its estimate moved by up to 0.3 µs from one evaluation to the
    # next (1.50-1.84 µs on an H100), while the raw held samples moved by 1-4%: a per-evaluation
    # estimate was most of a 3 µs kernel's spread over ten evaluations.
    calibrate = bool(hold) and clock.pair_ms is None
    per_batch = max(5, min(1000, int(plan.batch_ms / max(est_ms, 1e-3))))
    samples: list[float] = []
    empty: list[float] = []  # held event pairs around nothing, interleaved with the batches
    k = 0

    def queue() -> tuple[list, list, list]:
        nonlocal k
        starts = [clock.Event(enable_timing=True) for _ in range(per_batch)]
        ends = [clock.Event(enable_timing=True) for _ in range(per_batch)]
        pairs = []
        for b in range(per_batch):
            if calibrate and b % EMPTY_EVERY == 0:
                # An empty pair in the same conditions as the calls around it (flush, hold, then the
                # events): what the pair itself costs the GPU, measured beside every few samples.
                pairs += _held_event_pairs(clock, flush, hold, 1)
            clock.zero_(flush)
            if hold:
                clock.sleep(hold)
            clock.record(starts[b])
            call(k % n_sets)
            clock.record(ends[b])
            k += 1
        return starts, ends, pairs

    def read(batch: tuple[list, list, list]) -> None:
        starts, ends, pairs = batch
        samples.extend(clock.elapsed(s, e) for s, e in zip(starts, ends))
        empty.extend(clock.elapsed(s, e) for s, e in pairs)

    # Held calls rest the GPU by design: a batch is queued, then read after a device-wide
    # synchronization. Calls that are not held run back to back, as do_bench's do: the next batch is
    # queued before this one is read, so the GPU never idles while the host reads events and checks
    # the CI. (Read after a full stop, the few ms of host work per 40 ms batch left the GPU idle
    # about a tenth of the time, and a power-limited GEMM ran 4-6% faster than under do_bench.)
    pending = queue()
    while True:
        ahead = None if hold else queue()
        if ahead is None:
            clock.synchronize()  # device-wide: every stream's work is done before events are read
        else:
            clock.wait(pending[1][-1])  # this batch's last end event; the next batch keeps the GPU busy
        read(pending)
        spent = time.perf_counter() - start
        if progress:
            progress(min(1.0, spent / budget_s), f"timing: {len(samples)} samples")
        min_n = max(plan.min_reps, HELD_MIN_SAMPLES) if hold else plan.min_reps
        enough_pairs = not calibrate or len(empty) >= min_n // EMPTY_EVERY
        tight = ci_is_tight(samples, plan.target_ci, min_n, n_sets) and enough_pairs and spent >= span_s
        if tight or spent > budget_s or len(samples) >= plan.max_reps:
            if ahead is not None:
                clock.synchronize()  # device-wide, then the batch already queued counts too
                read(ahead)
            break
        pending = ahead or queue()
    if calibrate and empty:
        clock.pair_ms, clock.pair_n = trimmed_mean(empty), len(empty)
    # Held, an event pair costs the GPU about a microsecond or two of its own beside the kernels (what
    # Nsight Compute's gpu__time_duration leaves out): measured once, taken off every sample of a short
    # call, whose reference is that device time. A call that reads HOLD_BELOW_MS or more (the pair
    # included) was held only because its host is slow to queue it; it keeps the pair's cost, as every
    # unheld timing and do_bench do, so the hold decision (the host's speed, which varies between
    # evaluations) does not move its figure: a 70-77 µs layernorm read 1.4-1.8 µs faster in the
    # evaluation that held it than in the one that did not (H200), a 1.8-2.5% spread.
    raw_median = quantile(sorted(samples), 0.5) if samples else 0.0
    short = raw_median < HOLD_BELOW_MS
    empty_ms = (clock.pair_ms or 0.0) if hold and short else 0.0
    if empty_ms:
        samples = [max(x - empty_ms, 0.0) for x in samples]
    mhz_after = clock.sm_mhz()
    # Compute-bound kernels follow the SM clock, which power and temperature move by several
    # percent between runs: report it so a spread can be read against it.
    clocks = f"; SM clock {mhz_before} -> {mhz_after} MHz" if mhz_before and mhz_after else ""
    held = ""
    if hold:
        held = (
            f"; the GPU held by a {hold / (mhz_before or 2000):.0f} µs spin kernel before each start event so the "
            f"host ({host_us:.0f} µs to queue a call, median) never delays the call: device time, "
        )
        held += (
            f"less the {empty_ms * 1e3:.2f} µs an empty held event pair measures (10%-trimmed mean of "
            f"{clock.pair_n} pairs interleaved with the calls of this worker's first held timing)"
            if short
            else f"the event pair's own cost kept, as unheld timings keep it (a call of {raw_median * 1e3:.0f} µs is "
            f"not short: held only for its host)"
        )
    method = (
        f"CUDA events around each call; L2 flushed by a {flush.numel() * 4 // 2**20} MB memset before each call "
        f"(outside the events); {n_sets} input set(s) rotated; {len(samples)} samples in batches of {per_batch} "
        + (
            "read after device-wide synchronization; "
            if hold
            else "each read while the next ran (the last after device-wide synchronization); "
        )
        + ("median with 95% CI" if n_sets == 1 else f"mean over the {n_sets} sets of each set's median, with 95% CI")
        + held
        + settled
        + clocks
    )
    median_ms = quantile(sorted(samples), 0.5) if samples else 0.0
    if not hold and not _force_hold and clock.sleep is not None and 0 < median_ms < HOLD_BELOW_MS:
        # The hold was decided from five calls; one slowed by the host (a page fault, a busy core) made a
        # 4 µs call look like 65 µs, and it was timed unheld at 22.7 µs, its launch gaps included (H100,
        # one evaluation in ten). What the samples say decides again: a call this short is held.
        again, how = measure(call, n_sets, clock, flush, plan, progress, _force_hold=True)
        return again, how + (
            f"; timed again held: unheld, its median read {median_ms * 1e3:.1f} µs, under the "
            f"{HOLD_BELOW_MS * 1e3:.0f} µs below which a call is held (the first estimate, "
            f"{est_ms * 1e3:.0f} µs a call with its flush, had put it above)"
        )
    top_mhz = max(top_mhz, mhz_before or 0)
    if not hold and not throttled and not _limiter_late and _limiter_began(clock, top_mhz, mhz_after):
        # Settling ended before the limiter acted (a heavy call's first ~150 ms run at boost clocks, with no
        # power reason set yet), and it pulled the clock down while the samples were taken: an H100 read
        # matmul_bias_gelu/naive 2394 µs so, and 2530 µs in its other evaluation. Settle the whole time and
        # sample again.
        again, how = measure(call, n_sets, clock, flush, plan, progress, _limiter_late=True)
        return again, how + (
            f"; sampled again: the power limiter began to act only while {len(samples)} first "
            f"samples were taken (SM clock {top_mhz} -> {mhz_after} MHz)"
        )
    # Checked after the limiter: a clock that fell while sampling also reads slower than settling did.
    paced_call_ms = paced_ms - flush_ms
    if (
        not hold
        and not _force_hold
        and not throttled
        and clock.sleep is not None
        and paced_call_ms > 0
        and median_ms > paced_call_ms * (1 + HOST_WAIT_TOLERANCE)
    ):
        again, how = measure(call, n_sets, clock, flush, plan, progress, _force_hold=True)
        return again, how + (
            f"; timed again held: unheld, its median read {median_ms * 1e3:.1f} µs, "
            f"{100 * (median_ms / paced_call_ms - 1):.0f}% over the {paced_call_ms * 1e3:.1f} µs "
            "a call took back to back while settling (the GPU waited for the host inside the "
            f"samples; the host took {host_us:.0f} µs to queue a call, median)"
        )
    return samples, method


def _limiter_began(clock: Clock, top_mhz: int, mhz_now: int | None) -> bool:
    """Whether the power limiter acts now: NVML names power or temperature, or the SM clock is below
    the highest read before by more than SETTLE_CLOCK_DROP_MHZ."""
    return bool(clock.power_limited()) or (bool(mhz_now) and 0 < mhz_now < top_mhz - SETTLE_CLOCK_DROP_MHZ)


def trimmed_mean(values: list[float], cut: float = 0.1) -> float:
    """Mean of ``values`` without the lowest and highest ``cut`` fraction.

    The cost of an empty event pair clusters on a few timer ticks (1.60, 1.63, 1.66 ... 1.92 µs on an
    H100), and a median over a few hundred pairs jumps from one cluster to the next where a trimmed
    mean moves smoothly. (Between evaluations the pairs' cost itself still shifted by up to 0.3 µs on
    an H100, which is why ``measure`` takes it once per worker and keeps it.)"""
    v = sorted(values)
    k = int(len(v) * cut)
    kept = v[k : len(v) - k] or v
    return sum(kept) / len(kept)


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


def host_per_call(
    call: Callable[[int], Any], n_sets: int, clock: Clock, budget_s: float = 0.2, batches: int = 5
) -> float:
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


def _settled(call, n_sets: int, clock: Clock, flush, throttled: bool = False) -> tuple[str, bool, int, float]:
    """Settle the GPU before sampling (the whole settling time when ``throttled``); what the method line
    says of it, whether the limiter acts, the highest SM clock read, and the ms a call with its flush
    took back to back in the last window."""
    st = settle(call, n_sets, clock, flush, throttled=throttled)
    why = (
        "the power limiter holds the SM clock down; sampled for at least "
        f"{THROTTLED_SAMPLE_MS:.0f} ms, across its swing"
        if st.throttled
        else "the call stopped slowing down"
    )
    return (
        (
            f"; sampled after {st.spent_ms:.0f} ms of back-to-back calls ({why}; {SETTLE_WINDOW_MS:.0f} ms "
            f"windows: {st.windows[0]:.1f} -> {st.windows[-1]:.1f} µs a call)"
        ),
        st.throttled,
        st.top_mhz,
        st.windows[-1] / 1e3 if st.windows else 0.0,
    )


def _estimate_flush(clock: Clock, flush) -> float:
    """ms of the L2-flushing memset alone."""
    s, e = clock.Event(enable_timing=True), clock.Event(enable_timing=True)
    clock.record(s)
    for _ in range(5):
        clock.zero_(flush)
    clock.record(e)
    clock.synchronize()
    return clock.elapsed(s, e) / 5


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
