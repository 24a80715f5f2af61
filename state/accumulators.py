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

import datetime as _dt
import decimal
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeAlias, TypeVar, Union, cast, get_args

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from pandas.util import hash_array

if sys.version_info >= (3, 12):
    from typing import override
else:  # declared in pyproject.toml for Python < 3.12
    from typing_extensions import override

from .errors import InterlaceError

__all__ = [
    "HLL_PRECISION",
    "HLL_REGISTERS",
    "HLL_SPARSE_MAX_ENTRIES",
    "Accumulator",
    "AggName",
    "DistinctCapError",
    "DistinctMode",
    "DistinctSetState",
    "HllState",
    "SlotColumns",
    "ValueDtype",
    "make_accumulator",
]

AggName = Literal["count", "sum", "min", "max", "avg", "first", "last", "count_distinct"]
"""Aggregations (seed 001 table).

- ``count``: rows (``column=None``, ``count(*)``) or non-null values of a column.
- ``sum``: int64 for integer input, float64 for float input.
- ``min`` / ``max``: smallest / largest non-null value.
- ``avg``: float64 mean of the non-null values.
- ``first`` / ``last``: value at the min / max event time, ties by arrival order.
- ``count_distinct``: distinct non-null values (approximate or exact).
"""

DistinctMode = Literal["approximate", "exact"]
"""``count_distinct`` modes.

- ``approximate`` (default): HyperLogLog, precision 14, ~0.81% standard error.
- ``exact``: a set per slot, capped by ``max_distinct_values_per_group``.
"""

ValueDtype = Literal["int64", "float64", "bool", "object"]
"""State dtype of a value column.

- ``int64``: integers and timestamps (microseconds since the epoch, UTC).
- ``float64``: floating point.
- ``bool``: booleans.
- ``object``: anything compared as Python objects (strings, bytes, Decimal).
"""

ValuesLike: TypeAlias = Union["NDArray[Any]", "pd.Series[Any]", Any]
"""A numpy array, a pandas Series/ExtensionArray or a pyarrow array."""

SlotsLike: TypeAlias = Union["NDArray[np.integer[Any]]", "pd.Series[Any]", Any]
"""Integer slot numbers, one per row (numpy array or pandas Series)."""

S = TypeVar("S")

HLL_PRECISION = 14
"""Number of index bits of the HyperLogLog sketch (p)."""

HLL_REGISTERS = 1 << HLL_PRECISION
"""Registers per dense sketch (m = 2**p = 16384), one byte each."""

HLL_SPARSE_MAX_ENTRIES = HLL_REGISTERS // 3
"""A sparse sketch stores 3 bytes per non-zero register (uint16 index, uint8
rank); past this many entries it would outgrow the dense form and is
converted."""

# Changing this key (or the hash) invalidates every stored approximate
# count_distinct sketch: old and new hashes of one value would both count.
_HLL_HASH_KEY = "interlace.hll.v1"  # SipHash key for strings: exactly 16 bytes
# Non-integral floats are hashed from their IEEE bits; flipping these hash bits
# keeps them from colliding systematically with the integer that has the same
# bits (integral floats hash as that integer, so 5.0 and 5 count once).
_FLOAT_HASH_FLIP = np.uint64(0x9E3779B97F4A7C15)
_HLL_RANK_BITS = 64 - HLL_PRECISION  # 50 bits left for the rank
_HLL_RANK_FIELD = 6  # bits that hold a rank (at most _HLL_RANK_BITS + 1 = 51) when packed
_HLL_ALPHA = 0.7213 / (1.0 + 1.079 / HLL_REGISTERS)

_EMPTY_I64: NDArray[np.int64] = np.zeros(0, dtype=np.int64)


class DistinctCapError(InterlaceError, RuntimeError):
    """An exact ``count_distinct`` slot holds more values than its cap.

    Raised by ``update``/``merge``, so the query fails in the micro-batch in
    which the cap was passed; the operator may re-raise it naming the window.

    Attributes:
        cap: The configured ``max_distinct_values_per_group``.
        slot: The first slot found over the cap.
        count: How many distinct values that slot holds.

    """

    def __init__(self, cap: int, slot: int, count: int) -> None:
        self.cap = cap
        self.slot = slot
        self.count = count
        super().__init__(
            f"exact count_distinct cap hit: max_distinct_values_per_group={cap} exceeded "
            f"({count} distinct values in one group, slot {slot}); raise "
            "`max_distinct_values_per_group` or use mode='approximate'"
        )


# --------------------------------------------------------------------------
# Value normalisation
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class _Values:
    """A value column in canonical form.

    ``data`` has one of the :data:`ValueDtype` dtypes and the input's length;
    positions where ``valid`` is False hold a filler and must be ignored.
    """

    data: NDArray[Any]
    valid: NDArray[np.bool_]
    dtype: ValueDtype


