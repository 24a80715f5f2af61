"""The pipeline model: lossless TOML round trips, whole-pipeline validation, the examples."""

from __future__ import annotations

import dataclasses
import runpy
from pathlib import Path

import pytest
import tomllib
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from interlace import Aggregation, ConfigError, Join, Window
from interlace.pipeline import FrozenMap, Pipeline, Source, SparkSettings, Target, parse_ddl

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line number of the ``nth`` line containing ``needle``."""
    hits = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    return hits[nth - 1]


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def error_of(text: str, path: str | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        Pipeline.from_toml(text, path=path)
    return str(info.value)


JOIN_TOML = '''\
name = "orders-payments"

[[sources]]
name = "orders"
format = "parquet"
path = "data/orders"
schema = "order_id BIGINT, amount DECIMAL(10,2), order_ts TIMESTAMP"
event_time_column = "order_ts"

[[sources]]
name = "payments"
format = "json"
path = "data/payments"
schema = "payment_id STRING, order_id BIGINT, pay_ts TIMESTAMP"
event_time_column = "pay_ts"

[transform.join]
kind = "stream_stream_join"
left_source = "orders"
right_source = "payments"
left_keys = ["order_id"]
right_keys = ["order_id"]
time_window_ms = 300_000

[target]
kind = "duckdb"
'''

WINDOW_TOML = '''\
name = "clicks"

[[sources]]
name = "clicks"
format = "json"
path = "data/clicks"
schema = "user STRING, page STRING, click_ts TIMESTAMP"
event_time_column = "click_ts"

[transform.window]
kind = "tumbling"
duration_ms = 60_000
group_by = ["user"]
max_groups_per_window = 1000

[[transform.window.aggregations]]
agg = "count"
as = "clicks"

[[transform.window.aggregations]]
agg = "count_distinct"
column = "page"
as = "pages"

[target]
kind = "console"
'''


# ---------------------------------------------------------------------------------------
# Reading: defaults that come from the sources and the pipeline
# ---------------------------------------------------------------------------------------


def test_join_toml_fills_event_time_columns_and_name_from_the_sources() -> None:
    p = Pipeline.from_toml(JOIN_TOML)
    assert p.join == Join(left_keys=["order_id"], right_keys=["order_id"],
                          time_window_ms=300_000, left_event_time_column="order_ts",
                          right_event_time_column="pay_ts", name="orders-payments")
    assert (p.left_source, p.right_source) == ("orders", "payments")
    assert p.output_columns() == ["left_order_id", "left_amount", "left_order_ts",
                                  "right_payment_id", "right_order_id", "right_pay_ts"]


def test_join_sources_sharing_an_event_time_column_give_one_event_time_column() -> None:
    text = JOIN_TOML.replace("pay_ts", "order_ts")
    assert Pipeline.from_toml(text).join.event_time_column == "order_ts"  # type: ignore[union-attr]


def test_window_toml_takes_the_only_source_and_its_event_time_column() -> None:
    p = Pipeline.from_toml(WINDOW_TOML)
    assert p.window_source is None and p.resolved_window_source() == "clicks"
    assert p.window is not None
    assert p.window.event_time_column == "click_ts" and p.window.name == "clicks"
    assert p.window.aggregations[1] == Aggregation(agg="count_distinct", column="page",
                                                   as_="pages")
    assert p.output_columns() == ["window_start", "window_end", "user", "clicks", "pages"]


def test_python_operator_with_default_name_takes_the_pipeline_name() -> None:
    p = Pipeline.from_toml(WINDOW_TOML)
    q = dataclasses.replace(p, window=dataclasses.replace(p.window, name="window"))
    assert q.window.name == "clicks" and q == p  # type: ignore[union-attr]
    custom = dataclasses.replace(p, window=dataclasses.replace(p.window, name="other"))
    assert 'name = "other"' in custom.to_toml()
    assert Pipeline.from_toml(custom.to_toml()) == custom


@pytest.mark.parametrize("text", [JOIN_TOML, WINDOW_TOML])
def test_toml_text_round_trips(text: str) -> None:
    p = Pipeline.from_toml(text)
    out = p.to_toml()
    assert Pipeline.from_toml(out) == p
    assert Pipeline.from_toml(out).to_toml() == out


def test_seed_001_window_surface_loads() -> None:
    text = '''
name = "user-clicks-per-minute"

[[sources]]
name = "events"
format = "kafka"
options = { "kafka.bootstrap.servers" = "localhost:9092", subscribe = "events" }

[transform]
sql = """
  SELECT user_id, amount, page_url, _event_ts
  FROM source
  WHERE event_type = 'click'
