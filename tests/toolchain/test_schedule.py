"""Longest-expected-first ordering and the job picker of multi-worker batches."""

from __future__ import annotations

import threading

from skillbase.models import TaskInfo, Tolerance
from skillbase.toolchain.cache import JsonCache
from skillbase.toolchain.schedule import BASELINE_S, FIXED_EVAL_S, Durations, Picker


def info(name: str, mb: int = 64) -> TaskInfo:
    return TaskInfo(name=name, path="", family="other", dtype="fp32", regime="large", bytes_moved=mb << 20, flops=0,
                    tolerance=Tolerance(atol=1e-4, rtol=1e-4), source_hash=f"hash-{name}")


def test_a_free_worker_skips_jobs_whose_baselines_another_is_measuring():
    # jobs 0 and 1 share task "a" (baselines not cached); 2 is task "b"; 3 needs nothing measured
    keys = {0: "a", 1: "a", 2: "b", 3: None}
    p = Picker([0, 1, 2, 3], keys.get)
    assert p.take() == 0
    assert p.take() == 2  # 1 would measure task a's baselines a second time, at once
    assert p.take() == 3
    assert p.take() == 1  # nothing else left: it goes anyway
    assert p.take() is None
    p2 = Picker([0, 1, 2], keys.get)
    assert p2.take() == 0
    p2.done(0)
    assert p2.take() == 1  # a is free again: order is kept
    p2.stop()
    assert p2.take() is None


def test_the_picker_hands_each_job_out_once_across_threads():
    p = Picker(list(range(500)), lambda i: f"t{i % 7}")
    taken: list[int] = []
    lock = threading.Lock()

    def drain():
        while (i := p.take()) is not None:
            with lock:
                taken.append(i)
            p.done(i)

    threads = [threading.Thread(target=drain) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == list(range(500))


def test_durations_order_by_what_was_measured_and_add_baselines_while_uncached(tmp_path):
    d = Durations(JsonCache(tmp_path, "durations"))
    small, big = info("small", 1), info("big", 4096)
    # Nothing measured: the floor at nominal rates orders them; missing baselines add their cost.
    assert d.expected_s(big, "cuda", baselines_known=True, eager_ms=None) > \
        d.expected_s(small, "cuda", baselines_known=True, eager_ms=None) >= FIXED_EVAL_S
    assert d.expected_s(small, "cuda", baselines_known=False, eager_ms=None) == \
        d.expected_s(small, "cuda", baselines_known=True, eager_ms=None) + BASELINE_S
    # Measured: 9 s of which 6 s were baselines; later a failing candidate's 1 s does not replace it.
    d.note(small, "cuda", 9.0, {"baselines": 6.0}, "correct")
    assert d.expected_s(small, "cuda", baselines_known=True, eager_ms=None) == 3.0
    assert d.expected_s(small, "cuda", baselines_known=False, eager_ms=None) == 9.0
    d.note(small, "cuda", 1.0, {}, "rejected")
    assert d.expected_s(small, "cuda", baselines_known=True, eager_ms=None) == 3.0
    d.note(small, "cuda", 4.5, {}, "correct")
    assert d.expected_s(small, "cuda", baselines_known=True, eager_ms=None) == 4.5
    assert d.expected_s(small, "cpu", baselines_known=True, eager_ms=None) < 4.5  # per device kind


def test_only_candidates_that_define_a_kernel_get_baselines_measured():
    from pathlib import Path

    from skillbase.models import Candidate
    from skillbase.toolchain.facade import Toolchain

    adversarial = Path(__file__).resolve().parents[1] / "adversarial"
    assert Toolchain.needs_baselines(Candidate(source=(adversarial / "honest.py").read_text()))
    assert not Toolchain.needs_baselines(Candidate(source=(adversarial / "no_own_kernel.py").read_text()))
    cuda = 'src = "__global__ void add_kernel(float* x) {}"\nclass ModelNew: pass\n'
    assert Toolchain.needs_baselines(Candidate(source=cuda))
