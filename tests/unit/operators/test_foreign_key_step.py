"""The foreign-key join without Spark: the step and the local runner against the oracle.

Seed 003's foreign-key table row by row (``inner``, ``left``), final vs eager, tombstones by
column and by all-NULL values, NULL keys and NULL foreign keys, late updates under drop and
dlq, restart from an encoded state, the replication of the right table into every key group,
random messy logs, and spec / plan errors. Times are seconds after 2026-01-01.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from typing import Any

import pyarrow as pa
import pytest
from interlace.operators.common.prepare import HOME_COLUMN, SIDE_COLUMN
from interlace.operators.foreign_key import ForeignKeyJoinPlan, step
from interlace.state import StateVersionError
from interlace.state.buffers import TIME_COLUMN
from interlace.state.foreign_key import (
    ForeignKeyState,
    decode_foreign_key_state,
    encode_foreign_key_state,
)

import interlace.testing.seed003_tables as seed
from interlace import ConfigError, ForeignKeyJoin
from interlace.testing.local import run_foreign_key_join_locally
from interlace.testing.log import JoinBatch, to_us
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles.foreign_key import oracle_foreign_key_join

BASE = dt.datetime(2026, 1, 1)
TS = pa.timestamp("ns")
LEFT = pa.schema([("k", pa.string()), ("fk", pa.int64()), ("event_time", TS)])
RIGHT = pa.schema([("fk", pa.int64()), ("v", pa.string()), ("event_time", TS)])
KW: dict[str, Any] = dict(seed.FOREIGN_KEY_KWARGS)
HOWS = {"inner": 4, "left": 5}  # the seed column of each how


def at(sec: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=sec)


def lr(k: Any, fk: Any, sec: float, **extra: Any) -> dict[str, Any]:
    """A left (order) row."""
    return {"k": k, "fk": fk, "event_time": at(sec), **extra}


def rr(fk: Any, v: Any, sec: float, **extra: Any) -> dict[str, Any]:
    """A right (product) row."""
    return {"fk": fk, "v": v, "event_time": at(sec), **extra}


def check(spec: ForeignKeyJoin, log: list[JoinBatch], left: pa.Schema = LEFT,
          right: pa.Schema = RIGHT) -> Any:
    """Local run == oracle, batch by batch, with the same counters; return the oracle's."""
    run = run_foreign_key_join_locally(spec, log, left, right)
    want = oracle_foreign_key_join(spec, log, left_columns=left.names, right_columns=right.names)
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


def batch_of(plan: ForeignKeyJoinPlan, rows: list[tuple[int, dict[str, Any]]],
             home: bool = True) -> pa.Table:
    """A prepared-input table of (side, row) pairs, in arrival order (right rows: ``home``)."""
    cols: dict[str, list[Any]] = {n: [] for n in plan.input_schema.names}
    for side, row in rows:
        cols[SIDE_COLUMN].append(side)
        cols[TIME_COLUMN].append(to_us(row["event_time"]) if row["event_time"] else None)
        cols[HOME_COLUMN].append(home or side == 0)
        for s, sd in enumerate(plan.sides):
            for name, internal in zip(sd.names, sd.payload.names, strict=True):
                cols[internal].append(row.get(name) if s == side else None)
    return pa.Table.from_pydict(cols, schema=plan.input_schema)


def empty_state(plan: ForeignKeyJoinPlan) -> ForeignKeyState:
    return ForeignKeyState.empty(plan.left_schema, plan.right_schema, plan.held_schema)


# ---- seed 003: KTable-KTable foreign-key join ---------------------------------------------


@pytest.mark.parametrize("how", list(HOWS))
@pytest.mark.parametrize("emit", ["final", "eager"])
@pytest.mark.parametrize("one_per_batch", [True, False])
@pytest.mark.parametrize("key_groups", [1, 3])
def test_seed003_foreign_key_matches_oracle_and_the_seed(how: str, emit: str,
                                                         one_per_batch: bool,
                                                         key_groups: int) -> None:
    spec = ForeignKeyJoin(how=how, emit=emit, key_groups=key_groups, **KW)
    want = check(spec, seed.foreign_key_log(one_per_batch=one_per_batch))
    for key in ("k", "q"):
        got = [(o.row["op"], o.row["left_fk"], o.row["right_v"]) for o in
               sorted(want.rows, key=lambda o: o.row["version"]) if o.row["k"] == key]
        expected = [(c.op, c.left, c.right) for entry in seed.FOREIGN_KEY
                    if (c := entry[HOWS[how]]) is not None and c.key == key]
        assert got == expected, key


