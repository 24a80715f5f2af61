"""``count_distinct`` with ``mode="approximate"``: HyperLogLog (p = 14), sparse while small.

Warning: the hash key, the precision and the hash function are part of the stored state (see
the package docstring); ``test_hll_hash_is_stable`` pins the hashes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from pandas.util import hash_array

if sys.version_info >= (3, 12):
    from typing import override
else:  # declared in pyproject.toml for Python < 3.12
    from typing_extensions import override

from .base import Accumulator, _csr_take, _Keys
from .encoding import _check_header, _decode_array, _encode_array
from .values import _Values

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
    def _add(
        self, state: HllState, s: NDArray[np.int64], v: _Values | None, keys: _Keys
    ) -> HllState:
        assert v is not None  # needs_values
        valid = _Values(v.data[v.valid], v.valid[v.valid], v.dtype)
        index, rank = _hll_index_rank(_hll_hash(valid))
        return self._absorb(state, s, index, rank)

    @override
    def _merge(self, state: HllState, other: HllState, dst: NDArray[np.int64]) -> HllState:
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
    def _take(self, state: HllState, sel: NDArray[np.int64]) -> HllState:
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
