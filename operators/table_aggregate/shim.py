"""The table aggregation's Spark side: two ``applyInPandasWithState`` functions and wrappers.

A table aggregation runs as two queries (Spark runs one ``applyInPandasWithState`` per
query; ``step.py`` says why two groupings), joined by a channel (:mod:`interlace.chain`):

* :class:`KeyRowsFunction` (stage 1, grouped by the key's key group, event-time timeouts):
  :func:`table_aggregate_keys` returns its output, the deltas;
* :class:`GroupsFunction` (stage 2, grouped by the group's key group, no watermark and no
  timeout: stage 1 decided when each update applies): :func:`table_aggregate_groups` reads
  the deltas and returns the changelog.

:func:`table_aggregate` wires both for a Python user: it starts stage 1's query into a
channel under a checkpoint folder and returns stage 2's DataFrame. A pipeline
(``[transform.aggregate]``) runs the two as chain stages. Neighbours: ``spec.py``,
``plan.py``, ``step.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from interlace.operators.common.arrow import arrow_schema_for, frames_to_table, table_to_pandas
from interlace.operators.common.checks import check_input, require_columns
from interlace.operators.common.compat import override
from interlace.operators.common.connect import check_counters
from interlace.operators.common.counters import add_counts
from interlace.operators.common.names import (
    CLOCK_COLUMN,
    KEY_GROUP_COLUMN,
    TICK_COLUMN,
)
from interlace.operators.common.pending import schedule_pending_no_data_batch
from interlace.operators.common.prepare import (
    group_key_sql,
    prepared_columns,
    watermarked,
    with_event_time,
    without_clock,
)
from interlace.operators.common.shim import (
    BoundOperator,
    Frames,
    OperatorFunction,
    TablesFunction,
    state_encoding_of,
)
from interlace.operators.common.worker import guard_source_checkout, prepare_worker
from interlace.operators.errors import ConfigError
from interlace.operators.table_aggregate.plan import (
    EVENT_TIME_IN,
    HAS_NEW,
    HAS_OLD,
    LETTER_COLUMN,
    TOMB_COLUMN,
    TableAggregatePlan,
)
from interlace.operators.table_aggregate.spec import TableAggregate
from interlace.operators.table_aggregate.step import group_step, key_step
from interlace.state.blob import from_state_value, to_state_value
from interlace.state.keygroups import key_group_sql
from interlace.state.table_aggregate import GroupsState, KeyRowsState

__all__ = [
    "GroupsFunction",
    "KeyRowsFunction",
    "TableAggregateOperator",
    "prepare_table_aggregate",
    "start_table_aggregate",
    "table_aggregate",
    "table_aggregate_groups",
    "table_aggregate_keys",
]


class KeyRowsFunction(TablesFunction):
    """Stage 1's ``applyInPandasWithState`` function: each key's row, deltas out (picklable).

    Each call runs :func:`~interlace.operators.table_aggregate.step.key_step` on the key
    group's :class:`~interlace.state.table_aggregate.KeyRowsState`; the timeout is the
    earliest held update's deadline.
    """

    plan: TableAggregatePlan
    state_type = KeyRowsState
    pure_step = staticmethod(key_step)

    @property
    @override
    def operator_name(self) -> str:
        """``TableAggregate`` (stage 1) in messages."""
        return "TableAggregate"


class GroupsFunction(OperatorFunction):
    """Stage 2's ``applyInPandasWithState`` function: each group's aggregates (picklable).

    Spark calls it per key group of the groups with the deltas stage 1 emitted for them (no
    timeout: it replaces :meth:`OperatorFunction.__call__`, which sets one); it runs
    :func:`~interlace.operators.table_aggregate.step.group_step` and writes the state last.
    """

    plan: TableAggregatePlan

    @override
    def __call__(self, key: Any, frames: Frames, state: Any) -> Iterator[pd.DataFrame]:
        """Process one key group of groups (see the class docstring)."""
        prepare_worker()
        plan = self.plan
        schemas = plan.group_state_schemas
        if state.exists:
            stored = GroupsState.decode(from_state_value(state.get[0]), plan.fp, *schemas)
        else:
            stored = GroupsState.empty(*schemas)
        result = group_step(plan, stored, frames_to_table(plan.delta_schema, frames))
        if result.output.num_rows:
            yield table_to_pandas(result.output)
        if self.counters is not None and result.counters:
            add_counts(self.counters, self.op_id, key, state, result.counters)
        if result.state.num_rows:
            state.update((to_state_value(result.state.encode(plan.fp), self.state_encoding),))
        else:
            state.remove()


def _spark_type(typ: Any) -> Any:
    """The Spark type of an Arrow type the plan made (outputs of the aggregations)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    if pa.types.is_decimal(typ):
        return T.DecimalType(typ.precision, typ.scale)
    return {pa.int64(): T.LongType(), pa.float64(): T.DoubleType(), pa.string(): T.StringType(),
            pa.bool_(): T.BooleanType()}[typ]