@pytest.mark.parametrize("how", list(HOWS))
def test_seed003_eager_one_update_per_batch_emits_in_the_updates_batch(how: str) -> None:
    spec = ForeignKeyJoin(how=how, emit="eager", key_groups=2, **KW)
    run = run_foreign_key_join_locally(spec, seed.foreign_key_log(sentinel=False), LEFT, RIGHT)
    got = sorted((b, row["k"], row["op"], row["left_fk"], row["right_v"], row["version"])
                 for b, row in run.rows)
    want, versions = [], {"k": 0, "q": 0}
    for b, entry in enumerate(seed.FOREIGN_KEY):
        change = entry[HOWS[how]]
        if change is not None:
            want.append((b, change.key, change.op, change.left, change.right,
                         versions[change.key]))
            versions[change.key] += 1
    assert got == sorted(want)
    # Each row's event_time is the applied update's: the right update's for ts 4 and 8.
    assert all(row["event_time"] == seed.at(seed.FOREIGN_KEY[b][0]) for b, row in run.rows)


def test_seed003_inner_emits_kafkas_redundant_delete_at_ts3() -> None:
    spec = ForeignKeyJoin(how="inner", emit="eager", **KW)
    run = run_foreign_key_join_locally(spec, seed.foreign_key_log(sentinel=False), LEFT, RIGHT)
    ops = [(b, row["op"], row["version"]) for b, row in run.rows if row["k"] == "k"]
    # ts 2: k moves to the absent product 2 (delete); ts 3: to the absent 3 (delete again).
    assert (2, "delete", 1) in ops and (3, "delete", 2) in ops


def test_output_columns_keys_values_op_event_time_version() -> None:
    left = pa.schema([("oid", pa.int32()), ("pid", pa.int32()), ("qty", pa.int64()),
                      ("ts", TS)])
    right = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", TS)])
    spec = ForeignKeyJoin(left_keys=["oid"], foreign_key_columns=["pid"], right_keys=["id"],
                          event_time_column="ts", left_prefix="o_", right_prefix="p_",
                          late_data="dlq")
    plan = ForeignKeyJoinPlan.from_schemas(spec, left, right)
    assert plan.output_names == ("oid", "o_pid", "o_qty", "p_name", "op", "event_time",
                                 "version", "_dead_letter")
    assert plan.output_schema.field("oid").type == pa.int32()  # the left key's own type
    assert plan.fk_types == (pa.int64(),)  # int32 foreign key widened to the right key's


def test_widened_multi_column_foreign_key_and_a_foreign_key_outside_the_values() -> None:
    left = pa.schema([("oid", pa.string()), ("shop", pa.string()), ("pid", pa.int32()),
                      ("qty", pa.int64()), ("ts", TS)])
    right = pa.schema([("shop", pa.string()), ("id", pa.int64()), ("price", pa.float64()),
                       ("ts", TS)])
    spec = ForeignKeyJoin(left_keys=["oid"], foreign_key_columns=["shop", "pid"],
                          right_keys=["shop", "id"], how="left", emit="eager",
                          event_time_column="ts", left_value_columns=["qty"], key_groups=3)

    def o(oid: str, shop: Any, pid: Any, qty: int, sec: float) -> dict[str, Any]:
        return {"oid": oid, "shop": shop, "pid": pid, "qty": qty, "ts": at(sec)}

    def p(shop: Any, pid: Any, price: Any, sec: float) -> dict[str, Any]:
        return {"shop": shop, "id": pid, "price": price, "ts": at(sec)}

    log = [JoinBatch(left=(o("o1", "s", 1, 2, 1), o("o2", "t", 1, 3, 1), o("o3", "s", 1, 1, 2)),
                     right=(p("s", 1, 9.5, 0), p("t", 1, 1.0, 0))),
           JoinBatch(right=(p("s", 1, 8.0, 5),), left=(o("o2", "s", 1, 3, 5),)),
           JoinBatch(right=(p("s", 1, None, 6),), left=(o("o1", None, 1, 2, 7),))]
    want = check(spec, log, left, right)
    last = {o.row["oid"]: o.row for o in sorted(want.rows, key=lambda o: o.row["version"])}
    assert {k: (r["left_qty"], r["right_price"]) for k, r in last.items()} == {
        "o1": (2, None), "o2": (3, None), "o3": (1, None)}
    prices = [(o.batch, o.row["oid"], o.row["right_price"]) for o in want.rows]
    assert (1, "o1", 8.0) in prices and (1, "o2", 8.0) in prices and (1, "o3", 8.0) in prices


