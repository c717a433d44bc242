"""A cap on the number of processes a worker and everything it starts may run at once.

RLIMIT_NPROC bounds an ordinary user's processes, but root is exempt from it (in every user
namespace mapped to root), so a fork bomb in a worker started by root would run until the
host's PID space ran out. Where a writable cgroup ``pids`` controller exists (cgroup v1's
``/sys/fs/cgroup/pids``, or a cgroup v2 tree with ``pids.max``), each worker gets a group
of its own with ``pids.max`` set; the worker joins it before it runs anything, and the group
is killed and removed with the worker. Where none exists the group is absent and
``ProcessGroup.create`` returns None: the threat model (docs/sandbox.md) says so.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

V1 = Path("/sys/fs/cgroup/pids")
V2 = Path("/sys/fs/cgroup")


def _v2_own() -> Path | None:
    """This process's cgroup v2 folder, when the unified tree holds the pids controller."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                own = V2 / line[3:].lstrip("/")
                return (
                    own
                    if (own / "cgroup.controllers").is_file()
                    and "pids" in (own / "cgroup.controllers").read_text().split()
                    else None
                )
    except OSError:
        return None
    return None


def root() -> Path | None:
    """A cgroup folder under which worker groups with a ``pids.max`` can be made, or None."""
    for candidate in (V1, _v2_own()):
        if candidate is not None and candidate.is_dir() and os.access(candidate, os.W_OK):
            return candidate
    return None


@dataclass
class ProcessGroup:
    """One worker's cgroup: its processes, capped at ``pids.max``."""

    path: Path

    @classmethod
    def create(cls, name: str, max_procs: int) -> "ProcessGroup | None":
        parent = root()
        if parent is None:
            return None
        path = parent / f"skillbase-{os.getpid()}-{re.sub(r'[^A-Za-z0-9]', '', name)}-{os.urandom(3).hex()}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_procs))
        except OSError:
            try:
                path.rmdir()
            except OSError:
                pass
            return None
        return cls(path)

    def enter(self) -> None:
        """Move the calling process into the group (called in the child before exec)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def close(self) -> None:
        """Kill whatever is still in the group, then remove it."""
        for _ in range(50):
            left = self.pids()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)
        try:
            self.path.rmdir()
        except OSError:
            pass