def _dtype_name(arr: NDArray[Any]) -> ValueDtype:
    kind = arr.dtype.kind
    if kind == "i":
        return "int64"
    if kind == "f":
        return "float64"
    if kind == "b":
        return "bool"
    return "object"


def _filler(dtype: ValueDtype) -> Any:
    """Return the value that fills empty slots, so equal states encode equally."""
    return {"int64": 0, "float64": 0.0, "bool": False, "object": None}[dtype]


def _empty_column(dtype: ValueDtype, n: int) -> NDArray[Any]:
    if dtype == "object":
        return np.full(n, None, dtype=object)
    return np.zeros(n, dtype=np.dtype(dtype))


def _zeros(dtype: ValueDtype, n: int) -> NDArray[Any]:
    """Return ``n`` additive zeros (Python ``0`` for object, which adds to Decimal)."""
    if dtype == "object":
        return np.zeros(n, dtype=np.int64).astype(object)
    return np.zeros(n, dtype=np.dtype(dtype))


def _datetimes_to_us(arr: NDArray[Any]) -> NDArray[np.int64]:
    # numpy floors when it coarsens a datetime64 unit, also before 1970.
    return arr.astype("datetime64[us]").view(np.int64)


def _normalize_numpy(arr: NDArray[Any]) -> _Values:
    kind = arr.dtype.kind
    n = arr.shape[0]
    if kind in "iu":
        return _Values(arr.astype(np.int64, copy=False), np.ones(n, dtype=bool), "int64")
    if kind == "f":
        data = arr.astype(np.float64, copy=False)
        valid = ~np.isnan(data)
        return _Values(np.where(valid, data, 0.0), valid, "float64")
    if kind == "b":
        return _Values(arr.astype(bool, copy=False), np.ones(n, dtype=bool), "bool")
    if kind in "mM":
        valid = ~np.isnat(arr)
        unit = "timedelta64[us]" if kind == "m" else "datetime64[us]"
        data = arr.astype(unit).view(np.int64)
        return _Values(np.where(valid, data, 0), valid, "int64")
    if kind in "US":
        return _Values(arr.astype(object), np.ones(n, dtype=bool), "object")
    obj = arr.astype(object, copy=False)
    valid = ~np.asarray(pd.isna(obj), dtype=bool)
    if valid.all():
        present = obj
    else:
        present = obj[valid]
    inferred = pd.api.types.infer_dtype(present, skipna=False) if len(present) else "empty"
    target: ValueDtype | None = None
    if inferred == "integer":
        target = "int64"
    elif inferred in ("floating", "mixed-integer-float"):
        target = "float64"
    elif inferred == "boolean":
        target = "bool"
    elif inferred in ("datetime", "datetime64"):
        stamps = pd.to_datetime(pd.Series(present, dtype=object), utc=True)
        us = _datetimes_to_us(stamps.dt.tz_localize(None).to_numpy())
        data = np.zeros(n, dtype=np.int64)
        data[valid] = us
        return _Values(data, valid, "int64")
    if target is None:
        data = obj.copy()
        data[~valid] = None
        return _Values(data, valid, "object")
    data = np.full(n, _filler(target), dtype=np.dtype(target))
    data[valid] = present.astype(np.dtype(target))
    return _Values(data, valid, target)


def _normalize(values: ValuesLike, n: int) -> _Values:
    """Turn ``values`` (numpy, pandas or pyarrow) into canonical form.

    Raises:
        ValueError: ``values`` is None or does not have ``n`` elements.

    """
    if values is None:
        msg = "`values` is required (one per row); only count(*) takes values=None"
        raise ValueError(msg)
    if isinstance(values, (pd.Series, pd.Index)):
        values = values.array
    elif not isinstance(values, (np.ndarray, pd.api.extensions.ExtensionArray)) and hasattr(
        values, "to_pandas"
    ):
        values = values.to_pandas().array  # pyarrow Array / ChunkedArray
    if isinstance(values, pd.api.extensions.ExtensionArray):
        dtype = values.dtype
        if isinstance(dtype, pd.DatetimeTZDtype):
            values = values.tz_convert("UTC").tz_localize(None)
            out = _normalize_numpy(np.asarray(values.to_numpy(), dtype="datetime64[ns]"))
        elif dtype.kind in "iufb" and not isinstance(values, pd.arrays.NumpyExtensionArray):
            isna = np.asarray(values.isna(), dtype=bool)
            target = {"i": "int64", "u": "int64", "f": "float64", "b": "bool"}[dtype.kind]
            data = values.to_numpy(dtype=target, na_value=_filler(cast(ValueDtype, target)))
            out = _Values(data, ~isna, cast(ValueDtype, target))
        elif isinstance(values, pd.arrays.NumpyExtensionArray) or dtype.kind in "mM":
            out = _normalize_numpy(values.to_numpy())
        else:  # strings, categoricals, arrow-backed columns...
            out = _normalize_numpy(values.to_numpy(dtype=object, na_value=None))
    else:
        out = _normalize_numpy(np.asarray(values))
    if out.data.shape != (n,):
        msg = f"`values` must have one element per slot (got {out.data.shape[0]}, expected {n})"
        raise ValueError(msg)
    return out


