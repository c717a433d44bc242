"""Fixtures for the memory tests: one embedding model per session and fresh stores
under tmp_path for either backend (the real chroma server on loopback is tests/conftest.py's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillbase.config import Settings

@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2, loaded once for the whole session."""
    from skillbase.memory.embeddings import Embedder

    e = Embedder()
    e.embed(["warm up"])
    return e


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.chroma_server)])
def backend(request):
    """'embedded' or 'server' (the latter starts the session's chroma server)."""
    if request.param == "server":
        return request.getfixturevalue("chroma_server")
    return None


def _settings(home: Path, url: str | None, **overrides) -> Settings:
    return Settings.from_env(env={}, home=home, chroma_url=url, **overrides)


@pytest.fixture
def make_settings(tmp_path, backend):
    """Settings for a fresh store under tmp_path on the backend in use."""
    return lambda name="home", **overrides: _settings(tmp_path / name, backend, **overrides)


@pytest.fixture
def embedded_settings(tmp_path):
    """Settings for a fresh store with an embedded chroma (no server)."""
    return lambda name="home", **overrides: _settings(tmp_path / name, None, **overrides)


@pytest.fixture
def open_store(embedder):
    """Open a store (sharing the session's model) that is closed after the test."""
    from skillbase.memory.store import Store

    opened = []

    def open_(settings: Settings, **kwargs):
        s = Store.open(settings, embedder=embedder, **kwargs)
        opened.append(s)
        return s

    yield open_
    for s in opened:
        try:
            s.close()
        except Exception:
            pass


def pytest_configure(config):
    config.addinivalue_line("markers", "chroma_server: runs against a real `chroma run` server on loopback")
