"""Which candidates a run directory holds, and the task each one answers.

Two layouts are read: the names KernelBench's generation scripts write
(``level_{L}_problem_{P}_sample_{S}_kernel.py``, answered against a KernelBench
checkout), and a ``manifest.json`` listing candidates with their task, their
parent in the run (the lineage) and the techniques each step applied:

    {"candidates": [
      {"name": "softmax-v1", "file": "softmax/v1.py", "task": "kb:1/23", "techniques": ["online-softmax"]},
      {"name": "softmax-v2", "file": "softmax/v2.py", "task": "kb:1/23", "parent": "softmax-v1",
       "techniques": ["split-row-reduction"], "note": "why this step"}]}

``task`` is ``kb:LEVEL/NUMBER`` (needs ``--kernelbench``), a task file relative
to the manifest's folder (or absolute), or a built-in task name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from skillbase.errors import InvalidInput, NotFound
from skillbase.toolchain import tasks

KB_NAME = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
KB_TASK = re.compile(r"^kb:(\d+)/(\d+)$")
MANIFEST = "manifest.json"


@dataclass
class Item:
    """One candidate of a run and the task it answers."""

    name: str
    file: Path
    task: Path
    level: int | None = None
    problem: int | None = None
    sample: int | None = None
    parent: str | None = None
    techniques: list[str] = field(default_factory=list)
    note: str = ""


def parse_problems(spec: str | None) -> set[int] | None:
    """``"1-20,23"`` -> {1..20, 23}; None or empty -> None (every problem)."""
    if not spec:
        return None
    out: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise InvalidInput(f"bad problem list {spec!r}", hint="write numbers and ranges, e.g. 1-20,23")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise InvalidInput(f"bad range {part!r} in {spec!r}", hint="write the smaller number first")
        out.update(range(lo, hi + 1))
    return out


def parse_levels(levels: list[int] | None, more: list[str] | None = None) -> set[int] | None:
    """``--level 1 2 3``: the option's values and the bare numbers after it; None for every level."""
    out = set(levels or [])
    for extra in more or []:
        if not extra.isdigit() or not levels:
            raise InvalidInput(f"unexpected argument {extra!r}", hint="levels are numbers: --level 1 2 3")
        out.add(int(extra))
    return out or None


def kernelbench_levels(kb_dir: Path) -> Path:
    """The folder holding ``level1``, ``level2``... inside a KernelBench checkout (or that folder itself)."""
    for root in (kb_dir / "KernelBench", kb_dir):
        if (root / "level1").is_dir():
            return root
    raise NotFound(
        f"{str(kb_dir)!r} is not a KernelBench checkout (no KernelBench/level1 in it)",
        hint="pass --kernelbench the folder you cloned KernelBench into",
    )


def kernelbench_task(kb_dir: Path | None, level: int, problem: int) -> Path:
    """The problem file of KernelBench level ``level``, number ``problem``."""
    if kb_dir is None:
        raise InvalidInput(
            f"candidates name KernelBench problem {level}/{problem} but no checkout was given",
            hint="pass --kernelbench PATH_TO_KERNELBENCH",
        )
    folder = kernelbench_levels(kb_dir) / f"level{level}"
    found = sorted(folder.glob(f"{problem}_*.py"))
    if not found:
        raise NotFound(
            f"KernelBench has no level {level} problem {problem} in {str(folder)!r}",
            hint="check --level/--problems against the checkout",
        )
    return found[0].resolve()


def discover(
    run_dir: Path,
    kb_dir: Path | None = None,
    levels: set[int] | None = None,
    problems: set[int] | None = None,
    manifest: Path | None = None,
) -> list[Item]:
    """The candidates of ``run_dir`` (a manifest when present, else KernelBench-named files),
    filtered by level and problem number."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise NotFound(f"run directory {str(run_dir)!r} does not exist", hint="pass the folder of the candidates")
    manifest = manifest or (run_dir / MANIFEST if (run_dir / MANIFEST).is_file() else None)
    items = _from_manifest(manifest, kb_dir) if manifest else _from_kernelbench_names(run_dir, kb_dir)
    items = [i for i in items if (levels is None or i.level in levels) and (problems is None or i.problem in problems)]
    if not items:
        raise NotFound(
            f"no candidates in {str(run_dir)!r}" + (" for the levels/problems asked" if levels or problems else ""),
            hint="name files level_L_problem_P_sample_S_kernel.py, or add a manifest.json",
        )
    return items


def _from_kernelbench_names(run_dir: Path, kb_dir: Path | None) -> list[Item]:
    items = []
    for path in sorted(run_dir.glob("*.py")):
        m = KB_NAME.match(path.name)
        if not m:
            continue
        level, problem, sample = (int(g) for g in m.groups())
        items.append(
            Item(
                name=path.stem,
                file=path.resolve(),
                task=kernelbench_task(kb_dir, level, problem),
                level=level,
                problem=problem,
                sample=sample,
            )
        )
    return items


def _from_manifest(path: Path, kb_dir: Path | None) -> list[Item]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise NotFound(f"cannot read manifest {str(path)!r}: {e.strerror}") from None
    except ValueError as e:
        raise InvalidInput(f"manifest {str(path)!r} is not valid JSON: {e}") from None
    rows = data.get("candidates") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise InvalidInput(f"manifest {str(path)!r} has no 'candidates' list", hint=__doc__.split("\n\n")[1])
    base = Path(path).resolve().parent
    items: list[Item] = []
    seen: set[str] = set()
    for i, row in enumerate(rows):
        items.append(_manifest_item(row, i, base, kb_dir, path))
        if items[-1].name in seen:
            raise InvalidInput(f"manifest {str(path)!r}: candidate name {items[-1].name!r} appears twice")
        seen.add(items[-1].name)
    for it in items:
        if it.parent is not None and it.parent not in seen:
            raise InvalidInput(
                f"manifest {str(path)!r}: {it.name!r} names parent {it.parent!r}, which is not "
                "a candidate of this manifest",
                hint="parents are other candidates' names",
            )
    return items


def _manifest_item(row, i: int, base: Path, kb_dir: Path | None, path: Path) -> Item:
    where = f"manifest {str(path)!r}, candidate {i + 1}"
    if not isinstance(row, dict) or not row.get("file") or not row.get("task"):
        raise InvalidInput(f"{where}: each candidate needs 'file' and 'task'")
    file = (base / row["file"]).resolve()
    if not file.is_file():
        raise NotFound(f"{where}: candidate file {str(file)!r} does not exist")
    spec = str(row["task"])
    level = problem = None
    if m := KB_TASK.match(spec):
        level, problem = int(m.group(1)), int(m.group(2))
        task = kernelbench_task(kb_dir, level, problem)
    elif (base / spec).is_file() or (base / spec / "task.py").is_file():
        task = tasks.resolve_task_path(str(base / spec))[0]
    else:
        task = tasks.resolve_task_path(spec)[0]
    techniques = row.get("techniques") or []
    if not isinstance(techniques, list) or not all(isinstance(t, str) for t in techniques):
        raise InvalidInput(f"{where}: 'techniques' must be a list of names")
    return Item(
        name=str(row.get("name") or file.stem),
        file=file,
        task=task,
        level=level,
        problem=problem,
        sample=row.get("sample"),
        parent=row.get("parent"),
        techniques=list(techniques),
        note=str(row.get("note") or ""),
    )
