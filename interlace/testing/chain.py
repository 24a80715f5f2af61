"""Compose the oracles of a chain by hand (SEMANTICS §11): what a channel hands a stage.

A chain stage reads the files its upstream's channel holds, one per micro-batch, in order
(:mod:`interlace.chain`); each file holds one upstream micro-batch's output rows (dead letters
go elsewhere) and the clock they carry: the upstream's operator watermark ``wm = W + H`` of
that micro-batch plus 999 µs (the epoch plus 999 µs before Spark has a ``W``). A micro-batch
without output rows writes a tick (no rows, the clock) when its clock is past the last
file's. :func:`channel_files` turns an upstream oracle's result into those files;
:func:`window_log` and :func:`join_log` into the log of the reading stage's oracle, whose
watermark then follows the clocks (``spark_rules.watermark_times``).

Independent of the operators, as every oracle here: the rule is written out again, not
imported from :mod:`interlace.chain`.

Example:
    >>> from datetime import datetime
    >>> from types import SimpleNamespace as NS
    >>> from interlace.testing.oracles import WindowBatch, oracle_window
    >>> counts = NS(kind="tumbling", duration_ms=60_000, lateness_ms=0, event_time_column="t",
    ...             group_by=["user"], aggregations=[NS(agg="count", column=None, as_="n",
    ...                                                 mode=None)])
    >>> up = oracle_window(counts, [
    ...     WindowBatch(rows=[{"user": "a", "t": datetime(2026, 1, 1, 0, 0, 5)}]),
    ...     WindowBatch(rows=[{"user": "a", "t": datetime(2026, 1, 1, 0, 2)}])],
    ...     columns=["user", "t"])
    >>> [(len(rows), clock) for rows, clock in channel_files(up, horizon_ms=0)]
    [(0, 1767225605000999), (1, 1767225720000999)]

    Batch 0 has no ``W`` yet and emits nothing: no file. Batch 1 (``W`` = 00:00:05) emits
    nothing either: a tick with its clock. The trailing no-data batch 2 (``W`` = 00:02)
    emits the window ``[00:00, 00:01)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest
from typing import Any

from interlace.testing.log import JoinBatch
from interlace.testing.oracles.rows import DEAD_LETTER_COLUMN
from interlace.testing.oracles.window import WindowBatch

__all__ = ["ChannelFile", "channel_files", "join_log", "window_log"]

ChannelFile = tuple[tuple[dict[str, Any], ...], int]
"""One file of a channel: its rows (none for a tick) and the clock they carry, µs."""

_CLOCK_PAD_US = 999


def channel_files(result: Any, *, horizon_ms: int) -> list[ChannelFile]:
    """Return the files a stage's channel holds after it ran as ``result`` says.

    Args:
        result: An oracle result of the upstream stage (``rows`` with ``batch`` and ``row``,
            ``spark_watermarks_ms`` per micro-batch, the trailing no-data one included).
        horizon_ms: The upstream operator's ``H`` (``wm = W + H``).

    Returns:
        One ``(rows, clock_us)`` per file, in the order the reader takes them.
    """
    files: list[ChannelFile] = []
    last_clock = -1
    for batch, w_ms in enumerate(result.spark_watermarks_ms):
        clock = ((w_ms + horizon_ms) * 1000 if w_ms > 0 else 0) + _CLOCK_PAD_US
        rows = tuple(
            {k: v for k, v in out.row.items() if k != DEAD_LETTER_COLUMN}
            for out in result.rows
            if out.batch == batch and out.row.get(DEAD_LETTER_COLUMN) is None
        )
        if rows or clock > max(last_clock, _CLOCK_PAD_US):  # rows, or a tick that moves
            files.append((rows, clock))
            last_clock = clock
    return files


def window_log(files: Sequence[ChannelFile]) -> list[WindowBatch]:
    """Return the log of a window stage reading one channel: a batch per file."""
    return [WindowBatch(rows=rows, clock_us=clock) for rows, clock in files]


def join_log(
    left: Sequence[ChannelFile] | None, right: Sequence[ChannelFile] | None,
    *, left_rows: Sequence[Sequence[dict[str, Any]]] = (),
    right_rows: Sequence[Sequence[dict[str, Any]]] = (),
) -> list[JoinBatch]:
    """Return the log of a two-input stage: batch ``j`` takes the ``j``-th file of each input.

    Each input reads one file per micro-batch (``maxFilesPerTrigger = 1``), so an input with
    fewer files has none in the later batches. An input that is a source instead of a
    channel is given as its per-batch rows (``left_rows`` / ``right_rows``), without clocks.
    """
    lefts: list[Any] = list(left) if left is not None else [(tuple(r), None) for r in left_rows]
    rights: list[Any] = (list(right) if right is not None
                         else [(tuple(r), None) for r in right_rows])
    empty: Any = ((), None)
    return [
        JoinBatch(left=lrows, right=rrows, left_clock_us=lclock, right_clock_us=rclock)
        for (lrows, lclock), (rrows, rclock) in zip_longest(lefts, rights, fillvalue=empty)
    ]
