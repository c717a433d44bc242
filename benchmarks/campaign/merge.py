"""Merge the campaign's per-author manifests (``manifest_*.json`` beside this file) into one.

    python benchmarks/campaign/merge.py benchmarks/campaign/manifest.json

Checks what a suite run would otherwise find late: names unique, every file present, every parent
named earlier in the same problem's lineage, task names of the form ``kb:LEVEL/NUMBER``. Exits non-zero
with the list of problems otherwise.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def merge(parts: list[Path]) -> tuple[list[dict], list[str]]:
    """All candidates of ``parts`` in order, and what is wrong with them."""
    out: list[dict] = []
    errors: list[str] = []
    seen: dict[str, dict] = {}
    for part in parts:
        for row in json.loads(part.read_text())["candidates"]:
            name = row.get("name")
            where = f"{part.name}: {name}"
            if name in seen:
                errors.append(f"{where}: name used twice")
                continue
            if not (HERE / row.get("file", "")).is_file():
                errors.append(f"{where}: no file {row.get('file')}")
            if not re.fullmatch(r"kb:[1-4]/\d+", str(row.get("task", ""))):
                errors.append(f"{where}: task {row.get('task')!r} is not kb:LEVEL/NUMBER")
            parent = row.get("parent")
            if parent is not None and (parent not in seen or seen[parent]["task"] != row.get("task")):
                errors.append(f"{where}: parent {parent!r} is not an earlier candidate of the same task")
            seen[name] = row
            out.append(row)
    return out, errors


def main(argv: list[str]) -> int:
    dest = Path(argv[1]) if len(argv) > 1 else HERE / "manifest.json"
    parts = sorted(HERE.glob("manifest_*.json"))
    rows, errors = merge(parts)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    dest.write_text(json.dumps({"candidates": rows}, indent=1) + "\n")
    tasks = {r["task"] for r in rows}
    print(f"{len(rows)} candidates over {len(tasks)} problems from {len(parts)} manifests -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
