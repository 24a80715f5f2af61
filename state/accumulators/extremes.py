"""``min`` / ``max`` and ``first`` / ``last``: one chosen value per slot (:class:`SlotColumns`)."""

from __future__ import annotations

import sys
from abc import abstractmethod
from typing import Any, Literal, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray

if sys.version_info >= (3, 12):
    from typing import override
else:  # declared in pyproject.toml for Python < 3.12
    from typing_extensions import override

from .base import SlotColumns, _ColumnarAccumulator, _Keys, _reduce_per_slot
from .values import (
    ValueDtype,
    _dtype_name,
    _empty_column,
    _filler,
    _nullable_series,
    _order_codes,
    _retype,
    _Values,
)


class _Rows(NamedTuple):
    """Rows with a non-null value to fold: slot, value (of ``dtype``) and ordering keys of each."""

    s: NDArray[np.int64]
    data: NDArray[Any]
    dtype: ValueDtype
    keys: _Keys


class _ChosenValue(_ColumnarAccumulator):
    """A slot keeps one of its values (``value``, valid where ``has``), chosen by ``_fold``.

    Its columns are ``value``, then the ordering keys :attr:`_key_columns` (int64), then
    ``has``; a merge folds the chosen values of ``other`` like rows of a batch.
    """

    _value_column = "value"
    _key_columns: tuple[str, ...] = ()
    """State columns, besides the value, that decide which value is kept (int64)."""

    def __init__(self, agg: str, dtype: ValueDtype | None) -> None:
        self.agg = agg
        self.dtype = dtype

    @override
    def _empty(self, n: int, dtype: ValueDtype | None = None) -> dict[str, NDArray[Any]]:
        return {
            "value": _empty_column(dtype or self.dtype or "float64", n),
            **{name: np.zeros(n, dtype=np.int64) for name in self._key_columns},
            "has": np.zeros(n, dtype=bool),
        }

    @abstractmethod
    def _fold(self, state: SlotColumns, rows: _Rows) -> SlotColumns:
        """Fold ``rows`` into ``state``."""

    @override
    def _add(
        self, state: SlotColumns, s: NDArray[np.int64], v: _Values | None, keys: _Keys
    ) -> SlotColumns:
        assert v is not None  # needs_values
        return self._fold(state, _Rows(s, v.data[v.valid], v.dtype, keys))

    @override
    def _merge(self, state: SlotColumns, other: SlotColumns, dst: NDArray[np.int64]) -> SlotColumns:
        c = other.columns
        has = c["has"]
        keys = tuple(c[name][has] for name in self._key_columns)
        return self._fold(state, _Rows(dst[has], c["value"][has], _dtype_name(c["value"]), keys))

    @override
    def result(self, state: SlotColumns) -> pd.Series[Any]:
        return _nullable_series(state.columns["value"], state.columns["has"])


class _MinMax(_ChosenValue):
    """``min`` / ``max`` of the non-null values."""

    def __init__(self, agg: Literal["min", "max"], dtype: ValueDtype | None) -> None:
        super().__init__(agg, dtype)

    @override
    def _fold(self, state: SlotColumns, rows: _Rows) -> SlotColumns:
        s = rows.s
        col, has = state.columns["value"], state.columns["has"]
        target, col, data = _retype(col, bool(has.any()), rows.data, rows.dtype, self.dtype)
        out = col.copy()
        new_has = has.copy()
        new_has[s] = True
        if target == "object":
            # Reduce order-preserving codes per slot, then compare the one candidate
            # per touched slot with the value it already holds.
            ufunc = np.minimum if self.agg == "min" else np.maximum
            codes, uniques = _order_codes(data)
            u = np.unique(s)
            cand = uniques[_reduce_per_slot(ufunc, len(has), s, codes)[u]]
            better = ~has[u]
            old = has[u]
            if old.any():
                cmp = (cand[old] < out[u][old]) if self.agg == "min" else (cand[old] > out[u][old])
                better[old] = np.asarray(cmp, dtype=bool)
            out[u[better]] = cand[better]
        else:
            # Start untouched-yet slots at the identity, then one ufunc.at.
            if target == "float64":
                ident: Any = np.inf if self.agg == "min" else -np.inf
            elif target == "int64":
                info = np.iinfo(np.int64)
                ident = info.max if self.agg == "min" else info.min
            else:
                ident = self.agg == "min"
            out[~has] = ident
            ufunc = np.minimum if self.agg == "min" else np.maximum
            ufunc.at(out, s, data)
        out[~new_has] = _filler(target)
        return SlotColumns({"value": out, "has": new_has})


class _FirstLast(_ChosenValue):
    """``first`` / ``last``: the non-null value at the min / max event time.

    Ties on event time go to the smallest ``seq`` (first) or the largest
    ``seq`` (last), i.e. the earliest / latest arrival.
    """

    needs_event_time = True
    _key_columns = ("t_us", "seq")

    def __init__(self, agg: Literal["first", "last"], dtype: ValueDtype | None) -> None:
        super().__init__(agg, dtype)

    @override
    def _fold(self, state: SlotColumns, rows: _Rows) -> SlotColumns:
        s, (t_us, seq) = rows.s, rows.keys
        cols = state.columns
        has = cols["has"]
        target, value, data = _retype(
            cols["value"], bool(has.any()), rows.data, rows.dtype, self.dtype
        )
        value = value.copy()
        value[~has] = _filler(target)  # canonical, whatever the path
        new_t, new_seq, new_has = cols["t_us"].copy(), cols["seq"].copy(), has.copy()
        # Best candidate per slot: the min (first) / max (last) event time, then among
        # the rows at that time the min / max arrival order (seq is unique).
        ufunc = np.minimum if self.agg == "first" else np.maximum
        at_best_t = t_us == _reduce_per_slot(ufunc, len(has), s, t_us)[s]
        best_seq = _reduce_per_slot(ufunc, len(has), s[at_best_t], seq[at_best_t])
        chosen = np.flatnonzero(at_best_t & (seq == best_seq[s]))
        u, first_of_slot = np.unique(s[chosen], return_index=True)
        pick = chosen[first_of_slot]
        cand_t, cand_seq = t_us[pick], seq[pick]
        old_t, old_seq = new_t[u], new_seq[u]
        if self.agg == "first":
            better = (cand_t < old_t) | ((cand_t == old_t) & (cand_seq < old_seq))
        else:
            better = (cand_t > old_t) | ((cand_t == old_t) & (cand_seq > old_seq))
        better |= ~has[u]
        w = u[better]
        value[w] = data[pick][better]
        new_t[w] = cand_t[better]
        new_seq[w] = cand_seq[better]
        new_has[w] = True
        return SlotColumns({"value": value, "t_us": new_t, "seq": new_seq, "has": new_has})
