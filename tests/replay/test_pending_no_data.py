"""A query stopped after a micro-batch's commit, before its no-data micro-batch, on real Spark.

Spark decides to run a no-data micro-batch (the one that closes what a moved watermark passed)
from the previous plan in memory, so a restarted query never runs it until new rows arrive.
Each scenario stops a query exactly there, deterministically: a processing-time trigger of
one day runs the data micro-batch at once and would run the no-data one at the next
midnight UTC (Spark aligns processing-time triggers to multiples of the interval: with a
minute, a first micro-batch crossing a full minute is followed at once by the next); the
query is stopped in between. A restart from a copy of that checkpoint shows Spark's own
behaviour (nothing more is emitted), a restart after
:func:`~interlace.operators.common.pending.schedule_pending_no_data_batch` emits what the
no-data micro-batch owes: the whole run equals the oracle's, as if never stopped.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path

import pytest
from pyspark.sql import types as T

from interlace import Aggregation, Join, Window, stream_join, window_aggregate
from interlace.operators.common.pending import schedule_pending_no_data_batch
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.replay import write_parquet_rows
from interlace.testing.window_oracle import WindowBatch, oracle_window

pytestmark = pytest.mark.spark

BASE = dt.datetime(2026, 1, 1)
SCHEMA = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.StringType()),
                       T.StructField("ts", T.TimestampType())])


def at(sec: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=sec)


def row(k: int, sec: float) -> dict:
    return {"k": k, "v": f"{k}@{sec}", "ts": at(sec)}


def stopped_after_first_commit(spark, tmp: Path, build, inputs: dict[str, list[dict]]):  # noqa: ANN001, ANN201
    """Run ``build(frames)`` on one file per input until its first commit; stop; return rows."""
    for n, (name, rows) in enumerate(inputs.items()):
        (tmp / name).mkdir(parents=True)
        write_parquet_rows(tmp / name / "0.parquet", rows, SCHEMA, 1.7e9 + n)
    got: list[dict] = []
    frames = {name: spark.readStream.schema(SCHEMA).parquet(str(tmp / name)) for name in inputs}
    query = (build(frames).writeStream
             .foreachBatch(lambda df, _: got.extend(r.asDict() for r in df.collect()))
             .option("checkpointLocation", str(tmp / "ckpt"))
             .trigger(processingTime="1 day").start())
    deadline = time.time() + 120
    while not (tmp / "ckpt" / "commits" / "0").exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1)  # the progress is posted after the commit; the next batch is at midnight
    query.stop()
    assert sorted(p.name for p in (tmp / "ckpt" / "commits").iterdir()
                  if p.name.isdigit()) == ["0"]
    return got, frames


def restart(tmp: Path, build, frames, checkpoint: Path) -> list[dict]:  # noqa: ANN001
    got: list[dict] = []
    query = (build(frames).writeStream
             .foreachBatch(lambda df, _: got.extend(r.asDict() for r in df.collect()))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    return got


def both_restarts(spark, tmp, build, inputs):  # noqa: ANN001, ANN201
    first, frames = stopped_after_first_commit(spark, tmp, build, inputs)
    ckpt, copy = tmp / "ckpt", tmp / "ckpt-spark-alone"
    shutil.copytree(ckpt, copy)
    spark_alone = restart(tmp, build, frames, copy)
    assert schedule_pending_no_data_batch(ckpt, spark) == 1
    scheduled = restart(tmp, build, frames, ckpt)
    assert sorted(p.name for p in (ckpt / "commits").iterdir() if p.name.isdigit()) == ["0", "1"]
    assert schedule_pending_no_data_batch(ckpt, spark) is None  # nothing owed any more
    return first, spark_alone, scheduled


def test_a_window_restarted_before_its_no_data_batch_closes_what_the_watermark_passed(
        spark, one_run_store, tmp_path):
    # One micro-batch: user 1 at 1 s and 5 s, user 2 at 30 s: W becomes 30 s, which closes
    # [0, 10) in the no-data micro-batch that follows.
    spec = Window(kind="tumbling", duration_ms=10_000, event_time_column="ts", group_by=["k"],
                  max_groups_per_window=10, lateness_ms=0, key_groups=2,
                  aggregations=[Aggregation(agg="count", as_="n")])
    rows = [row(1, 1), row(1, 5), row(2, 30)]
    first, spark_alone, scheduled = both_restarts(
        spark, tmp_path, lambda f: window_aggregate(f["events"], spec), {"events": rows})
    assert first == [] and spark_alone == []  # Spark alone: the window waits for new rows
    want = oracle_window(spec, [WindowBatch(rows=tuple(rows)), WindowBatch(rows=())],
                         columns=["k", "v", "ts"])
    assert canonical_rows(scheduled) == canonical_rows([o.row for o in want.rows])
    assert [r["n"] for r in scheduled] == [2]


def test_a_join_restarted_before_its_no_data_batch_emits_its_unmatched_rows(
        spark, tmp_path):
    # Two inputs: W is the least of both inputs' watermarks (the commit holds it). Order 1 has
    # no payment within 5 s; the payment of order 2 at 40 s moves W past its window.
    spec = Join(left_keys=["k"], right_keys=["k"], how="left", time_window_ms=5_000,
                event_time_column="ts", lateness_ms=0)
    left, right = [row(1, 1), row(2, 30)], [row(2, 32), row(3, 40)]
    build = lambda f: stream_join(f["left"], f["right"], spec)  # noqa: E731
    first, spark_alone, scheduled = both_restarts(spark, tmp_path, build,
                                                  {"left": left, "right": right})
    assert spark_alone == []
    log = [JoinBatch(left=tuple(left), right=tuple(right)), JoinBatch(left=(), right=())]
    want = oracle_join(spec, log, left_columns=["k", "v", "ts"], right_columns=["k", "v", "ts"])
    assert canonical_rows(first + scheduled) == canonical_rows([o.row for o in want.rows])
    assert any(r["right_k"] is None and r["left_k"] == 1 for r in scheduled)
