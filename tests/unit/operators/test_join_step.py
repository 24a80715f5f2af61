"""Spark-free tests of the join's step and shim: explicit batches, explicit watermarks."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as hst
from interlace.operators.join import (
    SIDE_COLUMN,
    Join,
    JoinFunction,
    JoinPlan,
    frames_to_table,
    payload_sources,
    prepared_layout,
    step,
)
from interlace.state.buffers import TIME_COLUMN, JoinBuffers

from interlace.testing.local import FakeGroupState

BASE = dt.datetime(2026, 1, 1)
BASE_US = 1_767_225_600_000_000
LEFT = pa.schema([("k", pa.int64()), ("v", pa.string()), ("ts", pa.timestamp("ns"))])
RIGHT = pa.schema([("k", pa.int64()), ("w", pa.string()), ("ts", pa.timestamp("ns"))])


def spec(**kw):
    base = dict(left_keys=["k"], right_keys=["k"], time_window_ms=15_000, event_time_column="ts")
    base.update(kw)
    return Join(**base)


def batch(plan, rows):
    """rows: (side, key, value, seconds after BASE)."""
    cols = {n: [] for n in plan.input_schema.names}
    for side, k, v, sec in rows:
        cols[SIDE_COLUMN].append(side)
        cols[TIME_COLUMN].append(BASE_US + int(sec * 1_000_000))
        for i, p in enumerate("lr"):
            cols[f"__il_{p}0"].append(k if side == i else None)
            cols[f"__il_{p}1"].append(v if side == i else None)
            cols[f"__il_{p}2"].append(BASE + dt.timedelta(seconds=sec) if side == i else None)
    return pa.Table.from_pydict(cols, schema=plan.input_schema)


def frame_of(plan, rows):
    """``batch`` as Spark hands it to ``JoinFunction``: prepare_join's layout, as pandas."""
    return prepared_layout(plan, batch(plan, rows)).to_pandas()


def wm(sec):
    return BASE_US + int(sec * 1_000_000)


def pairs(result, plan):
    out = result.output.to_pylist()
    lv = "v" if plan.how in ("left_semi", "left_anti") else "left_v"
    if plan.how in ("left_semi", "left_anti"):
        return sorted(r[lv] for r in out)
    return sorted((r["left_v"], r["right_w"]) for r in out)


def empty(plan):
    return JoinBuffers.empty(plan.left_buffer_schema, plan.right_buffer_schema)


def test_each_matching_pair_emitted_once_in_the_call_of_its_second_row():
    plan = JoinPlan.from_schemas(spec(), LEFT, RIGHT)
    r1 = step(plan, empty(plan), batch(plan, [(0, 1, "A", 3)]), None)
    assert pairs(r1, plan) == []
    r2 = step(plan, r1.state, batch(plan, [(1, 1, "a", 4), (0, 1, "B", 5)]), None)
    # B (left, same call) meets the buffer first: no right rows yet; then a meets A and B.
    assert pairs(r2, plan) == [("A", "a"), ("B", "a")]
    r3 = step(plan, r2.state, batch(plan, [(1, 2, "x", 4)]), None)
    assert pairs(r3, plan) == []


def test_time_bound_is_inclusive_at_both_ends_and_asymmetric():
    plan = JoinPlan.from_schemas(spec(time_window_ms=None, lower_ms=-2_000, upper_ms=5_000), LEFT, RIGHT)
    st = step(plan, empty(plan), batch(plan, [(0, 1, "L", 10)]), None).state
    r = step(plan, st, batch(plan, [(1, 1, "r7.9", 7.999999), (1, 1, "r8", 8), (1, 1, "r15", 15),
                                    (1, 1, "r15+", 15.000001)]), None)
    assert pairs(r, plan) == [("L", "r15"), ("L", "r8")]


def test_null_keys_never_match_and_inner_counts_them():
    plan = JoinPlan.from_schemas(spec(), LEFT, RIGHT)
    r = step(plan, empty(plan), batch(plan, [(0, None, "A", 3), (1, None, "a", 3)]), None)
    assert r.output.num_rows == 0
    assert r.counters["null_key_dropped_left"] == 1
    assert r.counters["null_key_dropped_right"] == 1
    assert r.state.num_rows == 0


