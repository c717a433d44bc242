"""Ray as the evaluation back end, on a real two-node local cluster (``ray.cluster_utils.Cluster``):
the same verdicts as the local pool, an actor killed mid-run loses nothing, a candidate that kills
its actor is reported, and without Ray ``--ray`` says how to install it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "seeds" / "tasks"
KB_LIKE = Path(__file__).resolve().parent / "kb_like"
ADVERSARIAL = ROOT / "tests" / "adversarial"

# Kills the process that runs its worker: on Ray, the actor (the local pool's equivalent is the server).
KILLS_ITS_PARENT = """
import os, signal
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        os.kill(os.getppid(), signal.SIGKILL)
        return x
"""


def env_for(home: Path) -> dict[str, str]:
    return {**os.environ, "SKILLBASE_HOME": str(home), "HF_HUB_OFFLINE": "1", "SKILLBASE_CPU_SHAPE_MB": "2"}


@pytest.fixture(scope="module")
def cluster():
    """A head node and a second node, one CPU each: two CPU evaluation actors, one per node."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    try:
        yield c
    finally:
        c.shutdown()


@pytest.fixture
def kb_run(tmp_path) -> tuple[Path, Path]:
    """A KernelBench-layout checkout (two problems) and a run directory of five candidates."""
    level1 = tmp_path / "kb" / "KernelBench" / "level1"
    level1.mkdir(parents=True)
    shutil.copy(SEEDS / "relu" / "task.py", level1 / "2_relu.py")
    shutil.copy(KB_LIKE / "matmul_task.py", level1 / "3_matmul.py")
    run = tmp_path / "run"
    run.mkdir()
    for name, src in {"level_1_problem_2_sample_0_kernel.py": SEEDS / "relu" / "optimized.py",
                      "level_1_problem_2_sample_1_kernel.py": ADVERSARIAL / "no_own_kernel.py",
                      "level_1_problem_3_sample_0_kernel.py": KB_LIKE / "honest_matmul.py",
                      "level_1_problem_3_sample_1_kernel.py": KB_LIKE / "zero_out.py",
                      "level_1_problem_3_sample_2_kernel.py": KB_LIKE / "result_reuse.py"}.items():
        shutil.copy(src, run / name)
    return tmp_path / "kb", run


