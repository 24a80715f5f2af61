"""``sum`` and ``avg`` of a ``DECIMAL(p, s)`` column, exact as Spark's.

Spark sums ``DECIMAL(p, s)`` into ``DECIMAL(min(38, p + 10), s)`` and averages it into
``DECIMAL(min(38, p + 4), min(38, s + 4))`` (:func:`decimal_result`, the one rule the window,
the table aggregation and a pipeline's DDL follow). The state holds each slot's sum as a Python
integer in units of ``10**-s`` (an ``object`` column: exact at any size, where a 64-bit or
``Decimal`` context sum would round) and its count of non-NULL values; the mean is the exact
quotient rounded once, half away from zero (Java's ``HALF_UP``, Spark's rounding). A result
past its precision (or an ``avg`` whose sum is past the sum's) raises
:class:`DecimalOverflowError`, as Spark's ``sum`` / ``avg`` fail under ANSI mode (its default)
rather than wrap or return NULL; like the int64 check, a call checks the sums it leaves.
"""

from __future__ import annotations

import sys
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

if sys.version_info >= (3, 12):
    from typing import override
else:  # declared in pyproject.toml for Python < 3.12
    from typing_extensions import override

from .base import SlotColumns, _ColumnarAccumulator, _Keys, _sum_per_slot
from .counting import SumOverflowError
from .values import ValueDtype, _Values

#: Decimal arithmetic without rounding (inputs have at most 38 digits).
_EXACT = Context(prec=200)


def decimal_result(agg: str, precision: int, scale: int) -> tuple[int, int]:
    """The precision and scale of a ``sum`` / ``avg`` of ``DECIMAL(precision, scale)``.

    Spark's: a sum widens by 10 digits, an average by 4 digits and 4 decimals (at most 38).

    >>> decimal_result("sum", 12, 2), decimal_result("avg", 12, 2)
    ((22, 2), (16, 6))
    """
    if agg == "sum":
        return min(38, precision + 10), scale
    return min(38, precision + 4), min(38, scale + 4)


def parse_decimal(dtype: str | None) -> tuple[int, int] | None:
    """``(precision, scale)`` of an accumulator dtype ``"decimal(p,s)"``, else None."""
    if not dtype or not dtype.startswith("decimal(") or not dtype.endswith(")"):
        return None
    p, s = (int(x) for x in dtype[len("decimal("):-1].split(","))
    if not (1 <= p <= 38 and 0 <= s <= p):
        msg = f"`dtype` {dtype!r}: a decimal needs 1 <= precision <= 38 and 0 <= scale <= precision"
        raise ValueError(msg)
    return p, s


class DecimalOverflowError(SumOverflowError):
    """A decimal ``sum`` / ``avg`` is past its result type's precision (Spark fails too).

    Attributes:
        slot: The first slot whose result is out of range.

    """

    def __init__(
        self,
        slot: int,
        result: str,
        aggregation: str | None = None,
        column: str | None = None,
        where: str | None = None,
        spark_error: str = "ARITHMETIC_OVERFLOW",
    ) -> None:
        self.slot = slot
        self.result = result
        self.spark_error = spark_error
        aggregation = aggregation or "a group's decimal sum"
        where = where or f"(slot {slot})"
        column = f"`{column}`" if column else "the column"
        ArithmeticError.__init__(
            self,
            f"decimal overflow: {aggregation} is past {result} {where}, where Spark fails "
            f"with [{spark_error}] (ANSI mode, its default); cast {column} to a decimal of "
            "fewer digits after the point, or to double",
        )

    @override
    def named(self, aggregation: str, column: str | None, where: str) -> DecimalOverflowError:
        """The same error, naming the aggregation, its column and where."""
        return DecimalOverflowError(self.slot, self.result, aggregation, column, where,
                                    self.spark_error)


def _units(data: NDArray[Any], scale: int) -> NDArray[Any]:
    """Non-null decimals as Python integers in units of ``10**-scale`` (exact)."""
    out = np.empty(len(data), dtype=object)
    out[:] = [int(Decimal(d).scaleb(scale, context=_EXACT)) for d in data]
    return out


