"""Timing statistics: pure functions checked on synthetic samples."""

import math
import random
import statistics

import pytest

from skillbase.toolchain.timing import ci_is_tight, median_ci, quantile, summarize


def test_quantile_interpolates():
    xs = [1.0, 2.0, 3.0, 4.0]
    assert quantile(xs, 0.0) == 1.0
    assert quantile(xs, 1.0) == 4.0
    assert quantile(xs, 0.5) == 2.5
    assert quantile(xs, 0.25) == pytest.approx(1.75)


def test_median_is_robust_to_outliers_that_move_the_mean():
    # 100 samples at 1.0 ms with 5 outliers at 1.8x, like preempted runs.
    xs = [1.0] * 95 + [1.8] * 5
    s = summarize(xs, "synthetic")
    assert s.median_ms == 1.0
    assert s.mean_ms == pytest.approx(1.04)
    assert s.q1_ms == s.q3_ms == 1.0
    assert s.n == 100
    assert s.method == "synthetic"


def test_median_ci_covers_the_true_median_about_95_percent_of_the_time():
    rng = random.Random(7)
    covered = 0
    for _ in range(400):
        xs = sorted(rng.lognormvariate(0.0, 0.3) for _ in range(60))
        lo, hi = median_ci(xs)
        covered += lo <= 1.0 <= hi  # the median of lognormal(0, s) is exp(0) = 1
    assert 0.90 <= covered / 400 <= 0.995


def test_ci_shrinks_with_more_samples_and_decides_when_to_stop():
    rng = random.Random(3)
    few = [rng.gauss(10.0, 0.5) for _ in range(20)]
    many = few + [rng.gauss(10.0, 0.5) for _ in range(2000)]
    assert summarize(many, "m").ci_rel < summarize(few, "f").ci_rel
    assert not ci_is_tight(few[:5], 0.5, min_n=25)  # too few samples, however tight
    assert ci_is_tight(many, 0.01, min_n=25)
    assert not ci_is_tight(few, 0.001, min_n=10)


def test_cv_and_extremes():
    s = summarize([2.0, 4.0, 6.0], "m")
    assert s.min_ms == 2.0 and s.max_ms == 6.0
    assert s.cv == pytest.approx(2.0 / 4.0)
    assert s.iqr_ms == pytest.approx(2.0)
    assert math.isfinite(s.ci_rel)


def test_summarize_rejects_no_samples():
    with pytest.raises(ValueError):
        summarize([], "m")


def test_rotated_sets_are_summarized_by_their_medians():
    import random

    from skillbase.toolchain.timing import center

    # Four input sets, each steady at its own speed: the pooled median sits in the gap
    # between the middle clusters and moves with the noise; the mean of set medians does not.
    rng = random.Random(3)
    speeds = [177.0, 159.0, 168.0, 163.0]
    estimates = []
    for _ in range(20):
        samples = [speeds[i % 4] + rng.gauss(0, 0.3) for i in range(400)]
        est, half = center(samples, 4)
        estimates.append(est)
        assert abs(est - sum(speeds) / 4) < 0.2 and half < 0.5
    assert max(estimates) - min(estimates) < 0.3
    assert summarize([1.0, 2.0, 3.0, 4.0], "m", n_sets=2).median_ms == 2.5  # sets {1,3} and {2,4}


