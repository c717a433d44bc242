"""Chroma ``where`` filters evaluated in Python, with chroma's semantics.

The vector index answers a filtered query by over-fetching nearest neighbours
and filtering them against its metadata mirror (chroma's own metadata filter
costs ~70-250 ms at 100k records on a 2-core machine, the over-fetch ~15 ms).
This module is that filter: it must agree with chroma on every record, which
the tests check against a real collection.

Semantics (as chroma 1.x has them): ``$eq``/``$in`` and the comparisons never
match a missing key, ``$ne``/``$nin``/``$not_contains`` do; numbers compare
across int and float, but booleans are not numbers; a scalar never equals a
list field; ``$contains`` tests membership in a list field.
"""

from __future__ import annotations

from typing import Any

from skillbase.errors import InvalidInput

_MISSING = object()
_COMPARE = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def validate_where(where: dict[str, Any] | None) -> None:
    """InvalidInput when ``where`` is not a chroma metadata filter."""
    if where is None:
        return
    try:
        from chromadb.api.types import validate_where as chroma_validate

        chroma_validate(where)
    except ValueError as e:
        raise InvalidInput(
            f"invalid where filter {where!r}: {e}",
            hint='e.g. {"family": "softmax"} or {"$and": [{"arch": "sm_90"}, {"speedup": {"$gte": 1.5}}]}',
        ) from e


def matches(where: dict[str, Any], metadata: dict[str, Any]) -> bool:
    """Whether a record's metadata satisfies a (validated) where filter."""
    for key, cond in where.items():
        if key == "$and":
            if not all(matches(w, metadata) for w in cond):
                return False
        elif key == "$or":
            if not any(matches(w, metadata) for w in cond):
                return False
        elif not _field(metadata.get(key, _MISSING), cond):
            return False
    return True


def _field(value: Any, cond: Any) -> bool:
    if not isinstance(cond, dict):
        return _eq(value, cond)
    return all(_op(value, op, operand) for op, operand in cond.items())


def _op(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _eq(value, operand)
    if op == "$ne":
        return not _eq(value, operand)
    if op == "$in":
        return any(_eq(value, o) for o in operand)
    if op == "$nin":
        return not any(_eq(value, o) for o in operand)
    if op == "$contains":
        return isinstance(value, list) and any(_same(v, operand) for v in value)
    if op == "$not_contains":
        return not (isinstance(value, list) and any(_same(v, operand) for v in value))
    if op in _COMPARE:
        return _is_number(value) and _COMPARE[op](value, operand)
    raise InvalidInput(f"unsupported where operator {op!r}")


def _eq(value: Any, operand: Any) -> bool:
    if value is _MISSING or isinstance(value, list):
        return False
    return _same(value, operand)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    return type(a) is type(b) and a == b


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)