def test_left_join_emits_null_key_left_rows_immediately():
    plan = JoinPlan.from_schemas(spec(how="left"), LEFT, RIGHT)
    r = step(plan, empty(plan), batch(plan, [(0, None, "A", 3), (1, None, "a", 3)]), None)
    assert pairs(r, plan) == [("A", None)]
    assert r.counters["null_key_dropped_right"] == 1


def test_left_row_emitted_with_nulls_only_at_eviction_strictly_after_close():
    plan = JoinPlan.from_schemas(spec(how="left"), LEFT, RIGHT)
    st = step(plan, empty(plan), batch(plan, [(0, 1, "A", 3)]), None).state
    # close = 3 + 15 = 18 s: wm == close keeps the row.
    r = step(plan, st, batch(plan, []), wm(18))
    assert r.output.num_rows == 0 and r.state.left.num_rows == 1
    assert r.next_close_us == wm(18)
    r = step(plan, r.state, batch(plan, []), wm(18) + 1)
    assert pairs(r, plan) == [("A", None)]
    assert r.state.num_rows == 0 and r.next_close_us is None


def test_matched_left_row_is_never_emitted_null_padded():
    plan = JoinPlan.from_schemas(spec(how="full"), LEFT, RIGHT)
    st = step(plan, empty(plan), batch(plan, [(0, 1, "A", 3), (1, 1, "a", 4), (1, 1, "z", 30)]), None)
    assert pairs(st, plan) == [("A", "a")]
    r = step(plan, st.state, batch(plan, []), wm(100))
    # A and a matched; z (right, never matched) is emitted once at eviction.
    assert pairs(r, plan) == [(None, "z")]
    assert r.counters["unmatched_right"] == 1


def test_semi_emits_each_left_row_once_at_first_match_and_anti_at_eviction():
    semi = JoinPlan.from_schemas(spec(how="left_semi"), LEFT, RIGHT)
    r = step(semi, empty(semi), batch(semi, [(0, 1, "A", 3), (0, 1, "B", 40)]), None)
    assert pairs(r, semi) == []
    r = step(semi, r.state, batch(semi, [(1, 1, "a", 4), (1, 1, "b", 5)]), None)
    assert pairs(r, semi) == ["A"]
    r = step(semi, r.state, batch(semi, [(1, 1, "c", 6)]), None)
    assert pairs(r, semi) == []
    assert list(r.output.column_names) == ["k", "v", "ts"]

    anti = JoinPlan.from_schemas(spec(how="left_anti"), LEFT, RIGHT)
    r = step(anti, empty(anti), batch(anti, [(0, 1, "A", 3), (0, 1, "B", 40), (1, 1, "a", 4)]), None)
    assert pairs(r, anti) == []
    r = step(anti, r.state, batch(anti, []), wm(100))
    assert pairs(r, anti) == ["B"]


def test_late_rows_drop_reopen_and_dlq():
    rows = [(0, 1, "A", 3), (1, 1, "a", 4)]
    # wm = 30 s: A closes at 3 + 15 = 18 (+ AL) -> late under drop.
    drop = JoinPlan.from_schemas(spec(how="left"), LEFT, RIGHT)
    r = step(drop, empty(drop), batch(drop, rows), wm(30))
    assert r.output.num_rows == 0
    assert r.counters == {"late_dropped_left": 1, "late_dropped_right": 1}

    reopen = JoinPlan.from_schemas(spec(how="left", late_data="reopen", allowed_lateness_ms=20_000),
                                   LEFT, RIGHT)
    r = step(reopen, empty(reopen), batch(reopen, rows), wm(30))
    assert pairs(r, reopen) == [("A", "a")]

    dlq = JoinPlan.from_schemas(spec(how="inner", late_data="dlq"), LEFT, RIGHT)
    r = step(dlq, empty(dlq), batch(dlq, rows), wm(30))
    out = r.output.to_pylist()
    assert len(out) == 2 and all(o["left_v"] is None and o["right_w"] is None for o in out)
    letters = sorted((json.loads(o["_dead_letter"]) for o in out), key=lambda d: d["side"])
    assert letters[0] == {"side": "left", "reason": "late", "watermark": wm(30) // 1000,
                          "row": {"k": 1, "v": "A", "ts": "2026-01-01T00:00:03.000000"}}
    assert letters[1]["side"] == "right" and letters[1]["row"]["w"] == "a"
    assert r.counters == {"dead_lettered_left": 1, "dead_lettered_right": 1}


