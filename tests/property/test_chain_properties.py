"""The lag rule of chains is right and tight (SEMANTICS §11), without Spark.

* **Right**: every row an operator emits in micro-batch ``b`` has, in each output time column
  its spec states a lag for, a time at or after ``wm(b - 1) - lag`` (the operator itself,
  driven by ``interlace.testing.local``, on random logs). So a stage reading that column
  with ``lateness_ms = lag`` drops nothing: the oracles composed through the channel rule
  (:mod:`interlace.testing.chain`) say so on the same logs.
* **Tight**: on a crafted input, one millisecond less lateness drops a row downstream.

The downstream stage in these tests is a tumbling window of 1 ms over the column: a row at
``t`` is late for it iff ``wm >= t + 1 ms``, the strictest reading any operator makes.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st
from strategies import ARROW, COLS, join_specs, messy_logs
from test_window_properties import COLS as WINDOW_COLS
from test_window_properties import SCHEMA as WINDOW_SCHEMA
from test_window_properties import window_logs, window_specs

from interlace import Aggregation, Join, Window
from interlace.testing.chain import channel_files, window_log
from interlace.testing.local import run_join_locally, run_window_locally
from interlace.testing.log import JoinBatch, to_us
from interlace.testing.oracles import oracle_join, oracle_window

BASE = dt.datetime(2026, 1, 1)


def _assert_within_lag(spec, run) -> int:
    """Every emitted row's lagged times are >= wm(b - 1) - lag; return how many were checked."""
    checked = 0
    lags = spec.output_lags_ms()
    for batch, row in run.rows:
        if batch == 0 or run.watermarks_ms[batch - 1] <= 0:
            continue  # no watermark before this batch: nothing to be behind
        wm_prev_us = (run.watermarks_ms[batch - 1] + spec.horizon_ms) * 1000
        for column, lag in lags.items():
            if row.get(column) is not None:
                assert to_us(row[column]) >= wm_prev_us - lag * 1000, (column, row, batch)
                checked += 1
    return checked


def _downstream_late(up, horizon_ms: int, column: str, lateness_ms: int) -> int:
    """Rows of ``column`` a 1 ms tumbling window reading ``up``'s channel judges late."""
    files = [(tuple(r for r in rows if r.get(column) is not None), clock)
             for rows, clock in channel_files(up, horizon_ms=horizon_ms)]
    window = Window(kind="tumbling", duration_ms=1, event_time_column=column,
                    lateness_ms=lateness_ms, group_by=[], max_groups_per_window=10,
                    aggregations=[Aggregation(agg="count", as_="n")])
    down = oracle_window(window, window_log(files), columns=up.output_columns)
    return down.late_dropped + down.spark_dropped


@given(spec=join_specs(), log=messy_logs())
def test_a_join_emits_no_row_further_behind_its_watermark_than_the_lag(spec, log):
    run = run_join_locally(spec, log, ARROW, ARROW)
    _assert_within_lag(spec, run)
    up = oracle_join(spec, log, left_columns=COLS, right_columns=COLS)
    for column, lag in spec.output_lags_ms().items():
        assert _downstream_late(up, spec.horizon_ms, column, lag) == 0


@given(spec=window_specs(), log=window_logs())
def test_a_window_emits_no_row_further_behind_its_watermark_than_the_lag(spec, log):
    run = run_window_locally(spec, log, WINDOW_SCHEMA)
    _assert_within_lag(spec, run)
    up = oracle_window(spec, log, columns=WINDOW_COLS)
    for column, lag in spec.output_lags_ms().items():
        assert _downstream_late(up, spec.horizon_ms, column, lag) == 0


def _at(ms: int) -> dt.datetime:
    return BASE + dt.timedelta(milliseconds=ms)


