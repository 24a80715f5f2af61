"""Idle inputs on real Spark (SEMANTICS §1, rule 1b): heartbeats keep results flowing.

Each scenario runs as ``availableNow`` runs of one query from one checkpoint, with the
processing time fixed per run (``_now_ms`` replaced): a heartbeat due when a run starts is in
the folder before the query lists it, so it is read in the run's first micro-batch, and the
oracle is given the same heartbeat in that batch (its stamp from the oracle's own rule 1b).
Every run but the first is a restart from the checkpoint in the middle of the idleness.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import types as T

from interlace import Join, StreamTableJoin, stream_join, stream_table_join
from interlace.operators.common import idle
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.oracles.spark_rules import idle_heartbeat_stamps
from interlace.testing.oracles.stream_table import oracle_stream_table_join
from interlace.testing.replay import write_parquet_rows

pytestmark = pytest.mark.spark

BASE = dt.datetime(2026, 1, 1)
SCHEMA = T.StructType([
    T.StructField("k", T.LongType()),
    T.StructField("v", T.StringType()),
    T.StructField("ts", T.TimestampType()),
])
COLS = ["k", "v", "ts"]
S = 1_000_000
BATCH = "__batch"


def at(sec: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=sec)


def us(sec: float) -> int:
    return int((at(sec) - dt.datetime(1970, 1, 1)).total_seconds() * S)


def row(k: int, sec: float, v: str | None = None) -> dict:
    return {"k": k, "v": v or f"{k}@{sec}", "ts": at(sec)}


def run_idle(spark, tmp: Path, monkeypatch, build, runs):  # noqa: ANN001, ANN201
    """Run ``runs`` (each ``(now_ms, [(left rows, right rows), ...])``) as availableNow runs.

    Returns the output rows by batch id and each batch's watermark (ms), in batch order.
    """
    for d in ("left", "right"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    out_dir, ckpt, beats = tmp / "out", tmp / "ckpt", tmp / "heartbeats"
    n = 0
    watermarks: dict[int, int] = {}

    def write(df, batch_id):  # noqa: ANN001
        df.selectExpr("*", f"CAST({int(batch_id)} AS BIGINT) AS {BATCH}").write.mode(
            "append").parquet(str(out_dir))

    for now_ms, batches in runs:
        monkeypatch.setattr(idle, "_now_ms", lambda now=now_ms: now)
        for left_rows, right_rows in batches:
            for d, rows in (("left", left_rows), ("right", right_rows)):
                write_parquet_rows(tmp / d / f"{n:05d}.parquet", rows, SCHEMA, 1.7e9 + n)
            n += 1
        frames = [spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
                  .parquet(str(tmp / d)) for d in ("left", "right")]
        query = (build(*frames, str(beats)).writeStream.foreachBatch(write)
                 .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        query.awaitTermination()
        # Feed the run's progress before the next run reads _idle.json, as `interlace run`
        # does: the listener sees it too, but maybe only after the next run has started.
        beats_of_run = idle.heartbeats_at(beats)
        for p in query.recentProgress:
            if beats_of_run is not None:
                beats_of_run.observe(p["observedMetrics"] or {})
        for p in query.recentProgress:
            raw = (p["eventTime"] or {}).get("watermark", "1970-01-01T00:00:00.000Z")
            wm = dt.datetime.strptime(raw, "%Y-%m-%dT%H:%M:%S.%fZ")
            watermarks[int(p["batchId"])] = int((wm - dt.datetime(1970, 1, 1)).total_seconds()
                                                * 1000)
    by_batch: dict[int, list[dict]] = {}
    if out_dir.exists():
        for r in spark.read.parquet(str(out_dir)).collect():
            d = r.asDict()
            by_batch.setdefault(int(d.pop(BATCH)), []).append(d)
    return by_batch, [watermarks[b] for b in sorted(watermarks)]


def assert_same(got: dict, want, watermarks: list[int]) -> None:  # noqa: ANN001
    assert watermarks == want.spark_watermarks_ms
    want_by = want.rows_by_batch()
    for b in sorted(set(got) | set(want_by)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(want_by.get(b, [])), f"batch {b}"


def stamp_at_start(now_ms, timeouts, last_row_ms, max_clock_us, side="right"):  # noqa: ANN001, ANN201
    """The oracle's heartbeat for ``side`` when a run starts (rule 1b), or None."""
    return idle_heartbeat_stamps(now_ms, timeouts, last_row_ms, max_clock_us).get(side)


