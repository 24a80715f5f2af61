"""``[transform.join] kind = "stream_table"``: the stream-table join in pipelines (issue 12).

Round trips (TOML → pipeline → TOML byte for byte, Python → TOML → Python equal), the
defaults the kind shares with the stream-stream join, and every validation error naming the
field, the fix and the line.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlace import ConfigError, Join, StreamTableJoin
from interlace.pipeline import Pipeline, Source, Target
from interlace.pipeline.kinds import JOIN_KINDS, join_kind, kinds_phrase

TOML = '''\
name = "orders-tiers"

[[sources]]
name = "orders"
format = "parquet"
path = "data/orders"
schema = "order_id BIGINT, customer STRING, amount DOUBLE, order_ts TIMESTAMP"
event_time_column = "order_ts"

[[sources]]
name = "customers"
format = "json"
path = "data/customers"
schema = "customer STRING, tier STRING, deleted BOOLEAN, updated_ts TIMESTAMP"
event_time_column = "updated_ts"

[transform.join]
kind = "stream_table"
left_source = "orders"
right_source = "customers"
left_keys = ["customer"]
right_keys = ["customer"]
how = "left"
lateness_ms = 120_000
tombstone_column = "deleted"

[target]
kind = "duckdb"
table = "orders_tiers"
'''

ORDERS = Source(name="orders", format="parquet", path="data/orders",
                schema="order_id BIGINT, customer STRING, amount DOUBLE, order_ts TIMESTAMP",
                event_time_column="order_ts")
CUSTOMERS = Source(name="customers", format="json", path="data/customers",
                   schema="customer STRING, tier STRING, deleted BOOLEAN, updated_ts TIMESTAMP",
                   event_time_column="updated_ts")


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        Pipeline.from_toml(text)
    return str(info.value)


def pipeline(**spec) -> Pipeline:
    fields = {"left_keys": ["customer"], "right_keys": ["customer"],
              "left_event_time_column": "order_ts", "right_event_time_column": "updated_ts",
              **spec}
    return Pipeline(name="orders-tiers", sources=[ORDERS, CUSTOMERS],
                    join=StreamTableJoin(**fields), left_source="orders",
                    right_source="customers", target=Target(kind="console"))


def test_the_stream_table_kind_reads_into_a_stream_table_join_and_writes_back_unchanged():
    p = Pipeline.from_toml(TOML)
    assert p.join == StreamTableJoin(
        left_keys=["customer"], right_keys=["customer"], how="left", lateness_ms=120_000,
        tombstone_column="deleted", left_event_time_column="order_ts",
        right_event_time_column="updated_ts")
    assert join_kind(p.join).kind == "stream_table"
    assert p.output_columns() == ["left_order_id", "left_customer", "left_amount",
                                  "left_order_ts", "right_tier", "right_valid_from"]
    assert p.to_toml() == TOML
    assert Pipeline.from_toml(p.to_toml()) == p


def test_a_join_table_without_kind_is_still_the_stream_stream_join():
    text = TOML.replace('kind = "stream_table"\n', "").replace(
        'how = "left"\nlateness_ms = 120_000\ntombstone_column = "deleted"\n',
        "time_window_ms = 60_000\n")
    p = Pipeline.from_toml(text)
    assert isinstance(p.join, Join) and p.join.name == "orders-tiers"
    assert p.to_toml().count('kind = "stream_stream_join"') == 1  # written, as before


@pytest.mark.parametrize("spec", [
    {},
    {"how": "left", "emit": "eager", "history_retention_ms": 0},
    {"value_columns": ["tier"], "tombstone_column": "deleted", "left_prefix": "",
     "right_prefix": "c_", "key_groups": 16},
    {"lateness_ms": 5_000, "history_retention_ms": 3_600_000, "late_data": "drop",
     "dlq_horizon_ms": 1_000},
])
def test_python_pipelines_round_trip_through_toml(spec):
    p = pipeline(**spec)
    text = p.to_toml()
    assert 'kind = "stream_table"' in text
    back = Pipeline.from_toml(text)
    assert back == p and back.to_toml() == text


@settings(max_examples=60, deadline=None)
@given(how=st.sampled_from(["inner", "left"]), emit=st.sampled_from(["final", "eager"]),
       lateness=st.integers(0, 10**7), retention=st.none() | st.integers(0, 10**8),
       values=st.none() | st.sampled_from([["tier"], ["tier", "deleted"]]),
       tomb=st.none() | st.just("deleted"), dlq=st.booleans(),
       prefixes=st.sampled_from([("left_", "right_"), ("", ""), ("o.", "c.")]))
def test_any_stream_table_pipeline_round_trips(how, emit, lateness, retention, values, tomb,
                                              dlq, prefixes):
    if tomb is not None and values is not None and tomb in values:
        values = ["tier"]
    spec = StreamTableJoin(left_keys=["customer"], right_keys=["customer"], how=how, emit=emit,
                           lateness_ms=lateness, history_retention_ms=retention,
                           value_columns=values, tombstone_column=tomb,
                           late_data="dlq" if dlq else "drop", left_prefix=prefixes[0],
                           right_prefix=prefixes[1], left_event_time_column="order_ts",
                           right_event_time_column="updated_ts")
    p = Pipeline(name="st", sources=[ORDERS, CUSTOMERS], join=spec, left_source="orders",
                 right_source="customers", target=Target(kind="duckdb", table="t"),
                 dead_letter=Target(kind="duckdb") if dlq else None)
    back = Pipeline.from_toml(p.to_toml())
    assert back == p
    assert back.output_columns()[-1] == ("_dead_letter" if dlq else "right_valid_from")


def test_a_python_stream_table_join_keeps_its_spec_and_has_no_changelog_key():
    p = pipeline(how="left")
    assert p.join == StreamTableJoin(left_keys=["customer"], right_keys=["customer"],
                                     how="left", left_event_time_column="order_ts",
                                     right_event_time_column="updated_ts")  # has no name
    duck = Pipeline(name="x", sources=[ORDERS, CUSTOMERS], join=p.join, left_source="orders",
                    right_source="customers", target=Target(kind="duckdb"))
    assert duck.resolved_target().key is None  # one row per stream row: appended
    assert join_kind(p.join).changelog_key is None
    with pytest.raises(ConfigError, match=r"`join` must be a Join\(...\) or StreamTableJoin"):
        Pipeline(name="x", sources=[ORDERS], join="orders", target=Target(kind="console"))


def test_the_kinds_are_listed_with_the_default_first():
    assert list(JOIN_KINDS) == ["stream_stream_join", "stream_table", "table", "foreign_key"]
    assert kinds_phrase() == ("'stream_stream_join' (the default), 'stream_table', 'table' or "
                              "'foreign_key'")


@pytest.mark.parametrize(("old", "new", "needles", "at"), [
    ('kind = "stream_table"', 'kind = "stream_tables"',
     ["[transform.join]", "`kind` must be 'stream_stream_join' (the default), 'stream_table', "
      "'table' or 'foreign_key'", "got kind='stream_tables'"], "stream_tables"),
    ('kind = "stream_table"', "kind = 3", ["`kind` must be", "got kind=3"], "kind = 3"),
    ('how = "left"', 'how = "left"\ntime_window_ms = 60_000',
     ["`time_window_ms` is a field of kind = 'stream_stream_join', not of kind = "
      "'stream_table'", "remove it"], "time_window_ms"),
    ('how = "left"', 'how = "full"', ["`how` must be one of 'inner', 'left'"], 'how = "full"'),
    ('how = "left"', 'how = "left"\nlate_data = "reopen"',
     ["`late_data`='reopen' is not supported by the stream-table join", "'drop'"], "late_data"),
    ('how = "left"', 'how = "left"\nemit = "lazy"', ["`emit` must be one of"], "emit"),
    ('how = "left"', 'how = "left"\nhistory_retention_ms = -1',
     ["`history_retention_ms` must be >= 0"], "history_retention_ms"),
    ('how = "left"', 'how = "left"\nvalue_columns = ["customer"]',
     ["`value_columns` ['customer'] overlap the table's keys"], "value_columns"),
    ('how = "left"', 'how = "left"\nvalue_columns = ["tier", "segment"]',
     ["`value_columns` names column(s) ['segment'] absent from the table (right) source "
      "'customers'"], "value_columns"),
    ('tombstone_column = "deleted"', 'tombstone_column = "gone"',
     ["`tombstone_column` names column(s) ['gone'] absent from the table (right) source"],
     "tombstone_column"),
    ('tombstone_column = "deleted"', 'tombstone_column = "tier"',
     ["`tombstone_column` 'tier' of source 'customers' must be a BOOLEAN column",
      "got STRING"], "tombstone_column"),
    ('left_keys = ["customer"]', 'left_keys = ["customer_id"]',
     ["`left_keys` names column(s) ['customer_id'] absent from the stream (left) source "
      "'orders'"], "left_keys"),
    ('right_source = "customers"', 'right_source = "orders"',
     ["`left_source` and `right_source` are both 'orders'", "stream-table join needs two",
      "the table's changelog"], "right_source"),
    ('event_time_column = "updated_ts"',
     'event_time_column = "updated_ts"\ntime_mode = "processing"',
     ["[[sources]] #2", "`time_mode`='processing' synthesizes"], "time_mode"),
    ('how = "left"', 'how = "left"\nleft_event_time_column = "amount"\n'
     'right_event_time_column = "updated_ts"',
     ["`left_event_time_column`='amount' disagrees with source 'orders'"],
     "left_event_time_column"),
    ('how = "left"', 'how = "left"\nlate_data = "dlq"',
     ["late_data='dlq' needs a [dead_letter] target"], "late_data"),
    ('table = "orders_tiers"', 'table = "orders_tiers"\nkey = ["order_id"]',
     ["[target]", "`key` names column(s) ['order_id'] absent from the output columns",
      "left_order_id"], "key ="),
    ('tombstone_column = "deleted"', 'tombstone_column = "deleted"\nleft_prefix = ""\n'
     'right_prefix = ""\nvalue_columns = ["tier", "updated_ts"]',
     ["`value_columns` ['updated_ts'] overlap"], "value_columns"),
])
def test_stream_table_validation_errors_name_the_field_the_fix_and_the_line(old, new, needles,
                                                                             at):
    text = edit(TOML, old, new)
    msg = error_of(text)
    for needle in needles:
        assert needle in msg, msg
    assert msg.endswith(f"(line {line_of(text, at)})"), msg


def test_a_stream_stream_field_error_names_the_kind_it_belongs_to():
    text = TOML.replace('kind = "stream_table"\n', "") + ""
    msg = error_of(edit(text, 'how = "left"', 'how = "left"\nhistory_retention_ms = 0'))
    assert ("`history_retention_ms` is a field of kind = 'stream_table', not of kind = "
            "'stream_stream_join'") in msg
    msg = error_of(edit(TOML, 'how = "left"', 'how = "left"\nhow_ = 1'))
    assert "unknown key `how_`; did you mean `how`?" in msg


def test_processing_time_sources_are_refused_for_the_stream_table_join():
    orders = Source(name="orders", format="rate", time_mode="processing",
                    event_time_column="order_ts")
    with pytest.raises(ConfigError) as info:
        Pipeline(name="x", sources=[orders, CUSTOMERS],
                 join=StreamTableJoin(left_keys=["value"], right_keys=["customer"],
                                      event_time_column="order_ts"),
                 left_source="orders", right_source="customers", target=Target(kind="console"))
    msg = str(info.value)
    assert msg.startswith("[[sources]] #1: source 'orders' has time_mode='processing'")
    assert "joins on event time only" in msg and 'kind = "stream_table"' in msg


def test_output_columns_of_a_stream_table_join_behind_a_sql_pre_stage():
    sql = Source(name="customers", format="json", path="c", sql="SELECT * FROM source",
                 schema="customer STRING, tier STRING, updated_ts TIMESTAMP")
    p = Pipeline(name="x", sources=[ORDERS, sql], target=Target(kind="console"),
                 join=StreamTableJoin(left_keys=["customer"], right_keys=["customer"],
                                      left_event_time_column="order_ts",
                                      right_event_time_column="updated_ts"),
                 left_source="orders", right_source="customers")
    with pytest.raises(ConfigError, match="the table's `value_columns` fix its part"):
        p.output_columns()
    import dataclasses

    fixed = dataclasses.replace(p, join=dataclasses.replace(p.join, value_columns=["tier"]))
    assert fixed.output_columns()[-2:] == ["right_tier", "right_valid_from"]
