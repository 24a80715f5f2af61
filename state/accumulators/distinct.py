"""``count_distinct`` with ``mode="exact"``: a set of values per slot, capped."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

if sys.version_info >= (3, 12):
    from typing import override
else:  # declared in pyproject.toml for Python < 3.12
    from typing_extensions import override

from ..errors import InterlaceError
from .base import _EMPTY_I64, Accumulator, _csr_take, _Keys
from .encoding import _check_header, _decode_array, _encode_array
from .values import ValueDtype, _dtype_name, _empty_column, _order_codes, _retype, _Values


class DistinctCapError(InterlaceError, RuntimeError):
    """An exact ``count_distinct`` slot holds more values than its cap.

    Raised by ``update``/``merge``, so the query fails in the micro-batch in
    which the cap was passed; the window operator re-raises it naming the aggregation and
    the window.

    Attributes:
        cap: The configured ``max_distinct_values_per_group``.
        slot: The first slot found over the cap.
        count: How many distinct values that slot holds.

    """

    def __init__(
        self,
        cap: int,
        slot: int,
        count: int,
        aggregation: str | None = None,
        where: str | None = None,
    ) -> None:
        self.cap = cap
        self.slot = slot
        self.count = count
        what = (
            f"{aggregation} passed max_distinct_values_per_group={cap} ({count} distinct "
            f"values) {where}"
            if aggregation
            else f"max_distinct_values_per_group={cap} exceeded ({count} distinct values in "
            f"one group, slot {slot})"
        )
        super().__init__(
            f"exact count_distinct cap hit: {what}; raise `max_distinct_values_per_group` or "
            "use mode='approximate'"
        )

    def named(self, aggregation: str, column: str | None, where: str) -> DistinctCapError:
        """The same error, naming the aggregation (``count_distinct(x) AS d``) and where."""
        return DistinctCapError(self.cap, self.slot, self.count, aggregation, where)


@dataclass(frozen=True, slots=True, eq=False)
class DistinctSetState:
    """Exact distinct values of ``n`` slots.

    Stored as unique ``(slot, value)`` pairs sorted by slot, then value.
    """

    n: int
    slots: NDArray[np.int64]
    values: NDArray[Any]


class _DistinctExact(Accumulator[DistinctSetState]):
    """``count_distinct`` with ``mode="exact"``: fails loudly past its cap."""

    agg = "count_distinct"
    mode = "exact"

    def __init__(self, max_distinct_values_per_group: int, dtype: ValueDtype | None) -> None:
        self.cap = max_distinct_values_per_group
        self.dtype = dtype

    @override
    def init(self, n: int) -> DistinctSetState:
        return DistinctSetState(n, _EMPTY_I64, _empty_column(self.dtype or "int64", 0))

    @override
    def size(self, state: DistinctSetState) -> int:
        return state.n

    def _fold(
        self, state: DistinctSetState, s: NDArray[np.int64], data: NDArray[Any], dtype: ValueDtype
    ) -> DistinctSetState:
        _, old, new = _retype(state.values, state.values.size > 0, data, dtype, self.dtype)
        slots = np.concatenate([state.slots, s])
        values = np.concatenate([old, new])
        if slots.size:
            # Unique (slot, value) pairs, sorted by slot then value: codes sort like values.
            codes, uniques = _order_codes(values)
            pairs = np.unique(slots * len(uniques) + codes)
            slots, values = pairs // len(uniques), uniques[pairs % len(uniques)]
            counts = np.bincount(slots, minlength=state.n)
            over = np.flatnonzero(counts > self.cap)
            if over.size:
                raise DistinctCapError(self.cap, int(over[0]), int(counts[over[0]]))
        return DistinctSetState(state.n, slots, values)

    @override
    def _add(
        self, state: DistinctSetState, s: NDArray[np.int64], v: _Values | None, keys: _Keys
    ) -> DistinctSetState:
        assert v is not None  # needs_values
        return self._fold(state, s, v.data[v.valid], v.dtype)

    @override
    def _merge(
        self, state: DistinctSetState, other: DistinctSetState, dst: NDArray[np.int64]
    ) -> DistinctSetState:
        return self._fold(state, dst[other.slots], other.values, _dtype_name(other.values))

    @override
    def result(self, state: DistinctSetState) -> pd.Series[Any]:
        return pd.Series(np.bincount(state.slots, minlength=state.n), dtype="int64")

    @override
    def _take(self, state: DistinctSetState, sel: NDArray[np.int64]) -> DistinctSetState:
        offsets = np.searchsorted(state.slots, np.arange(state.n + 1)).astype(np.int64)
        gather, new_offsets = _csr_take(offsets, sel)
        new_slots = np.repeat(np.arange(sel.shape[0], dtype=np.int64), np.diff(new_offsets))
        return DistinctSetState(sel.shape[0], new_slots, state.values[gather])

    @override
    def grow(self, state: DistinctSetState, k: int) -> DistinctSetState:
        return DistinctSetState(state.n + k, state.slots, state.values)

    @override
    def to_msgpack(self, state: DistinctSetState) -> dict[str, Any]:
        return {
            "agg": self.agg,
            "mode": self.mode,
            "n": state.n,
            "counts": _encode_array(np.bincount(state.slots, minlength=state.n).astype(np.int64)),
            "values": _encode_array(state.values),
        }

    @override
    def from_msgpack(self, obj: Any) -> DistinctSetState:
        body = _check_header(obj, self.agg, self.mode)
        counts = _decode_array(body["counts"])
        slots = np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)
        return DistinctSetState(int(body["n"]), slots, _decode_array(body["values"]))
