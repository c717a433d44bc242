"""Build a run directory of KernelBench level-1 candidates for ``skillbase suite run`` (GPU validation).

One candidate per problem 1..COUNT, in this order of preference:
1. the campaign's kernel for it (``benchmarks/campaign``: the last step of its lineage, read from a
   manifest.json there, else the highest ``vN.py`` of ``level1/<P>_*/``);
2. an honest kernel of ``benchmarks/kb_honest`` (its manifest.json);
3. otherwise KernelBench's own reference code wrapped as ``ModelNew``, generated here from the checkout
   (``--kernelbench``) into the run directory and never kept in the project: these must come out
   ``rejected`` (they launch no kernel of their own).

    python benchmarks/suite_kb.py --kernelbench KB --out RUN_DIR [--count 100]
    python -m skillbase.suite run RUN_DIR --kernelbench KB --no-record

Writes RUN_DIR/manifest.json (``kind`` of each candidate in its note: campaign / honest / reference)
and prints how many of each kind. Existing files of RUN_DIR are rewritten only when they differ, so an
unchanged rebuild keeps every result of an earlier run.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from skillbase.suite.discover import kernelbench_task  # noqa: E402

KB_TASK = re.compile(r"^kb:(\d+)/(\d+)$")


def manifest_candidates(path: Path) -> list[dict]:
    """The candidates of a manifest.json, with files made absolute (missing files dropped)."""
    try:
        rows = json.loads(path.read_text()).get("candidates") or []
    except (OSError, ValueError, AttributeError):
        return []
    out = []
    for row in rows:
        if not isinstance(row, dict) or not row.get("file") or not row.get("task"):
            continue
        file = (path.parent / row["file"]).resolve()
        if file.is_file():
            out.append({**row, "file": file})
    return out


def leaves(cands: list[dict], level: int) -> dict[int, dict]:
    """Per problem of ``level``: its last candidate that no other names as parent (a lineage's last step)."""
    parents = {c.get("parent") for c in cands if c.get("parent")}
    out: dict[int, dict] = {}
    for c in cands:
        m = KB_TASK.match(str(c["task"]))
        if m and int(m.group(1)) == level and c.get("name") not in parents:
            out[int(m.group(2))] = c
    return out


def campaign_kernels(campaign: Path, level: int) -> dict[int, dict]:
    """The campaign's last step per problem: from its manifests, else from ``level<L>/<P>_*/vN.py``."""
    found: dict[int, dict] = {}
    for manifest in sorted(campaign.rglob("manifest.json")):
        found.update(leaves(manifest_candidates(manifest), level))
    for folder in sorted((campaign / f"level{level}").glob("*_*")):
        m = re.match(r"^(\d+)_", folder.name)
        steps = sorted(folder.glob("v*.py"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
        if m and steps and int(m.group(1)) not in found:
            found[int(m.group(1))] = {"name": f"campaign-{folder.name}-{steps[-1].stem}", "file": steps[-1].resolve(),
                                      "techniques": []}
    return found


def reference_wrapper(problem_file: Path) -> str:
    """KernelBench's reference code with ``Model`` renamed ``ModelNew``: a candidate that computes the
    right answer with PyTorch alone and must be rejected."""
    source = problem_file.read_text()
    return ("# Generated at run time from the problem file: its reference code as ModelNew (no kernel of its own).\n"
            + re.sub(r"\bModel\b", "ModelNew", source))


def write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def build(kb: Path, out: Path, count: int, level: int, campaign: Path, honest: Path) -> dict[str, int]:
    """Write the run directory; returns how many candidates of each kind it holds."""
    camp = campaign_kernels(campaign, level) if campaign.is_dir() else {}
    hon = leaves(manifest_candidates(honest / "manifest.json"), level) if honest.is_dir() else {}
    rows, kinds = [], {"campaign": 0, "honest": 0, "reference": 0}
    for problem in range(1, count + 1):
        try:
            task_file = kernelbench_task(kb, level, problem)
        except Exception as e:  # noqa: BLE001 - a checkout without this problem: skip it, say so
            print(f"skipping level {level} problem {problem}: {e}", file=sys.stderr)
            continue
        pick, kind = (camp.get(problem), "campaign") if problem in camp else (hon.get(problem), "honest")
        if pick is not None:
            dest = out / kind / f"p{problem:03d}_{Path(pick['file']).name}"
            write_if_changed(dest, Path(pick["file"]).read_text())
            techniques = list(pick.get("techniques") or [])
        else:
            kind, techniques = "reference", []
            dest = out / "reference" / f"p{problem:03d}_reference.py"
            write_if_changed(dest, reference_wrapper(task_file))
        kinds[kind] += 1
        rows.append({"name": f"l{level}-p{problem:03d}-{kind}", "file": str(dest.relative_to(out)),
                     "task": f"kb:{level}/{problem}", "parent": None, "techniques": techniques,
                     "note": f"{kind}" + (f": {pick.get('name')}" if pick is not None else "")})
    write_if_changed(out / "manifest.json", json.dumps({"candidates": rows}, indent=1) + "\n")
    return kinds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", type=Path, required=True, help="a KernelBench checkout")
    ap.add_argument("--out", type=Path, required=True, help="the run directory to write")
    ap.add_argument("--count", type=int, default=100, help="problems 1..COUNT (default 100)")
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--campaign", type=Path, default=ROOT / "benchmarks" / "campaign")
    ap.add_argument("--honest", type=Path, default=ROOT / "benchmarks" / "kb_honest")
    ap.add_argument("--clean", action="store_true", help="remove RUN_DIR first (results too)")
    args = ap.parse_args(argv)
    if args.clean and args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    kinds = build(args.kernelbench, args.out.resolve(), args.count, args.level, args.campaign, args.honest)
    print(f"{args.out}: " + ", ".join(f"{v} {k}" for k, v in kinds.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
