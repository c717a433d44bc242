"""Micro-batching: concurrent requests to one expensive batch function served by one call.

A server answering many agents at once gets several texts to embed within a few
milliseconds of each other (queries and lessons from different tool calls). The first caller
to find the model free takes every request waiting at that moment and runs them as one
batch; callers arriving while it runs wait and go together in the next batch. A batch saves
little CPU a text (``benchmarks/embed_bench.py``, lesson-sized texts: the float model about the
same a text in batches of 64 as one at a time; the int8 model runs one text a call anyway, as its
vectors must not depend on a batch's other texts). What it does save is the texts several callers
ask for at once, a fresh lesson that concurrent searches meet, computed once (memory.embeddings),
and one model call at a time rather than threads interleaving on it. A lone caller never waits
for company, so one client's latency is unchanged.

    batcher = Batcher(lambda items: [len(x) for x in items])
    batcher.submit(["a", "bc"])          # -> [1, 2], maybe computed with other threads' items
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Request:
    items: list[Any]
    result: list[Any] | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class BatchStats:
    """What the batcher did: model calls made, items served, the largest batch, and how many
    calls carried items from more than one request."""

    calls: int = 0
    items: int = 0
    largest: int = 0
    shared_calls: int = 0
    requests: int = 0
    sizes: list[int] = field(default_factory=list)


class Batcher(Generic[T, R]):
    """Serves ``submit(items)`` from many threads with as few ``fn(all_items)`` calls as the
    timing allows. ``fn`` returns one result per item, in order; ``max_items`` caps a batch
    (requests are never split, so a single large request may exceed it)."""

    def __init__(self, fn: Callable[[list[T]], Sequence[R]], *, max_items: int = 256):
        self._fn = fn
        self._max = max_items
        self._cv = threading.Condition()
        self._queue: list[_Request] = []
        self._running = False
        self.stats = BatchStats()

    def submit(self, items: Sequence[T]) -> list[R]:
        """Results of ``fn`` for ``items``, computed in a batch with whatever other threads
        submitted meanwhile. An error in the batch is raised in every request it held."""
        req = _Request(list(items))
        with self._cv:
            self._queue.append(req)
        while True:
            with self._cv:
                while not req.done and self._running:
                    self._cv.wait()
                if req.done:
                    return self._result(req)
                self._running = True
                batch = self._take()
            try:
                self._run(batch)
            finally:
                with self._cv:
                    self._running = False
                    self._cv.notify_all()

    def _take(self) -> list[_Request]:
        batch, n = [], 0
        while self._queue and (not batch or n + len(self._queue[0].items) <= self._max):
            req = self._queue.pop(0)
            batch.append(req)
            n += len(req.items)
        return batch

    def _run(self, batch: list[_Request]) -> None:
        flat = [x for r in batch for x in r.items]
        try:
            out = list(self._fn(flat)) if flat else []
            if len(out) != len(flat):
                raise RuntimeError(f"the batch function returned {len(out)} results for {len(flat)} items")
        except BaseException as e:
            for r in batch:
                r.error, r.done = e, True
            return
        i = 0
        for r in batch:
            r.result, r.done = out[i : i + len(r.items)], True
            i += len(r.items)
        s = self.stats
        s.calls += 1
        s.items += len(flat)
        s.requests += len(batch)
        s.largest = max(s.largest, len(flat))
        s.shared_calls += len(batch) > 1
        if len(s.sizes) < 10_000:
            s.sizes.append(len(flat))

    @staticmethod
    def _result(req: _Request) -> list[Any]:
        if req.error is not None:
            raise req.error
        return req.result  # type: ignore[return-value]
