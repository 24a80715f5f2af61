"""Run a :class:`~interlace.pipeline.Pipeline` on Spark: sources → operator → targets.

Sources and targets are Spark's and DuckDB's; the operator is interlace's. The query runs
until its sources are exhausted (``availableNow``) or forever (``continuous=True``) and
checkpoints to ``[spark] checkpoint``: a rerun resumes from there, and the DuckDB target skips
batches it already committed, so a run killed at any point and rerun gives exactly the
uninterrupted result.

Here: one query of a run (``_StageQuery``: its input built, its ``foreachBatch`` sink into
the target or a chain's channels, its progress drained) and :func:`run_pipeline`, which
starts the queries, one per chain stage, and watches them. The input each query reads is
built by :mod:`interlace.run_inputs` (:func:`build_query_input`); the progress lines and
the :class:`RunSummary` are :mod:`interlace.run_progress`'s. Both are re-exported here.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from interlace.faults import crash_point
from interlace.idle_run import (
    IDLE_RERUNS,
    heartbeat_folder,
    heartbeats_unread,
    idle_sources,
    observe_before_commit,
    unread_input,
    without_heartbeats,
)
from interlace.metrics import rows_read_from
from interlace.operators.common.compat import observed_fields, with_observed_input_rows
from interlace.operators.common.idle import restore_held
from interlace.operators.common.names import DEAD_LETTER_COLUMN
from interlace.operators.common.pending import schedule_pending_no_data_batch
from interlace.operators.errors import ConfigError
from interlace.pipeline.checkpoint import (
    check_checkpoint,
    heartbeat_sources,
    record_checkpoint,
    state_encoding_for,
)
from interlace.run_inputs import build_query_input
from interlace.run_progress import (
    RunSummary,
    _dropped_rows,
    _late_rows,
    _Progress,
    _report_done,
)

__all__ = ["RunSummary", "build_query_input", "run_pipeline"]

#: Settings only a new session takes (Spark refuses to change them on a running one); a
#: pipeline run on a session the caller passes leaves them to that session.
_STATIC_CONF = frozenset({"spark.jars", "spark.jars.packages", "spark.driver.memory"})


class _StageQuery:
    """One query of a run: a pipeline's operator (or a chain's stage), its sink and progress.

    ``build`` makes the streaming DataFrame (channel inputs read with the upstream stages'
    schemas), ``start`` starts it into its target, or into its channels for a stage that
    other stages read, and ``drain`` reports the micro-batches that finished.
    """

    def __init__(self, run: Any, spark: Any, base: Path, metrics: Any,
                 progress: TextIO | None) -> None:
        from interlace.metrics import counters

        self.run = run
        self.pipeline = p = run.pipeline
        self.spark = spark
        self.base = base
        self.metrics = metrics
        self.acc = counters(spark)
        self.spec = p.join if p.join is not None else (
            p.window if p.window is not None else p.aggregate)
        self.continuous = False
        self.inner: Any = None  # a table aggregation's first query (by key)
        # Spark's W of this query is wm - H; a table aggregation's second query has no
        # delay of its own: its W is its first query's wm (the channel's clock).
        self.horizon_ms = 0 if p.aggregate is not None else self.spec.horizon_ms
        self.summary = RunSummary()
        self.reporter = (
            _Progress(progress, p.name, self.horizon_ms) if progress is not None else None
        )
        self.written: dict[int, int] = {}
        # The late count as of each batch's end, taken in the sink: drain() can see several new
        # batches at once, and the accumulator then already holds the later batches' counts
        # (test_cli.py::test_progress_late_count_is_as_of_each_batch_even_when_printing_lags).
        self.late_at: dict[int, int] = {}
        self.dropped_at: dict[int, int] = {}  # likewise the operator's drops so far
        self.seen: set[int] = set()
        self.max_event: dict[str, float] = {}
        self.dropped_before = 0  # the operator's drops up to the last batch reported
        self.source_rows = 0  # rows read from sources (not from channels)
        # This batch's rows read from sources, counted in the plan, where Spark's progress
        # reported none (PySpark 3.5): None where the progress has them.
        self.counted: int | None = None
        self.query: Any = None
        self.out: Any = None
        self.target: Any = None  # the final stage's target (closed by finish())
        self.channel_paths = {
            s.name: self._path(s.path) for s in p.sources if s.name in run.upstream
        }

    def _path(self, path: str) -> Path:
        folder = Path(path)
        return folder if folder.is_absolute() else self.base / folder

    def channel_folders(self, chain_root: Path) -> list[Path]:
        """The channel folders this stage writes: one per reader (stages.py's layout)."""
        from interlace.pipeline.stages import CHANNELS_FOLDER

        return [chain_root / CHANNELS_FOLDER / self.run.stage.name / c for c in self.run.consumers]

    def build(self, schemas: dict[str, Any]) -> Any:
        """Build the stage's output DataFrame; ``schemas``: upstream stage -> output schema."""
        from interlace.chain import read_channel

        p = self.pipeline
        frames = {
            name: read_channel(self.spark, self.channel_paths[name], schemas[up])
            for name, up in self.run.upstream.items()
        }
        # An availableNow run with nothing to read: no micro-batch for a restore heartbeat alone.
        nothing_new = (not self.continuous and heartbeat_sources(p, self.base)
                       and not unread_input(p, self.base))
        held = (restore_held(heartbeat_folder(p, self.base)) if nothing_new
                else contextlib.nullcontext())
        with held, state_encoding_for(self.spark, p.checkpoint_folder(self.base)):
            out = build_query_input(self.spark, p, base=self.base, counters=self.acc,
                                    frames=frames, start_aggregate=self._start_aggregate)
        stage = self.run.stage
        if stage is not None and stage.output_sql is not None:
            out.createOrReplaceTempView("output")
            projected = self.spark.sql(stage.output_sql)
            if DEAD_LETTER_COLUMN in out.columns and DEAD_LETTER_COLUMN not in projected.columns:
                msg = (
                    f"stage {stage.name!r}: `output_sql` drops {DEAD_LETTER_COLUMN!r}, which "
                    "carries its dead letters under late_data='dlq'; select it too, e.g. "
                    "SELECT *, ... FROM output"
                )
                raise ConfigError(msg)
            out = projected
        self.out = out
        return out

    def _start_aggregate(self, df: Any, spec: Any) -> Any:
        """Start a table aggregation's first query; return the second's input-bound output.

        Its checkpoint and channel live under the stage's checkpoint folder, ``aggregate/``.
        Under ``availableNow`` it runs to the end of its input first.
        """
        from interlace.operators.table_aggregate import start_table_aggregate

        folder = self.pipeline.checkpoint_folder(self.base) / "aggregate"
        trigger = ({"processingTime": "1 second"} if self.continuous
                   else {"availableNow": True})
        self.inner, out = start_table_aggregate(
            df, spec, checkpoint_location=folder, trigger=trigger, counters=self.acc,
            after_write=lambda: crash_point("channel-written"))
        return out

    def check_inner(self) -> None:
        """Raise the error of a table aggregation's first query if it failed."""
        if self.inner is not None and not self.inner.isActive:
            error = self.inner.exception()
            if error is not None:
                raise error

    def stop_inner(self) -> None:
        """Stop a table aggregation's first query if it still runs."""
        if self.inner is not None and self.inner.isActive:
            self.inner.stop()

    def start(self, continuous: bool, chain_root: Path | None) -> None:
        """Prepare the targets (or channels) and start the query."""
        from pyspark.sql import types as T

        from interlace.chain import ChannelWriter
        from interlace.connectors import make_target
        from interlace.operators.common.arrow import arrow_schema_for
        from interlace.pipeline.kinds import join_kind

        p, out = self.pipeline, self.out
        dlq = DEAD_LETTER_COLUMN in out.columns
        normal_schema = out.drop(DEAD_LETTER_COLUMN).schema if dlq else out.schema
        checkpoint = p.checkpoint_folder(self.base)
        if self.run.final:
            target: Any = make_target(
                p.resolved_target(),
                p.name,
                base=self.base,
                default_table=p.name,
                window_groups=None if p.window is None else p.window.group_by,
                changelog=p.aggregate is not None or (
                    p.join is not None and join_kind(p.join).changelog_key is not None),
                by_group=p.aggregate is not None,
                session=p.window is not None and p.window.kind == "session",
                fresh_checkpoint=not any((checkpoint / "offsets").glob("[0-9]*")),
            )
            target.prepare(normal_schema)
            self.target = target
        else:
            assert chain_root is not None
            target = ChannelWriter(
                self.channel_folders(chain_root), checkpoint, self.horizon_ms,
                arrow_schema_for(normal_schema, timestamp_unit="us", timestamp_tz="UTC"))
        dead = None
        if dlq:
            dl_spec = p.resolved_dead_letter()
            if dl_spec is None:
                msg = (
                    "late_data='dlq' needs a [dead_letter] target for the dead letters "
                    '(e.g. kind = "duckdb", table = "dead_letters")'
                )
                raise ConfigError(msg)
            dead = make_target(
                dl_spec, p.name, base=self.base, default_table=f"{p.name}_dead_letters"
            )
            dead.prepare(T.StructType([T.StructField("dead_letter", T.StringType())]))
        summary, acc = self.summary, self.acc
        started: list[Any] = []

        def sink(df: Any, batch_id: int) -> None:
            pdf = df.toPandas()
            while not started:  # writer.start() has not returned yet
                time.sleep(0.005)
            observe_before_commit(p, self.base, started[0])  # each input's clock, pre-commit
            crash_point("batch")
            if dlq:
                letters = pdf.loc[pdf[DEAD_LETTER_COLUMN].notna(), [DEAD_LETTER_COLUMN]].rename(
                    columns={DEAD_LETTER_COLUMN: "dead_letter"}
                )
                pdf = pdf[pdf[DEAD_LETTER_COLUMN].isna()].drop(columns=[DEAD_LETTER_COLUMN])
                assert dead is not None
                summary.dead_letters += dead.write(letters.reset_index(drop=True), batch_id)
                crash_point("dead-letters-committed")
            self.written[batch_id] = target.write(pdf.reset_index(drop=True), batch_id)
            if not self.run.final:
                crash_point("channel-written")
            totals = acc.value
            self.late_at[batch_id] = _late_rows(totals)
            self.dropped_at[batch_id] = _dropped_rows(totals)

        writer = out.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
        writer = (
            writer.trigger(processingTime="1 second")
            if continuous
            else writer.trigger(availableNow=True)
        )
        record_checkpoint(p, self.base)
        if p.aggregate is None:  # a table aggregation's by-group query has no event-time timer
            schedule_pending_no_data_batch(checkpoint, self.spark)  # one a stop left owed
        self.query = writer.start()
        started.append(self.query)

    def drain(self) -> None:
        """Report every micro-batch of the query that finished since the last call."""
        from interlace.metrics import spark_dropped_rows

        spec, metrics, summary = self.spec, self.metrics, self.summary
        late_policy = spec.late_data if spec.late_data != "dlq" else "drop"
        for p in self.query.recentProgress:
            bid = int(p["batchId"])
            if bid in self.seen:
                continue
            self.seen.add(bid)
            if not p.get("stateOperators") and not int(p.get("numInputRows") or 0):
                continue  # no batch ran (a rerun with no new data): nothing to report
            totals = dict(self.acc.value)
            p, self.counted = with_observed_input_rows(p, self.channel_paths.keys())
            p = self._without_heartbeats(p)
            metrics.update_counters(totals, late_policy)
            metrics.update_progress(p, self.written.get(bid, 0))
            malformed = 0
            for name, row in (p.get("observedMetrics") or {}).items():
                # The time is a string in the session time zone, which local_session sets to UTC.
                fields = observed_fields(row)
                malformed += int(fields.get("malformed") or 0)
                value = fields.get("max_event_time")
                if value:
                    ts = _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
                    if ts.tzinfo is None:
                        ts = ts.replace(tzinfo=_dt.timezone.utc)
                    src = name.removeprefix("src_")
                    self.max_event[src] = max(self.max_event.get(src, 0.0), ts.timestamp())
                    metrics.set_watermark(src, self.max_event[src] - spec.lateness_ms / 1000)
            wm = (p.get("eventTime") or {}).get("watermark")
            if wm:
                w = _dt.datetime.strptime(wm, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                    tzinfo=_dt.timezone.utc
                )
                if w.timestamp() > 0:
                    metrics.set_watermark("_global", w.timestamp() + self.horizon_ms / 1000)
            summary.batches += 1
            summary.input_rows += int(p.get("numInputRows") or 0)
            self.source_rows += self._source_rows(p)
            summary.output_rows += self.written.get(bid, 0)
            spark_dropped = spark_dropped_rows(p)
            summary.spark_dropped += spark_dropped
            summary.malformed += malformed
            op_dropped = self.dropped_at.get(bid, _dropped_rows(totals))
            dropped = spark_dropped + op_dropped - self.dropped_before
            self.dropped_before = op_dropped
            metrics.add_malformed(malformed)
            idle = self._idle_sources(p)
            for src, since in idle.items():
                metrics.set_idle(src, since)
            if self.reporter is not None:
                late = self.late_at.get(bid, _late_rows(totals))
                self.reporter.batch(p, self.written.get(bid, 0), late, dropped, malformed,
                                    idle)

    def heartbeats_unread(self) -> bool:
        """Whether the finished availableNow query wrote heartbeats it could not read."""
        return heartbeats_unread(self.pipeline, self.base)

    def _without_heartbeats(self, progress: dict[str, Any]) -> dict[str, Any]:
        return without_heartbeats(self.pipeline, self.base, progress)

    def _idle_sources(self, progress: dict[str, Any]) -> dict[str, float | None]:
        return idle_sources(self.pipeline, self.base, progress)

    def _source_rows(self, p: dict[str, Any]) -> int:
        """Rows read in one micro-batch from the pipeline's sources (not from channels)."""
        if self.counted is not None:  # Spark reported no source's rows: the plan's counts
            return self.counted
        if not self.channel_paths:
            return int(p.get("numInputRows") or 0)
        # Per source: ``p``'s sources still count the heartbeats its numInputRows leaves out.
        others = [*self.channel_paths.values(), heartbeat_folder(self.pipeline, self.base)]
        return rows_read_from(p) - rows_read_from(p, others)

    def finish(self) -> None:
        close = getattr(self.target, "close", None)
        if close is not None:  # a Kafka target's producer
            close()
        self.summary.counters = dict(self.acc.value)
        self.summary.idle = self._idle_sources({})
        record_checkpoint(self.pipeline, self.base, ran=True)  # a checkpoint an older
        # interlace began


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

    A chain (``[[stages]]``) runs one query per stage (SEMANTICS §11, docs/chains.md): with
    ``availableNow``, one after the other in the order they depend on each other, each to the
    end of its input; with ``continuous``, all at once in one SparkSession. Each stage prints
    its own progress lines (``[CHAIN.STAGE] batch ...``) and feeds the metrics under its own
    ``pipeline`` label (``CHAIN.STAGE``).

    Args:
        pipeline: The pipeline.
        base: Folder that relative paths in the pipeline are resolved against (default: cwd).
        continuous: Keep running (processing-time trigger) instead of ``availableNow``.
        metrics_port: Serve Prometheus metrics on this port while running (0: a free port,
            printed on ``progress`` and kept in ``metrics.port``).
        progress: Where progress lines go (``None``: silent).
        spark: A SparkSession (default: one from ``[spark]``).
        metrics: A :class:`~interlace.metrics.PipelineMetrics` to feed (default: a new one).

    Returns:
        A :class:`RunSummary` (of a chain: totals over its stages, output rows of the last, and
        each stage's own in ``stages``). Ctrl-C stops the queries cleanly
        (``stopped_by_user``); a rerun resumes from the checkpoints.

    Raises:
        ConfigError: A checkpoint was written by another spec (every changed field named,
            :mod:`interlace.pipeline.checkpoint`), before Spark starts; or a problem with a
            source or target found while a query is built.
    """
    from interlace.metrics import PipelineMetrics
    from interlace.session import local_session, state_store_conf

    started = time.time()
    base = Path(base) if base is not None else Path.cwd()
    runs = pipeline.stage_runs()
    for run in runs:
        check_checkpoint(run.pipeline, base)  # a restart with another spec stops before Spark
    s = pipeline.spark
    if spark is None:
        from interlace.connectors.kafka import session_conf

        spark = local_session(
            f"interlace-{pipeline.name}",
            master=s.master,
            shuffle_partitions=s.shuffle_partitions,
            state_store=s.state_store,
            changelog_checkpointing=s.changelog_checkpointing,
            conf=session_conf(pipeline, dict(s.conf or {})),  # Kafka's connector, if read
        )
    else:
        settings = state_store_conf(s.state_store, s.changelog_checkpointing)
        for k, v in {**settings, **dict(s.conf or {})}.items():
            if k in _STATIC_CONF:  # fixed when the session started: the session's apply
                continue
            spark.conf.set(k, v)

    def kind_of(run: Any) -> str:
        p = run.pipeline
        return "join" if p.join is not None else "window" if p.window is not None else (
            "aggregate")

    metrics = metrics or PipelineMetrics(pipeline.name, kind_of(runs[-1]))
    server = metrics.serve(metrics_port) if metrics_port is not None else None
    if server is not None and progress is not None:
        print(f"metrics: http://127.0.0.1:{metrics.port}/metrics", file=progress, flush=True)
    chain_root = pipeline.checkpoint_folder(base) if pipeline.stages else None
    queries = [
        _StageQuery(run, spark, base,
                    metrics if not pipeline.stages else metrics.stage(run.pipeline.name,
                                                                      kind_of(run)),
                    progress)
        for run in runs
    ]
    for q in queries:
        q.continuous = continuous
    schemas: dict[str, Any] = {}

    def launch(q: _StageQuery) -> None:
        if q.run.stage is not None:
            crash_point("stage-started")
        out = q.build(schemas)
        if q.run.stage is not None:
            schemas[q.run.stage.name] = out.schema
        q.start(continuous, chain_root)

    stop = threading.Event()
    previous = (
        signal.getsignal(signal.SIGINT)
        if threading.current_thread() is threading.main_thread()
        else None
    )

    def on_sigint(signum: int, frame: Any) -> None:
        stop.set()

    def watch(active: list[_StageQuery]) -> None:
        """Report progress until every query in ``active`` ends, or Ctrl-C stops them.

        A query that fails raises its error here (``awaitTermination``), once the others of
        ``active`` are stopped.
        """
        try:
            while any(q.query.isActive for q in active) and not stop.is_set():
                for q in active:
                    if q.query.isActive:
                        q.query.awaitTermination(0.5 / len(active))
                    q.check_inner()
                    q.drain()
            if stop.is_set():
                summary.stopped_by_user = True
                for q in active:
                    q.query.stop()
            for q in active:
                q.query.awaitTermination()
                q.drain()
        except BaseException:
            for q in active:
                if q.query.isActive:
                    q.query.stop()
            raise

    summary = RunSummary()
    if previous is not None:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        if continuous:
            for q in queries:
                launch(q)
            watch(queries)
        else:
            for q in queries:
                if stop.is_set():
                    break
                launch(q)
                watch([q])
                for _ in range(IDLE_RERUNS):
                    if stop.is_set() or not q.heartbeats_unread():
                        break
                    launch(q)  # the heartbeats written during the run are its input too
                    watch([q])
    finally:
        for q in queries:
            q.stop_inner()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        for q in queries:
            if q.reporter is not None and q.query is not None:
                q.reporter.done()
        if server is not None and not continuous:
            server.shutdown()
    for q in queries:
        q.finish()
    _total(summary, queries, bool(pipeline.stages))
    summary.seconds = time.time() - started
    if progress is not None:
        for q in queries:
            _report_done(progress, q.summary, q.pipeline, q.base)
    return summary


def _total(summary: RunSummary, queries: list[_StageQuery], chain: bool) -> None:
    """Fill ``summary`` from its queries: the one query's, or a chain's totals and stages."""
    if not chain:
        one = queries[0].summary
        one.stopped_by_user = summary.stopped_by_user
        summary.__dict__.update(one.__dict__)
        return
    for q in queries:
        st = q.summary
        name = q.run.stage.name
        summary.stages[name] = st
        summary.batches += st.batches
        summary.input_rows += q.source_rows
        summary.dead_letters += st.dead_letters
        summary.spark_dropped += st.spark_dropped
        summary.malformed += st.malformed
        summary.counters.update({f"{name}.{k}": v for k, v in st.counters.items()})
        if q.run.final:
            summary.output_rows = st.output_rows
