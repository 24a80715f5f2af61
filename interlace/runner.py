"""Run a :class:`~interlace.pipeline.Pipeline` on Spark: sources → operator → targets.

Sources and targets are Spark's and DuckDB's; the operator is interlace's. The query runs
until its sources are exhausted (``availableNow``) or forever (``continuous=True``) and
checkpoints to ``[spark] checkpoint``: a rerun resumes from there, and the DuckDB target skips
batches it already committed, so a run killed at any point and rerun gives exactly the
uninterrupted result.
"""

from __future__ import annotations

import datetime as _dt
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from interlace.faults import crash_point
from interlace.operators.common.names import DEAD_LETTER_COLUMN
from interlace.operators.errors import ConfigError
from interlace.pipeline.checkpoint import check_checkpoint, record_checkpoint, state_encoding_for

__all__ = ["RunSummary", "build_query_input", "run_pipeline"]


@dataclass
class RunSummary:
    """What a run did.

    ``spark_dropped`` counts input rows Spark's watermark pre-filter removed before the
    operator saw them (``numRowsDroppedByWatermark``); the operator's own late rows are in
    ``counters``. ``malformed`` counts JSON / CSV records with a field Spark could not parse
    (PERMISSIVE mode: the field is NULL, the raw record is kept for dead letters).
    """

    batches: int = 0
    input_rows: int = 0
    output_rows: int = 0
    dead_letters: int = 0
    spark_dropped: int = 0
    malformed: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    stopped_by_user: bool = False
    seconds: float = 0.0


def _check_kafka(spark: Any) -> None:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(
            "org.apache.spark.sql.kafka010.KafkaSourceProvider"
        )
    except Exception as exc:
        msg = (
            "source format 'kafka' needs Spark's Kafka connector, which is not on the classpath. "
            'Add it with [spark] conf = { "spark.jars.packages" = '
            '"org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0" } (needs Maven access) or '
            '{ "spark.jars" = "/path/to/spark-sql-kafka-0-10_2.13-4.3.0.jar,..." }'
        )
        raise ConfigError(msg) from exc


def _read_source(spark: Any, src: Any, base: Path) -> Any:
    from pyspark.sql import functions as F

    if src.format == "kafka":
        _check_kafka(spark)
    reader = spark.readStream.format(src.format)
    opts = dict(src.options or {})
    if src.format in ("parquet", "json", "csv") and "maxFilesPerTrigger" not in opts:
        opts["maxFilesPerTrigger"] = "1"
    if opts:
        reader = reader.options(**{k: str(v) for k, v in opts.items()})
    if src.schema:
        schema = src.schema
        if _tracks_malformed(src):
            # Spark's PERMISSIVE mode turns a field it cannot parse into NULL; with this column
            # it also keeps the raw record, which dead letters then carry (issue 11).
            schema = f"{schema}, {CORRUPT_RECORD} STRING"
            reader = reader.option("columnNameOfCorruptRecord", CORRUPT_RECORD)
        reader = reader.schema(schema)
    if src.path:
        path = Path(src.path)
        df = reader.load(str(path if path.is_absolute() else base / path))
    else:
        df = reader.load()
    if src.time_mode == "processing":
        et = src.event_time_column or "event_time"
        if et in df.columns:
            msg = (
                f"source {src.name!r}: time_mode='processing' synthesizes {et!r}, which the "
                "source already has; rename it or set event_time_column"
            )
            raise ConfigError(msg)
        df = df.withColumn(et, F.current_timestamp())
    if src.sql:
        df.createOrReplaceTempView("source")
        df = spark.sql(src.sql)
    return df


#: The column that holds a JSON / CSV record Spark could not parse in full (PERMISSIVE mode).
CORRUPT_RECORD = "_corrupt_record"


def _tracks_malformed(src: Any) -> bool:
    """Whether the source gets :data:`CORRUPT_RECORD` (JSON / CSV in PERMISSIVE mode)."""
    opts = {k.lower(): str(v) for k, v in dict(src.options or {}).items()}
    return (
        src.format in ("json", "csv")
        and bool(src.schema)
        and opts.get("mode", "PERMISSIVE").upper() == "PERMISSIVE"
        and "columnnameofcorruptrecord" not in opts
    )