"""

[transform.window]
kind                  = "tumbling"          # "tumbling" | "hopping"
duration_ms           = 60_000
event_time_column     = "_event_ts"         # default; user override permitted
time_mode             = "event"             # "event" (default) | "processing"
lateness_ms           = 30_000
group_by              = ["user_id"]
late_data             = "drop"              # "drop" | "dlq" | "reopen"
max_groups_per_window = 1_000_000
crash_recovery        = "at_least_once"     # MVP: only this value accepted
on_state_cap          = "fail"              # MVP: only this value accepted
window_start_column   = "window_start"      # default
window_end_column     = "window_end"        # default

[[transform.window.aggregations]]
agg = "count"
as  = "click_count"

[[transform.window.aggregations]]
agg    = "sum"
column = "amount"
as     = "amount_sum"

[[transform.window.aggregations]]
agg    = "count_distinct"
column = "page_url"
mode   = "approximate"                      # "approximate" (default) | "exact"
as     = "unique_pages"

[target]
kind = "duckdb"
'''
    p = Pipeline.from_toml(text)
    assert p.transform_sql is not None and "WHERE event_type = 'click'" in p.transform_sql
    assert p.sources[0].format == "kafka"
    assert p.output_columns() == ["window_start", "window_end", "user_id", "click_count",
                                  "amount_sum", "unique_pages"]
    assert Pipeline.from_toml(p.to_toml()) == p
    assert "crash_recovery" not in p.to_toml()
    bad = edit(text, 'crash_recovery        = "at_least_once"', 'crash_recovery = "kafka_eos"')
    msg = error_of(bad)
    assert "`crash_recovery` must be 'at_least_once'" in msg
    assert f"(line {line_of(bad, 'crash_recovery')})" in msg
    # A raw U+2028 (or U+0085) in a string is not a line break for TOML: the line is the same.
    odd = edit(bad, "WHERE event_type = 'click'", "WHERE event_type = 'cl\u2028ick'")
    assert f"(line {line_of(bad, 'crash_recovery')})" in error_of(odd)
    idle = edit(text, "lateness_ms           = 30_000",
                "lateness_ms = 30_000\nsource_idleness_ms = 1")
    msg = error_of(idle)
    assert "unknown key `source_idleness_ms`" in msg and "multipleWatermarkPolicy" in msg


def test_seed_000_join_surface_loads() -> None:
    text = '''
name = "orders-payments-join"

[[sources]]
name = "orders"
format = "kafka"
options = { subscribe = "orders" }
sql = "SELECT CAST(key AS STRING) AS order_id, timestamp AS _event_ts FROM source"

[[sources]]
name = "payments"
format = "kafka"
options = { subscribe = "payments" }
sql = "SELECT CAST(key AS STRING) AS order_id, timestamp AS _event_ts FROM source"

[transform.join]
kind = "stream_stream_join"
left_source = "orders"
right_source = "payments"
left_keys = ["order_id"]
right_keys = ["order_id"]
time_window_ms = 300000
event_time_column = "_event_ts"
late_data = "drop"

[target]
kind = "console"
'''
    p = Pipeline.from_toml(text)
    assert p.join is not None and p.join.event_time_column == "_event_ts"
    assert Pipeline.from_toml(p.to_toml()) == p
    with pytest.raises(ConfigError, match="output columns are unknown"):
        p.output_columns()


def test_options_and_conf_values_become_strings() -> None:
    text = edit(JOIN_TOML, 'event_time_column = "order_ts"',
                'event_time_column = "order_ts"\noptions = { maxFilesPerTrigger = 1, '
                'recursiveFileLookup = true }')
    text += '\n[spark]\nconf = { "spark.sql.streaming.stateStore.providerClass" = "x", n = 2 }\n'
    p = Pipeline.from_toml(text)
    assert p.sources[0].options == {"maxFilesPerTrigger": "1", "recursiveFileLookup": "true"}
    assert p.spark.conf == {"spark.sql.streaming.stateStore.providerClass": "x", "n": "2"}
    assert Pipeline.from_toml(p.to_toml()) == p
    assert hash(p) == hash(Pipeline.from_toml(p.to_toml()))


def test_resolved_target_and_dead_letter_defaults() -> None:
    p = Pipeline.from_toml(JOIN_TOML)
    t = p.resolved_target()
    assert (t.path, t.table, t.key) == ("interlace.duckdb", "orders_payments", None)
    assert p.resolved_dead_letter() is None
    assert p.checkpoint_path() == ".interlace/checkpoints/orders-payments"
    # Relative to the pipeline file's folder; an absolute [spark] checkpoint as it is.
    assert p.checkpoint_folder("/work/jobs") == Path("/work/jobs/.interlace/checkpoints/"
                                                     "orders-payments")
    absolute = Pipeline.from_toml(JOIN_TOML + '\n[spark]\ncheckpoint = "/ck/x"\n')
    assert absolute.checkpoint_folder("/work/jobs") == Path("/ck/x")
    dlq = edit(JOIN_TOML, "time_window_ms = 300_000", 'time_window_ms = 300_000\nlate_data = "dlq"')
    dlq = edit(dlq, 'kind = "duckdb"', 'kind = "duckdb"\npath = "out/x.duckdb"')
    dlq += '\n[dead_letter]\nkind = "duckdb"\n'
    d = Pipeline.from_toml(dlq).resolved_dead_letter()
    assert d is not None and (d.path, d.table) == ("out/x.duckdb", "orders_payments_dead_letters")


def test_reopen_window_defaults_the_duckdb_key_to_window_and_groups() -> None:
    text = edit(WINDOW_TOML, "max_groups_per_window = 1000",
                'max_groups_per_window = 1000\nlate_data = "reopen"\nallowed_lateness_ms = 5000')
    text = edit(text, 'kind = "console"', 'kind = "duckdb"')
    p = Pipeline.from_toml(text)
    assert p.target.key is None
    assert p.resolved_target().key == ("window_start", "window_end", "user")
    assert p.output_columns()[-2:] == ["revision", "retracted"]


# ---------------------------------------------------------------------------------------
# Validation errors (file input: table, key and line)
# ---------------------------------------------------------------------------------------


def test_toml_syntax_error_names_line_and_column() -> None:
    text = 'name = "x"\n[[sources]]\nname = \n'
    msg = error_of(text, path="p.toml")
    assert msg.startswith("invalid TOML in p.toml:") and "line 3" in msg and "column" in msg


@pytest.mark.parametrize(("base", "old", "new", "table", "needle"), [
    (JOIN_TOML, 'format = "json"', 'formt = "json"', "[[sources]] #2", "formt"),
    (JOIN_TOML, "time_window_ms = 300_000", "time_window = 300_000", "[transform.join]",
     "time_window"),
    (WINDOW_TOML, "duration_ms = 60_000", "duration_ms = 60_000\nhop = 10", "[transform.window]",
     "hop ="),
    (WINDOW_TOML, 'column = "page"', 'column = "page"\nalias = "x"',
     "[[transform.window.aggregations]] #2", "alias"),
    (WINDOW_TOML, 'kind = "console"', 'kind = "console"\ntabel = "x"', "[target]", "tabel"),
    (JOIN_TOML, 'name = "orders-payments"', 'name = "orders-payments"\nversion = 2',
     "top level", "version"),
    (JOIN_TOML, '[target]', '[spark]\nmastr = "local[1]"\n\n[target]', "[spark]", "mastr"),
    (WINDOW_TOML, "[transform.window]", "[transform]\nsequel = 1\n\n[transform.window]",
     "[transform]", "sequel"),
])
def test_unknown_key_names_key_table_line_and_valid_keys(
        base: str, old: str, new: str, table: str, needle: str) -> None:
    text = edit(base, old, new)
    msg = error_of(text)
    key = needle.split()[0]
    assert f"unknown key `{key}`" in msg
    assert msg.startswith(f"{table}: ")
    assert "valid keys:" in msg
    assert msg.endswith(f"(line {line_of(text, needle)})")


def test_unknown_key_suggests_the_close_match_and_the_as_spelling() -> None:
    msg = error_of(edit(WINDOW_TOML, "duration_ms = 60_000", "duration_ms = 60_000\nhop = 10"))
    assert "did you mean `hop_ms`?" in msg and "gap_ms" in msg
    msg = error_of(edit(WINDOW_TOML, 'as = "clicks"', 'as_ = "clicks"'))
    assert "spelled `as`" in msg


def test_errors_name_the_file_when_loaded(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    text = edit(JOIN_TOML, 'format = "json"', 'format = "avro"')
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        Pipeline.load(f)
    assert f"(line {line_of(text, 'avro')} of {f})" in str(info.value)
    f.write_bytes(b'name = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        Pipeline.load(f)


def test_a_window_and_a_join_in_one_pipeline() -> None:
    window_part = WINDOW_TOML[WINDOW_TOML.index("[transform.window]"):WINDOW_TOML.index("[target]")]
    text = edit(JOIN_TOML, "[target]", window_part + "[target]")
    msg = error_of(text)
    assert "a window and a join in one pipeline" in msg
    assert msg.endswith(f"(line {line_of(text, '[transform.window]')})")


def test_a_pipeline_without_operator() -> None:
    text = JOIN_TOML[:JOIN_TOML.index("[transform.join]")] + '[target]\nkind = "console"\n'
    assert "no operator" in error_of(text)
    with pytest.raises(ConfigError, match="missing required table|missing required key `target`"):
        Pipeline.from_toml('name = "x"\n[[sources]]\nname = "a"\nformat = "rate"\n')


@pytest.mark.parametrize(("old", "new", "needles", "at"), [
    ('left_source = "orders"', 'left_source = "order"',
     ["[transform.join]", "`left_source` names source 'order' that does not exist",
      "'orders', 'payments'"], "left_source"),
    ('right_source = "payments"', 'right_source = "orders"',
     ["[transform.join]", "`left_source` and `right_source` are both 'orders'"], "right_source"),
    ('name = "payments"', 'name = "orders"',
     ["[[sources]] #2", "duplicate source name 'orders'", "[[sources]] #1"], 'name = "orders"#2'),
    ('format = "json"', 'format = "avro"',
     ["[[sources]] #2", "`format` must be one of", "'kafka'", "format='avro'"], "avro"),
    ('path = "data/payments"\n', "",
     ["[[sources]] #2", "`path` is required for format='json'"], "[[sources]]#2"),
    ('schema = "payment_id STRING, order_id BIGINT, pay_ts TIMESTAMP"\n', "",
     ["[[sources]] #2", "`schema` is required for format='json'"], "[[sources]]#2"),
    ('schema = "payment_id STRING, order_id BIGINT, pay_ts TIMESTAMP"',
     'schema = "payment_id STRING,, pay_ts TIMESTAMP"',
     ["[[sources]] #2", "`schema` is not a Spark DDL column list"], "payment_id STRING,,"),
    ('left_keys = ["order_id"]', 'left_keys = ["id"]',
     ["[transform.join]", "`left_keys` names column(s) ['id'] absent from the left source "
      "'orders'"], "left_keys"),
    ('left_keys = ["order_id"]', 'left_keys = []',
     ["[transform.join]", "`left_keys` and `right_keys` must be non-empty"], "left_keys"),
    ("time_window_ms = 300_000", "lower_ms = 10\nupper_ms = 5",
     ["[transform.join]", "`lower_ms` must be <= `upper_ms`"], "lower_ms"),
    ("time_window_ms = 300_000", 'time_window_ms = 300_000\nhow = "outer"',
     ["[transform.join]", "`how` must be one of"], "how ="),
    ('kind = "stream_stream_join"', 'kind = "lookup"',
     ["[transform.join]", "`kind` must be 'stream_stream_join'"], "lookup"),
    ('kind = "duckdb"', 'kind = "duckdb"\nkey = ["order_id"]',
     ["[target]", "`key` names column(s) ['order_id'] absent from the output columns",
      "left_order_id"], "key ="),
    ('kind = "duckdb"', 'kind = "parquet"',
     ["[target]", "`path` is required for a parquet target"], "[target]"),
    ('kind = "duckdb"', 'kind = "console"\ntable = "t"',
     ["[target]", "`table` only applies to a duckdb target"], "table ="),
    ('event_time_column = "pay_ts"', 'event_time_column = "payment_id"',
     ["[[sources]] #2", "`event_time_column` 'payment_id' must be a TIMESTAMP column"],
     "payment_id\"\n"),
    ("time_window_ms = 300_000", 'time_window_ms = 300_000\nleft_event_time_column = '
     '"order_ts"\nright_event_time_column = "paid_at"',
     ["[transform.join]", "`right_event_time_column`='paid_at' disagrees with source "
      "'payments'"], "right_event_time_column"),
    ("time_window_ms = 300_000", 'time_window_ms = 300_000\ntime_mode = "processing"',
     ["[transform.join]", "`time_mode`='processing' disagrees with source 'orders'"],
     "time_mode"),
    ("time_window_ms = 300_000", 'time_window_ms = 300_000\nlate_data = "dlq"',
     ["[transform.join]", "late_data='dlq' needs a [dead_letter] target"], "late_data"),
    ('kind = "duckdb"', 'kind = "duckdb"\n\n[dead_letter]\nkind = "console"',
     ["[dead_letter]", "only receives rows under late_data='dlq'"], "[dead_letter]"),
    ("time_window_ms = 300_000",
     'time_window_ms = 300_000\nleft_prefix = ""\nright_prefix = ""',
     ["[transform.join]", "output columns ['order_id'] appear twice"], "[transform.join]"),
    ('[transform.join]', '[[sources]]\nname = "extra"\nformat = "rate"\n\n[transform.join]',
     ["[[sources]] #3", "source 'extra' is not read by the join"], 'name = "extra"'),
    ('format = "json"', 'format = "kafka"',
     ["[[sources]] #2", "`path` does not apply to format='kafka'"], 'path = "data/payments"'),
])
def test_join_validation_errors(old: str, new: str, needles: list[str], at: str) -> None:
    text = edit(JOIN_TOML, old, new)
    msg = error_of(text)
    for needle in needles:
        assert needle in msg, msg
    if at.endswith("#2"):
        line = line_of(text, at[:-2], nth=2)
    elif at.endswith("\n"):
        line = line_of(text, at.rstrip("\n"))
    else:
        line = line_of(text, at)
    assert msg.endswith(f"(line {line})"), msg


@pytest.mark.parametrize(("old", "new", "needles", "at"), [
    ("duration_ms = 60_000", 'duration_ms = 60_000\nkind_ = 1', ["unknown key `kind_`"], "kind_"),
    ('kind = "tumbling"', 'kind = "hopping"\nhop_ms = 90_000',
     ["[transform.window]: `hop_ms` must be in (0, `duration_ms`]", "hop_ms=90000"], "hop_ms"),
    ('kind = "tumbling"', 'kind = "sliding"',
     ["[transform.window]", "`kind` must be one of"], "sliding"),
    ("max_groups_per_window = 1000\n", "",
     ["[transform.window]", "`max_groups_per_window` is required"], "[transform.window]"),
    ('agg = "count_distinct"', 'agg = "count_distinct"\nmode = "exact"',
     ["[[transform.window.aggregations]] #2", "`max_distinct_values_per_group`"],
     "[[transform.window.aggregations]]#2"),
    ('as = "pages"', 'as = "user"',
     ["[transform.window]", "output column(s) ['user'] collide", "`as`"], "group_by"),
    ('agg = "count"', 'agg = "median"',
     ["[[transform.window.aggregations]] #1", "`agg` must be one of"], "median"),
    ('group_by = ["user"]', 'group_by = ["usr"]',
     ["[transform.window]", "`group_by` names column(s) ['usr'] absent from source 'clicks'"],
     "group_by"),
    ('column = "page"', 'column = "pg"',
     ["[[transform.window.aggregations]] #2", "`column` names column(s) ['pg']"], "pg"),
    ("duration_ms = 60_000", 'duration_ms = 60_000\nevent_time_column = "ts"',
     ["[transform.window]", "`event_time_column`='ts' disagrees with source 'clicks'"],
     'event_time_column = "ts"'),
    ("duration_ms = 60_000", 'duration_ms = 60_000\nsource = "click"',
     ["[transform.window]", "`source` names source 'click' that does not exist"], "source ="),
    ('[transform.window]', '[[sources]]\nname = "views"\nformat = "rate"\n\n[transform.window]',
     ["[transform.window]", "`source` is required when the pipeline has more than one source",
      "'clicks', 'views'"], "[transform.window]"),
    ('kind = "console"', 'kind = "duckdb"\nkey = ["window_start", "page"]',
     ["[target]", "`key` names column(s) ['page'] absent from the output columns"], "key ="),
    ('kind = "console"', 'kind = "parquet"', ["[target]", "`path` is required"], "[target]"),
    ('event_time_column = "click_ts"', 'event_time_column = "click_ts"\ntime_mode = "processing"',
     ["[[sources]] #1", "synthesizes the event-time column 'click_ts'"], 'time_mode'),
])
def test_window_validation_errors(old: str, new: str, needles: list[str], at: str) -> None:
    text = edit(WINDOW_TOML, old, new)
    msg = error_of(text)
    for needle in needles:
        assert needle in msg, msg
    line = line_of(text, at[:-2], nth=2) if at.endswith("#2") else line_of(text, at)
    assert msg.endswith(f"(line {line})"), msg


def test_kafka_source_is_accepted_by_the_model() -> None:
    text = edit(WINDOW_TOML, '''format = "json"
path = "data/clicks"
schema = "user STRING, page STRING, click_ts TIMESTAMP"
event_time_column = "click_ts"''', '''format = "kafka"
options = { subscribe = "clicks", includeHeaders = "true" }
event_time_column = "timestamp"''')
    text = edit(text, 'group_by = ["user"]', 'group_by = ["topic"]')
    text = edit(text, 'column = "page"', 'column = "key"')
    p = Pipeline.from_toml(text)
    assert p.sources[0].ddl_columns()[-1][0] == "headers"
    assert Pipeline.from_toml(p.to_toml()) == p


@pytest.mark.parametrize("quote", ['"""', "'''"])
def test_line_numbers_skip_multiline_strings_that_look_like_toml(quote: str) -> None:
    fake = f'[transform]\nsql = {quote}\n[target]\nkey = 1\n[[sources]]\n{quote}\n\n'
    text = edit(WINDOW_TOML, "[transform.window]", fake + "[transform.window]")
    text = edit(text, 'kind = "console"', 'kind = "duckdb"\nkey = ["nope"]')
    msg = error_of(text)
    assert msg.startswith("[target]: ") and msg.endswith(f"(line {line_of(text, 'key = [')})")
    text = edit(text, 'key = ["nope"]', 'key = ["user"]\nkye = 1')
    assert error_of(text).endswith(f"(line {line_of(text, 'kye')})")


