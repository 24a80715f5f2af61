"""Seed 003 as a fixture: Kafka Streams' improved left/outer stream-stream join table.

The table is "Improved Left/Outer Stream-Stream Join (v3.1.x and newer)", window 15, grace 5.

The table is kept as data (``KAFKA_TABLE``) so that tests, and the Spark replay harness,
can build the same replay log and compare emission batches with the table's.

Mapping to interlace (``JOIN_KWARGS``): ``time_window_ms=15_000`` (Kafka's
``JoinWindows.ofTimeDifferenceAndGrace(15, 5)``: before = after = 15), ``lateness_ms=0``,
``late_data="reopen"`` with ``allowed_lateness_ms=5_000`` (Kafka's grace is interlace's
allowed lateness). All records share one key. Timestamps are seconds after ``BASE``.

The replay log (``build_log``) has one micro-batch per table record, in timestamp order,
then one batch with a sentinel row per side on another key at ``SENTINEL_SECONDS`` so the
watermark moves past every table row.

Kafka Streams ignores records with a null value in stream-stream joins
(``KStreamKStreamJoin`` skips them: "null-value indicates an empty message, there is
nothing to be joined"), so the table's ``null`` records (ts 1, 2, 7, 8, 11, 12, 13) produce
nothing there and are left out of the log.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from interlace.testing.log import JoinBatch

BASE = datetime(2026, 1, 1)
"""Time 0 of the table (naive UTC)."""

KEY = "k1"
"""The one key every table record has."""

SENTINEL_KEY = "sentinel"
"""The key of the two sentinel rows (different from ``KEY``, so they only match each other)."""

SENTINEL_SECONDS = 1000
"""Event time of the sentinel rows, in seconds after ``BASE``."""

COLUMNS = ("k", "v", "event_time")
"""Columns of both inputs: join key, the table's value letter, event time."""

JOIN_KWARGS: dict[str, Any] = {
    "left_keys": ("k",),
    "right_keys": ("k",),
    "time_window_ms": 15_000,
    "event_time_column": "event_time",
    "lateness_ms": 0,
    "late_data": "reopen",
    "allowed_lateness_ms": 5_000,
}
"""Join parameters equivalent to the table's join (``how`` is chosen per test)."""

Pair = tuple[str | None, str | None]
TableRow = tuple[int, str, str, tuple[Pair, ...], tuple[Pair, ...], tuple[Pair, ...]]

# One entry per table row that carries a non-null record, in table order:
# (ts in seconds, side, value, innerJoin outputs, leftJoin outputs, outerJoin outputs).
# An output "X - Y" is the pair ("X", "Y"); "E - null" is ("E", None), "null - f" (None, "f").
KAFKA_TABLE: tuple[TableRow, ...] = (
    (3, "left", "A", (), (), ()),
    (4, "right", "a", (("A", "a"),), (("A", "a"),), (("A", "a"),)),
    (5, "left", "B", (("B", "a"),), (("B", "a"),), (("B", "a"),)),
    (
        6,
        "right",
        "b",
        (("A", "b"), ("B", "b")),
        (("A", "b"), ("B", "b")),
        (("A", "b"), ("B", "b")),
    ),
    (
        9,
        "left",
        "C",
        (("C", "a"), ("C", "b")),
        (("C", "a"), ("C", "b")),
        (("C", "a"), ("C", "b")),
    ),
    (
        10,
        "right",
        "c",
        (("A", "c"), ("B", "c"), ("C", "c")),
        (("A", "c"), ("B", "c"), ("C", "c")),
        (("A", "c"), ("B", "c"), ("C", "c")),
    ),
    (
        14,
        "right",
        "d",
        (("A", "d"), ("B", "d"), ("C", "d")),
        (("A", "d"), ("B", "d"), ("C", "d")),
        (("A", "d"), ("B", "d"), ("C", "d")),
    ),
    (
        15,
        "left",
        "D",
        (("D", "a"), ("D", "b"), ("D", "c"), ("D", "d")),
        (("D", "a"), ("D", "b"), ("D", "c"), ("D", "d")),
        (("D", "a"), ("D", "b"), ("D", "c"), ("D", "d")),
    ),
    (40, "left", "E", (), (), ()),
    (60, "left", "F", (), (("E", None),), (("E", None),)),
    (80, "right", "f", (), (("F", None),), (("F", None),)),
    (100, "left", "G", (), (), ((None, "f"),)),
)

SENTINEL_BATCH = len(KAFKA_TABLE)
"""Index of the micro-batch holding the two sentinel rows (right after the table)."""


def at(seconds: float) -> datetime:
    """Return the event time ``seconds`` after ``BASE``."""
    return BASE + timedelta(seconds=seconds)


def record(value: str, seconds: float, key: str = KEY) -> dict[str, Any]:
    """Return one input row of either side."""
    return {"k": key, "v": value, "event_time": at(seconds)}


def build_log() -> list[JoinBatch]:
    """Return the replay log: one batch per table record, then the sentinel batch."""
    log = []
    for seconds, side, value, *_ in KAFKA_TABLE:
        row = record(value, seconds)
        log.append(JoinBatch(left=(row,)) if side == "left" else JoinBatch(right=(row,)))
    log.append(
        JoinBatch(
            left=(record("SL", SENTINEL_SECONDS, SENTINEL_KEY),),
            right=(record("SR", SENTINEL_SECONDS, SENTINEL_KEY),),
        )
    )
    return log


def kafka_emit_batches(column: str) -> dict[Pair, int]:
    """Return, for one output column of the table, pair -> batch index where Kafka emits it.

    Args:
        column: ``"inner"``, ``"left"`` or ``"outer"``.
    """
    emitted: dict[Pair, int] = {}
    for batch_index, (*_, inner, left_join, outer_join) in enumerate(KAFKA_TABLE):
        pairs = {"inner": inner, "left": left_join, "outer": outer_join}[column]
        for pair in pairs:
            assert pair not in emitted, f"{pair} emitted twice in the table"
            emitted[pair] = batch_index
    return emitted
