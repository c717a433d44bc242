"""How long an evaluation is expected to take, and which one a free worker takes next.

A batch spread over several workers finishes soonest when the longest evaluations
start first (longest-processing-time-first), so every evaluation's wall time is
remembered per task and device kind (``durations``, in the store's cache) and
used to order the next batch. A task evaluated for the first time here is
estimated from its eager baseline when one was measured, else from its floor at
nominal rates. An evaluation that must also measure its task's eager and
torch.compile baselines takes longer (torch.compile compiles), and a second
worker measuring the same task's baselines at the same time does that work
twice: ``Picker`` hands a free worker the first job in order whose task's
baselines no other worker is measuring, when there is one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from skillbase.models import TaskInfo
from skillbase.toolchain.cache import JsonCache, make_key

# Only to order work when nothing was measured: nominal H100 rates, and what an evaluation
# costs beyond the calls it times (start, 5+ trials, checks) and per call.
_ORDER_GBPS, _ORDER_TFLOPS = 3000.0, 50.0
FIXED_EVAL_S = 3.0
CALLS_PER_EVAL = 40
BASELINE_S = 8.0  # eager + torch.compile of a reference never measured here


class Durations:
    """Wall seconds of past evaluations per task and device kind, and the estimate for the next one."""

    def __init__(self, cache: JsonCache):
        self.cache = cache

    @staticmethod
    def _key(task_hash: str, kind: str) -> str:
        return make_key("duration", task_hash, kind)

    def note(self, task: TaskInfo, kind: str, wall_s: float, phases: dict[str, float], verdict: str) -> None:
        """Remember one fresh evaluation: its time without baselines (a correct one replaces a shorter
        failing one, never the reverse) and the baselines' time when it measured them."""
        key = self._key(task.source_hash, kind)
        entry = dict(self.cache.get(key) or {})
        baselines = float(phases.get("baselines") or 0.0)
        if verdict == "correct" or "eval_s" not in entry:
            entry["eval_s"] = round(max(0.0, wall_s - baselines), 3)
        if baselines:
            entry["baseline_s"] = round(baselines, 3)
        self.cache.put(key, entry)

    def expected_s(self, task: TaskInfo, kind: str, *, baselines_known: bool, eager_ms: float | None) -> float:
        """Expected wall seconds of evaluating a candidate of ``task`` on ``kind`` (only used to order work)."""
        entry = self.cache.get(self._key(task.source_hash, kind)) or {}
        if "eval_s" in entry:
            est = float(entry["eval_s"])
        else:
            call_ms = (
                eager_ms
                if eager_ms
                else max(task.bytes_moved / (_ORDER_GBPS * 1e6), task.flops / (_ORDER_TFLOPS * 1e9))
            )
            est = FIXED_EVAL_S + CALLS_PER_EVAL * call_ms / 1e3
        if kind == "cuda" and not baselines_known:
            est += float(entry.get("baseline_s", BASELINE_S))
        return est


class Picker:
    """The jobs of a batch in order, taken one at a time by free workers.

    ``busy_key(i)`` names what job ``i`` would measure that another job must not measure at the
    same time (its task, while its baselines are not cached), or None.
    """

    def __init__(self, order: Sequence[int], busy_key: Callable[[int], str | None]):
        self.pending = list(order)
        self.busy_key = busy_key
        self.busy: dict[int, str] = {}
        self.lock = threading.Lock()

    def take(self) -> int | None:
        """The next job for a free worker: the first in order whose busy key is not in use, else the first."""
        with self.lock:
            if not self.pending:
                return None
            in_use = set(self.busy.values())
            keys = {i: self.busy_key(i) for i in self.pending[:64]}
            pick = next((i for i, k in keys.items() if k is None or k not in in_use), self.pending[0])
            self.pending.remove(pick)
            if keys.get(pick) is not None:
                self.busy[pick] = keys[pick]
            return pick

    def done(self, i: int) -> None:
        """Job ``i`` finished (or failed): what it measured is free again."""
        with self.lock:
            self.busy.pop(i, None)

    def stop(self) -> None:
        """Hand out nothing more."""
        with self.lock:
            self.pending.clear()
