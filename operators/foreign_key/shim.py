"""The foreign-key join's Spark side: the ``applyInPandasWithState`` function and wrappers.

:class:`ForeignKeyJoinFunction` is the only foreign-key code touching ``GroupState`` (through
:class:`~interlace.operators.common.shim.OperatorFunction`): it decodes the key group's blob,
runs the pure :func:`~interlace.operators.foreign_key.step.step` and writes the state last.
:func:`prepare_foreign_key_join` validates both changelogs and prepares them (side tag, key
group of the left primary key, every right update replicated into every key group, the home
flag, watermarked event time, µs time); :func:`foreign_key_join` runs it. Neighbours:
``spec.py``, ``plan.py``, ``step.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interlace.operators.common.arrow import arrow_schema_for, frames_to_table, table_to_pandas
from interlace.operators.common.checks import require_columns
from interlace.operators.common.compat import override
from interlace.operators.common.connect import check_counters
from interlace.operators.common.keytypes import spark_key_types
from interlace.operators.common.prepare import checked_side, two_sided_input
from interlace.operators.common.shim import BoundOperator, CallResult, Frames, OperatorFunction
from interlace.operators.common.watermark import timeout_ms_when_past
from interlace.operators.common.worker import guard_source_checkout
from interlace.operators.foreign_key.plan import ForeignKeyJoinPlan
from interlace.operators.foreign_key.spec import ForeignKeyJoin
from interlace.operators.foreign_key.step import step
from interlace.state.foreign_key import (
    ForeignKeyState,
    decode_foreign_key_state,
    encode_foreign_key_state,
)

__all__ = [
    "NO_DEADLINE_MS",
    "ForeignKeyJoinFunction",
    "ForeignKeyJoinOperator",
    "foreign_key_join",
    "prepare_foreign_key_join",
]

NO_DEADLINE_MS = 253_402_300_799_999
"""The timeout of a key group with state but no deadline (9999-12-31): it never fires."""


class ForeignKeyJoinFunction(OperatorFunction):
    """The ``applyInPandasWithState`` function of a foreign-key join (picklable).

    Per call it decodes the key group's blob, runs :func:`step` with ``wm_us = (W + H) * 1000``
    (``None`` while Spark's ``W <= 0``), yields the changelog, writes the state last, and sets
    one event-time timeout at the earliest held update's deadline (due when ``wm > t``).
    """

    plan: ForeignKeyJoinPlan

    @override
    def _call(self, blob: bytes | None, frames: Frames, wm_us: int | None) -> CallResult:
        """Decode the state, run :func:`step`, encode what remains."""
        plan = self.plan
        schemas = (plan.left_schema, plan.right_schema, plan.held_schema)
        if blob is not None:
            state = decode_foreign_key_state(blob, plan.fp, *schemas)
        else:
            state = ForeignKeyState.empty(*schemas)
        batch = frames_to_table(plan.input_schema, frames)
        result = step(plan, state, batch, wm_us)
        stored = None
        if result.state.num_rows:
            timeout = NO_DEADLINE_MS
            if result.next_due_us is not None:
                timeout = timeout_ms_when_past(result.next_due_us, plan.horizon_ms)
            stored = (encode_foreign_key_state(result.state, plan.fp), timeout)
        output = table_to_pandas(result.output) if result.output.num_rows else None
        return CallResult(output, result.counters, stored)


@dataclass(frozen=True)
class ForeignKeyJoinOperator(BoundOperator):
    """A foreign-key join bound to its inputs, ready for ``groupBy().applyInPandasWithState``.

    The low-level usage gives the same rows as :func:`foreign_key_join`::

        op = prepare_foreign_key_join(orders_changelog, products_changelog, spec)
        out = op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
            op.func, op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)
    """

    spec: ForeignKeyJoin
    plan: ForeignKeyJoinPlan
    func: ForeignKeyJoinFunction


def prepare_foreign_key_join(
    left: Any, right: Any, spec: ForeignKeyJoin, *, counters: Any | None = None
) -> ForeignKeyJoinOperator:
    """Validate ``spec`` against both changelogs and prepare them for the join.

    The prepared input holds, per row: its side, key group, a watermarked copy of the event
    time, the event time in µs, the home flag, and every column of its table (the other
    table's columns NULL). A left row goes to the key group of its primary key; a right
    update is copied into every key group (``key_groups`` copies; the one in the key group of
    its own key is its home, which counts it). Each input gets
    ``withWatermark(event_time, lateness_ms + H)`` before the union (``H`` = 0, plus
    ``dlq_horizon_ms`` under dlq).

    Args:
        left: The left table's changelog (it holds the foreign key), a streaming DataFrame.
        right: The right table's changelog, a streaming DataFrame.
        spec: The join.
        counters: Optional Spark accumulator (see :mod:`interlace.metrics`) fed per call.

    Returns:
        A :class:`ForeignKeyJoinOperator`.

    Raises:
        ConfigError: Any problem with the inputs (SEMANTICS §6), before a query starts.
    """
    from pyspark.sql import types as T

    guard_source_checkout(left.sparkSession)
    check_counters(left, counters)
    ldf, let = checked_side(left, spec, "left", "the left table", "event")
    rdf, ret = checked_side(right, spec, "right", "the right table", "event")
    require_columns(ldf, spec.foreign_key_columns, "foreign_key_columns", "the left table")
    plan = ForeignKeyJoinPlan.from_schemas(
        spec, arrow_schema_for(ldf.schema), arrow_schema_for(rdf.schema)
    )
    fk_types = spark_key_types(ldf, rdf, spec.foreign_key_columns, spec.right_keys,
                               fields=("foreign_key_columns", "right_keys"))
    left_types = [ldf.schema[k].dataType for k in spec.left_keys]
    prepared = two_sided_input(
        (ldf, rdf),
        (let, ret),
        (spec.left_keys, spec.right_keys),
        (left_types, fk_types),
        (plan.sides[0].payload, plan.sides[1].payload),
        spec.watermark_delay_ms,
        spec.key_groups,
        replicated_side=1,
    )
    names = iter(plan.output_names)
    fields = [T.StructField(next(names), t, True) for t in left_types]
    for df, side in ((ldf, plan.sides[0]), (rdf, plan.sides[1])):
        fields += [T.StructField(next(names), df.schema[v].dataType, True)
                   for v in side.value_names]
    fields.append(T.StructField(next(names), T.StringType(), True))
    fields.append(T.StructField(next(names), ldf.schema[let].dataType, True))
    fields.append(T.StructField(next(names), T.LongType(), True))
    if plan.dlq:
        fields.append(T.StructField(next(names), T.StringType(), True))
    func = ForeignKeyJoinFunction(plan, counters)
    return ForeignKeyJoinOperator.bind(spec, plan, prepared, func, fields)


def foreign_key_join(
    left: Any, right: Any, spec: ForeignKeyJoin, *, counters: Any | None = None
) -> Any:
    """Join a changelog table with another by a foreign key; return the join's changelog.

    interlace owns the watermark (SEMANTICS §1): do not set one yourself. Output columns
    (SEMANTICS §9): ``left_keys``, ``left_prefix`` + the left value columns,
    ``right_prefix`` + the right ones, ``op`` (``"upsert"`` / ``"delete"``; values NULL on
    delete), ``event_time`` (the applied update's: a right update's for every left key it
    touches), ``version`` (per left key, from 0), then ``_dead_letter`` under
    ``late_data="dlq"``. Apply it to a target by key, keeping the highest ``version``; a
    ``delete`` of an absent key is a no-op (Kafka's redundant deletes).

    Example (the same call runs on Spark in ``tests/replay/test_foreign_key_replay.py``)::

        by_fk = foreign_key_join(orders_changelog, products_changelog, ForeignKeyJoin(
            left_keys=["order_id"], foreign_key_columns=["product_id"],
            right_keys=["product_id"], how="left", event_time_column="ts",
            lateness_ms=60_000))

    Args:
        left: The left table's changelog (it holds the foreign key), a streaming DataFrame.
        right: The right table's changelog, a streaming DataFrame.
        spec: The join.
        counters: Optional accumulator from :func:`interlace.metrics.counters`.

    Raises:
        ConfigError: Invalid spec or inputs, before any query starts.
    """
    return prepare_foreign_key_join(left, right, spec, counters=counters).apply()
