"""Spark-free window tests: hand-written scenarios run through the operator's own
applyInPandasWithState function and compared with the oracle, plus caps and config errors."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow as pa
import pytest
from interlace.operators.window import Aggregation, Window
from interlace.state.accumulators import DistinctCapError

from interlace import ConfigError, StateCapError
from interlace.testing.local import run_window_locally
from interlace.testing.oracle import canonical_rows
from interlace.testing.window_oracle import WindowBatch, oracle_window

T0 = dt.datetime(2026, 1, 1)
SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64()), ("t", pa.timestamp("ns"))])
COLS = SCHEMA.names
COUNT = Aggregation(agg="count", as_="n")
SUM = Aggregation(agg="sum", column="v", as_="total")


def row(k, sec, v=1):
    return {"k": k, "v": v, "t": T0 + dt.timedelta(seconds=sec)}


def window(**kw):
    base = dict(kind="tumbling", duration_ms=10_000, event_time_column="t", group_by=["k"],
                max_groups_per_window=100, aggregations=[COUNT, SUM], key_groups=2)
    base.update(kw)
    return Window(**base)


SCENARIOS = {
    "tumbling_drop_late": (window(), [[row("a", 1), row("b", 2)], [row("a", 12)],
                                      [row("a", 3), row("a", 25)], [row("b", 40)]]),
    "hopping_off_grid": (window(kind="hopping", hop_ms=3_000),
                         [[row("a", 7.5), row("a", 9.99)], [row("a", 30)]]),
    "reopen_reemits_with_revision": (
        window(late_data="reopen", allowed_lateness_ms=30_000),
        [[row("a", 1)], [row("a", 15)], [row("a", 2, 5)], [row("a", 4, 7), row("a", 60)], [row("a", 100)]]),
    "session_merge_retracts_absorbed": (
        window(kind="session", duration_ms=None, gap_ms=10_000, late_data="reopen",
               allowed_lateness_ms=60_000),
        [[row("a", 0), row("a", 5)], [row("a", 22)], [row("a", 40)], [row("a", 60)], [row("a", 14)]]),
    "session_dlq": (window(kind="session", duration_ms=None, gap_ms=5_000, late_data="dlq"),
                    [[row("a", 0)], [row("a", 20)], [row("a", 1), row(None, 21)], [row("b", 50)]]),
    "null_group_is_one_group": (window(), [[row(None, 1), row(None, 2), row("a", 3)], [row("z", 30)]]),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_equals_oracle_batch_by_batch(name):
    spec, batches = SCENARIOS[name]
    log = [WindowBatch(rows=tuple(b)) for b in batches]
    got = run_window_locally(spec, log, SCHEMA)
    want = oracle_window(spec, log, columns=COLS)
    assert want.rows, "scenario must emit something"
    g, w = {}, {}
    for b, r in got.rows:
        g.setdefault(b, []).append(r)
    for o in want.rows:
        w.setdefault(o.batch, []).append(o.row)
    assert g.keys() == w.keys()
    for b in g:
        assert canonical_rows(g[b]) == canonical_rows(w[b]), f"batch {b}"


def test_session_merge_emits_a_retraction_for_the_absorbed_session():
    spec, batches = SCENARIOS["session_merge_retracts_absorbed"]
    out = run_window_locally(spec, [WindowBatch(rows=tuple(b)) for b in batches], SCHEMA).rows
    last = [(r["n"], r["revision"], r["retracted"]) for b, r in out if b == 4]
    assert Counter(last) == Counter([(4, 1, False), (1, 1, True), (1, 0, False)])


def test_group_cap_fails_loudly_with_the_seed_wording():
    spec = window(max_groups_per_window=2, name="clicks", key_groups=1)
    log = [WindowBatch(rows=(row("a", 1), row("b", 2), row("c", 3)))]
    with pytest.raises(StateCapError, match=r"^window state cap hit: max_groups_per_window=2 "
                       r"reached on window \[2026-01-01T00:00:00Z, 2026-01-01T00:00:10Z\) "
                       r"for pipeline clicks$"):
        run_window_locally(spec, log, SCHEMA)


def test_exact_distinct_cap_fails_loudly():
    spec = window(aggregations=[Aggregation(agg="count_distinct", column="v", mode="exact",
                                            max_distinct_values_per_group=2, as_="d")])
    log = [WindowBatch(rows=(row("a", 1, 1), row("a", 2, 2), row("a", 3, 3)))]
    with pytest.raises(DistinctCapError, match="max_distinct_values_per_group"):
        run_window_locally(spec, log, SCHEMA)


def test_approximate_distinct_is_close_on_many_values():
    spec = window(group_by=[], aggregations=[
        Aggregation(agg="count_distinct", column="v", as_="d")])
    rows = tuple(row("a", 1 + (i % 5) / 10, i % 5000) for i in range(20_000))
    log = [WindowBatch(rows=rows), WindowBatch(rows=(row("a", 100),))]
    out = [r for _, r in run_window_locally(spec, log, SCHEMA).rows]
    assert len(out) == 1 and abs(out[0]["d"] - 5000) <= 3 * 0.0081 * 5000


@pytest.mark.parametrize(
    ("kw", "pattern"),
    [
        (dict(max_groups_per_window=None), r"`max_groups_per_window` is required"),
        (dict(kind="hopping", hop_ms=20_000), r"`hop_ms` must be in \(0, `duration_ms`\]"),
        (dict(kind="hopping", hop_ms=0), r"`hop_ms` must be in"),
        (dict(kind="sliding"), r"`kind` must be one of"),
        (dict(kind="session", duration_ms=None), r"`gap_ms` must be an int"),
        (dict(late_data="reopen"), r"`allowed_lateness_ms` must be > 0"),
        (dict(late_data="later"), r"`late_data` must be one of"),
        (dict(aggregations=[COUNT, Aggregation(agg="sum", column="v", as_="n")]), r"collide"),
        (dict(group_by=["n"]), r"collide"),
        (dict(aggregations=[]), r"non-empty"),
    ],
)
def test_bad_window_spec_is_rejected(kw, pattern):
    with pytest.raises(ConfigError, match=pattern):
        window(**kw)


@pytest.mark.parametrize(
    ("kw", "pattern"),
    [
        (dict(agg="median", as_="m", column="v"), r"`agg` must be one of"),
        (dict(agg="sum", as_="s"), r"needs a `column`"),
        (dict(agg="count_distinct", column="v", mode="exact", as_="d"),
         r"requires `max_distinct_values_per_group`"),
        (dict(agg="count_distinct", column="v", mode="fuzzy", as_="d"), r"`mode` must be one of"),
        (dict(agg="sum", column="v", mode="exact", as_="d"), r"`mode` only applies"),
    ],
)
def test_bad_aggregation_is_rejected(kw, pattern):
    with pytest.raises(ConfigError, match=pattern):
        Aggregation(**kw)


@pytest.mark.parametrize("kind", ["tumbling", "hopping", "session"])
@pytest.mark.parametrize("late_data", ["drop", "dlq"])
def test_null_event_time_rows_are_counted_or_dead_lettered(kind, late_data):
    import json

    import numpy as np
    import pandas as pd
    from interlace.operators.window import TIME_US_COLUMN, WindowPlan, WindowState, step_window

    extra = {"hopping": dict(hop_ms=5_000), "session": dict(duration_ms=None, gap_ms=5_000)}.get(kind, {})
    spec = window(kind=kind, late_data=late_data, **extra)
    plan = WindowPlan.from_schema(spec, SCHEMA)
    frame = pd.DataFrame({TIME_US_COLUMN: [np.nan, 1_767_225_601_000_000.0], "k": ["a", "a"],
                          "v": [1, 2], "t": [pd.NaT, pd.Timestamp("2026-01-01 00:00:01")]})
    r = step_window(plan, WindowState.empty(plan), frame, 1_767_225_700_000_000)
    if late_data == "dlq":
        letters = [json.loads(x) for x in r.output["_dead_letter"].dropna()]
        assert [x["reason"] for x in letters].count("null_event_time") == 1
        assert r.counters["dead_lettered"] == len(letters)
    else:
        assert r.counters["null_event_time_dropped"] == 1
    assert all(n <= 1 for n in r.output["n"].dropna())
