"""Hostile input through the join and the stream-table join (issue 13), no Spark.

Hypothesis draws batches of hostile rows (:mod:`hostile`: NULL keys and event times, NaN /
±inf / -0.0, unicode, binary and decimal(38,18) keys, nested payloads, duplicate times, times
at 0001-01-01, before 1970 and at 9999-12-31) and runs them through the operators' own
``applyInPandasWithState`` functions (``interlace.testing.local``) and their oracles. Each test
checks that the operator equals the oracle (NaN as NULL and rows without an event time left
out, as docs/reliability.md says) and that every input row is accounted for: in the output, a
dead letter, removed by Spark's watermark filter, or counted by a documented counter.
The window's tests are in ``test_hostile_window.py``; the same on real Spark in
``tests/replay/test_hostile_spark.py``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
from hostile import (
    COLUMNS,
    END,
    HOSTILE,
    KEY_KINDS,
    SCHEMA,
    assert_accounted,
    dead_letters,
    end_row,
    hostile_join_logs,
    oracle_rows,
    spark_dropped_ids,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from interlace import Join, StreamTableJoin
from interlace.testing.local import run_join_locally, run_stream_table_locally
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.oracles.stream_table import oracle_stream_table_join

SIDES = ("left", "right")


@st.composite
def join_specs(draw: Any) -> Join:
    """A full join (every row of both sides shows in the output) on hostile key columns."""
    keys = draw(st.lists(st.sampled_from(sorted(KEY_KINDS)), min_size=1, max_size=2,
                         unique=True))
    late_data = draw(st.sampled_from(["dlq", "drop"]))
    lower = draw(st.integers(-3, 1)) * 1000
    kw: dict[str, Any] = dict(
        left_keys=keys, right_keys=keys, how="full", event_time_column="ts",
        lower_ms=lower, upper_ms=lower + draw(st.integers(0, 4)) * 1000,
        lateness_ms=draw(st.sampled_from([0, 1000])), late_data=late_data,
        key_groups=draw(st.integers(1, 4)))
    if late_data == "dlq":
        kw["dlq_horizon_ms"] = draw(st.sampled_from([3000, 86_400_000]))
    return Join(**kw)


def oracle_log(log: list[JoinBatch]) -> list[JoinBatch]:
    return [JoinBatch(left=oracle_rows(b.left), right=oracle_rows(b.right)) for b in log]


def by_batch(rows: list[tuple[int, dict[str, Any]]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for b, r in rows:
        out.setdefault(b, []).append(r)
    return out


def without_null_time_letters(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if '"reason": "null_event_time"' not in (r.get("_dead_letter") or "")]


@HOSTILE
@given(spec=join_specs(), log=hostile_join_logs(), policy=st.sampled_from(["min", "max"]))
def test_join_on_hostile_input_equals_the_oracle_and_accounts_for_every_row(spec, log, policy):
    run = run_join_locally(spec, log, SCHEMA, SCHEMA, watermark_policy=policy)
    want = oracle_join(spec, oracle_log(log), left_columns=COLUMNS, right_columns=COLUMNS,
                       watermark_policy=policy)
    assert run.watermarks_ms == want.spark_watermarks_ms
    got, exp = by_batch(run.rows), want.rows_by_batch()
    for b in sorted(set(got) | set(exp)):
        assert (canonical_rows(without_null_time_letters(got.get(b, [])))
                == canonical_rows(exp.get(b, []))), f"batch {b}"
    c = run.counters
    letters = dead_letters(r for _, r in run.rows)
    for side in SIDES:
        null_time = sum(1 for d in letters if d["side"] == side
                        and d["reason"] == "null_event_time")
        assert c.get(f"late_dropped_{side}", 0) == want.late_dropped[side]
        assert c.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped[side]
        assert c.get(f"dead_lettered_{side}", 0) - null_time == want.dead_lettered[side]

    # Accounting, per side: how="full" shows every row that reached the buffers (matched, or
    # null-padded at eviction); the batch at END evicts everything but its own two rows.
    normal = [r for _, r in run.rows if r.get("_dead_letter") is None]
    spark = 0
    for side in SIDES:
        batches = [getattr(b, side) for b in log]
        inputs = {r["id"] for rows in batches for r in rows if r["id"] >= 0}
        dropped = spark_dropped_ids(batches, run.watermarks_ms)
        spark += len(dropped)
        assert_accounted(
            inputs,
            output={r[f"{side}_id"] for r in normal if r[f"{side}_id"] is not None} - {-1, -2},
            dead={d["row"]["id"] for d in letters if d["side"] == side},
            spark=dropped - {-1, -2},
            counted={name: c.get(f"{name}_{side}", 0) for name in
                     ("late_dropped", "null_key_dropped", "null_event_time_dropped",
                      "out_of_range_dropped")})
    assert spark == run.spark_dropped
    assert c.get("inserted_left", 0) - c.get("evicted_left", 0) <= 1  # only END's row held


WIDE = pa.schema([("id", pa.int64()), ("ks", pa.string()), ("ts", pa.timestamp("us")),
                  *((f"c{i:03d}", [pa.float64(), pa.string(), pa.decimal128(38, 18),
                                   pa.binary()][i % 4]) for i in range(197))])


def wide_row(row_id: int, key: str | None, when: dt.datetime | None, fill: Any) -> dict[str, Any]:
    values = [fill(i) for i in range(197)]
    return {"id": row_id, "ks": key, "ts": when,
            **{f"c{i:03d}": v for i, v in enumerate(values)}}


@settings(HOSTILE, max_examples=8)
@given(data=st.data())
def test_join_carries_200_column_rows(data):
    """200 columns of mixed types (NaN, unicode, decimals, binary) pass through unchanged."""
    from hostile import BINARIES, DECIMALS, EXTREME_TIMES, FLOATS, STRINGS, nullable

    pools = [FLOATS, STRINGS, DECIMALS, BINARIES]
    rows = []
    for i in range(data.draw(st.integers(1, 6))):
        fills = [data.draw(nullable(p)) for p in pools]
        when = data.draw(st.sampled_from([dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 1),
                                          *EXTREME_TIMES]))
        rows.append(wide_row(i, data.draw(st.sampled_from(["a", "e\u0301", None])), when,
                             lambda j, f=fills: f[j % 4]))
    left, right = rows[::2], rows[1::2]
    end = [wide_row(-1, "z", END, lambda j: None)]
    log = [JoinBatch(left=left, right=right), JoinBatch(left=end, right=end)]
    spec = Join(left_keys=["ks"], right_keys=["ks"], how="full", time_window_ms=1000,
                event_time_column="ts", key_groups=2)
    run = run_join_locally(spec, log, WIDE, WIDE)
    want = oracle_join(spec, oracle_log(log), left_columns=WIDE.names, right_columns=WIDE.names)
    assert canonical_rows(r for _, r in run.rows) == canonical_rows(want.rows)
    shown = {r["left_id"] for _, r in run.rows} | {r["right_id"] for _, r in run.rows}
    assert_accounted({r["id"] for r in rows}, output=shown - {None, -1}, dead=set(),
                     spark=spark_dropped_ids([left + right], run.watermarks_ms),
                     counted={k: v for k, v in run.counters.items()
                              if k.startswith("out_of_range_dropped")})


@st.composite
def stream_table_specs(draw: Any) -> StreamTableJoin:
    key = draw(st.sampled_from(sorted(KEY_KINDS)))
    late_data = draw(st.sampled_from(["dlq", "drop"]))
    lateness = draw(st.sampled_from([0, 1000]))
    kw: dict[str, Any] = dict(
        left_keys=[key], right_keys=[key], event_time_column="ts",
        how=draw(st.sampled_from(["inner", "left"])), emit=draw(st.sampled_from(["final",
                                                                              "eager"])),
        lateness_ms=lateness, late_data=late_data,
        history_retention_ms=draw(st.sampled_from([None, 0, 2000])),
        value_columns=["f", "u", "d", "st", "arr", "m"], key_groups=draw(st.integers(1, 3)))
    if late_data == "dlq":
        kw["dlq_horizon_ms"] = draw(st.sampled_from([3000, 86_400_000]))
    return StreamTableJoin(**kw)


STREAM_COUNTERS = ("late_dropped_left", "null_key_dropped_left", "null_event_time_dropped_left",
                   "absent_dropped_left", "out_of_range_dropped_left")
TABLE_COUNTERS = ("late_dropped_right", "null_key_dropped_right",
                  "null_event_time_dropped_right", "out_of_range_dropped_right")


@HOSTILE
@given(spec=stream_table_specs(), log=hostile_join_logs(),
       policy=st.sampled_from(["min", "max"]))
def test_stream_table_join_on_hostile_input_equals_the_oracle_and_accounts_for_every_row(
        spec, log, policy):
    run = run_stream_table_locally(spec, log, SCHEMA, SCHEMA, watermark_policy=policy)
    want = oracle_stream_table_join(spec, oracle_log(log), left_columns=COLUMNS,
                                    right_columns=COLUMNS, watermark_policy=policy)
    assert run.watermarks_ms == want.spark_watermarks_ms
    got, exp = by_batch(run.rows), want.rows_by_batch()
    for b in sorted(set(got) | set(exp)):
        assert (canonical_rows(without_null_time_letters(got.get(b, [])))
                == canonical_rows(exp.get(b, []))), f"batch {b}"
    c = run.counters
    for side in SIDES:
        assert c.get(f"late_dropped_{side}", 0) == want.late_dropped[side]
        assert c.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped[side]

    letters = dead_letters(r for _, r in run.rows)
    stream = [b.left for b in log]
    table = [b.right for b in log]
    end = {-1, -2}
    # The stream: each row is emitted once (inner: with a version; left: always), or a dead
    # letter, removed by Spark, or counted; END's row is still held (final) or emitted (eager).
    assert_accounted(
        {r["id"] for rows in stream for r in rows} - end,
        output={r["left_id"] for _, r in run.rows if r.get("left_id") is not None} - end,
        dead={d["row"]["id"] for d in letters if d["side"] == "left"},
        spark=spark_dropped_ids(stream, run.watermarks_ms) - end,
        counted={n: c.get(n, 0) for n in STREAM_COUNTERS})
    # The table: each update enters the history (versions_inserted), or is a dead letter,
    # removed by Spark, or counted.
    table_ids = {r["id"] for rows in table for r in rows} - end
    dead = {d["row"]["id"] for d in letters if d["side"] == "right"}
    spark = spark_dropped_ids(table, run.watermarks_ms) - end
    inserted = c.get("versions_inserted", 0) - 1  # END's update
    assert_accounted(table_ids, output=set(), dead=dead, spark=spark,
                     counted={"versions_inserted": inserted,
                              **{n: c.get(n, 0) for n in TABLE_COUNTERS}})


def test_hostile_rows_are_drawn_with_every_key_kind():
    """The helpers' own contract: END's row has a non-NULL value of every key kind."""
    row = end_row()
    assert all(row[k] is not None for k in KEY_KINDS)