def build_query_input(spark: Any, pipeline: Any, *, base: Path, counters: Any | None = None) -> Any:
    """Return the streaming output DataFrame of ``pipeline`` (sources → pre-stages → operator).

    JSON and CSV sources in Spark's default PERMISSIVE mode read with a
    ``_corrupt_record`` column: a record with a field Spark cannot parse keeps the raw text
    there (its bad fields are NULL), counted per micro-batch as ``malformed`` (observed metric
    ``src_NAME``) and carried into dead letters; it is left out of the operator's output rows.
    """
    from pyspark.sql import functions as F

    from interlace.operators.window import window_aggregate
    from interlace.pipeline.kinds import join_kind

    frames = {}
    for src in pipeline.sources:
        df = _read_source(spark, src, base)
        observed = []
        if src.event_time_column and src.event_time_column in df.columns:
            observed.append(F.max(src.event_time_column).alias("max_event_time"))
        if CORRUPT_RECORD in df.columns and _tracks_malformed(src):
            observed.append(F.count(CORRUPT_RECORD).alias("malformed"))
        if observed:
            df = df.observe(f"src_{src.name}", *observed)
        frames[src.name] = df
    if pipeline.join is not None:
        out = join_kind(pipeline.join).apply(  # stream_join, stream_table_join, ...
            frames[pipeline.left_source],
            frames[pipeline.right_source],
            pipeline.join,
            counters=counters,
        )
        # The raw record stays in dead letters (their `row`), not in the joined rows.
        return out.drop(*[c for c in out.columns if c.endswith(CORRUPT_RECORD)])
    assert pipeline.window is not None
    name = pipeline.window_source or pipeline.sources[0].name
    df = frames[name]
    if pipeline.transform_sql:
        df.createOrReplaceTempView("source")
        df = spark.sql(pipeline.transform_sql)
    return window_aggregate(df, pipeline.window, counters=counters)


def _dropped_rows(totals: dict[str, int]) -> int:
    """Rows the operator removed without any output so far (late, NULLs, out of range)."""
    drops = ("late_dropped", "null_event_time_dropped", "null_key_dropped", "out_of_range_dropped")
    return sum(v for k, v in totals.items() if k.startswith(drops))


def _late_rows(totals: dict[str, int]) -> int:
    """Rows the operator judged late so far: dropped plus dead-lettered, every side."""
    return sum(v for k, v in totals.items() if k.startswith(("late_dropped", "dead_lettered")))


class _Progress:
    """Prints one line per micro-batch: live on a terminal, plain log lines otherwise."""

    def __init__(self, out: TextIO, name: str, horizon_ms: int = 0) -> None:
        self.out = out
        self.tty = out.isatty()
        self.name = name
        self.horizon_ms = horizon_ms

    def watermark(self, p: dict[str, Any]) -> str:
        """The operator's watermark ``wm`` (what decides); Spark's ``W`` beside it if different.

        Under ``reopen`` / ``dlq`` Spark's watermark trails ``wm`` by the horizon ``H`` (a day
        by default under ``dlq``), so showing ``W`` alone would look a day behind the data.
        """
        spark_wm = (p.get("eventTime") or {}).get("watermark", "-")
        if self.horizon_ms == 0 or spark_wm == "-":
            return str(spark_wm)
        w = _dt.datetime.strptime(spark_wm, "%Y-%m-%dT%H:%M:%S.%fZ")
        if w <= _dt.datetime(1970, 1, 1):
            return str(spark_wm)  # none yet
        wm = w + _dt.timedelta(milliseconds=self.horizon_ms)
        shown = f"{wm.strftime('%Y-%m-%dT%H:%M:%S.')}{wm.microsecond // 1000:03d}Z"
        return f"{shown} (Spark's {spark_wm})"

    def batch(
        self, p: dict[str, Any], output_rows: int, late: int, dropped: int, malformed: int
    ) -> None:
        """Print one micro-batch: ``late`` so far; ``dropped`` and ``malformed`` in this batch."""
        ops = p.get("stateOperators") or [{}]
        line = (
            f"[{self.name}] batch {p['batchId']}: in {p.get('numInputRows', 0)} rows, "
            f"watermark {self.watermark(p)}, out {output_rows} rows, late {late}, "
            f"dropped {dropped}, malformed {malformed}, "
            f"state {sum(int(o.get('numRowsTotal') or 0) for o in ops)} groups / "
            f"{sum(int(o.get('memoryUsedBytes') or 0) for o in ops)} bytes"
        )
        if self.tty:
            self.out.write("\r\033[K" + line)
        else:
            self.out.write(line + "\n")
        self.out.flush()

    def done(self) -> None:
        if self.tty:
            self.out.write("\n")
            self.out.flush()


