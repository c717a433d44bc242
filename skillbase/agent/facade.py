"""``skillbase.SkillBase``: the API facade plus the reference agent.

The agent drives the API from above (ARCHITECTURE.md: faces and drivers sit over
``skillbase.api``), so the core facade cannot reach up to it. This subclass adds the
agent's two entry points for Python users; ``from skillbase import SkillBase`` returns
it. The anthropic SDK still loads only when ``optimize`` or ``distill`` is called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skillbase import api
from skillbase.models import TaskInfo


class SkillBase(api.SkillBase):
    """Compile, verify and benchmark kernels; remember every attempt; recall what worked;
    and run the reference optimization agent over the same operations."""

    def optimize(
        self,
        task: str | TaskInfo,
        *,
        model: str | None = None,
        budget: Any = 5,
        device: str = "auto",
        session: str | None = None,
        progress: Callable[[Any], None] | None = None,
        **options: Any,
    ):
        """Optimize ``task`` with the reference agent (Messages API tool use over the same tools
        as the MCP server); returns an ``OptimizeResult``. ``budget`` is a round count or a
        ``skillbase.agent.Budget``. Needs ANTHROPIC_API_KEY (ConfigError otherwise)."""
        from skillbase.agent.loop import optimize

        name = task.name if isinstance(task, TaskInfo) else task
        return optimize(
            self, name, model=model, budget=budget, device=device, session=session, progress=progress, **options
        )

    def distill(
        self,
        since: Any = None,
        *,
        model: str | None = None,
        progress: Callable[[Any], None] | None = None,
        **options: Any,
    ):
        """Turn attempts and lessons newer than ``since`` (default: the last distill run) into
        experiences and draft skills awaiting curation; returns a ``DistillResult``."""
        from skillbase.agent.distillation import distill

        return distill(self, since=since, model=model, progress=progress, **options)
