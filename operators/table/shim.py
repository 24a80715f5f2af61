"""The table-table join's Spark side: the ``applyInPandasWithState`` function and wrappers.

:class:`TableJoinFunction` is the only table-table code touching ``GroupState`` (through
:class:`~interlace.operators.common.shim.OperatorFunction`): it decodes the key group's blob,
runs the pure :func:`~interlace.operators.table.step.step` and writes the state last.
:func:`prepare_table_join` validates both changelogs and prepares them (side tag, key group,
watermarked event time, µs time); :func:`table_join` runs it. Neighbours: ``spec.py``,
``plan.py``, ``step.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interlace.operators.common.arrow import arrow_schema_for
from interlace.operators.common.docs import PREPARE_RETURNS, RUN_RAISES, fill_doc, operator_usage
from interlace.operators.common.keytypes import spark_key_types
from interlace.operators.common.prepare import checked_inputs, without_clock
from interlace.operators.common.shim import BoundOperator, TablesFunction, bind_changelog_join
from interlace.operators.common.watermark import NO_DEADLINE_MS
from interlace.operators.table.plan import TableJoinPlan
from interlace.operators.table.spec import TableJoin
from interlace.operators.table.step import step
from interlace.state.table_join import TableJoinState

__all__ = ["NO_DEADLINE_MS", "TableJoinFunction", "TableJoinOperator", "prepare_table_join",
           "table_join"]


class TableJoinFunction(TablesFunction):
    """The ``applyInPandasWithState`` function of a table-table join (picklable).

    Each call runs :func:`step` on the key group's :class:`TableJoinState` (see
    :class:`~interlace.operators.common.shim.TablesFunction`); the timeout is the earliest
    held update's deadline.
    """

    plan: TableJoinPlan
    state_type = TableJoinState
    pure_step = staticmethod(step)


@fill_doc(usage=operator_usage("table_join", "left_changelog, right_changelog"))
@dataclass(frozen=True)
class TableJoinOperator(BoundOperator):
    """A table-table join bound to its inputs, ready for ``groupBy().applyInPandasWithState``.

    {usage}
    """

    spec: TableJoin
    plan: TableJoinPlan
    func: TableJoinFunction


@fill_doc(returns=PREPARE_RETURNS.format(operator="TableJoinOperator"))
def prepare_table_join(
    left: Any, right: Any, spec: TableJoin, *, counters: Any | None = None,
    heartbeat_location: Any | None = None
) -> TableJoinOperator:
    """Validate ``spec`` against both changelogs and prepare them for the join.

    The prepared input holds, per row: its side, key group (of the keys cast to the type both
    tables compare them in), a watermarked copy of the event time, the event time in µs, and
    every column of its table (the other table's columns NULL). Each input gets
    ``withWatermark(event_time, lateness_ms + H)`` before the union (``H`` = 0, plus
    ``dlq_horizon_ms`` under dlq).

    Args:
        left: The left table's changelog, a streaming DataFrame.
        right: The right table's changelog, a streaming DataFrame.
        spec: The join.
        counters: Optional Spark accumulator (see :mod:`interlace.metrics`) fed per call.
        heartbeat_location: The folder of the inputs' heartbeats, required with
            ``left_idle_timeout_ms`` / ``right_idle_timeout_ms``; given, each input's
            watermark is also restored at every start (docs/idle-inputs.md).

    {returns}
    """
    sides = checked_inputs(left, right, spec, counters, ("the left table", "the right table"),
                           heartbeat_location=heartbeat_location)
    ldf, rdf = (without_clock(df) for df, _ in sides)  # the clock sets the watermark only
    plan = TableJoinPlan.from_schemas(
        spec, arrow_schema_for(ldf.schema), arrow_schema_for(rdf.schema)
    )
    key_types = spark_key_types(ldf, rdf, spec.left_keys, spec.right_keys)
    func = TableJoinFunction(plan, counters)
    return bind_changelog_join(TableJoinOperator, spec, plan, sides, key_types, key_types, func)


@fill_doc(raises=RUN_RAISES)
def table_join(left: Any, right: Any, spec: TableJoin, *, counters: Any | None = None,
    heartbeat_location: Any | None = None) -> Any:
    """Join two changelog tables on their primary key and return the changelog of the join.

    interlace owns the watermark (SEMANTICS §1): do not set one yourself. Output columns
    (SEMANTICS §9): the key columns (named as ``left_keys``), ``left_prefix`` + the left value
    columns, ``right_prefix`` + the right ones, ``op`` (``"upsert"`` / ``"delete"``; values
    NULL on delete), ``event_time`` (the applied update's), ``version`` (per key, from 0),
    then ``_dead_letter`` under ``late_data="dlq"``. Apply it to a target by key, keeping the
    highest ``version``.

    Example (the same call runs on Spark in ``tests/replay/test_table_join_replay.py``)::

        changes = table_join(left_changelog, right_changelog, TableJoin(
            left_keys=["id"], right_keys=["id"], how="full", event_time_column="ts",
            lateness_ms=60_000))

    Args:
        left: The left table's changelog, a streaming DataFrame.
        right: The right table's changelog, a streaming DataFrame.
        spec: The join.
        counters: Optional accumulator from :func:`interlace.metrics.counters`.
        heartbeat_location: The folder of the inputs' heartbeats, required with
            ``left_idle_timeout_ms`` / ``right_idle_timeout_ms``; given, each input's
            watermark is also restored at every start (docs/idle-inputs.md).

    {raises}
    """
    return prepare_table_join(left, right, spec, counters=counters,
        heartbeat_location=heartbeat_location).apply()
