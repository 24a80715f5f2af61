"""The accumulator protocol, the slot checks and the per-slot column state most accumulators use.

:class:`Accumulator` validates the arguments of every protocol call once, in one order, and hands
its subclasses checked arrays through the underscored hooks (``_add``, ``_merge``, ``_take``);
:class:`_ColumnarAccumulator` implements the rest of the protocol for :class:`SlotColumns`
states. The protocol itself is described in :mod:`interlace.state.accumulators`.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar, Union

import numpy as np
import pandas as pd
from numpy.typing import NDArray

if sys.version_info >= (3, 12):
    from typing import override
else:  # declared in pyproject.toml for Python < 3.12
    from typing_extensions import override

from .encoding import _check_header, _decode_array, _encode_array
from .values import ValueDtype, ValuesLike, _datetimes_to_us, _dtype_name, _normalize, _Values

SlotsLike: TypeAlias = Union["NDArray[np.integer[Any]]", "pd.Series[Any]", Any]
"""Integer slot numbers, one per row (numpy array or pandas Series)."""

S = TypeVar("S")

_EMPTY_I64: NDArray[np.int64] = np.zeros(0, dtype=np.int64)

_Keys: TypeAlias = tuple["NDArray[np.int64]", ...]
"""Per-row ordering keys besides the value: ``(event_time_us, seq)`` for first/last, else ()."""


def _check_slots(slots: SlotsLike, n: int) -> NDArray[np.int64]:
    arr = np.asarray(slots)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        msg = f"`slots` must be a 1-d integer array (got dtype {arr.dtype}, shape {arr.shape})"
        raise ValueError(msg)
    out = arr.astype(np.int64, copy=False)
    if out.size and (out.min() < 0 or out.max() >= n):
        msg = f"`slots` must be in [0, {n}) (got min {out.min()}, max {out.max()})"
        raise IndexError(msg)
    return out


def _check_mapping(mapping: SlotsLike, other_n: int, n: int) -> NDArray[np.int64]:
    dst = _check_slots(mapping, n)
    if dst.shape[0] != other_n:
        msg = f"`mapping` must give one target per slot of `other` ({other_n}, got {dst.shape[0]})"
        raise ValueError(msg)
    return dst


def _check_times(arr: Any, name: str, n: int) -> NDArray[np.int64]:
    if arr is None:
        msg = f"`{name}` is required by first/last (int64, one per row)"
        raise ValueError(msg)
    out = np.asarray(arr)
    if out.dtype.kind == "M":
        out = _datetimes_to_us(out)
    out = out.astype(np.int64, copy=False)
    if out.shape != (n,):
        msg = f"`{name}` must have one element per slot (got {out.shape}, expected ({n},))"
        raise ValueError(msg)
    return out


def _reduce_per_slot(
    reduce: np.ufunc, n: int, slots: NDArray[np.int64], keys: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Return ``reduce`` (np.minimum/np.maximum) of int64 ``keys`` per slot.

    Slots without a row hold the reduction's identity (int64 max for minimum,
    int64 min for maximum).
    """
    info = np.iinfo(np.int64)
    out = np.full(n, info.max if reduce is np.minimum else info.min, dtype=np.int64)
    reduce.at(out, slots, keys)
    return out


def _sum_per_slot(n: int, slots: NDArray[np.int64], weights: NDArray[Any]) -> NDArray[Any]:
    """Return the sum of ``weights`` per slot (``n`` slots, zero where no row), in their dtype."""
    out = np.zeros(n, dtype=weights.dtype)
    np.add.at(out, slots, weights)
    return out


