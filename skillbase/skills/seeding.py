"""Load the seed playbook (``seeds/skills/<name>/``) into a Store, idempotently.

``seed_skills(store)`` is what ``skillbase init`` runs for skills: every seed
folder is read and validated first (nothing is written if one is bad), then
each skill is stored. Re-running adds no version for unchanged seeds, adds a
version for seeds that changed upstream, and never overwrites a skill that a
curator or agent has changed since it was seeded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from skillbase.errors import NotFound
from skillbase.models import Record, Skill
from skillbase.skills.files import SKILL_FILE
from skillbase.skills.markdown import read_skill_dir

if TYPE_CHECKING:
    from skillbase.memory.store import Store

SEED_AUTHOR = "skillbase-seeds"


class SeedReport(Record):
    """What seeding did to each skill."""

    added: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    kept: list[str] = []  # changed by someone else since seeding: left alone


def load_seed_skills(seeds_dir: Path, *, max_bytes: int) -> list[Skill]:
    """Every skill folder under ``seeds_dir``, with its example files, all validated (InvalidInput otherwise)."""
    folders = sorted(p.parent for p in Path(seeds_dir).glob(f"*/{SKILL_FILE}"))
    if not folders:
        raise NotFound(f"no seed skills under {str(seeds_dir)!r}", hint=f"expected <name>/{SKILL_FILE} folders")
    return [read_skill_dir(f, max_bytes=max_bytes) for f in folders]


def _latest_author(store: "Store", name: str) -> str | None:
    try:
        return store.skill_history(name)[-1].author
    except NotFound:
        return None


def seed_skills(store: "Store", seeds_dir: Path | None = None, *, author: str = SEED_AUTHOR) -> SeedReport:
    """Store every seed skill (default: the packaged ``seeds/skills``); see the module docstring."""
    from skillbase.memory.documents import TEXT_MAX_TOKENS, skill_text
    from skillbase.skills.curation import prepare

    if seeds_dir is None:
        from skillbase import seeds

        seeds_dir = seeds.SKILLS_DIR
    skills = [prepare(store, s) for s in load_seed_skills(seeds_dir, max_bytes=store.settings.max_source_bytes)]
    # One batch through the model instead of one call per skill as each is indexed.
    store.embedder.embed([skill_text(s) for s in skills], max_tokens=TEXT_MAX_TOKENS)
    report = SeedReport()
    for skill in skills:
        last = _latest_author(store, skill.name)
        if last is not None and last != author:
            report.kept.append(skill.name)
            continue
        before = store.get_skill(skill.name).version if last is not None else 0
        stored = store.put_skill(skill, author=author, reason=f"seeded from seeds/skills/{skill.name}")
        bucket = report.added if before == 0 else report.updated if stored.version != before else report.unchanged
        bucket.append(skill.name)
    return report
