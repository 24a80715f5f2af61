"""Replay a log of micro-batches through real Spark, deterministically.

Each input stream is a file source (Parquet) reading one file per trigger
(``maxFilesPerTrigger=1``): the harness writes file ``i`` of every input for log batch ``i``
(an empty file when that input has no rows), so Spark's micro-batch ``i`` holds exactly log batch
``i`` of every input. The query runs with ``trigger(availableNow=True)``; a ``foreachBatch``
sink writes each micro-batch's output rows, tagged with the batch id, to Parquet in the work
folder, read back once the query ends, so the same harness runs on a classic SparkSession and
over Spark Connect, whose ``foreachBatch`` function runs in a server-side Python process that
cannot hand rows to the client's objects. Spark may add a no-data batch when the
watermark moved (it does at the end of every run): :attr:`ReplayResult.batches` says which
batches read which log batch, and :meth:`ReplayResult.scheduled` returns the log as Spark ran
it (an empty batch for each no-data batch), which is what the oracle should be given.

``restart_at=[k]`` stops the query after log batch ``k - 1`` and restarts it from the same
checkpoint for the rest: the second run must resume with the operator's state.

Example::

    from interlace.testing import JoinBatch, replay_join
    result = replay_join(spark, log, left_schema, right_schema, spec, workdir=tmp_path)
    result.rows        # [(batch_id, {column: value}), ...]
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ReplayBatch", "ReplayResult", "replay_join", "replay_streams", "write_parquet_rows"]

#: Column holding the batch id in the collected output files (interlace's reserved prefix).
BATCH_ID_COLUMN = "__il_replay_batch_id"


@dataclass(frozen=True)
class ReplayBatch:
    """One micro-batch Spark ran.

    Attributes:
        batch_id: Spark's batch id.
        log_index: The log batch it read, or ``None`` for a no-data batch.
        watermark_ms: Spark's watermark ``W`` during the batch (0 if none yet).
        num_input_rows: Rows read.
        timestamp_ms: The batch's timestamp (``batchTimestampMs`` in the checkpoint's offset
            log): the value ``current_timestamp()`` takes in it, i.e. the processing time of
            every row under ``time_mode="processing"``.
    """

    batch_id: int
    log_index: int | None
    watermark_ms: int
    num_input_rows: int
    timestamp_ms: int | None = None

    def with_timestamp(self, checkpoint: Path) -> ReplayBatch:
        """Return a copy with ``timestamp_ms`` read from ``checkpoint``'s offset log."""
        import dataclasses
        import json

        lines = (checkpoint / "offsets" / str(self.batch_id)).read_text().splitlines()
        return dataclasses.replace(self, timestamp_ms=int(json.loads(lines[1])["batchTimestampMs"]))


@dataclass
class ReplayResult:
    """Output and schedule of a replay."""

    rows: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    batches: list[ReplayBatch] = field(default_factory=list)

    def scheduled(self, log: Sequence[Any], empty: Callable[[], Any]) -> list[Any]:
        """Return ``log`` as Spark ran it: ``empty()`` in place of each no-data batch.

        A trailing no-data batch is left out: the oracle adds it by the same rule Spark uses.
        """
        return [log[b.log_index] if b.log_index is not None else empty()
                for b in self._through_last_data()]

    def scheduled_times_ms(self) -> list[int]:
        """Return the timestamp (ms) of each batch :meth:`scheduled` lists, in its order.

        What the oracles take as ``batch_times_ms`` under ``time_mode="processing"``.
        """
        times = [b.timestamp_ms for b in self._through_last_data()]
        if None in times:
            msg = "batch timestamps were not recorded (replay_streams records them)"
            raise ValueError(msg)
        return [int(t) for t in times if t is not None]

    def _through_last_data(self) -> list[ReplayBatch]:
        """The batches in order, up to and including the last one that read log rows."""
        batches = sorted(self.batches, key=lambda b: b.batch_id)
        last_data = max((i for i, b in enumerate(batches) if b.log_index is not None), default=-1)
        return batches[: last_data + 1]

    def rows_by_batch(self) -> dict[int, list[dict[str, Any]]]:
        """Group output rows by batch id."""
        grouped: dict[int, list[dict[str, Any]]] = {}
        for bid, row in self.rows:
            grouped.setdefault(bid, []).append(row)
        return grouped


