"""The OS-level jail every worker runs in: Linux namespaces through bubblewrap.

A worker runs untrusted code: the candidate, and the task's reference (a task file is code
an agent may write too). ``bwrap`` starts it with its own PID, network, mount, IPC, UTS and
cgroup namespaces (and a user namespace where the kernel allows one), no capabilities, and
a root file system built only of:

- read-only: ``/usr`` and the merged-usr links, a short list of ``/etc`` files the dynamic
  loader, compilers (``/etc/alternatives``) and name lookups need, ``/opt`` (CUDA, Nsight and
  Python installs live there), the Python installation(s) running skillbase, and skillbase's
  own package folder; the shared compile caches, so that candidates load finished kernels
  without being able to change them (``layered_cache``);
- writable: the worker's own folder (its cwd, ``HOME`` and the compile caches' writable
  layer), removed when the worker stops, and a private ``/tmp`` on a size-limited tmpfs;
- ``/proc`` of its own PID namespace (no other process is visible), a minimal ``/dev``, and
  on a GPU worker the NVIDIA device nodes; ``/sys`` read-only (CUDA and NVML find the GPU
  there).

Nothing else is mounted: not the store, the server's files, the user's home, other
workers' folders. The network namespace has only its own loopback. ``--die-with-parent``
and the PID namespace end every process the worker started when the worker ends.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# /etc entries a jailed Python, compiler and CUDA need; everything else in /etc stays out.
ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "nsswitch.conf",
    "passwd",
    "group",
    "localtime",
    "host.conf",
    "hosts",
)
MERGED_USR = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
NVIDIA_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


@dataclass(frozen=True)
class Jail:
    """How this host confines workers: ``bwrap`` (namespaces) or ``none`` (and why not)."""

    kind: str
    path: str | None = None
    reason: str = ""

    @property
    def confined(self) -> bool:
        return self.kind == "bwrap"


@functools.cache
def _probe(bwrap: str) -> str | None:
    """None when ``bwrap`` can build a jail here, else what went wrong."""
    try:
        out = subprocess.run(
            [
                bwrap,
                "--unshare-all",
                "--die-with-parent",
                "--cap-drop",
                "ALL",
                "--ro-bind",
                "/usr",
                "/usr",
                *_usr_links(),
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "true",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{bwrap} could not run: {e}"
    return None if out.returncode == 0 else (out.stderr.strip() or f"exit status {out.returncode}")


def choose(mode: str) -> Jail:
    """The jail for ``mode`` (Settings.sandbox): ``auto`` uses bubblewrap where it works here,
    ``bwrap`` insists on it, ``off`` runs workers unconfined."""
    if mode == "off":
        return Jail("none", reason="the sandbox is turned off (SKILLBASE_SANDBOX=off)")
    path = shutil.which("bwrap")
    problem = "bubblewrap (bwrap) is not installed" if path is None else _probe(path)
    if problem is None:
        return Jail("bwrap", path)
    if mode == "bwrap":
        from skillbase.errors import ToolchainUnavailable

        raise ToolchainUnavailable(
            f"the sandbox cannot start: {problem}",
            hint="install bubblewrap (Debian: apt-get install bubblewrap) on a kernel that "
            "allows namespaces, or set SKILLBASE_SANDBOX=auto to fall back",
        )
    return Jail("none", reason=problem)


def _usr_links() -> list[str]:
    """The merged-usr links (/bin -> usr/bin...) as they are on the host."""
    out = []
    for name in MERGED_USR:
        p = Path("/") / name
        if p.is_symlink():
            out += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            out += ["--ro-bind", str(p), str(p)]
    return out


def python_roots(pythonpath: list[str] = ()) -> list[Path]:
    """The folders a jailed interpreter must read: its installation, its virtual environment, the
    site-packages folders on its path, ``pythonpath`` (the worker's PYTHONPATH: wheels installed with
    --target on a GPU box) and skillbase's own package (an editable install's source folder)."""
    package = Path(__file__).resolve().parents[1]  # skillbase/
    # The interpreter's own folder too: a virtual environment's python is a link there even when the
    # process runs with another prefix (a --target install run by that python).
    roots = {
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.exec_prefix),
        Path(sys.executable).absolute().parent,
        Path(os.path.realpath(sys.executable)).parent.parent,
        package,
    }
    roots.update(Path(p) for p in sys.path if p and ("site-packages" in p or "dist-packages" in p))
    # The repository root on the path would show the whole checkout (and a store kept in it): its
    # skillbase folder, mounted above, is all a worker imports from it.
    roots.update(Path(p) for p in pythonpath if p and Path(p).resolve() != package.parent)
    return sorted({r.resolve() for r in roots if r.exists()}, key=lambda r: (len(r.parts), str(r)))


def _minimal(roots: list[Path]) -> list[Path]:
    """Drop every root inside another root (it is already mounted)."""
    out: list[Path] = []
    for r in roots:
        if not any(r == o or o in r.parents for o in out):
            out.append(r)
    return out


def argv(
    jail: Jail,
    cmd: list[str],
    *,
    workdir: Path,
    readonly: list[Path],
    gpu: bool,
    pythonpath: list[str] = (),
    tmp_bytes: int = 2 << 30,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The command line that runs ``cmd`` in the jail, with ``workdir`` its only writable folder and a
    private /tmp of ``tmp_bytes``. ``readonly`` are the shared caches' folders; ``gpu`` adds the NVIDIA
    device nodes."""
    if not jail.confined:
        return cmd
    a = [
        jail.path,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/usr",
        "/usr",
        *_usr_links(),
    ]
    for name in ETC:
        a += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    a += [
        "--ro-bind-try",
        "/opt",
        "/opt",
        "--ro-bind",
        "/sys",
        "/sys",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        "/tmp",
    ]
    for root in _minimal(python_roots(pythonpath)):
        if not str(root).startswith(("/usr/", "/opt/")) and str(root) not in ("/usr", "/opt"):
            a += ["--ro-bind", str(root), str(root)]
    for root in readonly:
        Path(root).mkdir(parents=True, exist_ok=True)
        a += ["--ro-bind", str(root), str(root)]
    if gpu:
        for dev in sorted(Path("/dev").glob("nvidia[0-9]*")) + [Path("/dev") / d for d in NVIDIA_DEVICES]:
            a += ["--dev-bind-try", str(dev), str(dev)]
        if Path("/dev/nvidia-caps").is_dir():
            a += ["--dev-bind", "/dev/nvidia-caps", "/dev/nvidia-caps"]
    if seccomp_fd is not None:
        a += ["--seccomp", str(seccomp_fd)]
    a += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir), "--"]
    return a + cmd


def tree_bytes(path: Path) -> int:
    """Bytes in the files under ``path`` (what a worker wrote: its disk quota is checked on it)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total
