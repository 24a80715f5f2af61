"""Vectorised window accumulators: one aggregation over many slots at once.

A *slot* is one (window, group) pair of the window operator. Within one call the
operator hands an accumulator a batch of rows that are already assigned to
slots (``slots``, int64, ``0 <= slot < n``) together with the aggregated column
(``values``), the event time (``event_time_us``, int64 microseconds) and the
arrival order (``seq``, int64, strictly increasing in arrival order across the
whole stream, so it breaks ``first``/``last`` ties). The accumulator folds the
whole batch into its state with array operations (``np.add.at``,
``np.minimum.at``, ``np.bincount``, ``pd.factorize``); there is no per-row Python
loop.

Every accumulator implements the same protocol (:class:`Accumulator`):

``init(n) -> S``
    State with ``n`` empty slots.
``update(S, slots, values, event_time_us, seq) -> S``
    Fold a batch of rows into their slots.
``merge(S, other, mapping) -> S``
    Fold slot ``i`` of ``other`` into slot ``mapping[i]`` of ``S`` (session
    windows that merge). ``merge`` is associative and ``merge`` of two states
    equals ``update`` on the union of their rows (``tests/unit/state/
    test_accumulators.py::test_merge_is_associative`` and
    ``::test_merge_equals_update_on_union``).
``result(S) -> pandas.Series``
    One value per slot, with SQL NULLs as ``pd.NA``/``None`` (nullable
    ``Int64``/``Float64``/``boolean`` dtypes, ``object`` for strings).
``take(S, idx) -> S``
    Select/reorder slots (eviction, compaction, splitting off a session).
``grow(S, k) -> S``
    Append ``k`` empty slots (new windows or groups).
``to_msgpack(S)`` / ``from_msgpack(obj)``
    msgpack-native, deterministic encoding (arrays as little-endian raw bytes
    with their dtype; numpy scalars converted with ``.item()``).

All operations are pure: they never modify their inputs and always return a
new state, so a state may be shared (for example ``merge(S, take(S, [5]),
[3])`` folds slot 5 of ``S`` into its slot 3).

Null handling follows SQL: ``count(*)`` counts every row, every other
aggregation skips NULLs, and an aggregation over no non-null value is NULL
(``count``/``count_distinct`` give 0). ``NaN`` is treated as NULL, because a
Spark NULL in a float column reaches pandas as ``NaN``.

Value types: integers, booleans, floats, timestamps and Python objects
(strings, bytes, ``Decimal``...). Timestamps (``datetime64``, tz-aware or not)
are turned into int64 microseconds since the epoch (UTC), so ``min``/``max``/
``first``/``last`` of a timestamp column return int64 microseconds. Pass
``dtype`` to :func:`make_accumulator` (from the Spark schema) to pin the state
type: a Spark ``long`` column with NULLs reaches pandas as ``float64`` and
would otherwise make ``sum`` a float.

State compatibility: changing the hash key, the HLL precision or the hash
function (``pandas.util.hash_array``) invalidates stored approximate
``count_distinct`` sketches; ``test_hll_hash_is_stable`` pins the hashes.
"""

from __future__ import annotations

from typing import Any, Literal, cast, get_args

# Where each part lives: base.py (the protocol, slot checks, SlotColumns state), values.py
# (value normalisation and dtype rules), encoding.py (msgpack of state columns), counting.py
# (count, sum, avg), decimals.py (sum and avg of decimals), extremes.py (min/max, first/last),
# distinct.py (exact count_distinct), hll.py (approximate count_distinct); this module, the
# registry (make_accumulator).
from .base import Accumulator, SlotColumns
from .counting import SumOverflowError, _Avg, _Count, _Sum
from .decimals import DecimalOverflowError, _DecimalAvg, _DecimalSum, decimal_result, parse_decimal
from .distinct import DistinctCapError, DistinctSetState, _DistinctExact
from .extremes import _FirstLast, _MinMax
from .hll import HLL_PRECISION, HLL_REGISTERS, HLL_SPARSE_MAX_ENTRIES, HllState, _DistinctHll
from .values import ValueDtype

__all__ = [
    "HLL_PRECISION",
    "HLL_REGISTERS",
    "HLL_SPARSE_MAX_ENTRIES",
    "Accumulator",
    "AggName",
    "DecimalOverflowError",
    "DistinctCapError",
    "DistinctMode",
    "DistinctSetState",
    "HllState",
    "SlotColumns",
    "SumOverflowError",
    "ValueDtype",
    "decimal_result",
    "make_accumulator",
]

# The public classes keep the name they had when this package was one module: reprs, pickles,
# worker tracebacks (``interlace.state.accumulators.DistinctCapError: ...``, which the CLI maps)
# and the API reference (docs/gen_api.py lists what a module defines) stay unchanged.
for _public in (Accumulator, DecimalOverflowError, DistinctCapError, DistinctSetState, HllState,
                SlotColumns, SumOverflowError):
    _public.__module__ = __name__
del _public