@dataclass(frozen=True)
class TableAggregateOperator:
    """A table aggregation bound to its input: stage 1 ready, stage 2 given its input.

    Attributes:
        spec: The spec.
        plan: The resolved plan.
        keys: Stage 1 bound to the prepared input (a :class:`BoundOperator`;
            ``keys.apply()`` is :func:`table_aggregate_keys`).
        input_fields: The input table's Spark fields by name (for the output's types).
        counters: The accumulator the functions feed, if any.
    """

    spec: TableAggregate
    plan: TableAggregatePlan
    keys: BoundOperator
    input_fields: dict[str, Any]
    counters: Any | None = None

    @property
    def delta_struct(self) -> Any:
        """Stage 1's output schema (a Spark ``StructType``)."""
        return self.keys.output_schema

    @property
    def output_struct(self) -> Any:
        """Stage 2's output schema: the changelog (a Spark ``StructType``)."""
        from pyspark.sql import types as T

        fields = []
        for f in self.plan.output_schema:
            if f.name in self.input_fields and f.name in self.spec.group_by:
                typ = self.input_fields[f.name]
            elif f.name == "event_time":
                typ = self.input_fields[str(self.spec.event_time_column)]
            elif f.name in {a.as_ for a in self.spec.aggregations}:
                agg = next(a for a in self.spec.aggregations if a.as_ == f.name)
                typ = (self.input_fields[str(agg.column)] if agg.agg in ("min", "max")
                       else _spark_type(f.type))
            else:
                typ = _spark_type(f.type)
            fields.append(T.StructField(f.name, typ, True))
        return T.StructType(fields)

    def groups(self, deltas: Any) -> Any:
        """Stage 2 over ``deltas`` (stage 1's output, e.g. read back from a channel)."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T
        from pyspark.sql.streaming.state import GroupStateTimeout

        if CLOCK_COLUMN in deltas.columns:
            # Stage 1's clock (its watermark, stamped by the channel) becomes this query's
            # watermark, so that a stage reading this one gets it in turn (SEMANTICS §11). A
            # channel row's clock is never behind the previous W: Spark's filter drops none.
            deltas = deltas.withWatermark(CLOCK_COLUMN, "0 milliseconds")
        if TICK_COLUMN in deltas.columns:
            tick = F.coalesce(F.col(TICK_COLUMN), F.lit(False))
            if CLOCK_COLUMN in deltas.columns:  # after the watermark node: name the clock
                tick = tick & F.col(CLOCK_COLUMN).isNotNull()
            deltas = deltas.filter(~tick).drop(TICK_COLUMN)
        groups = [f.name for f in self.plan.group_fields]
        if groups:
            types = {f.name: f.dataType for f in deltas.schema.fields}
            kg = F.expr(key_group_sql([group_key_sql(g, types[g]) for g in groups],
                                      self.spec.key_groups))
        else:
            kg = F.lit(0)
        prepared = deltas.withColumn(KEY_GROUP_COLUMN, kg.cast("int"))
        func = GroupsFunction(self.plan, self.counters)
        encoding = state_encoding_of(deltas.sparkSession)
        func.state_encoding = encoding
        blob = T.StringType() if encoding == "base64" else T.BinaryType()
        return prepared.groupBy(KEY_GROUP_COLUMN).applyInPandasWithState(
            func, self.output_struct, T.StructType([T.StructField("blob", blob, False)]),
            "append", GroupStateTimeout.NoTimeout)


def prepare_table_aggregate(
    df: Any, spec: TableAggregate, *, counters: Any | None = None
) -> TableAggregateOperator:
    """Validate ``spec`` against the changelog ``df`` and bind stage 1.

    Stage 1's prepared input holds, per update: its key group (of the key columns), the
    watermarked event time, the event time in µs, the tombstone flag (SEMANTICS §7), then
    the columns the aggregation reads (every column under ``dlq``).

    Raises:
        ConfigError: Any problem with the spec or the input (SEMANTICS §6, §10).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not isinstance(spec, TableAggregate):
        msg = f"`spec` must be a TableAggregate (got {type(spec).__name__})"
        raise ConfigError(msg)
    check_counters(df, counters)
    what = "the input table"
    check_input(df, what)
    guard_source_checkout(df.sparkSession)
    et = spec.event_time_column
    assert et is not None
    df = with_event_time(df, et, "event_time_column", what, "event")
    for field_name, cols in (("keys", spec.keys), ("group_by", spec.group_by),
                             ("aggregations", spec.columns)):
        require_columns(df, list(cols), field_name, what)
    clocked, df = df, without_clock(df)
    plan = TableAggregatePlan.from_schema(spec, arrow_schema_for(df.schema))
    if spec.tombstone_column is not None:
        require_columns(df, [spec.tombstone_column], "tombstone_column", what)
        tomb = F.coalesce(F.col(f"`{spec.tombstone_column}`").cast("boolean"), F.lit(False))
    else:
        values = (list(spec.value_columns) if spec.value_columns is not None else
                  [c for c in df.columns if c not in {*spec.keys, et}])
        require_columns(df, values, "value_columns", what)
        tomb = F.lit(True)
        for v in values:
            tomb = tomb & F.col(f"`{v}`").isNull()
    with_tomb = clocked.withColumn(TOMB_COLUMN, tomb)
    base = watermarked(with_tomb, et, [*plan.names, TOMB_COLUMN], spec.watermark_delay_ms)
    key_sql = [group_key_sql(k, df.schema[k].dataType) for k in spec.keys]
    prepared = base.select(
        *prepared_columns(base, key_sql, spec.key_groups),
        F.col(TOMB_COLUMN),
        *[F.col(f"`{n}`").alias(plan.column(i)) for i, n in enumerate(plan.names)],
    )
    fields = {f.name: f.dataType for f in df.schema.fields}
    delta_fields = [T.StructField("__il_tus", T.LongType(), True),
                    T.StructField(EVENT_TIME_IN, fields[et], True),
                    T.StructField("__il_seq", T.LongType(), True),
                    T.StructField(HAS_OLD, T.BooleanType(), True),
                    T.StructField(HAS_NEW, T.BooleanType(), True)]
    for prefix, names in (("k", spec.keys), ("g", spec.group_by), ("o", spec.columns),
                          ("n", spec.columns)):
        delta_fields += [T.StructField(f"__il_{prefix}{j}", fields[n], True)
                         for j, n in enumerate(names)]
    if plan.dlq:
        delta_fields.append(T.StructField(LETTER_COLUMN, T.StringType(), True))
    keys = BoundOperator.bind(spec, plan, prepared, KeyRowsFunction(plan, counters),
                              delta_fields)
    return TableAggregateOperator(spec, plan, keys, fields, counters)


