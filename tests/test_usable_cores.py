"""Pools sized from the cores a process may use, not from the host's count: a server in a container
given 2 CPUs of a 64-core host (a cpuset, or a CPU quota) must size its threads for 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROBE = (
    "import json, os\n"
    "from skillbase.config import Settings, usable_cores, default_embedding_threads\n"
    "from skillbase.toolchain.pool import worker_env\n"
    "settings = Settings.from_env(env={}, home=os.environ['PROBE_HOME'])\n"
    "print(json.dumps({'cores': usable_cores(), 'host': os.cpu_count(), 'embedding': default_embedding_threads(),\n"
    "                  'max_jobs': worker_env(settings, 'cpu', None, base={})['MAX_JOBS']}))\n"
)


def _probe(tmp_path, cpus: set[int] | None = None, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k not in ("LOKY_MAX_CPU_COUNT", "MAX_JOBS")}
    full.update(PROBE_HOME=str(tmp_path / "home"), PYTHONPATH=ROOT, **env)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=full, capture_output=True, text=True, timeout=120,
                         preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_a_process_pinned_to_one_core_sizes_its_pools_for_one(tmp_path):
    free = _probe(tmp_path)
    assert free["cores"] == len(os.sched_getaffinity(0)) and free["max_jobs"] == str(free["cores"])
    one = _probe(tmp_path, cpus={min(os.sched_getaffinity(0))})
    assert one["host"] == os.cpu_count()  # the host's count does not change with the affinity
    assert (one["cores"], one["embedding"], one["max_jobs"]) == (1, 1, "1"), one


def test_a_lower_cpu_limit_in_the_environment_is_kept(tmp_path):
    """LOKY_MAX_CPU_COUNT (the limit joblib's process pools read) lowers the count as a quota would."""
    got = _probe(tmp_path, LOKY_MAX_CPU_COUNT="1")
    assert (got["cores"], got["max_jobs"]) == (1, "1"), got

