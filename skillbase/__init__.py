"""skillbase: compile, verify and benchmark GPU kernels, and remember what worked.

``from skillbase import SkillBase`` is the Python API: the facade of
``skillbase.api`` plus the reference agent's ``optimize`` and ``distill``
(``skillbase.agent.facade``). The import is lazy so that the toolchain's worker
processes, which import ``skillbase.toolchain``, never load the memory layer
(chromadb, sentence-transformers).
"""

from pathlib import Path as _Path

from skillbase import _source_tree
from skillbase.version import __version__

_source_tree.install(_Path(__file__).absolute().parent)

__all__ = ["SkillBase", "Settings", "__version__"]


def __getattr__(name: str):
    if name == "SkillBase":
        from skillbase.agent.facade import SkillBase

        return SkillBase
    if name == "Settings":
        from skillbase.config import Settings

        return Settings
    raise AttributeError(f"module 'skillbase' has no attribute {name!r}")
