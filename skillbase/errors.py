"""Typed errors. Each carries a message that says what went wrong and a hint that
says what to do next; the MCP layer turns them into tool errors, the CLI into a
red line and a non-zero exit code (``exit_code``)."""

from __future__ import annotations


class SkillbaseError(Exception):
    """Base class. ``hint`` is the next step for whoever reads the error."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def to_dict(self) -> dict[str, str | None]:
        return {"error": type(self).__name__, "message": self.message, "hint": self.hint}


class InvalidInput(SkillbaseError):
    """Arguments or records that fail validation."""

    exit_code = 2


class NotFound(SkillbaseError):
    """An unknown task, solution, attempt, experience or skill."""

    exit_code = 3


class Forbidden(InvalidInput):
    """A request refused for who or where it came from (a stale or foreign form, a missing login)."""


class TaskError(InvalidInput):
    """A task file that does not import or lacks Model / get_inputs / get_init_inputs."""


class SolutionError(InvalidInput):
    """A solution file that does not import, lacks ModelNew, or is malformed."""


class LimitExceeded(InvalidInput):
    """An input over a configured size or time limit."""


class UnknownTechnique(InvalidInput):
    """A technique that is neither a canonical name nor an alias in the vocabulary."""


class ToolchainUnavailable(SkillbaseError):
    """A compiler, GPU or library the operation needs is not present."""

    exit_code = 4


class WorkerFailure(SkillbaseError):
    """The isolated worker died or hung; it was restarted."""

    exit_code = 5


class StoreError(SkillbaseError):
    """The store could not be opened or written."""

    exit_code = 6


class SchemaTooNew(StoreError):
    """The store was written by a newer skillbase than this one."""


class ConfigError(SkillbaseError):
    """A setting is missing or malformed (for example no API key)."""

    exit_code = 7


class AgentError(SkillbaseError):
    """The optimization agent could not continue (API failures after retries)."""

    exit_code = 8
