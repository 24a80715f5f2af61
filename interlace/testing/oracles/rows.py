"""Output rows both oracles share: the row type, dead letters, and canonical rows.

* :class:`OracleRow`: one output row and the micro-batch that emits it.
* :data:`DEAD_LETTER_COLUMN`, :func:`dead_letter_json_value`, :func:`dead_letter_values`:
  the dead-letter output of ``late_data="dlq"`` (``SEMANTICS.md`` §4), alike for every
  operator.
* :func:`canonical_rows`: compare operator output with oracle output as multisets.

``__all__`` holds the public names; :func:`dead_letter_values` serves the oracles.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

__all__ = [
    "DEAD_LETTER_COLUMN",
    "OracleRow",
    "canonical_row",
    "canonical_rows",
    "dead_letter_json_value",
]

DEAD_LETTER_COLUMN = "_dead_letter"
"""The extra string output column under ``late_data="dlq"`` (``SEMANTICS.md`` §4)."""


# --------------------------------------------------------------------------------------
# Result rows
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OracleRow:
    """One output row and the micro-batch that emits it.

    Attributes:
        batch: Index of the micro-batch (0-based; ``num_batches - 1`` may be the trailing
            no-data batch).
        row: Output column -> value, keys in output column order.

    """

    batch: int
    row: dict[str, Any]


# --------------------------------------------------------------------------------------
# Dead-letter JSON values (SEMANTICS.md §4)
# --------------------------------------------------------------------------------------


def dead_letter_json_value(value: Any) -> Any:
    """Convert one input value to its dead-letter JSON form.

    datetime -> ``"%Y-%m-%dT%H:%M:%S.%f"`` (naive UTC), date -> ISO date, Decimal -> str,
    bytes -> base64 str, NaN / ±inf -> None; lists and dicts element-wise; other JSON
    natives as they are.

    Raises:
        TypeError: For a value with no defined JSON form.

    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        if value.tzinfo is not None and value.utcoffset() is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [dead_letter_json_value(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): dead_letter_json_value(item) for key, item in value.items()}
    if hasattr(value, "item") and type(value).__module__.startswith("numpy"):
        return dead_letter_json_value(value.item())
    msg = f"no dead-letter JSON form for {type(value).__name__}: {value!r}"
    raise TypeError(msg)



def dead_letter_values(
    output_columns: Sequence[str], side: str, wm_us: int, row: Mapping[str, Any]
) -> dict[str, Any]:
    """Build a dead-letter output row: every output column None except ``_dead_letter``.

    Its JSON is ``{"side": side, "reason": "late", "watermark": wm_ms, "row": {...}}``
    (``SEMANTICS.md`` §4), the row's values in :func:`dead_letter_json_value` form.

    Args:
        output_columns: The operator's output columns, in order.
        side: ``"left"`` / ``"right"`` for a join, ``"input"`` for a window.
        wm_us: The operator watermark that judged the row late, in µs.
        row: Input column -> value, every input column in order.

    Returns:
        The output row.

    """
    payload = {
        "side": side,
        "reason": "late",
        "watermark": wm_us // 1000,
        "row": {name: dead_letter_json_value(value) for name, value in row.items()},
    }
    values: dict[str, Any] = dict.fromkeys(output_columns)
    values[DEAD_LETTER_COLUMN] = json.dumps(payload)
    return values


# --------------------------------------------------------------------------------------
# Canonical rows, for multiset comparison
# --------------------------------------------------------------------------------------

CanonicalRow = tuple[tuple[str, Any], ...]
"""A row as a tuple of ``(column, canonical value)`` pairs, sorted by column name."""


def canonical_rows(rows: Iterable[Mapping[str, Any] | OracleRow]) -> list[CanonicalRow]:
    """Turn rows into a sorted list of hashable tuples, for multiset comparison.

    Two collections of rows hold the same multiset iff their ``canonical_rows`` are
    equal, whatever the row order, the column order, or the value flavour: numpy and
    pandas scalars become Python values, NaN / NaT become None, ``pandas.Timestamp``
    becomes a naive UTC ``datetime``, and the ``_dead_letter`` JSON is parsed into a
    sorted tuple structure (so its key order and spacing do not matter).

    Args:
        rows: Row dicts (from the oracle, ``Row.asDict()``, ``DataFrame.to_dict("records")``
            ...) or :class:`OracleRow` items.

    Returns:
        The canonical rows, sorted.

    Example:
        >>> canonical_rows([{"b": 2.0, "a": None}, {"a": float("nan"), "b": 1}])
        [(('a', None), ('b', 1)), (('a', None), ('b', 2.0))]

    """
    return sorted((canonical_row(row) for row in rows), key=_order_key)