def _coerce(data: NDArray[Any], src: ValueDtype, dst: ValueDtype) -> NDArray[Any]:
    """Cast non-null ``data`` of dtype ``src`` to ``dst``."""
    if src == dst:
        return data
    if dst == "object":
        return data.astype(object)
    return data.astype(np.dtype(dst))


def _promote(a: ValueDtype, b: ValueDtype) -> ValueDtype:
    """Return the dtype that holds both ``a`` and ``b`` values."""
    if a == b:
        return a
    if "object" in (a, b):
        return "object"
    if "float64" in (a, b):
        return "float64"
    return "int64"  # int64 with bool


def _unify(
    column: NDArray[Any],
    column_used: bool,
    incoming: ValueDtype,
    configured: ValueDtype | None,
) -> ValueDtype:
    """Choose the dtype a value column has after taking in ``incoming`` values.

    A configured dtype always wins. Otherwise an unused column adopts the
    incoming dtype and a used one is promoted (int64 + float64 -> float64).
    """
    if configured is not None:
        return configured
    if not column_used:
        return incoming
    return _promote(_dtype_name(column), incoming)


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


def _nullable_series(data: NDArray[Any], valid: NDArray[np.bool_]) -> pd.Series[Any]:
    """Wrap a value column as a Series with SQL NULLs where ``valid`` is False."""
    kind = data.dtype.kind
    mask = ~valid
    if kind == "i":
        return pd.Series(pd.arrays.IntegerArray(data.astype(np.int64), mask.copy()))
    if kind == "f":
        return pd.Series(pd.arrays.FloatingArray(data.astype(np.float64), mask.copy()))
    if kind == "b":
        return pd.Series(pd.arrays.BooleanArray(data.astype(bool), mask.copy()))
    out = data.astype(object)
    out[mask] = None
    return pd.Series(out, dtype=object)


def _order_codes(values: NDArray[Any]) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """Factorize non-null ``values`` into codes that sort like the values.

    Equal values share a code and ``codes[i] < codes[j]`` iff
    ``values[i] < values[j]``, so strings or Decimals can be reduced with integer
    ufuncs. Hash-based: only the distinct values are compared (sorted).

    Returns:
        The codes and the distinct values (``uniques[codes] == values``).

    """
    codes, uniques = pd.factorize(values, sort=True)
    return np.asarray(codes, dtype=np.int64), np.asarray(uniques, dtype=values.dtype)


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
# msgpack encoding of columns
# --------------------------------------------------------------------------


def _encode_object(value: Any) -> Any:
    """Encode one Python value msgpack-natively.

    Scalars msgpack knows stay as they are; others become ``[tag, text]``
    (values are never lists, so a list is always a tag).
    """
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    if isinstance(value, decimal.Decimal):
        return ["decimal", str(value)]
    if isinstance(value, _dt.datetime):
        return ["datetime", value.isoformat()]
    if isinstance(value, _dt.date):
        return ["date", value.isoformat()]
    msg = f"cannot store a {type(value).__name__} value in accumulator state: {value!r}"
    raise TypeError(msg)


