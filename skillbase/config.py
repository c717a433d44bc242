"""Settings: where the store lives, limits, device and model choices.

Settings are plain values passed down explicitly; nothing reads the environment
after ``Settings.from_env()`` has built them.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from skillbase.errors import ConfigError


@functools.cache
def usable_cores() -> int:
    """The cores this process may run on: the host's, fewer where its CPU affinity (``taskset``, a
    container's cpuset) or a cgroup CPU quota (a container's ``--cpus``, rounded up) allows fewer, or
    ``LOKY_MAX_CPU_COUNT`` says so (joblib's loky reads all three). Every pool sized from "the cores"
    uses this, not ``os.cpu_count()``, which counts the host's: a server in a 2-CPU container on a
    64-core host would run 4 search threads and 4 threads of the embedding model on its 2 CPUs."""
    from joblib.externals.loky import cpu_count

    return max(1, cpu_count(only_physical_cores=False))


def default_embedding_threads(processes: int = 1) -> int:
    """Threads that run the embedding model in each of ``processes`` processes sharing a host: half the
    usable cores (at most 4) divided among them, at least 1. OpenMP threads that find their core busy
    stall every barrier: on a loaded 2-core machine two threads ran 7x slower than one."""
    return max(1, min(4, usable_cores() // (2 * processes)))


class Settings(BaseModel):
    """Every tunable of skillbase. Build with ``Settings.from_env(**overrides)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    home: Path = Field(description="store directory (SKILLBASE_HOME, default ~/.skillbase)")
    chroma_url: str | None = Field(None, description="chroma server URL for a shared store (SKILLBASE_CHROMA_URL)")
    chroma_token: str | None = Field(None, description="bearer token for the chroma server (SKILLBASE_CHROMA_TOKEN)")
    embedding_model: str | None = Field(
        None,
        description="sentence-transformers model path (SKILLBASE_EMBEDDING_MODEL); default: the packaged all-MiniLM-L6-v2",
    )
    embedding_backend: Literal["auto", "onnx", "torch"] = Field(
        "auto",
        description="what runs the embedding model (SKILLBASE_EMBEDDING_BACKEND): ONNX Runtime where the "
        "model allows, else torch; or one of them",
    )
    embedding_precision: Literal["int8", "fp32"] = Field(
        "int8",
        description="the embedding model's precision (SKILLBASE_EMBEDDING_PRECISION): int8, ONNX Runtime's "
        "quantized model where ONNX Runtime runs the model (about 2.4x less CPU a text), "
        "or fp32, the float model; a store's vectors are indexed again when it changes",
    )
    embedding_threads: int | None = Field(
        None,
        ge=1,
        description="threads that run the embedding model in one process (SKILLBASE_EMBEDDING_THREADS; "
        "default half the cores, 1 to 4; `serve --workers N` divides them among its workers)",
    )
    device: Literal["auto", "cuda", "cpu"] = Field("auto", description="SKILLBASE_DEVICE")
    max_source_bytes: int = Field(256_000, description="largest task or solution source accepted")
    compile_timeout_s: float = Field(180.0, description="wall-clock limit for one compile")
    eval_timeout_s: float = Field(600.0, description="wall-clock limit for one evaluation in a worker")
    baseline_compile_s: float = Field(
        120.0,
        ge=0,
        description="most seconds the max-autotune baseline may spend compiling and autotuning; "
        "past it that baseline is reported unavailable and not tried again for the task "
        "(SKILLBASE_BASELINE_COMPILE_S; 0: no bound)",
    )
    worker_memory_mb: int = Field(24_000, description="address-space limit for CPU workers, MiB")
    cpu_shape_mb: int = Field(
        64,
        ge=1,
        description="on the CPU, tasks without META['small'] are shrunk until one "
        "forward moves at most this many MiB (SKILLBASE_CPU_SHAPE_MB)",
    )
    worker_file_mb: int = Field(2_048, description="largest file a worker may write, MiB")
    worker_disk_mb: int = Field(
        4_096,
        description="most a worker may hold on the host's disk (its folder: "
        "workspace and compile caches' writable layer), MiB",
    )
    worker_tmp_mb: int = Field(2_048, description="size of a jailed worker's private /tmp (a tmpfs), MiB")
    worker_cpu_s: float = Field(4 * 3600.0, description="CPU seconds a worker process may use in its life")
    worker_max_procs: int = Field(
        512,
        ge=16,
        description="processes a worker and all it started may run at once (a cgroup's pids.max where one can be made)",
    )
    sandbox: Literal["auto", "bwrap", "off"] = Field(
        "auto",
        description="how workers are jailed (SKILLBASE_SANDBOX): auto uses bubblewrap where it works "
        "and falls back to unconfined workers with a warning; bwrap refuses to evaluate "
        "without it; off runs workers unconfined",
    )
    require_sandbox: bool = Field(
        False,
        description="refuse to run candidates where no jail can be built (set by "
        "`serve --transport http` unless --trust-clients)",
    )
    max_log_chars: int = Field(4_000, description="compiler / error logs are truncated to this in reports")
    agent_model: str = Field("claude-sonnet-4-6", description="model for the reference agent (SKILLBASE_AGENT_MODEL)")
    http_token: str | None = Field(None, description="bearer token for the HTTP transport (SKILLBASE_TOKEN)")
    ray_address: str | None = Field(
        None, description="Ray cluster to evaluate on, one actor per GPU (SKILLBASE_RAY_ADDRESS; needs skillbase[ray])"
    )

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides) -> "Settings":
        """Settings from the environment (or ``env``), then explicit overrides."""
        env = dict(os.environ if env is None else env)
        values: dict = {
            "home": Path(env.get("SKILLBASE_HOME") or Path.home() / ".skillbase").expanduser(),
            "chroma_url": env.get("SKILLBASE_CHROMA_URL") or None,
            "chroma_token": env.get("SKILLBASE_CHROMA_TOKEN") or None,
            "embedding_model": env.get("SKILLBASE_EMBEDDING_MODEL") or None,
            "http_token": env.get("SKILLBASE_TOKEN") or None,
            "ray_address": env.get("SKILLBASE_RAY_ADDRESS") or None,
        }
        for key, name, kind in (
            ("device", "SKILLBASE_DEVICE", str),
            ("embedding_backend", "SKILLBASE_EMBEDDING_BACKEND", str),
            ("embedding_precision", "SKILLBASE_EMBEDDING_PRECISION", str),
            ("embedding_threads", "SKILLBASE_EMBEDDING_THREADS", int),
            ("max_source_bytes", "SKILLBASE_MAX_SOURCE_BYTES", int),
            ("compile_timeout_s", "SKILLBASE_COMPILE_TIMEOUT_S", float),
            ("eval_timeout_s", "SKILLBASE_EVAL_TIMEOUT_S", float),
            ("baseline_compile_s", "SKILLBASE_BASELINE_COMPILE_S", float),
            ("cpu_shape_mb", "SKILLBASE_CPU_SHAPE_MB", int),
            ("agent_model", "SKILLBASE_AGENT_MODEL", str),
            ("sandbox", "SKILLBASE_SANDBOX", str),
        ):
            if env.get(name):
                try:
                    values[key] = kind(env[name])
                except ValueError as e:
                    raise ConfigError(f"{name}={env[name]!r} is not a valid {kind.__name__}") from e
        values.update(overrides)
        try:
            return cls(**values)
        except ValueError as e:
            raise ConfigError(f"invalid settings: {e}") from e

    @property
    def ledger_path(self) -> Path:
        return self.home / "ledger.sqlite3"

    @property
    def chroma_dir(self) -> Path:
        return self.home / "chroma"

    @property
    def graph_path(self) -> Path:
        return self.home / "graph.json"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"
