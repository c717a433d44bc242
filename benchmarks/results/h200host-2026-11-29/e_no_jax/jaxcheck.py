import subprocess, sys
CHILD = """
import subprocess, sys
{imp}
out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout.split()[0]
print("jax imported:", "jax" in sys.modules, "| GPU memory used while this process lives (MiB):", out)
"""
base = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout.strip()
print("before (used, total MiB):", base)
for name, imp in (("plain `import bm25s`", "import bm25s"),
                  ("skillbase's lexical index", "from skillbase.retrievers.lexical import build_segment, Doc; build_segment([Doc('a', ['x'], {})], 1)")):
    r = subprocess.run([sys.executable, "-c", CHILD.format(imp=imp)], capture_output=True, text=True, timeout=300)
    print(name + ":", (r.stdout + r.stderr[-300:]).strip())