def test_tombstones_by_column_give_the_same_changelog_as_all_null_values() -> None:
    for how in HOWS:
        plain = check(ForeignKeyJoin(how=how, **KW), seed.foreign_key_log())
        log = seed.with_tombstone_column(seed.foreign_key_log(), "v", sides=("right",))
        # A flagged left tombstone keeps a foreign key to a present product: only the flag
        # can make it a delete.
        log = [JoinBatch(left=tuple({**r, "fk": 1, "deleted": True} if r["fk"] is None else
                                    {**r, "deleted": False} for r in b.left), right=b.right)
               for b in log]
        flag = pa.field("deleted", pa.bool_())
        marked = check(ForeignKeyJoin(how=how, tombstone_column="deleted", **KW), log,
                       LEFT.append(flag), RIGHT.append(flag))
        assert plain.rows and [(o.row["op"], o.row["version"]) for o in plain.rows] == \
            [(o.row["op"], o.row["version"]) for o in marked.rows]


def test_a_null_tombstone_flag_is_an_upsert_with_null_values() -> None:
    left = LEFT.append(pa.field("gone", pa.bool_()))
    log = [JoinBatch(right=(rr(1, "pen", 1),), left=(lr("a", 1, 2, gone=None),)),
           JoinBatch(right=(rr(1, None, 3),), left=(lr("a", 1, 4, gone=True),))]
    want = check(ForeignKeyJoin(how="inner", emit="eager", left_tombstone_column="gone", **KW),
                 log, left, RIGHT)
    # All-NULL right values: a tombstone (delete); then the flagged left tombstone deletes
    # the left row, Kafka's redundant delete for a join that was already absent.
    assert [(o.row["op"], o.row["right_v"], o.row["version"]) for o in want.rows] == [
        ("upsert", "pen", 0), ("delete", None, 1), ("delete", None, 2)]


def test_null_keys_are_ignored_and_counted_null_foreign_keys_join_nothing() -> None:
    left = LEFT.append(pa.field("qty", pa.int64()))
    log = [JoinBatch(left=(lr(None, 1, 1, qty=1), lr("a", None, 1, qty=2), lr("b", 1, 1, qty=3)),
                     right=(rr(None, "x", 1), rr(1, "pen", 1)))]
    for how, keys in (("inner", {"b"}), ("left", {"a", "b"})):
        want = check(ForeignKeyJoin(how=how, emit="eager", key_groups=3, **KW), log, left, RIGHT)
        assert want.null_key_dropped == {"left": 1, "right": 1}
        assert {o.row["k"] for o in want.rows} == keys
        assert all(o.row["right_v"] is None for o in want.rows if o.row["k"] == "a")
    # With the foreign key as the only value column, a NULL one is a tombstone (Kafka's null).
    log = [JoinBatch(left=(lr("a", 1, 1),), right=(rr(1, "pen", 1),)),
           JoinBatch(left=(lr("a", None, 2),))]
    want = check(ForeignKeyJoin(how="left", emit="eager", **KW), log)
    # ts 1: the left row first (left before right on ties: no product yet), then the product.
    assert [(o.row["op"], o.row["right_v"]) for o in want.rows] == [
        ("upsert", None), ("upsert", "pen"), ("delete", None)]


def test_a_right_update_touches_every_present_order_of_its_product_in_every_key_group() -> None:
    orders = tuple(lr(f"o{i}", i % 3, 1) for i in range(30))
    log = [JoinBatch(left=orders, right=(rr(0, "a", 0), rr(1, "b", 0))),
           JoinBatch(right=(rr(1, "B", 5),), left=(lr("o1", 2, 4), lr("o4", None, 6))),
           JoinBatch(right=(rr(1, None, 8),))]
    want = check(ForeignKeyJoin(how="inner", emit="eager", key_groups=4, **KW), log)
    touched = sorted(o.row["k"] for o in want.rows if o.batch == 1 and o.row["right_v"] == "B")
    # o1 moved to product 2 before the update (ts 4 < 5); o4 moved away after it (ts 6 > 5).
    assert touched == sorted(f"o{i}" for i in range(30) if i % 3 == 1 and i != 1)
    deletes = sorted(o.row["k"] for o in want.rows if o.batch == 2)
    assert deletes == sorted(f"o{i}" for i in range(30) if i % 3 == 1 and i not in (1, 4))


