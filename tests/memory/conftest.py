"""Fixtures for the memory tests: one embedding model per session, a real
chroma server on loopback, and fresh stores under tmp_path for either backend."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from skillbase.config import Settings

CHROMA_BIN = Path(sys.executable).parent / "chroma"


@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2, loaded once for the whole session."""
    from skillbase.memory.embeddings import Embedder

    e = Embedder()
    e.embed(["warm up"])
    return e


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """URL of a real `chroma run` server on 127.0.0.1 (skipped without the binary)."""
    exe = CHROMA_BIN if CHROMA_BIN.exists() else shutil.which("chroma")
    if not exe:
        pytest.skip("the chroma CLI (shipped with the chromadb wheel) is not installed")
    path = tmp_path_factory.mktemp("chroma-server")
    port = _free_port()
    log_path = path / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(exe), "run", "--path", str(path / "data"), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_heartbeat(url, proc, log_path)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for_heartbeat(url: str, proc: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as r:
                r.read()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"chroma server did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.2)


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
