"""The ending the benchmark scripts share: their JSON report written where ``--out`` says.

    from json_report import write_report     # this folder is a script's first path entry
    write_report(args.out, report)
"""

from __future__ import annotations

import json
from pathlib import Path


def write_report(path: Path | None, report: dict, *, indent: int = 2, say: bool = True) -> None:
    """``report`` as JSON at ``path``, its folder made first; nothing when no path is given. ``say``: print
    where it went."""
    if not path:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=indent) + "\n")
    if say:
        print(f"wrote {path}")
