"""Seed 003's table joins as fixtures: KStream-KTable, KTable-KTable and the foreign-key table.

Three tables of seed 003 (Kafka Streams join semantics, "New Join Semantics", and
"KTable-KTable Foreign-Key Join"), kept as data so tests and the Spark replay harness build
the same replay logs and compare every row with the table's.

The records (``ts:value``; ``null`` is a null value, a tombstone for a table)::

    STREAM_1 (left):  1:null 3:A 5:B 7:null 9:C 12:null 15:D
    STREAM_2 (right): 2:null 4:a 6:b 8:null 10:c 11:null 13:null 14:d (17:d: KTable-KTable)

Mapping to interlace: every record has the one key ``KEY``; a record's value is column
``v``; times are seconds after ``BASE``; a ``null`` record is a row with ``v`` NULL, a
tombstone under §7 (all value columns NULL). ``lateness_ms=0``. Kafka processes the records
in timestamp order and looks up the current table, which is interlace's ``emit="eager"``
with one record per micro-batch in time order; ``emit="final"`` gives the same rows later.

* **KStream-KTable** (``STREAM_TABLE``): Kafka Streams ignores stream records with a null
  value (``KStreamKTableJoin`` skips them: nothing to join), so the stream's ``null``
  records (ts 1, 7, 12) are left out of the log, as in :mod:`interlace.testing.seed003`.
  The table's ``null`` records are tombstones and stay.
* **KTable-KTable** (``TABLE_TABLE``): both inputs are tables, every record stays.
* **Foreign key** (``FOREIGN_KEY``): the left table ``(k, fk)`` keyed by ``k``, the right
  ``(fk, v)`` keyed by ``fk``; the right table starts with ``(1, foo)``, published here at
  ts 0. Kafka's left-join column prints ``(k,null,null)`` at ts 5 (the deletion of ``k``:
  a tombstone, i.e. a ``delete``) and ``(q,null,10)`` at ts 7 (the fields swapped: ``q``
  with foreign key 10 and no product, i.e. ``(q,10,null)``); both are read so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interlace.testing.log import JoinBatch
from interlace.testing.seed003 import BASE, KEY, SENTINEL_KEY, SENTINEL_SECONDS, at

__all__ = [
    "BASE",
    "COLUMNS",
    "FK_LEFT_COLUMNS",
    "FK_RIGHT_COLUMNS",
    "FOREIGN_KEY",
    "FOREIGN_KEY_KWARGS",
    "KEY",
    "SENTINEL_KEY",
    "SENTINEL_SECONDS",
    "STREAM_TABLE",
    "STREAM_TABLE_KWARGS",
    "TABLE_TABLE",
    "TABLE_TABLE_KWARGS",
    "Change",
    "at",
    "foreign_key_log",
    "stream_table_log",
    "table_table_log",
    "with_tombstone_column",
]

COLUMNS = ("k", "v", "event_time")
"""Columns of both inputs of the KStream-KTable and KTable-KTable examples."""

FK_LEFT_COLUMNS = ("k", "fk", "event_time")
"""Columns of the foreign-key example's left table (primary key ``k``, foreign key ``fk``)."""

FK_RIGHT_COLUMNS = ("fk", "v", "event_time")
"""Columns of the foreign-key example's right table (key ``fk``)."""

STREAM_TABLE_KWARGS: dict[str, Any] = {
    "left_keys": ("k",),
    "right_keys": ("k",),
    "event_time_column": "event_time",
    "lateness_ms": 0,
}
"""Stream-table join parameters of the table (``how`` and ``emit`` are chosen per test)."""

TABLE_TABLE_KWARGS = STREAM_TABLE_KWARGS
"""Table-table join parameters of the table (``how``: seed's ``outer`` is ``full``)."""

FOREIGN_KEY_KWARGS: dict[str, Any] = {
    "left_keys": ("k",),
    "foreign_key_columns": ("fk",),
    "right_keys": ("fk",),
    "event_time_column": "event_time",
    "lateness_ms": 0,
}
"""Foreign-key join parameters of the table."""