@pytest.mark.parametrize("late_data", ["drop", "dlq"])
def test_a_quiet_right_input_no_longer_holds_the_unpaid_left_rows(spark, tmp_path, monkeypatch,
                                                                   late_data):
    """Left outer join; the right input stops after its first batch.

    Without idleness W stays at the right input's 00:10 and no unpaid row is ever emitted.
    With ``right_idle_timeout_ms`` the second run (5 s later) stamps the right input with
    the left's clock, W reaches 00:60 and the unpaid 00:20 row comes out; when the right input
    comes back, its row behind W is late (dropped by Spark under drop, dead-lettered under
    dlq) and its row ahead of W joins.
    """
    spec = Join(left_keys=["k"], right_keys=["k"], how="left", time_window_ms=5_000,
                event_time_column="ts", right_idle_timeout_ms=1_000, late_data=late_data,
                dlq_horizon_ms=3_600_000)
    runs = [
        (0, [([row(1, 10)], [row(1, 10)]), ([row(2, 20)], []), ([row(3, 60)], [])]),
        (5_000, [([row(4, 61)], [])]),
        (6_000, [([row(5, 63)], [row(3, 62), row(2, 21)])]),
    ]
    got, watermarks = run_idle(
        spark, tmp_path, monkeypatch,
        lambda left, right, beats: stream_join(left, right, spec, heartbeat_location=beats),
        runs)
    timeouts = {"left": None, "right": 1_000}
    # Run 1 starts 5 s after the right input's last row: stamped with the left's 00:60.
    hb1 = stamp_at_start(5_000, timeouts, {"left": 0, "right": 0},
                         {"left": us(60), "right": us(10)})
    # Run 2: the right is still idle (its last row at 0 ms); stamped with the left's 00:61.
    hb2 = stamp_at_start(6_000, timeouts, {"left": 5_000, "right": 0},
                         {"left": us(61), "right": hb1})
    assert (hb1, hb2) == (us(60), us(61))
    log = [
        JoinBatch(left=[row(1, 10)], right=[row(1, 10)]),
        JoinBatch(left=[row(2, 20)]),
        JoinBatch(left=[row(3, 60)]),
        JoinBatch(left=[row(4, 61)], right_heartbeat_us=hb1),
        JoinBatch(),  # the no-data micro-batch Spark runs once W moved
        JoinBatch(left=[row(5, 63)], right=[row(3, 62), row(2, 21)], right_heartbeat_us=hb2),
    ]
    want = oracle_join(spec, log, left_columns=COLS, right_columns=COLS)
    assert_same(got, want, watermarks)
    unpaid = [r for b in got.values() for r in b if r["left_k"] == 2]
    assert len(unpaid) == 1 and unpaid[0]["right_k"] is None
    assert any(r["left_k"] == 3 and r["right_k"] == 3 for b in got.values() for r in b)
    letters = [r for b in got.values() for r in b if r.get("_dead_letter")]
    if late_data == "dlq":
        assert len(letters) == 1 and "2@21" in letters[0]["_dead_letter"]
    else:
        assert want.spark_dropped["right"] == 1 and not letters


