"""A no-data micro-batch that a restart would skip: schedule it in the checkpoint.

After a micro-batch that moves the watermark, Spark runs one more micro-batch without data
(a *no-data* micro-batch) so that what the new watermark passed is closed: windows emitted,
outer rows of a join given their NULL side, state evicted. Spark decides to run it from the
plan of the micro-batch before, which it holds in memory only. A query stopped or killed
after a micro-batch's commit and before that decision never runs it after a restart: the
watermark is restored (the commit log holds ``nextBatchWatermarkMs``), but nothing is
scheduled until new rows arrive, so the last results of a quiet input wait, possibly
forever (docs/reliability.md, "A restart right after a commit").

:func:`schedule_pending_no_data_batch` writes, before the query starts, the offset-log entry
Spark would have written for that micro-batch: the last batch's source offsets (no new
data) with the watermark of its commit. Spark then runs it first, as it runs any planned,
uncommitted micro-batch after a restart. Nothing else in the checkpoint changes; a
checkpoint with nothing pending is left alone.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["schedule_pending_no_data_batch"]

_VERSION = "v1"  # the offset and commit log format Spark 3 and 4 write


def _latest(folder: Path) -> int | None:
    """The greatest batch id among a metadata log's files (``0``, ``1``, ...), if any."""
    ids = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
    return max(ids, default=None)


def _local(location: str | os.PathLike[str]) -> Path | None:
    """The checkpoint as a local folder (``file:`` URLs too), None for other file systems."""
    text = os.fspath(location)
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif text.startswith("file:"):
        text = text[len("file:"):]
    elif "://" in text:
        return None
    return Path(text)


def schedule_pending_no_data_batch(
    checkpoint_location: str | os.PathLike[str], spark: Any | None = None
) -> int | None:
    """Plan the no-data micro-batch a stopped query owes, so that its restart runs it.

    Call it before starting a streaming query from ``checkpoint_location`` whose stateful
    operators have event-time timeouts (``interlace run`` does, for every such query it
    starts; Spark runs no no-data micro-batch for an operator without one, such as a table
    aggregation's by-group query, so none is owed there). When the last micro-batch is
    committed and its commit's watermark for the next micro-batch is ahead of the watermark
    it ran with, Spark would have run a no-data micro-batch next; this writes its offset-log
    entry (the same offsets, that watermark), which the restarted query runs first.
    Anything else (a fresh or remote checkpoint, a batch planned but not committed, which
    Spark reruns itself, a log this does not recognise,
    ``spark.sql.streaming.noDataMicroBatches.enabled`` false) is left alone.

    Args:
        checkpoint_location: The query's checkpoint folder (local; ``file:`` URLs too).
        spark: The session, to honour ``spark.sql.streaming.noDataMicroBatches.enabled``.

    Returns:
        The id of the micro-batch planned, or None when nothing was.
    """
    if spark is not None and str(spark.conf.get(
            "spark.sql.streaming.noDataMicroBatches.enabled", "true")).lower() == "false":
        return None
    root = _local(checkpoint_location)
    if root is None or not (root / "offsets").is_dir() or not (root / "commits").is_dir():
        return None
    last = _latest(root / "offsets")
    if last is None or last != _latest(root / "commits"):
        return None
    try:
        lines = (root / "offsets" / str(last)).read_text().split("\n")
        commit = (root / "commits" / str(last)).read_text().split("\n")
        if lines[0] != _VERSION or commit[0] != _VERSION:
            return None
        meta = json.loads(lines[1])
        next_wm = int(json.loads(commit[1]).get("nextBatchWatermarkMs", 0))
        wm = int(meta.get("batchWatermarkMs", 0))
    except (OSError, IndexError, ValueError, TypeError, AttributeError):
        return None
    if next_wm <= wm:
        return None
    meta["batchWatermarkMs"] = next_wm
    meta["batchTimestampMs"] = max(int(meta.get("batchTimestampMs", 0)), int(time.time() * 1000))
    lines[1] = json.dumps(meta, separators=(",", ":"))
    target = root / "offsets" / str(last + 1)
    tmp = root / "offsets" / f".{last + 1}.interlace.tmp"
    tmp.write_text("\n".join(lines))
    os.replace(tmp, target)
    return last + 1
