"""Hostile candidates: each computes a correct ReLU and does one more thing on the side.

Every test checks from outside the jail that the side effect did not happen (or was cut
short) and that the toolchain keeps working. Each hostile action is bounded by the
candidate itself (a fixed number of forks, bytes, seconds), so a containment failure
cannot harm the machine running the tests: it only fails the assertion.
"""

import json
import os
import socket
import subprocess
import textwrap
import threading
import uuid
from pathlib import Path

import pytest

from skillbase.config import Settings
from skillbase.toolchain import Toolchain, limits, sandbox

# The honest ReLU and its task, shared with the toolchain's own tests; each hostile candidate is the ReLU
# with one more thing done at import.
FIXTURES = Path(__file__).resolve().parents[1] / "toolchain" / "fixtures"
RELU = (FIXTURES / "relu_triton.py").read_text()

pytestmark = pytest.mark.skipif(not sandbox.choose("auto").confined,
                                reason="bubblewrap cannot build a jail here (.ci/run installs it)")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A jailed toolchain over a fresh store, a folder outside it with a secret, a sacrificial process."""
    root = tmp_path_factory.mktemp("hostile")
    outside = root / "outside"
    outside.mkdir()
    secret = f"SECRET-{uuid.uuid4().hex}"
    (outside / "secret.txt").write_text(secret)
    settings = Settings.from_env(env={}, home=root / "home", eval_timeout_s=120, sandbox="bwrap",
                                 worker_max_procs=96, worker_tmp_mb=64, worker_disk_mb=64)
    victim = subprocess.Popen(["sleep", "600"])  # what a candidate would try to kill or trace
    with Toolchain(settings) as tc:
        task = tc.load_task(str(FIXTURES / "relu_task.py"))
        yield {"tc": tc, "task": task, "root": root, "outside": outside, "secret": secret, "victim": victim,
               "settings": settings}
    victim.kill()


def _device() -> str:
    """The GPU path where there is a GPU (the device machine runs this file too), else the interpreter."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def run(world, name: str, hostile: str, **fmt):
    """Evaluate a ReLU that first runs ``hostile`` (formatted with ``fmt``) at import."""
    path = world["root"] / f"{name}.py"
    path.write_text("import os, sys\n" + textwrap.dedent(hostile).format(**fmt) + "\n" + RELU)
    tc = world["tc"]
    return tc.benchmark(world["task"], tc.resolve_solution(world["task"], str(path)), _device(), use_cache=False)


def report_text(report) -> str:
    return json.dumps(report.model_dump(mode="json"))


def host_processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry))
            except OSError:
                pass
    return found


def test_killing_its_parent_and_other_processes_harms_nothing(world):
    r = run(world, "kill", """
        import signal
        for pid in (os.getppid(), 1, {victim}):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        """, victim=world["victim"].pid)
    assert r.verdict == "correct", r.message
    assert world["victim"].poll() is None  # the host's process lives on
    assert run(world, "after_kill", "").verdict == "correct"  # and so does the toolchain


def test_the_store_and_the_users_files_cannot_be_written(world):
    store = world["settings"].home
    before = sorted(p.name for p in store.iterdir())
    r = run(world, "writer", """
        for target in ({store!r} + "/planted", {outside!r} + "/planted", os.path.expanduser("~/planted")):
            try:
                open(target, "w").write("x")
            except OSError:
                pass
        """, store=str(store), outside=str(world["outside"]))
    assert r.verdict == "correct", r.message
    assert not (store / "planted").exists() and not (world["outside"] / "planted").exists()
    assert sorted(p.name for p in store.iterdir()) == before


def test_files_outside_cannot_be_read_or_smuggled_out_in_the_error_text(world):
    r = run(world, "smuggle", """
        found = []
        for path in ({secret_file!r}, "/etc/shadow", "/proc/1/environ", "/proc/%d/environ" % os.getppid()):
            try:
                found.append(open(path, "rb").read().decode(errors="replace"))
            except OSError as e:
                found.append(type(e).__name__)
        raise RuntimeError("smuggled: " + " | ".join(found))
        """, secret_file=str(world["outside"] / "secret.txt"))
    assert r.verdict != "correct"  # it raised on purpose
    text = report_text(r)
    assert "smuggled" in text and world["secret"] not in text


def test_the_parents_environment_is_out_of_reach(world, monkeypatch):
    planted = f"tok-{uuid.uuid4().hex}"
    monkeypatch.setenv("PLANTED_VALUE_FOR_TEST", planted)  # in this (the parent's) environment only
    world["tc"].pool.close()  # workers start again under the planted environment
    r = run(world, "environ", """
        out = []
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            try:
                out.append(open(f"/proc/{{pid}}/environ", "rb").read().decode(errors="replace"))
            except OSError:
                pass
        raise RuntimeError("environ: " + " ".join(out) + " " + " ".join(os.environ.values()))
        """)
    assert "environ" in report_text(r) and planted not in report_text(r)