def test_without_a_timeout_the_quiet_input_holds_everything(spark, tmp_path, monkeypatch):
    """The same log without ``right_idle_timeout_ms``: W stays at 00:10, no unpaid row."""
    spec = Join(left_keys=["k"], right_keys=["k"], how="left", time_window_ms=5_000,
                event_time_column="ts")
    runs = [
        (0, [([row(1, 10)], [row(1, 10)]), ([row(2, 20)], []), ([row(3, 60)], [])]),
        (5_000, [([row(4, 61)], [])]),
    ]
    got, watermarks = run_idle(spark, tmp_path, monkeypatch,
                               lambda left, right, _: stream_join(left, right, spec), runs)
    assert set(watermarks) == {0, us(10) // 1000}
    assert not any(r["left_k"] == 2 for b in got.values() for r in b)


def test_a_table_that_stops_changing_keeps_the_final_join_flowing(spark, tmp_path, monkeypatch):
    """Stream-table join under ``final``: the table's last update is at 00:05.

    Without idleness the stream rows wait forever for W to pass them; with the table's
    ``right_idle_timeout_ms`` the next run stamps it with the stream's clock and they come out.
    """
    spec = StreamTableJoin(left_keys=["k"], right_keys=["k"], event_time_column="ts",
                           right_idle_timeout_ms=1_000)
    runs = [
        (0, [([row(1, 10)], [row(1, 5, "a")]), ([row(1, 20)], []), ([row(1, 30)], [])]),
        (2_000, [([row(1, 40)], [])]),
    ]
    got, watermarks = run_idle(
        spark, tmp_path, monkeypatch,
        lambda s, t, beats: stream_table_join(s, t, spec, heartbeat_location=beats), runs)
    hb = stamp_at_start(2_000, {"left": None, "right": 1_000}, {"left": 0, "right": 0},
                        {"left": us(30), "right": us(5)})
    log = [
        JoinBatch(left=[row(1, 10)], right=[row(1, 5, "a")]),
        JoinBatch(left=[row(1, 20)]),
        JoinBatch(left=[row(1, 30)]),
        JoinBatch(left=[row(1, 40)], right_heartbeat_us=hb),
        JoinBatch(),
    ]
    want = oracle_stream_table_join(spec, log, left_columns=COLS, right_columns=COLS)
    assert_same(got, want, watermarks)
    emitted = sorted(r["left_ts"] for b in got.values() for r in b)
    assert emitted == [at(10), at(20)]
    assert all(r["right_v"] == "a" for b in got.values() for r in b)


def test_a_running_query_emits_the_unpaid_rows_once_the_timeout_passes(spark, tmp_path):
    """The listener path, in real processing time, on a query that keeps running.

    The right input delivers one row, then nothing. The unpaid left row comes out no
    sooner than ``right_idle_timeout_ms`` after the right input's last micro-batch, and
    within that timeout plus a few micro-batches (a heartbeat written after a micro-batch
    or while the query waits for data, read by the next trigger, then Spark's no-data batch).
    """
    import time

    timeout_ms = 3_000
    spec = Join(left_keys=["k"], right_keys=["k"], how="left", time_window_ms=5_000,
                event_time_column="ts", right_idle_timeout_ms=timeout_ms)
    for d in ("left", "right"):
        (tmp_path / d).mkdir()
    seen: list[tuple[float, dict]] = []

    def collect(df, _batch_id):  # noqa: ANN001
        arrived = time.monotonic()
        seen.extend((arrived, r.asDict()) for r in df.collect())

    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "200")
    try:
        frames = [spark.readStream.schema(SCHEMA).parquet(str(tmp_path / d))
                  for d in ("left", "right")]
        out = stream_join(*frames, spec, heartbeat_location=str(tmp_path / "beats"))
        query = (out.writeStream.foreachBatch(collect)
                 .option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(processingTime="250 milliseconds").start())
        try:
            write_parquet_rows(tmp_path / "right" / "0.parquet", [row(1, 10)], SCHEMA, 1.7e9)
            write_parquet_rows(tmp_path / "left" / "0.parquet", [row(1, 10), row(2, 20)],
                               SCHEMA, 1.7e9)
            query.processAllAvailable()
            right_last = time.monotonic()
            write_parquet_rows(tmp_path / "left" / "1.parquet", [row(3, 60)], SCHEMA, 1.7e9 + 1)
            query.processAllAvailable()
            deadline = right_last + timeout_ms / 1000 + 20
            while time.monotonic() < deadline and not any(r["left_k"] == 2 for _, r in seen):
                time.sleep(0.1)
        finally:
            query.stop()
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    unpaid = [(t, r) for t, r in seen if r["left_k"] == 2]
    assert len(unpaid) == 1, seen
    assert unpaid[0][1]["right_k"] is None
    print(f"unpaid row {unpaid[0][0] - right_last:.2f} s after the right input's last batch")
    # Measured here: 4.2 s for a 3 s timeout (250 ms triggers).
    assert timeout_ms / 1000 - 0.5 <= unpaid[0][0] - right_last <= timeout_ms / 1000 + 10


