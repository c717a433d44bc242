"""Where does a kernel's timing spread come from? (GPU; diagnostic, not a test.)

For each TASK/SOLUTION this times the forward in-process with the toolchain's own
``timing.measure`` three ways, twice each:
- ``4 sets, memset flush``: what the evaluator does (inputs rotated, L2 flushed by a
  256 MB memset that leaves the cache full of dirty lines, as do_bench does);
- ``1 set, memset flush``: no rotation (do_bench's setting);
- ``4 sets, clean flush``: the memset followed by a read of the same buffer, so the
  kernel starts with L2 holding clean lines only (close to Nsight Compute's
  default cache control, which writes back and invalidates before each kernel).
It prints the median of each run, the medians per input set and the CV, after
``triton.testing.do_bench`` on the same model object (so the same autotuned config).

    PYTHONPATH=. python3 benchmarks/timing_diag.py layernorm/naive relu/optimized

With ``--states`` it asks instead whether the GPU's recent load moves a kernel's speed: the
autotuner's chosen config, then the call time in 50 ms windows over 2 s of back-to-back calls
that start from a rested GPU (3 s idle), with the SM clock and power at each window; then
do_bench and the toolchain's timer, each once after a rest and once right after 2 s of load.

With ``--holds`` it asks whether the hold decision moves a kernel's figure: the timer as it decides
(held where the call is short or its host slow to queue it), then with the hold forced, twice each,
alternated, beside do_bench; each line says whether the GPU was held and whether the event pair's
cost was taken off.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

import torch  # noqa: E402

from skillbase.toolchain import timing  # noqa: E402
from skillbase.toolchain.tasks import import_module_at, load_task_module, resolve_task_path  # noqa: E402


class CleanFlushClock(timing.Clock):
    """Memset, then read the buffer back: the dirty lines are written back outside the timed region."""

    def __init__(self, torch_module):
        super().__init__(torch_module)
        plain = self.zero_
        self.zero_ = lambda buf: (plain(buf), buf.sum())


def run(spec: str) -> None:
    _, model, sets = load(spec)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    plan = timing.TimingPlan(budget_s=1.0, target_ci=0.005)
    import triton.testing

    for rep in range(2):
        ms = triton.testing.do_bench(lambda: model(*sets[0]), return_mode="median")
        print(f"{spec:34s} {'do_bench, set 0':22s} run {rep}: median {ms * 1e3:8.2f} µs", flush=True)
    for label, clock_cls, n_sets in (("4 sets, memset flush", timing.Clock, 4),
                                      ("1 set, memset flush", timing.Clock, 1),
                                      ("4 sets, clean flush", CleanFlushClock, 4)):
        for rep in range(2):
            clock = clock_cls(torch)
            flush = timing.flush_buffer(clock, "cuda", l2)
            with torch.no_grad():
                samples, _ = timing.measure(lambda k: model(*sets[k]), n_sets, clock, flush, plan)
            per_set = [statistics.median(samples[i::n_sets]) * 1e3 for i in range(n_sets)]
            s = timing.summarize(samples, "", n_sets)
            print(f"{spec:34s} {label:22s} run {rep}: median {s.median_ms * 1e3:8.2f} µs  cv {s.cv:6.3f}  "
                  f"n {s.n:5d}  per set {' '.join(f'{m:.1f}' for m in per_set)}", flush=True)


def load(spec: str):
    task_name, sol = spec.split("/", 1)
    task_path, _ = resolve_task_path(task_name)
    tm = load_task_module(task_path)
    mod = import_module_at(task_path.parent / f"{sol}.py", kind="solution")
    with torch.device("cuda"), torch.no_grad():
        model = mod.ModelNew(*tm.get_init_inputs())
        sets = [list(tm.get_inputs()) for _ in range(4)]
    return mod, model, sets


def chosen_configs(mod) -> str:
    from triton.runtime.autotuner import Autotuner

    tuned = [(name, v) for name, v in vars(mod).items() if isinstance(v, Autotuner)]
    return "; ".join(f"{name}: {getattr(v, 'best_config', None)}" for name, v in tuned) or "no autotuned kernel"


def load_windows(call, seconds: float, window_ms: float = 50.0) -> list[tuple[float, float, int, float]]:
    """Back-to-back calls for ``seconds``; per window: (start s, mean call µs, SM MHz, W)."""
    out, began = [], time.perf_counter()
    while time.perf_counter() - began < seconds:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter() - began
        start.record()
        n = 0
        while (time.perf_counter() - began - t0) * 1e3 < window_ms:
            call()
            n += 1
            if n % 16 == 0:
                torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        out.append((t0, start.elapsed_time(end) * 1e3 / n, torch.cuda.clock_rate(), torch.cuda.power_draw() / 1e3))
    return out


def states(spec: str) -> None:
    import triton.testing

    mod, model, sets = load(spec)
    with torch.no_grad():
        model(*sets[0])
        torch.cuda.synchronize()
        print(f"{spec}: {chosen_configs(mod)}", flush=True)
        time.sleep(3.0)
        windows = load_windows(lambda: model(*sets[0]), 2.0)
        print(f"{spec}: 2 s of back-to-back calls from rest, per 50 ms window (µs per call, SM MHz, W):")
        print("  " + "  ".join(f"{t:.2f}s {us:.1f} {mhz} {w:.0f}" for t, us, mhz, w in windows), flush=True)
        clock = timing.Clock(torch)
        flush = timing.flush_buffer(clock, "cuda", torch.cuda.get_device_properties(0).L2_cache_size)
        plan = timing.TimingPlan()
        for state in ("rested 3 s", "after 2 s of load"):
            for label in ("do_bench", "toolchain timer"):
                if state.startswith("rested"):
                    time.sleep(3.0)
                else:
                    load_windows(lambda: model(*sets[0]), 2.0)
                if label == "do_bench":
                    us = triton.testing.do_bench(lambda: model(*sets[0]), return_mode="median") * 1e3
                else:
                    samples, _ = timing.measure(lambda k: model(*sets[k]), 4, clock, flush, plan)
                    us = timing.summarize(samples, "", 4).median_ms * 1e3
                print(f"{spec:34s} {label:16s} {state:18s} median {us:8.2f} µs  SM {torch.cuda.clock_rate()} MHz",
                      flush=True)


def holds(spec: str) -> None:
    import triton.testing

    _, model, sets = load(spec)
    clock = timing.Clock(torch)
    flush = timing.flush_buffer(clock, "cuda", torch.cuda.get_device_properties(0).L2_cache_size)
    plan = timing.TimingPlan()
    with torch.no_grad():
        for rep in range(2):
            us = triton.testing.do_bench(lambda: model(*sets[0]), return_mode="median") * 1e3
            print(f"{spec:34s} {'do_bench, set 0':26s} run {rep}: median {us:8.2f} µs", flush=True)
            for label, force in (("as decided", False), ("hold forced", True)):
                samples, how = timing.measure(lambda k: model(*sets[k]), 4, clock, flush, plan, _force_hold=force)
                us = timing.summarize(samples, "", 4).median_ms * 1e3
                held = "held" if "spin kernel" in how else "not held"
                pair = "pair taken off" if "less the" in how else "pair kept"
                print(f"{spec:34s} {label:26s} run {rep}: median {us:8.2f} µs  {held}, {pair}", flush=True)


if __name__ == "__main__":
    specs = [a for a in sys.argv[1:] if not a.startswith("--")]
    for spec in specs:
        if "--states" in sys.argv:
            states(spec)
        elif "--holds" in sys.argv:
            holds(spec)
        else:
            run(spec)
