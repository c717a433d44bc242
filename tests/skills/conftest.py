"""Fixtures of the skill tests: one embedding model, one seeded store and its embedding cache
per session; fresh stores under tmp_path that reuse the cache so they never embed twice."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from skillbase.config import Settings

SEEDS = Path(__file__).resolve().parents[2] / "seeds" / "skills"


@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2, loaded once."""
    from skillbase.memory.embeddings import Embedder

    e = Embedder()
    e.embed(["warm up"])
    return e


@pytest.fixture(scope="session")
def seed_skills_list():
    """Every seed skill with its example files, read from seeds/skills."""
    from skillbase.skills.seeding import load_seed_skills

    return load_seed_skills(SEEDS, max_bytes=Settings.from_env(env={}, home=Path("/nonexistent")).max_source_bytes)


@pytest.fixture(scope="session")
def seeded_store(tmp_path_factory, embedder):
    """A store holding the 40 seeds, its embedding cache warm for search and dedupe. Read-only for its users."""
    from skillbase.memory.store import Store
    from skillbase.skills.dedupe import find_duplicates
    from skillbase.skills.seeding import seed_skills

    settings = Settings.from_env(env={}, home=tmp_path_factory.mktemp("seeded") / "home")
    store = Store.open(settings, embedder=embedder)
    report = seed_skills(store)
    assert len(report.added) == len(list(SEEDS.glob("*/SKILL.md")))
    find_duplicates(store)  # embeds descriptions and bodies once; open_store copies the cache
    yield store
    store.close()


@pytest.fixture
def open_store(tmp_path, embedder, seeded_store):
    """open_store(name='home') -> a fresh, empty store under tmp_path whose embedding cache starts
    as a copy of the seeded store's (so seeds are never embedded twice)."""
    from skillbase.memory.store import Store

    opened = []

    def open_(name: str = "home"):
        settings = Settings.from_env(env={}, home=tmp_path / name)
        settings.cache_dir.mkdir(parents=True, exist_ok=True)
        _copy_sqlite(seeded_store.settings.cache_dir / "embeddings.sqlite3", settings.cache_dir / "embeddings.sqlite3")
        store = Store.open(settings, embedder=embedder)
        opened.append(store)
        return store

    yield open_
    for s in opened:
        s.close()


def _copy_sqlite(src: Path, dst: Path) -> None:
    # The backup API copies a consistent snapshot, WAL included, while the source stays open.
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()