def test_one_millisecond_below_a_joins_lag_drops_a_row_it_delayed():
    # A left row at 99.999 s waits for its payment until wm passes 99.999 + 10 s. Batch 2
    # sees wm = 109.999 s (not past it: strict), batch 3 wm = 130 s: the row is emitted
    # unmatched, exactly lag = 10 s behind the previous wm.
    spec = Join(left_keys=["id"], right_keys=["id"], how="left", lower_ms=0, upper_ms=10_000,
                event_time_column="ts")
    log = [
        JoinBatch(left=[{"id": 1, "v": "l", "ts": _at(99_999)}],
                  right=[{"id": 7, "v": "r", "ts": _at(109_999)}]),
        JoinBatch(left=[{"id": 2, "v": "l", "ts": _at(109_999)}],
                  right=[{"id": 8, "v": "r", "ts": _at(115_000)}]),
        JoinBatch(left=[{"id": 3, "v": "l", "ts": _at(130_000)}],
                  right=[{"id": 9, "v": "r", "ts": _at(130_000)}]),
    ]
    up = oracle_join(spec, log, left_columns=COLS, right_columns=COLS)
    emitted = [(o.batch, o.row["left_ts"]) for o in up.rows if o.row["left_id"] == 1]
    assert emitted == [(3, _at(99_999))]
    lag = spec.output_lags_ms()["left_ts"]
    assert lag == 10_000
    assert _downstream_late(up, spec.horizon_ms, "left_ts", lag) == 0
    assert _downstream_late(up, spec.horizon_ms, "left_ts", lag - 1) == 1


def _window_rows(*times_ms: float) -> list:
    from interlace.testing.oracles import WindowBatch

    return [WindowBatch(rows=[{"user": 1, "amount": 1, "price": 1.0, "page": "/a",
                               "ts": BASE + dt.timedelta(microseconds=round(ms * 1000))}])
            for ms in times_ms]


def test_one_millisecond_below_a_reopened_windows_lag_drops_a_revision():
    # Window [100 s, 101 s) closes in batch 2 (wm 102.999 s); the watermark stays there, so a
    # late row at 100.9995 s in batch 3 (past Spark's W = wm - AL = 100.999 s) reopens it
    # (kept while wm < 101 s + AL = 103 s): the revision's end, 101 s, is AL - 1 ms = 1.999 s
    # behind the previous wm.
    spec = Window(kind="tumbling", duration_ms=1000, event_time_column="ts", group_by=[],
                  late_data="reopen", allowed_lateness_ms=2_000, lateness_ms=0,
                  max_groups_per_window=10, aggregations=[Aggregation(agg="count", as_="n")])
    up = oracle_window(spec, _window_rows(100_200, 102_999, 102_000, 100_999.5),
                       columns=WINDOW_COLS)
    ends = [(o.batch, o.row["window_end"], o.row["revision"]) for o in up.rows
            if o.row["window_start"] == _at(100_000)]
    assert ends == [(2, _at(101_000), 0), (3, _at(101_000), 1)]
    lag = spec.output_lags_ms()["window_end"]
    assert lag == 1_999
    assert _downstream_late(up, spec.horizon_ms, "window_end", lag) == 0
    assert _downstream_late(up, spec.horizon_ms, "window_end", lag - 1) == 1


def test_one_millisecond_below_a_windows_start_lag_drops_a_window():
    # Window [100 s, 101 s) is emitted in batch 2 (wm 101.5 s); the previous wm was 100.999 s,
    # so its start is duration - 1 ms = 0.999 s behind it.
    spec = Window(kind="tumbling", duration_ms=1000, event_time_column="ts", group_by=[],
                  lateness_ms=0, max_groups_per_window=10,
                  aggregations=[Aggregation(agg="count", as_="n")])
    up = oracle_window(spec, _window_rows(100_999, 101_500), columns=WINDOW_COLS)
    assert [(o.batch, o.row["window_start"]) for o in up.rows] == [(2, _at(100_000))]
    lag = spec.output_lags_ms()["window_start"]
    assert lag == 999
    assert _downstream_late(up, spec.horizon_ms, "window_start", lag) == 0
    assert _downstream_late(up, spec.horizon_ms, "window_start", lag - 1) == 1


@given(st.data())
def test_the_lag_is_what_the_operators_state_for_the_columns_they_output(data):
    spec = data.draw(join_specs())
    lags = spec.output_lags_ms()
    al = spec.allowance_ms
    if spec.how in ("left_semi", "left_anti"):
        assert lags == {"ts": max(0, spec.upper + al)}
    else:
        assert lags == {"left_ts": max(0, spec.upper + al), "right_ts": max(0, al - spec.lower)}


def test_schemas_used_here_match_the_strategies():
    assert ARROW.names == COLS and isinstance(WINDOW_SCHEMA, pa.Schema)
