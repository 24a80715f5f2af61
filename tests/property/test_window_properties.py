"""Property tests of window aggregation (no Spark): the operator's applyInPandasWithState
function, driven by interlace.testing.local with Spark's rules, against the oracle."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from interlace.operators.window import Aggregation, Window
from interlace.testing.local import run_window_locally
from interlace.testing.oracle import canonical_rows
from interlace.testing.window_oracle import WindowBatch, oracle_window
from strategies import module_constants

BASE = dt.datetime(2026, 1, 1)
SCHEMA = pa.schema([("user", pa.int64()), ("amount", pa.int64()), ("price", pa.float64()),
                    ("page", pa.string()), ("ts", pa.timestamp("ns")),
                    ("cost", pa.decimal128(12, 2))])
COLS = SCHEMA.names
AGGS = [
    Aggregation(agg="count", as_="n"),
    Aggregation(agg="count", column="amount", as_="n_amount"),
    Aggregation(agg="sum", column="amount", as_="amount_sum"),
    Aggregation(agg="sum", column="price", as_="price_sum"),
    Aggregation(agg="min", column="page", as_="page_min"),
    Aggregation(agg="max", column="amount", as_="amount_max"),
    Aggregation(agg="avg", column="price", as_="price_avg"),
    Aggregation(agg="first", column="page", as_="page_first"),
    Aggregation(agg="last", column="amount", as_="amount_last"),
    Aggregation(agg="min", column="ts", as_="ts_min"),
    Aggregation(agg="count_distinct", column="page", mode="exact",
                max_distinct_values_per_group=1000, as_="pages"),
    Aggregation(agg="sum", column="cost", as_="cost_sum"),  # DECIMAL(22,2), exact
    Aggregation(agg="avg", column="cost", as_="cost_avg"),  # DECIMAL(16,6), half up
    Aggregation(agg="max", column="cost", as_="cost_max"),
]


@st.composite
def window_specs(draw, kind=None, late_data=None):
    kind = kind or draw(st.sampled_from(["tumbling", "hopping", "session"]))
    late_data = late_data or draw(st.sampled_from(["drop", "reopen", "dlq"]))
    kw = dict(kind=kind, event_time_column="ts", group_by=draw(st.sampled_from([["user"], []])),
              late_data=late_data, lateness_ms=draw(st.sampled_from([0, 2000])),
              max_groups_per_window=1000, aggregations=AGGS, key_groups=3)
    if kind == "tumbling":
        kw["duration_ms"] = draw(st.sampled_from([5000, 10000]))
    elif kind == "hopping":
        kw["duration_ms"] = 10000
        kw["hop_ms"] = draw(st.sampled_from([2000, 3000, 5000, 10000]))
    else:
        kw["gap_ms"] = draw(st.sampled_from([3000, 5000]))
    if late_data == "reopen":
        kw["allowed_lateness_ms"] = draw(st.sampled_from([2000, 6000]))
    if late_data == "dlq":
        kw["dlq_horizon_ms"] = draw(st.sampled_from([4000, 86_400_000]))
    return Window(**kw)


@st.composite
def window_logs(draw, max_batches=6):
    log, serial = [], 0
    for b in range(draw(st.integers(1, max_batches))):
        rows = []
        for _ in range(draw(st.integers(0, 6))):
            sec = 100 + b * 4 + draw(st.integers(-16, 6)) / 2
            rows.append({
                "user": draw(st.sampled_from([0, 1, 2, None])),
                "amount": draw(st.one_of(st.none(), st.integers(-5, 50))),
                "price": draw(st.one_of(st.none(), st.integers(0, 40).map(lambda x: x / 4))),
                "page": draw(st.sampled_from(["/a", "/b", "/c", None])),
                "ts": BASE + dt.timedelta(seconds=sec),
                "cost": draw(st.one_of(st.none(), st.integers(-10**10, 10**10).map(
                    lambda c: Decimal(c).scaleb(-2)))),
            })
            serial += 1
        log.append(WindowBatch(rows=tuple(rows)))
    return log


@pytest.fixture(autouse=True, scope="module", params=["every group encoded", "groups narrowed"])
def groups_narrowed(request: Any) -> Any:
    """Run every property twice: each call encoding every held slot's group, and each call
    narrowing the held slots to the groups its rows may have first (``group_codes`` forced
    on at any size; issue 34)."""
    with module_constants("interlace.operators.window.slots",
                          request.param == "groups narrowed",
                          NARROW_MIN_SLOTS=0, NARROW_RATIO=0):
        yield request.param


@given(spec=window_specs(), log=window_logs())
def test_window_operator_equals_oracle(spec, log):
    run = run_window_locally(spec, log, SCHEMA)
    want = oracle_window(spec, log, columns=COLS)
    assert run.watermarks_ms == want.spark_watermarks_ms
    got_by, want_by = {}, {}
    for b, r in run.rows:
        got_by.setdefault(b, []).append(r)
    for o in want.rows:
        want_by.setdefault(o.batch, []).append(o.row)
    for b in sorted(set(got_by) | set(want_by)):
        assert canonical_rows(got_by.get(b, [])) == canonical_rows(want_by.get(b, [])), f"batch {b}"
    assert run.counters.get("late_dropped", 0) == want.late_dropped
    assert run.counters.get("dead_lettered", 0) == want.dead_lettered


@given(rows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 200)), max_size=40),
       cuts=st.lists(st.integers(1, 39), max_size=5),
       kind=st.sampled_from(["tumbling", "hopping", "session"]))
def test_in_order_result_is_independent_of_the_micro_batch_split(rows, cuts, kind):
    rows = sorted(rows, key=lambda r: r[1])
    data = [{"user": u, "amount": s, "price": None, "page": f"/{s % 3}",
             "ts": BASE + dt.timedelta(seconds=s / 2), "cost": Decimal(s * 7).scaleb(-2)}
            for u, s in rows]
    extra = dict(duration_ms=10_000) if kind != "session" else dict(gap_ms=4_000)
    if kind == "hopping":
        extra["hop_ms"] = 3_000
    spec = Window(kind=kind, event_time_column="ts", group_by=["user"], lateness_ms=1_000,
                  max_groups_per_window=100, aggregations=AGGS, **extra)
    flush = WindowBatch(rows=({"user": 99, "amount": 0, "price": None, "page": "/z",
                               "ts": BASE + dt.timedelta(hours=1), "cost": None},))

    def final(log):
        out = run_window_locally(spec, log, SCHEMA).rows
        return Counter(canonical_rows([r for _, r in out if r["user"] != 99]))

    whole = final([WindowBatch(rows=tuple(data)), flush])
    bounds = [0, *sorted({c for c in cuts if c < len(data)}), len(data)]
    split = [WindowBatch(rows=tuple(data[a:b])) for a, b in zip(bounds, bounds[1:], strict=False)]
    assert final([*split, flush]) == whole
