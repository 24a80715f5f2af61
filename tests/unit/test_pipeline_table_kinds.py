"""``[transform.join] kind = "table"`` and ``"foreign_key"``: the table joins in pipelines.

Round trips (TOML → pipeline → TOML byte for byte, Python → TOML → Python equal), the
output columns and the changelog target they imply, and every validation error naming the
field, the fix and the line. No Spark (``tests/cli/test_table_pipelines.py`` runs them).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlace import ConfigError, ForeignKeyJoin, TableJoin
from interlace.pipeline import Pipeline, Source, Target
from interlace.pipeline.kinds import JOIN_KINDS, join_kind
from interlace.preflight import preflight

TABLE_TOML = '''\
name = "customers-accounts"

[[sources]]
name = "customers"
format = "parquet"
path = "data/customers_cdc"
schema = "customer STRING, name STRING, tier STRING, deleted BOOLEAN, updated_ts TIMESTAMP"
event_time_column = "updated_ts"

[[sources]]
name = "accounts"
format = "parquet"
path = "data/accounts_cdc"
schema = "customer STRING, balance DOUBLE, deleted BOOLEAN, updated_ts TIMESTAMP"
event_time_column = "updated_ts"

[transform.join]
kind = "table"
left_source = "customers"
right_source = "accounts"
left_keys = ["customer"]
right_keys = ["customer"]
how = "left"
lateness_ms = 300_000
tombstone_column = "deleted"

[target]
kind = "duckdb"
table = "customers_accounts"
'''

FK_TOML = '''\
name = "orders-products"

[[sources]]
name = "orders"
format = "parquet"
path = "data/orders_cdc"
schema = "order_id BIGINT, product STRING, qty INT, deleted BOOLEAN, updated_ts TIMESTAMP"
event_time_column = "updated_ts"

[[sources]]
name = "products"
format = "parquet"
path = "data/products_cdc"
schema = "product STRING, price DOUBLE, deleted BOOLEAN, updated_ts TIMESTAMP"
event_time_column = "updated_ts"

[transform.join]
kind = "foreign_key"
left_source = "orders"
right_source = "products"
left_keys = ["order_id"]
foreign_key_columns = ["product"]
right_keys = ["product"]
how = "left"
lateness_ms = 300_000
tombstone_column = "deleted"

[target]
kind = "duckdb"
table = "orders_products"
'''

CUSTOMERS = Source(name="customers", format="parquet", path="data/customers_cdc",
                   schema="customer STRING, name STRING, tier STRING, deleted BOOLEAN, "
                          "updated_ts TIMESTAMP", event_time_column="updated_ts")
ACCOUNTS = Source(name="accounts", format="parquet", path="data/accounts_cdc",
                  schema="customer STRING, balance DOUBLE, deleted BOOLEAN, updated_ts TIMESTAMP",
                  event_time_column="updated_ts")
ORDERS = Source(name="orders", format="parquet", path="data/orders_cdc",
                schema="order_id BIGINT, product STRING, qty INT, deleted BOOLEAN, "
                       "updated_ts TIMESTAMP", event_time_column="updated_ts")
PRODUCTS = Source(name="products", format="parquet", path="data/products_cdc",
                  schema="product STRING, price DOUBLE, deleted BOOLEAN, updated_ts TIMESTAMP",
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


def table_pipeline(target: Target | None = None, dead_letter: Target | None = None,
                   **spec) -> Pipeline:
    fields = {"left_keys": ["customer"], "right_keys": ["customer"],
              "event_time_column": "updated_ts", **spec}
    return Pipeline(name="ca", sources=[CUSTOMERS, ACCOUNTS], join=TableJoin(**fields),
                    left_source="customers", right_source="accounts",
                    target=target or Target(kind="duckdb"), dead_letter=dead_letter)


def fk_pipeline(target: Target | None = None, dead_letter: Target | None = None,
                **spec) -> Pipeline:
    fields = {"left_keys": ["order_id"], "foreign_key_columns": ["product"],
              "right_keys": ["product"], "event_time_column": "updated_ts", **spec}
    return Pipeline(name="op", sources=[ORDERS, PRODUCTS], join=ForeignKeyJoin(**fields),
                    left_source="orders", right_source="products",
                    target=target or Target(kind="duckdb"), dead_letter=dead_letter)


# ---------------------------------------------------------------------------------------------
# Reading, writing, output columns, the changelog target
# ---------------------------------------------------------------------------------------------


def test_the_table_kind_reads_into_a_table_join_and_writes_back_unchanged():
    p = Pipeline.from_toml(TABLE_TOML)
    assert p.join == TableJoin(left_keys=["customer"], right_keys=["customer"], how="left",
                               event_time_column="updated_ts", lateness_ms=300_000,
                               tombstone_column="deleted")
    assert join_kind(p.join).kind == "table"
    assert p.output_columns() == ["customer", "left_name", "left_tier", "right_balance", "op",
                                  "event_time", "version"]
    assert p.to_toml() == TABLE_TOML
    assert Pipeline.from_toml(p.to_toml()) == p


def test_the_foreign_key_kind_reads_into_a_foreign_key_join_and_writes_back_unchanged():
    p = Pipeline.from_toml(FK_TOML)
    assert p.join == ForeignKeyJoin(left_keys=["order_id"], foreign_key_columns=["product"],
                                    right_keys=["product"], how="left",
                                    event_time_column="updated_ts", lateness_ms=300_000,
                                    tombstone_column="deleted")
    assert join_kind(p.join).kind == "foreign_key"
    # The left values include the foreign key; the right key is not a right value.
    assert p.output_columns() == ["order_id", "left_product", "left_qty", "right_price", "op",
                                  "event_time", "version"]
    assert p.to_toml() == FK_TOML
    assert Pipeline.from_toml(p.to_toml()) == p


@pytest.mark.parametrize("build", [table_pipeline, fk_pipeline])
def test_a_changelog_kind_targets_duckdb_by_its_left_keys(build):
    p = build()
    kind = join_kind(p.join)
    assert kind.changelog_key is not None and p.resolved_target().key == tuple(p.join.left_keys)
    explicit = build(target=Target(kind="duckdb", key=list(p.join.left_keys)))
    assert explicit.resolved_target().key == tuple(p.join.left_keys)
    # A Parquet target appends the changes as rows (no key: docs/targets.md).
    parquet = build(target=Target(kind="parquet", path="out/changes"))
    assert parquet.resolved_target().key is None
    assert parquet.output_columns()[-3:] == ["op", "event_time", "version"]


@pytest.mark.parametrize(("spec", "columns"), [
    ({"left_prefix": "", "right_prefix": "", "tombstone_column": "deleted"},
     ["customer", "name", "tier", "balance", "op", "event_time", "version"]),
    ({"value_columns": ["tier"], "right_value_columns": ["balance"]},
     ["customer", "left_tier", "right_balance", "op", "event_time", "version"]),
    ({"left_tombstone_column": "deleted"},  # the right table's `deleted` is a value then
     ["customer", "left_name", "left_tier", "right_balance", "right_deleted", "op",
      "event_time", "version"]),
    ({"late_data": "dlq", "left_event_time_column": "updated_ts",
      "right_event_time_column": "updated_ts", "event_time_column": None},
     ["customer", "left_name", "left_tier", "left_deleted", "right_balance", "right_deleted",
      "op", "event_time", "version", "_dead_letter"]),
])
def test_table_join_output_columns(spec, columns):
    dead = Target(kind="duckdb") if spec.get("late_data") == "dlq" else None
    assert table_pipeline(dead_letter=dead, **spec).output_columns() == columns


@pytest.mark.parametrize("spec", [
    {},
    {"how": "full", "emit": "eager", "key_groups": 16},
    {"value_columns": ["tier"], "right_value_columns": ["balance"], "left_prefix": "",
     "right_prefix": "acct_"},
    {"left_tombstone_column": "deleted", "right_tombstone_column": "deleted",
     "lateness_ms": 5_000, "late_data": "drop", "dlq_horizon_ms": 1_000},
    {"left_event_time_column": "updated_ts", "right_event_time_column": "updated_ts",
     "event_time_column": None, "how": "inner"},
])
def test_python_table_pipelines_round_trip_through_toml(spec):
    p = table_pipeline(**spec)
    text = p.to_toml()
    assert 'kind = "table"' in text
    back = Pipeline.from_toml(text)
    assert back == p and back.to_toml() == text


@pytest.mark.parametrize("spec", [
    {},
    {"how": "inner", "emit": "eager", "key_groups": 3},
    {"left_value_columns": ["qty"], "right_value_columns": ["price"], "left_prefix": "o_",
     "right_prefix": "p_", "tombstone_column": "deleted"},
    {"right_tombstone_column": "deleted", "late_data": "drop", "lateness_ms": 0},
])
def test_python_foreign_key_pipelines_round_trip_through_toml(spec):
    p = fk_pipeline(**spec)
    text = p.to_toml()
    assert 'kind = "foreign_key"' in text and 'foreign_key_columns = ["product"]' in text
    back = Pipeline.from_toml(text)
    assert back == p and back.to_toml() == text


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["table", "foreign_key"]), how=st.sampled_from(["inner", "left"]),
       emit=st.sampled_from(["final", "eager"]), lateness=st.integers(0, 10**7),
       tomb=st.sampled_from([None, "shared", "left", "right"]), dlq=st.booleans(),
       values=st.booleans(), prefixes=st.sampled_from([("left_", "right_"), ("", ""),
                                                       ("l.", "r.")]),
       key_groups=st.integers(1, 64))
def test_any_table_or_foreign_key_pipeline_round_trips(kind, how, emit, lateness, tomb, dlq,
                                                       values, prefixes, key_groups):
    tombstones = {None: {}, "shared": {"tombstone_column": "deleted"},
                  "left": {"left_tombstone_column": "deleted"},
                  "right": {"right_tombstone_column": "deleted"}}[tomb]
    spec = {"how": how, "emit": emit, "lateness_ms": lateness, "late_data":
            "dlq" if dlq else "drop", "left_prefix": prefixes[0], "right_prefix": prefixes[1],
            "key_groups": key_groups, **tombstones}
    if kind == "table":
        if values:
            spec.update(left_value_columns=["tier"], right_value_columns=["balance"])
        build = table_pipeline
    else:
        if values:
            spec.update(left_value_columns=["qty", "product"], right_value_columns=["price"])
        build = fk_pipeline
    dead = Target(kind="duckdb") if dlq else None
    try:
        p = build(dead_letter=dead, **spec)
    except ConfigError as exc:  # prefixes "" with `deleted` a value of both tables
        assert "appear twice" in str(exc) and prefixes == ("", "")
        return
    back = Pipeline.from_toml(p.to_toml())
    assert back == p and back.to_toml() == p.to_toml()
    names = back.output_columns()
    assert names[:1] == list(p.join.left_keys)
    assert names[-3:] == (["event_time", "version", "_dead_letter"] if dlq
                          else ["op", "event_time", "version"])
    assert back.resolved_target().key == tuple(p.join.left_keys)


def test_the_kinds_say_their_changelog_key_and_compared_columns():
    assert JOIN_KINDS["table"].spec_type is TableJoin
    assert JOIN_KINDS["foreign_key"].spec_type is ForeignKeyJoin
    assert JOIN_KINDS["table"].key_pairs == (("left_keys", "right_keys"),)
    assert JOIN_KINDS["foreign_key"].key_pairs == (("foreign_key_columns", "right_keys"),)
    for name in ("stream_stream_join", "stream_table"):
        assert JOIN_KINDS[name].changelog_key is None


# ---------------------------------------------------------------------------------------------
# Validation errors: the field, the fix, the line
# ---------------------------------------------------------------------------------------------

TABLE_ERRORS = [
    # fields of another kind
    ('how = "left"', 'how = "left"\nforeign_key_columns = ["customer"]',
     ["`foreign_key_columns` is a field of kind = 'foreign_key', not of kind = 'table' (the "
      "table-table join)", "set kind = 'foreign_key'"], "foreign_key_columns"),
    ('how = "left"', 'how = "left"\nhistory_retention_ms = 0',
     ["`history_retention_ms` is a field of kind = 'stream_table', not of kind = 'table'"],
     "history_retention_ms"),
    ('how = "left"', 'how = "left"\ntime_window_ms = 60_000',
     ["`time_window_ms` is a field of kind = 'stream_stream_join', not of kind = 'table'"],
     "time_window_ms"),
    ('how = "left"', 'how = "left"\nhow_ = 1', ["unknown key `how_`; did you mean `how`?"],
     "how_"),
    # the spec's own checks
    ('how = "left"', 'how = "right"', ["`how` must be one of 'inner', 'left', 'full'"],
     'how = "right"'),
    ('how = "left"', 'how = "left"\nlate_data = "reopen"',
     ["`late_data`='reopen' is not supported by the table-table join", "'drop'", "'dlq'"],
     "late_data"),
    ('how = "left"', 'how = "left"\nemit = "lazy"', ["`emit` must be one of"], "emit"),
    ('how = "left"', 'how = "left"\nvalue_columns = ["customer"]',
     ["`value_columns` ['customer'] overlap the table's keys"], "value_columns"),
    ('tombstone_column = "deleted"', 'tombstone_column = "customer"',
     ["`tombstone_column` 'customer' is a key column"], "tombstone_column"),
    ('right_keys = ["customer"]', 'right_keys = ["customer", "balance"]',
     ["`left_keys` and `right_keys` must have equal length"], None),
    # columns of the sources
    ('left_keys = ["customer"]', 'left_keys = ["customer_id"]',
     ["`left_keys` names column(s) ['customer_id'] absent from the left table source "
      "'customers'"], "left_keys"),
    ('right_keys = ["customer"]', 'right_keys = ["id"]',
     ["`right_keys` names column(s) ['id'] absent from the right table source 'accounts'"],
     "right_keys"),
    ('how = "left"', 'how = "left"\nvalue_columns = ["tier"]',
     ["`value_columns` names column(s) ['tier'] absent from the right table source "
      "'accounts'", "fix the name or add the column"], "value_columns"),
    ('how = "left"', 'how = "left"\nleft_value_columns = ["tier", "segment"]',
     ["`left_value_columns` names column(s) ['segment'] absent from the left table source "
      "'customers'"], "left_value_columns"),
    ('how = "left"', 'how = "left"\nright_value_columns = ["tier"]',
     ["`right_value_columns` names column(s) ['tier'] absent from the right table source"],
     "right_value_columns"),
    ('how = "left"', 'how = "left"\nleft_tombstone_column = "gone"',
     ["`left_tombstone_column` names column(s) ['gone'] absent from the left table source"],
     "left_tombstone_column"),
    # tombstone columns must be BOOLEAN
    ('tombstone_column = "deleted"', 'tombstone_column = "deleted"\nleft_tombstone_column = '
     '"tier"', ["`left_tombstone_column` 'tier' of source 'customers' must be a BOOLEAN column",
                "got STRING", "declare it BOOLEAN in the source's `schema`"],
     "left_tombstone_column"),
    ('tombstone_column = "deleted"', 'tombstone_column = "deleted"\nright_tombstone_column = '
     '"balance"', ["`right_tombstone_column` 'balance' of source 'accounts' must be a BOOLEAN "
                   "column", "got DOUBLE"], "right_tombstone_column"),
    ('schema = "customer STRING, balance DOUBLE, deleted BOOLEAN',
     'schema = "customer STRING, balance DOUBLE, deleted STRING',
     ["`tombstone_column` 'deleted' of source 'accounts' must be a BOOLEAN column",
      "got STRING"], "tombstone_column"),
    # sources
    ('right_source = "accounts"', 'right_source = "customers"',
     ["`left_source` and `right_source` are both 'customers'", "table-table join needs two",
      "the changelogs of two tables"], "right_source"),
    ('right_source = "accounts"', 'right_source = "account"',
     ["`right_source` names source 'account' that does not exist"], "right_source"),
    ('path = "data/customers_cdc"\nschema = "customer STRING, name STRING, tier STRING, '
     'deleted BOOLEAN, updated_ts TIMESTAMP"\nevent_time_column = "updated_ts"',
     'path = "data/customers_cdc"\nschema = "customer STRING, name STRING, tier STRING, '
     'deleted BOOLEAN, updated_ts TIMESTAMP"\nevent_time_column = "seen_ts"\n'
     'time_mode = "processing"',
     ["[[sources]] #1: source 'customers' has time_mode='processing', but the table-table "
      'join (kind = "table") joins on event time only', "remove `time_mode`"], "time_mode"),
    ('how = "left"', 'how = "left"\nleft_event_time_column = "name"\n'
     'right_event_time_column = "updated_ts"',
     ["`left_event_time_column`='name' disagrees with source 'customers'"],
     "left_event_time_column"),
    # output and targets
    ('schema = "customer STRING, balance DOUBLE', 'schema = "customer STRING, name STRING, '
     'balance DOUBLE', None, None),  # distinct prefixes: no collision (checked below)
    ('tombstone_column = "deleted"', 'left_prefix = ""\nright_prefix = ""',  # both: `deleted`
     ["output columns ['deleted'] appear twice", "`left_prefix`, `right_prefix` and the value "
      "columns"], "[transform.join]"),
    ('how = "left"', 'how = "left"\nleft_prefix = ""\nleft_value_columns = ["name"]\n'
     'right_prefix = "op"\nright_value_columns = ["balance"]', None, None),
    ('how = "left"', 'how = "left"\nlate_data = "dlq"',
     ["late_data='dlq' needs a [dead_letter] target"], "late_data"),
    ('table = "customers_accounts"', 'table = "customers_accounts"\nkey = ["left_name"]',
     ["[target]: `key` ['left_name'] is not the key of the table-table join's changelog "
      "(['customer'], its `left_keys`)", "remove `key`"], "key ="),
    ('table = "customers_accounts"', 'table = "customers_accounts"\n'
     'key = ["customer", "version"]', ["`key` ['customer', 'version'] is not the key"], "key ="),
    ('table = "customers_accounts"', 'table = "customers_accounts"\nkey = ["customer"]',
     None, None),
    ('table = "customers_accounts"', 'table = "customers_accounts"\nkey = ["nope"]',
     ["`key` names column(s) ['nope'] absent from the output columns"], "key ="),
]


@pytest.mark.parametrize(("old", "new", "needles", "at"), TABLE_ERRORS)
def test_table_kind_validation_errors_name_the_field_the_fix_and_the_line(old, new, needles,
                                                                         at):
    text = edit(TABLE_TOML, old, new)
    if needles is None:  # a near miss that is valid
        assert Pipeline.from_toml(text).to_toml()
        return
    msg = error_of(text)
    for needle in needles:
        assert needle in msg, msg
    if at is not None:
        assert msg.endswith(f"(line {line_of(text, at)})"), msg


FK_ERRORS = [
    ('right_keys = ["product"]', 'right_keys = ["product"]\nright_tombstone_column = "price"',
     ["`right_tombstone_column` 'price' of source 'products' must be a BOOLEAN column",
      "got DOUBLE"], "right_tombstone_column"),
    ('foreign_key_columns = ["product"]', 'foreign_key_columns = ["product_id"]',
     ["`foreign_key_columns` names column(s) ['product_id'] absent from the left table "
      "source 'orders'", "fix the name or add the column"], "foreign_key_columns"),
    ('foreign_key_columns = ["product"]', 'foreign_key_columns = ["product", "qty"]',
     ["`foreign_key_columns` and `right_keys` must have equal length"],
     "foreign_key_columns"),
    ('foreign_key_columns = ["product"]', 'foreign_key_columns = ["deleted"]',
     ["`foreign_key_columns` ['deleted'] name the left table's event-time or tombstone "
      "column"], "foreign_key_columns"),
    ('foreign_key_columns = ["product"]\n', '',
     ["[transform.join]: missing required key `foreign_key_columns`"], None),
    ('right_keys = ["product"]', 'right_keys = ["sku"]',
     ["`right_keys` names column(s) ['sku'] absent from the right table source 'products'"],
     "right_keys"),
    ('left_keys = ["order_id"]', 'left_keys = ["order"]',
     ["`left_keys` names column(s) ['order'] absent from the left table source 'orders'"],
     "left_keys"),
    ('how = "left"', 'how = "full"', ["`how` must be one of 'inner', 'left'"],
     'how = "full"'),
    ('how = "left"', 'how = "left"\nlate_data = "reopen"',
     ["`late_data`='reopen' is not supported by the foreign-key join"], "late_data"),
    ('how = "left"', 'how = "left"\nallowed_lateness_ms = 5',
     ["`allowed_lateness_ms` is a field of kind = 'stream_stream_join', not of kind = "
      "'foreign_key'"], "allowed_lateness_ms"),
    ('kind = "foreign_key"', 'kind = "fk"',
     ["`kind` must be 'stream_stream_join' (the default), 'stream_table', 'table' or "
      "'foreign_key'", "got kind='fk'"], 'kind = "fk"'),
    ('path = "data/products_cdc"\nschema = "product STRING, price DOUBLE, deleted BOOLEAN, '
     'updated_ts TIMESTAMP"\nevent_time_column = "updated_ts"',
     'path = "data/products_cdc"\nschema = "product STRING, price DOUBLE, deleted BOOLEAN, '
     'updated_ts TIMESTAMP"\nevent_time_column = "seen_ts"\ntime_mode = "processing"',
     ["[[sources]] #2: source 'products' has time_mode='processing', but the foreign-key "
      'join (kind = "foreign_key") joins on event time only'], "time_mode"),
    ('right_source = "products"', 'right_source = "orders"',
     ["`left_source` and `right_source` are both 'orders'", "foreign-key join needs two"],
     "right_source"),
    ('table = "orders_products"', 'table = "orders_products"\nkey = ["left_product"]',
     ["`key` ['left_product'] is not the key of the foreign-key join's changelog "
      "(['order_id']"], "key ="),
]


@pytest.mark.parametrize(("old", "new", "needles", "at"), FK_ERRORS)
def test_foreign_key_kind_validation_errors_name_the_field_the_fix_and_the_line(old, new,
                                                                               needles, at):
    text = edit(FK_TOML, old, new)
    msg = error_of(text)
    for needle in needles:
        assert needle in msg, msg
    if at is not None:
        assert msg.endswith(f"(line {line_of(text, at)})"), msg


def test_a_table_field_in_the_stream_table_kind_names_both_table_kinds():
    text = edit(edit(TABLE_TOML, 'kind = "table"', 'kind = "stream_table"'),
                'tombstone_column = "deleted"', 'right_tombstone_column = "deleted"')
    msg = error_of(text)
    assert ("`right_tombstone_column` is a field of kind = 'table' or 'foreign_key', not of "
            "kind = 'stream_table' (the stream-table join); remove it, or set kind = 'table' "
            "or 'foreign_key'") in msg
    assert msg.endswith(f"(line {line_of(text, 'right_tombstone_column')})")


def test_a_shared_field_is_not_checked_on_a_side_that_overrides_it():
    # `value_columns` ['tier'] is not a column of accounts, but accounts has its own.
    p = table_pipeline(value_columns=["tier"], right_value_columns=["balance"])
    assert p.output_columns() == ["customer", "left_tier", "right_balance", "op",
                                  "event_time", "version"]
    # `tombstone_column` 'tier' is not BOOLEAN on customers, but customers has its own.
    p = table_pipeline(tombstone_column="deleted", left_tombstone_column="deleted")
    assert p.join.side_tombstone_column("left") == "deleted"
    with pytest.raises(ConfigError, match="`value_columns` names column"):
        table_pipeline(value_columns=["tier"], left_value_columns=["name"])


def test_python_errors_have_no_line_and_name_the_table():
    with pytest.raises(ConfigError) as info:
        fk_pipeline(foreign_key_columns=["sku"])
    assert str(info.value).startswith("[transform.join]: `foreign_key_columns` names column(s) "
                                      "['sku'] absent from the left table source 'orders'")
    assert "line" not in str(info.value)
    with pytest.raises(ConfigError, match=r"`join` must be a Join\(...\) or StreamTableJoin"
                                          r"\(...\) or TableJoin\(...\) or ForeignKeyJoin"):
        Pipeline(name="x", sources=[ORDERS], join="orders", target=Target(kind="console"))


@pytest.mark.parametrize("build", [table_pipeline, fk_pipeline])
def test_output_columns_behind_a_sql_pre_stage(build):
    p = build()
    left = dataclasses.replace(p.sources[0], sql="SELECT * FROM source")
    hidden = dataclasses.replace(p, sources=(left, p.sources[1]))
    with pytest.raises(ConfigError, match="set `left_value_columns` / `right_value_columns`"):
        hidden.output_columns()
    values = ["tier"] if build is table_pipeline else ["qty"]
    fixed = dataclasses.replace(hidden, join=dataclasses.replace(p.join,
                                                                 left_value_columns=values))
    assert fixed.output_columns()[1] == "left_" + values[0]


def test_preflight_compares_the_foreign_key_with_the_right_key(tmp_path):
    text = edit(FK_TOML, 'schema = "product STRING, price', 'schema = "product BIGINT, price')
    path = tmp_path / "fk.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        preflight(path, base=tmp_path, on_missing_path=lambda _: None)
    msg = str(info.value)
    assert ("join key types differ: `foreign_key_columns` 'product' of source 'orders' is "
            "STRING and `right_keys` 'product' of source 'products' is BIGINT") in msg
    assert msg.endswith(f"(line {line_of(text, 'foreign_key_columns')} of {path})"), msg
    # A left key of another type than the right key is fine: they are not compared.
    ok = edit(FK_TOML, "order_id BIGINT", "order_id STRING")
    path.write_text(ok)
    assert preflight(path, base=tmp_path, on_missing_path=lambda _: None).join is not None
    table = tmp_path / "t.toml"
    table.write_text(edit(TABLE_TOML, 'schema = "customer STRING, balance',
                          'schema = "customer BIGINT, balance'))
    with pytest.raises(ConfigError, match="`left_keys` 'customer' of source 'customers' is "
                                          "STRING and `right_keys` 'customer'"):
        preflight(table, base=tmp_path, on_missing_path=lambda _: None)


# ---------------------------------------------------------------------------------------------
# The changelog in the targets a pipeline builds (no Spark: the targets are written directly)
# ---------------------------------------------------------------------------------------------


def test_a_changelog_in_parquet_read_by_highest_version_equals_the_duckdb_target(tmp_path):
    import datetime as dt

    import duckdb
    import pandas as pd
    from pyspark.sql import types as T

    from interlace.connectors import make_target
    from interlace.connectors.duckdb import DuckDBTarget
    from interlace.connectors.parquet import ParquetTarget

    def targets_of(p):
        changelog = join_kind(p.join).changelog_key is not None  # as the runner decides
        return make_target(p.resolved_target(), p.name, base=tmp_path, default_table=p.name,
                           changelog=changelog)

    duck = targets_of(fk_pipeline(target=Target(kind="duckdb", path="out/op.duckdb",
                                                table="orders_products")))
    parquet = targets_of(fk_pipeline(target=Target(kind="parquet", path="out/orders_products")))
    assert isinstance(duck, DuckDBTarget) and duck.changelog and duck.key == ("order_id",)
    assert isinstance(parquet, ParquetTarget)
    schema = T.StructType([
        T.StructField("order_id", T.LongType()), T.StructField("left_product", T.StringType()),
        T.StructField("left_qty", T.IntegerType()), T.StructField("right_price", T.DoubleType()),
        T.StructField("op", T.StringType()), T.StructField("event_time", T.TimestampType()),
        T.StructField("version", T.LongType())])
    columns = [f.name for f in schema.fields]

    def at(minute):
        return dt.datetime(2026, 1, 1, 10, minute)

    batches = {  # batch id -> changes; versions arrive out of order across batches
        0: [(1, "pen", 2, 2.5, "upsert", at(1), 0), (2, "ink", 1, 4.0, "upsert", at(1), 0)],
        1: [(1, "pen", 2, 3.0, "upsert", at(6), 2), (2, None, None, None, "delete", at(3), 1)],
        2: [(1, "pen", 2, 2.75, "upsert", at(4), 1), (3, "pad", 1, 1.5, "upsert", at(5), 0),
            (3, None, None, None, "delete", at(7), 1), (4, "ink", 3, 4.0, "upsert", at(8), 0)],
        3: [(2, "ink", 1, 4.0, "upsert", at(2), 0)],  # older than 2's delete: stays deleted
    }
    for target in (duck, parquet):
        target.prepare(schema)
        for batch_id in (0, 1, 1, 2, 3):  # batch 1 replayed with the same id
            target.write(pd.DataFrame(batches[batch_id], columns=columns), batch_id)
    con = duckdb.connect(str(tmp_path / "out/op.duckdb"), read_only=True)
    applied = con.sql("SELECT * FROM orders_products ORDER BY order_id").fetchall()
    folder = tmp_path / "out/orders_products"
    history = con.sql(  # the query of docs/targets.md, "Parquet"
        "SELECT * EXCLUDE (op, batch_id) "
        f"FROM read_parquet('{folder}/*/*.parquet', hive_partitioning = true) "
        "QUALIFY row_number() OVER (PARTITION BY order_id ORDER BY version DESC) = 1 "
        "AND op = 'upsert' ORDER BY order_id").fetchall()
    changes = con.execute(f"SELECT count(*), count(DISTINCT op) FROM read_parquet('{folder}/*/*"
                          ".parquet')").fetchone()
    con.close()
    assert applied == [(1, "pen", 2, 3.0, at(6), 2), (4, "ink", 3, 4.0, at(8), 0)]
    # Parquet holds UTC instants (TIMESTAMP WITH TIME ZONE in DuckDB), the table naive UTC.
    assert [tuple(v.astimezone(dt.timezone.utc).replace(tzinfo=None)
                  if isinstance(v, dt.datetime) else v for v in row)
            for row in history] == applied
    assert changes == (9, 2)  # every change kept once (the replayed batch replaced its file)
