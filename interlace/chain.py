"""The channel between two stages of a chain (SEMANTICS §11): Parquet files and a clock.

Spark runs one ``applyInPandasWithState`` per query, so each operator of a chain runs as a
query of its own, a **stage**; a stage hands its output to the next through a channel, a
folder of Parquet files:

* **Writing** (:class:`ChannelWriter`, in the upstream query's ``foreachBatch``): each
  micro-batch's output rows go to one file, ``batch-<id>.parquet``, written under a hidden name
  and renamed into place (Spark's file source lists no file starting with ``.``), with a
  modification time later than the previous file's (the file source takes files in that
  order). A micro-batch Spark runs again after a crash finds its file there (or its number
  in the folder's ``_written`` mark, once the reader has deleted the file) and writes
  nothing: each committed row is in the channel once.
* **The clock** (:data:`~interlace.operators.CLOCK_COLUMN`): every row carries the writing
  stage's operator watermark ``wm`` of its micro-batch (from the query's offset log, which
  Spark writes before the batch runs, so a rerun stamps the same value), plus 999 µs. The
  reading stage's Spark watermark is set on it: its ``W`` is the upstream's ``wm`` (Spark
  keeps whole milliseconds) minus its own delay, and never runs ahead of rows the upstream
  can still emit. The 999 µs keep Spark's filter of rows behind the previous ``W``
  (``t <= W``) from ever removing a channel row. Before the upstream has a watermark, the
  clock is the epoch (no watermark downstream either).
* **Ticks**: a micro-batch without output rows whose watermark moved past the last file's
  (and past none) writes one clock-only
  row (:data:`~interlace.operators.common.names.TICK_COLUMN` true, every other column
  NULL), so the reader's watermark follows the upstream's even when nothing is emitted (the
  upstream's last micro-batch often is such a one). The reading operator never sees a tick.
* **Reading** (:func:`read_channel`): Spark's file source over the folder, one file (one
  upstream micro-batch) per micro-batch, ``cleanSource = "delete"``: Spark deletes a file once
  the reading query has committed the micro-batch that read it, so a channel holds only what
  its reader has not yet finished. Its checkpoint records which files it read: each is read
  once, after any crash.

Used by :func:`interlace.runner.run_pipeline` for ``[[stages]]`` pipelines; usable by hand
(docs/chains.md): write an operator's output with :class:`ChannelWriter` in ``foreachBatch``,
read it back with :func:`read_channel`, and give the next operator ``lateness_ms`` of at least
:func:`min_lateness_ms`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from interlace.operators.common.names import CLOCK_COLUMN, DEAD_LETTER_COLUMN, TICK_COLUMN

__all__ = [
    "CLOCK_COLUMN",
    "TICK_COLUMN",
    "ChannelWriter",
    "batch_watermark_ms",
    "clock_us",
    "min_lateness_ms",
    "read_channel",
]

_FILE = "batch-{:012d}.parquet"
_CLOCK_PAD_US = 999


def batch_watermark_ms(checkpoint: str | os.PathLike[str], batch_id: int) -> int:
    """Return Spark's watermark ``W`` (ms) of micro-batch ``batch_id`` of a query.

    Read from the query's offset log (``offsets/<id>``), which Spark writes before the batch
    runs: ``batchWatermarkMs`` of its metadata line. 0 before Spark has a watermark.
    """
    path = Path(checkpoint) / "offsets" / str(batch_id)
    lines = path.read_text().splitlines()
    return int(json.loads(lines[1]).get("batchWatermarkMs", 0))


def clock_us(spark_wm_ms: int, horizon_ms: int) -> int:
    """Return the clock stamped on a micro-batch's rows: ``wm`` in µs plus 999 (module doc).

    ``wm = W + H`` while Spark has a watermark (``W > 0``); else the epoch.
    """
    wm_us = (spark_wm_ms + horizon_ms) * 1000 if spark_wm_ms > 0 else 0
    return wm_us + _CLOCK_PAD_US


class ChannelWriter:
    """Writes a stage's micro-batches into its channels, once each (module docstring).

    Args:
        folders: One channel folder per reader (created if missing).
        checkpoint: The writing query's checkpoint folder (its offset log gives ``W``).
        horizon_ms: The writing operator's horizon ``H`` (``wm = W + H``).
        schema: The Arrow schema of the rows (``arrow_schema_for(df.schema, timestamp_unit="us",
            timestamp_tz="UTC")`` of the stage's output); the clock is added to it.
    """

    def __init__(self, folders: Sequence[str | os.PathLike[str]],
                 checkpoint: str | os.PathLike[str], horizon_ms: int, schema: Any) -> None:
        import pyarrow as pa

        self.folders = [Path(f) for f in folders]
        for f in self.folders:
            f.mkdir(parents=True, exist_ok=True)
        self.checkpoint = Path(checkpoint)
        self.horizon_ms = horizon_ms
        self.schema = schema.append(
            pa.field(CLOCK_COLUMN, pa.timestamp("us", tz="UTC"))).append(
            pa.field(TICK_COLUMN, pa.bool_()))

    def write(self, pdf: pd.DataFrame, batch_id: int) -> int:
        """Write micro-batch ``batch_id``'s rows (without dead letters) to every channel.

        A micro-batch without rows writes a tick where the clock moved (module docstring).

        Returns:
            The rows of the micro-batch (ticks not counted).
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        pdf = pdf.drop(columns=[DEAD_LETTER_COLUMN], errors="ignore")
        stamp = clock_us(batch_watermark_ms(self.checkpoint, batch_id), self.horizon_ms)
        tick = pdf.empty
        if tick:
            pdf = pd.DataFrame({n: [None] for n in self.schema.names[:-2]})
        table = None
        for folder in self.folders:
            final = folder / _FILE.format(batch_id)
            mark = _Mark.read(folder)
            if final.exists() or mark.batch_id >= batch_id:
                continue  # this batch ran before a crash: its rows are in the channel
            if tick and stamp <= max(mark.clock_us, _CLOCK_PAD_US):
                continue  # no watermark yet, or no newer one: nothing to tell the reader
            if table is None:
                clock = pd.Series(pd.to_datetime(stamp, unit="us", utc=True), index=pdf.index)
                table = pa.Table.from_pandas(
                    pdf.assign(**{CLOCK_COLUMN: clock, TICK_COLUMN: tick}),
                    schema=self.schema, preserve_index=False)
            tmp = folder / f".{final.name}.tmp"
            pq.write_table(table, tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            mtime_ns = max(time.time_ns(), mark.mtime_ns + 1_000_000)
            os.utime(tmp, ns=(mtime_ns, mtime_ns))
            os.replace(tmp, final)
            _Mark(batch_id, mtime_ns, stamp).write(folder)
        return 0 if tick else len(pdf)


class _Mark:
    """A channel folder's ``_written``: its last file's batch, modification time and clock.

    It outlives the file (the reader deletes read files), so a rerun batch is known as written.
    """

    NAME = "_written"

    def __init__(self, batch_id: int, mtime_ns: int, clock_us: int) -> None:
        self.batch_id, self.mtime_ns, self.clock_us = batch_id, mtime_ns, clock_us

    @classmethod
    def read(cls, folder: Path) -> _Mark:
        path = folder / cls.NAME
        if not path.exists():
            return cls(-1, 0, -1)
        batch_id, mtime_ns, clock = (int(v) for v in path.read_text().split())
        return cls(batch_id, mtime_ns, clock)

    def write(self, folder: Path) -> None:
        tmp = folder / f".{self.NAME}.tmp"
        tmp.write_text(f"{self.batch_id} {self.mtime_ns} {self.clock_us}\n")
        os.replace(tmp, folder / self.NAME)


def read_channel(spark: Any, folder: str | os.PathLike[str], schema: Any) -> Any:
    """Return a streaming DataFrame of a channel: the upstream's rows and their clock.

    Args:
        spark: The SparkSession.
        folder: The channel folder (created if missing, so a reader may start first).
        schema: The upstream stage's output schema (a Spark ``StructType``, without
            ``_dead_letter``); the clock column is added.
    """
    from pyspark.sql import types as T

    Path(folder).mkdir(parents=True, exist_ok=True)
    chain = (DEAD_LETTER_COLUMN, CLOCK_COLUMN, TICK_COLUMN)
    fields = [f for f in schema.fields if f.name not in chain]
    full = T.StructType([*fields, T.StructField(CLOCK_COLUMN, T.TimestampType(), True),
                         T.StructField(TICK_COLUMN, T.BooleanType(), True)])
    return (spark.readStream.schema(full)
            .option("maxFilesPerTrigger", 1)
            .option("cleanSource", "delete")
            .parquet(str(folder)))


def min_lateness_ms(upstream_spec: Any, column: str) -> int:
    """Return the least ``lateness_ms`` of a stage reading ``column`` of an upstream's output.

    The lag of that column (``upstream_spec.output_lags_ms()``, SEMANTICS §11).

    Raises:
        ValueError: The column has no bounded lag (or is not a time column of the output).
    """
    lags = upstream_spec.output_lags_ms()
    if column not in lags:
        msg = (f"column {column!r} has no bounded lag behind the upstream's watermark; read one "
               f"of {sorted(lags)}")
        raise ValueError(msg)
    return int(lags[column])
