"""Replay-log types shared by the join oracle and the Spark replay harness.

A replay log is the input of one streaming query, cut into micro-batches: element ``b`` of
a :data:`JoinLog` is exactly what Spark reads in micro-batch ``b``. The oracle
(:func:`interlace.testing.oracle.oracle_join`) and the replay harness consume the same log,
so their outputs can be compared batch by batch.

Event-time values in rows are :class:`datetime.datetime`, naive, meaning UTC (the Spark
session time zone is UTC). Every comparison converts them with :func:`to_us` to integer
microseconds since the epoch, Spark's ``TimestampType`` resolution, without going through
floats.

Example:
    >>> from datetime import datetime
    >>> batch = JoinBatch(left=({"k": 1, "event_time": datetime(2026, 1, 1)},))
    >>> len(batch.left), len(batch.right)
    (1, 0)
    >>> to_us(datetime(1970, 1, 1, 0, 0, 1, 5))
    1000005

"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

__all__ = ["EPOCH", "JoinBatch", "JoinLog", "to_us"]

EPOCH = datetime(1970, 1, 1)
"""The Unix epoch as a naive UTC datetime; ``to_us(EPOCH) == 0``."""


@dataclass(frozen=True, slots=True)
class JoinBatch:
    """One micro-batch of a join's input: the rows each side delivers in it.

    Attributes:
        left: Rows of the left input, in arrival order; each a dict column -> value.
        right: Rows of the right input, in arrival order; each a dict column -> value.
        left_clock_us: For a chain stage's input read from a channel (SEMANTICS §11): the
            clock its rows (or its tick, with no rows) carry in this batch, µs; the input's
            watermark then follows the clock, not the event times (``spark_rules``, rule 1).
            None: an ordinary input, or no file of the channel in this batch.
        right_clock_us: The same for the right input.
        left_heartbeat_us: An idle input's heartbeat read in this batch (SEMANTICS §1, idle
            inputs): a clock-only row that the left input's watermark node sees, µs; never
            filtered, joined, counted or dead-lettered. None: no heartbeat.
        right_heartbeat_us: The same for the right input.

    """

    left: tuple[dict[str, Any], ...] = ()
    right: tuple[dict[str, Any], ...] = ()
    left_clock_us: int | None = None
    right_clock_us: int | None = None
    left_heartbeat_us: int | None = None
    right_heartbeat_us: int | None = None

    def __post_init__(self) -> None:
        # Accept lists (or any iterable) for convenience; store tuples so the batch stays
        # an immutable value.
        object.__setattr__(self, "left", tuple(self.left))
        object.__setattr__(self, "right", tuple(self.right))


JoinLog = Sequence[JoinBatch]
"""A join's replay log: one :class:`JoinBatch` per micro-batch, in order."""


def to_us(dt: datetime) -> int:
    """Convert an event time to integer microseconds since the Unix epoch.

    Exact integer arithmetic (no float round trip), so every microsecond survives, also
    for times before 1970 (negative results). A naive datetime means UTC; an aware one is
    converted to UTC first.

    Args:
        dt: The event time. Subclasses such as ``pandas.Timestamp`` work too (their
            nanoseconds are ignored, as Spark's ``TimestampType`` has microseconds).

    Returns:
        Microseconds since 1970-01-01T00:00:00 UTC.

    Raises:
        TypeError: If ``dt`` is not a datetime (``None`` included).

    """
    if not isinstance(dt, datetime):
        msg = f"event time must be a datetime.datetime (got {type(dt).__name__}: {dt!r})"
        raise TypeError(msg)
    if dt.tzinfo is not None and dt.utcoffset() is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    # Rebuild as a plain datetime so subclass arithmetic (pandas.Timestamp) cannot interfere.
    plain = datetime(dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, dt.microsecond)
    delta = plain - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
