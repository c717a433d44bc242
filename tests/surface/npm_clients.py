"""Real MCP clients from npm for the end-to-end tests: the ``claude`` CLI (Claude Code) and
the MCP Inspector CLI, each installed once into a cache folder and reused.

The cache is ``$SKILLBASE_NPM_CACHE`` (default ``~/.cache/skillbase-tests/npm``), one
prefix per package and version, so a second run installs nothing. A test that needs a
client is skipped, with the reason, when npm is missing or the registry cannot be
reached; any other install failure fails the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

# Pinned so that a run is reproducible; the figures in docs/performance.md name these versions.
CLAUDE_CODE = ("@anthropic-ai/claude-code", os.environ.get("SKILLBASE_CLAUDE_CODE_VERSION", "2.1.330"))
INSPECTOR_CLI = ("@modelcontextprotocol/inspector-cli", os.environ.get("SKILLBASE_INSPECTOR_VERSION", "1.0.3"))
INSTALL_TIMEOUT_S = 300


def cache_dir() -> Path:
    """Where npm packages for the tests are installed."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "skillbase-tests" / "npm"
    return Path(os.environ.get("SKILLBASE_NPM_CACHE") or default)


def npm_package(package: tuple[str, str]) -> Path:
    """The install folder of ``package`` (name, version): ``<prefix>/node_modules/<name>``.

    Installs it on first use; skips the calling test when npm or the registry is unavailable.
    """
    name, version = package
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not on PATH: cannot install {name}@{version} (install Node.js and npm to run this test)")
    prefix = cache_dir() / f"{name.replace('/', '+')}@{version}"
    installed = prefix / "node_modules" / name
    prefix.mkdir(parents=True, exist_ok=True)
    with FileLock(str(prefix) + ".lock"):
        if not (installed / "package.json").is_file():
            _install(npm, prefix, f"{name}@{version}")
    return installed


def claude_binary() -> Path:
    """The ``claude`` executable of the pinned Claude Code release."""
    return npm_package(CLAUDE_CODE).parents[1] / ".bin" / "claude"


def inspector_cli() -> Path:
    """The Inspector CLI's entry script. Run it with ``node`` from the script's own folder:
    it looks for its package.json relative to the working directory."""
    return npm_package(INSPECTOR_CLI) / "build" / "index.js"


def _install(npm: str, prefix: Path, spec: str) -> None:
    cmd = [npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix", str(prefix), spec]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm install {spec} took over {INSTALL_TIMEOUT_S} s (registry unreachable or slow?)")
    if proc.returncode == 0:
        return
    tail = (proc.stderr or proc.stdout).strip()[-600:]
    if not _registry_reachable(npm):
        pytest.skip(f"the npm registry is unreachable, so {spec} cannot be installed: {tail}")
    raise AssertionError(f"npm install {spec} failed although the registry answers:\n{tail}")


def _registry_reachable(npm: str) -> bool:
    try:
        return subprocess.run([npm, "ping"], capture_output=True, timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False