def _csr_take(
    offsets: NDArray[np.int64], idx: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Gather CSR rows ``idx`` (may repeat or reorder).

    Returns:
        The positions of the gathered entries in the old entry arrays, and the
        new offsets.

    """
    counts = (offsets[1:] - offsets[:-1])[idx]
    new_offsets = np.zeros(idx.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=new_offsets[1:])
    total = int(new_offsets[-1])
    shift = np.repeat(offsets[:-1][idx] - new_offsets[:-1], counts)
    return np.arange(total, dtype=np.int64) + shift, new_offsets


# --------------------------------------------------------------------------
# Protocol
# --------------------------------------------------------------------------


class Accumulator(ABC, Generic[S]):
    """One aggregation over ``n`` slots; see the module docstring for the protocol.

    Attributes:
        agg: The aggregation name (:data:`AggName`).
        mode: ``count_distinct`` mode, else None.
        needs_values: ``update`` reads ``values`` (False only for ``count(*)``).
        needs_event_time: ``update`` reads ``event_time_us`` and ``seq``.

    """

    agg: str
    mode: str | None = None
    needs_values: bool = True
    needs_event_time: bool = False

    @abstractmethod
    def init(self, n: int) -> S:
        """Return a state with ``n`` empty slots."""

    @abstractmethod
    def size(self, state: S) -> int:
        """Return the number of slots of ``state``."""

    def update(
        self,
        state: S,
        slots: SlotsLike,
        values: ValuesLike | None = None,
        event_time_us: NDArray[np.int64] | None = None,
        seq: NDArray[np.int64] | None = None,
    ) -> S:
        """Fold a batch of rows into their slots.

        Args:
            state: The current state (not modified).
            slots: Slot of each row, in ``[0, size(state))``.
            values: The aggregated column, one value per row (None for
                ``count(*)``). NULL/NaN/NaT are NULLs.
            event_time_us: Event time of each row (first/last only).
            seq: Arrival order of each row, unique and increasing across the
                stream (first/last only).

        Returns:
            The new state.

        Raises:
            DistinctCapError: An exact ``count_distinct`` slot passed its cap.

        """
        # Every accumulator checks its arguments here, in this order (slots, values, then
        # event_time_us and seq), and folds only the rows whose value is not NULL.
        s = _check_slots(slots, self.size(state))
        if not self.needs_values:
            return self._add(state, s, None, ())
        k = s.shape[0]
        v = _normalize(values, k)
        keys: _Keys = ()
        if self.needs_event_time:
            t_us = _check_times(event_time_us, "event_time_us", k)
            q = _check_times(seq, "seq", k)
            keys = (t_us[v.valid], q[v.valid])
        return self._add(state, s[v.valid], v, keys)

    @abstractmethod
    def _add(self, state: S, s: NDArray[np.int64], v: _Values | None, keys: _Keys) -> S:
        """Fold checked rows into ``state`` (see :meth:`update`).

        Args:
            state: The current state (not modified).
            s: Slot of each row whose value is not NULL (every row for ``count(*)``).
            v: The whole batch's values (their non-null ones are ``v.data[v.valid]``,
                one per ``s``); None for ``count(*)``.
            keys: ``(event_time_us, seq)`` of the rows of ``s`` if
                :attr:`needs_event_time`, else ().

        """

    def merge(self, state: S, other: S, mapping: SlotsLike) -> S:
        """Fold slot ``i`` of ``other`` into slot ``mapping[i]`` of ``state``.

        Several slots may map to one. Associative, and equal to ``update``
        on the union of the rows of both states.

        Returns:
            The new state (``state`` and ``other`` are not modified).

        """
        dst = _check_mapping(mapping, self.size(other), self.size(state))
        return self._merge(state, other, dst)

    @abstractmethod
    def _merge(self, state: S, other: S, dst: NDArray[np.int64]) -> S:
        """Fold slot ``i`` of ``other`` into slot ``dst[i]`` of ``state`` (checked)."""

    @abstractmethod
    def result(self, state: S) -> pd.Series[Any]:
        """Return one aggregate per slot, NULL where SQL gives NULL."""

    def take(self, state: S, idx: SlotsLike) -> S:
        """Return the state of slots ``idx`` (in that order; may repeat)."""
        return self._take(state, _check_slots(idx, self.size(state)))

    @abstractmethod
    def _take(self, state: S, sel: NDArray[np.int64]) -> S:
        """Return the state of slots ``sel`` (checked)."""

    @abstractmethod
    def grow(self, state: S, k: int) -> S:
        """Return ``state`` with ``k`` empty slots appended."""

    @abstractmethod
    def to_msgpack(self, state: S) -> dict[str, Any]:
        """Encode ``state`` as msgpack-native values; equal states encode equally."""

    @abstractmethod
    def from_msgpack(self, obj: Any) -> S:
        """Decode what :meth:`to_msgpack` produced.

        Raises:
            ValueError: ``obj`` is not a state of this accumulator.

        """


# --------------------------------------------------------------------------
# Fixed-width accumulators: per-slot columns
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class SlotColumns:
    """Fixed-width state: slot ``i`` is element ``i`` of every column.

    Slots without a value hold their column's filler (0, 0.0, False or None),
    so equal states encode to equal bytes.
    """

    columns: Mapping[str, NDArray[Any]]

    def __len__(self) -> int:
        return int(next(iter(self.columns.values())).shape[0])


class _ColumnarAccumulator(Accumulator[SlotColumns]):
    """Shared take/grow/encoding for :class:`SlotColumns` states."""

    _value_column: str | None = None
    """The column whose dtype follows the data (None: fixed dtypes only)."""

    def _empty(self, n: int, dtype: ValueDtype | None = None) -> dict[str, NDArray[Any]]:
        """Return the columns of ``n`` empty slots, the value column of ``dtype``."""
        raise NotImplementedError

    @override
    def init(self, n: int) -> SlotColumns:
        return SlotColumns(self._empty(n))

    @override
    def size(self, state: SlotColumns) -> int:
        return len(state)

    @override
    def _take(self, state: SlotColumns, sel: NDArray[np.int64]) -> SlotColumns:
        return SlotColumns({name: col[sel] for name, col in state.columns.items()})

    @override
    def grow(self, state: SlotColumns, k: int) -> SlotColumns:
        dtype = None
        if self._value_column is not None:
            dtype = _dtype_name(state.columns[self._value_column])
        empty = self._empty(k, dtype)
        return SlotColumns(
            {name: np.concatenate([col, empty[name]]) for name, col in state.columns.items()}
        )

    @override
    def to_msgpack(self, state: SlotColumns) -> dict[str, Any]:
        return {
            "agg": self.agg,
            "mode": self.mode,
            "n": len(state),
            "columns": [[name, *_encode_array(col)] for name, col in state.columns.items()],
        }

    @override
    def from_msgpack(self, obj: Any) -> SlotColumns:
        body = _check_header(obj, self.agg, self.mode)
        cols = {entry[0]: _decode_array(entry[1:]) for entry in body["columns"]}
        if any(col.shape != (body["n"],) for col in cols.values()):
            msg = f"accumulator state columns do not all have n={body['n']} slots"
            raise ValueError(msg)
        return SlotColumns(cols)
