"""Run an operator's ``applyInPandasWithState`` function without Spark.

:func:`run_join_locally` and :func:`run_window_locally` drive the very function Spark calls
(:class:`JoinFunction`, :class:`WindowFunction`) through a
:class:`FakeGroupState`, reproducing what Spark does around it, measured on PySpark 4.3:

* Spark's watermark ``W`` per input is ``max(t_ms) - delay`` over the batches before the
  current one (an input that has had no rows yet counts as 0), combined by ``min`` (or
  ``max``), never decreasing; ``W`` is 0 in the first batch.
* Before the function sees a batch, rows with ``t_us <= W_prev * 1000`` (``W_prev``: the previous
  batch's ``W``, 0 before there is one: rows at or before the epoch always go) are dropped; a
  NULL event time is never dropped and moves no watermark.
* The prepared input's guard (``prepare.watermarked``): a row with a timestamp PySpark cannot
  hand to pandas (outside ``PANDAS_RANGE_US``) is flagged, with a NULL event time; the
  function drops and counts it (``out_of_range_dropped``).
* The function is called for each key group with rows, and for each key group without rows
  whose timeout is ``< W`` (``hasTimedOut``).
* After the last batch, one no-data batch runs if ``W`` advanced.

It is much faster than a Spark replay, so property tests use it to compare the operator with
the oracle on thousands of random logs. Grouping uses Python's ``hash`` of the key tuple rather
than Spark's ``xxhash64``: which keys share a key group must not change any result.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from interlace.operators.common.prepare import (
    HOME_COLUMN,
    OUT_OF_RANGE_COLUMN,
    PANDAS_RANGE_US,
    SIDE_COLUMN,
)
from interlace.operators.foreign_key import (
    ForeignKeyJoin,
    ForeignKeyJoinFunction,
    ForeignKeyJoinPlan,
)
from interlace.operators.join import (
    LEFT,
    RIGHT,
    Join,
    JoinFunction,
    JoinPlan,
    prepared_layout,
)
from interlace.operators.stream_table.plan import StreamTablePlan
from interlace.operators.stream_table.shim import StreamTableJoinFunction
from interlace.operators.stream_table.spec import StreamTableJoin
from interlace.operators.table import TableJoin, TableJoinFunction, TableJoinPlan
from interlace.operators.window import TIME_US_COLUMN, Window, WindowFunction, WindowPlan

__all__ = [
    "FakeGroupState",
    "LocalRun",
    "run_foreign_key_join_locally",
    "run_join_locally",
    "run_stream_table_locally",
    "run_table_join_locally",
    "run_window_locally",
]

NO_TIMESTAMP = -1


@dataclass
class FakeGroupState:
    """The subset of PySpark's ``GroupState`` interlace uses, with Spark's checks."""

    watermark_ms: int = 0
    value: tuple[Any, ...] | None = None
    timeout_ms: int = NO_TIMESTAMP
    timed_out: bool = False

    @property
    def exists(self) -> bool:
        """Whether a value is stored."""
        return self.value is not None

    @property
    def get(self) -> tuple[Any, ...]:
        """The stored value (PySpark exposes ``get`` as a property)."""
        if self.value is None:
            msg = "state is not set"
            raise ValueError(msg)
        return self.value

    @property
    def hasTimedOut(self) -> bool:  # noqa: N802 - PySpark's name
        """Whether this call is a timeout call."""
        return self.timed_out

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802 - PySpark's name
        """Spark's watermark ``W`` in ms."""
        return self.watermark_ms

    def update(self, value: tuple[Any, ...]) -> None:
        """Store ``value``."""
        self.value = value

    def remove(self) -> None:
        """Drop the value and its timeout."""
        self.value = None
        self.timeout_ms = NO_TIMESTAMP

    def setTimeoutTimestamp(self, timestamp_ms: int) -> None:  # noqa: N802 - PySpark's name
        """Set the event-time timeout, with PySpark's checks."""
        if timestamp_ms <= 0:
            msg = f"timeout must be positive (got {timestamp_ms})"
            raise ValueError(msg)
        if self.watermark_ms != NO_TIMESTAMP and timestamp_ms < self.watermark_ms:
            msg = f"timeout {timestamp_ms} is earlier than the watermark {self.watermark_ms}"
            raise ValueError(msg)
        self.timeout_ms = int(timestamp_ms)


