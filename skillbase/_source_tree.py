"""Run from a source checkout that was never installed (``PYTHONPATH=.`` on a GPU box without a
package index): the folders that install as ``skillbase.memory``, ``.retrievers``, ``.mcp_server`` and
``.seeds`` sit beside the ``skillbase`` folder, so a finder maps those four names onto them, as the
installed wheel's ``package-dir`` does. It is appended last to ``sys.meta_path``: an installed or
editable skillbase is always found first, and bare ``memory`` and the rest stay unimportable through it.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path

MAPPED = {
    "skillbase.memory": "memory",
    "skillbase.retrievers": "retrievers",
    "skillbase.mcp_server": "mcp_server",
    "skillbase.seeds": "seeds",
}


class SourceTreeFinder(importlib.abc.MetaPathFinder):
    """Finds the four mapped subpackages of ``skillbase`` in the checkout ``root``."""

    def __init__(self, root: Path):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        folder = MAPPED.get(fullname)
        if folder is None:
            return None
        init = self.root / folder / "__init__.py"
        if not init.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[str(init.parent)])


def install(package_dir: Path) -> None:
    """Add the finder once when ``package_dir`` (the imported ``skillbase`` folder) lies in a checkout."""
    root = package_dir.parent
    if not (root / "pyproject.toml").is_file() or not (root / "seeds" / "__init__.py").is_file():
        return  # an installed copy: its subpackages sit inside it
    if not any(isinstance(f, SourceTreeFinder) for f in sys.meta_path):
        sys.meta_path.append(SourceTreeFinder(root))