@dataclass(frozen=True)
class Change:
    """One changelog output row as the seed prints it.

    ``Change("upsert", "k1", "A", "a")`` is Kafka's ``A - a``; ``Change("upsert", "k1",
    "A", None)`` is ``A - null``; ``Change("delete", "k1")`` is a tombstone, ``null``.
    In the foreign-key table ``left`` is the foreign key and ``right`` the product value.
    """

    op: str
    key: str
    left: Any = None
    right: Any = None


def _up(left: Any, right: Any, key: str = KEY) -> Change:
    return Change("upsert", key, left, right)


def _delete(key: str = KEY) -> Change:
    return Change("delete", key)


Pair = tuple[str | None, str | None]

# KStream-KTable, one entry per record in the log: (ts, side, value, innerJoin, leftJoin).
# The stream's null records are not in the log (see the module docstring).
STREAM_TABLE: tuple[tuple[int, str, str | None, tuple[Pair, ...], tuple[Pair, ...]], ...] = (
    (2, "right", None, (), ()),
    (3, "left", "A", (), (("A", None),)),
    (4, "right", "a", (), ()),
    (5, "left", "B", (("B", "a"),), (("B", "a"),)),
    (6, "right", "b", (), ()),
    (8, "right", None, (), ()),
    (9, "left", "C", (), (("C", None),)),
    (10, "right", "c", (), ()),
    (11, "right", None, (), ()),
    (13, "right", None, (), ()),
    (14, "right", "d", (), ()),
    (15, "left", "D", (("D", "d"),), (("D", "d"),)),
)
"""Seed 003's KStream-KTable table (without the stream's null records)."""

# KTable-KTable, one entry per record: (ts, side, value, innerJoin, leftJoin, outerJoin);
# each output is None (no row) or one Change. ts 16 has no record.
TABLE_TABLE: tuple[
    tuple[int, str, str | None, Change | None, Change | None, Change | None], ...
] = (
    (1, "left", None, None, None, None),
    (2, "right", None, None, None, None),
    (3, "left", "A", None, _up("A", None), _up("A", None)),
    (4, "right", "a", _up("A", "a"), _up("A", "a"), _up("A", "a")),
    (5, "left", "B", _up("B", "a"), _up("B", "a"), _up("B", "a")),
    (6, "right", "b", _up("B", "b"), _up("B", "b"), _up("B", "b")),
    (7, "left", None, _delete(), _delete(), _up(None, "b")),
    (8, "right", None, None, None, _delete()),
    (9, "left", "C", None, _up("C", None), _up("C", None)),
    (10, "right", "c", _up("C", "c"), _up("C", "c"), _up("C", "c")),
    (11, "right", None, _delete(), _up("C", None), _up("C", None)),
    (12, "left", None, None, _delete(), _delete()),
    (13, "right", None, None, None, None),
    (14, "right", "d", None, None, _up(None, "d")),
    (15, "left", "D", _up("D", "d"), _up("D", "d"), _up("D", "d")),
    (17, "right", "d", _up("D", "d"), _up("D", "d"), _up("D", "d")),
)
"""Seed 003's KTable-KTable table (``outerJoin`` is interlace's ``full``)."""

# Foreign key, one entry per record: (ts, side, key, field, innerJoin, leftJoin). A left
# record is (k, fk) (fk None: the deletion of k); a right one is (fk, v). ts 0 publishes
# the right table's starting state (1, foo); the seed's outputs start at ts 1.
FOREIGN_KEY: tuple[tuple[int, str, Any, Any, Change | None, Change | None], ...] = (
    (0, "right", 1, "foo", None, None),
    (1, "left", "k", 1, _up(1, "foo", "k"), _up(1, "foo", "k")),
    (2, "left", "k", 2, _delete("k"), _up(2, None, "k")),
    (3, "left", "k", 3, _delete("k"), _up(3, None, "k")),
    (4, "right", 3, "bar", _up(3, "bar", "k"), _up(3, "bar", "k")),
    (5, "left", "k", None, _delete("k"), _delete("k")),
    (6, "left", "k", 1, _up(1, "foo", "k"), _up(1, "foo", "k")),
    (7, "left", "q", 10, None, _up(10, None, "q")),
    (8, "right", 10, "baz", _up(10, "baz", "q"), _up(10, "baz", "q")),
)
"""Seed 003's KTable-KTable foreign-key table (ts 3 inner: Kafka's redundant delete)."""