def test_inline_tables_get_line_numbers_too() -> None:
    start = WINDOW_TOML.index("[[transform.window.aggregations]]")
    text = WINDOW_TOML[:start] + WINDOW_TOML[WINDOW_TOML.index("[target]"):]
    text = edit(text, "max_groups_per_window = 1000",
                'max_groups_per_window = 1000\n'
                'aggregations = [\n  { agg = "median", as = "m" },\n]')
    msg = error_of(text)
    assert msg.startswith("[[transform.window.aggregations]] #1: `agg` must be one of")
    assert msg.endswith(f"(line {line_of(text, 'aggregations = [')})")
    text = edit(WINDOW_TOML, 'path = "data/clicks"',
                'path = "data/clicks"\noptions = { a = 1, b = [] }')
    msg = error_of(text)
    assert "`options` values must be strings" in msg
    assert msg.endswith(f"(line {line_of(text, 'options')})")


def test_transform_sql_with_a_join_points_at_the_transform_table() -> None:
    text = edit(JOIN_TOML, "[transform.join]", '[transform]\nsql = "SELECT 1"\n\n[transform.join]')
    msg = error_of(text)
    assert msg.startswith("[transform]: `transform_sql` ([transform] sql) only applies to a window")
    assert msg.endswith(f"(line {line_of(text, 'sql =')})")


