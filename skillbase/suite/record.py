"""Record a run's results in the store as attempts, with the manifest's lineage.

Ids and times come from the results themselves (the run's name, the candidate's
name and content, when it finished), so recording a run twice — after a crash,
or once on the GPU box and again where the store lives — adds nothing the second
time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from skillbase.errors import SkillbaseError
from skillbase.models import BenchReport, content_hash
from skillbase.suite.discover import Item
from skillbase.toolchain.source import read_source


@dataclass
class Recorded:
    """What recording a run did: attempt id per candidate name, and what was skipped and why."""

    attempts: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def attempt_id(run: str, name: str, solution_hash: str, finished_at: str) -> str:
    """The fixed id of a candidate's attempt in a run (time-sortable like every attempt id)."""
    ms = int(datetime.fromisoformat(finished_at).timestamp() * 1000)
    return f"att_{ms:012x}_{content_hash(run, name, solution_hash)[:8]}"


def parents_first(items: list[Item]) -> list[Item]:
    """Items ordered so that every parent comes before its children (manifest order otherwise)."""
    by_name = {i.name: i for i in items}
    done: set[str] = set()
    out: list[Item] = []

    def visit(item: Item, path: tuple[str, ...]) -> None:
        if item.name in done:
            return
        if item.name in path:
            raise SkillbaseError(f"the lineage loops through {item.name!r}", hint="fix the manifest's parents")
        parent = by_name.get(item.parent) if item.parent else None
        if parent is not None:
            visit(parent, path + (item.name,))
        done.add(item.name)
        out.append(item)

    for item in items:
        visit(item, ())
    return out


def record_run(
    sb,
    items: list[Item],
    outcomes: dict[str, tuple[BenchReport, str]],
    run: str,
    *,
    session: str | None = None,
    agent: str = "suite",
) -> Recorded:
    """Record every evaluated candidate of ``items`` (``outcomes``: name -> (report, finished_at))
    through ``sb.record_evaluation``; a candidate whose file changed since it was evaluated, or whose
    task could not be loaded, is skipped with the reason."""
    rec = Recorded()
    waiting: set[str] = set()
    for item in parents_first(items):
        got = outcomes.get(item.name)
        if got is None:
            rec.skipped[item.name] = "not evaluated yet"
            continue
        report, finished_at = got
        source = read_source(item.file, sb.settings.max_source_bytes, what="candidate")
        if content_hash(source) != report.solution_hash:
            rec.skipped[item.name] = "the file changed after it was evaluated: run the suite again"
            waiting.add(item.name)
            continue
        if report.hardware.name == "unknown":
            rec.skipped[item.name] = f"not evaluated: {report.message}"
            continue
        if item.parent and (item.parent not in outcomes or item.parent in waiting):
            # Recording it without its parent now would fix its id without the lineage for good.
            rec.skipped[item.name] = f"waiting for its parent {item.parent} to be evaluated and recorded"
            waiting.add(item.name)
            continue
        parent = rec.attempts.get(item.parent) if item.parent else None
        note = item.note if parent or not item.parent else f"{item.note} (parent {item.parent} not recorded)".strip()
        try:
            att = sb.record_evaluation(
                str(item.task),
                report,
                source=source,
                parent_id=parent,
                techniques=item.techniques,
                session=session or run,
                agent=agent,
                run=run,
                notes=note,
                attempt_id=attempt_id(run, item.name, report.solution_hash, finished_at),
                created_at=datetime.fromisoformat(finished_at),
            )
        except SkillbaseError as e:
            rec.skipped[item.name] = e.message
            continue
        rec.attempts[item.name] = att.id
    return rec
