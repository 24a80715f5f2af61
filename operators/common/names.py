"""Reserved and shared column names of every operator (neighbours: :mod:`.spec`, :mod:`.checks`).

Internal working columns all start with :data:`RESERVED_PREFIX`; user columns that do are
rejected when the input is prepared (:func:`interlace.operators.common.checks.reject_reserved`).
"""

from __future__ import annotations

from interlace.state.buffers import TIME_COLUMN

__all__ = [
    "CLOCK_COLUMN",
    "DEAD_LETTER_COLUMN",
    "EVENT_TIME_COLUMN",
    "EVENT_TIME_OUT",
    "OP_COLUMN",
    "VERSION_COLUMN",
    "KEY_GROUP_COLUMN",
    "RESERVED_PREFIX",
    "TICK_COLUMN",
    "TIME_US_COLUMN",
]

#: Every internal working column starts with this prefix; user columns may not.
RESERVED_PREFIX = "__il_"
#: The dead-letter column added under ``late_data="dlq"`` (SEMANTICS §4).
DEAD_LETTER_COLUMN = "_dead_letter"
#: The key group of a prepared row: the column every operator groups by.
KEY_GROUP_COLUMN = RESERVED_PREFIX + "kg"
#: The watermarked copy of the event time in the prepared input.
EVENT_TIME_COLUMN = RESERVED_PREFIX + "t"
#: The event time as int64 µs, what ``step`` reads; the join buffers keep it under the same
#: name (:data:`interlace.state.buffers.TIME_COLUMN`, ``__il_tus``).
TIME_US_COLUMN = TIME_COLUMN
#: A chain stage's input clock (SEMANTICS §11, docs/chains.md): the watermark of the stage
#: that wrote the row, as a timestamp, stamped by the channel between two stages. The one
#: reserved name an input may hold: Spark's watermark is then set on it instead of on the event
#: time (:func:`interlace.operators.common.prepare.watermarked`), so a stage's ``W`` follows its
#: upstream's watermark, not the greatest event time it has seen.
CLOCK_COLUMN = RESERVED_PREFIX + "clock"
#: The fixed columns of a changelog output (SEMANTICS §9, §10): ``op``, ``event_time``,
#: ``version``.
OP_COLUMN, EVENT_TIME_OUT, VERSION_COLUMN = "op", "event_time", "version"
#: True on a chain channel's clock-only row (a tick): it carries an upstream micro-batch's
#: watermark that emitted no rows. Spark's watermark sees it; the operator never does
#: (:func:`interlace.operators.common.prepare.watermarked` removes it right after).
TICK_COLUMN = RESERVED_PREFIX + "tick"
