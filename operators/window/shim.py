"""The window's Spark side: the ``applyInPandasWithState`` function and the public wrapper.

:class:`WindowFunction` is the only window code touching ``GroupState``: it decodes the key
group's blob, runs the pure :func:`~interlace.operators.window.step.step_window` and writes
the state last. :func:`prepare_window` validates the input and prepares it (key group,
watermarked event time, µs time, the columns the aggregations read);
:func:`window_aggregate` runs it. Neighbours: ``spec.py``, ``plan.py``, ``step.py``; what every
operator's shim shares is in :mod:`interlace.operators.common.shim`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from interlace.operators.common.arrow import arrow_schema_for
from interlace.operators.common.checks import check_input, require_columns
from interlace.operators.common.compat import override
from interlace.operators.common.connect import check_counters
from interlace.operators.common.names import DEAD_LETTER_COLUMN, TIME_US_COLUMN
from interlace.operators.common.prepare import (
    group_key_sql,
    prepared_columns,
    watermarked,
    with_event_time,
    without_clock,
)
from interlace.operators.common.shim import BoundOperator, CallResult, Frames, OperatorFunction
from interlace.operators.common.watermark import timeout_ms_when_reached
from interlace.operators.common.worker import guard_source_checkout
from interlace.operators.errors import ConfigError
from interlace.operators.window.plan import WindowPlan
from interlace.operators.window.spec import RETRACTED_COLUMN, REVISION_COLUMN, Window
from interlace.operators.window.step import WindowState, step_window
from interlace.state.accumulators import decimal_result

__all__ = ["WindowFunction", "WindowOperator", "prepare_window", "window_aggregate"]


class WindowFunction(OperatorFunction):
    """The ``applyInPandasWithState`` function of a window aggregation.

    Timer: one event-time timeout per key group at the earliest pending deadline ``D``
    (``wm >= D`` rule), in Spark's domain: Spark fires when ``W > timeout`` and
    ``(W + H) * 1000 >= D`` ⇔ ``W > ceil((D - H * 1000) / 1000) - 1``.
    """

    plan: WindowPlan

    @override
    def _call(self, blob: bytes | None, frames: Frames, wm_us: int | None) -> CallResult:
        """Decode the windows, run :func:`step_window`, encode the windows that remain."""
        plan = self.plan
        ws = WindowState.decode(blob, plan) if blob is not None else WindowState.empty(plan)
        parts = [f for f in frames if len(f)]
        if len(parts) > 1:
            batch = pd.concat(parts, ignore_index=True)
        elif parts:  # Spark's frame is numbered 0..n-1 already: no copy
            batch = parts[0] if _numbered(parts[0]) else parts[0].reset_index(drop=True)
        else:
            batch = pd.DataFrame(
                {TIME_US_COLUMN: np.zeros(0, np.int64), **{c: [] for c in plan.columns}})
        result = step_window(plan, ws, batch, wm_us)
        output = result.output if len(result.output) else None
        stored = None
        if result.state.slots.num_rows:
            assert result.next_deadline_us is not None
            deadline_ms = timeout_ms_when_reached(result.next_deadline_us, plan.horizon_ms)
            stored = (result.state.encode(plan), deadline_ms)
        return CallResult(output, result.counters, stored)


def _numbered(frame: pd.DataFrame) -> bool:
    """Whether ``frame``'s index is ``0 .. len - 1`` (what ``reset_index`` would give)."""
    index = frame.index
    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1


@dataclass(frozen=True)
class WindowOperator(BoundOperator):
    """A window aggregation bound to its input, for ``groupBy().applyInPandasWithState``.

    ``op.prepared.groupBy(*op.group_columns).applyInPandasWithState(op.func, op.output_schema,
    op.state_schema, "append", GroupStateTimeout.EventTimeTimeout)`` equals
    :func:`window_aggregate`.
    """

    spec: Window
    plan: WindowPlan
    func: WindowFunction


def prepare_window(df: Any, spec: Window, *, counters: Any | None = None) -> WindowOperator:
    """Validate ``spec`` against ``df`` and prepare the input (watermark, key group, µs time).

    Raises:
        ConfigError: Any problem with the spec or the input (SEMANTICS §6).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    check_counters(df, counters)
    what = "the input"
    check_input(df, what)
    guard_source_checkout(df.sparkSession)
    et = spec.event_time_column
    df = with_event_time(df, et, "event_time_column", what, spec.time_mode)
    require_columns(df, list(spec.group_by), "group_by", what)
    require_columns(df, [a.column for a in spec.aggregations if a.column], "aggregations", what)
    clash = [g for g in spec.group_by if g in {a.as_ for a in spec.aggregations}]
    if clash:
        msg = f"aggregation alias(es) {clash} collide with `group_by` columns; rename the alias"
        raise ConfigError(msg)
    clocked, df = df, without_clock(df)  # the clock sets the watermark only (SEMANTICS §11)
    plan = WindowPlan.from_schema(spec, arrow_schema_for(df.schema))
    needed = (
        list(df.columns)
        if spec.late_data == "dlq"
        else list(
            dict.fromkeys([*spec.group_by, *(a.column for a in spec.aggregations if a.column)])
        )
    )
    base = watermarked(clocked, et, needed, spec.watermark_delay_ms)
    prepared = base.select(
        *prepared_columns(base, [group_key_sql(g, df.schema[g].dataType) for g in spec.group_by],
                          spec.key_groups),
        *[F.col(f"`{c}`") for c in needed],
    )
    plan = WindowPlan(**{**plan.__dict__, "columns": tuple(needed)})
    fields = [
        T.StructField(spec.window_start_column, T.TimestampType(), True),
        T.StructField(spec.window_end_column, T.TimestampType(), True),
    ]
    fields += [T.StructField(g, df.schema[g].dataType, True) for g in spec.group_by]
    for a in spec.aggregations:
        src = df.schema[a.column].dataType if a.column else None
        if a.agg in ("count", "count_distinct"):
            typ: Any = T.LongType()
        elif a.agg in ("sum", "avg") and isinstance(src, T.DecimalType):
            typ = T.DecimalType(*decimal_result(a.agg, src.precision, src.scale))
        elif a.agg == "avg":
            typ = T.DoubleType()
        elif a.agg == "sum":
            typ = (
                T.LongType()
                if isinstance(src, T.ByteType | T.ShortType | T.IntegerType | T.LongType)
                else T.DoubleType()
            )
        else:
            typ = src
        fields.append(T.StructField(a.as_, typ, True))
    if spec.late_data == "reopen":
        fields += [
            T.StructField(REVISION_COLUMN, T.LongType(), True),
            T.StructField(RETRACTED_COLUMN, T.BooleanType(), True),
        ]
    if spec.late_data == "dlq":
        fields.append(T.StructField(DEAD_LETTER_COLUMN, T.StringType(), True))
    return WindowOperator.bind(spec, plan, prepared, WindowFunction(plan, counters), fields)


def window_aggregate(df: Any, spec: Window, *, counters: Any | None = None) -> Any:
    """Aggregate a streaming DataFrame per window and group (SEMANTICS §3).

    interlace owns the watermark (delay ``lateness_ms + H``). Output columns:
    ``window_start``, ``window_end`` (timestamps, ``[start, end)``), the ``group_by`` columns,
    the aggregation aliases; ``revision``, ``retracted`` under reopen; ``_dead_letter`` under
    dlq.

    Raises:
        ConfigError: Invalid spec or input, before any query starts.
    """
    return prepare_window(df, spec, counters=counters).apply()
