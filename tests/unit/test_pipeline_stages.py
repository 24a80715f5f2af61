"""Chains in the pipeline model (SEMANTICS §11): ``[[stages]]``, the graph, lags, lateness.

No Spark: the stage model, its TOML, the checks of the graph and of each stage, the lag each
operator states for its output time columns, and the lateness a stage gets from it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from interlace import Aggregation, ForeignKeyJoin, Join, StreamTableJoin, TableJoin, Window
from interlace.operators.errors import ConfigError
from interlace.pipeline import Pipeline, Source, Target
from interlace.pipeline.stages import Stage

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

ORDERS = Source(name="orders", format="json", path="o", event_time_column="ts",
                schema="order_id BIGINT, customer STRING, amount DOUBLE, ts TIMESTAMP")
PAYMENTS = Source(name="payments", format="json", path="p", event_time_column="ts",
                  schema="order_id BIGINT, paid DOUBLE, ts TIMESTAMP")
JOIN = Join(left_keys=["order_id"], right_keys=["order_id"], how="left", lower_ms=0,
            upper_ms=600_000, event_time_column="ts", lateness_ms=120_000)


def _window(**kw) -> Window:
    fields = dict(kind="session", gap_ms=1_800_000, event_time_column="left_ts",
                  group_by=["left_customer"], max_groups_per_window=100,
                  aggregations=[Aggregation(agg="sum", column="left_amount", as_="amount")])
    return Window(**{**fields, **kw})


def _chain(*stages: Stage, sources=(ORDERS, PAYMENTS)) -> Pipeline:
    return Pipeline(name="c", sources=list(sources), stages=list(stages),
                    target=Target(kind="duckdb"))


PAID = Stage(name="paid", left_source="orders", right_source="payments", join=JOIN)


def test_a_stage_reading_a_join_gets_the_lag_of_the_time_column_it_reads_as_lateness():
    p = _chain(PAID, Stage(name="s", window_source="paid", window=_window()))
    runs = p.stage_runs()
    assert [r.pipeline.name for r in runs] == ["c.paid", "c.s"]
    assert runs[1].pipeline.window.lateness_ms == 600_000  # upper + AL of the left side
    assert runs[1].upstream == {"paid": "paid"} and runs[0].consumers == ("s",)
    assert [r.final for r in runs] == [False, True]
    src = runs[1].pipeline.sources[0]
    assert src.path == ".interlace/checkpoints/c/channels/paid/s"
    assert [c for c, _ in src.ddl_columns()] == [
        "left_order_id", "left_customer", "left_amount", "left_ts",
        "right_order_id", "right_paid", "right_ts"]
    assert dict(src.ddl_columns())["left_ts"] == "TIMESTAMP"
    assert runs[1].pipeline.spark.checkpoint == ".interlace/checkpoints/c/stages/s"
    assert p.output_columns() == ["window_start", "window_end", "left_customer", "amount"]
    assert p.resolved_target().table == "c"
    # On the right side the bound is l.t - lower: 0 ms here.
    right = _chain(PAID, Stage(name="s", window_source="paid",
                               window=_window(event_time_column="right_ts")))
    assert right.stage_runs()[1].pipeline.window.lateness_ms == 0


def test_a_lateness_below_the_lag_is_refused_naming_the_minimum():
    with pytest.raises(ConfigError) as e:
        _chain(PAID, Stage(name="s", window_source="paid",
                           window=_window(lateness_ms=599_999)))
    msg = str(e.value)
    assert msg.startswith("[stages.transform.window] of [[stages]] #2: `lateness_ms`=599999")
    assert "Set lateness_ms >= 600000 (the minimum)" in msg
    # At the lag, and above it, it is kept.
    ok = _chain(PAID, Stage(name="s", window_source="paid", window=_window(lateness_ms=700_000)))
    assert ok.stage_runs()[1].pipeline.window.lateness_ms == 700_000


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ([PAID, Stage(name="s", window_source="payd", window=_window())],
         "`source` names 'payd', which is neither a source nor a stage"),
        ([Stage(name="a", left_source="b", right_source="payments",
                join=Join(left_keys=["x"], right_keys=["order_id"], left_event_time_column="ts", time_window_ms=1,
                          right_event_time_column="ts")),
          Stage(name="b", left_source="a", right_source="orders",
                join=Join(left_keys=["x"], right_keys=["order_id"], left_event_time_column="ts", time_window_ms=1,
                          right_event_time_column="ts"))],
         "the stages form a cycle (a -> b -> a)"),
        ([PAID, Stage(name="paid", window_source="paid", window=_window())],
         "[[stages]] #2: duplicate name 'paid' (also [[stages]] #1)"),
        ([PAID, Stage(name="orders", window_source="paid", window=_window())],
         "duplicate name 'orders' (also [[sources]] #1)"),
        ([PAID, Stage(name="s", window_source="paid", window=_window(event_time_column="ts"))],
         "`event_time_column` 'ts' is not a column of stage 'paid'"),
        ([PAID, Stage(name="s", window_source="paid",
                      window=_window(event_time_column="left_customer"))],
         "`event_time_column` 'left_customer' of stage 'paid' has no bounded lag"),
        ([PAID, Stage(name="s", window_source="paid", window=_window(group_by=["customer"]))],
         "`group_by` names column(s) ['customer'] absent from stage 'paid'"),
        ([PAID, Stage(name="s", window_source="paid", window=_window()),
          Stage(name="t", window_source="paid", window=_window())],
         "stages ['s', 't'] are read by no other stage"),
        ([Stage(name="s", window_source="s", window=_window())],
         "stage 's' reads itself"),
        ([PAID, Stage(name="s", window_source="paid",
                      window=_window(kind="tumbling", duration_ms=60_000, gap_ms=None,
                                     event_time_column="left_ts", time_mode="processing"))],
         "under time_mode='processing'"),
    ],
    ids=["unknown-input", "cycle", "duplicate-stage", "stage-named-as-source",
         "event-time-missing", "no-lag", "group-missing", "two-finals", "self", "processing"],
)
def test_a_bad_chain_is_one_error_naming_the_stage_and_the_fix(stages, message):
    with pytest.raises(ConfigError) as e:
        _chain(*stages)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_session_start_has_no_lag_and_a_fixed_window_start_lags_by_its_duration_more():
    sessions = _window()
    assert sessions.output_lags_ms() == {"window_end": 0}
    fixed = _window(kind="hopping", gap_ms=None, duration_ms=60_000, hop_ms=30_000,
                    late_data="reopen", lateness_ms=5_000, allowed_lateness_ms=7_000)
    assert fixed.output_lags_ms() == {"window_start": 66_999, "window_end": 6_999}
    dropped = _window(kind="tumbling", gap_ms=None, duration_ms=60_000)
    assert dropped.output_lags_ms() == {"window_start": 59_999, "window_end": 0}


@pytest.mark.parametrize(
    ("spec", "lags"),
    [
        (JOIN, {"left_ts": 600_000, "right_ts": 0}),
        (Join(left_keys=["k"], right_keys=["k"], lower_ms=-300_000, upper_ms=-60_000,
              event_time_column="ts", late_data="reopen", lateness_ms=10_000,
              allowed_lateness_ms=20_000),
         {"left_ts": 0, "right_ts": 320_000}),
        (Join(left_keys=["k"], right_keys=["k"], how="left_semi", time_window_ms=5_000,
              left_event_time_column="a", right_event_time_column="b"), {"a": 5_000}),
        (Join(left_keys=["k"], right_keys=["k"], time_window_ms=5_000, event_time_column="ts",
              output_left_columns=["k"], left_prefix="l_", right_prefix="r_"),
         {"r_ts": 5_000}),
        (StreamTableJoin(left_keys=["k"], right_keys=["k"], event_time_column="ts",
                         lateness_ms=7_000, history_retention_ms=9_000), {"left_ts": 9_000}),
        (TableJoin(left_keys=["k"], right_keys=["k"], event_time_column="ts"),
         {"event_time": 0}),
        (ForeignKeyJoin(left_keys=["k"], right_keys=["p"], foreign_key_columns=["f"],
                        event_time_column="ts", late_data="dlq", dlq_horizon_ms=3_600_000),
         {"event_time": 3_600_000}),
    ],
    ids=["join-left", "join-reopen-negative", "semi", "left-time-not-output", "stream-table",
         "table", "foreign-key-dlq"],
)
def test_each_operator_states_the_lag_of_its_output_time_columns(spec, lags):
    assert spec.output_lags_ms() == lags


def test_a_join_of_one_stage_with_itself_reads_two_channels():
    p = Pipeline.load(EXAMPLES / "page_views_week.toml")
    daily, compare = p.stage_runs()
    assert daily.consumers == ("compare", "compare.right")
    assert compare.upstream == {"daily": "daily", "daily.right": "daily"}
    paths = [s.path for s in compare.pipeline.sources]
    assert paths == [".interlace/checkpoints/page-views-week/channels/daily/compare",
                     ".interlace/checkpoints/page-views-week/channels/daily/compare.right"]
    assert compare.pipeline.join.lateness_ms == 0  # window_end lags a window by 0


@pytest.mark.parametrize("example", ["paid_sessions.toml", "page_views_week.toml"])
def test_the_chain_examples_round_trip_through_toml(example):
    p = Pipeline.load(EXAMPLES / example)
    assert Pipeline.from_toml(p.to_toml()) == p
    assert len(p.stages) == 2


def test_a_python_chain_round_trips_and_names_lines_in_toml_errors():
    p = _chain(PAID, Stage(name="s", window_source="paid", window=_window()))
    text = p.to_toml()
    assert Pipeline.from_toml(text) == p
    assert "[[stages]]" in text and "[stages.transform.window]" in text
    bad = text.replace('group_by = ["left_customer"]', 'group_by = ["left_customer"]\n'
                                                        "lateness_ms = 5")
    with pytest.raises(ConfigError) as e:
        Pipeline.from_toml(bad, path="chain.toml")
    line = bad.splitlines().index("lateness_ms = 5") + 1
    assert str(e.value).endswith(f"(line {line} of chain.toml)")
    agg = bad.replace('as = "amount"', 'as = "amount"\nnope = 1')
    with pytest.raises(ConfigError) as e:
        Pipeline.from_toml(agg, path="chain.toml")
    assert re.search(r"\[\[stages.transform.window.aggregations\]\] #1 of \[\[stages\]\] #2: "
                     r"unknown key `nope`.*\(line \d+ of chain.toml\)", str(e.value))


def test_a_chain_keeps_its_operators_in_its_stages():
    with pytest.raises(ConfigError, match=r"\[transform.join\]: a pipeline with \[\[stages\]\]"):
        Pipeline(name="c", sources=[ORDERS, PAYMENTS], join=JOIN, left_source="orders",
                 right_source="payments",
                 stages=[PAID, Stage(name="s", window_source="paid", window=_window())],
                 target=Target(kind="console"))
    with pytest.raises(ConfigError, match="needs exactly one operator"):
        Stage(name="s")


def test_a_window_over_decimals_hands_sparks_decimal_types_to_the_next_stage():
    # sum of DECIMAL(12,2) is DECIMAL(22,2), avg DECIMAL(16,6) (Spark's), in a stage's output.
    money = Source(name="money", format="json", path="m", event_time_column="ts",
                   schema="customer STRING, amount DECIMAL(12,2), ts TIMESTAMP")
    w = Window(kind="tumbling", duration_ms=60_000, event_time_column="ts", group_by=["customer"],
               max_groups_per_window=100, aggregations=[
                   Aggregation(agg="sum", column="amount", as_="total"),
                   Aggregation(agg="avg", column="amount", as_="mean"),
                   Aggregation(agg="max", column="amount", as_="top")])
    later = _window(kind="tumbling", duration_ms=3_600_000, gap_ms=None, event_time_column=
                    "window_end", group_by=["customer"],
                    aggregations=[Aggregation(agg="sum", column="total", as_="hourly")])
    p = _chain(Stage(name="minutes", window_source="money", window=w),
               Stage(name="hours", window_source="minutes", window=later), sources=(money,))
    cols = dict(p.stage_runs()[1].pipeline.sources[0].ddl_columns())
    assert (cols["total"], cols["mean"], cols["top"]) == ("DECIMAL(22,2)", "DECIMAL(16,6)",
                                                          "DECIMAL(12,2)")
    assert p.output_columns() == ["window_start", "window_end", "customer", "hourly"]