def canonical_row(row: Mapping[str, Any] | OracleRow) -> CanonicalRow:
    """Turn one row into a hashable tuple of ``(column, value)`` sorted by column.

    Args:
        row: A row dict, an object with ``asDict()`` (a Spark ``Row``), or an
            :class:`OracleRow`.

    Returns:
        The canonical row (see :func:`canonical_rows`).

    """
    mapping: Mapping[str, Any]
    if isinstance(row, OracleRow):
        mapping = row.row
    elif hasattr(row, "asDict"):  # a Spark Row
        mapping = row.asDict(recursive=True)
    else:
        mapping = row
    items: list[tuple[str, Any]] = []
    for name, value in mapping.items():
        if name == DEAD_LETTER_COLUMN and isinstance(value, str):
            items.append((name, _canonical_json(json.loads(value))))
        else:
            items.append((name, _canonical_value(value)))
    return tuple(sorted(items, key=lambda item: item[0]))


def _canonical_json(value: Any) -> Any:
    """Turn parsed JSON into a hashable structure: objects become sorted item tuples."""
    if isinstance(value, dict):
        return tuple(sorted((key, _canonical_json(item)) for key, item in value.items()))
    if isinstance(value, list):
        return tuple(_canonical_json(item) for item in value)
    return value


def _canonical_value(value: Any) -> Any:
    """Normalise one value: plain Python, hashable, NaN/NaT -> None, naive UTC datetimes."""
    if value is None:
        return None
    module = type(value).__module__
    # numpy datetime64 / timedelta64: go through microseconds (``.item()`` of a ns value
    # would be an int); NaT becomes None.
    dtype = getattr(value, "dtype", None)
    dtype_kind = getattr(dtype, "kind", None)
    if module.startswith("numpy") and dtype_kind in ("M", "m"):
        unit = "datetime64[us]" if dtype_kind == "M" else "timedelta64[us]"
        return _canonical_value(value.astype(unit).item())
    if type(value).__name__ == "NaTType":
        return None
    if module.startswith("pandas") and hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime(warn=False)
    elif module.startswith("pandas") and hasattr(value, "to_pytimedelta"):
        value = value.to_pytimedelta()
    if hasattr(value, "tolist") and module.startswith("numpy"):
        value = value.tolist()  # numpy scalars -> Python scalars, arrays -> lists
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return 0.0 if value == 0.0 else value  # -0.0 -> 0.0
    if isinstance(value, datetime):
        if value.tzinfo is not None and value.utcoffset() is not None:
            value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if hasattr(value, "asDict"):  # a nested Spark Row (a tuple): by field name, as a dict
        return _canonical_value(value.asDict(recursive=True))
    if isinstance(value, (list, tuple)):
        return tuple(_canonical_value(item) for item in value)
    if isinstance(value, Mapping):
        return tuple(sorted((str(key), _canonical_value(item)) for key, item in value.items()))
    return value


# The kinds of canonical scalars, in sort order after None (rank 0) and before tuples. A
# value takes the first kind it is an instance of, so bool (a subclass of int) comes before
# the numbers and datetime (a subclass of date) before date.
_ORDERED_KINDS: tuple[type | tuple[type, ...], ...] = (
    bool,
    (int, float, Decimal),
    str,
    bytes,
    datetime,
    date,
    timedelta,
)


def _order_key(value: Any) -> tuple[Any, ...]:
    """Return a sort key giving a total order over canonical values.

    Values of different kinds (None, numbers, strings ...) are never compared with each
    other, so canonical rows sort without TypeError.
    """
    if value is None:
        return (0,)
    for rank, kind in enumerate(_ORDERED_KINDS, start=1):
        if isinstance(value, kind):
            return (rank, value)
    if isinstance(value, tuple):
        return (len(_ORDERED_KINDS) + 1, tuple(_order_key(item) for item in value))
    return (len(_ORDERED_KINDS) + 2, type(value).__name__, repr(value))
