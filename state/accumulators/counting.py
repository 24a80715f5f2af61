"""``count``, ``sum`` and ``avg``: per-slot counts and sums (:class:`SlotColumns` state)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

if sys.version_info >= (3, 12):
    from typing import override
else:  # declared in pyproject.toml for Python < 3.12
    from typing_extensions import override

from ..errors import InterlaceError
from .base import SlotColumns, _ColumnarAccumulator, _Keys, _sum_per_slot
from .values import ValueDtype, _dtype_name, _nullable_series, _retype, _Values, _zeros


class SumOverflowError(InterlaceError, ArithmeticError):
    """An integer ``sum`` left the 64-bit range, where Spark's ``sum`` fails too.

    Spark 4.3 runs with ANSI mode on by default, and its ``sum`` of an integer column fails
    with ``[ARITHMETIC_OVERFLOW]``; an interlace sum fails rather than wrap around. Raised by
    ``update``/``merge`` when a slot's exact sum after the call is out of range, so the query
    fails in the micro-batch in which it happened; the operator re-raises it naming the
    aggregation and the window.

    Attributes:
        slot: The first slot whose sum is out of range.

    """

    def __init__(
        self,
        slot: int,
        aggregation: str | None = None,
        column: str | None = None,
        where: str | None = None,
    ) -> None:
        self.slot = slot
        aggregation = aggregation or "a group's sum"
        where = where or f"(slot {slot})"
        column = f"`{column}`" if column else "the column"
        super().__init__(
            f"integer sum overflow: {aggregation} left the 64-bit integer range {where}, where "
            "Spark's sum fails with [ARITHMETIC_OVERFLOW] (ANSI mode, its default); "
            f"cast {column} to double before the window to sum past 9.2e18"
        )

    def named(self, aggregation: str, column: str | None, where: str) -> SumOverflowError:
        """The same error, naming the aggregation (``sum(x) AS s``), its column and where."""
        return SumOverflowError(self.slot, aggregation, column, where)


# Below this bound no int64 sum can have wrapped; the float shadow's rounding error (at most
# n ulp of 2**63, about n * 2**11) is far below it, and a wrap is off by a multiple of 2**64.
_SAFE_INT_SUM = 2**62


def _check_int_sums(
    before: NDArray[Any], s: NDArray[np.int64], data: NDArray[Any], after: NDArray[Any]
) -> None:
    """Raise :class:`SumOverflowError` if a slot's exact sum is out of the int64 range.

    ``after`` is ``before`` with ``data`` added at slots ``s`` in int64 arithmetic, which wraps;
    the exact sum is told from the wrapped one by a float64 shadow sum. Only the final sum
    counts: a wrap that a later value undoes (order within the call) is no overflow.
    """
    if not len(data):
        return
    # A bound from four reductions (no copies, Python ints: exact): the hot path stops here.
    held = max(-int(before.min()), int(before.max())) if len(before) else 0
    if held + len(data) * max(-int(data.min()), int(data.max())) < _SAFE_INT_SUM:
        return
    shadow_before = before.astype(np.float64)
    np.add.at(shadow_before, s, data.astype(np.float64))
    over = np.flatnonzero(np.abs(shadow_before - after.astype(np.float64)) > _SAFE_INT_SUM)
    if len(over):
        raise SumOverflowError(int(over[0]))


class _Count(_ColumnarAccumulator):
    """``count(*)`` (every row) or ``count(col)`` (non-null values)."""

    agg = "count"

    def __init__(self, count_nulls: bool) -> None:
        self.count_nulls = count_nulls
        self.needs_values = not count_nulls

    @override
    def _empty(self, n: int, dtype: ValueDtype | None = None) -> dict[str, NDArray[Any]]:
        return {"count": np.zeros(n, dtype=np.int64)}

    @override
    def _add(
        self, state: SlotColumns, s: NDArray[np.int64], v: _Values | None, keys: _Keys
    ) -> SlotColumns:
        return SlotColumns({"count": state.columns["count"] + np.bincount(s, minlength=len(state))})

    @override
    def _merge(self, state: SlotColumns, other: SlotColumns, dst: NDArray[np.int64]) -> SlotColumns:
        n_add = _sum_per_slot(len(state), dst, other.columns["count"])
        return SlotColumns({"count": state.columns["count"] + n_add})

    @override
    def result(self, state: SlotColumns) -> pd.Series[Any]:
        return pd.Series(state.columns["count"].copy(), dtype="int64")


class _Sum(_ColumnarAccumulator):
    """``sum``: int64 for integer input, float64 for float input, NULL if no value.

    An integer sum out of the int64 range raises :class:`SumOverflowError`, as Spark's
    (ANSI mode) fails; a float sum past the double range is +-inf, as in Spark.
    """

    agg = "sum"
    _value_column = "sum"

    def __init__(self, dtype: ValueDtype | None) -> None:
        # Spark rejects sum(boolean); summing bools as 0/1 is the gentle reading.
        self.dtype: ValueDtype | None = "int64" if dtype == "bool" else dtype

    @override
    def _empty(self, n: int, dtype: ValueDtype | None = None) -> dict[str, NDArray[Any]]:
        return {"sum": _zeros(dtype or self.dtype or "int64", n), "n": np.zeros(n, dtype=np.int64)}

    def _fold(
        self,
        state: SlotColumns,
        s: NDArray[np.int64],
        data: NDArray[Any],
        dtype: ValueDtype,
        n_add: NDArray[np.int64],
    ) -> SlotColumns:
        if dtype == "bool":
            data, dtype = data.astype(np.int64), "int64"
        col, counts = state.columns["sum"], state.columns["n"]
        target, col, data = _retype(col, bool(counts.any()), data, dtype, self.dtype)
        sums = col.copy()
        # IEEE, as in Spark: a float sum past the double range is +-inf and inf + -inf is NaN;
        # numpy would warn on each (a line in the Spark worker's log per call), Spark does not.
        with np.errstate(invalid="ignore", over="ignore"):
            np.add.at(sums, s, data)
        if target == "int64":
            _check_int_sums(col, s, data, sums)
        new_counts = counts + n_add
        sums[new_counts == 0] = _zeros(target, 1)[0]  # canonical, whatever the path
        return SlotColumns({"sum": sums, "n": new_counts})

    @override
    def _add(
        self, state: SlotColumns, s: NDArray[np.int64], v: _Values | None, keys: _Keys
    ) -> SlotColumns:
        assert v is not None  # needs_values
        return self._fold(state, s, v.data[v.valid], v.dtype, np.bincount(s, minlength=len(state)))

    @override
    def _merge(self, state: SlotColumns, other: SlotColumns, dst: NDArray[np.int64]) -> SlotColumns:
        n_add = _sum_per_slot(len(state), dst, other.columns["n"])
        col = other.columns["sum"]
        return self._fold(state, dst, col, _dtype_name(col), n_add)

    @override
    def result(self, state: SlotColumns) -> pd.Series[Any]:
        return _nullable_series(state.columns["sum"], state.columns["n"] > 0)


class _Avg(_Sum):
    """``avg``: float64 mean of the non-null values (Spark sums as double too).

    The state is a float64 ``sum`` (values cast to float64 before they are added) and the count
    ``n``, so the sum and merge are :class:`_Sum`'s with the dtype pinned to float64.
    """

    agg = "avg"

    def __init__(self) -> None:
        super().__init__("float64")

    @override
    def result(self, state: SlotColumns) -> pd.Series[Any]:
        counts = state.columns["n"]
        has = counts > 0
        mean = np.divide(state.columns["sum"], counts, out=np.zeros(len(state)), where=has)
        return _nullable_series(mean, has)
