"""GPU memory a process holds after importing bm25s, and after using skillbase's lexical index.

    python benchmarks/import_gpu_memory.py          # on a GPU machine with JAX installed

bm25s picks its optional top-k backend at import by running a JAX operation when JAX can be
imported; that starts JAX on the default device, which takes most of the GPU's memory up front.
Each case runs in a fresh child process and reads ``nvidia-smi``'s used memory while that
child is alive (the GPU otherwise idle). The lexical index imports bm25s with JAX kept out.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

CHILD = """
import subprocess, sys
{imp}
out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                     capture_output=True, text=True).stdout.split()[0]
print("jax imported:", "jax" in sys.modules, "| GPU memory used while this process lives (MiB):", out)
"""
CASES = (
    ("plain `import bm25s`", "import bm25s"),
    ("skillbase's lexical index",
     "from skillbase.retrievers.lexical import build_segment, Doc; build_segment([Doc('a', ['x'], {})], 1)"),
)


def main() -> None:
    if shutil.which("nvidia-smi") is None:
        raise SystemExit("needs nvidia-smi: run it on a GPU machine (benchmarks/gpu_suite.sh part import_gpu_memory)")
    base = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True).stdout.strip()
    print("before (used, total MiB):", base)
    for name, imp in CASES:
        r = subprocess.run([sys.executable, "-c", CHILD.format(imp=imp)], capture_output=True, text=True, timeout=300)
        print(name + ":", (r.stdout + r.stderr[-300:]).strip())


if __name__ == "__main__":
    main()
