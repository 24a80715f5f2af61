"""The table aggregation without Spark: spec and plan errors, output types, accumulators, state.

* Every configuration error of :class:`interlace.TableAggregate` (SEMANTICS §6, §10) and of
  :meth:`TableAggregatePlan.from_schema` names the field and the fix.
* The plan's output names, Arrow types (Spark's, for decimal ``sum`` / ``avg``) and lags.
* The removable accumulators of :mod:`interlace.state.table_aggregate`: exact float sums
  under removal, NaN and infinities counted apart, decimals, multisets for min / max.
* Both stages' states survive an encode / decode round trip: a call on the decoded state
  gives what the same call on the in-memory state gives.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pyarrow as pa
import pytest

from interlace import Aggregation, ConfigError, TableAggregate
from interlace.operators.table_aggregate import TableAggregatePlan, group_step, key_step
from interlace.operators.table_aggregate.plan import TOMB_COLUMN
from interlace.state.buffers import TIME_COLUMN
from interlace.state.errors import StateVersionError
from interlace.state.table_aggregate import (
    NAN,
    CountState,
    GroupsState,
    KeyRowsState,
    MultisetState,
    SumState,
)

COUNT = Aggregation(agg="count", as_="accounts")
SCHEMA = pa.schema([("account_id", pa.string()), ("region", pa.string()),
                    ("tier", pa.string()), ("balance", pa.int64()), ("score", pa.float64()),
                    ("fee", pa.decimal128(10, 2)), ("opened", pa.timestamp("us")),
                    ("ts", pa.timestamp("us"))])
BASE = dt.datetime(2026, 1, 1)


def spec_of(**kw: Any) -> TableAggregate:
    args: dict[str, Any] = {"keys": ["account_id"], "group_by": ["region"],
                            "aggregations": [COUNT], "event_time_column": "ts"}
    args.update(kw)
    return TableAggregate(**args)


def plan_of(schema: pa.Schema = SCHEMA, **kw: Any) -> TableAggregatePlan:
    return TableAggregatePlan.from_schema(spec_of(**kw), schema)


# --- spec errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("agg", ["first", "last"])
def test_first_and_last_are_refused_naming_min_max(agg: str) -> None:
    with pytest.raises(ConfigError, match="cannot be removed from") as err:
        spec_of(aggregations=[Aggregation(agg=agg, column="balance", as_="b")])
    msg = str(err.value)
    assert "`b`" in msg and f"agg={agg!r}" in msg
    assert "use min / max" in msg


@pytest.mark.parametrize("mode", [None, "approximate"])
def test_approximate_count_distinct_is_refused_naming_exact(mode: str | None) -> None:
    with pytest.raises(ConfigError, match="cannot be removed from") as err:
        spec_of(aggregations=[Aggregation(agg="count_distinct", column="tier", as_="tiers",
                                          mode=mode)])
    msg = str(err.value)
    assert "`tiers`" in msg and "approximate count_distinct" in msg
    assert "mode='exact'" in msg and "max_distinct_values_per_group" in msg


def test_exact_count_distinct_without_cap_is_refused_by_aggregation_itself() -> None:
    with pytest.raises(ConfigError, match="`max_distinct_values_per_group`") as err:
        Aggregation(agg="count_distinct", column="tier", as_="tiers", mode="exact")
    assert "`tiers`" in str(err.value) and "e.g. 100_000" in str(err.value)


def test_exact_count_distinct_with_cap_is_accepted() -> None:
    a = Aggregation(agg="count_distinct", column="tier", as_="tiers", mode="exact",
                    max_distinct_values_per_group=10)
    assert spec_of(aggregations=[a]).aggregations == (a,)


def test_reopen_is_refused_naming_drop_and_dlq() -> None:
    with pytest.raises(ConfigError, match="`late_data`='reopen'") as err:
        spec_of(late_data="reopen")
    msg = str(err.value)
    assert "table aggregation" in msg
    assert "late_data='drop'" in msg and "'dlq'" in msg and "`lateness_ms`" in msg


def test_empty_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"`keys` must name the input table's primary key"):
        spec_of(keys=[])


@pytest.mark.parametrize("field", ["keys", "group_by"])
def test_a_bare_string_is_refused_with_a_list_example(field: str) -> None:
    with pytest.raises(ConfigError, match=f"`{field}` must be a list of column names") as err:
        spec_of(**{field: "account_id"})
    assert "got" in str(err.value) and 'e.g. ["id"]' in str(err.value)


def test_grouping_by_the_event_time_is_refused() -> None:
    with pytest.raises(ConfigError, match="`group_by` holds the event-time column 'ts'") as err:
        spec_of(group_by=["region", "ts"])
    assert "group by a column computed from it upstream" in str(err.value)


def test_a_duplicate_group_column_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"`group_by` names \['region'\] more than once") as err:
        spec_of(group_by=["region", "tier", "region"])
    assert "list each column once" in str(err.value)


def test_an_alias_colliding_with_a_group_column_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"alias\(es\) \['tier'\] collide with `group_by`") as e:
        spec_of(group_by=["region", "tier"], aggregations=[Aggregation(agg="count", as_="tier")])
    assert "rename the alias" in str(e.value)


@pytest.mark.parametrize("alias", ["op", "event_time", "version"])
def test_an_alias_named_like_a_changelog_column_is_refused(alias: str) -> None:
    with pytest.raises(ConfigError, match=f"alias\\(es\\) \\['{alias}'\\] are output columns") as e:
        spec_of(aggregations=[COUNT, Aggregation(agg="count", as_=alias)])
    assert "(op, event_time, version)" in str(e.value) and "rename the alias" in str(e.value)


def test_duplicate_aliases_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"alias\(es\) \['n'\] are used more than once") as e:
        spec_of(aggregations=[Aggregation(agg="count", as_="n"),
                              Aggregation(agg="sum", column="balance", as_="n")])
    assert "rename the alias" in str(e.value)


@pytest.mark.parametrize("aggs", [[], None, COUNT, "count"])
def test_aggregations_must_be_a_non_empty_list(aggs: Any) -> None:
    with pytest.raises(ConfigError, match="`aggregations` must be a non-empty list") as err:
        spec_of(aggregations=aggs)
    assert "e.g. [Aggregation(agg='count'" in str(err.value)


def test_a_non_aggregation_in_the_list_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"`aggregations` must hold Aggregation\(\.\.\.\)"):
        spec_of(aggregations=[COUNT, "sum"])


def test_an_unknown_emit_is_refused_listing_the_values() -> None:
    with pytest.raises(ConfigError, match="`emit` must be one of 'final', 'eager'") as err:
        spec_of(emit="soon")
    assert "emit='soon'" in str(err.value)


def test_a_negative_lateness_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"`lateness_ms` must be >= 0 \(got lateness_ms=-1\)"):
        spec_of(lateness_ms=-1)


@pytest.mark.parametrize("n", [0, -3])
def test_key_groups_below_one_are_refused(n: int) -> None:
    with pytest.raises(ConfigError, match=r"`key_groups` must be in \[1, ") as err:
        spec_of(key_groups=n)
    assert f"key_groups={n}" in str(err.value) and "spark.sql.shuffle.partitions" in str(err.value)


def test_a_missing_event_time_column_is_refused() -> None:
    with pytest.raises(ConfigError, match="`event_time_column` must name"):
        spec_of(event_time_column=None)


@pytest.mark.parametrize("name", ["op", "event_time", "version"])
def test_a_group_column_named_like_a_changelog_column_is_refused(name: str) -> None:
    schema = SCHEMA.append(pa.field(name, pa.string()))
    with pytest.raises(ConfigError, match=f"`group_by` names \\['{name}'\\]") as err:
        plan_of(schema, group_by=["region", name])
    msg = str(err.value)
    assert "(op, event_time, version)" in msg and "rename the column upstream" in msg


# --- plan errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "kw"), [
    ("keys", {"keys": ["x"]}),
    ("group_by", {"group_by": ["x"]}),
    ("aggregations", {"aggregations": [COUNT, Aggregation(agg="sum", column="x", as_="s")]}),
    ("tombstone_column", {"tombstone_column": "x"}),
    ("event_time_column", {"event_time_column": "x"}),
])
def test_a_column_missing_from_the_schema_is_named_with_its_field(
        field: str, kw: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=(
            f"`{field}` names column\\(s\\) \\['x'\\] that the input table does not have")) as e:
        plan_of(**kw)
    assert str(SCHEMA.names) in str(e.value) and "fix the name" in str(e.value)


@pytest.mark.parametrize("agg", ["sum", "avg"])
@pytest.mark.parametrize("column", ["tier", "opened", "flag"])
def test_sum_and_avg_of_a_non_numeric_column_are_refused(agg: str, column: str) -> None:
    schema = SCHEMA.append(pa.field("flag", pa.bool_()))
    with pytest.raises(ConfigError, match="needs a numeric column") as err:
        plan_of(schema, aggregations=[Aggregation(agg=agg, column=column, as_="x")])
    msg = str(err.value)
    assert "`x`" in msg and f"`{column}` is {schema.field(column).type}" in msg


# --- the plan: names, types, lags -----------------------------------------------------------


def test_output_names() -> None:
    spec = spec_of(aggregations=[COUNT, Aggregation(agg="sum", column="balance", as_="total")])
    assert spec.output_names() == ("region", "accounts", "total", "op", "event_time", "version")
    assert spec_of(group_by=[]).output_names() == ("accounts", "op", "event_time", "version")


def test_output_schema_types() -> None:
    aggs = [
        COUNT,
        Aggregation(agg="count", column="tier", as_="tiers"),
        Aggregation(agg="sum", column="balance", as_="sum_int"),
        Aggregation(agg="sum", column="score", as_="sum_float"),
        Aggregation(agg="sum", column="fee", as_="sum_dec"),
        Aggregation(agg="avg", column="fee", as_="avg_dec"),
        Aggregation(agg="avg", column="balance", as_="avg_int"),
        Aggregation(agg="min", column="opened", as_="first_opened"),
        Aggregation(agg="max", column="opened", as_="last_opened"),
        Aggregation(agg="count_distinct", column="tier", as_="distinct_tiers", mode="exact",
                    max_distinct_values_per_group=10),
    ]
    schema = plan_of(aggregations=aggs).output_schema
    assert schema.names == ["region", *(a.as_ for a in aggs), "op", "event_time", "version"]
    types = {f.name: f.type for f in schema}
    assert types == {
        "region": pa.string(),
        "accounts": pa.int64(),
        "tiers": pa.int64(),
        "sum_int": pa.int64(),
        "sum_float": pa.float64(),
        "sum_dec": pa.decimal128(20, 2),
        "avg_dec": pa.decimal128(14, 6),
        "avg_int": pa.float64(),
        "first_opened": pa.timestamp("us"),
        "last_opened": pa.timestamp("us"),
        "distinct_tiers": pa.int64(),
        "op": pa.string(),
        "event_time": pa.timestamp("us"),
        "version": pa.int64(),
    }


def test_dead_letter_is_the_last_output_column_under_dlq() -> None:
    spec = spec_of(late_data="dlq")
    assert spec.output_names()[-1] == "_dead_letter"
    schema = plan_of(late_data="dlq").output_schema
    assert schema.names[-1] == "_dead_letter" and schema.field("_dead_letter").type == pa.string()
    assert "_dead_letter" not in plan_of().output_schema.names


def test_output_lags() -> None:
    assert spec_of().output_lags_ms() == {"event_time": 0}
    assert spec_of(late_data="dlq", dlq_horizon_ms=5_000).output_lags_ms() == {
        "event_time": 5_000}


# --- accumulators ---------------------------------------------------------------------------


def test_float_sum_is_exact_under_removal() -> None:
    s = SumState("float")
    for v in (1e16, 1.0, -1e16):
        s.add(v, 1)
    assert s.sum() == 1.0
    s.add(1e16, -1)
    s.add(-1e16, -1)
    assert s.sum() == 1.0 and s.avg() == 1.0
    s.add(1.0, -1)
    assert s.sum() is None and s.avg() is None


def test_float_nan_and_infinities_are_counted_and_removable() -> None:
    s = SumState("float")
    s.add(2.0, 1)
    s.add(float("nan"), 1)
    assert math.isnan(s.sum()) and math.isnan(s.avg())
    s.add(float("nan"), -1)
    assert s.sum() == 2.0
    s.add(math.inf, 1)
    assert s.sum() == math.inf
    s.add(-math.inf, 1)
    assert math.isnan(s.sum())
    s.add(math.inf, -1)
    assert s.sum() == -math.inf
    s.add(-math.inf, -1)
    assert s.sum() == 2.0 and s.avg() == 2.0
    assert SumState.load("float", 0, s.dump()) == s


def test_int_sum_and_avg() -> None:
    s = SumState("int")
    for v in (1, 2, 4, None):
        s.add(v, 1)
    assert s.sum() == 7 and s.avg() == float(Fraction(7, 3))
    s.add(4, -1)
    assert s.sum() == 3 and s.avg() == 1.5
    assert SumState.load("int", 0, s.dump()) == s


def test_decimal_sum_and_avg() -> None:
    s = SumState("decimal", 2)
    for v in (Decimal("1.10"), Decimal("2.25"), Decimal("-0.05")):
        s.add(v, 1)
    assert s.sum() == Decimal("3.30") and s.sum().as_tuple().exponent == -2
    assert str(s.avg()) == "1.100000"
    s.add(Decimal("2.25"), -1)
    assert s.sum() == Decimal("1.05") and str(s.avg()) == "0.525000"
    assert SumState.load("decimal", 2, s.dump()) == s


@pytest.mark.parametrize(("values", "mean"), [
    ([1, 0], "0.5000"),
    ([1] + [0] * 31, "0.0313"),  # 0.03125, half up
    ([-1] + [0] * 31, "-0.0313"),  # half away from zero
    ([1, 0, 0], "0.3333"),
    ([2, 0, 0], "0.6667"),
])
def test_decimal_avg_has_four_more_digits_rounded_half_up(values: list[int], mean: str) -> None:
    s = SumState("decimal", 0)
    for v in values:
        s.add(Decimal(v), 1)
    assert str(s.avg()) == mean


@pytest.mark.parametrize(("scale", "value"), [
    (18, "12345678901.123456789012345678"),
    (2, "123456789012345678901234567890.12"),
])
def test_a_decimal_sum_of_more_than_28_digits_is_exact(scale: int, value: str) -> None:
    s = SumState("decimal", scale)
    for _ in range(3):
        s.add(Decimal(value), 1)
    s.add(Decimal(value), -1)
    whole, frac = value.split(".")
    doubled = int(whole + frac) * 2
    expected = Decimal(f"{doubled}E-{scale}")
    assert s.sum() == expected and s.sum().as_tuple() == expected.as_tuple()
    avg = s.avg()
    assert avg.as_tuple().exponent == -(scale + 4)
    assert avg == Decimal(value)
    assert SumState.load("decimal", scale, s.dump()) == s


def test_min_and_max_after_removing_the_extreme_give_the_next() -> None:
    m = MultisetState()
    for v in (5, 3, 9, 9, 7, None):
        m.add(v, 1)
    assert (m.minimum(), m.maximum(), m.distinct()) == (3, 9, 4)
    m.add(9, -1)
    assert m.maximum() == 9  # one 9 is still present
    m.add(9, -1)
    m.add(3, -1)
    assert (m.minimum(), m.maximum(), m.distinct()) == (5, 7, 2)
    m.add(5, -1)
    m.add(7, -1)
    assert (m.minimum(), m.maximum(), m.distinct()) == (None, None, 0)


def test_nan_is_the_max_and_is_removable() -> None:
    m = MultisetState()
    for v in (1.5, float("nan"), -2.0):
        m.add(v, 1)
    m.add(float("nan"), 1)  # another NaN object: the same value
    m.add(math.nan, 1)
    assert m.maximum() is NAN and m.minimum() == -2.0 and m.distinct() == 3
    for nan in (float("nan"), math.nan, float("-nan")):
        m.add(nan, -1)
    assert m.maximum() == 1.5 and m.distinct() == 2
    only = MultisetState()
    only.add(float("nan"), 1)
    assert only.minimum() is NAN and only.maximum() is NAN


def test_distinct_counts_values_present() -> None:
    m = MultisetState()
    for v in ("a", "b", "a", "c"):
        m.add(v, 1)
    assert m.distinct() == 3
    m.add("a", -1)
    assert m.distinct() == 3
    m.add("a", -1)
    assert m.distinct() == 2


def test_count_skips_none() -> None:
    c = CountState()
    for v in (1, None, 0, None, "x"):
        c.add(v, 1)
    assert c.result() == 3
    c.add(None, -1)
    c.add(0, -1)
    assert c.result() == 2
    assert CountState.load(c.dump()) == c


# --- both stages' states: encode / decode ---------------------------------------------------


def at(seconds: float) -> dt.datetime:
    """An event time ``seconds`` after :data:`BASE`."""
    return BASE + dt.timedelta(seconds=seconds)


def _us(t: dt.datetime) -> int:
    """``t`` (naive, UTC) in µs since the epoch."""
    return (t - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)


def batch_of(plan: TableAggregatePlan, rows: list[dict[str, Any]], time: str = "ts") -> pa.Table:
    """Stage 1's prepared input (``plan.input_schema``); a row's ``"tomb"`` marks a delete."""
    columns: dict[str, list[Any]] = {
        TIME_COLUMN: [_us(r[time]) for r in rows],
        TOMB_COLUMN: [bool(r.get("tomb", False)) for r in rows],
    }
    for i, name in enumerate(plan.names):
        columns[plan.column(i)] = [r.get(name) for r in rows]
    return pa.Table.from_pydict(columns, schema=plan.input_schema)


ROUND_TRIP_AGGS = [
    COUNT,
    Aggregation(agg="sum", column="balance", as_="total"),
    Aggregation(agg="max", column="balance", as_="top"),
    Aggregation(agg="count_distinct", column="region", as_="regions", mode="exact",
                max_distinct_values_per_group=10),
]


def _row(account: str, region: str | None, balance: int | None, t: float,
         tomb: bool = False) -> dict[str, Any]:
    return {"account_id": account, "region": region, "tier": "gold", "balance": balance,
            "score": 0.5, "fee": Decimal("1.25"), "opened": at(0), "ts": at(t), "tomb": tomb}


FIRST = [
    _row("a1", "EU", 10, 1),
    _row("a2", "EU", 20, 2),
    _row("a3", "US", 5, 3),
    _row("a1", "EU", 15, 4),
    _row("a5", "EU", 40, 15),  # held under final until the second call's watermark
]
SECOND = [
    _row("a2", "US", 30, 11),  # moves from EU to US
    _row("a3", None, None, 12, tomb=True),  # deleted
    _row("a1", "APAC", 99, 2),  # late: a1's applied update is at 4
    _row("a4", None, 7, 13),  # the NULL group
]


@pytest.mark.parametrize("late_data", ["drop", "dlq"])
@pytest.mark.parametrize("emit", ["final", "eager"])
def test_both_states_survive_an_encode_decode_round_trip(emit: str, late_data: str) -> None:
    spec = TableAggregate(keys=["account_id"], group_by=["region"],
                          aggregations=ROUND_TRIP_AGGS, event_time_column="ts", emit=emit,
                          late_data=late_data)
    plan = TableAggregatePlan.from_schema(spec, SCHEMA)
    first = key_step(plan, KeyRowsState.empty(*plan.state_schemas), batch_of(plan, FIRST),
                     _us(at(10)))
    assert first.state.held.num_rows == (1 if emit == "final" else 0)
    grouped = group_step(plan, GroupsState.empty(*plan.group_state_schemas), first.output)
    assert grouped.output.num_rows > 0

    keys_blob = first.state.encode(plan.fp)
    groups_blob = grouped.state.encode(plan.fp)
    keys = KeyRowsState.decode(keys_blob, plan.fp, *plan.state_schemas)
    groups = GroupsState.decode(groups_blob, plan.fp, *plan.group_state_schemas)
    assert keys.keys.equals(first.state.keys) and keys.held.equals(first.state.held)
    assert keys.seq == first.state.seq == len(FIRST)
    assert groups.groups.equals(grouped.state.groups)
    assert groups.values.equals(grouped.state.values)

    batch, wm = batch_of(plan, SECOND), _us(at(20))
    live = key_step(plan, first.state, batch, wm)
    again = key_step(plan, keys, batch, wm)
    assert again.output.equals(live.output)
    assert again.counters == live.counters
    assert again.state.keys.equals(live.state.keys) and again.next_due_us == live.next_due_us
    live_out = group_step(plan, grouped.state, live.output)
    again_out = group_step(plan, groups, again.output)
    assert again_out.output.equals(live_out.output)
    assert again_out.state.groups.equals(live_out.state.groups)
    assert again_out.state.values.equals(live_out.state.values)

    # The late update of a1 is dropped (counted) or dead-lettered, never applied.
    rows = live_out.output.to_pylist()
    assert all(r["region"] != "APAC" for r in rows)
    if late_data == "drop":
        assert live.counters.get("late_dropped") == 1
        assert "dead_lettered" not in live.counters
        assert "__il_dl" not in live.output.column_names
    else:
        assert live.counters.get("dead_lettered") == 1 and "late_dropped" not in live.counters
        letters = [v for v in live.output.column("__il_dl").to_pylist() if v is not None]
        assert len(letters) == 1 and "late" in letters[0] and "APAC" in letters[0]
        assert rows[-1]["_dead_letter"] == letters[0]
        assert all(r["_dead_letter"] is None for r in rows[:-1])
        rows = rows[:-1]
    last = {r["region"]: (r["op"], r["accounts"], r["total"], r["top"], r["regions"])
            for r in rows}
    assert last["US"] == ("upsert", 1, 30, 30, 1)
    assert last[None] == ("upsert", 1, 7, 7, 0)
    assert last["EU"] == ("upsert", 2, 55, 40, 1)


def test_a_group_that_empties_emits_delete_and_its_version_goes_on() -> None:
    plan = plan_of(emit="eager")
    keys = KeyRowsState.empty(*plan.state_schemas)
    groups = GroupsState.empty(*plan.group_state_schemas)
    seen: list[tuple[Any, ...]] = []
    for row in (_row("a1", "EU", 1, 1), _row("a1", None, None, 2, tomb=True),
                _row("a1", "EU", 2, 3)):
        stepped = key_step(plan, keys, batch_of(plan, [row]), None)
        out = group_step(plan, groups, stepped.output)
        keys, groups = stepped.state, out.state
        seen += [(r["op"], r["accounts"], r["version"]) for r in out.output.to_pylist()]
    assert seen == [("upsert", 1, 0), ("delete", None, 1), ("upsert", 1, 2)]


# --- late_data in the fingerprint -----------------------------------------------------------


def test_late_data_is_in_the_fingerprint() -> None:
    schema = pa.schema([("id", pa.int64()), ("b", pa.int64()), ("a", pa.int64()),
                        ("ts", pa.timestamp("us"))])

    def plan(late_data: str) -> TableAggregatePlan:
        return TableAggregatePlan.from_schema(TableAggregate(
            keys=["id"], group_by=["a"], aggregations=[Aggregation(agg="sum", column="b",
                                                                   as_="s")],
            event_time_column="ts", late_data=late_data), schema)

    drop, dlq = plan("drop"), plan("dlq")
    assert drop.fp != dlq.fp
    # The held updates are stored by position, in a different column order under each.
    assert drop.names != dlq.names
    held = key_step(drop, KeyRowsState.empty(*drop.state_schemas),
                    batch_of(drop, [{"id": 1, "b": 1000, "a": 7, "ts": at(1)}]), None)
    assert held.state.held.num_rows == 1 and held.output.num_rows == 0
    data = held.state.encode(drop.fp)
    with pytest.raises(StateVersionError):
        KeyRowsState.decode(data, dlq.fp, *dlq.state_schemas)
    state = KeyRowsState.decode(data, drop.fp, *drop.state_schemas)
    due = key_step(drop, state, drop.input_schema.empty_table(), _us(at(2)))
    out = group_step(drop, GroupsState.empty(*drop.group_state_schemas), due.output)
    assert [(r["a"], r["s"]) for r in out.output.to_pylist()] == [(7, 1000)]
