"""The join's Spark side: the ``applyInPandasWithState`` function and the public wrapper.

:class:`JoinFunction` is the only join code touching ``GroupState``: it decodes the key
group's blob, runs the pure :func:`~interlace.operators.join.step.step` and writes the state
last. :func:`prepare_join` validates the inputs and prepares them (side tag, key group,
watermarked event time, µs time, shared slots); :func:`stream_join` runs it.
:func:`prepared_layout` builds the same prepared layout without Spark, for tests and the
local runner. Neighbours: ``spec.py``, ``plan.py``, ``step.py``; what every operator's shim
shares is in :mod:`interlace.operators.common.shim`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from interlace.operators.common.arrow import arrow_schema_for, frames_to_table, table_to_pandas
from interlace.operators.common.compat import override
from interlace.operators.common.docs import PREPARE_RETURNS, RUN_RAISES, fill_doc
from interlace.operators.common.keytypes import spark_key_types
from interlace.operators.common.names import DEAD_LETTER_COLUMN
from interlace.operators.common.prepare import (
    checked_inputs,
    prepared_columns,
    shared_clock,
    watermarked,
    without_clock,
)
from interlace.operators.common.shim import BoundOperator, CallResult, Frames, OperatorFunction
from interlace.operators.common.watermark import timeout_ms_when_past
from interlace.operators.join.plan import (
    LEFT,
    LEFT_PREFIX_INTERNAL,
    RIGHT,
    SIDE_COLUMN,
    JoinPlan,
)
from interlace.operators.join.spec import Join
from interlace.operators.join.step import step
from interlace.state.buffers import JoinBuffers, decode_join_state, encode_join_state

__all__ = ["JoinFunction", "JoinOperator", "prepare_join", "prepared_layout", "stream_join"]


class JoinFunction(OperatorFunction):
    """The ``applyInPandasWithState`` function of a join (picklable; holds only the plan).

    Per call it decodes the key group's blob, concatenates the input frames, runs :func:`step`
    with ``wm_us = (W + H) * 1000`` (``None`` while Spark's ``W <= 0``), yields the output,
    writes the state last, and sets one event-time timeout at the earliest close time converted
    to Spark's domain: Spark fires when ``W > timeout``, and ``wm > close`` ⇔
    ``W * 1000 > close - H * 1000`` ⇔ ``W > (close - H * 1000) // 1000``.
    """

    plan: JoinPlan

    @override
    def _call(self, blob: bytes | None, frames: Frames, wm_us: int | None) -> CallResult:
        """Decode the buffers, run :func:`step`, encode the buffers that remain."""
        plan = self.plan
        if blob is not None:
            buffers = decode_join_state(
                blob, plan.fp, plan.left_buffer_schema, plan.right_buffer_schema
            )
        else:
            buffers = JoinBuffers.empty(plan.left_buffer_schema, plan.right_buffer_schema)
        batch = frames_to_table(plan.input_schema, frames, plan.input_sources)
        result = step(plan, buffers, batch, wm_us)
        stored = None
        if result.state.num_rows:
            assert result.next_close_us is not None
            close_ms = timeout_ms_when_past(result.next_close_us, plan.horizon_ms)
            stored = (encode_join_state(result.state, plan.fp, plan.time_columns), close_ms)
        output = table_to_pandas(result.output) if result.output.num_rows else None
        return CallResult(output, result.counters, stored)


def prepared_layout(plan: JoinPlan, batch: pa.Table) -> pa.Table:
    """Lay ``batch`` out as :func:`prepare_join`'s prepared input (inverse of frames_to_table).

    ``batch`` has ``plan.input_schema``; the result has the side tag, µs time, ``__il_t`` and
    the shared slots (no key group). For driving :class:`JoinFunction` without Spark.
    """
    is_left = pc.equal(batch.column(SIDE_COLUMN), LEFT)
    nl = len(plan.left_names)
    sources = plan.input_sources
    columns: dict[str, pa.ChunkedArray] = {}
    for name in dict.fromkeys(sources):
        lcols = [i for i in range(2, 2 + nl) if sources[i] == name]
        rcols = [i for i in range(2 + nl, len(sources)) if sources[i] == name]
        if not lcols and not rcols:  # side tag, µs time
            columns[name] = batch.column(sources.index(name))
            continue
        lval = batch.column(lcols[0]) if lcols else None
        rval = batch.column(rcols[0]) if rcols else None
        typ = (lval if lval is not None else rval).type  # type: ignore[union-attr]
        columns[name] = pc.if_else(
            is_left,
            lval if lval is not None else pa.nulls(batch.num_rows, typ),
            rval if rval is not None else pa.nulls(batch.num_rows, typ),
        )
    return pa.table(columns)


@dataclass(frozen=True)
class JoinOperator(BoundOperator):
    """A join bound to its inputs, ready for ``groupBy().applyInPandasWithState``.

    The low-level usage the Spark docs teach gives the same rows as :func:`stream_join`::

        op = prepare_join(left_df, right_df, spec)
        out = op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
            op.func, op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)

    The attributes are :class:`~interlace.operators.common.shim.BoundOperator`'s; ``prepared`` is
    the unioned, side-tagged, key-grouped, watermarked input.
    """

    spec: Join
    plan: JoinPlan
    func: JoinFunction


@fill_doc(returns=PREPARE_RETURNS.format(operator="JoinOperator"))
def prepare_join(left: Any, right: Any, spec: Join, *, counters: Any | None = None,
    heartbeat_location: Any | None = None) -> JoinOperator:
    """Validate ``spec`` against the inputs and prepare them for the join.

    The prepared input holds, per row: its side, key group, a watermarked copy of the event
    time, the event time in µs, and every column of its side (the other side's columns null).
    Each input gets ``withWatermark(event_time, lateness_ms + H)`` before the union, so Spark
    combines the two watermarks by ``spark.sql.streaming.multipleWatermarkPolicy``.

    Args:
        left: The left streaming DataFrame.
        right: The right streaming DataFrame.
        spec: The join.
        counters: Optional Spark accumulator (see :mod:`interlace.metrics`) fed per call.
        heartbeat_location: The folder of the inputs' heartbeats, required with
            ``left_idle_timeout_ms`` / ``right_idle_timeout_ms``; given, each input's
            watermark is also restored at every start (docs/idle-inputs.md).

    {returns}
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    (lclocked, let), (rclocked, ret) = shared_clock(checked_inputs(
        left, right, spec, counters, ("the left input", "the right input"), spec.time_mode,
        heartbeat_location=heartbeat_location,
    ))
    ldf, rdf = without_clock(lclocked), without_clock(rclocked)  # the columns joined
    plan = JoinPlan.from_schemas(
        spec,
        arrow_schema_for(ldf.schema),
        arrow_schema_for(rdf.schema),
        left_type_ids=[f.dataType.json() for f in ldf.schema.fields],
        right_type_ids=[f.dataType.json() for f in rdf.schema.fields],
    )
    key_types = spark_key_types(ldf, rdf, spec.left_keys, spec.right_keys)

    def side_frame(clocked: Any, et: str, side: int, keys: Sequence[str]) -> Any:
        base = watermarked(clocked, et, clocked.columns, spec.watermark_delay_ms)
        df = ldf if side == LEFT else rdf
        kg_inputs = [
            f"CAST(`{k}` AS {t.simpleString()})" for k, t in zip(keys, key_types, strict=True)
        ]
        cols = [
            F.lit(side).cast("int").alias(SIDE_COLUMN),
            *prepared_columns(base, kg_inputs, spec.key_groups),
        ]
        # Both sides' columns share slots (payload_sources); the event-time columns are __il_t.
        for slot, li, ri in plan.slots:
            idx = li if side == LEFT else ri
            if idx is not None:
                cols.append(F.col(f"`{df.columns[idx]}`").alias(slot))
            else:
                typ = (ldf if li is not None else rdf).schema.fields[li if li is not None else ri]
                cols.append(F.lit(None).cast(typ.dataType).alias(slot))
        return base.select(*cols)

    prepared = side_frame(lclocked, let, LEFT, spec.left_keys).unionByName(
        side_frame(rclocked, ret, RIGHT, spec.right_keys)
    )
    out_fields = []
    for o in plan.outputs:
        src = ldf if o.side == LEFT else rdf
        idx = int(o.internal[len(LEFT_PREFIX_INTERNAL) :])
        out_fields.append(T.StructField(o.name, src.schema.fields[idx].dataType, True))
    if plan.dlq:
        out_fields.append(T.StructField(DEAD_LETTER_COLUMN, T.StringType(), True))
    return JoinOperator.bind(spec, plan, prepared, JoinFunction(plan, counters), out_fields)


@fill_doc(raises=RUN_RAISES)
def stream_join(left: Any, right: Any, spec: Join, *, counters: Any | None = None,
    heartbeat_location: Any | None = None) -> Any:
    """Join two streaming DataFrames per ``spec`` and return the streaming result.

    interlace owns the watermark: each input gets ``withWatermark`` with delay
    ``lateness_ms + H`` (SEMANTICS §1); do not set one yourself. Output columns: the left
    columns prefixed ``left_prefix``, then the right columns prefixed ``right_prefix`` (semi /
    anti: the left columns unprefixed), then ``_dead_letter`` under ``late_data="dlq"``.

    Example (the same call runs on Spark in ``tests/replay/test_join_replay.py``)::

        out = stream_join(orders, payments, Join(
            left_keys=["order_id"], right_keys=["order_id"], how="left",
            time_window_ms=600_000, event_time_column="ts"))

    Args:
        left: The left streaming DataFrame.
        right: The right streaming DataFrame.
        spec: The join.
        counters: Optional accumulator from :func:`interlace.metrics.counters`; receives
            matches, unmatched rows emitted, late / null-key rows dropped, dead letters.
        heartbeat_location: The folder of the inputs' heartbeats, required with
            ``left_idle_timeout_ms`` / ``right_idle_timeout_ms``; given, each input's
            watermark is also restored at every start (docs/idle-inputs.md).

    {raises}
    """
    return prepare_join(left, right, spec, counters=counters,
        heartbeat_location=heartbeat_location).apply()
