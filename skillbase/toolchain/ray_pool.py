"""Ray as the evaluation back end of the pool: the same sandboxed worker, on every GPU of a cluster.

With ``settings.ray_address`` set, the Toolchain gives its pool a ``RayBackend``, and
``Pool.get("cuda:N")`` returns a ``RayWorker`` instead of a local process: a proxy for the N-th of the
cluster's ``EvalActor`` s, one per GPU (``num_gpus=1``, so Ray places one on every GPU of every node),
or, for ``cpu`` / ``cpu:N``, one per CPU slot (the Triton interpreter, for clusters without GPUs).
Each actor owns one ``pool.Worker``: the same subprocess, rlimits, scrubbed environment, checks and
timing rules as a local worker, kept warm between requests. The facade hardly changes: it builds each
request and turns the reply into a report that the one server records. Only the pipe is longer, so
the task's source travels with the request, and the report carries the node's versions and GPU.

Failures surface as they do locally. A candidate that kills or hangs its worker is a ``WorkerDied``
on the actor, sent back as data and raised here (verdict ``crashed`` / ``timeout``; the actor starts
a fresh worker for the next candidate). An actor that dies itself (its node lost, its process killed)
is restarted by Ray (``max_restarts=-1``) and the request it was serving runs again once on the new
actor (``max_task_retries=1``); when that dies too, the candidate is reported ``crashed`` with the
reason. No request is ever dropped.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import signal
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from skillbase.config import Settings
from skillbase.errors import ToolchainUnavailable
from skillbase.toolchain.cache import toolchain_versions
from skillbase.toolchain.pool import STARTUP_TIMEOUT_S, Worker, WorkerDied

INSTALL_HINT = (
    "install the extra on the server and on every node of the cluster: pip install 'skillbase[ray]' "
    "(Ray 2.x); or leave out --ray to evaluate on this host's GPUs"
)
# On top of a request's own limit: the actor may first have to be placed and start its worker.
_GET_MARGIN_S = STARTUP_TIMEOUT_S + 60.0
_PR_SET_PDEATHSIG = 1
# Local CPU pools use min(2, cores) interpreter workers; a CPU-only cluster gets as many per node.
CPU_ACTORS_PER_NODE = 2


def require_ray():
    """The ``ray`` module, or ToolchainUnavailable saying how to install the extra."""
    try:
        import ray
    except ImportError as e:
        raise ToolchainUnavailable(f"--ray needs Ray, which is not installed here ({e})", hint=INSTALL_HINT) from None
    return ray


class _ActorWorker(Worker):
    """A worker that dies with the actor process that started it.

    A local worker's parent is the long-lived server; an actor can be SIGKILLed (a lost node, an
    operator), and its worker must not live on evaluating a candidate nobody waits for.
    """

    def _limits(self) -> None:
        super()._limits()
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # not Linux: the worker exits when its request pipe closes
            pass


class EvalActor:
    """One warm evaluation worker on one GPU (or CPU slot) of a Ray node; wrapped by ``ray.remote``.

    ``request`` takes the same requests as ``pool.Worker.request`` and returns the worker's reply, or
    ``{"died": [reason, detail, log_tail]}`` when the worker died, timed out or failed to start.
    """

    def __init__(self, kind: str, settings: dict):
        import ray

        # The server's store path need not exist on this node: caches (Triton, extensions) stay local.
        local_home = Path(
            os.environ.get("SKILLBASE_RAY_HOME") or Path(tempfile.gettempdir()) / f"skillbase-ray-{os.getuid()}"
        )
        self.settings = Settings(**{**settings, "home": local_home, "ray_address": None})
        gpu = None
        if kind == "cuda":  # the GPU Ray gave this actor, as the node names it (an index, or a UUID)
            ids = [str(i) for i in ray.get_gpu_ids()] or os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")
            gpu = int(ids[0]) if ids[0].isdigit() else ids[0]
        self.kind, self.gpu = kind, gpu
        self.worker = _ActorWorker(self.settings, kind, gpu)
        self.tasks = self.settings.cache_dir / "ray_tasks"
        self.node_ip = ray.util.get_node_ip_address()
        self.node_id = ray.get_runtime_context().get_node_id()

    def info(self) -> dict:
        """Where this actor runs and with what: node, process, GPU, toolchain versions."""
        return {
            "node_ip": self.node_ip,
            "node_id": self.node_id,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "kind": self.kind,
            "gpu": self.gpu,
            "versions": toolchain_versions(),
            "worker_starts": self.worker.starts,
        }

    def request(self, payload: dict, timeout: float) -> dict:
        """Run one request in the warm worker (started on first use, restarted after it died)."""
        payload = dict(payload)
        source = payload.pop("task_source", None)
        if source is not None:
            payload["task_path"] = str(self._task_file(payload["task_path"], source))
        try:
            reply = self.worker.request(payload, timeout)
        except WorkerDied as d:
            reply = {"died": [d.reason, d.detail, d.log_tail]}
        # Ray may have restarted this actor since the proxy last heard from it: say who answers.
        return {**reply, "where": self.info()}

    def _task_file(self, path: str, source: str) -> Path:
        """The task written on this node under its own name (a module name the reference may use)."""
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        local = self.tasks / digest / Path(path).name
        if not local.exists():
            local.parent.mkdir(parents=True, exist_ok=True)
            tmp = local.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, local)
        return local


class RayWorker:
    """The driver's side of one ``EvalActor``, with ``pool.Worker``'s interface: one request at a time."""

    def __init__(self, backend: "RayBackend", kind: str, index: int):
        self.backend, self.kind, self.gpu = backend, kind, index
        self.lock = threading.Lock()
        self.actor = None
        self.where: dict[str, Any] = {}
        self.proc = None  # no local process: Pool.stats reports none

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.gpu}"

    @property
    def alive(self) -> bool:
        return self.actor is not None

    @property
    def starts(self) -> int:
        return int(self.where.get("worker_starts", 0))

    def _start(self) -> None:
        ray = self.backend.ray
        self.actor = self.backend.new_actor(self.kind)
        try:
            self.where = ray.get(self.actor.info.remote(), timeout=_GET_MARGIN_S)
        except Exception as e:  # noqa: BLE001 - not placed in time, or died while starting
            self.kill()
            raise WorkerDied("start_failed", f"the Ray actor for {self.name} did not start: {e}") from e
        self.backend.check_versions(self.where)

    def versions(self) -> dict[str, str]:
        """torch, triton, CUDA and toolchain versions of the actor's node (placing the actor if needed)."""
        with self.lock:
            if self.actor is None:
                self._start()
            return dict(self.where["versions"])

    def request(self, payload: dict, timeout: float, progress: Callable[[float, str], None] | None = None) -> dict:
        """Send one request to the actor and wait for its reply; raises WorkerDied as a local worker does."""
        ray = self.backend.ray
        with self.lock:
            if self.actor is None:
                self._start()
            if "task_path" in payload:
                payload = {**payload, "task_source": Path(payload["task_path"]).read_text(encoding="utf-8")}
            if progress is not None:
                progress(0.0, f"sent to the Ray actor for {self.name} on {self.where.get('node_ip')}")
            ref = self.actor.request.remote(payload, timeout)
            try:
                reply = ray.get(ref, timeout=timeout + _GET_MARGIN_S)
            except ray.exceptions.GetTimeoutError:
                self.kill()
                raise WorkerDied(
                    "timeout",
                    f"the Ray actor for {self.name} did not answer within {timeout + _GET_MARGIN_S:g} s and was killed",
                ) from None
            except ray.exceptions.RayActorError as e:
                # Ray restarted the actor and ran the request again once; it died again.
                raise WorkerDied(
                    "crashed",
                    f"the Ray actor for {self.name} on node {self.where.get('node_ip')} "
                    f"died twice while serving this request (Ray restarted it and retried "
                    f"once): {str(e).splitlines()[0][:300]}",
                ) from None
            self.where = reply.pop("where", None) or self.where
            if "died" in reply:
                raise WorkerDied(*reply["died"])
            if payload.get("op") == "evaluate" and reply.get("ok"):
                result = reply["result"]
                result["notes"] = [*(result.get("notes") or []), self.provenance()]
            return reply

    def provenance(self) -> str:
        """Which node, process and device ran this evaluation."""
        w = self.where
        dev = f"GPU {w.get('gpu')}" if self.kind == "cuda" else "CPU (Triton interpreter)"
        return (
            f"evaluated by a Ray actor on node {w.get('node_ip')} ({w.get('hostname')}, node id "
            f"{str(w.get('node_id'))[:12]}), {dev}, actor pid {w.get('pid')}"
        )

    def kill(self, graceful: bool = False) -> None:
        """Stop the actor (its worker dies with it); the next request places a new one."""
        if self.actor is not None:
            try:
                self.backend.ray.kill(self.actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actor, self.where = None, {}

    def close(self) -> None:
        """Stop the actor; its worker dies with it (PR_SET_PDEATHSIG), with nothing to wait for: an
        actor Ray is restarting would otherwise have to come up only to be told to stop."""
        self.kill()


def _keep_stdout_clean(ray) -> None:
    """Send what Ray prints on the driver (task retries, actor deaths) to stderr.

    Ray's driver prints the cluster's error messages on stdout, and stdout belongs to the MCP stdio
    transport and to ``--json`` output. Ray looks the printer up at each call, so rebinding it suffices.
    """
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "_skillbase", False):
        return

    def to_stderr(data, ignore_prefix: bool):
        return printer({**data, "is_err": True}, ignore_prefix)

    to_stderr._skillbase = True
    worker.print_to_stdstream = to_stderr