def table_aggregate_keys(df: Any, spec: TableAggregate, *, counters: Any | None = None) -> Any:
    """Stage 1 of :func:`table_aggregate`: the deltas (one ``applyInPandasWithState``).

    Write them with :class:`interlace.chain.ChannelWriter` and read them back with
    :func:`interlace.chain.read_channel` into :func:`table_aggregate_groups`.
    """
    return prepare_table_aggregate(df, spec, counters=counters).keys.apply()


def table_aggregate_groups(deltas: Any, df: Any, spec: TableAggregate, *,
                           counters: Any | None = None) -> Any:
    """Stage 2 of :func:`table_aggregate`: the changelog, from stage 1's ``deltas``.

    Args:
        deltas: Stage 1's output, read back one stage-1 micro-batch per micro-batch (a
            channel: :func:`interlace.chain.read_channel`).
        df: The input table (its schema types the output).
        spec: The aggregation.
        counters: Optional accumulator from :func:`interlace.metrics.counters`.
    """
    return prepare_table_aggregate(df, spec, counters=counters).groups(deltas)


def table_aggregate(
    df: Any,
    spec: TableAggregate,
    *,
    checkpoint_location: str | os.PathLike[str] | None = None,
    trigger: dict[str, Any] | None = None,
    counters: Any | None = None,
) -> Any:
    """Aggregate a changelog table by other columns; return the changelog of the groups.

    SEMANTICS §10: updates are applied one at a time in event-time order; each takes its
    key's previous row out of its old group and puts the new row into its new group; a
    group emits ``upsert`` with its aggregates, or ``delete`` once empty. Output columns: the
    ``group_by`` columns, the aggregation aliases, ``op``, ``event_time``, ``version`` (per
    group, from 0), then ``_dead_letter`` under ``late_data="dlq"``. Apply it to a target
    by group, keeping the highest ``version``.

    It needs two queries (docs/table-aggregate.md): this call **starts** the first (each
    key's row, writing its deltas to a channel under ``checkpoint_location``) and returns
    the second's DataFrame, which you write as any streaming DataFrame, with a checkpoint
    of its own. Under ``trigger={"availableNow": True}`` the first query runs to the end of
    its input before this call returns; otherwise it keeps running (stop it with
    ``spark.streams``, or use :func:`start_table_aggregate`, which returns it).

    Example (``tests/replay/test_table_aggregate_replay.py`` runs it on Spark)::

        per_region = table_aggregate(accounts, TableAggregate(
            keys=["account_id"], group_by=["region"],
            aggregations=[Aggregation(agg="count", as_="accounts"),
                          Aggregation(agg="sum", column="balance", as_="total")],
            event_time_column="ts", lateness_ms=60_000), checkpoint_location="/chk/agg")

    Args:
        df: The table's changelog, a streaming DataFrame.
        spec: The aggregation.
        checkpoint_location: The folder of the first query's checkpoint and channel
            (default: ``spark.sql.streaming.checkpointLocation`` + ``/interlace-aggregate``).
        trigger: The first query's trigger, as ``DataStreamWriter.trigger``'s keywords
            (default: Spark's default, a micro-batch as soon as the previous one ends).
        counters: Optional accumulator from :func:`interlace.metrics.counters`.

    Raises:
        ConfigError: Invalid spec or input, or no checkpoint folder, before any query starts.
    """
    _, out = start_table_aggregate(df, spec, checkpoint_location=checkpoint_location,
                                   trigger=trigger, counters=counters)
    return out