def test_event_pair_cost_is_stable_where_a_median_jumps_between_timer_ticks():
    # Empty event pairs land on a few timer ticks, about half on each side of the middle: draws of 200
    # such pairs move their median from one tick to the next, the trimmed mean by far less.
    from skillbase.toolchain.timing import trimmed_mean

    ticks = [1.60, 1.63, 1.66, 1.79, 1.89, 1.92]
    weights = [20, 25, 6, 4, 20, 25]
    rng = random.Random(7)
    medians, means = [], []
    for _ in range(40):
        draw = rng.choices(ticks, weights, k=200) + [9.0, 0.2]  # and two outliers
        medians.append(sorted(draw)[len(draw) // 2])
        means.append(trimmed_mean(draw))
    assert max(medians) - min(medians) > 0.1
    assert max(means) - min(means) < 0.05
    assert trimmed_mean([1.0, 2.0, 3.0]) == 2.0
    assert trimmed_mean([5.0]) == 5.0


class _ThrottlingGPU:
    """A stand-in clock whose calls slow down as the simulated GPU works (boost, then the power limit)."""

    sleep = None  # no spin kernel: nothing is held
    pair_ms, pair_n = None, 0

    def __init__(self, fast_ms: float, slow_ms: float, ramp_ms: float, drop_mhz: int | None = 0,
                 capped: bool | None = None):
        self.fast, self.slow, self.ramp, self.gpu_ms = fast_ms, slow_ms, ramp_ms, 0.0
        self.drop_mhz = drop_mhz  # how far the SM clock falls over the ramp; None: unreadable
        self.capped = capped  # what NVML's clock event reasons say; None: unreadable

    class Event:
        def __init__(self, enable_timing: bool = True):
            self.at = 0.0

    def record(self, event) -> None:
        event.at = self.gpu_ms

    def elapsed(self, start, end) -> float:
        return end.at - start.at

    def synchronize(self) -> None:
        pass

    def zero_(self, flush) -> None:
        self.gpu_ms += 0.01

    def share(self) -> float:
        return min(1.0, self.gpu_ms / self.ramp)

    def sm_mhz(self) -> int | None:
        return None if self.drop_mhz is None else int(1980 - self.drop_mhz * self.share())

    def power_limited(self) -> bool | None:
        return self.capped

    def wait(self, event) -> None:  # events complete as they are recorded here
        pass

    def call(self, k: int) -> None:
        import time

        time.sleep(0.0004)  # the windows are wall-clock windows
        self.gpu_ms += self.fast + (self.slow - self.fast) * self.share()


def test_settling_a_throttled_gpu_runs_the_whole_settling_time():
    from skillbase.toolchain.timing import SETTLE_MAX_MS, settle

    gpu = _ThrottlingGPU(fast_ms=0.83, slow_ms=0.94, ramp_ms=150.0, drop_mhz=420)
    st = settle(gpu.call, 4, gpu, None)
    assert st.throttled and st.spent_ms >= SETTLE_MAX_MS
    assert st.windows[0] < 900 and abs(st.windows[-1] - 950) < 5  # µs a call (flush included): the sustained speed


def test_settling_without_a_clock_reading_runs_until_the_call_stops_slowing_down():
    from skillbase.toolchain.timing import SETTLE_MAX_MS, settle

    gpu = _ThrottlingGPU(fast_ms=0.83, slow_ms=0.94, ramp_ms=150.0, drop_mhz=None)
    st = settle(gpu.call, 4, gpu, None)
    assert not st.throttled and len(st.windows) >= 3 and st.spent_ms < SETTLE_MAX_MS
    assert abs(st.windows[-1] - 950) < 5


def test_settling_a_steady_call_costs_two_windows():
    from skillbase.toolchain.timing import SETTLE_WINDOW_MS, settle

    gpu = _ThrottlingGPU(fast_ms=0.5, slow_ms=0.5, ramp_ms=1.0)
    st = settle(gpu.call, 1, gpu, None)
    assert len(st.windows) == 2 and not st.throttled and st.spent_ms < 4 * SETTLE_WINDOW_MS


def test_settling_a_gpu_already_at_its_power_limit_sees_it_through_nvml():
    # Right after other work the clock is already down when settling starts: no fall from the highest
    # clock read, but NVML names the power cap, and the call runs the whole settling time.
    from skillbase.toolchain.timing import SETTLE_MAX_MS, settle

    steady = _ThrottlingGPU(fast_ms=0.94, slow_ms=0.94, ramp_ms=1.0, drop_mhz=0, capped=True)
    st = settle(steady.call, 4, steady, None)
    assert st.throttled and st.spent_ms >= SETTLE_MAX_MS
    free = _ThrottlingGPU(fast_ms=0.94, slow_ms=0.94, ramp_ms=1.0, drop_mhz=0, capped=False)
    assert not settle(free.call, 4, free, None).throttled


class _Flush:
    def numel(self) -> int:
        return 64 << 20


def test_a_call_under_the_power_limiter_is_sampled_across_its_swing():
    # A steady 1 ms call reaches a 1% CI within a few batches; under the limiter the samples must
    # still span THROTTLED_SAMPLE_MS (the clock swings over about a second), and the method says so.
    import time

    from skillbase.toolchain.timing import THROTTLED_SAMPLE_MS, TimingPlan, measure

    counts = {}
    for capped in (False, True):
        gpu = _ThrottlingGPU(fast_ms=1.0, slow_ms=1.0, ramp_ms=1.0, drop_mhz=0, capped=capped)
        t0 = time.perf_counter()
        samples, method = measure(gpu.call, 2, gpu, _Flush(), TimingPlan(budget_s=0.3))
        took_ms = (time.perf_counter() - t0) * 1e3
        counts[capped] = len(samples)
        if capped:
            assert "power limiter" in method and "across its swing" in method
            # settling (SETTLE_MAX_MS) then sampling for at least THROTTLED_SAMPLE_MS of wall time
            assert took_ms >= 1000.0 + THROTTLED_SAMPLE_MS
        else:
            assert "stopped slowing down" in method and took_ms < 600
    # every call sleeps 0.4 ms on the host: a second of sampling is over a thousand samples, where the
    # free call stopped at its CI within a batch or two
    assert counts[False] < 200 < 1000 < counts[True]


class _LateLimiterGPU(_ThrottlingGPU):
    """A heavy call that runs at boost for as long as settling looks at it (two equal windows, and it
    stops); once sampling has begun, the limiter pulls the clock down and NVML names the power cap."""

    def __init__(self):
        super().__init__(fast_ms=1.0, slow_ms=1.15, ramp_ms=1.0, drop_mhz=0, capped=False)
        self.sampling = False

    def wait(self, event) -> None:  # only the unheld sampling loop waits for one event
        self.sampling = True

    def sm_mhz(self) -> int | None:
        return 1590 if self.sampling else 1980

    def power_limited(self) -> bool | None:
        return self.sampling

    def call(self, k: int) -> None:
        import time

        time.sleep(0.0004)
        self.gpu_ms += self.slow if self.sampling else self.fast


def test_a_limiter_that_acts_only_while_sampling_is_settled_and_sampled_again():
    # Seen on an H100: matmul_bias_gelu/naive settled in 150 ms ("stopped slowing down"), the clock fell
    # from 1980 to 1600 MHz during its 50 samples, and the evaluation read 5.5% fast.
    from skillbase.toolchain.timing import TimingPlan, measure

    gpu = _LateLimiterGPU()
    samples, method = measure(gpu.call, 2, gpu, _Flush(), TimingPlan(budget_s=0.3))
    assert "sampled again: the power limiter began to act" in method and "1980 -> 1590 MHz" in method
    assert "across its swing" in method  # the second pass settled the whole time and sampled across the swing
    # a second of sampling (THROTTLED_SAMPLE_MS) at 0.4 ms of host time a call, all at the limited speed
    assert len(samples) > 1000 and all(x == pytest.approx(1.15) for x in samples)
    # A call the limiter never touches is sampled once.
    free = _ThrottlingGPU(fast_ms=1.0, slow_ms=1.0, ramp_ms=1.0, drop_mhz=0, capped=False)
    assert "sampled again" not in measure(free.call, 2, free, _Flush(), TimingPlan(budget_s=0.3))[1]


class _HiccupGPU(_ThrottlingGPU):
    """A 4 µs call whose host falls behind once while the hold is being decided: one of the five
    estimate calls shows a 400 µs gap between its events, as a page fault or a busy core makes it."""

    def __init__(self):
        super().__init__(fast_ms=0.004, slow_ms=0.004, ramp_ms=1.0, drop_mhz=0, capped=False)
        self.calls = 0
        self.pair_ms, self.pair_n = None, 0

    def sleep(self, cycles: int) -> None:  # the spin kernel: GPU time, no host time
        self.gpu_ms += cycles / 2000 / 1e3

    def zero_(self, flush) -> None:
        self.gpu_ms += 0.085  # the 256 MB flush

    def call(self, k: int) -> None:
        self.calls += 1
        # calls 1-3 warm up, 4-8 are the estimate the hold is decided from: the sixth is late
        self.gpu_ms += self.fast + (0.4 if self.calls == 6 else 0.0)


def test_a_short_call_the_estimate_put_above_the_hold_is_timed_again_held():
    from skillbase.toolchain.timing import HOLD_BELOW_MS, TimingPlan, measure

    gpu = _HiccupGPU()
    samples, method = measure(gpu.call, 4, gpu, _Flush(), TimingPlan(budget_s=0.2, warmup_ms=0.0))
    # first timed unheld (the estimate said 84 µs a call), then again held once its samples read 4 µs
    assert "timed again held" in method and "spin kernel" in method
    assert max(samples) < HOLD_BELOW_MS


class _PairCostGPU(_ThrottlingGPU):
    """A steady call on a GPU where each recorded event costs GPU time of its own (an event pair about
    1.5 µs, as on an H100 or H200), with a spin kernel for holds; ``host_ms`` is the host's time to queue
    one call (a slow host makes the timer hold the GPU)."""

    def __init__(self, call_ms: float, host_ms: float):
        super().__init__(fast_ms=call_ms, slow_ms=call_ms, ramp_ms=1.0, drop_mhz=0, capped=False)
        self.host_ms = host_ms
        self.pair_ms, self.pair_n = None, 0

    def record(self, event) -> None:
        event.at = self.gpu_ms
        self.gpu_ms += 0.00075

    def sleep(self, cycles: int) -> None:
        self.gpu_ms += cycles / 2000 / 1e3

    def call(self, k: int) -> None:
        import time

        if self.host_ms:
            time.sleep(self.host_ms / 1e3)
        self.gpu_ms += self.fast


def test_a_call_held_only_for_its_slow_host_reads_as_it_does_unheld():
    # A 70 µs layernorm whose host took about as long to queue it was held in one evaluation and not in
    # the other (H200): the held one had the event pair's cost taken off and read 1.4-1.8 µs faster.
    from skillbase.toolchain.timing import HOLD_BELOW_MS, TimingPlan, measure

    plan = TimingPlan(budget_s=0.2, warmup_ms=0.0)
    held_gpu = _PairCostGPU(call_ms=0.070, host_ms=0.2)
    held, held_how = measure(held_gpu.call, 2, held_gpu, _Flush(), plan)
    free_gpu = _PairCostGPU(call_ms=0.070, host_ms=0.0)
    unheld, unheld_how = measure(free_gpu.call, 2, free_gpu, _Flush(), plan)
    assert "spin kernel" in held_how and "spin kernel" not in unheld_how
    assert "event pair's own cost kept" in held_how
    assert held_gpu.pair_ms == pytest.approx(0.00075)  # measured all the same, for the short calls after it
    assert statistics.median(held) == pytest.approx(statistics.median(unheld), rel=1e-6)
    # A short call is held whatever its host, and the pair's cost comes off: its device time.
    short_gpu = _PairCostGPU(call_ms=0.004, host_ms=0.0)
    short, short_how = measure(short_gpu.call, 2, short_gpu, _Flush(), plan)
    assert "less the 0.75 µs" in short_how and max(short) < HOLD_BELOW_MS
    assert statistics.median(short) == pytest.approx(0.004, rel=1e-6)


def _busy(ms: float) -> None:
    import time

    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


class _HostPacedGPU(_PairCostGPU):
    """A GPU that runs each command once the host has queued it (it idles while the host is behind) and
    after the commands before it, the host waiting for it on a synchronization: a 0.3 ms call after a
    0.3 ms flush. The host queues its first ``fast_calls`` calls in 30 µs (the hold is decided then),
    later ones in ``call_host_ms``, and each event record takes it ``record_host_ms``: back to back without
    events (settling) it keeps ahead of the GPU, with an event pair around each call it may not. Both run
    on a clock of their own (``host``, ``gpu_ms``) that only these costs move, so how busy the machine
    running the test is changes nothing; a call also spins for its host time, which the timer measures."""

    def __init__(self, call_host_ms: float, record_host_ms: float, fast_calls: int = 8):
        super().__init__(call_ms=0.3, host_ms=0.030)
        self.host, self.calls, self.fast_calls = 0.0, 0, fast_calls
        self.call_host, self.record_host = call_host_ms, record_host_ms

    def _run(self, ms: float) -> None:
        self.gpu_ms = max(self.gpu_ms, self.host) + ms

    def zero_(self, flush) -> None:
        self._run(0.3)

    def record(self, event) -> None:
        self.host += self.record_host
        self._run(0.0)
        event.at = self.gpu_ms
        self.gpu_ms += 0.00075

    def sleep(self, cycles: int) -> None:
        self._run(cycles / 2000 / 1e3)

    def synchronize(self) -> None:
        self.host = max(self.host, self.gpu_ms)

    def wait(self, event) -> None:
        self.host = max(self.host, event.at)

    def call(self, k: int) -> None:
        self.calls += 1
        cost = self.host_ms if self.calls <= self.fast_calls else self.call_host
        _busy(cost)
        self.host += cost
        self._run(self.fast)


def test_samples_the_host_fell_behind_in_are_taken_again_held():
    # H200: a 72 µs layernorm whose host kept ahead of the GPU while settling (back to back, no events
    # around each call) fell behind once an event pair was queued around each call, and read 82.9 µs
    # (IQR 13 µs) against 71.6 held and by do_bench.
    from skillbase.toolchain.timing import TimingPlan, measure

    plan = TimingPlan(budget_s=0.2, warmup_ms=0.0)
    behind = _HostPacedGPU(call_host_ms=0.35, record_host_ms=0.15)  # 0.35 ms a call settling, 0.65 sampled
    samples, how = measure(behind.call, 2, behind, _Flush(), plan)
    assert "timed again held" in how and "the GPU waited for the host" in how and "spin kernel" in how
    assert statistics.median(samples) == pytest.approx(0.30075, rel=0.01)  # the call and its event pair
    ahead = _HostPacedGPU(call_host_ms=0.1, record_host_ms=0.01)  # well ahead either way: sampled unheld, once
    samples, how = measure(ahead.call, 2, ahead, _Flush(), plan)
    assert "timed again" not in how and "spin kernel" not in how
    assert statistics.median(samples) == pytest.approx(0.30075, rel=0.01)