def _decode_object(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        tag, text = value
        if tag == "decimal":
            return decimal.Decimal(text)
        if tag == "datetime":
            return _dt.datetime.fromisoformat(text)
        if tag == "date":
            return _dt.date.fromisoformat(text)
        msg = f"unknown tagged value in accumulator state: {value!r}"
        raise ValueError(msg)
    return value


def _encode_array(arr: NDArray[Any]) -> list[Any]:
    """Encode an array as ``[dtype, payload]``.

    The payload is the raw little-endian bytes; for object arrays a list of the
    values (dtype ``"O"``: strings, bytes and None only) or of encoded values
    (dtype ``"O+"``, see :func:`_encode_object`).
    """
    if arr.dtype.kind == "O":
        if pd.api.types.infer_dtype(arr, skipna=True) in ("string", "bytes", "empty"):
            return ["O", arr.tolist()]
        return ["O+", [_encode_object(v) for v in arr.tolist()]]
    little = arr.dtype.newbyteorder("<") if arr.dtype.byteorder != "|" else arr.dtype
    return [little.str, np.ascontiguousarray(arr, dtype=little).tobytes()]


def _decode_array(obj: Any) -> NDArray[Any]:
    dtype, payload = obj
    if dtype in ("O", "O+"):
        out = np.empty(len(payload), dtype=object)
        out[:] = payload if dtype == "O" else [_decode_object(v) for v in payload]
        return out
    return np.frombuffer(payload, dtype=np.dtype(dtype)).astype(np.dtype(dtype).newbyteorder("="))


def _check_header(obj: Any, agg: str, mode: str | None) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping) or obj.get("agg") != agg or obj.get("mode") != mode:
        got = (obj.get("agg"), obj.get("mode")) if isinstance(obj, Mapping) else type(obj)
        msg = f"accumulator state is not {agg} (mode {mode}): got {got}"
        raise ValueError(msg)
    return obj


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

    @abstractmethod
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

    @abstractmethod
    def merge(self, state: S, other: S, mapping: SlotsLike) -> S:
        """Fold slot ``i`` of ``other`` into slot ``mapping[i]`` of ``state``.

        Several slots may map to one. Associative, and equal to ``update``
        on the union of the rows of both states.

        Returns:
            The new state (``state`` and ``other`` are not modified).

        """

    @abstractmethod
    def result(self, state: S) -> pd.Series[Any]:
        """Return one aggregate per slot, NULL where SQL gives NULL."""

    @abstractmethod
    def take(self, state: S, idx: SlotsLike) -> S:
        """Return the state of slots ``idx`` (in that order; may repeat)."""

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
    def take(self, state: SlotColumns, idx: SlotsLike) -> SlotColumns:
        sel = _check_slots(idx, len(state))
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
    def update(
        self,
        state: SlotColumns,
        slots: SlotsLike,
        values: ValuesLike | None = None,
        event_time_us: NDArray[np.int64] | None = None,
        seq: NDArray[np.int64] | None = None,
    ) -> SlotColumns:
        n = len(state)
        s = _check_slots(slots, n)
        if not self.count_nulls:
            s = s[_normalize(values, s.shape[0]).valid]
        return SlotColumns({"count": state.columns["count"] + np.bincount(s, minlength=n)})

    @override
    def merge(self, state: SlotColumns, other: SlotColumns, mapping: SlotsLike) -> SlotColumns:
        dst = _check_mapping(mapping, len(other), len(state))
        out = state.columns["count"].copy()
        np.add.at(out, dst, other.columns["count"])
        return SlotColumns({"count": out})

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
        target = _unify(col, bool(counts.any()), dtype, self.dtype)
        sums = _coerce(col, _dtype_name(col), target).copy()
        np.add.at(sums, s, _coerce(data, dtype, target))
        new_counts = counts + n_add
        sums[new_counts == 0] = _zeros(target, 1)[0]  # canonical, whatever the path
        return SlotColumns({"sum": sums, "n": new_counts})

    @override
    def update(
        self,
        state: SlotColumns,
        slots: SlotsLike,
        values: ValuesLike | None = None,
        event_time_us: NDArray[np.int64] | None = None,
        seq: NDArray[np.int64] | None = None,
    ) -> SlotColumns:
        s = _check_slots(slots, len(state))
        v = _normalize(values, s.shape[0])
        s = s[v.valid]
        return self._fold(state, s, v.data[v.valid], v.dtype, np.bincount(s, minlength=len(state)))

    @override
    def merge(self, state: SlotColumns, other: SlotColumns, mapping: SlotsLike) -> SlotColumns:
        dst = _check_mapping(mapping, len(other), len(state))
        n_add = np.zeros(len(state), dtype=np.int64)
        np.add.at(n_add, dst, other.columns["n"])
        col = other.columns["sum"]
        return self._fold(state, dst, col, _dtype_name(col), n_add)

    @override
    def result(self, state: SlotColumns) -> pd.Series[Any]:
        return _nullable_series(state.columns["sum"], state.columns["n"] > 0)


class _Avg(_ColumnarAccumulator):
    """``avg``: float64 mean of the non-null values (Spark sums as double too)."""

    agg = "avg"

    @override
    def _empty(self, n: int, dtype: ValueDtype | None = None) -> dict[str, NDArray[Any]]:
        return {"sum": np.zeros(n, dtype=np.float64), "n": np.zeros(n, dtype=np.int64)}

    @override
    def update(
        self,
        state: SlotColumns,
        slots: SlotsLike,
        values: ValuesLike | None = None,
        event_time_us: NDArray[np.int64] | None = None,
        seq: NDArray[np.int64] | None = None,
    ) -> SlotColumns:
        s = _check_slots(slots, len(state))
        v = _normalize(values, s.shape[0])
        s = s[v.valid]
        sums = state.columns["sum"].copy()
        np.add.at(sums, s, v.data[v.valid].astype(np.float64))
        return SlotColumns(
            {"sum": sums, "n": state.columns["n"] + np.bincount(s, minlength=len(state))}
        )

    @override
    def merge(self, state: SlotColumns, other: SlotColumns, mapping: SlotsLike) -> SlotColumns:
        dst = _check_mapping(mapping, len(other), len(state))
        sums, counts = state.columns["sum"].copy(), state.columns["n"].copy()
        np.add.at(sums, dst, other.columns["sum"])
        np.add.at(counts, dst, other.columns["n"])
        return SlotColumns({"sum": sums, "n": counts})

    @override
    def result(self, state: SlotColumns) -> pd.Series[Any]:
        counts = state.columns["n"]
        has = counts > 0
        mean = np.divide(state.columns["sum"], counts, out=np.zeros(len(state)), where=has)
        return _nullable_series(mean, has)