# ---------------------------------------------------------------------------------------
# Python construction
# ---------------------------------------------------------------------------------------


def _clicks_source(**kw: object) -> Source:
    args: dict[str, object] = dict(name="clicks", format="json", path="d",
                                   schema="user STRING, page STRING, ts TIMESTAMP")
    args.update(kw)
    return Source(**args)  # type: ignore[arg-type]


def _window(**kw: object) -> Window:
    args: dict[str, object] = dict(kind="tumbling", duration_ms=60_000, group_by=["user"],
                                   max_groups_per_window=10,
                                   aggregations=[Aggregation(agg="count", as_="n")])
    args.update(kw)
    return Window(**args)  # type: ignore[arg-type]


def test_python_window_and_join_is_rejected_with_the_semantics_wording() -> None:
    join = Join(left_keys=["user"], right_keys=["user"], time_window_ms=1, event_time_column="ts")
    with pytest.raises(ConfigError, match="a window and a join in one pipeline"):
        Pipeline(name="x", sources=[_clicks_source()], target=Target(kind="console"),
                 join=join, window=_window())


@pytest.mark.parametrize(("build", "needle"), [
    (lambda: _clicks_source(format="avro"), "`format` must be one of"),
    (lambda: _clicks_source(path=None), "`path` is required"),
    (lambda: _clicks_source(schema=None), "`schema` is required"),
    (lambda: _clicks_source(name="a/b"), "`name` must start with"),
    (lambda: _clicks_source(options={"a": [1]}), "`options` values must be strings"),
    (lambda: _clicks_source(event_time_column="user"), "must be a TIMESTAMP column"),
    (lambda: _clicks_source(schema="__il_x INT"), "reserved prefix"),
    (lambda: Source(name="r", format="rate", schema="a INT"), "`schema` does not apply"),
    (lambda: Target(kind="parquet"), "`path` is required for a parquet target"),
    (lambda: Target(kind="duckdb", key=[]), "`key` must name at least one column"),
    (lambda: Target(kind="duckdb", key="a"), "`key` must be a list"),
    (lambda: Target(kind="duckdb", table="a-b"), "`table` must be an identifier"),
    (lambda: Target(kind="s3"), "`kind` must be one of"),
    (lambda: SparkSettings(shuffle_partitions=0), "`shuffle_partitions` must be an int >= 1"),
    (lambda: SparkSettings(conf={"spark.sql.shuffle.partitions": "8"}), "`shuffle_partitions`"),
    (lambda: Pipeline(name="x", sources=[_clicks_source()], target=Target(kind="console")),
     "no operator"),
    (lambda: Pipeline(name="x", sources=[], target=Target(kind="console"), window=_window()),
     "at least one [[sources]]"),
    (lambda: Pipeline(name="x", sources=[_clicks_source(), _clicks_source()],
                      target=Target(kind="console"), window=_window()),
     "duplicate source name 'clicks'"),
    (lambda: Pipeline(name="x", sources=[_clicks_source()], target=Target(kind="console"),
                      window=_window(), left_source="clicks"),
     "`left_source` only applies to a join"),
    (lambda: Pipeline(name="x", sources=[_clicks_source()], target=Target(kind="console"),
                      join=Join(left_keys=["user"], right_keys=["user"], time_window_ms=1,
                                event_time_column="ts"), left_source="clicks"),
     "`right_source` is required"),
    (lambda: Pipeline(name="x", sources=[_clicks_source()], target=Target(kind="console"),
                      join=Join(left_keys=["user"], right_keys=["user"], time_window_ms=1,
                                event_time_column="ts"), left_source="clicks",
                      right_source="clicks"),
     "are both 'clicks'"),
    (lambda: Pipeline(name="x", sources=[_clicks_source()], target=Target(kind="console"),
                      join=Join(left_keys=["user"], right_keys=["user"], time_window_ms=1,
                                event_time_column="ts"), left_source="clicks",
                      right_source="clicks", transform_sql="SELECT 1"),
     "`transform_sql` ([transform] sql) only applies to a window"),
])
def test_python_construction_errors(build: object, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()  # type: ignore[operator]
    assert needle in str(info.value)


def test_join_output_columns_semi_processing_and_sql() -> None:
    orders = Source(name="o", format="csv", path="o", schema="id BIGINT, `o ts` TIMESTAMP",
                    event_time_column="o ts")
    pays = Source(name="p", format="rate", time_mode="event", event_time_column="timestamp")
    join = Join(left_keys=["id"], right_keys=["value"], time_window_ms=5, how="left_semi",
                left_event_time_column="o ts", right_event_time_column="timestamp")
    p = Pipeline(name="semi", sources=[orders, pays], target=Target(kind="console"), join=join,
                 left_source="o", right_source="p")
    assert p.output_columns() == ["id", "o ts"]
    assert p.join is not None and p.join.name == "semi"
    proc = Pipeline(
        name="proc", target=Target(kind="duckdb", key=["l_id", "r_pt"]),
        sources=[Source(name="a", format="json", path="a", schema="id INT", time_mode="processing"),
                 Source(name="b", format="rate", time_mode="processing")],
        join=Join(left_keys=["id"], right_keys=["value"], time_window_ms=5, time_mode="processing",
                  left_event_time_column="pt", right_event_time_column="pt", left_prefix="l_",
                  right_prefix="r_"),
        left_source="a", right_source="b")
    assert proc.output_columns() == ["l_id", "l_pt", "r_timestamp", "r_value", "r_pt"]
    text = proc.to_toml()
    assert "time_mode" in text and 'event_time_column = "pt"' in text
    assert Pipeline.from_toml(text) == proc
    sql = dataclasses.replace(proc, target=Target(kind="duckdb", key=["anything"]),
                              sources=[dataclasses.replace(proc.sources[0], sql="SELECT 1"),
                                       proc.sources[1]])
    with pytest.raises(ConfigError, match="output columns are unknown"):
        sql.output_columns()
    limited = dataclasses.replace(sql, join=dataclasses.replace(
        sql.join, output_left_columns=["x"]), target=Target(kind="console"))  # type: ignore[arg-type]
    assert limited.output_columns() == ["l_x", "r_timestamp", "r_value", "r_pt"]


def test_frozen_map_is_hashable_and_equal_to_dicts() -> None:
    m = FrozenMap({"b": "2", "a": "1"})
    assert m == {"a": "1", "b": "2"} and m == FrozenMap({"a": "1", "b": "2"})
    assert hash(m) == hash(FrozenMap([("a", "1"), ("b", "2")])) and len(m) == 2
    assert m != FrozenMap({"a": "1"}) and m != [("a", "1")]
    s = _clicks_source(options={"x": 1})
    assert hash(s) == hash(_clicks_source(options={"x": "1"}))


# ---------------------------------------------------------------------------------------
# DDL parsing
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("ddl", "expected"), [
    ("order_id BIGINT, ts TIMESTAMP", [("order_id", "BIGINT"), ("ts", "TIMESTAMP")]),
    ("price DECIMAL(10,2), qty INT", [("price", "DECIMAL(10,2)"), ("qty", "INT")]),
    ("price decimal(10, 2) NOT NULL COMMENT 'a, b'", [("price", "decimal(10, 2)")]),
    ("`order id` STRING, `a``b` INT", [("order id", "STRING"), ("a`b", "INT")]),
    ("m MAP<STRING, ARRAY<INT>>, s STRUCT<a: INT, `b c`: STRING>",
     [("m", "MAP<STRING, ARRAY<INT>>"), ("s", "STRUCT<a: INT, `b c`: STRING>")]),
    ("a: INT,\n\tb\tSTRING", [("a", "INT"), ("b", "STRING")]),
    ("i INTERVAL DAY TO SECOND", [("i", "INTERVAL DAY TO SECOND")]),
])
def test_parse_ddl(ddl: str, expected: list[tuple[str, str]]) -> None:
    assert parse_ddl(ddl) == expected


