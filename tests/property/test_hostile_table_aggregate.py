"""Hostile input through the table aggregation (issues 13, 31), no Spark.

The companion of ``test_hostile_table_joins.py``: Hypothesis draws batches of hostile table
updates (:mod:`hostile`: NULL keys and event times, NaN / ±inf / -0.0 float keys and groups,
unicode, binary and decimal(38,18) keys, duplicate times, nested payloads) and runs them
through both stages' ``applyInPandasWithState`` functions
(:func:`interlace.testing.local_table_aggregate.run_table_aggregate_locally`) and the oracle.
Per group, the changelog equals the oracle's, batch by batch; a NULL key or event time is
never aggregated. (Timestamps pandas cannot hold are flagged and dropped by the prepared
input on Spark, tested for every operator in ``test_hostile_spark.py``; they are left out
here.)
"""

from __future__ import annotations

from typing import Any

from hostile import COLUMNS, HOSTILE, SCHEMA, end_row, fits_pandas, hostile_rows, through_pandas
from hypothesis import given
from hypothesis import strategies as st

from interlace import Aggregation, TableAggregate
from interlace.testing.local_table_aggregate import run_table_aggregate_locally
from interlace.testing.oracles.table_aggregate import oracle_table_aggregate

AGGS = [Aggregation(agg="count", as_="n"), Aggregation(agg="count", column="f", as_="nf"),
        Aggregation(agg="min", column="f", as_="lo"), Aggregation(agg="max", column="u", as_="hi"),
        Aggregation(agg="count_distinct", column="b", as_="nb", mode="exact",
                    max_distinct_values_per_group=10_000)]
GROUPINGS = [(["kb"], ["kf"]), (["ks", "kd"], ["kf", "ks"]), (["ki"], []), (["kf"], ["kb"])]


@st.composite
def logs(draw: Any) -> list[list[dict]]:
    out, next_id = [], 0
    for _ in range(draw(st.integers(1, 5))):
        n = draw(st.integers(0, 5))
        rows = draw(hostile_rows(range(next_id, next_id + n)))
        next_id += n
        # As PySpark hands them over: NaN is NULL; timestamps pandas cannot hold are left out.
        out.append([{k: through_pandas(v) for k, v in r.items()} for r in rows
                    if fits_pandas(r, ("ts", "pt"))])
    return [*out, [end_row()]]


def _groups(rows: list[tuple[int, dict]], group_by: list[str]) -> dict:
    out: dict = {}
    for b, r in rows:
        out.setdefault(tuple(r[g] for g in group_by), []).append(
            (b, {k: v for k, v in r.items() if k != "_dead_letter"}))
    return out


@HOSTILE
@given(logs(), st.sampled_from(GROUPINGS), st.sampled_from(["final", "eager"]))
def test_hostile_updates_equal_the_oracle(log: list[list[dict]], grouping: Any,
                                          emit: str) -> None:
    keys, group_by = grouping
    spec = TableAggregate(keys=keys, group_by=group_by, aggregations=AGGS, emit=emit,
                          event_time_column="ts", lateness_ms=2_000, key_groups=3)
    got = run_table_aggregate_locally(spec, log, SCHEMA)
    oracle_log = [[r for r in b if r["ts"] is not None] for b in log]
    want = oracle_table_aggregate(spec, oracle_log, columns=COLUMNS)
    assert _groups(got.rows, group_by) == _groups(want.rows, group_by)
