"""Run a table aggregation's two ``applyInPandasWithState`` functions without Spark.

:func:`run_table_aggregate_locally` drives stage 1 (:class:`KeyRowsFunction`) the way
Spark does (:mod:`interlace.testing.local`: the watermark, its filter, timeouts, the
trailing no-data batch), then hands each stage-1 micro-batch's deltas, as the channel
does, to stage 2 (:class:`GroupsFunction`) as one micro-batch of its own, each key group of
the groups called with its deltas. Key groups come from Python's ``hash``: which keys or
groups share one must not change any result.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from interlace.operators.common.arrow import table_to_pandas
from interlace.operators.table_aggregate import (
    GroupsFunction,
    KeyRowsFunction,
    TableAggregate,
    TableAggregatePlan,
)
from interlace.operators.table_aggregate.plan import TOMB_COLUMN
from interlace.state.buffers import TIME_COLUMN
from interlace.testing.local import FakeGroupState, _clean, _drive

__all__ = ["LocalAggregateRun", "run_table_aggregate_locally"]


@dataclass
class LocalAggregateRun:
    """What :func:`run_table_aggregate_locally` produced.

    Attributes:
        rows: ``(stage-1 batch, row)`` per output row of stage 2, in emission order.
        deltas: Stage 1's rows per batch.
        spark_dropped: Updates Spark's filter removed before stage 1.
        watermarks_ms: Spark's ``W`` per stage-1 batch.
    """

    rows: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    deltas: list[list[dict[str, Any]]] = field(default_factory=list)
    spark_dropped: int = 0
    watermarks_ms: list[int] = field(default_factory=list)


def _us(v: _dt.datetime) -> int:
    if v.tzinfo is None:
        v = v.replace(tzinfo=_dt.UTC)
    return (v - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)) // _dt.timedelta(microseconds=1)


def _hash(values: tuple[Any, ...], n: int) -> int:
    """A key group of ``values``: as Spark's (``group_key_sql``), -0.0 is 0.0, NaN is NULL."""
    def norm(v: Any) -> Any:
        if isinstance(v, float):
            return None if v != v else v + 0.0
        return v

    return hash(tuple(repr(norm(v)) for v in values)) % n


def run_table_aggregate_locally(
    spec: TableAggregate, log: Sequence[Sequence[Mapping[str, Any]]], schema: pa.Schema,
    *, vectorised: bool = True,
) -> LocalAggregateRun:
    """Run ``spec`` over ``log`` (micro-batches of the table's updates) as Spark would.

    Args:
        spec: The aggregation.
        log: The micro-batches, each a sequence of row dicts (naive UTC datetimes).
        schema: The input table's Arrow schema.
        vectorised: ``False``: stage 2 runs row by row even where its vectorised path for
            counts and integer sums applies (the tests compare the two).
    """
    plan = dataclasses.replace(TableAggregatePlan.from_schema(spec, schema),
                               vectorised=vectorised)
    et = spec.event_time_column
    assert et is not None
    values = (list(spec.value_columns) if spec.value_columns is not None else
              [c for c in schema.names if c not in {*spec.keys, et, spec.tombstone_column}])
    n = spec.key_groups

    def tombstone(r: Mapping[str, Any]) -> bool:
        if spec.tombstone_column is not None:
            return r[spec.tombstone_column] is True
        return all(r[c] is None for c in values)

    def frame_of(rows: Sequence[Mapping[str, Any]]) -> Any:
        cols = {TIME_COLUMN: [None if r[et] is None else _us(r[et]) for r in rows],
                TOMB_COLUMN: [tombstone(r) for r in rows]}
        for i, name in enumerate(plan.names):
            cols[plan.column(i)] = [r[name] for r in rows]
        return table_to_pandas(pa.Table.from_pydict(cols, schema=plan.input_schema))

    def key_of(r: Mapping[str, Any]) -> int:
        return _hash(tuple(r[k] for k in spec.keys), n)

    first = _drive(KeyRowsFunction(plan), [[list(b)] for b in log], [et], [key_of], [frame_of],
                   spec.watermark_delay_ms, "max")
    run = LocalAggregateRun(spark_dropped=first.spark_dropped, watermarks_ms=first.watermarks_ms)
    batches = len(first.watermarks_ms)
    run.deltas = [[r for b, r in first.rows if b == i] for i in range(batches)]
    groups = [f.name for f in plan.group_fields]
    second = GroupsFunction(plan)
    states: dict[int, FakeGroupState] = {}
    for b, deltas in enumerate(run.deltas):
        by_group: dict[int, list[dict[str, Any]]] = {}
        for d in deltas:
            by_group.setdefault(_hash(tuple(d[g] for g in groups), n), []).append(d)
        for kg in sorted(by_group):
            rows = by_group[kg]
            table = pa.Table.from_pylist(
                [{c: r.get(c) for c in plan.delta_schema.names} for r in rows],
                schema=plan.delta_schema)
            state = states.setdefault(kg, FakeGroupState())
            for pdf in second((kg,), iter([table_to_pandas(table)]), state):
                for rec in pdf.to_dict("records"):
                    run.rows.append((b, {k: _clean(v) for k, v in rec.items()}))
    return run
