"""A bounded memo for answers derived from slowly changing state.

Callers put every input the answer depends on into the key, change counters
included (the catalog's reloads, the graph's value and attempt counters), so
an entry is never stale: it is only no longer asked for, and ages out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")


class Memo:
    """Least recently used answers by key, thread-safe. Answers are shared between
    callers: build them immutable (a tuple, a MappingProxyType) or never change them."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        with self._lock:
            hit = self._items.get(key, _MISSING)
            if hit is not _MISSING:
                self._items.move_to_end(key)
                self.hits += 1
                return hit  # type: ignore[return-value]
            self.misses += 1
        value = build()  # outside the lock: two threads may build one key, and both answers are equal
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value


_MISSING = object()
