"""Triton's cache manager for the layered compile caches (``layered_cache``), inside a worker."""

from __future__ import annotations

import json
import os

from triton.runtime.cache import FileCacheManager

from skillbase.toolchain.layered_cache import LOWER_ENV


class LayeredCacheManager(FileCacheManager):
    """Triton's file cache reading the shared read-only layer first, writing the evaluation's own."""

    def __init__(self, key, override=False, dump=False):
        super().__init__(key, override, dump)
        lower = os.environ.get(LOWER_ENV)
        self.lower_dir = os.path.join(lower, key) if lower and not (override or dump) else None

    def get_file(self, filename):
        if self.lower_dir:
            path = os.path.join(self.lower_dir, filename)
            if os.path.isfile(path):
                return path
        return super().get_file(filename)

    def get_group(self, filename):
        if self.lower_dir:
            grp = os.path.join(self.lower_dir, f"__grp__{filename}")
            try:
                with open(grp) as f:
                    children = json.load(f)["child_paths"]
                # Written in the upper layer before it was promoted: the same names lie beside it now.
                found = {c: os.path.join(self.lower_dir, os.path.basename(p)) for c, p in children.items()}
                if all(os.path.isfile(p) for p in found.values()):
                    return found
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                pass
        return super().get_group(filename)