def _row(value: str | None, seconds: float, key: str = KEY) -> dict[str, Any]:
    return {"k": key, "v": value, "event_time": at(seconds)}


def _sentinel_batch() -> JoinBatch:
    """Rows on ``SENTINEL_KEY`` at ``SENTINEL_SECONDS`` on both sides, to move ``wm`` on."""
    return JoinBatch(
        left=(_row("SL", SENTINEL_SECONDS, SENTINEL_KEY),),
        right=(_row("SR", SENTINEL_SECONDS, SENTINEL_KEY),),
    )


def _split(
    records: list[tuple[str, dict[str, Any]]], one_per_batch: bool, sentinel: JoinBatch | None
) -> list[JoinBatch]:
    if one_per_batch:
        log = [
            JoinBatch(left=(row,)) if side == "left" else JoinBatch(right=(row,))
            for side, row in records
        ]
    else:
        log = [
            JoinBatch(
                left=tuple(row for side, row in records if side == "left"),
                right=tuple(row for side, row in records if side == "right"),
            )
        ]
    return [*log, sentinel] if sentinel is not None else log


def stream_table_log(*, one_per_batch: bool = True, sentinel: bool = True) -> list[JoinBatch]:
    """Return the KStream-KTable replay log: one record per batch (or all in one), in ts order.

    With ``sentinel``, a last batch holds a row per side on ``SENTINEL_KEY`` so that ``wm``
    passes every record (``emit="final"`` then joins them all).
    """
    records = [(side, _row(value, ts)) for ts, side, value, *_ in STREAM_TABLE]
    return _split(records, one_per_batch, _sentinel_batch() if sentinel else None)


def table_table_log(*, one_per_batch: bool = True, sentinel: bool = True) -> list[JoinBatch]:
    """Return the KTable-KTable replay log: one record per batch (or all in one), in ts order."""
    records = [(side, _row(value, ts)) for ts, side, value, *_ in TABLE_TABLE]
    return _split(records, one_per_batch, _sentinel_batch() if sentinel else None)


def foreign_key_log(*, one_per_batch: bool = True, sentinel: bool = True) -> list[JoinBatch]:
    """Return the foreign-key replay log: one record per batch (or all in one), in ts order."""
    records: list[tuple[str, dict[str, Any]]] = []
    for ts, side, key, field_value, *_ in FOREIGN_KEY:
        if side == "left":
            records.append((side, {"k": key, "fk": field_value, "event_time": at(ts)}))
        else:
            records.append((side, {"fk": key, "v": field_value, "event_time": at(ts)}))
    sentinel_batch = JoinBatch(
        left=({"k": SENTINEL_KEY, "fk": -1, "event_time": at(SENTINEL_SECONDS)},),
        right=({"fk": -2, "v": "SR", "event_time": at(SENTINEL_SECONDS)},),
    )
    return _split(records, one_per_batch, sentinel_batch if sentinel else None)


def with_tombstone_column(
    log: list[JoinBatch],
    value_column: str,
    column: str = "deleted",
    sides: tuple[str, ...] = ("left", "right"),
) -> list[JoinBatch]:
    """Return the log with tombstones marked by a boolean column instead of NULL values.

    On the given sides, a row whose ``value_column`` is NULL gets ``column=True`` and the
    value ``"~"`` (so only the column can make it a tombstone); every other row gets
    ``column=False``.
    """

    def mark(row: dict[str, Any]) -> dict[str, Any]:
        if value_column in row and row[value_column] is None:
            return {**row, value_column: "~", column: True}
        return {**row, column: False}

    def marked(side: str, rows: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
        return tuple(mark(r) for r in rows) if side in sides else rows

    return [JoinBatch(left=marked("left", b.left), right=marked("right", b.right)) for b in log]
