"""End-to-end cost of the foreign-key join's replication factor on local Spark.

The right table is replicated into every key group, so ``key_groups`` is the replication
factor: each right update is shuffled ``key_groups`` times and every key group's call
decodes, updates and re-encodes the whole right table. This replays, through
``foreign_key_join`` on a local SparkSession (``local[2]``, 2 shuffle partitions), a log of
one batch loading a right table of ``R`` keys with ``L`` orders, then ``B`` batches of
``L / 10`` order updates and ``R / 100`` product updates each, for ``key_groups`` in
(1, 2, 4, 8), and reports Spark's ``triggerExecution`` time of the load batch and the
median of the update batches (after a warm-up query).

Run (Spark runs must be serialised): ``flock /tmp/spark.lock .venv/bin/python
bench/run.py foreign-key [R]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import types as T

from interlace import ForeignKeyJoin, foreign_key_join, local_session
from interlace.testing.log import JoinBatch
from interlace.testing.replay import write_parquet_rows

ORDERS = T.StructType([
    T.StructField("order_id", T.LongType()),
    T.StructField("product_id", T.LongType()),
    T.StructField("qty", T.LongType()),
    T.StructField("ts", T.TimestampType()),
])
PRODUCTS = T.StructType([
    T.StructField("product_id", T.LongType()),
    T.StructField("name", T.StringType()),
    T.StructField("price", T.DoubleType()),
    T.StructField("ts", T.TimestampType()),
])
BASE = dt.datetime(2026, 1, 1)


def build_log(n_right: int, n_left: int, n_batches: int) -> list[JoinBatch]:
    rnd = random.Random(3)

    def at(sec: float) -> dt.datetime:
        return BASE + dt.timedelta(seconds=sec)

    def order(oid: int, sec: float) -> dict[str, object]:
        return {"order_id": oid, "product_id": rnd.randrange(n_right), "qty": 1, "ts": at(sec)}

    def product(pid: int, sec: float) -> dict[str, object]:
        return {"product_id": pid, "name": f"p{pid}-{sec}", "price": rnd.random(), "ts": at(sec)}

    log = [JoinBatch(left=tuple(order(o, 1) for o in range(n_left)),
                     right=tuple(product(p, 1) for p in range(n_right)))]
    for b in range(1, n_batches + 1):
        sec = 10 * b
        log.append(JoinBatch(
            left=tuple(order(rnd.randrange(n_left), sec) for _ in range(n_left // 10)),
            right=tuple(product(rnd.randrange(n_right), sec) for _ in range(n_right // 100))))
    return log


def run(spark: Any, log: list[JoinBatch], key_groups: int) -> list[int]:
    """Replay ``log`` (one Parquet file per input per batch); return each batch's ms."""
    spec = ForeignKeyJoin(left_keys=["order_id"], foreign_key_columns=["product_id"],
                          right_keys=["product_id"], how="left", emit="eager",
                          event_time_column="ts", key_groups=key_groups)
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        for i, batch in enumerate(log):
            for name, schema, rows in (("o", ORDERS, batch.left), ("p", PRODUCTS, batch.right)):
                (root / name).mkdir(exist_ok=True)
                write_parquet_rows(root / name / f"{i:06d}.parquet", rows, schema,
                                   1_700_000_000.0 + i)
        frames = [spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                  .parquet(str(root / name)) for name, schema in (("o", ORDERS), ("p", PRODUCTS))]
        out = foreign_key_join(frames[0], frames[1], spec)
        query = (out.writeStream
                 .foreachBatch(lambda df, _: df.write.format("noop").mode("overwrite").save())
                 .option("checkpointLocation", str(root / "ckpt"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return [p["durationMs"]["triggerExecution"] for p in query.recentProgress
                if p["numInputRows"] > 0]


def parser() -> argparse.ArgumentParser:
    """The command line: the right table's keys."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py foreign-key", description=__doc__.split("\n\n")[0])
    ap.add_argument("right", type=int, nargs="?", default=10_000, help="right table keys (10000)")
    return ap


def main(argv: list[str] | None = None) -> None:
    n_right = parser().parse_args(argv).right
    n_left, n_batches = 20_000, 6
    spark = local_session("fk-bench", shuffle_partitions=2)
    log = build_log(n_right, n_left, n_batches)
    run(spark, log[:2], 2)  # warm-up: JVM, Python workers
    print(f"right keys {n_right:,}, orders {n_left:,}; load batch, then {n_batches} batches of "
          f"{n_left // 10:,} order + {n_right // 100:,} product updates")
    print("| key_groups | load batch ms | update batch ms (median) |")
    print("|---|---|---|")
    for key_groups in (1, 2, 4, 8):
        ms = run(spark, log, key_groups)
        print(f"| {key_groups} | {ms[0]:,} | {statistics.median(ms[1:]):,.0f} |")
    spark.stop()