def test_no_network_but_its_own_loopback(world):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(20)
    accepted = []

    def accept():
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    r = run(world, "connect", """
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(b"hello")
        except OSError:
            pass
        """, port=server.getsockname()[1])
    server.close()
    t.join()
    assert r.verdict == "correct", r.message
    assert not accepted


def test_processes_it_leaves_running_are_killed_and_named(world):
    marker = f"{uuid.uuid4().int % 10**6}.5"
    r = run(world, "daemon", """
        import subprocess
        if os.fork() == 0:  # double fork, new session: a daemon
            os.setsid()
            subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
            os._exit(0)
        os.wait()
        """, marker=marker)
    assert r.verdict == "correct", r.message
    assert host_processes_with(f"sleep\0{marker}") == []
    assert any("left running" in n for n in r.notes), r.notes


def test_a_fork_bomb_is_capped_and_cleaned_up(world):
    marker = f"{uuid.uuid4().int % 10**6}.25"
    r = run(world, "forkbomb", """
        import time
        made = 0
        for _ in range(400):  # bounded: a containment failure costs 400 sleeping processes for 30 s
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                try:
                    os.execvp("sleep", ["sleep", "{marker}"])
                finally:
                    os._exit(0)
            made += 1
        raise RuntimeError(f"forked {{made}}")
        """, marker=marker)
    made = int(r.message.split("forked ")[1].split()[0].strip("'\")"))
    if limits.root() is not None or os.geteuid() != 0:
        assert made < 96, r.message
    assert host_processes_with(f"sleep\0{marker}") == []


def test_filling_the_disk_is_stopped(world):
    r = run(world, "fill_tmp", """
        written = 0
        try:
            with open("/tmp/fill", "wb") as f:
                for _ in range(200):  # bounded: 200 MiB
                    f.write(b"x" * (1 << 20))
                    written += 1
        except OSError:
            pass
        if written >= 200:
            raise RuntimeError("wrote 200 MiB to /tmp")
        """)
    assert r.verdict == "correct", r.message  # the private /tmp filled at its 64 MiB and the write failed
    r = run(world, "fill_workdir", """
        import time
        with open("fill", "wb") as f:
            for _ in range(100):  # bounded: 100 MiB on the host's disk, over the worker's 64 MiB quota
                f.write(b"x" * (1 << 20))
        time.sleep(5)
        """)
    assert r.verdict == "crashed" and "disk quota" in r.message, r.message
    assert run(world, "after_fill", "").verdict == "correct"


def test_proc_sys_and_ptrace_show_nothing_of_the_host(world):
    r = run(world, "probe", """
        import ctypes
        leaks = []
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        if len(pids) > 8:
            leaks.append(f"{{len(pids)}} processes visible")
        try:
            if b"sleep" in open("/proc/{victim}/cmdline", "rb").read():
                leaks.append("the host's process is visible")
        except OSError:
            pass
        try:
            open("/sys/kernel/mm/transparent_hugepage/enabled", "w").write("never")
            leaks.append("/sys is writable")
        except OSError:
            pass
        libc = ctypes.CDLL(None, use_errno=True)
        for pid in (1, os.getppid(), {victim}):
            if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
                leaks.append(f"ptrace attached to {{pid}}")
        if leaks:
            raise RuntimeError("LEAK: " + "; ".join(leaks))
        """, victim=world["victim"].pid)
    assert r.verdict == "correct", r.message


def test_compile_caches_are_no_channel_between_candidates(world):
    shared = world["settings"].cache_dir
    r = run(world, "poison", """
        upper = os.environ["TRITON_CACHE_DIR"]
        for target in (os.path.join({shared!r}, "triton", "OTHER", "entry"),
                       os.path.join(os.path.dirname(upper), "OTHER", "entry")):
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                open(target, "w").write("poison")
            except OSError:
                pass
        """, shared=str(shared))
    assert r.verdict == "correct", r.message
    assert not (shared / "triton" / "OTHER").exists()  # not written, and not promoted from its own layer
    if _device() == "cuda":  # the interpreter compiles nothing; on a GPU its own kernels were kept
        assert r.solution_hash in {p.name for p in (shared / "triton").iterdir()}


def test_the_next_candidate_finds_nothing_of_the_last(world):
    secret = world["secret"][::-1]
    assert run(world, "leaver", """
        for path in ("/tmp/left", "left"):
            open(path, "w").write({secret!r})
        """, secret=secret).verdict == "correct"
    r = run(world, "finder", """
        found = []
        for path in ("/tmp/left", "left"):
            try:
                found.append(open(path).read())
            except OSError:
                pass
        raise RuntimeError("found: " + " ".join(found))
        """)
    assert "found" in report_text(r) and secret not in report_text(r)
