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

from .base import SlotColumns, _ColumnarAccumulator, _Keys, _sum_per_slot
from .values import ValueDtype, _dtype_name, _nullable_series, _retype, _Values, _zeros


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

    Integer sums wrap on int64 overflow (numpy), where Spark in ANSI mode fails.
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
