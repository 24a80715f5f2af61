"""A table aggregation's state: each key's current row (stage 1), each group's aggregates (stage 2).

A table aggregation (SEMANTICS §10) runs in two stages of one key grouping each
(``operators/table_aggregate``): by the table's key, then by the group.

**Stage 1, by key** (:class:`KeyRowsState`, blob kind ``"table_aggregate_keys"``), one key
group's:

* ``keys``: one row per key that ever had an applied update: the key columns
  (``__il_k<i>``), ``__il_tus`` (int64 µs, the latest applied update's event time: the late
  rule), ``__il_del`` (bool, that update was a tombstone), then the row's group columns
  (``__il_g<i>``) and aggregated columns (``__il_v<j>``), typed as the input. A deleted key
  stays: its event time judges later updates.
* ``held``: under ``emit="final"``, the updates waiting for ``wm > t`` (the prepared input
  plus ``__il_seq``).
* ``seq``: the next arrival number.

**Stage 2, by group** (:class:`GroupsState`, blob kind ``"table_aggregate_groups"``), one key
group's:

* ``groups``: one row per group with a present row, or that emitted a row once (its
  ``version`` must go on): the group columns, ``__il_ver`` (the next output version),
  ``__il_n`` (rows present) and per aggregation ``__il_a<i>``, a string: the counters of a
  removable accumulator (:class:`SumState`, :class:`CountState`); empty for those held as a
  multiset.
* ``values``: the multisets of ``min`` / ``max`` / exact ``count_distinct``: ``__il_grow``
  (the group's row in ``groups``), ``__il_agg`` (the aggregation's index), ``__il_cnt`` (how
  many present rows hold the value), then one typed column ``__il_m<i>`` per such
  aggregation (the value, NULL on the other aggregations' rows).

Both are Arrow IPC (zstd) in the versioned msgpack envelope (:mod:`interlace.state.blob`), as
the table joins' states (:class:`~interlace.state.tables.TablesState`). The accumulators
below are what makes every aggregate exact under removal: counts and exact sums (integers,
floats as integers scaled by 2^1074, decimals scaled by 10^scale) go down as they go up, and
min / max / distinct keep each value's count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

import pyarrow as pa
from interlace.state.tables import TablesState

__all__ = [
    "NAN",
    "CountState",
    "GroupsState",
    "KeyRowsState",
    "MultisetState",
    "SumState",
    "canonical",
]

#: Every float NaN becomes this one object: a dict finds it by identity (NaN != NaN).
NAN = float("nan")
#: Decimal arithmetic without rounding: Spark's decimals have at most 38 digits, sums 48.
_EXACT = Context(prec=200)
_FLOAT_SCALE = 1074  # 2**-1074 is the smallest positive double: every double is n * 2**-1074


def canonical(value: Any) -> Any:
    """``value`` with NaN made :data:`NAN` (a group or multiset key must find itself)."""
    if isinstance(value, float) and value != value:
        return NAN
    return value


@dataclass
class KeyRowsState(TablesState):
    """One key group's stage-1 state (see the module docstring)."""

    KIND = "table_aggregate_keys"
    WHAT = "table-aggregate key"
    TABLES = ("keys", "held")

    keys: pa.Table
    held: pa.Table
    seq: int = 0


@dataclass
class GroupsState(TablesState):
    """One key group's stage-2 state (see the module docstring)."""

    KIND = "table_aggregate_groups"
    WHAT = "table-aggregate group"
    TABLES = ("groups", "values")

    groups: pa.Table
    values: pa.Table
    seq: int = 0


@dataclass
class CountState:
    """``count(col)`` (rows whose value is not NULL), exact under removal."""

    n: int = 0

    def add(self, value: Any, sign: int) -> None:
        """Count ``value`` in (``sign`` 1) or out (-1)."""
        if value is not None:
            self.n += sign

    def result(self) -> int:
        """The count."""
        return self.n

    def dump(self) -> str:
        """The counters as text (the ``__il_a<i>`` column)."""
        return str(self.n)

    @classmethod
    def load(cls, text: str) -> CountState:
        """The counters from :meth:`dump`'s text."""
        return cls(int(text))