@dataclass
class LocalRun:
    """Output of :func:`run_join_locally`."""

    rows: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    watermarks_ms: list[int] = field(default_factory=list)
    spark_dropped: int = 0
    calls: int = 0
    counters: dict[str, int] = field(default_factory=dict)


def _to_us(v: _dt.datetime) -> int:
    d = v - _dt.datetime(1970, 1, 1)
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def _times_us(rows: Sequence[dict[str, Any]], et: str) -> pa.Array:
    """The rows' event times in µs (int64; NULL where a row has none, as Spark's ``__il_tus``)."""
    return pa.array([None if r.get(et) is None else _to_us(r[et]) for r in rows], pa.int64())


def _in_range(
    rows: Sequence[dict[str, Any]], columns: Sequence[str], et: str
) -> list[dict[str, Any]]:
    """The rows as the prepared input carries them (``prepare.watermarked``).

    A row with a timestamp in ``columns`` outside :data:`PANDAS_RANGE_US` (what PySpark can
    hand to pandas) gets :data:`OUT_OF_RANGE_COLUMN` true and a NULL event time (``__il_t``):
    it moves no watermark, passes Spark's filter, and the function drops and counts it.
    """
    lo, hi = PANDAS_RANGE_US
    out = []
    for r in rows:
        bad = [c for c in columns if r.get(c) is not None and not lo <= _to_us(r[c]) <= hi]
        out.append({**r, et: None, OUT_OF_RANGE_COLUMN: True} if bad else r)
    return out


def _timestamp_columns(schema: pa.Schema, only: Sequence[str] | None = None) -> list[str]:
    return [f.name for f in schema if pa.types.is_timestamp(f.type)
            and (only is None or f.name in only)]