def test_multi_column_keys_of_different_integer_widths_match():
    left = pa.schema([("a", pa.int32()), ("b", pa.string()), ("ts", pa.timestamp("ns"))])
    right = pa.schema([("x", pa.int64()), ("y", pa.string()), ("ts", pa.timestamp("ns"))])
    plan = JoinPlan.from_schemas(
        Join(left_keys=["a", "b"], right_keys=["x", "y"], time_window_ms=1_000, event_time_column="ts"),
        left, right)
    t = pa.array([BASE] * 4, pa.timestamp("ns"))
    data = {
        SIDE_COLUMN: pa.array([0, 0, 1, 1], pa.int32()),
        TIME_COLUMN: pa.array([BASE_US] * 4, pa.int64()),
        "__il_l0": pa.array([1, 1, None, None], pa.int32()),
        "__il_l1": pa.array(["p", "q", None, None]),
        "__il_l2": pa.array([BASE, BASE, None, None], pa.timestamp("ns")),
        "__il_r0": pa.array([None, None, 1, 2], pa.int64()),
        "__il_r1": pa.array([None, None, "q", "p"]),
        "__il_r2": pa.array([None, None, BASE, BASE], pa.timestamp("ns")),
    }
    del t
    r = step(plan, empty(plan), pa.table(data, schema=plan.input_schema), None)
    assert [(o["left_b"], o["right_x"]) for o in r.output.to_pylist()] == [("q", 1)]


def test_many_keys_vectorised_match_equals_nested_loop():
    rng = np.random.default_rng(7)
    plan = JoinPlan.from_schemas(spec(time_window_ms=2_000), LEFT, RIGHT)
    rows = [(int(rng.integers(0, 2)), int(rng.integers(0, 20)), f"v{i}", float(rng.integers(0, 30)))
            for i in range(400)]
    r = step(plan, empty(plan), batch(plan, rows), None)
    got = sorted((o["left_v"], o["right_w"]) for o in r.output.to_pylist())
    lefts = [x for x in rows if x[0] == 0]
    rights = [x for x in rows if x[0] == 1]
    want = sorted((lv[2], rv[2]) for lv in lefts for rv in rights
                  if lv[1] == rv[1] and -2 <= rv[3] - lv[3] <= 2)
    assert got == want and len(want) > 50


def test_shim_sets_one_timeout_at_earliest_close_in_spark_domain():
    s = spec(how="left", late_data="reopen", lateness_ms=1_000, allowed_lateness_ms=4_000)
    plan = JoinPlan.from_schemas(s, LEFT, RIGHT)
    func = JoinFunction(plan)
    st = FakeGroupState(watermark_ms=0)
    frame = frame_of(plan, [(0, 1, "A", 3), (0, 1, "B", 10)])
    assert list(func((0,), iter([frame]), st)) == []
    # close(A) = 3 + 15 + 4 s; Spark domain subtracts H = 4 s -> BASE + 18 s.
    assert st.timeout_ms == BASE_US // 1000 + 18_000
    st.watermark_ms = st.timeout_ms + 1  # Spark fires: W > timeout, i.e. wm > close(A)
    st.timed_out = True
    out = list(func((0,), iter([]), st))
    assert [r["left_v"] for r in out[0].to_dict("records")] == ["A"]
    assert st.timeout_ms == BASE_US // 1000 + 25_000


