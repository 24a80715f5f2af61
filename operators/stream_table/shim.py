"""The stream-table join's Spark side: the ``applyInPandasWithState`` function and wrappers.

:class:`StreamTableJoinFunction` is the only stream-table code touching ``GroupState`` (through
:class:`~interlace.operators.common.shim.OperatorFunction`): it decodes the key group's blob,
runs the pure :func:`~interlace.operators.stream_table.step.step` and writes the state last.
:func:`prepare_stream_table_join` validates the inputs and prepares them (side tag, key group,
watermarked event time, µs time); :func:`stream_table_join` runs it. Neighbours: ``spec.py``,
``plan.py``, ``step.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interlace.operators.common.arrow import arrow_schema_for
from interlace.operators.common.compat import override
from interlace.operators.common.docs import PREPARE_RETURNS, RUN_RAISES, fill_doc, operator_usage
from interlace.operators.common.keytypes import spark_key_types
from interlace.operators.common.names import DEAD_LETTER_COLUMN
from interlace.operators.common.prepare import checked_inputs, two_sided_input, without_clock
from interlace.operators.common.shim import BoundOperator, TablesFunction, TableStepResult
from interlace.operators.common.watermark import NO_DEADLINE_MS, timeout_ms_when_reached
from interlace.operators.stream_table.plan import RIGHT_VALID_FROM, StreamTablePlan
from interlace.operators.stream_table.spec import StreamTableJoin
from interlace.operators.stream_table.step import StreamTableStepResult, step
from interlace.state.tables import StreamTableState

__all__ = [
    "NO_DEADLINE_MS",
    "StreamTableJoinFunction",
    "StreamTableOperator",
    "prepare_stream_table_join",
    "stream_table_join",
]


class StreamTableJoinFunction(TablesFunction):
    """The ``applyInPandasWithState`` function of a stream-table join (picklable).

    Each call runs :func:`step` on the key group's :class:`StreamTableState` (see
    :class:`~interlace.operators.common.shim.TablesFunction`); the timeout is the earliest
    pending deadline in Spark's domain: a held row is due when ``wm > t``
    (:func:`~interlace.operators.common.watermark.timeout_ms_when_past`), a stored version is
    trimmed when ``wm >= deadline`` (:func:`timeout_ms_when_reached`).
    """

    plan: StreamTablePlan
    state_type = StreamTableState
    pure_step = staticmethod(step)

    @override
    def _deadlines_ms(self, result: TableStepResult) -> list[int]:
        deadlines = super()._deadlines_ms(result)
        assert isinstance(result, StreamTableStepResult)
        if result.next_trim_us is not None:
            deadlines.append(timeout_ms_when_reached(result.next_trim_us, self.plan.horizon_ms))
        return deadlines


@fill_doc(usage=operator_usage("stream_table_join", "orders_df, customers_df"))
@dataclass(frozen=True)
class StreamTableOperator(BoundOperator):
    """A stream-table join bound to its inputs, ready for ``groupBy().applyInPandasWithState``.

    {usage}
    """

    spec: StreamTableJoin
    plan: StreamTablePlan
    func: StreamTableJoinFunction


@fill_doc(returns=PREPARE_RETURNS.format(operator="StreamTableOperator"))
def prepare_stream_table_join(
    stream: Any, table: Any, spec: StreamTableJoin, *, counters: Any | None = None,
    heartbeat_location: Any | None = None
) -> StreamTableOperator:
    """Validate ``spec`` against the stream and the table and prepare them for the join.

    The prepared input holds, per row: its side, key group (of the keys cast to the type both
    inputs compare them in), a watermarked copy of the event time, the event time in µs, and
    every column of its input (the other input's columns NULL). Each input gets
    ``withWatermark(event_time, lateness_ms + H)`` before the union (``H = HR``, plus
    ``dlq_horizon_ms`` under dlq), so Spark combines the two watermarks by
    ``spark.sql.streaming.multipleWatermarkPolicy``.

    Args:
        stream: The stream (left), a streaming DataFrame.
        table: The table's changelog (right), a streaming DataFrame.
        spec: The join.
        counters: Optional Spark accumulator (see :mod:`interlace.metrics`) fed per call.
        heartbeat_location: The folder of the inputs' heartbeats, required with
            ``left_idle_timeout_ms`` / ``right_idle_timeout_ms``; given, each input's
            watermark is also restored at every start (docs/idle-inputs.md).

    {returns}
    """
    from pyspark.sql import types as T

    sides = checked_inputs(stream, table, spec, counters, ("the stream", "the table"),
                           heartbeat_location=heartbeat_location)
    sdf, tdf = (without_clock(df) for df, _ in sides)  # the clock sets the watermark only
    tet = sides[1][1]
    plan = StreamTablePlan.from_schemas(
        spec, arrow_schema_for(sdf.schema), arrow_schema_for(tdf.schema)
    )
    key_types = spark_key_types(sdf, tdf, spec.left_keys, spec.right_keys)
    prepared = two_sided_input(spec, sides, key_types, (plan.stream_payload, plan.table_payload))
    names = iter(plan.output_names)
    out_fields = [T.StructField(next(names), f.dataType, True) for f in sdf.schema.fields]
    out_fields += [
        T.StructField(next(names), tdf.schema[v].dataType, True) for v in plan.value_names
    ]
    out_fields.append(T.StructField(RIGHT_VALID_FROM, tdf.schema[tet].dataType, True))
    if plan.dlq:
        out_fields.append(T.StructField(DEAD_LETTER_COLUMN, T.StringType(), True))
    func = StreamTableJoinFunction(plan, counters)
    return StreamTableOperator.bind(spec, plan, prepared, func, out_fields)


@fill_doc(raises=RUN_RAISES)
def stream_table_join(
    stream: Any, table: Any, spec: StreamTableJoin, *, counters: Any | None = None,
    heartbeat_location: Any | None = None
) -> Any:
    """Join a stream with a changelog table as of event time and return the streaming result.

    interlace owns the watermark (SEMANTICS §1): do not set one yourself. Output columns
    (SEMANTICS §8): every stream column prefixed ``left_prefix``, the table's value columns
    prefixed ``right_prefix``, then ``right_valid_from`` (the joined version's event time,
    NULL when the key is absent), then ``_dead_letter`` under ``late_data="dlq"``.

    Example (the same call runs on Spark in ``tests/replay/test_stream_table_replay.py``)::

        enriched = stream_table_join(orders, customers_changelog, StreamTableJoin(
            left_keys=["customer_id"], right_keys=["customer_id"], how="left",
            event_time_column="ts", lateness_ms=60_000))

    Args:
        stream: The stream (left), a streaming DataFrame.
        table: The table's changelog (right), a streaming DataFrame.
        spec: The join.
        counters: Optional accumulator from :func:`interlace.metrics.counters`.
        heartbeat_location: The folder of the inputs' heartbeats, required with
            ``left_idle_timeout_ms`` / ``right_idle_timeout_ms``; given, each input's
            watermark is also restored at every start (docs/idle-inputs.md).

    {raises}
    """
    return prepare_stream_table_join(stream, table, spec, counters=counters,
        heartbeat_location=heartbeat_location).apply()
