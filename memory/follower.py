"""The follower: one background thread that keeps the derived parts (vector index, graph)
caught up with the ledger, so a write returns as soon as its ledger commit is durable.

Writers ``poke()`` it after committing; it runs ``sync`` (read the outbox after the seq the
index reflects, embed, upsert: one batch) once per round, so the writes of many concurrent
callers land in one model call and one chroma upsert. A writer's round starts ``gather_s``
after it is asked for, gathering the writes that come meanwhile into it; ``sync`` returning
True asks for another round at once (a backlog is worked off batch by batch, waiters told
after each), and ``AGAIN_LATER`` asks for another round after the gathering pause (the round left
work to someone else for now: the writer process of records it has not embedded yet).
Readers that must see every committed record ``wait(ready)``: it pokes, starting
a round at once, and blocks until a round that began after the call has finished and
``ready()`` holds; False means the round did not get there (the index is broken, the model
is missing, another process holds the lock), and the caller does the work itself, where its
errors are raised.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("skillbase.memory")

# What ``sync`` returns to be run again once the gathering pause has passed, not at once.
AGAIN_LATER = "again later"


class Follower:
    """Runs ``sync()`` in a daemon thread whenever poked; rounds never overlap."""

    def __init__(
        self, sync: Callable[[], bool | None], *, name: str = "skillbase-index-follower", gather_s: float = 0.0
    ):
        self._sync = sync
        self._name = name
        self._gather_s = gather_s
        self._cv = threading.Condition()
        self._asked = 0  # rounds asked for
        self._urgent = 0  # rounds asked for by a waiting reader
        self._done = 0  # rounds asked for that a finished round covered
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.rounds = 0
        self.last_error: BaseException | None = None
        # Whether the round running now was asked for by a waiting reader (read by ``sync``).
        self.round_urgent = False

    def poke(self, urgent: bool = False) -> int:
        """Ask for a round (starting the thread on first use); returns the ticket a ``wait`` needs.
        A round a writer asks for starts up to ``gather_s`` later, gathering the writes that come
        meanwhile; an ``urgent`` one (a reader waits for it) starts at once."""
        with self._cv:
            if self._stopping:
                return self._asked
            # A round already asked for and not yet begun takes this poke's writes too: the thread
            # need not be woken for it. Waking it anyway, at every write and search of a loaded
            # server, cost a wake-up and a turn at the interpreter lock each time.
            pending = self._asked > self._done
            self._asked += 1
            if urgent:
                self._urgent = self._asked
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            if urgent or not pending:
                self._cv.notify_all()
            return self._asked

    def wait(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Poke, then wait (at most ``timeout`` seconds) for that round to finish; returns ``ready()``."""
        ticket = self.poke(urgent=True)
        with self._cv:
            # Checked after every round: the one running now may already get there.
            self._cv.wait_for(lambda: self._done >= ticket or self._stopping or ready(), timeout)
        return ready()

    def _loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._asked > self._done or self._stopping)
                if self._stopping and self._asked <= self._done:
                    return
                if self._gather_s > 0:
                    self._cv.wait_for(lambda: self._urgent > self._done or self._stopping, self._gather_s)
                target = self._asked
                self.round_urgent = self._urgent > self._done
            more = False
            try:
                more = self._sync()
                self.last_error = None
            except BaseException as e:  # the ledger holds the records; the next round or a reader retries
                self.last_error = e
                log.warning("the index follower could not catch up (a reader will): %s: %s", type(e).__name__, e)
            with self._cv:
                self._done = max(self._done, target)
                if more:  # work is left: go round again, at once (a backlog, or writes that kept
                    # coming) or, for AGAIN_LATER (left to someone else for now), after the gathering pause
                    self._asked = max(self._asked, self._done + 1)
                    if more != AGAIN_LATER:
                        self._urgent = self._asked
                self.rounds += 1
                self._cv.notify_all()

    def close(self, timeout: float = 60.0) -> None:
        """Finish the round asked for, then stop the thread."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