class _DecimalSum(_ColumnarAccumulator):
    """``sum`` of ``DECIMAL(p, s)``: ``DECIMAL(min(38, p + 10), s)``, NULL if no value."""

    agg = "sum"

    def __init__(self, precision: int, scale: int) -> None:
        self.precision, self.scale = precision, scale
        self.out_precision, self.out_scale = decimal_result(self.agg, precision, scale)

    @override
    def _empty(self, n: int, dtype: ValueDtype | None = None) -> dict[str, NDArray[Any]]:
        return {"sum": np.zeros(n, dtype=np.int64).astype(object),
                "n": np.zeros(n, dtype=np.int64)}

    def _fold(
        self, state: SlotColumns, s: NDArray[np.int64], units: NDArray[Any],
        n_add: NDArray[np.int64],
    ) -> SlotColumns:
        sums = state.columns["sum"].copy()
        np.add.at(sums, s, units)
        counts = state.columns["n"] + n_add
        touched = np.unique(s)
        # Spark's avg sums in the sum's type too, and fails when that sum overflows.
        sum_p, _ = decimal_result("sum", self.precision, self.scale)
        what = " (the sum it averages)" if self.agg == "avg" else ""
        checks = [(sums[touched], sum_p, f"DECIMAL({sum_p},{self.scale}){what}",
                   "ARITHMETIC_OVERFLOW")]
        if self.agg == "avg":  # the mean past its type: Spark's cast of it fails
            checks.append((self._units_out(sums[touched], counts[touched]), self.out_precision,
                           f"DECIMAL({self.out_precision},{self.out_scale})",
                           "NUMERIC_VALUE_OUT_OF_RANGE"))
        for units, precision, typ, code in checks:
            over = np.flatnonzero(np.abs(units) >= 10**precision)
            if len(over):
                raise DecimalOverflowError(int(touched[over[0]]), typ, spark_error=code)
        return SlotColumns({"sum": sums, "n": counts})

    def _units_out(self, sums: NDArray[Any], counts: NDArray[np.int64]) -> NDArray[Any]:
        """The results in units of ``10**-out_scale`` (a sum's are its own units)."""
        return sums

    @override
    def _add(
        self, state: SlotColumns, s: NDArray[np.int64], v: _Values | None, keys: _Keys
    ) -> SlotColumns:
        assert v is not None  # needs_values
        units = _units(v.data[v.valid], self.scale)
        return self._fold(state, s, units, np.bincount(s, minlength=len(state)))

    @override
    def _merge(self, state: SlotColumns, other: SlotColumns, dst: NDArray[np.int64]) -> SlotColumns:
        n_add = _sum_per_slot(len(state), dst, other.columns["n"])
        return self._fold(state, dst, other.columns["sum"], n_add)

    @override
    def result(self, state: SlotColumns) -> pd.Series[Any]:
        out = np.full(len(state), None, dtype=object)
        for i in np.flatnonzero(state.columns["n"] > 0):
            out[i] = Decimal(int(state.columns["sum"][i])).scaleb(-self.scale, context=_EXACT)
        return pd.Series(out, dtype=object)


class _DecimalAvg(_DecimalSum):
    """``avg`` of ``DECIMAL(p, s)``: the exact mean rounded half up to ``min(38, s + 4)``."""

    agg = "avg"

    @override
    def _units_out(self, sums: NDArray[Any], counts: NDArray[np.int64]) -> NDArray[Any]:
        """The means, rounded half away from zero to ``10**-out_scale`` (0 for no value)."""
        shift = 10 ** (self.out_scale - self.scale)
        out = np.zeros(len(sums), dtype=np.int64).astype(object)
        for i in np.flatnonzero(counts > 0):
            units = Fraction(int(sums[i]) * shift, int(counts[i]))
            out[i] = int(abs(units) + Fraction(1, 2)) * (1 if units >= 0 else -1)
        return out

    @override
    def result(self, state: SlotColumns) -> pd.Series[Any]:
        counts = state.columns["n"]
        means = self._units_out(state.columns["sum"], counts)
        out = np.full(len(state), None, dtype=object)
        for i in np.flatnonzero(counts > 0):
            out[i] = Decimal(means[i]).scaleb(-self.out_scale, context=_EXACT)
        return pd.Series(out, dtype=object)
