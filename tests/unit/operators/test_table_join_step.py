"""The table-table join without Spark: the step and the local runner against the oracle.

Seed 003's KTable-KTable table row by row (``inner``, ``left``, ``full``), final vs eager,
tombstones by column and by all-NULL values, NULL keys, late updates under drop and dlq,
restart from an encoded state, random messy logs, and spec / plan errors. Times are seconds
after 2026-01-01.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pyarrow as pa
import pytest

import interlace.testing.seed003_tables as seed
from interlace import ConfigError, TableJoin
from interlace.operators.common.prepare import SIDE_COLUMN
from interlace.operators.table import TableJoinPlan, step
from interlace.state import StateVersionError
from interlace.state.buffers import TIME_COLUMN
from interlace.state.table_join import (
    TableJoinState,
    decode_table_join_state,
    encode_table_join_state,
)
from interlace.testing.local import run_table_join_locally
from interlace.testing.log import JoinBatch, to_us
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles.table import oracle_table_join

BASE = dt.datetime(2026, 1, 1)
TS = pa.timestamp("ns")
KV = pa.schema([("k", pa.string()), ("v", pa.string()), ("event_time", TS)])
KW: dict[str, Any] = dict(seed.TABLE_TABLE_KWARGS)


def at(sec: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=sec)


def r(k: Any, v: Any, sec: float, **extra: Any) -> dict[str, Any]:
    return {"k": k, "v": v, "event_time": at(sec), **extra}


def check(spec: TableJoin, log: list[JoinBatch], left: pa.Schema = KV,
          right: pa.Schema = KV) -> Any:
    """Local run == oracle, batch by batch, with the same counters; return the oracle's."""
    run = run_table_join_locally(spec, log, left, right)
    want = oracle_table_join(spec, log, left_columns=left.names, right_columns=right.names)
    got: dict[int, list[dict[str, Any]]] = {}
    for b, row in run.rows:
        got.setdefault(b, []).append(row)
    want_by = want.rows_by_batch()
    assert run.watermarks_ms == want.spark_watermarks_ms
    for b in sorted(set(got) | set(want_by)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(want_by.get(b, [])), f"batch {b}"
    for side in ("left", "right"):
        c = run.counters
        assert c.get(f"late_dropped_{side}", 0) == want.late_dropped[side], side
        assert c.get(f"dead_lettered_{side}", 0) == want.dead_lettered[side], side
        assert c.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped[side], side
    assert run.spark_dropped == sum(want.spark_dropped.values())
    return want


def batch_of(plan: TableJoinPlan, rows: list[tuple[int, dict[str, Any]]]) -> pa.Table:
    """A prepared-input table of (side, row) pairs, in arrival order."""
    cols: dict[str, list[Any]] = {n: [] for n in plan.input_schema.names}
    for side, row in rows:
        cols[SIDE_COLUMN].append(side)
        cols[TIME_COLUMN].append(to_us(row["event_time"]) if row["event_time"] else None)
        for s, sd in enumerate(plan.sides):
            for name, internal in zip(sd.names, sd.payload.names, strict=True):
                cols[internal].append(row.get(name) if s == side else None)
    return pa.Table.from_pydict(cols, schema=plan.input_schema)


# ---- seed 003: KTable-KTable -------------------------------------------------------------

HOWS = {"inner": 3, "left": 4, "full": 5}  # the seed column of each how


@pytest.mark.parametrize("how", list(HOWS))
@pytest.mark.parametrize("emit", ["final", "eager"])
@pytest.mark.parametrize("one_per_batch", [True, False])
def test_seed003_ktable_ktable_matches_oracle_and_the_seed(how: str, emit: str,
                                                           one_per_batch: bool) -> None:
    spec = TableJoin(how=how, emit=emit, **KW)
    want = check(spec, seed.table_table_log(one_per_batch=one_per_batch))
    got = [(o.row["op"], o.row["left_v"], o.row["right_v"]) for o in
           sorted(want.rows, key=lambda o: o.row["version"]) if o.row["k"] == seed.KEY]
    expected = [(c.op, c.left, c.right) for entry in seed.TABLE_TABLE
                if (c := entry[HOWS[how]]) is not None]
    assert got == expected


@pytest.mark.parametrize("how", list(HOWS))
def test_seed003_eager_one_update_per_batch_emits_in_the_updates_batch(how: str) -> None:
    spec = TableJoin(how=how, emit="eager", **KW)
    run = run_table_join_locally(spec, seed.table_table_log(sentinel=False), KV, KV)
    got = [(b, row["op"], row["left_v"], row["right_v"], row["version"]) for b, row in run.rows]
    want, version = [], 0
    for b, entry in enumerate(seed.TABLE_TABLE):
        change = entry[HOWS[how]]
        if change is not None:
            want.append((b, change.op, change.left, change.right, version))
            version += 1
    assert got == want
    assert all(row["event_time"] == seed.at(seed.TABLE_TABLE[b][0]) for b, row in run.rows)


def test_output_columns_keys_values_op_event_time_version() -> None:
    left = pa.schema([("id", pa.int32()), ("a", pa.string()), ("ts", TS)])
    right = pa.schema([("rid", pa.int64()), ("b", pa.float64()), ("ts", TS)])
    spec = TableJoin(left_keys=["id"], right_keys=["rid"], how="full", event_time_column="ts",
                     left_prefix="L_", right_prefix="R_", late_data="dlq")
    plan = TableJoinPlan.from_schemas(spec, left, right)
    assert plan.output_names == ("id", "L_a", "R_b", "op", "event_time", "version",
                                 "_dead_letter")
    assert plan.output_schema.field("id").type == pa.int64()  # the common key type


def test_tombstones_by_column_give_the_same_changelog_as_all_null_values() -> None:
    for how in HOWS:
        plain = check(TableJoin(how=how, **KW), seed.table_table_log())
        log = seed.with_tombstone_column(seed.table_table_log(), "v")
        marked = check(TableJoin(how=how, tombstone_column="deleted", **KW), log,
                       KV.append(pa.field("deleted", pa.bool_())),
                       KV.append(pa.field("deleted", pa.bool_())))
        assert [(o.row["op"], o.row["version"]) for o in plain.rows] == \
            [(o.row["op"], o.row["version"]) for o in marked.rows]


def test_null_keys_are_ignored_and_counted_signed_zero_keys_equal() -> None:
    log = [JoinBatch(left=(r(None, "x", 1), r("a", "A", 1)), right=(r(None, "y", 2),))]
    want = check(TableJoin(how="full", emit="eager", **KW), log)
    assert want.null_key_dropped == {"left": 1, "right": 1}
    f = pa.schema([("k", pa.float64()), ("v", pa.string()), ("event_time", TS)])
    # NaN keys are not tested here: PySpark hands keys to Python as pandas, where NaN and
    # NULL are one value (docs/table-joins.md, "Known limits").
    log = [JoinBatch(right=(r(-0.0, "z", 3),), left=(r(0.0, "Z", 3),))]
    want = check(TableJoin(how="inner", emit="eager", **KW), log, f, f)
    assert [(o.row["left_v"], o.row["right_v"]) for o in want.rows] == [("Z", "z")]


@pytest.mark.parametrize("late_data", ["drop", "dlq"])
def test_out_of_order_updates_are_late_per_key_and_table_under_eager(late_data: str) -> None:
    log = [JoinBatch(left=(r("a", "A2", 10),), right=(r("a", "x", 5),)),
           JoinBatch(left=(r("a", "A1", 8), r("b", "B", 1)), right=(r("a", "y", 6),)),
           JoinBatch(right=(r("a", "old", 4),))]
    want = check(TableJoin(how="full", emit="eager", late_data=late_data,
                           **{**KW, "lateness_ms": 60_000}), log)
    n_late = want.dead_lettered if late_data == "dlq" else want.late_dropped
    assert n_late == {"left": 1, "right": 1}


def test_final_orders_out_of_order_updates_and_holds_until_the_watermark() -> None:
    spec = TableJoin(how="full", **{**KW, "lateness_ms": 5_000})
    log = [JoinBatch(left=(r("a", "A2", 10),), right=(r("s", "S", 10),)),
           JoinBatch(left=(r("a", "A1", 8),)),
           JoinBatch(left=(r("t", "T", 40),), right=(r("s", "S", 40),))]
    want = check(spec, log)
    assert [o.row["left_v"] for o in want.rows if o.row["k"] == "a"] == ["A1", "A2"]


def test_held_updates_and_their_deadline_under_final() -> None:
    spec = TableJoin(how="inner", **KW)
    plan = TableJoinPlan.from_schemas(spec, KV, KV)
    state = TableJoinState.empty(plan.keys_schema, plan.held_schema)
    res = step(plan, state, batch_of(plan, [(0, r("a", "A", 5)), (1, r("a", "x", 3))]), None)
    assert res.output.num_rows == 0 and res.next_due_us == to_us(at(3))
    assert res.counters == {"held_left": 1, "held_right": 1}
    res = step(plan, res.state, batch_of(plan, []), to_us(at(4)))
    assert res.output.num_rows == 0 and res.next_due_us == to_us(at(5))  # right applied, alone
    res = step(plan, res.state, batch_of(plan, []), to_us(at(5)) + 1)
    assert res.output.to_pylist()[0]["op"] == "upsert" and res.next_due_us is None


def test_restart_from_encoded_state_mid_log_gives_the_uninterrupted_output() -> None:
    spec = TableJoin(how="full", late_data="dlq", **{**KW, "lateness_ms": 2_000})
    plan = TableJoinPlan.from_schemas(spec, KV, KV)
    rnd = random.Random(7)
    calls = [(b, to_us(at(100 + 3 * i)) if i else None) for i, b in enumerate(random_log(rnd, 8))]

    def run(restart_at: int | None) -> list[Any]:
        p, state, out = plan, TableJoinState.empty(plan.keys_schema, plan.held_schema), []
        for i, (b, wm) in enumerate(calls):
            if i == restart_at:
                blob = encode_table_join_state(state, p.fp)
                p = TableJoinPlan.from_schemas(TableJoin(**{
                    f: getattr(spec, f) for f in spec.__dataclass_fields__}), KV, KV)
                state = decode_table_join_state(blob, p.fp, p.keys_schema, p.held_schema)
            rows = [(0, x) for x in b.left] + [(1, x) for x in b.right]
            res = step(p, state, batch_of(p, rows), wm)
            out.extend(res.output.to_pylist())
            state = res.state
        return out

    whole = run(None)
    assert whole and all(run(i) == whole for i in (1, 4, 7))


def test_a_changed_spec_fails_loudly_on_the_stored_state() -> None:
    plan = TableJoinPlan.from_schemas(TableJoin(how="full", **KW), KV, KV)
    blob = encode_table_join_state(
        TableJoinState.empty(plan.keys_schema, plan.held_schema), plan.fp)
    other = TableJoinPlan.from_schemas(TableJoin(how="inner", **KW), KV, KV)
    with pytest.raises(StateVersionError, match="fingerprint"):
        decode_table_join_state(blob, other.fp, other.keys_schema, other.held_schema)


def random_log(rnd: random.Random, n_batches: int = 6) -> list[JoinBatch]:
    log = []
    for b in range(n_batches):
        def rows(tag: str) -> tuple[dict[str, Any], ...]:
            return tuple(r(rnd.choice(["a", "b", "c", None]), rnd.choice([f"{tag}{b}", None]),
                           100 + b * 3 + rnd.randint(-6, 4)) for _ in range(rnd.randint(0, 4)))
        log.append(JoinBatch(left=rows("L"), right=rows("R")))
    return log


@pytest.mark.parametrize("seed_", range(40))
@pytest.mark.parametrize("emit", ["final", "eager"])
def test_random_messy_logs_match_the_oracle(seed_: int, emit: str) -> None:
    rnd = random.Random(seed_)
    spec = TableJoin(
        left_keys=["k"], right_keys=["k"], event_time_column="event_time",
        how=rnd.choice(list(HOWS)), emit=emit, lateness_ms=rnd.choice([0, 2_000, 5_000]),
        late_data=rnd.choice(["drop", "dlq"]), dlq_horizon_ms=rnd.choice([3_000, 86_400_000]),
        key_groups=rnd.choice([1, 3]))
    check(spec, random_log(rnd))


# ---- spec and plan errors ----------------------------------------------------------------


@pytest.mark.parametrize(("fields", "field"), [
    ({"left_keys": []}, "`left_keys`"),
    ({"right_keys": ["k", "v"]}, "`left_keys` and `right_keys`"),
    ({"how": "outer"}, "`how`"),
    ({"emit": "lazy"}, "`emit`"),
    ({"late_data": "reopen"}, "`late_data`"),
    ({"lateness_ms": -1}, "`lateness_ms`"),
    ({"dlq_horizon_ms": 0}, "`dlq_horizon_ms`"),
    ({"event_time_column": None}, "`event_time_column`"),
    ({"value_columns": ["k"]}, "`value_columns`"),
    ({"right_value_columns": ["event_time"]}, "`right_value_columns`"),
    ({"left_tombstone_column": "k"}, "`tombstone_column`"),
    ({"key_groups": 0}, "key_groups"),
    ({"right_prefix": None}, "`right_prefix`"),
])
def test_spec_errors_name_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        TableJoin(**{**KW, **fields})
    assert field in str(err.value)


@pytest.mark.parametrize(("fields", "right", "field"), [
    ({"right_keys": ["id"]}, KV, "`right_keys`"),
    ({"right_tombstone_column": "gone"}, KV, "`right_tombstone_column`"),
    ({"tombstone_column": "v"}, KV, "`tombstone_column`"),  # not boolean
    ({"left_prefix": "", "right_prefix": ""}, KV, "appear twice"),
])
def test_plan_errors_name_the_field(fields: dict[str, Any], right: pa.Schema, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        TableJoinPlan.from_schemas(TableJoin(**{**KW, **fields}), KV, right)
    assert field in str(err.value)


def test_docs_table_join_page_examples_run() -> None:
    import doctest
    from pathlib import Path

    page = Path(__file__).resolve().parents[3] / "docs" / "table-join.md"
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5 and result.failed == 0


def test_a_side_never_updated_stays_no_version_in_the_state():
    # The left side of key k is updated in two calls, the right never: the stored right side
    # stays NULL ("no version"), not a tombstone at the epoch, which `interlace inspect` would
    # report as a right tombstone of 1970 (and §9 would judge a later right update late
    # against it, were Spark not to drop rows at or before the epoch first).
    spec = TableJoin(left_keys=["k"], right_keys=["k"], event_time_column="event_time",
                     how="full", emit="eager", key_groups=1)
    log = [JoinBatch(left=(r("k", "A", 1),)), JoinBatch(left=(r("k", "B", 2),)),
           JoinBatch(right=(r("k", "a", 3),))]
    check(spec, log)
    plan = TableJoinPlan.from_schemas(spec, KV, KV)
    state = TableJoinState.empty(*plan.state_schemas)
    from interlace.operators.table.plan import SIDE_DELETED, SIDE_TIME

    for b in log[:2]:
        state = step(plan, state, batch_of(plan, [(0, row) for row in b.left]), None).state
        assert state.keys.column(SIDE_TIME[1]).to_pylist() == [None]
        assert state.keys.column(SIDE_DELETED[1]).to_pylist() == [None]
    state = step(plan, state, batch_of(plan, [(1, row) for row in log[2].right]), None).state
    assert state.keys.column(SIDE_TIME[1]).to_pylist() == [to_us(at(3))]
