"""The ``skillbase`` console script: the core commands of ``skillbase.cli`` plus the
commands of the drivers that sit above the API (the reference agent, suite runs).

Registering the drivers' commands here, at the top, keeps every arrow pointing down:
``skillbase.cli`` never imports a driver, and a driver may reuse the CLI's plumbing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from skillbase.agent.cli import register_agent_commands
from skillbase.cli import app, tidy_metavars
from skillbase.suite.cli import register_suite_commands

register_agent_commands(app)
register_suite_commands(app)
tidy_metavars(app)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``skillbase`` command line with ``argv`` (default: the process's arguments)."""
    # Model-loading progress bars on stderr say nothing a user can act on.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    app(args=list(argv) if argv is not None else None, prog_name="skillbase")


if __name__ == "__main__":
    main(sys.argv[1:])
