"""Chroma ``where`` filters with chroma's semantics, evaluated in Python and in SQLite.

The vector index keeps record metadata in its SQLite mirror, not in chroma
(writing it to chroma cost more than the vectors themselves, with every other
thread of the process stopped). A filtered query over-fetches nearest
neighbours and filters them here, with ``matches``; when those do not fill
``k``, ``to_sql`` selects every matching id in the mirror and chroma searches
among those ids only. Both must agree with chroma's own filter on every record,
which the tests check against a real collection.

Semantics (as chroma 1.x has them): ``$eq``/``$in`` and the comparisons never
match a missing key, ``$ne``/``$nin``/``$not_contains`` do; numbers compare
across int and float, but booleans are not numbers; a scalar never equals a
list field; ``$contains`` tests membership in a list field.
"""

from __future__ import annotations

import re
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


# Keys SQLite's JSON paths can name as written; any other key (a user's filter may name anything)
# is one no stored record has, and its condition is decided as for a missing field.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_]+")


def to_sql(where: dict[str, Any], column: str = "metadata") -> tuple[str, list[Any]]:
    """A (validated) where filter as an SQLite condition over a JSON ``column``, with its parameters.

    The condition is true exactly for the records ``matches`` accepts (never NULL, so NOT works)."""
    params: list[Any] = []
    return _sql_where(where, column, params), params


def _sql_where(where: dict[str, Any], column: str, params: list[Any]) -> str:
    parts = []
    for key, cond in where.items():
        if key in ("$and", "$or"):
            inner = [_sql_where(w, column, params) for w in cond] or ["1" if key == "$and" else "0"]  # all([]), any([])
            parts.append("(" + (" AND " if key == "$and" else " OR ").join(inner) + ")")
        elif not _PLAIN_KEY.fullmatch(key):
            parts.append("1" if _field(_MISSING, cond) else "0")
        else:
            ops = cond.items() if isinstance(cond, dict) else [("$eq", cond)]
            parts += [_sql_op(column, f'$."{key}"', op, operand, params) for op, operand in ops]
    return "(" + " AND ".join(parts or ["1"]) + ")"


def _sql_op(column: str, path: str, op: str, operand: Any, params: list[Any]) -> str:
    kind = f"json_type({column}, '{path}')"
    value = f"json_extract({column}, '{path}')"
    if op in ("$eq", "$ne"):
        eq = _sql_same(kind, value, operand, params)
        return eq if op == "$eq" else f"NOT {eq}"
    if op in ("$in", "$nin"):
        any_eq = "(" + " OR ".join([_sql_same(kind, value, o, params) for o in operand] or ["0"]) + ")"
        return any_eq if op == "$in" else f"NOT {any_eq}"
    if op in ("$contains", "$not_contains"):
        member = _sql_same("each.type", "each.value", operand, params)
        has = (
            f"coalesce({kind} = 'array' AND EXISTS (SELECT 1 FROM json_each({column}, '{path}') AS each "
            f"WHERE {member}), 0)"
        )
        return has if op == "$contains" else f"NOT {has}"
    if op in _COMPARE:
        params.append(operand)
        sign = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
        return f"coalesce({kind} IN ('integer', 'real') AND {value} {sign} ?, 0)"
    raise InvalidInput(f"unsupported where operator {op!r}")


def _sql_same(kind: str, value: str, operand: Any, params: list[Any]) -> str:
    """SQL for ``_same(field, operand)`` on a JSON field's type and value (a missing field or a list is never the same)."""
    if isinstance(operand, bool):
        return f"coalesce({kind} = '{'true' if operand else 'false'}', 0)"
    params.append(operand)
    if _is_number(operand):
        return f"coalesce({kind} IN ('integer', 'real') AND {value} = ?, 0)"
    return f"coalesce({kind} = 'text' AND {value} = ?, 0)"
