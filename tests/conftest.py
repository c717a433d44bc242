"""Shared fixtures. Every test that needs a store builds a fresh one in tmp_path."""

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

CHROMA_BIN = Path(sys.executable).parent / "chroma"

# Offline always: no model or data set is fetched at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

# Tests write only inside temporary directories: a test that reaches for the default store (no --home,
# no SKILLBASE_HOME of its own) gets a throwaway one, never the user's ~/.skillbase; the session fails
# if ~/.skillbase appears anyway (see pytest_sessionfinish).
_USER_STORE = Path.home() / ".skillbase"
_USER_STORE_BEFORE = _USER_STORE.exists()
if "SKILLBASE_HOME" not in os.environ:
    os.environ["SKILLBASE_HOME"] = tempfile.mkdtemp(prefix="skillbase-test-home-")
    atexit.register(shutil.rmtree, os.environ["SKILLBASE_HOME"], True)


def pytest_sessionfinish(session, exitstatus):
    if not _USER_STORE_BEFORE and _USER_STORE.exists():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\na test wrote the user's store {_USER_STORE}: tests write only inside temporary directories")


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def settings(tmp_path):
    """Settings pointing at an empty store under tmp_path."""
    from skillbase.config import Settings

    return Settings.from_env(env={}, home=tmp_path / "home")


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