def _arrow_schema(schema: Any) -> Any:
    import pyarrow as pa
    from pyspark.sql import types as T

    from interlace.operators.common.compat import spark_to_arrow_type

    fields = []
    for f in schema.fields:
        if isinstance(f.dataType, T.TimestampType):
            at = pa.timestamp("us", tz="UTC")
        else:  # nested timestamps are UTC too (the session time zone)
            at = spark_to_arrow_type(f.dataType)
        fields.append(pa.field(f.name, at, nullable=True))
    return pa.schema(fields)


def write_parquet_rows(
    path: Path, rows: Sequence[Mapping[str, Any]], schema: Any, mtime: float
) -> None:
    """Write ``rows`` (naive datetimes meaning UTC) as one Parquet file with ``schema``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    aschema = _arrow_schema(schema)
    cols: dict[str, list[Any]] = {n: [] for n in aschema.names}
    for r in rows:
        for n in aschema.names:
            v = r.get(n)
            if isinstance(v, _dt.datetime) and v.tzinfo is None:
                v = v.replace(tzinfo=_dt.timezone.utc)
            cols[n].append(v)
    table = pa.Table.from_pydict(cols, schema=aschema)
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    os.utime(path, (mtime, mtime))


def replay_streams(
    spark: Any,
    streams: Mapping[str, tuple[Any, Sequence[Sequence[Mapping[str, Any]]]]],
    build: Callable[[Mapping[str, Any]], Any],
    *,
    workdir: str | Path | None = None,
    restart_at: Sequence[int] = (),
    checkpoint: str | Path | None = None,
) -> ReplayResult:
    """Replay per-batch rows of several inputs through ``build`` on real Spark.

    Args:
        spark: A SparkSession, classic or Spark Connect with a server on this machine (session
            time zone UTC; see :func:`interlace.local_session`).
        streams: Input name -> (Spark schema, rows per log batch). All inputs have the same
            number of log batches.
        build: Takes ``{name: streaming DataFrame}`` and returns the streaming output.
        workdir: Where input files and the checkpoint go (a temporary folder if omitted).
        restart_at: Log-batch indices before which the query is stopped and restarted from
            its checkpoint.
        checkpoint: Checkpoint location (default: inside ``workdir``).

    Returns:
        The collected rows and the batch schedule.
    """
    lengths = {len(batches) for _, batches in streams.values()}
    if len(lengths) != 1:
        msg = f"every input needs the same number of log batches (got {sorted(lengths)})"
        raise ValueError(msg)
    (n,) = lengths
    own_dir = workdir is None
    root = Path(tempfile.mkdtemp(prefix="interlace-replay-")) if own_dir else Path(workdir)  # type: ignore[arg-type]
    ckpt = Path(checkpoint) if checkpoint is not None else root / "checkpoint"
    result = ReplayResult()
    try:
        for name in streams:
            (root / "in" / name).mkdir(parents=True, exist_ok=True)
        out_dir = tempfile.mkdtemp(prefix="out-", dir=root)  # fresh, even in a reused workdir
        out_schema = None
        cuts = sorted({0, *[k for k in restart_at if 0 < k < n], n})
        base_mtime = 1_700_000_000.0
        for start, stop in zip(cuts, cuts[1:], strict=False):
            for i in range(start, stop):
                for name, (schema, batches) in streams.items():
                    write_parquet_rows(
                        root / "in" / name / f"{i:06d}.parquet", batches[i], schema, base_mtime + i
                    )
            frames = {
                name: spark.readStream.schema(schema)
                .option("maxFilesPerTrigger", 1)
                .parquet(str(root / "in" / name))
                for name, (schema, _) in streams.items()
            }
            out = build(frames)
            out_schema = out.schema
            query = (
                out.writeStream.foreachBatch(_batch_writer(out_dir))
                .option("checkpointLocation", str(ckpt))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            seen = {b.batch_id for b in result.batches}
            for p in query.recentProgress:
                if p["batchId"] in seen:
                    continue
                result.batches.append(_batch_info(p, len(streams)).with_timestamp(ckpt))
        result.batches.sort(key=lambda b: b.batch_id)
        result.rows = _read_output(spark, out_dir, out_schema)
        return result
    finally:
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)


def _batch_writer(out_dir: str) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function: append the batch, tagged with its id, to ``out_dir``.

    It refers to nothing but ``out_dir``, so it pickles to the server under Spark Connect.
    """

    def write(df: Any, batch_id: int) -> None:
        tagged = df.selectExpr("*", f"CAST({int(batch_id)} AS BIGINT) AS `{BATCH_ID_COLUMN}`")
        tagged.write.mode("append").parquet(out_dir)

    return write


