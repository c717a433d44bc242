"""KernelBench's own adversarial kernels through skillbase's suite: each must be rejected with a named
check (GPU).

The cases are read at run time from the checkout given (``--kernelbench``): every
``run_test_kernel(problem_name=..., kernel_filename=...)`` pair of its
``unit_tests/test_eval_adversarial.py``, and every other kernel of ``unit_tests/test_kernels``
against level 1 problem 1 (the problem those kernels are written for). They are copied into the run
directory, evaluated with ``python -m skillbase.suite run`` and, with ``--with-kernelbench``, also by
KernelBench's ``eval_kernel_against_ref`` (correctness only) for contrast.

    python benchmarks/kb_adversarial.py --kernelbench KB --run-dir DIR --json OUT.json

Prints one row per kernel: our verdict and failed checks (and KernelBench's verdict); exit 9 unless
every kernel is rejected or incorrect with at least one named failed check.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = re.compile(r'problem_name\s*=\s*"level(\d+)/(\d+)_[^"]*"\s*,\s*kernel_filename\s*=\s*"([^"]+)"', re.S)


def cases(kb: Path) -> list[tuple[str, int, int]]:
    """(kernel file name, level, problem) for every adversarial case of the checkout."""
    tests = kb / "src" / "kernelbench" / "unit_tests"
    found: dict[str, tuple[int, int]] = {}
    text = (tests / "test_eval_adversarial.py").read_text() if (tests / "test_eval_adversarial.py").is_file() else ""
    for level, problem, kernel in CASE.findall(text):
        found.setdefault(kernel, (int(level), int(problem)))
    for path in sorted((tests / "test_kernels").glob("*.py")):
        found.setdefault(path.name, (1, 1))
    return [(k, lv, p) for k, (lv, p) in sorted(found.items())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", type=Path, required=True)
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--with-kernelbench", action="store_true", help="also ask KernelBench's evaluator")
    args = ap.parse_args(argv)
    from skillbase.suite.discover import kernelbench_task

    kernels = args.kernelbench / "src" / "kernelbench" / "unit_tests" / "test_kernels"
    args.run_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for kernel, level, problem in cases(args.kernelbench):
        shutil.copy(kernels / kernel, args.run_dir / kernel)
        rows.append({"name": Path(kernel).stem, "file": kernel, "task": f"kb:{level}/{problem}", "parent": None,
                     "techniques": [], "note": "KernelBench adversarial kernel"})
    (args.run_dir / "manifest.json").write_text(json.dumps({"candidates": rows}, indent=1))
    ours = subprocess.run([sys.executable, "-m", "skillbase.suite", "run", str(args.run_dir), "--kernelbench",
                           str(args.kernelbench), "--no-record", "--json", "--device", "cuda"],
                          capture_output=True, text=True, cwd=ROOT)
    if ours.returncode != 0:
        print(ours.stderr[-3000:], file=sys.stderr)
        return 1
    by_name = {r["name"]: r for r in json.loads(ours.stdout)["rows"]}
    out, ok = [], True
    for row in rows:
        mine = by_name.get(row["name"], {})
        caught = mine.get("verdict") in ("rejected", "incorrect") and bool(mine.get("failed_checks"))
        ok &= caught
        entry = {"kernel": row["file"], "task": row["task"], "verdict": mine.get("verdict"),
                 "failed_checks": mine.get("failed_checks"), "message": (mine.get("message") or "")[:400],
                 "eval_s": mine.get("eval_s"), "caught": caught}
        if args.with_kernelbench:
            from kb_agreement import kernelbench_verdict

            level, problem = (int(x) for x in row["task"][3:].split("/"))
            entry["kernelbench"] = kernelbench_verdict(args.kernelbench, kernelbench_task(args.kernelbench, level,
                                                                                          problem),
                                                       args.run_dir / row["file"], 600.0)
        out.append(entry)
        kb = entry.get("kernelbench")
        print(f"{row['file']:32s} skillbase {str(mine.get('verdict')):9s} by {', '.join(mine.get('failed_checks') or [])}"
              + (f"; KernelBench says {'correct' if kb['correct'] else 'incorrect'}" if kb else ""), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"caught": sum(e["caught"] for e in out), "kernels": len(out), "rows": out},
                                        indent=1))
    print(f"{sum(e['caught'] for e in out)}/{len(out)} of KernelBench's adversarial kernels rejected with a named check")
    return 0 if ok else 9


if __name__ == "__main__":
    sys.exit(main())