@pytest.mark.parametrize(("ddl", "needle"), [
    ("a INT,", "empty column definition"),
    ("a", "has no type"),
    ("a DECIMAL(10,2", "never closed"),
    ("a INT)", "unbalanced"),
    ("`a INT", "unterminated"),
    ("a-b INT", "quote other names with backticks"),
    ("a INT, a STRING", "names column(s) ['a'] twice"),
])
def test_parse_ddl_errors(ddl: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_ddl(ddl)
    assert needle in str(info.value) and "`schema`" in str(info.value)


# ---------------------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------------------


def test_examples_load_and_round_trip() -> None:
    files = sorted(EXAMPLES.glob("*.toml"))
    assert {f.name for f in files} >= {"orders_payments.toml", "clicks_per_minute.toml"}
    for f in files:
        p = Pipeline.load(f)
        assert Pipeline.from_toml(p.to_toml()) == p, f


def test_orders_payments_example_is_a_left_join_within_ten_minutes_with_dlq() -> None:
    p = Pipeline.load(EXAMPLES / "orders_payments.toml")
    assert p.join is not None and p.join.how == "left"
    assert (p.join.lower, p.join.upper) == (0, 600_000) and p.join.late_data == "dlq"
    assert [s.format for s in p.sources] == ["parquet", "parquet"]
    assert all(s.path and s.path.startswith("data/") for s in p.sources)
    assert p.target.kind == "duckdb" and p.dead_letter is not None
    assert p.output_columns()[-1] == "_dead_letter"


def test_clicks_per_minute_python_example_equals_the_toml(
        capsys: pytest.CaptureFixture[str]) -> None:
    from_toml = Pipeline.load(EXAMPLES / "clicks_per_minute.toml")
    built = runpy.run_path(str(EXAMPLES / "clicks_per_minute.py"))["build"]()
    assert built == from_toml
    assert from_toml.window is not None and from_toml.window.late_data == "reopen"
    assert [a.agg for a in from_toml.window.aggregations] == ["count", "count_distinct"]
    assert from_toml.target.key == ("window_start", "window_end", "user")
    runpy.run_path(str(EXAMPLES / "clicks_per_minute.py"), run_name="__main__")
    assert Pipeline.from_toml(capsys.readouterr().out) == from_toml


# ---------------------------------------------------------------------------------------
# Hypothesis: every valid pipeline round-trips through TOML
# ---------------------------------------------------------------------------------------

IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True)
ODD_IDENT = st.sampled_from(["order id", "a`b", "Ünï", "x.y"])
NAME = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,10}", fullmatch=True)
TEXT = st.text(max_size=25)
NONBLANK = TEXT.filter(lambda s: bool(s.strip()))
TYPES = ["BIGINT", "STRING", "DOUBLE", "DECIMAL(10,2)", "INT", "ARRAY<STRING>",
         "MAP<STRING, INT>", "STRUCT<a: INT, `b c`: STRING>", "BOOLEAN"]