def _read_output(spark: Any, out_dir: str, schema: Any) -> list[tuple[int, dict[str, Any]]]:
    """The rows :func:`_batch_writer` wrote, as ``(batch_id, row)`` in batch order."""
    if schema is None:
        return []
    from pyspark.sql import types as T

    tagged = T.StructType([*schema.fields, T.StructField(BATCH_ID_COLUMN, T.LongType(), False)])
    rows = []
    for row in spark.read.schema(tagged).parquet(out_dir).collect():
        d = row.asDict()
        rows.append((int(d.pop(BATCH_ID_COLUMN)), d))
    rows.sort(key=lambda r: r[0])
    return rows


def _batch_info(progress: Mapping[str, Any], n_inputs: int) -> ReplayBatch:
    from interlace.operators.common.compat import progress_json, source_offset

    progress = progress_json(progress)
    starts, ends = [], []
    for src in progress["sources"]:
        for key, acc in (("startOffset", starts), ("endOffset", ends)):
            off = source_offset(src.get(key))
            acc.append(-1 if off is None else int(off["logOffset"]))
    advanced = [e > s for s, e in zip(starts, ends, strict=True)]
    log_index = max(ends) if any(advanced) else None
    wm_raw = (progress.get("eventTime") or {}).get("watermark")
    wm_ms = 0
    if wm_raw:
        wm = _dt.datetime.strptime(wm_raw, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=_dt.timezone.utc)
        wm_ms = int(wm.timestamp() * 1000)
    n_rows = progress.get("numInputRows")  # absent from the progress Spark Connect returns
    if n_rows is None:
        n_rows = sum(int(src["numInputRows"]) for src in progress["sources"])
    return ReplayBatch(int(progress["batchId"]), log_index, wm_ms, int(n_rows))


def replay_join(
    spark: Any,
    log: Sequence[Any],
    left_schema: Any,
    right_schema: Any,
    spec_or_build: Any,
    **kwargs: Any,
) -> ReplayResult:
    """Replay a :class:`~interlace.testing.log.JoinBatch` log through a join on real Spark.

    Args:
        spark: The SparkSession.
        log: The log (``JoinBatch(left=..., right=...)`` per micro-batch).
        left_schema: Spark schema of the left input.
        right_schema: Spark schema of the right input.
        spec_or_build: A :class:`~interlace.Join`, or a callable ``(left_df, right_df) -> df``
            (e.g. Spark's native join, for comparison).
        **kwargs: Passed to :func:`replay_streams` (``workdir``, ``restart_at``).
    """
    if callable(spec_or_build):
        build = spec_or_build
    else:
        from interlace.operators.join import stream_join

        spec = spec_or_build

        def build(left: Any, right: Any) -> Any:
            return stream_join(left, right, spec)

    streams = {
        "left": (left_schema, [list(b.left) for b in log]),
        "right": (right_schema, [list(b.right) for b in log]),
    }
    return replay_streams(spark, streams, lambda f: build(f["left"], f["right"]), **kwargs)
