"""A workspace's ``./sb``: skillbase's CLI, with every call logged for the ablation's records.

The agent sees exactly what ``skillbase`` prints. The log line holds the arguments, the exit code,
the wall time, the round the call was made in and, for ``recall`` and ``suggest``, the ids of what
they returned (read from the JSON when ``--json`` was asked for, else from the table's rows).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

# A table row of `skillbase recall`: "│ 1 │ skill │ some-name │ 0.412 │ ..."
RECALL_ROW = re.compile(r"^\s*[│|]\s*\d+\s*[│|]\s*(\w+)\s*[│|]\s*(\S+)\s*[│|]")
# A table row of `skillbase suggest`: "│ layout-change │ 0.21 │ 1.34x │ ..."
SUGGEST_ROW = re.compile(r"^\s*[│|]\s*([a-z0-9][a-z0-9-]*)\s*[│|]\s*[0-9.]+\s*[│|]")


def returned_items(command: str, stdout: str, as_json: bool) -> list[str]:
    """The ids a recall or suggest call returned, in order ('kind:id' for recall)."""
    if as_json:
        try:
            data = json.loads(stdout)
        except ValueError:
            return []
        if command == "recall":
            items = [f"{i['kind']}:{i['id']}" for i in data.get("items", [])]
            return items + [f"technique:{s['technique']}" for s in data.get("suggestions", [])]
        rows = data if isinstance(data, list) else data.get("suggestions", [])
        return [f"technique:{s['technique']}" for s in rows if isinstance(s, dict) and "technique" in s]
    out = []
    for line in stdout.splitlines():
        m = RECALL_ROW.match(line) if command == "recall" else None
        if m:
            out.append(f"{m.group(1)}:{m.group(2)}")
            continue
        m = SUGGEST_ROW.match(line)
        if m and m.group(1) not in ("technique",):
            out.append(f"technique:{m.group(1)}")
    return out


# What would change the store's contents beyond the agent's own work (load the shipped memory into an
# empty store, import another store): refused in both arms alike.
REFUSED = {("init",), ("memory", "import"), ("memory", "reindex"), ("skills", "import"), ("skills", "add"),
           ("suite", "record"), ("suite", "run"), ("serve",), ("ui",), ("optimize",), ("distill",), ("demo",)}


def refused(args: list[str]) -> bool:
    words = tuple(a for a in args if not a.startswith("-"))
    return any(words[:len(r)] == r for r in REFUSED)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--round-file", type=Path, required=True)
    ap.add_argument("args", nargs=argparse.REMAINDER)
    ns = ap.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    exe = Path(sys.executable).with_name("skillbase")
    start = time.time()
    if refused(args):
        proc = subprocess.CompletedProcess(args, 2, "", f"error: `{' '.join(args)}` is not available in this "
                                                        "workspace: its store holds this problem's work only\n")
    else:
        proc = subprocess.run([str(exe), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    command = next((a for a in args if not a.startswith("-")), "")
    row = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "args": args, "rc": proc.returncode,
           "seconds": round(time.time() - start, 2), "command": command}
    try:
        row["round"] = int(ns.round_file.read_text().strip())
    except (OSError, ValueError):
        row["round"] = None
    if command in ("recall", "suggest"):
        row["returned"] = returned_items(command, proc.stdout, "--json" in args)
    with ns.log.open("a") as f:
        f.write(json.dumps(row) + "\n")
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
