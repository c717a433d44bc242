"""skillbase works outside the repository: the wheel built from this checkout holds one
top-level package, ``skillbase``; installed into a fresh target folder it runs ``init``,
``recall``, a CPU ``bench`` and an MCP ``serve`` session from a directory outside the
checkout, with the seeds read from the installed package.

The wheel's dependencies come from this test's own environment: the processes run with
``python -S`` (no site-packages, no .pth files, so the checkout's editable install is
never loaded) and ``PYTHONPATH=<target>:<this environment's site-packages>``. A probe
checks that every ``skillbase`` module comes from the target and that the bare names
``memory``, ``retrievers``, ``mcp_server`` and ``seeds`` import nothing; a marker line
written into one installed SKILL.md proves ``init`` read the installed seeds.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest
import yaml
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation

from skillbase.tools import TOOLS

ROOT = Path(__file__).resolve().parents[2]
# What a build must not copy: environments, build outputs, caches, local stores.
NOT_SOURCE = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".pytest_cache",
              ".demo-home", ".gpu-home", ".carry", ".whl", "out", "node_modules")
BARE_NAMES = ("memory", "retrievers", "mcp_server", "seeds")
MARKED_SKILL = "coalesced-memory-access"
MARKER = "Installed-copy marker: this sentence exists only in the wheel the test installed."
PROBE = """
import importlib.util, json, sys
import skillbase.console, skillbase.api, skillbase.mcp_server.server, skillbase.memory.store
import skillbase.retrievers.retriever, skillbase.seeds, skillbase.demo
from skillbase.config import Settings
demo_args = skillbase.demo._server_params(Settings.from_env()).args
print(json.dumps({
    "files": {n: getattr(m, "__file__", None) for n, m in sys.modules.items() if n.split(".")[0] == "skillbase"},
    "seeds": str(skillbase.seeds.SEEDS_DIR),
    "bare": {n: importlib.util.find_spec(n) is not None for n in %r},
    "demo_server": importlib.util.find_spec(demo_args[demo_args.index("-m") + 1]) is not None,
}))
""" % (BARE_NAMES,)


def _build_wheel(out: Path) -> Path:
    """The wheel of a copy of the checkout (a build writes build/ and egg-info beside the sources)."""
    src = out / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    wheels = out / "wheels"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(wheels), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "would be ignored" not in proc.stderr, f"setuptools warns about the package layout:\n{proc.stderr[-3000:]}"
    (wheel,) = wheels.glob("skillbase-*.whl")
    return wheel


def _dependency_paths() -> list[str]:
    """This environment's site-packages, where the wheel's dependencies are installed."""
    paths = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return list(dict.fromkeys(p for p in paths if Path(p).is_dir()))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """The wheel installed into a fresh target; the environment and folder to run it from."""
    base = tmp_path_factory.mktemp("installed")
    assert ROOT not in base.parents, "the test must run outside the checkout"
    wheel = _build_wheel(base)
    with zipfile.ZipFile(wheel) as z:
        top = {name.split("/")[0] for name in z.namelist()}
    target = base / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                           str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    skill_md = target / "skillbase" / "seeds" / "skills" / MARKED_SKILL / "SKILL.md"
    skill_md.write_text(skill_md.read_text(encoding="utf-8").rstrip() + f"\n\n{MARKER}\n", encoding="utf-8")

    outside = base / "elsewhere"
    outside.mkdir()
    drop = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLBASE_") and k not in drop}
    env.update(SKILLBASE_HOME=str(outside / "store"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_HUB_DISABLE_PROGRESS_BARS="1", PYTHONPATH=os.pathsep.join([str(target), *_dependency_paths()]))
    return {"wheel": wheel, "top": top, "target": target, "outside": outside, "env": env,
            "script": target / "bin" / "skillbase"}


def _run(installed: dict, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", *args], cwd=installed["outside"], env=installed["env"],
                          capture_output=True, text=True, timeout=timeout)


class Cli:
    """One ``skillbase ... --json`` process of the installed package, started now, read later."""

    def __init__(self, installed: dict, *args: str):
        self.args, self.dir = args, installed["outside"]
        self.out, self.err = (open(self.dir / f"{args[0]}.{kind}", "w+") for kind in ("out", "err"))
        self.proc = subprocess.Popen([sys.executable, "-S", str(installed["script"]), *args, "--json"],
                                     cwd=self.dir, env=installed["env"], stdout=self.out, stderr=self.err)

    def result(self, timeout: float = 240) -> dict:
        """Wait for it; its JSON result, after checking it exited 0 and names no path in the checkout."""
        code = self.proc.wait(timeout)
        self.out.seek(0), self.err.seek(0)
        stdout, stderr = self.out.read(), self.err.read()
        self.out.close(), self.err.close()
        assert code == 0, f"skillbase {' '.join(self.args)} exited {code}:\n{stderr[-3000:]}"
        assert str(ROOT) not in stdout, f"skillbase {self.args[0]} reports a path in the checkout"
        return json.loads(stdout)

    def stop(self) -> None:
        """Kill it if it still runs (a failed test leaves no process behind)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


