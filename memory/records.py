"""Small records that belong to the memory layer (the shared ones live in
skillbase.models)."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, NamedTuple

from pydantic import Field

from skillbase.errors import InvalidInput
from skillbase.models import DTYPES, FAMILIES, Record, TaskInfo

REGIMES = ("tiny", "small", "medium", "large")


class Change(NamedTuple):
    """One row of the ledger's change log: what changed, in commit order."""

    seq: int
    kind: str
    item_id: str
    op: str


class TaskRecord(Record):
    """A task as the ledger knows it: its class signature and, when a caller
    recorded it, the full TaskInfo."""

    name: str
    signature: str
    family: str
    dtype: str
    regime: str
    info: TaskInfo | None = None
    first_seen: datetime
    updated_at: datetime


class StoreStats(Record):
    """Counts, consistency lag and disk use of one store."""

    home: str
    store_id: str
    schema_version: int
    ledger_seq: int = Field(description="last change-log sequence number committed to the ledger")
    index_seq: int | None = Field(description="ledger seq the vector index reflects (None: unreadable)")
    graph_seq: int | None = Field(description="ledger seq the in-memory graph reflects (None: not loaded)")
    snapshot_seq: int | None = Field(description="ledger seq of the graph snapshot on disk")
    index_lag: int | None = Field(description="ledger changes not yet in the vector index")
    counts: dict[str, int] = Field(description="rows per ledger table")
    index_counts: dict[str, int] = Field(default_factory=dict, description="records per chroma collection")
    index_unreached: dict[str, int] = Field(
        default_factory=dict,
        description="records per collection chroma's search does not reach, answered from the mirror",
    )
    index_graphs: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="each collection's HNSW graph: links a node, candidates an insert weighs"
    )
    index_sparser: list[str] = Field(
        default_factory=list,
        description="collections made with a sparser graph than new ones (`skillbase memory reindex` makes them again)",
    )
    graph_counts: dict[str, int] = Field(default_factory=dict, description="graph nodes per kind, edges per kind")
    disk_bytes: dict[str, int] = Field(description="bytes on disk: ledger (with WAL), chroma, graph, cache")
    chroma: str = Field(description="'embedded <path>' or 'server <url>'")
    embedding_model: str


class IndexCheck(Record):
    """Every record of the vector index looked for by its own vector (``skillbase memory check``)."""

    looked_for: dict[str, int] = Field(description="records per collection looked for")
    newly_unreached: dict[str, int] = Field(
        description="records per collection chroma's search no longer reached, answered from the mirror from now on"
    )
    unreached: dict[str, int] = Field(description="records per collection answered from the mirror, in all")
    seconds: float = Field(description="how long the check took")


def parse_signature(signature: str) -> tuple[str, str, str]:
    """``'softmax:fp32:large'`` -> ('softmax', 'fp32', 'large'); InvalidInput
    when it is not family:dtype:regime from the known vocabularies."""
    parts = signature.split(":") if isinstance(signature, str) else []
    if len(parts) != 3:
        raise InvalidInput(
            f"task signature {signature!r} is not family:dtype:regime",
            hint="use TaskInfo.signature, e.g. 'softmax:fp32:large'",
        )
    family, dtype, regime = parts
    if family not in FAMILIES:
        raise InvalidInput(f"unknown family {family!r} in {signature!r}", hint=f"one of {', '.join(FAMILIES)}")
    if dtype not in DTYPES:
        raise InvalidInput(f"unknown dtype {dtype!r} in {signature!r}", hint=f"one of {', '.join(DTYPES)}")
    if regime not in REGIMES:
        raise InvalidInput(f"unknown regime {regime!r} in {signature!r}", hint=f"one of {', '.join(REGIMES)}")
    return family, dtype, regime


def check_finite(value: Any, where: str) -> None:
    """Refuse NaN and infinities anywhere in a dumped record: JSON cannot hold
    them, so a record carrying one would not read back."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{where} is {value!r}; only finite numbers can be stored")
    elif isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_finite(v, f"{where}[{i}]")


def sort_time(dt: datetime) -> str:
    """A datetime as a UTC ISO string that sorts chronologically (naive
    datetimes are taken as UTC)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds")