class _MinMax(_ColumnarAccumulator):
    """``min`` / ``max`` of the non-null values."""

    _value_column = "value"

    def __init__(self, agg: Literal["min", "max"], dtype: ValueDtype | None) -> None:
        self.agg = agg
        self.dtype = dtype

    @override
    def _empty(self, n: int, dtype: ValueDtype | None = None) -> dict[str, NDArray[Any]]:
        return {
            "value": _empty_column(dtype or self.dtype or "float64", n),
            "has": np.zeros(n, dtype=bool),
        }

    def _fold(
        self, state: SlotColumns, s: NDArray[np.int64], data: NDArray[Any], dtype: ValueDtype
    ) -> SlotColumns:
        col, has = state.columns["value"], state.columns["has"]
        target = _unify(col, bool(has.any()), dtype, self.dtype)
        out = _coerce(col, _dtype_name(col), target).copy()
        data = _coerce(data, dtype, target)
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

    @override
    def update(
        self,
        state: SlotColumns,
        slots: SlotsLike,
        values: ValuesLike | None = None,
        event_time_us: NDArray[np.int64] | None = None,
        seq: NDArray[np.int64] | None = None,
    ) -> SlotColumns:
        s = _check_slots(slots, len(state))
        v = _normalize(values, s.shape[0])
        return self._fold(state, s[v.valid], v.data[v.valid], v.dtype)

    @override
    def merge(self, state: SlotColumns, other: SlotColumns, mapping: SlotsLike) -> SlotColumns:
        dst = _check_mapping(mapping, len(other), len(state))
        has = other.columns["has"]
        col = other.columns["value"]
        return self._fold(state, dst[has], col[has], _dtype_name(col))

    @override
    def result(self, state: SlotColumns) -> pd.Series[Any]:
        return _nullable_series(state.columns["value"], state.columns["has"])


class _FirstLast(_ColumnarAccumulator):
    """``first`` / ``last``: the non-null value at the min / max event time.

    Ties on event time go to the smallest ``seq`` (first) or the largest
    ``seq`` (last), i.e. the earliest / latest arrival.
    """

    needs_event_time = True
    _value_column = "value"

    def __init__(self, agg: Literal["first", "last"], dtype: ValueDtype | None) -> None:
        self.agg = agg
        self.dtype = dtype

    @override
    def _empty(self, n: int, dtype: ValueDtype | None = None) -> dict[str, NDArray[Any]]:
        return {
            "value": _empty_column(dtype or self.dtype or "float64", n),
            "t_us": np.zeros(n, dtype=np.int64),
            "seq": np.zeros(n, dtype=np.int64),
            "has": np.zeros(n, dtype=bool),
        }

    def _fold(
        self,
        state: SlotColumns,
        s: NDArray[np.int64],
        data: NDArray[Any],
        dtype: ValueDtype,
        t_us: NDArray[np.int64],
        seq: NDArray[np.int64],
    ) -> SlotColumns:
        cols = state.columns
        has = cols["has"]
        target = _unify(cols["value"], bool(has.any()), dtype, self.dtype)
        value = _coerce(cols["value"], _dtype_name(cols["value"]), target).copy()
        value[~has] = _filler(target)  # canonical, whatever the path
        data = _coerce(data, dtype, target)
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

    @override
    def update(
        self,
        state: SlotColumns,
        slots: SlotsLike,
        values: ValuesLike | None = None,
        event_time_us: NDArray[np.int64] | None = None,
        seq: NDArray[np.int64] | None = None,
    ) -> SlotColumns:
        s = _check_slots(slots, len(state))
        k = s.shape[0]
        v = _normalize(values, k)
        t_us = _check_times(event_time_us, "event_time_us", k)
        q = _check_times(seq, "seq", k)
        ok = v.valid
        return self._fold(state, s[ok], v.data[ok], v.dtype, t_us[ok], q[ok])

    @override
    def merge(self, state: SlotColumns, other: SlotColumns, mapping: SlotsLike) -> SlotColumns:
        dst = _check_mapping(mapping, len(other), len(state))
        c = other.columns
        has = c["has"]
        return self._fold(
            state, dst[has], c["value"][has], _dtype_name(c["value"]), c["t_us"][has], c["seq"][has]
        )

    @override
    def result(self, state: SlotColumns) -> pd.Series[Any]:
        return _nullable_series(state.columns["value"], state.columns["has"])