@dataclass
class SumState:
    """``sum`` / ``avg`` of integers, floats or decimals, exact under removal.

    ``total`` is the exact sum of the present non-NULL, finite values as an integer: integers
    as they are, floats scaled by 2**1074 (every double is an integer multiple of 2**-1074),
    decimals scaled by 10**scale. Infinities and NaN are counted apart, so that removing
    one gives back a finite sum. ``kind``: ``"int"``, ``"float"`` or ``"decimal"``.
    """

    kind: str
    scale: int = 0
    n: int = 0
    total: int = 0
    nan: int = 0
    pinf: int = 0
    ninf: int = 0

    def add(self, value: Any, sign: int) -> None:
        """Add ``value`` (``sign`` 1) or take it out (-1); NULL is skipped."""
        if value is None:
            return
        self.n += sign
        if self.kind == "int":
            self.total += sign * int(value)
        elif self.kind == "decimal":
            self.total += sign * int(Decimal(value).scaleb(self.scale, context=_EXACT))
        elif value != value:
            self.nan += sign
        elif value in (math.inf, -math.inf):
            if value > 0:
                self.pinf += sign
            else:
                self.ninf += sign
        else:
            num, den = float(value).as_integer_ratio()
            self.total += sign * num * ((1 << _FLOAT_SCALE) // den)

    def _float(self, exact: Fraction) -> float:
        if self.nan or (self.pinf and self.ninf):
            return math.nan
        if self.pinf:
            return math.inf
        if self.ninf:
            return -math.inf
        try:
            return float(exact)
        except OverflowError:  # past the largest double: Spark's double sum is infinite too
            return math.inf if exact > 0 else -math.inf

    def sum(self) -> Any:
        """The sum (``None`` when no non-NULL value is present)."""
        if not self.n:
            return None
        if self.kind == "int":
            return self.total
        if self.kind == "decimal":
            return Decimal(self.total).scaleb(-self.scale, context=_EXACT)
        return self._float(Fraction(self.total, 1 << _FLOAT_SCALE))

    def avg(self) -> Any:
        """The mean (``None`` when no non-NULL value is present): the exact one, rounded once.

        A decimal mean has ``scale + 4`` digits after the point (Spark's ``avg``), rounded
        half up.
        """
        if not self.n:
            return None
        if self.kind == "decimal":
            exact = Fraction(self.total, self.n * 10**self.scale)
            q = Fraction(1, 10 ** (self.scale + 4))
            units = exact / q
            rounded = math.floor(units + Fraction(1, 2)) if units >= 0 else -math.floor(
                -units + Fraction(1, 2))
            return Decimal(rounded).scaleb(-(self.scale + 4), context=_EXACT)
        den = self.n if self.kind == "int" else self.n << _FLOAT_SCALE
        return self._float(Fraction(self.total, den))

    def dump(self) -> str:
        """The counters as text (the ``__il_a<i>`` column)."""
        return f"{self.n}:{self.total}:{self.nan}:{self.pinf}:{self.ninf}"

    @classmethod
    def load(cls, kind: str, scale: int, text: str) -> SumState:
        """The counters from :meth:`dump`'s text."""
        n, total, nan, pinf, ninf = (int(p) for p in text.split(":"))
        return cls(kind, scale, n, total, nan, pinf, ninf)


@dataclass
class MultisetState:
    """The present values of one aggregation in one group, each with its count.

    ``min`` / ``max`` take the extreme of the values present (removing the extreme gives the
    next one; NaN is above every other value, as in Spark); exact ``count_distinct`` counts
    them. NULL is skipped.
    """

    counts: dict[Any, int] = field(default_factory=dict)

    def add(self, value: Any, sign: int) -> None:
        """Count ``value`` in (``sign`` 1) or out (-1)."""
        if value is None:
            return
        value = canonical(value)
        left = self.counts.get(value, 0) + sign
        if left > 0:
            self.counts[value] = left
        else:
            self.counts.pop(value, None)

    def minimum(self) -> Any:
        """The smallest present value (``None`` if none)."""
        finite = [v for v in self.counts if v is not NAN]
        if finite:
            return min(finite)
        return NAN if self.counts else None

    def maximum(self) -> Any:
        """The largest present value (``None`` if none; NaN if present)."""
        if NAN in self.counts:
            return NAN
        return max(self.counts) if self.counts else None

    def distinct(self) -> int:
        """How many distinct values are present."""
        return len(self.counts)
