"""The window's output frames: what closed, reopened and retracted windows emit.

One row per (window, group): ``window_start``, ``window_end`` (``[start, end)``, UTC
timestamps), the ``group_by`` columns, the aggregation results, then ``revision`` /
``retracted`` under reopen and ``_dead_letter`` under dlq. Used by ``step.py`` (emits) and
``slots.py`` (retractions of sessions absorbed by a merge).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from interlace.operators.common.names import DEAD_LETTER_COLUMN
from interlace.operators.window.plan import AggPlan, WindowPlan
from interlace.operators.window.spec import RETRACTED_COLUMN, REVISION_COLUMN
from numpy.typing import NDArray

__all__ = ["last_output_frame", "output_frame", "remember_output"]


_NS_RANGE_US = (2**63 - 1) // 1000
"""Times within ``±_NS_RANGE_US`` µs convert to ``datetime64[ns]`` exactly (and not to NaT)."""


def _ts_series(us: NDArray[np.int64]) -> pd.Series:
    """Turn int64 µs into a UTC timestamp Series.

    ``datetime64[ns, UTC]`` (what ``pd.to_datetime`` gives) when every value fits the
    nanosecond range (1677-09-21 to 2262-04-11): numpy's unit cast, several times faster than
    ``pd.to_datetime``. Outside it (windows at 0001-01-01 or 9999-12-31) ``datetime64[us,
    UTC]``, exact, which Spark takes as well: ``pd.to_datetime`` would raise
    ``OutOfBoundsDatetime`` and fail the query (docs/reliability.md, "Hostile input").
    """
    m8 = us.view("M8[us]")
    if len(us) and (us.min() < -_NS_RANGE_US or us.max() > _NS_RANGE_US):
        return pd.Series(pd.DatetimeIndex(m8).tz_localize("UTC"))
    return pd.Series(pd.DatetimeIndex(m8.astype("M8[ns]")).tz_localize("UTC"))


def _raw_results(plan: WindowPlan, accs: list[Any], idx: NDArray[np.int64]) -> list[pd.Series]:
    """Each aggregation's result for slots ``idx`` (timestamps still int64 µs).

    ``result`` gives a Series with a fresh ``RangeIndex``, ready to go into the output frame.
    """
    out = []
    for a, s in zip(plan.aggs, accs, strict=True):
        acc = a.accumulator()
        out.append(acc.result(acc.take(s, idx)))
    return out


def _present(a: AggPlan, raw: pd.Series) -> pd.Series:
    """Turn a raw result into its output form (int64 µs -> UTC timestamps)."""
    if a.out_timestamp:
        us = raw.astype("Int64")
        null = us.isna().to_numpy()
        out = _ts_series(us.to_numpy(dtype=np.int64, na_value=0))
        return out.where(~null) if null.any() else out
    return raw


def output_frame(
    plan: WindowPlan,
    slots: pa.Table,
    accs: list[Any],
    idx: NDArray[np.int64],
    revision: NDArray[np.int64],
    *,
    retracted: bool,
) -> tuple[pd.DataFrame, list[pd.Series]]:
    """Output rows of slots ``idx``, and the raw results they were made from."""
    start = np.asarray(slots.column("start").to_numpy(), dtype=np.int64)
    end = np.asarray(slots.column("end").to_numpy(), dtype=np.int64)
    data: dict[str, Any] = {
        plan.start_column: _ts_series(start[idx]),
        plan.end_column: _ts_series(end[idx]),
        **_group_series(plan, slots, idx),
    }
    raw = _raw_results(plan, accs, idx)
    for a, series in zip(plan.aggs, raw, strict=True):
        data[a.alias] = _present(a, series)
    return _finish_frame(plan, data, revision, retracted), raw


def _group_series(
    plan: WindowPlan, slots: pa.Table, idx: NDArray[np.int64]
) -> dict[str, pd.Series]:
    """The ``group_by`` values of slots ``idx``: each column taken alone, not the whole table."""
    take = pa.array(idx)
    return {
        g: slots.column(g).take(take).to_pandas(integer_object_nulls=True, date_as_object=True)
        for g in plan.group_by
    }


def _finish_frame(
    plan: WindowPlan, data: dict[str, Any], revision: NDArray[np.int64], retracted: bool
) -> pd.DataFrame:
    n = len(revision)
    if plan.late_data == "reopen":
        data[REVISION_COLUMN] = pd.Series(revision, dtype=np.int64)
        data[RETRACTED_COLUMN] = pd.Series(np.full(n, retracted))
    if plan.late_data == "dlq":
        data[DEAD_LETTER_COLUMN] = pd.Series([None] * n, dtype=object)
    return pd.DataFrame(data)


def remember_output(
    plan: WindowPlan, slots: pa.Table, idx: NDArray[np.int64], raw: list[pd.Series]
) -> pa.Table:
    """Store what slots ``idx`` just emitted in their ``__last_*`` columns (vectorised)."""
    is_emit = np.zeros(slots.num_rows, dtype=bool)
    is_emit[idx] = True
    pos = np.zeros(slots.num_rows, dtype=np.int64)
    pos[idx] = np.arange(len(idx))
    mask = pa.array(is_emit)
    updates: dict[str, pa.Array] = {
        "__last_start": slots.column("start").combine_chunks(),
        "__last_end": slots.column("end").combine_chunks(),
    }
    for i, (a, series) in enumerate(zip(plan.aggs, raw, strict=True)):
        new = pa.array(series, type=a.result_type, from_pandas=True)
        updates[f"__last_{i}"] = new.take(pa.array(pos))
    for name, new_values in updates.items():
        old = slots.column(name).combine_chunks()
        j = slots.schema.get_field_index(name)
        slots = slots.set_column(j, name, pc.if_else(mask, new_values, old))
    return slots


def last_output_frame(
    plan: WindowPlan, slots: pa.Table, idx: NDArray[np.int64], revision: NDArray[np.int64]
) -> pd.DataFrame:
    """Retraction rows: what slots ``idx`` last emitted, ``retracted=true``."""
    sel = slots.take(pa.array(idx))
    data: dict[str, Any] = {
        plan.start_column: _ts_series(
            np.asarray(sel.column("__last_start").to_numpy(), dtype=np.int64)
        ),
        plan.end_column: _ts_series(
            np.asarray(sel.column("__last_end").to_numpy(), dtype=np.int64)
        ),
    }
    data.update(_group_series(plan, slots, idx))
    for i, a in enumerate(plan.aggs):
        raw = sel.column(f"__last_{i}").to_pandas(integer_object_nulls=True)
        data[a.alias] = _present(a, raw.reset_index(drop=True))
    return _finish_frame(plan, data, revision, retracted=True)