# --------------------------------------------------------------------------
# count_distinct, exact: a set per slot
# --------------------------------------------------------------------------


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
        self,
        state: DistinctSetState,
        s: NDArray[np.int64],
        data: NDArray[Any],
        dtype: ValueDtype,
    ) -> DistinctSetState:
        target = _unify(state.values, state.values.size > 0, dtype, self.dtype)
        slots = np.concatenate([state.slots, s])
        values = np.concatenate(
            [_coerce(state.values, _dtype_name(state.values), target), _coerce(data, dtype, target)]
        )
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
    def update(
        self,
        state: DistinctSetState,
        slots: SlotsLike,
        values: ValuesLike | None = None,
        event_time_us: NDArray[np.int64] | None = None,
        seq: NDArray[np.int64] | None = None,
    ) -> DistinctSetState:
        s = _check_slots(slots, state.n)
        v = _normalize(values, s.shape[0])
        return self._fold(state, s[v.valid], v.data[v.valid], v.dtype)

    @override
    def merge(
        self, state: DistinctSetState, other: DistinctSetState, mapping: SlotsLike
    ) -> DistinctSetState:
        dst = _check_mapping(mapping, other.n, state.n)
        return self._fold(state, dst[other.slots], other.values, _dtype_name(other.values))

    @override
    def result(self, state: DistinctSetState) -> pd.Series[Any]:
        return pd.Series(np.bincount(state.slots, minlength=state.n), dtype="int64")

    @override
    def take(self, state: DistinctSetState, idx: SlotsLike) -> DistinctSetState:
        sel = _check_slots(idx, state.n)
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


# --------------------------------------------------------------------------
# count_distinct, approximate: HyperLogLog (p = 14), sparse while small
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class HllState:
    """HyperLogLog sketches of ``n`` slots.

    A slot is *sparse* (its non-zero registers as sorted ``(index, rank)``
    entries, CSR over slots: entries of slot ``i`` are
    ``sparse_offsets[i]:sparse_offsets[i + 1]``) until it has more than
    :data:`HLL_SPARSE_MAX_ENTRIES` entries; then it is *dense*: row
    ``dense_row[i]`` of ``dense`` (``uint8[rows, 2**14]``). ``dense_row`` is -1
    for sparse slots, which have no dense row, and dense slots have no entries.
    """

    sparse_offsets: NDArray[np.int64]
    sparse_index: NDArray[np.uint16]
    sparse_rank: NDArray[np.uint8]
    dense_row: NDArray[np.int64]
    dense: NDArray[np.uint8]

    @property
    def n(self) -> int:
        """Number of slots."""
        return int(self.dense_row.shape[0])


def _hll_hash(v: _Values) -> NDArray[np.uint64]:
    """Hash the (all valid) values to 64 bits, equal values to equal hashes.

    Integral floats hash like the equal integer (a Spark long column with
    NULLs reaches pandas as float64). Strings use SipHash-2-4 with a fixed key
    and numbers a splitmix64 finaliser, both from ``pandas.util.hash_array``.
    """
    data = v.data
    if v.dtype == "object":
        return cast(
            "NDArray[np.uint64]",
            hash_array(data, encoding="utf8", hash_key=_HLL_HASH_KEY, categorize=False),
        )
    if v.dtype == "float64":
        integral = (data == np.trunc(data)) & (np.abs(data) < 2.0**63)
        bits = data.view(np.int64).copy()
        bits[integral] = data[integral].astype(np.int64)
        hashed = cast("NDArray[np.uint64]", hash_array(bits, categorize=False))
        hashed[~integral] ^= _FLOAT_HASH_FLIP
        return hashed
    return cast("NDArray[np.uint64]", hash_array(data.astype(np.int64), categorize=False))


def _hll_index_rank(hashes: NDArray[np.uint64]) -> tuple[NDArray[np.uint16], NDArray[np.uint8]]:
    """Split hashes into register index (top p bits) and rank.

    The rank is 1 + the number of leading zeros of the remaining 50 bits (51
    when they are all zero). ``frexp`` gives the bit length exactly because the
    50-bit remainder is exact in a float64.
    """
    index = (hashes >> np.uint64(_HLL_RANK_BITS)).astype(np.uint16)
    rest = hashes & np.uint64((1 << _HLL_RANK_BITS) - 1)
    _, bit_length = np.frexp(rest.astype(np.float64))
    rank = (_HLL_RANK_BITS + 1 - bit_length).astype(np.uint8)
    return index, rank