@pytest.mark.parametrize("quiet_ms", [999, 1_000])
def test_an_input_is_idle_exactly_when_its_timeout_has_passed(spark, tmp_path, monkeypatch,
                                                             quiet_ms):
    """The boundaries on Spark: idle once ``now - last row >= timeout`` (999 ms: not yet;
    1,000 ms: idle), and a row of the returning input exactly at the ``W`` the heartbeat gave
    (00:40) is behind it: Spark's pre-filter (``t <= W``) removes it."""
    spec = Join(left_keys=["k"], right_keys=["k"], how="left", time_window_ms=5_000,
                event_time_column="ts", right_idle_timeout_ms=1_000)
    runs = [
        (0, [([row(1, 10)], [row(1, 10)]), ([row(2, 20)], []), ([row(3, 40)], [])]),
        (quiet_ms, [([row(4, 41)], [])]),
        (quiet_ms, [([], [row(8, 40)])]),
    ]
    got, watermarks = run_idle(
        spark, tmp_path, monkeypatch,
        lambda left, right, beats: stream_join(left, right, spec, heartbeat_location=beats),
        runs)
    timeouts = {"left": None, "right": 1_000}
    hb1 = stamp_at_start(quiet_ms, timeouts, {"left": 0, "right": 0},
                         {"left": us(40), "right": us(10)})
    hb2 = stamp_at_start(quiet_ms, timeouts, {"left": quiet_ms, "right": 0},
                         {"left": us(41), "right": hb1 or us(10)})
    log = [
        JoinBatch(left=[row(1, 10)], right=[row(1, 10)]),
        JoinBatch(left=[row(2, 20)]),
        JoinBatch(left=[row(3, 40)]),
        JoinBatch(left=[row(4, 41)], right_heartbeat_us=hb1),
        *([JoinBatch()] if hb1 is not None else []),  # Spark's no-data batch once W moved
        JoinBatch(right=[row(8, 40)], right_heartbeat_us=hb2),
    ]
    want = oracle_join(spec, log, left_columns=COLS, right_columns=COLS)
    assert_same(got, want, watermarks)
    unpaid = [b for b, rows in got.items() for r in rows if r["left_k"] == 2]
    if quiet_ms < 1_000:
        # No heartbeat: W waits at 00:10 until the right input's own row (batch 4) moves it.
        assert (hb1, hb2) == (None, None) and watermarks[:5] == [0] + [us(10) // 1000] * 4
        assert unpaid == [5] and want.spark_dropped["right"] == 0
    else:
        # The heartbeat of run 1 moves W to 00:40; the no-data batch 4 writes the unpaid row.
        assert (hb1, hb2) == (us(40), us(41)) and unpaid == [4]
        assert want.spark_dropped["right"] == 1  # 00:40 at W = 00:40