@pytest.mark.parametrize("late_data", ["drop", "dlq"])
def test_out_of_order_updates_are_late_per_table_and_key_under_eager(late_data: str) -> None:
    log = [JoinBatch(left=(lr("a", 1, 10),), right=(rr(1, "x", 5),)),
           JoinBatch(left=(lr("a", 1, 8), lr("b", 1, 1)), right=(rr(1, "y", 6), rr(2, "z", 1))),
           JoinBatch(right=(rr(1, "old", 4),))]
    spec = ForeignKeyJoin(how="left", emit="eager", late_data=late_data, key_groups=3,
                          **{**KW, "lateness_ms": 60_000})
    want = check(spec, log)
    n_late = want.dead_lettered if late_data == "dlq" else want.late_dropped
    assert n_late == {"left": 1, "right": 1}  # once per right update, not once per key group
    run = run_foreign_key_join_locally(spec, log, LEFT, RIGHT)
    letters = [json.loads(r["_dead_letter"]) for _, r in run.rows if r.get("_dead_letter")]
    assert len(letters) == (2 if late_data == "dlq" else 0)
    assert {(d["side"], d["row"].get("k") or d["row"].get("v")) for d in letters} <= {
        ("left", "a"), ("right", "old")}


def test_final_orders_out_of_order_updates_and_holds_until_the_watermark() -> None:
    spec = ForeignKeyJoin(how="inner", key_groups=2, **{**KW, "lateness_ms": 5_000})
    log = [JoinBatch(left=(lr("a", 1, 10),), right=(rr(1, "x2", 10),)),
           JoinBatch(right=(rr(1, "x1", 8),)),
           JoinBatch(left=(lr("z", 9, 40),), right=(rr(9, "S", 40),))]
    want = check(spec, log)
    # x1 (ts 8) arrived after x2 (ts 10) but is applied first; a (ts 10) joins x1, then x2.
    assert [(o.row["right_v"], o.row["version"]) for o in want.rows if o.row["k"] == "a"] == [
        ("x1", 0), ("x2", 1)]
    eager = check(ForeignKeyJoin(how="inner", emit="eager", key_groups=2,
                                 **{**KW, "lateness_ms": 5_000}), log)
    assert eager.late_dropped["right"] == 1  # under eager x1 comes after x2: late


def test_held_updates_and_their_deadline_under_final() -> None:
    plan = ForeignKeyJoinPlan.from_schemas(ForeignKeyJoin(how="inner", **KW), LEFT, RIGHT)
    res = step(plan, empty_state(plan), batch_of(plan, [(0, lr("a", 1, 5)), (1, rr(1, "x", 3))]),
               None)
    assert res.output.num_rows == 0 and res.next_due_us == to_us(at(3))
    assert res.counters == {"held_left": 1, "held_right": 1}
    res = step(plan, res.state, batch_of(plan, []), to_us(at(4)))
    assert res.output.num_rows == 0 and res.next_due_us == to_us(at(5))  # right applied, alone
    assert res.state.right.num_rows == 1 and res.counters == {"applied_right": 1}
    res = step(plan, res.state, batch_of(plan, []), to_us(at(5)) + 1)
    out = res.output.to_pylist()
    assert [(r["k"], r["op"], r["right_v"], r["event_time"]) for r in out] == [
        ("a", "upsert", "x", at(5))]
    assert res.next_due_us is None and res.state.held.num_rows == 0