class RayBackend:
    """A connection to a Ray cluster and the evaluation actors placed on it (created on first use)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.ray = require_ray()
        self.address = settings.ray_address
        self._lock = threading.Lock()
        self._connected_here = False
        self._actor_cls = None
        self._idle = threading.Condition()
        self._leased: set[str] = set()

    @contextlib.contextmanager
    def lease(self, names: list[str]) -> Iterator[str]:
        """The first of ``names`` no other single request holds, waiting for one to be free: concurrent
        ``benchmark`` calls on a server spread over the cluster's actors instead of queueing on one."""
        with self._idle:
            while (name := next((n for n in names if n not in self._leased), None)) is None:
                self._idle.wait()
            self._leased.add(name)
        try:
            yield name
        finally:
            with self._idle:
                self._leased.discard(name)
                self._idle.notify()

    def connect(self) -> None:
        """Join the cluster once (``ray.init(address=...)``); ToolchainUnavailable when it cannot be reached."""
        with self._lock:
            if self._actor_cls is not None:
                return
            ray = self.ray
            if not ray.is_initialized():
                try:
                    ray.init(
                        address=self.address,
                        namespace="skillbase",
                        log_to_driver=False,
                        logging_level="ERROR",
                        configure_logging=True,
                    )
                except Exception as e:  # noqa: BLE001 - ConnectionError, ValueError, RuntimeError by version
                    raise ToolchainUnavailable(
                        f"cannot join the Ray cluster at {self.address!r}: {e}",
                        hint="start one with `ray start --head` and pass its address "
                        "(host:6379, or 'auto' on a node of the cluster)",
                    ) from None
                self._connected_here = True
                _keep_stdout_clean(ray)
            # Restarts and one retry are Ray's (see the module docstring); the actor is ours.
            self._actor_cls = ray.remote(max_restarts=-1, max_task_retries=1)(EvalActor)

    def gpus(self) -> int:
        """GPUs of the cluster's live nodes: one actor each."""
        self.connect()
        return int(self.ray.cluster_resources().get("GPU", 0))

    def cpu_slots(self) -> int:
        """CPU interpreter actors for this cluster: up to CPU_ACTORS_PER_NODE on each live node."""
        self.connect()
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        return max(1, sum(min(CPU_ACTORS_PER_NODE, int(n.get("Resources", {}).get("CPU", 0))) for n in nodes))

    def new_actor(self, kind: str):
        """A new actor of ``kind``: on one GPU, or on one CPU slot spread over the nodes."""
        self.connect()
        # Limits and timeouts travel; the server's tokens do not.
        settings = self.settings.model_dump(mode="json", exclude={"http_token", "chroma_token", "chroma_url"})
        opts: dict[str, Any] = (
            {"num_cpus": 1, "num_gpus": 1}
            if kind == "cuda"
            else {"num_cpus": 1, "num_gpus": 0, "scheduling_strategy": "SPREAD"}
        )
        return self._actor_cls.options(**opts).remote(kind, settings)

    def check_versions(self, where: dict) -> None:
        """Refuse an actor whose toolchain code differs from the server's: its reports would not compare."""
        theirs, ours = where.get("versions") or {}, toolchain_versions()
        if theirs.get("toolchain") != ours["toolchain"]:
            raise WorkerDied(
                "start_failed",
                f"node {where.get('node_ip')} runs different skillbase toolchain code "
                f"({theirs.get('toolchain')}, this server: {ours['toolchain']}): "
                "install the same skillbase version on every node",
            )

    def worker(self, name: str) -> RayWorker:
        """A proxy for ``cuda:N`` (the cluster's N-th GPU actor) or ``cpu`` / ``cpu:N``."""
        kind, _, index = name.partition(":")
        if kind not in ("cuda", "cpu") or (index and not index.isdigit()):
            raise ValueError(f"unknown worker {name!r}")
        return RayWorker(self, kind, int(index or 0))

    def close(self) -> None:
        """Leave the cluster when this process joined it (the actors went with their proxies)."""
        if self._connected_here and self.ray.is_initialized():
            self.ray.shutdown()
        self._connected_here = False
        self._actor_cls = None