class _DistinctHll(Accumulator[HllState]):
    """``count_distinct`` with ``mode="approximate"``: HyperLogLog, p = 14.

    Standard error 1.04 / sqrt(2**14) ~ 0.81%. Estimator: the raw HLL estimate
    ``alpha * m**2 / sum(2**-M[j])``, replaced by linear counting
    ``m * ln(m / V)`` when it is at most ``2.5 * m`` and ``V`` registers are
    zero (64-bit hashes need no large-range correction). Sketches merge by
    register-wise max. A sketch stays sparse (3 bytes per non-zero register)
    until that would exceed the 16 KiB dense form.
    """

    agg = "count_distinct"
    mode = "approximate"

    @override
    def init(self, n: int) -> HllState:
        return HllState(
            np.zeros(n + 1, dtype=np.int64),
            np.zeros(0, dtype=np.uint16),
            np.zeros(0, dtype=np.uint8),
            np.full(n, -1, dtype=np.int64),
            np.zeros((0, HLL_REGISTERS), dtype=np.uint8),
        )

    @override
    def size(self, state: HllState) -> int:
        return state.n

    def _absorb(
        self,
        state: HllState,
        s: NDArray[np.int64],
        index: NDArray[np.uint16],
        rank: NDArray[np.uint8],
    ) -> HllState:
        """Raise register ``index`` of slot ``s`` to at least ``rank``, per entry."""
        n = state.n
        row = state.dense_row[s]
        to_dense = row >= 0
        dense = state.dense.copy()
        np.maximum.at(dense, (row[to_dense], index[to_dense]), rank[to_dense])
        # Sparse slots: union old and new entries, keep the max rank per register. Each entry
        # packs into one int64 that sorts by (slot, index, rank), so one plain sort puts the
        # largest rank of every register last.
        counts = np.diff(state.sparse_offsets)
        all_slot = np.concatenate([np.repeat(np.arange(n, dtype=np.int64), counts), s[~to_dense]])
        all_index = np.concatenate([state.sparse_index, index[~to_dense]]).astype(np.int64)
        all_rank = np.concatenate([state.sparse_rank, rank[~to_dense]])
        packed = (((all_slot << HLL_PRECISION) | all_index) << _HLL_RANK_FIELD) | all_rank
        packed.sort()
        register = packed >> _HLL_RANK_FIELD
        packed = packed[np.r_[register[1:] != register[:-1], True]] if packed.size else packed
        sp_slot = packed >> (HLL_PRECISION + _HLL_RANK_FIELD)
        sp_index = ((packed >> _HLL_RANK_FIELD) & (HLL_REGISTERS - 1)).astype(np.uint16)
        sp_rank = (packed & ((1 << _HLL_RANK_FIELD) - 1)).astype(np.uint8)
        counts = np.bincount(sp_slot, minlength=n)
        dense_row = state.dense_row
        promote = np.flatnonzero(counts > HLL_SPARSE_MAX_ENTRIES)
        if promote.size:
            dense_row = dense_row.copy()
            dense_row[promote] = dense.shape[0] + np.arange(promote.size)
            dense = np.concatenate([dense, np.zeros((promote.size, HLL_REGISTERS), np.uint8)])
            moving = dense_row[sp_slot] >= 0
            dense[dense_row[sp_slot[moving]], sp_index[moving]] = sp_rank[moving]
            sp_slot, sp_index, sp_rank = sp_slot[~moving], sp_index[~moving], sp_rank[~moving]
            counts[promote] = 0
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return HllState(offsets, sp_index, sp_rank, dense_row, dense)

    def _entries(
        self, state: HllState
    ) -> tuple[NDArray[np.int64], NDArray[np.uint16], NDArray[np.uint8]]:
        """Return every non-zero register as ``(slot, index, rank)``."""
        sparse_slot = np.repeat(np.arange(state.n, dtype=np.int64), np.diff(state.sparse_offsets))
        row, index = np.nonzero(state.dense)
        slot_of_row = np.empty(state.dense.shape[0], dtype=np.int64)
        dense_slots = np.flatnonzero(state.dense_row >= 0)
        slot_of_row[state.dense_row[dense_slots]] = dense_slots
        return (
            np.concatenate([sparse_slot, slot_of_row[row]]),
            np.concatenate([state.sparse_index, index.astype(np.uint16)]),
            np.concatenate([state.sparse_rank, state.dense[row, index]]),
        )

    @override
    def update(
        self,
        state: HllState,
        slots: SlotsLike,
        values: ValuesLike | None = None,
        event_time_us: NDArray[np.int64] | None = None,
        seq: NDArray[np.int64] | None = None,
    ) -> HllState:
        s = _check_slots(slots, state.n)
        v = _normalize(values, s.shape[0])
        valid = _Values(v.data[v.valid], v.valid[v.valid], v.dtype)
        index, rank = _hll_index_rank(_hll_hash(valid))
        return self._absorb(state, s[v.valid], index, rank)

    @override
    def merge(self, state: HllState, other: HllState, mapping: SlotsLike) -> HllState:
        dst = _check_mapping(mapping, other.n, state.n)
        slot, index, rank = self._entries(other)
        return self._absorb(state, dst[slot], index, rank)

    def estimate(self, state: HllState) -> NDArray[np.float64]:
        """Return the unrounded cardinality estimate of every slot."""
        m = float(HLL_REGISTERS)
        counts = np.diff(state.sparse_offsets)
        sparse_slot = np.repeat(np.arange(state.n), counts)
        # Absent registers are 0 and add 2**0 = 1 each to the harmonic sum.
        harmonic = (HLL_REGISTERS - counts).astype(np.float64)
        harmonic += np.bincount(
            sparse_slot,
            weights=np.ldexp(1.0, -state.sparse_rank.astype(np.int32)),
            minlength=state.n,
        )
        zeros = (HLL_REGISTERS - counts).astype(np.float64)
        dense_slots = np.flatnonzero(state.dense_row >= 0)
        if dense_slots.size:
            rows = state.dense[state.dense_row[dense_slots]]
            harmonic[dense_slots] = np.ldexp(1.0, -rows.astype(np.int32)).sum(axis=1)
            zeros[dense_slots] = (rows == 0).sum(axis=1)
        raw = _HLL_ALPHA * m * m / harmonic
        small = (raw <= 2.5 * m) & (zeros > 0)
        linear = m * np.log(m / np.where(zeros > 0, zeros, 1.0))
        return np.where(small, linear, raw)

    @override
    def result(self, state: HllState) -> pd.Series[Any]:
        return pd.Series(np.rint(self.estimate(state)).astype(np.int64), dtype="int64")

    @override
    def take(self, state: HllState, idx: SlotsLike) -> HllState:
        sel = _check_slots(idx, state.n)
        gather, offsets = _csr_take(state.sparse_offsets, sel)
        row = state.dense_row[sel]
        is_dense = row >= 0
        dense_row = np.full(sel.shape[0], -1, dtype=np.int64)
        dense_row[is_dense] = np.arange(int(is_dense.sum()))
        return HllState(
            offsets,
            state.sparse_index[gather],
            state.sparse_rank[gather],
            dense_row,
            state.dense[row[is_dense]],
        )

    @override
    def grow(self, state: HllState, k: int) -> HllState:
        return HllState(
            np.concatenate([state.sparse_offsets, np.full(k, state.sparse_offsets[-1])]),
            state.sparse_index,
            state.sparse_rank,
            np.concatenate([state.dense_row, np.full(k, -1, dtype=np.int64)]),
            state.dense,
        )

    @override
    def to_msgpack(self, state: HllState) -> dict[str, Any]:
        # Dense rows in slot order, so equal sketches encode to equal bytes.
        dense_slots = np.flatnonzero(state.dense_row >= 0)
        counts = np.diff(state.sparse_offsets)
        return {
            "agg": self.agg,
            "mode": self.mode,
            "p": HLL_PRECISION,
            "n": state.n,
            "sparse_counts": _encode_array(counts.astype(np.uint16)),
            "sparse_index": _encode_array(state.sparse_index),
            "sparse_rank": _encode_array(state.sparse_rank),
            "dense_slots": _encode_array(dense_slots.astype(np.int64)),
            "dense": state.dense[state.dense_row[dense_slots]].tobytes(),
        }

    @override
    def from_msgpack(self, obj: Any) -> HllState:
        body = _check_header(obj, self.agg, self.mode)
        if body.get("p") != HLL_PRECISION:
            msg = f"HLL sketch has precision {body.get('p')}, expected {HLL_PRECISION}"
            raise ValueError(msg)
        n = int(body["n"])
        counts = _decode_array(body["sparse_counts"]).astype(np.int64)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        dense_slots = _decode_array(body["dense_slots"]).astype(np.int64)
        dense = np.frombuffer(body["dense"], dtype=np.uint8).reshape(-1, HLL_REGISTERS).copy()
        dense_row = np.full(n, -1, dtype=np.int64)
        dense_row[dense_slots] = np.arange(dense_slots.shape[0])
        return HllState(
            offsets,
            _decode_array(body["sparse_index"]).astype(np.uint16),
            _decode_array(body["sparse_rank"]).astype(np.uint8),
            dense_row,
            dense,
        )


# --------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------

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
    if dtype is not None:
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