def test_a_replicated_copy_is_applied_but_counted_only_in_its_home_key_group() -> None:
    spec = ForeignKeyJoin(how="left", emit="eager", late_data="dlq", **KW)
    plan = ForeignKeyJoinPlan.from_schemas(spec, LEFT, RIGHT)
    st = step(plan, empty_state(plan), batch_of(plan, [(0, lr("a", 1, 5)), (1, rr(1, "x", 5))]),
              None).state
    away = step(plan, st, batch_of(plan, [(1, rr(1, "y", 6)), (1, rr(1, "old", 1)),
                                          (1, rr(None, "n", 6))], home=False), None)
    home = step(plan, st, batch_of(plan, [(1, rr(1, "y", 6)), (1, rr(1, "old", 1)),
                                          (1, rr(None, "n", 6))]), None)
    # Both apply "y" to the right table and emit for their own left row ...
    for res in (away, home):
        assert [r["right_v"] for r in res.output.to_pylist() if r["op"]] == ["y"]
        assert res.state.right.to_pylist() == home.state.right.to_pylist()
    # ... but only the home copy counts and dead-letters the late and the NULL-key update.
    assert away.counters == {"upserts": 1}
    assert home.counters == {"applied_right": 1, "upserts": 1, "dead_lettered_right": 1,
                             "null_key_dropped_right": 1}
    assert sum(r["_dead_letter"] is not None for r in home.output.to_pylist()) == 1


def test_every_key_group_holds_the_whole_right_table() -> None:
    spec = ForeignKeyJoin(how="left", emit="eager", key_groups=4, **KW)
    plan = ForeignKeyJoinPlan.from_schemas(spec, LEFT, RIGHT)
    products = [(1, rr(p, f"p{p}", 1)) for p in range(50)]
    orders = [(0, lr(f"o{i}", i, 2)) for i in range(8)]
    groups = {g: [o for o in orders if hash((o[1]["k"],)) % 4 == g] for g in range(4)}
    states = {g: step(plan, empty_state(plan), batch_of(plan, products + rows), None).state
              for g, rows in groups.items()}
    assert all(s.right.num_rows == 50 for s in states.values())
    assert sum(s.left.num_rows for s in states.values()) == 8


def test_restart_from_encoded_state_mid_log_gives_the_uninterrupted_output() -> None:
    spec = ForeignKeyJoin(how="inner", late_data="dlq", **{**KW, "lateness_ms": 2_000})
    plan = ForeignKeyJoinPlan.from_schemas(spec, LEFT, RIGHT)
    rnd = random.Random(7)
    calls = [(b, to_us(at(100 + 3 * i)) if i else None) for i, b in enumerate(random_log(rnd, 8))]

    def run(restart_at: int | None) -> list[Any]:
        p, state, out = plan, empty_state(plan), []
        for i, (b, wm) in enumerate(calls):
            if i == restart_at:
                blob = encode_foreign_key_state(state, p.fp)
                p = ForeignKeyJoinPlan.from_schemas(ForeignKeyJoin(**{
                    f: getattr(spec, f) for f in spec.__dataclass_fields__}), LEFT, RIGHT)
                state = decode_foreign_key_state(blob, p.fp, p.left_schema, p.right_schema,
                                                 p.held_schema)
            rows = [(0, x) for x in b.left] + [(1, x) for x in b.right]
            res = step(p, state, batch_of(p, rows), wm)
            out.extend(res.output.to_pylist())
            state = res.state
        return out

    whole = run(None)
    assert whole and all(run(i) == whole for i in (1, 4, 7))


def test_a_changed_spec_fails_loudly_on_the_stored_state() -> None:
    plan = ForeignKeyJoinPlan.from_schemas(ForeignKeyJoin(how="left", **KW), LEFT, RIGHT)
    blob = encode_foreign_key_state(empty_state(plan), plan.fp)
    other = ForeignKeyJoinPlan.from_schemas(ForeignKeyJoin(how="inner", **KW), LEFT, RIGHT)
    with pytest.raises(StateVersionError, match="fingerprint"):
        decode_foreign_key_state(blob, other.fp, other.left_schema, other.right_schema,
                                 other.held_schema)


def random_log(rnd: random.Random, n_batches: int = 6, tombstones: bool = False
               ) -> list[JoinBatch]:
    log = []
    for b in range(n_batches):
        def jitter(b: int = b) -> float:
            return 100 + b * 3 + rnd.randint(-6, 4)

        def flag() -> dict[str, Any]:
            return {"deleted": rnd.choice([False, False, True, None])} if tombstones else {}

        left = tuple(lr(rnd.choice(["a", "b", "c", "d", None]), rnd.choice([1, 2, 3, None]),
                        jitter(), **flag()) for _ in range(rnd.randint(0, 4)))
        right = tuple(rr(rnd.choice([1, 2, 3, None]), rnd.choice([f"R{b}", f"S{b}", None]),
                         jitter(), **flag()) for _ in range(rnd.randint(0, 3)))
        log.append(JoinBatch(left=left, right=right))
    return log