def test_shim_removes_state_when_buffers_empty():
    plan = JoinPlan.from_schemas(spec(how="inner"), LEFT, RIGHT)
    func = JoinFunction(plan)
    st = FakeGroupState(watermark_ms=BASE_US // 1000 + 100_000)
    frame = frame_of(plan, [(0, 1, "A", 3)])
    list(func((0,), iter([frame]), st))
    assert not st.exists and st.timeout_ms == -1


def test_changed_spec_fails_loudly_on_restart():
    from interlace.state.errors import StateVersionError

    plan = JoinPlan.from_schemas(spec(how="inner"), LEFT, RIGHT)
    st = FakeGroupState()
    list(JoinFunction(plan)((0,), iter([frame_of(plan, [(0, 1, "A", 3)])]), st))
    other = JoinPlan.from_schemas(spec(how="inner", time_window_ms=60_000), LEFT, RIGHT)
    with pytest.raises(StateVersionError, match="different spec"):
        list(JoinFunction(other)((0,), iter([]), st))


def test_null_event_time_rows_are_counted_or_dead_lettered_never_buffered():
    plan = JoinPlan.from_schemas(spec(how="full"), LEFT, RIGHT)
    b = batch(plan, [(0, 1, "A", 3), (1, 1, "a", 4)])
    t = b.column(TIME_COLUMN).to_pylist()
    b = b.set_column(b.schema.get_field_index(TIME_COLUMN), TIME_COLUMN,
                     pa.array([None, t[1]], pa.int64()))
    r = step(plan, empty(plan), b, wm(1))
    assert r.output.num_rows == 0 and r.state.left.num_rows == 0 and r.state.right.num_rows == 1
    assert r.counters["null_event_time_dropped_left"] == 1
    dlq = JoinPlan.from_schemas(spec(how="full", late_data="dlq"), LEFT, RIGHT)
    r = step(dlq, empty(dlq), b, wm(1))
    (letter,) = [json.loads(o["_dead_letter"]) for o in r.output.to_pylist()]
    assert letter["reason"] == "null_event_time" and letter["row"]["v"] == "A"


def test_negative_zero_float_keys_equal_positive_zero():
    left = pa.schema([("k", pa.float64()), ("v", pa.string()), ("ts", pa.timestamp("ns"))])
    right = pa.schema([("k", pa.float64()), ("w", pa.string()), ("ts", pa.timestamp("ns"))])
    plan = JoinPlan.from_schemas(spec(), left, right)
    r = step(plan, empty(plan), batch(plan, [(0, -0.0, "A", 3), (1, 0.0, "a", 4)]), None)
    assert [(o["left_v"], o["right_w"]) for o in r.output.to_pylist()] == [("A", "a")]


def test_decimal_keys_widen_as_decimals_not_doubles():
    import decimal

    left = pa.schema([("k", pa.decimal128(38, 0)), ("v", pa.string()), ("ts", pa.timestamp("ns"))])
    right = pa.schema([("k", pa.int64()), ("w", pa.string()), ("ts", pa.timestamp("ns"))])
    plan = JoinPlan.from_schemas(spec(), left, right)
    assert plan.key_types == (pa.decimal128(38, 0),)
    big = 2**62 + 1  # as doubles, 2**62 and 2**62 + 1 are equal
    cols = {n: [] for n in plan.input_schema.names}
    for side, k, v in ((0, decimal.Decimal(big), "A"), (1, 2**62, "x"), (1, big, "a")):
        cols[SIDE_COLUMN].append(side)
        cols[TIME_COLUMN].append(BASE_US)
        cols["__il_l0"].append(k if side == 0 else None)
        cols["__il_l1"].append(v if side == 0 else None)
        cols["__il_l2"].append(BASE if side == 0 else None)
        cols["__il_r0"].append(k if side == 1 else None)
        cols["__il_r1"].append(v if side == 1 else None)
        cols["__il_r2"].append(BASE if side == 1 else None)
    r = step(plan, empty(plan), pa.Table.from_pydict(cols, schema=plan.input_schema), None)
    assert [(o["left_v"], o["right_w"]) for o in r.output.to_pylist()] == [("A", "a")]


def test_payload_sources_share_slots_by_type_and_read_event_times_from_il_t():
    left, right = payload_sources(["long", "ts", "str", "str"], ["str", "ts", "dbl", "long", "str",
                                                                  "str"], 1, 1)
    assert left == ("__il_s0", "__il_t", "__il_s1", "__il_s2")
    # The right's strings take the left's string slots in order, then a new one; the double
    # has no left partner.
    assert right == ("__il_s1", "__il_t", "__il_s3", "__il_s0", "__il_s2", "__il_s4")
    # Without an event-time column among the payload (or another type), nothing is dropped.
    assert payload_sources(["ts"], ["ts"], None, None) == (("__il_s0",), ("__il_s0",))


@given(hst.lists(hst.sampled_from("abc"), max_size=6), hst.lists(hst.sampled_from("abc"), max_size=6),
       hst.data())
def test_payload_sources_never_share_within_a_side_or_across_types(lt, rt, data):
    let = data.draw(hst.sampled_from([None, *range(len(lt))]))
    ret = data.draw(hst.sampled_from([None, *range(len(rt))]))
    left, right = payload_sources(lt, rt, let, ret)
    for src, et in ((left, let), (right, ret)):
        slots = [s for i, s in enumerate(src) if i != et]
        assert len(set(slots)) == len(slots) and "__il_t" not in slots
        assert et is None or src[et] == "__il_t"
    lslot = {s: lt[i] for i, s in enumerate(left)}
    for j, s in enumerate(right):
        if s in lslot and s != "__il_t":
            assert lslot[s] == rt[j]
    n_slots = len({*left, *right} - {"__il_t"})
    # As few slots as sharing allows: per type, the larger side's count.
    want = sum(max(sum(1 for i, t in enumerate(lt) if t == k and i != let),
                   sum(1 for j, t in enumerate(rt) if t == k and j != ret)) for k in "abc")
    assert n_slots == want


def test_prepared_layout_is_the_inverse_of_frames_to_table():
    plan = JoinPlan.from_schemas(spec(how="full"), LEFT, RIGHT)
    b = batch(plan, [(0, 1, "A", 3), (1, 2, "B", 4), (1, None, None, 5), (0, 7, "C", 6)])
    prepared = prepared_layout(plan, b)
    assert prepared.column_names == ["__il_side", "__il_tus", "__il_s0", "__il_s1", "__il_t"]
    got = frames_to_table(plan.input_schema, iter([prepared.to_pandas()]), plan.input_sources)
    for s in (0, 1):
        mask = pa.array([x == s for x in b.column(SIDE_COLUMN).to_pylist()])
        own = plan.left_payload.names if s == 0 else plan.right_payload.names
        cols = [SIDE_COLUMN, TIME_COLUMN, *own]
        assert got.filter(mask).select(cols).equals(b.filter(mask).select(cols))


def test_a_large_buffer_is_narrowed_to_the_keys_that_may_match_with_the_same_answer(
    monkeypatch,
):
    """20,000 buffered rows per side on a two-column key whose types differ across the sides
    (int32 / int64, string), then micro-batches of a few hundred rows: the calls narrow the
    other side's buffer (default thresholds; issue 34) and give the oracle's rows, as the
    calls matching the whole buffer do (the properties hold both against the oracle on
    small logs)."""
    import importlib
    import random

    from interlace.testing.local import run_join_locally
    from interlace.testing.log import JoinBatch
    from interlace.testing.oracle import canonical_rows

    step_module = importlib.import_module("interlace.operators.join.step")
    rnd = random.Random(34)
    left = pa.schema([("a", pa.int32()), ("b", pa.string()), ("x", pa.int64()),
                      ("ts", pa.timestamp("ns"))])
    right = pa.schema([("a", pa.int64()), ("b", pa.string()), ("y", pa.int64()),
                       ("ts", pa.timestamp("ns"))])
    keys = [(i % 700, f"s{i % 30}") for i in range(3_000)]

    def row(k, v, sec):
        return {"a": k[0], "b": k[1], "x": v, "y": v, "ts": BASE + dt.timedelta(seconds=sec)}

    log = [JoinBatch(left=[row(rnd.choice(keys), i, rnd.uniform(0, 50)) for i in range(20_000)],
                     right=[row(rnd.choice(keys), i, rnd.uniform(0, 50)) for i in range(20_000)])]
    for b in range(1, 5):
        log.append(JoinBatch(
            left=[row(rnd.choice(keys), -j, 50 + b + rnd.random()) for j in range(200)],
            right=[row(rnd.choice(keys), -j, 50 + b + rnd.random()) for j in range(200)]))
    join = Join(left_keys=["a", "b"], right_keys=["a", "b"], how="left", lower_ms=-2_000,
                upper_ms=2_000, event_time_column="ts", lateness_ms=100_000, key_groups=1)
    narrowed = []
    candidates = step_module._candidates

    def spy(*args):
        rows = candidates(*args)
        narrowed.append(rows is not None)
        return rows

    monkeypatch.setattr(step_module, "_candidates", spy)
    runs = {}
    for forced_whole in (False, True):
        if forced_whole:
            monkeypatch.setattr(step_module, "_NARROW_MIN_ROWS", 10**12)
        narrowed.clear()
        run = run_join_locally(join, log, left, right)
        assert any(narrowed) != forced_whole, narrowed
        runs[forced_whole] = run
    got, want = ({b: canonical_rows([r for bb, r in run.rows if bb == b]) for b in range(5)}
                 for run in (runs[False], runs[True]))
    assert got == want
    assert sum(len(rows) for rows in got.values()) > 10_000  # pairs, and unmatched rows