def eval_actors() -> dict[int, str]:
    """pid -> process title of every evaluation actor on this machine (Ray titles them ray::Class[.method])."""
    found = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                title = (d / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            if title.startswith("ray::EvalActor"):
                found[int(d.name)] = title
    return found


def children(pid: int) -> list[int]:
    try:
        return [int(p) for t in Path(f"/proc/{pid}/task").iterdir()
                for p in (t / "children").read_text().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().split()[2]) != "Z"
    except OSError:
        return False


def rows_of(report: dict) -> dict[str, tuple]:
    return {r["name"]: (r["verdict"], tuple(sorted(r.get("failed_checks") or []))) for r in report["rows"]}


@pytest.mark.slow
def test_two_node_cluster_gives_the_local_pools_verdicts_and_an_actor_killed_mid_run_loses_nothing(
        tmp_path, cluster, kb_run):
    kb, run = kb_run
    ray_run = tmp_path / "ray_run"
    shutil.copytree(run, ray_run)
    suite = [sys.executable, "-m", "skillbase.suite", "run"]
    common = ["--kernelbench", str(kb), "--device", "cpu", "--no-record", "--json"]

    proc = subprocess.Popen([*suite, str(ray_run), *common, "--ray", cluster.address], env=env_for(tmp_path / "h2"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = ray_run / ".skillbase" / "results"
    killed, orphans, before = None, [], {}
    deadline = time.monotonic() + 240
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        busy = {p: t for p, t in eval_actors().items() if t.startswith("ray::EvalActor.request")}
        if list(results.glob("*.json")) and busy:  # warm, and one actor is serving a request right now
            before = eval_actors()
            killed = next(iter(busy))
            orphans = children(killed)  # its sandboxed worker, evaluating a candidate
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    out, errs = proc.communicate(timeout=300)
    assert killed is not None, "the kill was meant to land while an actor served a request"
    assert proc.returncode == 0, errs[-3000:]
    on_ray = json.loads(out)

    local = subprocess.run([*suite, str(run), *common, "--workers", "1"], env=env_for(tmp_path / "h1"),
                           capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr[-3000:]
    on_host = json.loads(local.stdout)

    assert on_ray["complete"] and len(on_ray["rows"]) == 5 and not on_ray["left"]
    assert rows_of(on_ray) == rows_of(on_host)
    verdicts = {name.removeprefix("level_1_problem_"): v for name, (v, _) in rows_of(on_ray).items()}
    assert verdicts == {"2_sample_0_kernel": "correct", "2_sample_1_kernel": "rejected", "3_sample_0_kernel": "correct",
                        "3_sample_1_kernel": "rejected", "3_sample_2_kernel": "rejected"}

    # Both nodes evaluated; the request the dead actor held ran again on the actor Ray started in its place.
    notes = [n for r in on_ray["rows"] for n in r.get("notes") or [] if "Ray actor" in n]
    assert len({n.split("node id ")[1].split(")")[0] for n in notes}) == 2
    pids = {int(n.rsplit("actor pid ", 1)[1]) for n in notes}
    assert pids - set(before), "a restarted actor served the retried request"
    assert orphans and not any(alive(p) for p in orphans), "the killed actor's worker died with it"


# The driver's side of a Ray client, in a process of its own: joining a cluster installs Ray's own
# crash-signal handlers in that process and leaves them after ray.shutdown(), so in the test process
# a later crash anywhere in the run would die without faulthandler's traceback (it did: a silent
# SIGSEGV further on, in three runs of five).
KILLED_ACTOR_CLIENT = """
import json, sys
from pathlib import Path
from skillbase.config import Settings
from skillbase.toolchain import Toolchain

home, address, killer, sandbox = sys.argv[1:5]
settings = Settings.from_env(env={}, home=Path(home), ray_address=address, eval_timeout_s=120, sandbox=sandbox)
with Toolchain(settings) as tc:
    task = tc.load_task("relu")
    names = tc.worker_names("cpu")
    bad = tc.benchmark(task, tc.resolve_solution(task, killer), "cpu", use_cache=False)
print(json.dumps({"names": names, "verdict": bad.verdict, "message": bad.message}))
"""


def _killer_run(tmp_path, cluster, sandbox: str) -> dict:
    killer = tmp_path / "kills_parent.py"
    killer.write_text(KILLS_ITS_PARENT)
    proc = subprocess.run([sys.executable, "-c", KILLED_ACTOR_CLIENT, str(tmp_path / f"home-{sandbox}"),
                           cluster.address, str(killer), sandbox], env=env_for(tmp_path / f"home-{sandbox}"),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_candidate_that_kills_its_actor_is_reported_crashed(tmp_path, cluster):
    # Unconfined (the sandbox off), the candidate's kill reaches its actor's worker.
    out = _killer_run(tmp_path, cluster, "off")
    assert out["names"] == ["cpu", "cpu:1"]  # one interpreter actor per node
    # Ray restarted the actor and ran the request again once; it died again: a verdict, not a loss.
    assert out["verdict"] == "crashed" and "died twice" in out["message"], out["message"]


@pytest.mark.slow
def test_in_the_jail_a_candidate_cannot_kill_its_actor(tmp_path, cluster):
    from skillbase.toolchain import sandbox

    if not sandbox.choose("auto").confined:
        pytest.skip("bubblewrap cannot build a jail here")
    out = _killer_run(tmp_path, cluster, "bwrap")
    # Its parent inside the jail is the jail's own init: the kill is ignored and the candidate is judged
    # on what it computes (it returns its input, an alias), with no actor lost.
    assert out["verdict"] == "rejected" and "died" not in out["message"], out["message"]


BLOCK_RAY = """
import sys, importlib.abc
class NoRay(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "ray":
            raise ModuleNotFoundError("No module named 'ray'", name="ray")
sys.meta_path.insert(0, NoRay())
sys.argv = ["skillbase", *sys.argv[1:]]
from skillbase.console import main
main()
"""


def test_without_ray_installed_ray_says_how_to_install_it(tmp_path):
    script = tmp_path / "noray.py"
    script.write_text(BLOCK_RAY)
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(SEEDS / "relu" / "optimized.py", run / "relu_v1.py")
    (run / "manifest.json").write_text(json.dumps({"candidates": [{"name": "a", "file": "relu_v1.py",
                                                                   "task": "relu"}]}))
    for args in (["suite", "run", str(run), "--device", "cpu", "--no-record", "--ray", "127.0.0.1:1"],
                 ["serve", "--ray", "127.0.0.1:1"]):
        r = subprocess.run([sys.executable, str(script), *args], env=env_for(tmp_path / "home"),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 4, (args, r.stderr[-2000:])
        assert "pip install 'skillbase[ray]'" in " ".join(r.stderr.split()), r.stderr
    # The rest works without it: only the Ray back end imports ray, and only when an address is given.
    r = subprocess.run([sys.executable, str(script), "tools", "--json"], env=env_for(tmp_path / "home"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout), r.stderr[-2000:]
    importers = [p.relative_to(ROOT) for d in ("skillbase", "memory", "retrievers", "mcp_server")
                 for p in (ROOT / d).rglob("*.py") if re.search(r"^\s*(import ray|from ray)", p.read_text(), re.M)]
    assert importers == [Path("skillbase/toolchain/ray_pool.py")]


def test_single_requests_lease_an_idle_actor_each_and_wait_when_all_are_busy(tmp_path):
    pytest.importorskip("ray")
    import threading

    from skillbase.config import Settings
    from skillbase.toolchain.ray_pool import RayBackend

    backend = RayBackend(Settings.from_env(env={}, home=tmp_path, ray_address="127.0.0.1:1"))  # never joined
    names = ["cuda:0", "cuda:1"]
    got: list[str] = []

    def third() -> None:
        with backend.lease(names) as n:
            got.append(n)

    with backend.lease(names) as a, backend.lease(names) as b:
        assert {a, b} == set(names)
        waiter = threading.Thread(target=third)
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive() and not got  # both actors busy: the third request waits
    waiter.join(5)
    assert got and got[0] in names
