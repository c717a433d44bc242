"""Parsing Python source from any thread.

CPython 3.11's ``ast`` module keeps the depth of the tree it is building in state shared by every
thread, and two threads parsing at once can corrupt it: ``SystemError: AST constructor recursion
depth mismatch`` (CPython issue gh-106905, seen once in this project's test suite while parallel
evaluations read their candidates' sources). Every parse in the project goes through one lock.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename)
