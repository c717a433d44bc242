"""Do skillbase and KernelBench's own evaluator give honest candidates the same verdict? (GPU)

Every honest kernel of ``benchmarks/kb_honest`` (problems whose inputs are small enough that
KernelBench's evaluator, which draws them on the CPU, is quick), plus a few honest-but-wrong mutants
made from them here (a changed constant, an offset, a skipped K block: both evaluators must call those
incorrect), goes through:

- KernelBench's ``eval_kernel_against_ref`` from the checkout given (``--kernelbench``), in a fresh
  subprocess per candidate, 5 correctness trials, no timing; missing optional imports of its package
  (openai, litellm, dotenv...) are stubbed, nothing of it is copied;
- ``python -m skillbase.suite run`` over the same candidates (full verification and timing).

    python benchmarks/kb_agreement.py --kernelbench KB --run-dir DIR --json OUT.json

Prints one row per candidate (both verdicts, both wall times) and the agreement count last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HONEST = ROOT / "benchmarks" / "kb_honest"

# Honest-but-wrong variants: (name, honest file, problem, text replaced, replacement).
MUTANTS = [
    ("mutant-gelu-constant", "new_gelu.py", 88, "0.044715 * x * x * x", "0.04 * x * x * x"),
    ("mutant-diag-offset", "diag_matmul.py", 12, "scale[:, None] * b", "scale[:, None] * b + 1e-3"),
    ("mutant-matmul-skips-last-k", "matmul.py", 1, "for k0 in range(0, K, BLOCK_K):",
     "for k0 in range(0, K - BLOCK_K, BLOCK_K):"),
]

KB_CHILD = r'''
import importlib.abc, importlib.machinery, json, sys, tempfile, time, types  # the checkout: on PYTHONPATH
OPTIONAL = {"openai", "litellm", "dotenv", "tqdm", "requests", "datasets", "together", "anthropic", "google",
            "modal", "toml", "tomli", "pandas", "matplotlib", "seaborn", "einops", "transformers"}

class _Dummy:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Dummy()
    def __getattr__(self, name): return _Dummy()

def _stub_attribute(attr):
    # Dunder look-ups (inspect reads __file__ of every module) must fail as on a real module.
    if attr.startswith("__"):
        raise AttributeError(attr)
    return _Dummy

class Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Only what the real finders could not find: an empty module whose attributes are dummies."""
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in OPTIONAL:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = _stub_attribute
        return m
    def exec_module(self, module): pass

sys.meta_path.append(Stubs())
from kernelbench.eval import eval_kernel_against_ref
ref, cand = open(sys.argv[2]).read(), open(sys.argv[3]).read()
start = time.perf_counter()
try:
    r = eval_kernel_against_ref(original_model_src=ref, custom_model_src=cand, num_correct_trials=5,
                                measure_performance=False, device=0,
                                backend="cuda" if "load_inline" in cand else "triton",
                                build_dir=tempfile.mkdtemp(prefix="kb-build-"))
    out = {"compiled": bool(r.compiled), "correct": bool(r.correctness),
           "metadata": {k: str(v)[:300] for k, v in (r.metadata or {}).items()}}