@pytest.mark.parametrize("seed_", range(40))
@pytest.mark.parametrize("emit", ["final", "eager"])
def test_random_messy_logs_match_the_oracle(seed_: int, emit: str) -> None:
    rnd = random.Random(seed_)
    tombstones = rnd.random() < 0.3
    spec = ForeignKeyJoin(
        left_keys=["k"], foreign_key_columns=["fk"], right_keys=["fk"],
        event_time_column="event_time", how=rnd.choice(list(HOWS)), emit=emit,
        lateness_ms=rnd.choice([0, 2_000, 5_000]), late_data=rnd.choice(["drop", "dlq"]),
        dlq_horizon_ms=rnd.choice([3_000, 86_400_000]), key_groups=rnd.choice([1, 3]),
        tombstone_column="deleted" if tombstones else None)
    flag = [pa.field("deleted", pa.bool_())] if tombstones else []
    check(spec, random_log(rnd, rnd.randint(4, 9), tombstones),
          pa.schema([*LEFT, *flag]), pa.schema([*RIGHT, *flag]))


# ---- spec and plan errors ----------------------------------------------------------------


@pytest.mark.parametrize(("fields", "field"), [
    ({"left_keys": []}, "`left_keys`"),
    ({"foreign_key_columns": []}, "`foreign_key_columns`"),
    ({"foreign_key_columns": "fk"}, "`foreign_key_columns`"),
    ({"right_keys": ["fk", "v"]}, "`foreign_key_columns` and `right_keys`"),
    ({"foreign_key_columns": ["event_time"]}, "`foreign_key_columns`"),
    ({"how": "full"}, "`how`"),
    ({"emit": "lazy"}, "`emit`"),
    ({"late_data": "reopen"}, "`late_data`"),
    ({"lateness_ms": -1}, "`lateness_ms`"),
    ({"dlq_horizon_ms": 0}, "`dlq_horizon_ms`"),
    ({"event_time_column": None}, "`event_time_column`"),
    ({"left_value_columns": ["k"]}, "`left_value_columns`"),
    ({"right_value_columns": ["fk"]}, "`right_value_columns`"),
    ({"left_tombstone_column": "k"}, "`tombstone_column`"),
    ({"key_groups": 0}, "key_groups"),
    ({"right_prefix": None}, "`right_prefix`"),
])
def test_spec_errors_name_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        ForeignKeyJoin(**{**KW, **fields})
    assert field in str(err.value)


def test_reopen_is_a_config_error_that_names_the_fix() -> None:
    with pytest.raises(ConfigError, match="use late_data='drop'"):
        ForeignKeyJoin(late_data="reopen", **KW)


@pytest.mark.parametrize(("fields", "left", "right", "field"), [
    ({"foreign_key_columns": ["product"]}, LEFT, RIGHT, "`foreign_key_columns`"),
    ({}, LEFT, pa.schema([("fk", pa.string()), ("v", pa.string()), ("event_time", TS)]),
     "`foreign_key_columns` 'fk' (int64) and `right_keys` 'fk' (string)"),
    ({"right_keys": ["id"]}, LEFT, RIGHT, "`right_keys`"),
    ({"left_keys": ["order"]}, LEFT, RIGHT, "`left_keys`"),
    ({"right_tombstone_column": "gone"}, LEFT, RIGHT, "`right_tombstone_column`"),
    ({"right_tombstone_column": "v"}, LEFT, RIGHT, "must be a boolean column"),
    ({"left_prefix": "", "right_prefix": ""},
     LEFT, pa.schema([("fk", pa.int64()), ("k", pa.string()), ("event_time", TS)]),
     "appear twice"),
])
def test_plan_errors_name_the_field(fields: dict[str, Any], left: pa.Schema, right: pa.Schema,
                                    field: str) -> None:
    spec = ForeignKeyJoin(**{**KW, **fields})
    with pytest.raises(ConfigError) as err:
        ForeignKeyJoinPlan.from_schemas(spec, left, right)
    assert field in str(err.value)


def test_docs_foreign_key_page_examples_run() -> None:
    import doctest
    from pathlib import Path

    page = Path(__file__).resolve().parents[3] / "docs" / "foreign-key-join.md"
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5 and result.failed == 0