def run_pipeline(
    pipeline: Any,
    *,
    base: Path | None = None,
    continuous: bool = False,
    metrics_port: int | None = None,
    progress: TextIO | None = sys.stderr,
    spark: Any = None,
    metrics: Any = None,
) -> RunSummary:
    """Run ``pipeline`` until its sources are exhausted (or forever with ``continuous``).

    Args:
        pipeline: The pipeline.
        base: Folder that relative paths in the pipeline are resolved against (default: cwd).
        continuous: Keep running (processing-time trigger) instead of ``availableNow``.
        metrics_port: Serve Prometheus metrics on this port while running.
        progress: Where progress lines go (``None``: silent).
        spark: A SparkSession (default: one from ``[spark]``).
        metrics: A :class:`~interlace.metrics.PipelineMetrics` to feed (default: a new one).

    Returns:
        A :class:`RunSummary`. Ctrl-C stops the query cleanly (``stopped_by_user``); a rerun
        resumes from the checkpoint.

    Raises:
        ConfigError: The checkpoint was written by another spec (every changed field named,
            :mod:`interlace.pipeline.checkpoint`), before Spark starts; or a problem with a
            source or target found while the query is built.
    """
    from interlace.metrics import PipelineMetrics, counters, spark_dropped_rows
    from interlace.pipeline.kinds import join_kind
    from interlace.session import local_session, state_store_conf
    from interlace.targets import make_target

    started = time.time()
    base = Path(base) if base is not None else Path.cwd()
    check_checkpoint(pipeline, base)  # a restart with another spec stops before Spark starts
    s = pipeline.spark
    if spark is None:
        conf = dict(s.conf or {})
        spark = local_session(
            f"interlace-{pipeline.name}",
            master=s.master,
            shuffle_partitions=s.shuffle_partitions,
            state_store=s.state_store,
            changelog_checkpointing=s.changelog_checkpointing,
            conf=conf,
        )
    else:
        settings = state_store_conf(s.state_store, s.changelog_checkpointing)
        for k, v in {**settings, **dict(s.conf or {})}.items():
            spark.conf.set(k, v)
    acc = counters(spark)
    with state_encoding_for(spark, pipeline.checkpoint_folder(base)):
        out = build_query_input(spark, pipeline, base=base, counters=acc)
    kind = "join" if pipeline.join is not None else "window"
    spec = pipeline.join if pipeline.join is not None else pipeline.window
    dlq = DEAD_LETTER_COLUMN in out.columns
    normal_schema = out.drop(DEAD_LETTER_COLUMN).schema if dlq else out.schema
    target = make_target(
        pipeline.resolved_target(),
        pipeline.name,
        base=base,
        default_table=pipeline.name,
        window_groups=None if pipeline.window is None else pipeline.window.group_by,
        changelog=pipeline.join is not None and join_kind(pipeline.join).changelog_key is not None,
    )
    target.prepare(normal_schema)
    dead = None
    if dlq:
        from pyspark.sql import types as T

        dl_spec = pipeline.resolved_dead_letter()
        if dl_spec is None:
            msg = (
                "late_data='dlq' needs a [dead_letter] target for the dead letters "
                '(e.g. kind = "duckdb", table = "dead_letters")'
            )
            raise ConfigError(msg)
        dead = make_target(
            dl_spec, pipeline.name, base=base, default_table=f"{pipeline.name}_dead_letters"
        )
        dead.prepare(T.StructType([T.StructField("dead_letter", T.StringType())]))
    metrics = metrics or PipelineMetrics(pipeline.name, kind)
    server = metrics.serve(metrics_port) if metrics_port is not None else None
    summary = RunSummary()
    written: dict[int, int] = {}
    # The late count as of each batch's end, taken in the sink: drain() can see several new
    # batches at once, and the accumulator then already holds the later batches' counts
    # (tests/cli/test_cli.py::test_progress_late_count_is_as_of_each_batch_even_when_printing_lags).
    late_at: dict[int, int] = {}
    dropped_at: dict[int, int] = {}  # likewise the operator's drops so far

    def sink(df: Any, batch_id: int) -> None:
        pdf = df.toPandas()
        crash_point("batch")
        if dlq:
            letters = pdf.loc[pdf[DEAD_LETTER_COLUMN].notna(), [DEAD_LETTER_COLUMN]].rename(
                columns={DEAD_LETTER_COLUMN: "dead_letter"}
            )
            pdf = pdf[pdf[DEAD_LETTER_COLUMN].isna()].drop(columns=[DEAD_LETTER_COLUMN])
            assert dead is not None
            summary.dead_letters += dead.write(letters.reset_index(drop=True), batch_id)
            crash_point("dead-letters-committed")
        written[batch_id] = target.write(pdf.reset_index(drop=True), batch_id)
        totals = acc.value
        late_at[batch_id] = _late_rows(totals)
        dropped_at[batch_id] = _dropped_rows(totals)

    writer = out.writeStream.foreachBatch(sink).option(
        "checkpointLocation", str(pipeline.checkpoint_folder(base))
    )
    writer = (
        writer.trigger(processingTime="1 second")
        if continuous
        else writer.trigger(availableNow=True)
    )
    record_checkpoint(pipeline, base)
    query = writer.start()
    reporter = (
        _Progress(progress, pipeline.name, spec.horizon_ms) if progress is not None else None
    )
    seen: set[int] = set()
    max_event: dict[str, float] = {}
    late_policy = spec.late_data if spec.late_data != "dlq" else "drop"
    dropped_before = [0]  # the operator's drops up to the last batch reported

    def drain() -> None:
        for p in query.recentProgress:
            bid = int(p["batchId"])
            if bid in seen:
                continue
            seen.add(bid)
            if not p.get("stateOperators") and not int(p.get("numInputRows") or 0):
                continue  # no batch ran (a rerun with no new data): nothing to report
            totals = dict(acc.value)
            metrics.update_counters(totals, late_policy)
            metrics.update_progress(p, written.get(bid, 0))
            malformed = 0
            for name, row in (p.get("observedMetrics") or {}).items():
                # A Row (or a dict from JSON); the time is a string in the session time zone,
                # which local_session sets to UTC.
                fields = row.asDict() if hasattr(row, "asDict") else dict(row or {})
                malformed += int(fields.get("malformed") or 0)
                value = fields.get("max_event_time")
                if value:
                    ts = _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
                    if ts.tzinfo is None:
                        ts = ts.replace(tzinfo=_dt.timezone.utc)
                    src = name.removeprefix("src_")
                    max_event[src] = max(max_event.get(src, 0.0), ts.timestamp())
                    metrics.set_watermark(src, max_event[src] - spec.lateness_ms / 1000)
            wm = (p.get("eventTime") or {}).get("watermark")
            if wm:
                w = _dt.datetime.strptime(wm, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                    tzinfo=_dt.timezone.utc
                )
                if w.timestamp() > 0:
                    metrics.set_watermark("_global", w.timestamp() + spec.horizon_ms / 1000)
            summary.batches += 1
            summary.input_rows += int(p.get("numInputRows") or 0)
            summary.output_rows += written.get(bid, 0)
            spark_dropped = spark_dropped_rows(p)
            summary.spark_dropped += spark_dropped
            summary.malformed += malformed
            op_dropped = dropped_at.get(bid, _dropped_rows(totals))
            dropped = spark_dropped + op_dropped - dropped_before[0]
            dropped_before[0] = op_dropped
            metrics.add_malformed(malformed)
            if reporter is not None:
                late = late_at.get(bid, _late_rows(totals))
                reporter.batch(p, written.get(bid, 0), late, dropped, malformed)

    stop = threading.Event()
    previous = (
        signal.getsignal(signal.SIGINT)
        if threading.current_thread() is threading.main_thread()
        else None
    )

    def on_sigint(signum: int, frame: Any) -> None:
        stop.set()

    if previous is not None:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        while query.isActive and not stop.is_set():
            query.awaitTermination(0.5)
            drain()
        if stop.is_set():
            summary.stopped_by_user = True
            query.stop()
        query.awaitTermination()
        drain()
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if reporter is not None:
            reporter.done()
        if server is not None and not continuous:
            server.shutdown()
    record_checkpoint(pipeline, base, ran=True)  # a checkpoint an older interlace began
    summary.counters = dict(acc.value)
    summary.seconds = time.time() - started
    if progress is not None and summary.batches == 0 and not summary.stopped_by_user:
        progress.write(
            f"[{pipeline.name}] no new input: nothing to do (checkpoint "
            f"{pipeline.checkpoint_folder(base)} is up to date)\n"
        )
    elif progress is not None:
        progress.write(
            f"[{pipeline.name}] done: {summary.batches} batches, {summary.input_rows} rows "
            f"in, {summary.output_rows} rows out, {summary.dead_letters} dead letters, "
            f"{summary.malformed} malformed, "
            f"counters {json.dumps(summary.counters, sort_keys=True)}\n"
        )
    return summary
