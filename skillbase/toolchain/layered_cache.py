"""Compile caches that stay fast without being a channel between candidates.

Each evaluation names a namespace (the hash of the candidate's source). Its compiled kernels
(Triton's cache, torch.compile's, CUDA C++ extension builds) are written to a writable layer
private to that evaluation and read from two layers: that one, then the shared layer of the
same namespace, which the jail mounts read-only. After the evaluation the trusted parent
moves the writable layer into the shared one (``promote``). So a candidate re-evaluated
finds its kernels compiled, and no candidate can put anything where another candidate's
kernels are looked up: a poisoned entry only ever reaches the candidate that wrote it.

The parent side lives here; ``triton_cache.LayeredCacheManager`` is Triton's cache manager for
it inside the worker (``TRITON_CACHE_MANAGER``), reading the layers' folders from the
environment the worker sets for each evaluation.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

LOWER_ENV = "SKILLBASE_TRITON_LOWER"
MANAGER = "skillbase.toolchain.triton_cache:LayeredCacheManager"
KINDS = ("triton", "torch_extensions")  # kept; torch.compile's own cache lives one evaluation only
WRITABLE = ("triton", "inductor", "torch_extensions")
MAX_PROMOTED_BYTES = 1 << 30  # a layer larger than this is dropped, not kept


def layer_env(shared: Path, upper: Path, namespace: str) -> dict[str, str]:
    """The environment of one evaluation: where each cache writes (``upper``) and reads (``shared``)."""
    return {
        "TRITON_CACHE_DIR": str(upper / "triton" / namespace),
        LOWER_ENV: str(shared / "triton" / namespace),
        "TRITON_CACHE_MANAGER": MANAGER,
        "TORCHINDUCTOR_CACHE_DIR": str(upper / "inductor" / namespace),
        "TORCH_EXTENSIONS_DIR": str(upper / "torch_extensions" / namespace),
        "SKILLBASE_EXTENSIONS_LOWER": str(shared / "torch_extensions" / namespace),
    }


def promote(upper: Path, shared: Path, namespace: str) -> int:
    """Move what an evaluation compiled (``upper``) into the shared layer of its own namespace; returns the
    bytes kept. Only regular files are taken; a namespace's layer over the size limit is dropped."""
    kept = 0
    for kind in KINDS:
        src = upper / kind / namespace
        if not src.is_dir():
            continue
        # os.walk does not follow links: a link planted in the layer can not pull the host's files in.
        files = [Path(d) / f for d, _, names in os.walk(src) for f in names]
        files = [p for p in files if not p.is_symlink() and p.is_file()]
        size = sum(p.stat().st_size for p in files)
        if size <= MAX_PROMOTED_BYTES:
            dst_root = shared / kind / namespace
            for p in files:
                dst = dst_root / p.relative_to(src)
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
                shutil.copy2(p, tmp)
                os.replace(tmp, dst)
            kept += size
    for kind in WRITABLE:
        shutil.rmtree(upper / kind, ignore_errors=True)
    return kept