STR_MAP = st.dictionaries(TEXT.filter(bool), TEXT, max_size=3)


def _ddl_name(name: str) -> str:
    return name if name.replace("_", "a").isalnum() and name.isascii() else \
        "`" + name.replace("`", "``") + "`"


@st.composite
def inputs(draw: st.DrawFn, name: str, time_mode: str) -> tuple[Source, list[str], str]:
    """A source, the columns its operator may use, and its event-time column."""
    fmt = draw(st.sampled_from(["parquet", "json", "csv", "rate", "kafka"]))
    sql = draw(st.none() | NONBLANK)
    options = draw(STR_MAP)
    kw: dict[str, object] = {}
    if fmt in ("rate", "kafka"):
        cols = ["timestamp", "value"] if fmt == "rate" else [
            "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        et = "timestamp" if time_mode == "event" else draw(IDENT.filter(lambda c: c not in cols))
    else:
        cols = draw(st.lists(IDENT | ODD_IDENT, min_size=1, max_size=4, unique=True))
        et = draw(IDENT.filter(lambda c: c not in cols))
        types = [draw(st.sampled_from(TYPES)) for _ in cols]
        pairs = list(zip(cols, types, strict=True))
        if time_mode == "event":
            pairs.insert(draw(st.integers(0, len(pairs))), (et, "TIMESTAMP"))
        kw["path"] = draw(NONBLANK)
        kw["schema"] = ", ".join(f"{_ddl_name(c)} {t}" for c, t in pairs)
    if sql is not None:
        cols = draw(st.lists(IDENT, min_size=1, max_size=3, unique=True))
    src = Source(name=name, format=fmt, options=options, sql=sql, time_mode=time_mode,
                 event_time_column=draw(st.sampled_from([None, et])), **kw)  # type: ignore[arg-type]
    return src, cols, et


@st.composite
def targets(draw: st.DrawFn, outputs: list[str] | None, *, dead_letter: bool = False) -> Target:
    kind = draw(st.sampled_from(["duckdb", "parquet", "console"]))
    options = draw(STR_MAP)
    if kind == "console":
        return Target(kind="console", options=options)
    if kind == "parquet":
        return Target(kind="parquet", path=draw(NONBLANK), options=options)
    usable = [c for c in (outputs or []) if c != "_dead_letter"]
    key = None
    if usable and not dead_letter and draw(st.booleans()):
        key = draw(st.lists(st.sampled_from(usable), min_size=1, max_size=3, unique=True))
    return Target(kind="duckdb", path=draw(st.none() | NONBLANK), key=key, options=options,
                  table=draw(st.none() | IDENT | st.builds("{}.{}".format, IDENT, IDENT)))


SPARK = st.builds(
    SparkSettings, master=NONBLANK | st.just("local[2]"), checkpoint=st.none() | NONBLANK,
    shuffle_partitions=st.integers(1, 64),
    conf=st.dictionaries(TEXT.filter(lambda k: bool(k) and k not in (
        "spark.sql.shuffle.partitions", "spark.master")), TEXT, max_size=3))


def _late(draw: st.DrawFn) -> dict[str, object]:
    late = draw(st.sampled_from(["drop", "reopen", "dlq"]))
    kw: dict[str, object] = {"late_data": late, "lateness_ms": draw(st.sampled_from([0, 30_000]))}
    if late == "reopen":
        kw["allowed_lateness_ms"] = draw(st.sampled_from([None, 1, 120_000]))
        if kw["lateness_ms"] == 0 and kw["allowed_lateness_ms"] is None:
            kw["allowed_lateness_ms"] = 5
    if late == "dlq":
        kw["dlq_horizon_ms"] = draw(st.sampled_from([86_400_000, 60_000]))
    return kw


def _finish(draw: st.DrawFn, build: object) -> Pipeline:
    try:
        return build()  # type: ignore[operator, no-any-return]
    except ConfigError:
        assume(False)
        raise


@st.composite
def join_pipelines(draw: st.DrawFn) -> Pipeline:
    time_mode = draw(st.sampled_from(["event", "processing"]))
    lname, rname = draw(st.lists(NAME, min_size=2, max_size=2, unique=True))
    left, lcols, let = draw(inputs(lname, time_mode))
    right, rcols, ret = draw(inputs(rname, time_mode))
    n = draw(st.integers(1, min(2, len(lcols), len(rcols))))
    kw: dict[str, object] = {
        "left_keys": draw(st.permutations(lcols))[:n],
        "right_keys": draw(st.permutations(rcols))[:n],
        "how": draw(st.sampled_from(["inner", "left", "right", "full", "left_semi", "left_anti"])),
        "time_mode": time_mode, "key_groups": draw(st.integers(1, 64)),
        "left_prefix": draw(st.sampled_from(["left_", "l_", ""])),
        "right_prefix": draw(st.sampled_from(["right_", "r_", "x"])),
        **_late(draw),
    }
    if draw(st.booleans()):
        kw["time_window_ms"] = draw(st.integers(0, 10**9))
    else:
        lower = draw(st.integers(-(10**9), 10**9))
        kw.update(lower_ms=lower, upper_ms=lower + draw(st.integers(0, 10**6)))
    if let == ret and draw(st.booleans()):
        kw["event_time_column"] = let
    else:
        kw.update(left_event_time_column=let, right_event_time_column=ret)
        if draw(st.booleans()):
            kw["event_time_column"] = draw(IDENT)
    for side, cols in (("left", lcols), ("right", rcols)):
        if draw(st.booleans()):
            kw[f"output_{side}_columns"] = draw(st.lists(st.sampled_from(cols), min_size=1,
                                                         max_size=3, unique=True))
    if draw(st.booleans()):
        kw["name"] = draw(NAME)
    join = _finish(draw, lambda: Join(**kw))  # type: ignore[arg-type]
    sources = [left, right] if draw(st.booleans()) else [right, left]
    probe = _finish(draw, lambda: Pipeline(name=draw(NAME), sources=sources, join=join,
                                           left_source=lname, right_source=rname,
                                           target=Target(kind="console"),
                                           dead_letter=Target(kind="console")
                                           if join.late_data == "dlq" else None))
    outputs = None
    try:
        outputs = probe.output_columns()
    except ConfigError:
        pass
    dlq = join.late_data == "dlq"
    target = draw(targets(outputs))
    dead = draw(targets(None, dead_letter=True)) if dlq else None
    return _finish(draw, lambda: dataclasses.replace(probe, target=target, dead_letter=dead,
                                                     spark=draw(SPARK)))


@st.composite
def window_pipelines(draw: st.DrawFn) -> Pipeline:
    time_mode = draw(st.sampled_from(["event", "processing"]))
    src, cols, et = draw(inputs(draw(NAME), time_mode))
    transform_sql = draw(st.none() | NONBLANK)
    kind = draw(st.sampled_from(["tumbling", "hopping", "session"]))
    kw: dict[str, object] = {"kind": kind, "time_mode": time_mode, "event_time_column": et,
                             "max_groups_per_window": draw(st.integers(1, 10**7)),
                             "key_groups": draw(st.integers(1, 64)), **_late(draw)}
    if kind == "session":
        kw["gap_ms"] = draw(st.integers(1, 10**8))
    else:
        kw["duration_ms"] = draw(st.integers(1, 10**8))
        if kind == "hopping":
            kw["hop_ms"] = draw(st.integers(1, kw["duration_ms"]))  # type: ignore[arg-type]
    group_by = draw(st.lists(st.sampled_from(cols), max_size=2, unique=True))
    kw["group_by"] = group_by
    aliases = draw(st.lists(IDENT.filter(lambda a: a not in group_by and not a.startswith(
        ("window_", "revision", "retracted"))), min_size=1, max_size=3, unique=True))
    aggs = []
    for alias in aliases:
        agg = draw(st.sampled_from(["count", "sum", "min", "max", "avg", "first", "last",
                                    "count_distinct"]))
        column = draw(st.sampled_from(cols)) if agg != "count" or draw(st.booleans()) else None
        akw: dict[str, object] = {"agg": agg, "as_": alias, "column": column}
        if agg == "count_distinct":
            mode = draw(st.sampled_from([None, "approximate", "exact"]))
            akw["mode"] = mode
            if mode == "exact":
                akw["max_distinct_values_per_group"] = draw(st.integers(1, 10**6))
        aggs.append(Aggregation(**akw))  # type: ignore[arg-type]
    kw["aggregations"] = aggs
    if draw(st.booleans()):
        kw["window_start_column"], kw["window_end_column"] = "ws", "we"
    if draw(st.booleans()):
        kw["name"] = draw(NAME)
    window = _finish(draw, lambda: Window(**kw))  # type: ignore[arg-type]
    dlq = window.late_data == "dlq"
    target = draw(targets(window.output_columns, dead_letter=False))
    dead = draw(targets(None, dead_letter=True)) if dlq else None
    return _finish(draw, lambda: Pipeline(
        name=draw(NAME), sources=[src], window=window, target=target, dead_letter=dead,
        window_source=draw(st.sampled_from([None, src.name])), transform_sql=transform_sql,
        spark=draw(SPARK)))


# Example counts come from the Hypothesis profile (tests/conftest.py: dev 40, ci 150).
ROUND_TRIP = settings(deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _assert_round_trip(p: Pipeline) -> None:
    text = p.to_toml()
    tomllib.loads(text)  # valid TOML
    back = Pipeline.from_toml(text)
    assert back == p
    assert back.to_toml() == text  # deterministic: equal pipelines write equal text
    assert hash(back) == hash(p)


@ROUND_TRIP
@given(join_pipelines())
def test_every_valid_join_pipeline_round_trips_through_toml(p: Pipeline) -> None:
    _assert_round_trip(p)


@ROUND_TRIP
@given(window_pipelines())
def test_every_valid_window_pipeline_round_trips_through_toml(p: Pipeline) -> None:
    _assert_round_trip(p)


@settings(deadline=None)
# The two keys SparkSettings rejects in `conf` (they have fields of their own) are no strings
# for this test: it is about the writer, not about that rule (tested above).
@given(st.text().filter(lambda s: s not in {"spark.master", "spark.sql.shuffle.partitions"}))
def test_any_string_survives_the_toml_writer(s: str) -> None:
    p = Pipeline.from_toml(WINDOW_TOML)
    q = dataclasses.replace(p, transform_sql=s if s.strip() else "x" + s,
                            spark=SparkSettings(conf={s or "k": s}))
    assert Pipeline.from_toml(q.to_toml()) == q


# ---------------------------------------------------------------------------------------
# [spark] state store provider (issue 10)
# ---------------------------------------------------------------------------------------


def test_spark_state_store_reads_round_trips_and_selects_the_provider() -> None:
    from interlace.session import STATE_STORES, state_store_conf

    text = JOIN_TOML + '\n[spark]\nstate_store = "rocksdb"\nchangelog_checkpointing = true\n'
    p = Pipeline.from_toml(text)
    assert (p.spark.state_store, p.spark.changelog_checkpointing) == ("rocksdb", True)
    assert Pipeline.from_toml(p.to_toml()) == p
    assert 'state_store = "rocksdb"' in p.to_toml()
    assert "state_store" not in Pipeline.from_toml(JOIN_TOML).to_toml()  # default left out
    conf = state_store_conf("rocksdb", True)
    assert conf == {
        "spark.sql.streaming.stateStore.providerClass": STATE_STORES["rocksdb"],
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    }
    assert state_store_conf()["spark.sql.streaming.stateStore.providerClass"].endswith(
        "HDFSBackedStateStoreProvider")


@pytest.mark.parametrize(("spark_toml", "needle"), [
    ('state_store = "rocks"', "`state_store` must be one of 'hdfs', 'rocksdb'"),
    ("changelog_checkpointing = true", "applies to state_store='rocksdb' only"),
    ('state_store = "rocksdb"\nchangelog_checkpointing = "yes"', "must be true or false"),
])
def test_spark_state_store_errors_name_the_field(spark_toml: str, needle: str) -> None:
    msg = error_of(JOIN_TOML + "\n[spark]\n" + spark_toml + "\n")
    assert needle in msg and "[spark]" in msg


def test_session_reopen_into_parquet_is_refused_because_it_cannot_converge() -> None:
    text = edit(WINDOW_TOML, 'kind = "tumbling"\nduration_ms = 60_000',
                'kind = "session"\ngap_ms = 5_000\nlate_data = "reopen"\n'
                'allowed_lateness_ms = 10_000')
    msg = error_of(edit(text, 'kind = "console"', 'kind = "parquet"\npath = "out/p"'))
    assert msg.startswith("[target]") and 'kind = "duckdb"' in msg and "converge" in msg
    target_line = line_of(text, 'kind = "console"')  # the parquet edit keeps its line
    assert msg.endswith(f"(line {target_line})"), msg
    Pipeline.from_toml(edit(text, 'kind = "console"', 'kind = "duckdb"'))  # converges: fine
    tumbling = edit(WINDOW_TOML, 'max_groups_per_window', 'late_data = "reopen"\n'
                    'allowed_lateness_ms = 10_000\nmax_groups_per_window')
    Pipeline.from_toml(edit(tumbling, 'kind = "console"', 'kind = "parquet"\npath = "out/p"'))