AggName = Literal["count", "sum", "min", "max", "avg", "first", "last", "count_distinct"]
"""Aggregations (seed 001 table).

- ``count``: rows (``column=None``, ``count(*)``) or non-null values of a column.
- ``sum``: int64 for integer input, float64 for float input, ``DECIMAL(p + 10, s)`` for
  ``dtype="decimal(p,s)"`` (exact, as Spark).
- ``min`` / ``max``: smallest / largest non-null value.
- ``avg``: float64 mean of the non-null values; ``DECIMAL(p + 4, s + 4)`` for
  ``dtype="decimal(p,s)"`` (rounded half up, as Spark).
- ``first`` / ``last``: value at the min / max event time, ties by arrival order.
- ``count_distinct``: distinct non-null values (approximate or exact).
"""

DistinctMode = Literal["approximate", "exact"]
"""``count_distinct`` modes.

- ``approximate`` (default): HyperLogLog, precision 14, ~0.81% standard error.
- ``exact``: a set per slot, capped by ``max_distinct_values_per_group``.
"""

_DTYPE_ALIASES: dict[str, ValueDtype] = {
    "int64": "int64",
    "long": "int64",
    "int": "int64",
    "timestamp": "int64",
    "float64": "float64",
    "double": "float64",
    "float": "float64",
    "bool": "bool",
    "boolean": "bool",
    "object": "object",
    "string": "object",
    "str": "object",
}


def make_accumulator(
    agg: str,
    mode: str | None = None,
    *,
    column: str | None = None,
    dtype: str | None = None,
    max_distinct_values_per_group: int | None = None,
) -> Accumulator[Any]:
    """Build the accumulator of one aggregation.

    Args:
        agg: One of :data:`AggName`.
        mode: ``count_distinct`` only: ``"approximate"`` (default, None) or
            ``"exact"``; must be None for every other aggregation.
        column: The aggregated column, only used to tell ``count(*)``
            (None) from ``count(col)``.
        dtype: State dtype of the value column (:data:`ValueDtype`, or the
            aliases ``long``/``timestamp``/``double``/``string``...). None
            infers it from the values and promotes int64 to float64 when a
            batch brings floats. Pass it from the Spark schema so that an
            integer column with NULLs (float64 in pandas) still sums as int64.
            ``"decimal(p,s)"`` (a ``DECIMAL(p, s)`` column): ``sum`` and ``avg``
            are exact with Spark's result types (:func:`decimal_result`), the
            other aggregations compare the values as Python objects.
        max_distinct_values_per_group: Cap of exact ``count_distinct``
            (required there, ignored elsewhere).

    Returns:
        The accumulator.

    Raises:
        ValueError: Unknown ``agg``/``mode``/``dtype``, a mode on a
            non-distinct aggregation, or exact ``count_distinct`` without a
            positive ``max_distinct_values_per_group``.

    Example:
        >>> import numpy as np
        >>> acc = make_accumulator("sum", dtype="int64")
        >>> state = acc.update(acc.init(2), np.array([0, 1, 0]), np.array([1.0, np.nan, 2.0]))
        >>> acc.result(state).tolist()
        [3, <NA>]

    """
    if agg not in get_args(AggName):
        msg = f"`agg` must be one of {list(get_args(AggName))} (got {agg!r})"
        raise ValueError(msg)
    value_dtype: ValueDtype | None = None
    dec = parse_decimal(dtype)
    if dec is not None:
        value_dtype = "object"
    elif dtype is not None:
        if dtype not in _DTYPE_ALIASES:
            msg = f"`dtype` must be one of {sorted(_DTYPE_ALIASES)} or None (got {dtype!r})"
            raise ValueError(msg)
        value_dtype = _DTYPE_ALIASES[dtype]
    if agg != "count_distinct":
        if mode is not None:
            msg = f"`mode` only applies to count_distinct (got mode={mode!r} for agg={agg!r})"
            raise ValueError(msg)
    elif mode not in (None, *get_args(DistinctMode)):
        msg = f"`mode` must be one of {list(get_args(DistinctMode))} (got {mode!r})"
        raise ValueError(msg)
    if agg == "count":
        return _Count(count_nulls=column is None)
    if dec is not None and agg in ("sum", "avg"):
        return _DecimalSum(*dec) if agg == "sum" else _DecimalAvg(*dec)
    if agg == "sum":
        return _Sum(value_dtype)
    if agg == "avg":
        return _Avg()
    if agg in ("min", "max"):
        return _MinMax(cast(Literal["min", "max"], agg), value_dtype)
    if agg in ("first", "last"):
        return _FirstLast(cast(Literal["first", "last"], agg), value_dtype)
    if mode == "exact":
        cap = max_distinct_values_per_group
        if cap is None or isinstance(cap, bool) or not isinstance(cap, int) or cap <= 0:
            msg = (
                "`max_distinct_values_per_group` is required by count_distinct "
                f"mode='exact' and must be a positive int (got {cap!r}); set it, "
                "or use mode='approximate'"
            )
            raise ValueError(msg)
        return _DistinctExact(cap, value_dtype)
    return _DistinctHll()