def _with_flag(pdf: pd.DataFrame, rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    pdf[OUT_OF_RANGE_COLUMN] = np.array([bool(r.get(OUT_OF_RANGE_COLUMN)) for r in rows])
    return pdf


class _Counters:
    def __init__(self) -> None:
        self.total: dict[str, int] = {}

    def add(self, c: dict[str, int]) -> None:
        for k, v in c.items():
            self.total[k] = self.total.get(k, 0) + v


def _side_frame(plan: JoinPlan, side: int, rows: Sequence[dict[str, Any]], et: str) -> pd.DataFrame:
    """Return the frame Spark would hand the join for ``rows`` of one side.

    The rows are put in ``plan.input_schema`` (the other side's columns null) and laid out as
    ``prepare_join`` does by :func:`prepared_layout`: side tag, µs time, ``__il_t``, the slots
    both sides share.
    """
    n = len(rows)
    columns: list[pa.Array] = [pa.array(np.full(n, side, dtype=np.int32)), _times_us(rows, et)]
    for s, names, payload in ((LEFT, plan.left_names, plan.left_payload),
                              (RIGHT, plan.right_names, plan.right_payload)):
        for name, f in zip(names, payload, strict=True):
            columns.append(
                pa.array([r.get(name) for r in rows], f.type) if s == side else pa.nulls(n, f.type)
            )
    batch = pa.Table.from_arrays(columns, schema=plan.input_schema)
    # Maps as dicts, structs as dicts, arrays as numpy arrays: what PySpark hands over.
    pdf = prepared_layout(plan, batch).to_pandas(integer_object_nulls=True, date_as_object=True,
                                                 maps_as_pydicts="lossy")
    return _with_flag(pdf, rows)


def _drive(
    func: Any,
    log_rows: Sequence[Sequence[Sequence[dict[str, Any]]]],
    event_columns: Sequence[str],
    key_of: Sequence[Any],
    frame_of: Sequence[Any],
    delay_ms: int,
    watermark_policy: str,
) -> LocalRun:
    """Run ``func`` over per-batch, per-input rows the way Spark does (module docstring).

    ``key_of[i](row)`` gives the key group of a row of input ``i``, or a list of
    ``(key group, row)`` pairs for a row replicated into several key groups.
    """
    n_inputs = len(event_columns)
    states: dict[int, FakeGroupState] = {}
    input_wm: dict[int, int] = {}
    max_ms: dict[int, int] = {}
    global_wm = 0
    run = LocalRun()
    n = len(log_rows)
    b = 0
    while True:
        if b < n:
            batch_rows = log_rows[b]
        elif b == n and run.watermarks_ms and global_wm > run.watermarks_ms[-1]:
            batch_rows = [[] for _ in range(n_inputs)]  # trailing no-data batch
        else:
            break
        w_prev = run.watermarks_ms[-1] if run.watermarks_ms else 0
        w_now = global_wm
        run.watermarks_ms.append(w_now)
        groups: dict[int, list[pd.DataFrame]] = {}
        for i, rows in enumerate(batch_rows):
            et = event_columns[i]
            # Spark's watermark statistics see every row, before its late-row filter. A NULL
            # event time moves nothing and is never removed by the filter (NULL <= W is not
            # true); a time at or before the epoch is removed even while W is 0.
            for r in rows:
                if r.get(et) is not None:
                    max_ms[i] = max(max_ms.get(i, -(2**62)), _to_us(r[et]) // 1000)
            kept = [r for r in rows
                    if r.get(et) is None or _to_us(r[et]) > max(w_prev, 0) * 1000]
            run.spark_dropped += len(rows) - len(kept)
            by_group: dict[int, list[dict[str, Any]]] = {}
            for r in kept:
                where = key_of[i](r)
                # An int: the row's one key group; a list: (group, row as that group sees it)
                # pairs, a row replicated into several key groups.
                copies = where if isinstance(where, list) else [(where, r)]
                for kg, copy in copies:
                    by_group.setdefault(kg, []).append(copy)
            for kg, grows in by_group.items():
                groups.setdefault(kg, []).append(frame_of[i](grows))
        for kg in sorted(set(groups) | set(states)):
            st = states.setdefault(kg, FakeGroupState())
            st.watermark_ms = w_now
            frames = groups.get(kg)
            if frames is None:
                if st.timeout_ms == NO_TIMESTAMP or not st.timeout_ms < w_now:
                    continue
                st.timed_out = True
            else:
                st.timed_out = False
            run.calls += 1
            for pdf in func((kg,), iter(frames or []), st):
                for rec in pdf.to_dict("records"):
                    run.rows.append((b, {k: _clean(v) for k, v in rec.items()}))
            st.timed_out = False
            if not st.exists:
                del states[kg]
        # Watermark update after the batch (Spark's WatermarkTracker). Every input counts; one
        # that has had no rows yet counts as 0, so under "min" W stays 0 until all have rows.
        for i, rows in enumerate(batch_rows):
            if i in max_ms and any(r.get(event_columns[i]) is not None for r in rows):
                cand = max(0, max_ms[i] - delay_ms)
                input_wm[i] = max(input_wm.get(i, cand), cand)
        values = [input_wm.get(i, 0) for i in range(n_inputs)]
        chosen = min(values) if watermark_policy == "min" else max(values)
        global_wm = max(global_wm, chosen)
        b += 1
    return run


def run_join_locally(
    spec: Join,
    log: Sequence[Any],
    left_schema: pa.Schema,
    right_schema: pa.Schema,
    *,
    watermark_policy: str = "min",
) -> LocalRun:
    """Run ``spec`` over ``log`` (``JoinBatch`` items) through :class:`JoinFunction`, no Spark.

    Args:
        spec: The join.
        log: One ``JoinBatch`` per micro-batch; event times are naive UTC datetimes.
        left_schema: Arrow schema of the left rows (timestamps as ``timestamp("ns")``).
        right_schema: Arrow schema of the right rows.
        watermark_policy: ``"min"`` or ``"max"`` (``spark.sql.streaming.multipleWatermarkPolicy``).

    Returns:
        Output rows tagged with their batch index, and Spark-side facts of the run.
    """
    plan = JoinPlan.from_schemas(spec, left_schema, right_schema)
    counters = _Counters()
    let, ret = spec.side_event_time_column("left"), spec.side_event_time_column("right")
    assert let is not None and ret is not None

    def key_of(keys: Sequence[str]) -> Any:
        return lambda r: hash(tuple(r.get(k) for k in keys)) % spec.key_groups

    run = _drive(
        JoinFunction(plan, counters),
        [[_in_range(b.left, _timestamp_columns(left_schema), let),
          _in_range(b.right, _timestamp_columns(right_schema), ret)] for b in log],
        [let, ret],
        [key_of(spec.left_keys), key_of(spec.right_keys)],
        [
            lambda rows: _side_frame(plan, LEFT, rows, let),
            lambda rows: _side_frame(plan, RIGHT, rows, ret),
        ],
        spec.watermark_delay_ms,
        watermark_policy,
    )
    run.counters = counters.total
    return run


def run_window_locally(spec: Window, log: Sequence[Any], schema: pa.Schema) -> LocalRun:
    """Run ``spec`` over ``log`` (``WindowBatch`` items) through :class:`WindowFunction`.

    Args:
        spec: The window aggregation.
        log: One ``WindowBatch`` per micro-batch; event times are naive UTC datetimes.
        schema: Arrow schema of the rows (timestamps as ``timestamp("ns")``).
    """
    plan = WindowPlan.from_schema(spec, schema)
    counters = _Counters()
    et = spec.event_time_column

    def frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
        data = {f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in schema}
        data = {TIME_US_COLUMN: _times_us(rows, et), **data}
        pdf = pa.table(data).to_pandas(integer_object_nulls=True, date_as_object=True,
                                       maps_as_pydicts="lossy")
        return _with_flag(pdf, rows)

    # The columns prepare_window carries (so checks for out-of-range timestamps).
    carried = (schema.names if spec.late_data == "dlq"
               else [et, *spec.group_by, *(a.column for a in spec.aggregations if a.column)])

    run = _drive(
        WindowFunction(plan, counters),
        [[_in_range(b.rows, _timestamp_columns(schema, carried), et)] for b in log],
        [et],
        [lambda r: hash(tuple(_group_key(r.get(g)) for g in spec.group_by)) % spec.key_groups],
        [frame],
        spec.watermark_delay_ms,
        "min",
    )
    run.counters = counters.total
    return run


def _group_key(v: Any) -> Any:
    """A ``group_by`` value as ``prepare_window`` hashes it: NaN as NULL.

    ``-0.0`` hashes as ``0.0`` in Python already.
    """
    return None if isinstance(v, float) and v != v else v


def _hashable_key(v: Any) -> Any:
    """A key value as Spark's ``xxhash64`` sees it: every NaN alike, ``-0.0`` as ``0.0``."""
    if isinstance(v, float):
        return "NaN" if v != v else v + 0.0
    return v


def _two_sided_frame(
    input_schema: pa.Schema, schemas: Sequence[pa.Schema], payloads: Sequence[pa.Schema],
    side: int, et: str,
) -> Any:
    """Build a table join's prepared frames of ``side``'s rows (the other side's columns NULL)."""

    def build(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
        n = len(rows)
        columns = {
            SIDE_COLUMN: pa.array(np.full(n, side, dtype=np.int32)),
            TIME_US_COLUMN: _times_us(rows, et),
        }
        if HOME_COLUMN in input_schema.names:  # replicated rows carry it; others are home
            columns[HOME_COLUMN] = pa.array([bool(r.get(HOME_COLUMN, True)) for r in rows])
        for s, (schema, payload) in enumerate(zip(schemas, payloads, strict=True)):
            for f, internal in zip(schema, payload, strict=True):
                columns[internal.name] = (pa.array([r.get(f.name) for r in rows], internal.type)
                                          if s == side else pa.nulls(n, internal.type))
        table = pa.Table.from_arrays([columns[n_] for n_ in input_schema.names],
                                     schema=input_schema)
        pdf = table.to_pandas(integer_object_nulls=True, date_as_object=True,
                              maps_as_pydicts="lossy")
        return _with_flag(pdf, rows)

    return build


def _run_two_sided(
    plan_type: Any,
    function_type: Any,
    spec: Any,
    log: Sequence[Any],
    schemas: Sequence[pa.Schema],
    watermark_policy: str,
) -> LocalRun:
    """Drive a table join's function over ``log`` (``left`` / ``right`` rows per batch).

    The plan is ``plan_type.from_schemas(spec, *schemas)``. Under replication
    (``plan.replicated_side``), that side's rows go to every key group, as
    ``two_sided_input(..., replicated_side=...)`` prepares them: the copy in the key group of
    the row's own keys has the home flag set, the others not.
    """
    plan = plan_type.from_schemas(spec, *schemas)
    counters = _Counters()
    func = function_type(plan, counters)
    ets = [spec.side_event_time_column("left"), spec.side_event_time_column("right")]
    assert ets[0] is not None and ets[1] is not None

    def key_of(keys: Sequence[str]) -> Any:
        return lambda r: hash(tuple(_hashable_key(r.get(k)) for k in keys)) % spec.key_groups

    def every_group(keys: Sequence[str]) -> Any:
        own = key_of(keys)
        return lambda r: [(g, {**r, HOME_COLUMN: g == own(r)}) for g in range(spec.key_groups)]

    payloads = [plan.side_columns(side)[0] for side in (0, 1)]
    run = _drive(
        func,
        [[_in_range(b.left, _timestamp_columns(schemas[0]), ets[0]),
          _in_range(b.right, _timestamp_columns(schemas[1]), ets[1])] for b in log],
        [ets[0], ets[1]],
        [every_group(keys) if side == plan.replicated_side else key_of(keys)
         for side, keys in enumerate((spec.left_keys, spec.right_keys))],
        [_two_sided_frame(plan.input_schema, schemas, payloads, side, ets[side])
         for side in (0, 1)],
        spec.watermark_delay_ms,
        watermark_policy,
    )
    run.counters = counters.total
    return run


def run_stream_table_locally(
    spec: StreamTableJoin,
    log: Sequence[Any],
    stream_schema: pa.Schema,
    table_schema: pa.Schema,
    *,
    watermark_policy: str = "min",
) -> LocalRun:
    """Run ``spec`` over ``log`` through :class:`StreamTableJoinFunction`, no Spark.

    Args:
        spec: The stream-table join.
        log: One ``JoinBatch`` per micro-batch: ``left`` the stream's rows, ``right`` the
            table's updates; event times are naive UTC datetimes.
        stream_schema: Arrow schema of the stream rows (timestamps as ``timestamp("ns")``).
        table_schema: Arrow schema of the table rows.
        watermark_policy: ``"min"`` or ``"max"``.
    """
    return _run_two_sided(StreamTablePlan, StreamTableJoinFunction, spec, log,
                          (stream_schema, table_schema), watermark_policy)


def run_table_join_locally(
    spec: TableJoin,
    log: Sequence[Any],
    left_schema: pa.Schema,
    right_schema: pa.Schema,
    *,
    watermark_policy: str = "min",
) -> LocalRun:
    """Run ``spec`` over ``log`` through :class:`TableJoinFunction`, no Spark.

    Args:
        spec: The table-table join.
        log: One ``JoinBatch`` per micro-batch: ``left`` / ``right`` the tables' updates;
            event times are naive UTC datetimes.
        left_schema: Arrow schema of the left table's rows.
        right_schema: Arrow schema of the right table's rows.
        watermark_policy: ``"min"`` or ``"max"``.
    """
    return _run_two_sided(TableJoinPlan, TableJoinFunction, spec, log,
                          (left_schema, right_schema), watermark_policy)


def run_foreign_key_join_locally(
    spec: ForeignKeyJoin,
    log: Sequence[Any],
    left_schema: pa.Schema,
    right_schema: pa.Schema,
    *,
    watermark_policy: str = "min",
) -> LocalRun:
    """Run ``spec`` over ``log`` through :class:`ForeignKeyJoinFunction`, no Spark.

    Left rows go to the key group of their primary key; every right row goes to every key
    group (its home copy counts it), as :func:`~interlace.prepare_foreign_key_join` prepares
    them.

    Args:
        spec: The foreign-key join.
        log: One ``JoinBatch`` per micro-batch: ``left`` / ``right`` the tables' updates;
            event times are naive UTC datetimes.
        left_schema: Arrow schema of the left table's rows (it holds the foreign key).
        right_schema: Arrow schema of the right table's rows.
        watermark_policy: ``"min"`` or ``"max"``.
    """
    return _run_two_sided(ForeignKeyJoinPlan, ForeignKeyJoinFunction, spec, log,
                          (left_schema, right_schema), watermark_policy)


def _clean(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and np.isnan(v):
        return None
    if v is pd.NaT:
        return None
    if isinstance(v, pd.Timestamp):
        return v.to_pydatetime()
    if isinstance(v, np.generic):
        return v.item()
    return v
