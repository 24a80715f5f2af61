"""Hostile input through window aggregations (issue 13), no Spark.

Tumbling and session windows over hostile rows (:mod:`hostile`): ``group_by`` on unicode,
binary, decimal(38,18) or float columns (NaN, ±inf, -0.0, NULL), ``count`` / ``sum`` / ``min`` /
``max`` / ``avg`` of a float column holding NaN and ±inf, exact ``count_distinct``, ``min`` of
decimals and event times, nested payloads (carried into dead letters), duplicate times and times
at 0001-01-01, before 1970 and at 9999-12-31, NULL event times. Each run is compared with the
oracle and every row is accounted for: each row carries ``bit = 1 << id`` and the windows sum
it, so the output names exactly which rows it aggregated.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from hostile import (
    BASE,
    END,
    HOSTILE,
    KEY_KINDS,
    PAYLOAD,
    assert_accounted,
    dead_letters,
    end_row,
    hostile_rows,
    oracle_rows,
    spark_dropped_ids,
)
from hypothesis import given
from hypothesis import strategies as st

from interlace.operators.window import Aggregation, Window
from interlace.state.accumulators import SumOverflowError
from interlace.testing.local import run_window_locally
from interlace.testing.oracle import canonical_rows
from interlace.testing.window_oracle import WindowBatch, oracle_window

GROUP_KINDS = ("ks", "kb", "kd", "kf")
SCHEMA = pa.schema([("id", pa.int64()), ("bit", pa.int64()),
                    *((k, KEY_KINDS[k][0]) for k in GROUP_KINDS), *PAYLOAD.items(),
                    ("ts", pa.timestamp("us"))])
COLUMNS = tuple(SCHEMA.names)
AGGS = [
    Aggregation(agg="count", as_="n"),
    Aggregation(agg="sum", column="bit", as_="bits"),
    Aggregation(agg="count", column="f", as_="n_f"),
    Aggregation(agg="sum", column="f", as_="f_sum"),
    Aggregation(agg="min", column="f", as_="f_min"),
    Aggregation(agg="max", column="f", as_="f_max"),
    Aggregation(agg="avg", column="f", as_="f_avg"),
    Aggregation(agg="count_distinct", column="u", mode="exact",
                max_distinct_values_per_group=100, as_="u_distinct"),
    Aggregation(agg="count_distinct", column="b", mode="exact",
                max_distinct_values_per_group=100, as_="b_distinct"),
    Aggregation(agg="min", column="d", as_="d_min"),
    Aggregation(agg="max", column="u", as_="u_max"),
    Aggregation(agg="min", column="ts", as_="ts_min"),
    Aggregation(agg="max", column="pt", as_="pt_max"),
]
MAX_ROWS = 40  # ids 0..39: their bits sum exactly in an int64


@st.composite
def window_specs(draw: Any) -> Window:
    kind = draw(st.sampled_from(["tumbling", "session"]))
    late_data = draw(st.sampled_from(["dlq", "drop"]))
    kw: dict[str, Any] = dict(
        kind=kind, event_time_column="ts", late_data=late_data, aggregations=AGGS,
        group_by=draw(st.sampled_from([[], *([g] for g in GROUP_KINDS), ["ks", "kf"]])),
        lateness_ms=draw(st.sampled_from([0, 1000])), max_groups_per_window=1000,
        key_groups=draw(st.integers(1, 4)))
    if kind == "tumbling":
        kw["duration_ms"] = draw(st.sampled_from([1000, 5000]))
    else:
        kw["gap_ms"] = draw(st.sampled_from([1000, 3000]))
    if late_data == "dlq":
        kw["dlq_horizon_ms"] = draw(st.sampled_from([3000, 86_400_000]))
    return Window(**kw)


@st.composite
def window_logs(draw: Any, max_batches: int = 5) -> list[WindowBatch]:
    """Batches of hostile rows (``bit = 1 << id``), then a batch at END."""
    log, next_id = [], 0
    for _ in range(draw(st.integers(1, max_batches))):
        n = min(draw(st.integers(0, 8)), MAX_ROWS - next_id)
        rows = draw(hostile_rows(range(next_id, next_id + n)))
        log.append(WindowBatch(rows=tuple({**r, "bit": 1 << r["id"]} for r in rows)))
        next_id += n
    return [*log, WindowBatch(rows=({**end_row(), "bit": 0},))]


def by_batch(rows: list[tuple[int, dict[str, Any]]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for b, r in rows:
        if '"reason": "null_event_time"' not in (r.get("_dead_letter") or ""):
            out.setdefault(b, []).append(r)
    return out


def ids_of(bits: int) -> set[int]:
    return {i for i in range(MAX_ROWS) if bits >> i & 1}


@HOSTILE
@given(spec=window_specs(), log=window_logs())
def test_window_on_hostile_input_equals_the_oracle_and_accounts_for_every_row(spec, log):
    run = run_window_locally(spec, log, SCHEMA)
    want = oracle_window(spec, [WindowBatch(rows=tuple(oracle_rows(b.rows))) for b in log],
                         columns=COLUMNS)
    assert run.watermarks_ms == want.spark_watermarks_ms
    got, exp = by_batch(run.rows), {}
    for o in want.rows:
        exp.setdefault(o.batch, []).append(o.row)
    for b in sorted(set(got) | set(exp)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(exp.get(b, [])), f"batch {b}"
    letters = dead_letters(r for _, r in run.rows)
    null_time = sum(1 for d in letters if d["reason"] == "null_event_time")
    assert run.counters.get("late_dropped", 0) == want.late_dropped
    assert run.counters.get("dead_lettered", 0) - null_time == want.dead_lettered

    # Accounting: tumbling and session windows are disjoint, so each aggregated row is in
    # exactly one emitted window (its bit in exactly one `bits`); END's window stays open.
    windows = [r for _, r in run.rows if r.get("_dead_letter") is None]
    taken: set[int] = set()
    for w in windows:
        ids = ids_of(w["bits"])
        assert w["n"] == len(ids), w
        assert not ids & taken, sorted(ids & taken)
        taken |= ids
    batches = [b.rows for b in log]
    assert_accounted(
        {r["id"] for rows in batches for r in rows} - {-1},
        output=taken,
        dead={d["row"]["id"] for d in letters},
        spark=spark_dropped_ids(batches, run.watermarks_ms) - {-1},
        counted={n: run.counters.get(n, 0) for n in ("late_dropped", "null_event_time_dropped",
                                                     "out_of_range_dropped")})
    assert len(spark_dropped_ids(batches, run.watermarks_ms)) == run.spark_dropped


# --- Integer sums at the edges of int64 (Spark's ANSI sum fails past them) -----------------

BIG = [2**63 - 1, -(2**63), 2**62, -(2**62), 2**61 + 3, -(2**61), 1, -1, 0]
INT_SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64()), ("ts", pa.timestamp("us"))])
INT_AGGS = [Aggregation(agg="sum", column="v", as_="total"),
            Aggregation(agg="count", column="v", as_="n_v")]


@st.composite
def big_sum_cases(draw: Any) -> tuple[Window, list[WindowBatch]]:
    kind = draw(st.sampled_from(["tumbling", "hopping", "session"]))
    kw: dict[str, Any] = dict(kind=kind, event_time_column="ts", group_by=["k"],
                              aggregations=INT_AGGS, max_groups_per_window=100,
                              key_groups=draw(st.integers(1, 2)),
                              late_data=draw(st.sampled_from(["drop", "reopen"])))
    if kw["late_data"] == "reopen":
        kw["allowed_lateness_ms"] = 60_000
    if kind == "session":
        kw["gap_ms"] = draw(st.sampled_from([5_000, 10_000]))
    else:
        kw["duration_ms"] = 10_000
        if kind == "hopping":
            kw["hop_ms"] = 5_000
    rows = st.fixed_dictionaries({
        "k": st.sampled_from(["a", "b"]),
        "v": st.one_of(st.sampled_from(BIG), st.none()),
        "ts": st.integers(0, 40).map(lambda s: BASE + dt.timedelta(seconds=s))})
    log = [WindowBatch(rows=tuple(draw(st.lists(rows, max_size=5))))
           for _ in range(draw(st.integers(1, 5)))]
    return Window(**kw), [*log, WindowBatch(rows=({"k": "a", "v": 0, "ts": END},))]


def outcome(spec: Window, log: list[WindowBatch]) -> list[Any]:
    return canonical_rows([o.row for o in oracle_window(spec, log, columns=INT_SCHEMA.names).rows])


@HOSTILE
@given(case=big_sum_cases())
def test_integer_sums_at_the_int64_edges_equal_the_oracle_or_fail_where_it_does(case):
    spec, log = case
    try:
        want = outcome(spec, log)
    except OverflowError as e:
        fails_at = int(str(e).split(":", 1)[0].removeprefix("batch "))
        with pytest.raises(SumOverflowError, match=r"^integer sum overflow: sum\(v\) AS total "):
            run_window_locally(spec, log[:fails_at + 1], INT_SCHEMA)
        log, want = log[:fails_at], outcome(spec, log[:fails_at])  # the batches before run
    got = run_window_locally(spec, log, INT_SCHEMA).rows if log else []
    assert canonical_rows([r for _, r in got]) == want