except Exception as e:
    out = {"compiled": False, "correct": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
out["wall_s"] = round(time.perf_counter() - start, 2)
print("KB_RESULT " + json.dumps(out))
'''


def candidates(run_dir: Path) -> list[dict]:
    """Copy the honest kernels and write the mutants into ``run_dir``; its manifest lists them all."""
    rows = json.loads((HONEST / "manifest.json").read_text())["candidates"]
    out = []
    for row in rows:
        dest = run_dir / "honest" / row["file"]
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HONEST / row["file"], dest)
        out.append({**row, "file": str(dest.relative_to(run_dir)), "expect": "correct"})
    for name, file, problem, old, new in MUTANTS:
        text = (HONEST / file).read_text()
        assert old in text, (file, old)
        dest = run_dir / "mutants" / f"{name}.py"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text.replace(old, new))
        out.append({"name": name, "file": str(dest.relative_to(run_dir)), "task": f"kb:1/{problem}", "parent": None,
                    "techniques": [], "note": f"honest but wrong: {old!r} -> {new!r}", "expect": "incorrect"})
    (run_dir / "manifest.json").write_text(json.dumps({"candidates": [
        {k: v for k, v in r.items() if k != "expect"} for r in out]}, indent=1))
    return out


def kernelbench_verdict(kb: Path, problem_file: Path, candidate: Path, timeout: float) -> dict:
    """KernelBench's verdict on one candidate, from a fresh process."""
    src = kb / "src"
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(KB_CHILD)
    try:
        p = subprocess.run([sys.executable, f.name, str(src), str(problem_file), str(candidate)], capture_output=True,
                           text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                               [str(src), *filter(None, [os.environ.get("PYTHONPATH")])])})
    except subprocess.TimeoutExpired:
        return {"compiled": False, "correct": False, "error": f"timed out after {timeout:.0f} s"}
    finally:
        os.unlink(f.name)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("KB_RESULT "):
            return json.loads(line[len("KB_RESULT "):])
    return {"compiled": False, "correct": False, "error": f"exit {p.returncode}: {(p.stderr or p.stdout)[-300:]}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", type=Path, required=True)
    ap.add_argument("--run-dir", type=Path, required=True, help="where the candidates are written and evaluated")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per KernelBench evaluation")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these candidates (names as printed)")
    args = ap.parse_args(argv)
    from skillbase.suite.discover import kernelbench_task

    args.run_dir.mkdir(parents=True, exist_ok=True)
    rows = candidates(args.run_dir)
    if args.only:
        rows = [r for r in rows if r["name"] in args.only]
        (args.run_dir / "manifest.json").write_text(json.dumps({"candidates": [
            {k: v for k, v in r.items() if k != "expect"} for r in rows]}, indent=1))
    start = time.perf_counter()
    ours = subprocess.run([sys.executable, "-m", "skillbase.suite", "run", str(args.run_dir), "--kernelbench",
                           str(args.kernelbench), "--no-record", "--json", "--device", "cuda"],
                          capture_output=True, text=True, cwd=ROOT)
    ours_wall = time.perf_counter() - start
    if ours.returncode != 0:
        print(ours.stderr[-3000:], file=sys.stderr)
        return 1
    by_name = {r["name"]: r for r in json.loads(ours.stdout)["rows"]}
    table = []
    for row in rows:
        problem = int(row["task"].split("/")[1])
        kb = kernelbench_verdict(args.kernelbench, kernelbench_task(args.kernelbench, 1, problem),
                                 args.run_dir / row["file"], args.timeout)
        mine = by_name.get(row["name"], {})
        agree = (mine.get("verdict") == "correct") == kb["correct"]
        table.append({"name": row["name"], "problem": problem, "expected": row["expect"],
                      "skillbase": mine.get("verdict"), "skillbase_failed_checks": mine.get("failed_checks"),
                      "skillbase_eval_s": mine.get("eval_s"), "kernelbench_correct": kb["correct"],
                      "kernelbench_compiled": kb["compiled"], "kernelbench_wall_s": kb.get("wall_s"),
                      "kernelbench_error": kb.get("error"), "kernelbench_metadata": kb.get("metadata"),
                      "agree": agree})
        print(f"{row['name']:34s} expected {row['expect']:9s} skillbase {str(mine.get('verdict')):10s} "
              f"KernelBench {'correct' if kb['correct'] else 'incorrect':9s} {'agree' if agree else 'DISAGREE'} "
              f"({mine.get('eval_s')} s vs {kb.get('wall_s')} s)", flush=True)
    agreed = sum(r["agree"] for r in table)
    summary = {"candidates": len(table), "agree": agreed, "skillbase_run_wall_s": round(ours_wall, 1),
               "honest_problems": len({r["problem"] for r in table if r["expected"] == "correct"})}
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rows": table}, indent=1))
    print(f"same verdict on {agreed}/{len(table)} candidates ({summary['honest_problems']} honest problems); "
          f"skillbase run {ours_wall:.0f} s wall clock")
    return 0 if agreed == len(table) else 9


if __name__ == "__main__":
    sys.exit(main())
