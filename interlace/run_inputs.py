"""A pipeline's streaming input for the runner: its sources read, then its operator applied.

:func:`build_query_input` reads each source through its connector
(:func:`interlace.connectors.read_source`: files, ``rate``, Kafka), applies its ``sql`` and
``time_mode = "processing"``, counts its rows in the plan (observed metric ``src_NAME``), and
applies the pipeline's operator: the join of its kind, the window, or a table aggregation,
whose first query the caller starts (``start_aggregate``). JSON and CSV sources in PERMISSIVE
mode, and Kafka's JSON values, keep a record that does not parse in :data:`CORRUPT_RECORD`
(counted as ``malformed``). A chain stage's channels arrive already
read (``frames``). :mod:`interlace.runner` starts the query this builds;
:mod:`interlace.run_progress` reports it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from interlace.connectors import read_source
from interlace.connectors.files import CORRUPT_RECORD, tracks_malformed
from interlace.idle_run import heartbeat_folder, with_idle_sources
from interlace.operators.common.compat import OBSERVED_ROWS
from interlace.operators.common.names import CLOCK_COLUMN, TICK_COLUMN
from interlace.operators.errors import ConfigError
from interlace.pipeline.checkpoint import heartbeat_sources

__all__ = ["CORRUPT_RECORD", "build_query_input"]


def _read_source(spark: Any, src: Any, base: Path) -> Any:
    from pyspark.sql import functions as F

    df = read_source(spark, src, base)
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


def _tracks_malformed(src: Any) -> bool:
    """Whether the source gets :data:`CORRUPT_RECORD` (JSON / CSV, PERMISSIVE; Kafka JSON)."""
    return bool(src.is_kafka_json) or tracks_malformed(src)


def build_query_input(
    spark: Any,
    pipeline: Any,
    *,
    base: Path,
    counters: Any | None = None,
    frames: dict[str, Any] | None = None,
    start_aggregate: Any | None = None,
    read_only: bool = False,
) -> Any:
    """Return the streaming output DataFrame of ``pipeline`` (sources → pre-stages → operator).

    A table aggregation runs two queries: ``start_aggregate(df, spec)`` starts the first and
    returns the second's DataFrame (the runner's ``_StageQuery`` passes it).

    JSON and CSV sources in Spark's default PERMISSIVE mode read with a
    ``_corrupt_record`` column: a record with a field Spark cannot parse keeps the raw text
    there (its bad fields are NULL), counted per micro-batch as ``malformed`` (observed metric
    ``src_NAME``) and carried into dead letters; it is left out of the operator's output rows.

    ``frames``: inputs already read, by source name (a chain stage's channels,
    :func:`interlace.chain.read_channel`); the other sources are read here.

    ``read_only``: build the query without heartbeat sources (an idle input's heartbeats are
    written into the checkpoint; ``interlace inspect`` only reads it). The operator's plan is
    the same: heartbeats change the watermark, not the columns joined.
    """
    from pyspark.sql import functions as F

    from interlace.operators.window import window_aggregate
    from interlace.pipeline.kinds import join_kind

    frames = dict(frames or {})
    for src in pipeline.sources:
        if src.name in frames:  # a channel: its rows counted too (PySpark 3.5, see runner.py)
            frames[src.name] = frames[src.name].observe(
                f"src_{src.name}", F.count(F.lit(1)).alias(OBSERVED_ROWS))
            continue
        df = _read_source(spark, src, base)
        # Rows read, counted in the plan: PySpark 3.5's progress can report 0 for every file
        # source (compat.with_observed_input_rows).
        observed = [F.count(F.lit(1)).alias(OBSERVED_ROWS)]
        if src.event_time_column and src.event_time_column in df.columns:
            observed.append(F.max(src.event_time_column).alias("max_event_time"))
        if CORRUPT_RECORD in df.columns and _tracks_malformed(src):
            observed.append(F.count(CORRUPT_RECORD).alias("malformed"))
        df = df.observe(f"src_{src.name}", *observed)
        frames[src.name] = df
    if pipeline.join is not None:
        spec = with_idle_sources(pipeline)
        beats = heartbeat_sources(pipeline, base) and not read_only
        if read_only:
            spec = dataclasses.replace(spec, left_idle_timeout_ms=None,
                                       right_idle_timeout_ms=None)
        out = join_kind(spec).apply(  # stream_join, stream_table_join, ...
            frames[pipeline.left_source],
            frames[pipeline.right_source],
            spec,
            counters=counters,
            heartbeat_location=str(heartbeat_folder(pipeline, base)) if beats else None,
        )
        # The raw record stays in dead letters (their `row`), not in the joined rows.
        return out.drop(*[c for c in out.columns if c.endswith(CORRUPT_RECORD)])
    name = (pipeline.resolved_aggregate_source() if pipeline.aggregate is not None
            else pipeline.window_source or pipeline.sources[0].name)
    df = frames[name]
    if pipeline.transform_sql:
        df.createOrReplaceTempView("source")
        projected = spark.sql(pipeline.transform_sql)
        lost = [c for c in (CLOCK_COLUMN, TICK_COLUMN) if c in df.columns
                and c not in projected.columns]
        if lost:
            msg = (
                f"the operator's `sql` drops {lost}, which a chain stage's input carries from "
                "its channel (its clock: the upstream's watermark, docs/chains.md); keep "
                "them, e.g. SELECT *, ... FROM source"
            )
            raise ConfigError(msg)
        df = projected
    if pipeline.aggregate is not None:
        if start_aggregate is None:
            msg = ("a table aggregation runs two Spark queries: run its pipeline with "
                   "`interlace run` (run_pipeline), or call interlace.table_aggregate")
            raise ConfigError(msg)
        return start_aggregate(df, pipeline.aggregate)
    assert pipeline.window is not None
    return window_aggregate(df, pipeline.window, counters=counters)