async def _serve_session(installed: dict, bench: Cli) -> dict:
    """An MCP session with ``skillbase serve`` (stdio), while ``bench`` runs in its own process;
    attempt_history is asked once the bench is done."""
    params = StdioServerParameters(command=sys.executable, args=["-S", str(installed["script"]), "serve"],
                                   env=installed["env"], cwd=str(installed["outside"]))
    out: dict = {}
    async with AsyncExitStack() as stack:
        errlog = stack.enter_context(open(installed["outside"] / "serve.log", "w"))
        read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        session = await stack.enter_async_context(
            ClientSession(read, write, client_info=Implementation(name="installed-test", version="0")))
        await session.initialize()
        out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
        calls = [("load_task", {"task": "relu"}), ("get_skill", {"name": MARKED_SKILL}),
                 ("attempt_history", {"task": "relu"})]
        for tool, arguments in calls:
            if tool == "attempt_history":
                out["bench"] = await anyio.to_thread.run_sync(bench.result)
            result = await session.call_tool(tool, arguments)
            assert not result.is_error, f"{tool}: {result.content[0].text}"
            out[tool] = result.structured_content
    return out


def test_every_package_folder_is_listed_in_pyproject():
    """Under a package-dir mapping setuptools discovers nothing: a package folder missing from
    pyproject's list is missing from the wheel, and the installed command fails to import it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = set()
    for package, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            if package == "skillbase.seeds" and rel[:1] in (("tasks",), ("skills",)):
                continue  # seed data: standalone modules shipped as package-data
            found.add(".".join([package, *rel]))
    assert found - set(config["packages"]) == set(), "add these to [tool.setuptools] packages"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_wheel_installs_one_package_and_works_outside_the_checkout(installed):
    target = installed["target"]
    assert installed["top"] == {"skillbase", installed["wheel"].name.split("-py")[0] + ".dist-info"}, installed["top"]
    assert sorted(p.name for p in target.iterdir() if p.name != "bin") == sorted(installed["top"])

    # Every skillbase module comes from the target; the bare names are gone.
    probe = _run(installed, "-c", PROBE)
    assert probe.returncode == 0, probe.stderr[-3000:]
    seen = json.loads(probe.stdout)
    assert seen["bare"] == dict.fromkeys(BARE_NAMES, False)
    assert seen["demo_server"], "skillbase demo starts a server module that is not installed"
    assert Path(seen["seeds"]) == target / "skillbase" / "seeds"
    stray = {n: f for n, f in seen["files"].items() if f and not Path(f).is_relative_to(target)}
    assert not stray, f"modules loaded from outside the installed package: {stray}"

    # init seeds from the installed package: every skill, experience and technique it ships.
    seeds = target / "skillbase" / "seeds"
    report = Cli(installed, "init").result()
    assert report["home"] == str(installed["outside"] / "store")
    assert report["skills_total"] == len(list(seeds.glob("skills/*/SKILL.md"))) >= 40
    assert report["techniques"] == len(yaml.safe_load((seeds / "techniques.yaml").read_text()))
    lines = [json.loads(line) for name in ("experiences.jsonl", "campaign.jsonl")
             for line in (seeds / name).read_text().splitlines() if line.strip()]
    records = [r for r in lines if "kind" in r]  # the first line is the format header
    experiences = {r["record"]["id"] for r in records if r["kind"] == "experience"}
    assert report["records_imported"] == len(records) and report["experiences_total"] == len(experiences) > 0

    # Then three processes share the store at once, as agents would: a recall, a CPU bench
    # and an MCP session that, once the bench is done, finds its attempt.
    recall = Cli(installed, "recall", "relu", "-k", "5")
    bench = Cli(installed, "bench", "relu", "optimized", "--device", "cpu")
    try:
        served = anyio.run(_serve_session, installed, bench)
        recalled = recall.result()
    finally:
        recall.stop(), bench.stop()

    assert any(i["kind"] == "experience" and i["id"] in experiences for i in recalled["items"]), recalled["items"]
    assert any(i["kind"] == "skill" for i in recalled["items"])
    checked = served["bench"]["report"]
    assert checked["verdict"] == "correct" and checked["device"] == "cpu", checked["message"]
    assert served["tools"] == sorted(t.name for t in TOOLS)
    info = served["load_task"]["summary"]["info"]
    assert Path(info["path"]) == seeds / "tasks" / "relu" / "task.py"
    assert all(Path(p).is_relative_to(seeds / "tasks" / "relu") for p in info["solutions"].values())
    assert MARKER in served["get_skill"]["skill"]["body"]
    assert served["attempt_history"]["attempts"][-1]["id"] == served["bench"]["attempt_id"]  # after the seeded ones
    assert str(ROOT) not in json.dumps(served)


def test_the_wheel_carries_the_web_uis_templates_and_static_files(installed):
    ui = installed["target"] / "skillbase" / "ui"
    for name in ("templates/base.html", "templates/task.html", "static/ui.js", "static/ui.css"):
        assert (ui / name).is_file(), name
