"""The window oracle's aggregates: what each ``agg`` computes over a window's rows, as SQL.

Deliberately naive: every window keeps the rows it aggregated (:class:`AggregatedRow`) and
:func:`aggregate` recomputes each aggregate from them with plain Python (``sum``, ``min``,
a ``set``); there are no accumulators or sketches. ``SEMANTICS.md`` §3 lists the
aggregations; :func:`~interlace.testing.oracles.window.oracle_window` says how windows
use them. ``__all__`` holds the public constants; the rest serves the window oracle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from typing import Any

__all__ = ["AGGREGATIONS", "DISTINCT_MODES"]

AGGREGATIONS = ("count", "sum", "min", "max", "avg", "first", "last", "count_distinct")
"""Every supported ``agg``."""

DISTINCT_MODES = ("approximate", "exact")
"""Modes of ``count_distinct``; the oracle counts exactly in both."""


@dataclass(frozen=True)
class Aggregation:
    """One aggregation of the spec, resolved: ``agg``, its input column, its output alias."""

    agg: str
    column: str | None  # None: count(*)
    alias: str
    mode: str | None


def resolve_aggregations(spec_aggregations: Iterable[Any]) -> tuple[Aggregation, ...]:
    """Read the spec's aggregations (duck-typed: ``agg``, ``column``, ``as_``, ``mode``).

    Raises:
        ValueError: For an unknown ``agg`` or ``mode``, or a missing ``column``.

    """
    aggregations = tuple(
        Aggregation(
            agg=a.agg,
            column=getattr(a, "column", None),
            alias=a.as_,
            mode=getattr(a, "mode", None),
        )
        for a in spec_aggregations
    )
    for a in aggregations:
        if a.agg not in AGGREGATIONS:
            msg = f"`agg` must be one of {AGGREGATIONS} (got {a.agg!r})"
            raise ValueError(msg)
        if a.column is None and a.agg != "count":
            msg = f"aggregation {a.alias!r}: `{a.agg}` needs a `column`"
            raise ValueError(msg)
        if a.agg == "count_distinct" and (a.mode or "approximate") not in DISTINCT_MODES:
            msg = f"`mode` must be one of {DISTINCT_MODES} (got {a.mode!r})"
            raise ValueError(msg)
    return aggregations


def is_null(value: Any) -> bool:
    """Return True for NULL: None, and NaN.

    NaN counts as NULL here (unlike in the join oracle's keys) because the window
    operator sees pandas, where a Spark NULL in a float column is NaN too: the two
    cannot be told apart there, so aggregates skip both and group keys merge them.
    """
    return value is None or (isinstance(value, float) and math.isnan(value))


@dataclass(frozen=True)
class AggregatedRow:
    """One input row as aggregated: its event time and arrival order."""

    values: Mapping[str, Any]
    event_time_us: int
    seq: tuple[int, int]  # (batch, index in batch): arrival order across the stream


def aggregate(agg: Aggregation, rows: Sequence[AggregatedRow]) -> Any:
    """Compute one aggregate over a window's rows, as SQL does.

    ``count`` without a column counts rows; everything else skips NULLs. ``sum`` keeps
    Python's types (ints stay int, any float makes it float), ``avg`` is a float
    (decimals: see :func:`_decimal_sum_avg`),
    ``first``/``last`` take the value at the min/max event time with ties broken by
    arrival order, ``count_distinct`` is exact in both modes. No non-null value gives
    NULL (``count``: 0).
    """
    if agg.agg == "count" and agg.column is None:
        return len(rows)
    present = [r for r in rows if not is_null(r.values.get(agg.column))]  # type: ignore[arg-type]
    values = [r.values[agg.column] for r in present]  # type: ignore[index]
    if agg.agg == "count":
        return len(values)
    if agg.agg == "count_distinct":
        return len(set(values))
    if not values:
        return None
    if isinstance(values[0], Decimal) and agg.agg in ("sum", "avg"):
        return _decimal_sum_avg(agg.agg, values)
    if agg.agg == "sum":
        total = values[0]
        for value in values[1:]:
            total = total + value
        return total
    if agg.agg == "min":
        return min(values)
    if agg.agg == "max":
        return max(values)
    if agg.agg == "avg":
        return sum(float(v) for v in values) / len(values)
    if agg.agg == "first":
        return min(present, key=lambda r: (r.event_time_us, r.seq)).values[agg.column]  # type: ignore[index]
    # last
    return max(present, key=lambda r: (r.event_time_us, r.seq)).values[agg.column]  # type: ignore[index]


def _decimal_sum_avg(agg: str, values: list[Decimal]) -> Decimal:
    """Spark's ``sum`` / ``avg`` of a ``DECIMAL(p, s)`` column, ``s`` read off the values.

    The sum is exact; the mean is the exact one rounded half up (away from zero) to
    ``min(38, s + 4)`` digits after the point. A value's scale is its exponent, as Arrow
    hands a ``DECIMAL(p, s)`` column to Python.
    """
    scale = max(-int(v.as_tuple().exponent) for v in values)
    with localcontext(Context(prec=400)):
        total = sum(values, Decimal(0))
        if agg == "sum":
            return total.quantize(Decimal(1).scaleb(-scale))
        mean = total / Decimal(len(values))
        return mean.quantize(Decimal(1).scaleb(-min(38, scale + 4)), rounding=ROUND_HALF_UP)
