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

from interlace.operators.common.arrow import arrow_schema_for
from interlace.operators.common.checks import require_columns
from interlace.operators.common.docs import PREPARE_RETURNS, RUN_RAISES, fill_doc, operator_usage
from interlace.operators.common.keytypes import spark_key_types
from interlace.operators.common.prepare import checked_inputs, without_clock
from interlace.operators.common.shim import BoundOperator, TablesFunction, bind_changelog_join
from interlace.operators.common.watermark import NO_DEADLINE_MS
from interlace.operators.foreign_key.plan import ForeignKeyJoinPlan
from interlace.operators.foreign_key.spec import ForeignKeyJoin
from interlace.operators.foreign_key.step import step
from interlace.state.foreign_key import ForeignKeyState

__all__ = [
    "NO_DEADLINE_MS",
    "ForeignKeyJoinFunction",
    "ForeignKeyJoinOperator",
    "foreign_key_join",
    "prepare_foreign_key_join",
]


class ForeignKeyJoinFunction(TablesFunction):
    """The ``applyInPandasWithState`` function of a foreign-key join (picklable).

    Each call runs :func:`step` on the key group's :class:`ForeignKeyState` (see
    :class:`~interlace.operators.common.shim.TablesFunction`); the timeout is the earliest
    held update's deadline.
    """

    plan: ForeignKeyJoinPlan
    state_type = ForeignKeyState
    pure_step = staticmethod(step)


@fill_doc(usage=operator_usage("foreign_key_join", "orders_changelog, products_changelog"))
@dataclass(frozen=True)
class ForeignKeyJoinOperator(BoundOperator):
    """A foreign-key join bound to its inputs, ready for ``groupBy().applyInPandasWithState``.

    {usage}
    """

    spec: ForeignKeyJoin
    plan: ForeignKeyJoinPlan
    func: ForeignKeyJoinFunction


@fill_doc(returns=PREPARE_RETURNS.format(operator="ForeignKeyJoinOperator"))
def prepare_foreign_key_join(
    left: Any, right: Any, spec: ForeignKeyJoin, *, counters: Any | None = None,
    heartbeat_location: Any | None = None
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
        heartbeat_location: The folder of the inputs' heartbeats, required with
            ``left_idle_timeout_ms`` / ``right_idle_timeout_ms``; given, each input's
            watermark is also restored at every start (docs/idle-inputs.md).

    {returns}
    """
    sides = checked_inputs(left, right, spec, counters, ("the left table", "the right table"),
                           heartbeat_location=heartbeat_location)
    ldf, rdf = (without_clock(df) for df, _ in sides)  # the clock sets the watermark only
    require_columns(ldf, spec.foreign_key_columns, "foreign_key_columns", "the left table")
    plan = ForeignKeyJoinPlan.from_schemas(
        spec, arrow_schema_for(ldf.schema), arrow_schema_for(rdf.schema)
    )
    fk_types = spark_key_types(ldf, rdf, spec.foreign_key_columns, spec.right_keys,
                               fields=("foreign_key_columns", "right_keys"))
    left_types = [ldf.schema[k].dataType for k in spec.left_keys]
    func = ForeignKeyJoinFunction(plan, counters)
    return bind_changelog_join(ForeignKeyJoinOperator, spec, plan, sides,
                               (left_types, fk_types), left_types, func)


@fill_doc(raises=RUN_RAISES)
def foreign_key_join(
    left: Any, right: Any, spec: ForeignKeyJoin, *, counters: Any | None = None,
    heartbeat_location: Any | None = None
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
        heartbeat_location: The folder of the inputs' heartbeats, required with
            ``left_idle_timeout_ms`` / ``right_idle_timeout_ms``; given, each input's
            watermark is also restored at every start (docs/idle-inputs.md).

    {raises}
    """
    return prepare_foreign_key_join(left, right, spec, counters=counters,
        heartbeat_location=heartbeat_location).apply()