def start_table_aggregate(
    df: Any,
    spec: TableAggregate,
    *,
    checkpoint_location: str | os.PathLike[str] | None = None,
    trigger: dict[str, Any] | None = None,
    counters: Any | None = None,
    after_write: Any | None = None,
) -> tuple[Any, Any]:
    """:func:`table_aggregate`, also returning the first query: ``(query, changelog)``.

    ``interlace run`` uses it, to stop and watch the first query with the second;
    ``after_write()`` runs after each micro-batch of the first query reached the channel
    (``interlace run``'s crash point ``channel-written``).
    """
    from interlace.chain import ChannelWriter, read_channel

    op = prepare_table_aggregate(df, spec, counters=counters)
    spark = df.sparkSession
    if checkpoint_location is None:
        root = spark.conf.get("spark.sql.streaming.checkpointLocation", None)
        if not root:
            msg = (
                "table_aggregate runs its first stage as a query of its own, which needs a "
                "checkpoint folder: pass checkpoint_location='/path/to/folder' (or set "
                "spark.sql.streaming.checkpointLocation)"
            )
            raise ConfigError(msg)
        checkpoint_location = os.path.join(root, "interlace-aggregate")
    folder = Path(checkpoint_location)
    channel, checkpoint = folder / "channel", folder / "keys"
    deltas = op.keys.apply()
    writer = ChannelWriter([channel], checkpoint, spec.horizon_ms,
                           arrow_schema_for(deltas.schema, timestamp_unit="us",
                                            timestamp_tz="UTC"))
    def sink(batch: Any, batch_id: int) -> None:
        writer.write(batch.toPandas(), batch_id)
        if after_write is not None:
            after_write()

    stream = (deltas.writeStream.foreachBatch(sink)
              .option("checkpointLocation", str(checkpoint)))
    if trigger:
        stream = stream.trigger(**trigger)
    schedule_pending_no_data_batch(checkpoint, spark)  # one a stop left owed, if any
    query = stream.start()
    if trigger and trigger.get("availableNow"):
        query.awaitTermination()
    return query, op.groups(read_channel(spark, channel, op.delta_struct))
