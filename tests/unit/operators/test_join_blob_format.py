"""The join's blob format 2 through the function Spark calls (issue 13): the stored buffers
leave out ``__il_tus`` and get it back from the event-time column, and a version-1 blob, as
the previous release stored it, continues in the same calls."""

from __future__ import annotations

import datetime as dt

import msgpack
import pyarrow as pa
from interlace.operators.join import JoinFunction, JoinPlan, prepared_layout
from interlace.operators.join.plan import SIDE_COLUMN
from interlace.state import blob
from interlace.state.buffers import TIME_COLUMN, decode_join_state, ipc_to_table, table_to_ipc

from interlace import Join
from interlace.testing.local import FakeGroupState

BASE = dt.datetime(2026, 1, 1)
BASE_US = 1_767_225_600_000_000
# The event-time column is not the last one on either side, and the right has two timestamps.
LEFT = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("ns")), ("v", pa.string())])
RIGHT = pa.schema([("created", pa.timestamp("ns")), ("k", pa.int64()), ("w", pa.string()),
                   ("ts", pa.timestamp("ns"))])


def plan_of(how="full"):
    return JoinPlan.from_schemas(Join(left_keys=["k"], right_keys=["k"], how=how,
                                      time_window_ms=15_000, event_time_column="ts"), LEFT, RIGHT)


def frame(plan, rows):
    """rows: (side, key, value, seconds after BASE) as Spark hands them to the function."""
    cols = {n: [] for n in plan.input_schema.names}
    for side, k, v, sec in rows:
        t = BASE + dt.timedelta(seconds=sec)
        cols[SIDE_COLUMN].append(side)
        cols[TIME_COLUMN].append(BASE_US + int(sec * 1_000_000))
        left = {"__il_l0": k, "__il_l1": t, "__il_l2": v}
        right = {"__il_r0": BASE, "__il_r1": k, "__il_r2": v, "__il_r3": t}
        for name, value in (left | right).items():
            cols[name].append(value if (name[5] == "l") == (side == 0) else None)
    table = pa.Table.from_pydict(cols, schema=plan.input_schema)
    return prepared_layout(plan, table).to_pandas()


def envelope(state):
    return msgpack.unpackb(state.value[0], raw=False)


def test_the_plan_names_each_sides_event_time_column_in_its_payload():
    assert plan_of().time_columns == ("__il_l1", "__il_r3")


def test_stored_buffers_leave_out_the_event_time_in_us_and_continue_the_same():
    plan = plan_of()
    func = JoinFunction(plan)
    st = FakeGroupState(watermark_ms=0)
    list(func((0,), iter([frame(plan, [(0, 1, "A", 3), (0, 2, "B", 4), (1, 2, "b", 9)])]), st))
    env = envelope(st)
    assert env["v"] == blob.CURRENT_VERSION == 3
    assert env["body"]["times"] == {"left": "__il_l1", "right": "__il_r3"}
    for side in ("left", "right"):
        assert ipc_to_table(env["body"][side]).column_names[0] == "__il_m"
    buffers = decode_join_state(st.value[0], plan.fp, plan.left_buffer_schema,
                                plan.right_buffer_schema)
    assert buffers.left.column(TIME_COLUMN).to_pylist() == [BASE_US + 3_000_000,
                                                           BASE_US + 4_000_000]
    assert buffers.right.column(TIME_COLUMN).to_pylist() == [BASE_US + 9_000_000]
    # A later call matches against the decoded buffers and evicts by the recomputed times.
    out = list(func((0,), iter([frame(plan, [(1, 1, "a", 10)])]), st))
    assert [(r["left_v"], r["right_w"]) for r in out[0].to_dict("records")] == [("A", "a")]


def test_a_side_whose_event_time_column_does_not_give_the_us_back_keeps_it():
    # Outside a UTC session the payload holds local wall-clock times, which are not __il_tus:
    # the blob then keeps __il_tus for that side, and decodes to the same buffers.
    plan = plan_of()
    func = JoinFunction(plan)
    st = FakeGroupState(watermark_ms=0)
    f = frame(plan, [(0, 1, "A", 3), (1, 9, "z", 4)])
    f["__il_t"] = f["__il_t"] + dt.timedelta(hours=1)  # the session's zone: UTC+1
    list(func((0,), iter([f]), st))
    env = envelope(st)
    assert env["body"]["times"] == {"left": None, "right": None}
    assert ipc_to_table(env["body"]["left"]).column_names[:2] == [TIME_COLUMN, "__il_m"]
    buffers = decode_join_state(st.value[0], plan.fp, plan.left_buffer_schema,
                                plan.right_buffer_schema)
    assert buffers.left.column(TIME_COLUMN).to_pylist() == [BASE_US + 3_000_000]


def test_a_version_1_blob_continues_in_the_function_spark_calls():
    plan = plan_of()
    func = JoinFunction(plan)
    st = FakeGroupState(watermark_ms=0)
    list(func((0,), iter([frame(plan, [(0, 1, "A", 3), (0, 2, "B", 4), (1, 9, "z", 5)])]), st))
    now = decode_join_state(st.value[0], plan.fp, plan.left_buffer_schema,
                            plan.right_buffer_schema)
    # The same buffers as the previous release stored them: __il_tus first, version 1.
    v1 = msgpack.packb({"v": 1, "kind": "join", "fp": plan.fp, "body": {
        "left": table_to_ipc(now.left, "zstd"), "right": table_to_ipc(now.right, "zstd"),
        "extra": {}}}, use_bin_type=True)
    old = FakeGroupState(watermark_ms=0, value=(v1,))
    got = decode_join_state(v1, plan.fp, plan.left_buffer_schema, plan.right_buffer_schema)
    assert got.left.equals(now.left) and got.right.equals(now.right)
    more = [(1, 1, "a", 10), (0, 9, "Z", 6)]
    want = list(func((0,), iter([frame(plan, more)]), st))
    out = list(func((0,), iter([frame(plan, more)]), old))
    assert out[0].equals(want[0]) and old.value == st.value and old.timeout_ms == st.timeout_ms
    assert envelope(old)["v"] == blob.CURRENT_VERSION
