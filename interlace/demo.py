"""The demo job: orders ⋈ payments within 10 minutes, on local Spark, into embedded DuckDB.

Data is generated deterministically (seeded) and written as Parquet files, one per input per
micro-batch, with out-of-order and late events, so the run is reproducible. The join is a
``left`` join (unpaid orders surface once their 10-minute window has passed) with
``late_data="dlq"``: late payments are not lost, they land in a dead-letter table.

The DuckDB sink is exactly-once per micro-batch: each batch is written in one transaction that
first deletes what an earlier attempt of the same batch id wrote, so a replayed batch (after a
crash) is written once.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DemoResult", "generate_orders_payments", "run_join_demo"]

BASE = dt.datetime(2026, 3, 2, 9, 0, 0)


def generate_orders_payments(
    n_batches: int = 6, orders_per_batch: int = 200, seed: int = 7
) -> tuple[list[list[dict[str, Any]]], list[list[dict[str, Any]]]]:
    """Return per-batch orders and payments.

    About 85% of orders are paid, 1 to 9 minutes after the order; a few payments arrive one
    micro-batch late, some far behind the watermark (late rows); orders and payments within a
    batch are shuffled (out of order).
    """
    rnd = random.Random(seed)
    orders: list[list[dict[str, Any]]] = [[] for _ in range(n_batches)]
    payments: list[list[dict[str, Any]]] = [[] for _ in range(n_batches)]
    oid = 0
    for b in range(n_batches):
        for _ in range(orders_per_batch):
            oid += 1
            ts = BASE + dt.timedelta(minutes=b * 5, seconds=rnd.randrange(300))
            amount = round(rnd.uniform(5, 250), 2)
            orders[b].append({"order_id": oid, "customer": f"c{rnd.randrange(60):02d}",
                              "amount": amount, "order_ts": ts})
            if rnd.random() < 0.85:
                pay_ts = ts + dt.timedelta(seconds=rnd.randrange(60, 540))
                target = b + (1 if rnd.random() < 0.1 else 0)
                if rnd.random() < 0.02:
                    target = b + 3  # very late: past the join window plus lateness
                if target < n_batches:
                    payments[target].append({"payment_id": f"p{oid}", "order_id": oid,
                                             "paid": amount, "pay_ts": pay_ts})
        rnd.shuffle(orders[b])
        rnd.shuffle(payments[b])
    return orders, payments


@dataclass
class DemoResult:
    """What the demo wrote and counted."""

    duckdb_path: Path
    joined_rows: int
    paid: int
    unpaid: int
    dead_letters: int
    counters: dict[str, int]
    seconds: float


def run_join_demo(workdir: Path | None = None, *, spark: Any = None, quiet: bool = False) -> DemoResult:
    """Run the join demo and return its summary.

    Args:
        workdir: Where data, checkpoint and ``demo.duckdb`` go (a temp folder if omitted).
        spark: A SparkSession (default: :func:`interlace.local_session`).
        quiet: Print nothing.
    """
    import duckdb
    from pyspark.sql import types as T

    from interlace import Join, local_session, stream_join
    from interlace.metrics import counters
    from interlace.testing.replay import write_parquet_rows

    started = time.time()
    root = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="interlace-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    spark = spark or local_session("interlace-demo")
    orders, payments = generate_orders_payments()
    order_schema = T.StructType([
        T.StructField("order_id", T.LongType()), T.StructField("customer", T.StringType()),
        T.StructField("amount", T.DoubleType()), T.StructField("order_ts", T.TimestampType())])
    pay_schema = T.StructType([
        T.StructField("payment_id", T.StringType()), T.StructField("order_id", T.LongType()),
        T.StructField("paid", T.DoubleType()), T.StructField("pay_ts", T.TimestampType())])
    for name, schema, batches in (("orders", order_schema, orders), ("payments", pay_schema, payments)):
        (root / name).mkdir(exist_ok=True)
        for i, rows in enumerate(batches):
            write_parquet_rows(root / name / f"{i:06d}.parquet", rows, schema, 1_700_000_000.0 + i)
    # A last batch far ahead moves the watermark on, so unpaid orders are emitted.
    write_parquet_rows(root / "orders" / f"{len(orders):06d}.parquet",
                       [{"order_id": -1, "customer": "-", "amount": 0.0,
                         "order_ts": BASE + dt.timedelta(hours=3)}], order_schema, 1_700_000_100.0)
    write_parquet_rows(root / "payments" / f"{len(orders):06d}.parquet",
                       [{"payment_id": "-", "order_id": -1, "paid": 0.0,
                         "pay_ts": BASE + dt.timedelta(hours=3)}], pay_schema, 1_700_000_100.0)

    spec = Join(
        left_keys=["order_id"], right_keys=["order_id"], how="left",
        lower_ms=0, upper_ms=600_000,          # payment within 10 minutes after the order
        left_event_time_column="order_ts", right_event_time_column="pay_ts",
        lateness_ms=120_000, late_data="dlq", dlq_horizon_ms=3_600_000,
        left_prefix="", right_prefix="", output_left_columns=["order_id", "customer", "amount", "order_ts"],
        output_right_columns=["payment_id", "paid", "pay_ts"], key_groups=8, name="orders-payments")
    acc = counters(spark)
    read = lambda name, schema: (  # noqa: E731
        spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(root / name)))
    out = stream_join(read("orders", order_schema), read("payments", pay_schema), spec, counters=acc)

    db_path = root / "demo.duckdb"
    con = duckdb.connect(str(db_path))
    con.execute("CREATE TABLE IF NOT EXISTS orders_payments (batch_id BIGINT, order_id BIGINT, "
                "customer VARCHAR, amount DOUBLE, order_ts TIMESTAMP, payment_id VARCHAR, "
                "paid DOUBLE, pay_ts TIMESTAMP)")
    con.execute("CREATE TABLE IF NOT EXISTS dead_letters (batch_id BIGINT, letter VARCHAR)")
    con.close()

    def sink(df: Any, batch_id: int) -> None:
        pdf = df.toPandas()
        normal = pdf[pdf["_dead_letter"].isna()].drop(columns=["_dead_letter"])
        normal = normal[normal["order_id"] != -1]
        normal.insert(0, "batch_id", batch_id)
        letters = pdf.loc[pdf["_dead_letter"].notna(), ["_dead_letter"]].rename(
            columns={"_dead_letter": "letter"})
        letters.insert(0, "batch_id", batch_id)
        c = duckdb.connect(str(db_path))
        try:
            c.execute("BEGIN TRANSACTION")
            c.execute("DELETE FROM orders_payments WHERE batch_id = ?", [batch_id])
            c.execute("DELETE FROM dead_letters WHERE batch_id = ?", [batch_id])
            c.register("normal_df", normal)
            c.register("letters_df", letters)
            c.execute("INSERT INTO orders_payments SELECT * FROM normal_df")
            c.execute("INSERT INTO dead_letters SELECT * FROM letters_df")
            c.execute("COMMIT")
        finally:
            c.close()

    query = (out.writeStream.foreachBatch(sink).option("checkpointLocation", str(root / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()

    con = duckdb.connect(str(db_path), read_only=True)
    joined = con.execute("SELECT count(*) FROM orders_payments").fetchone()[0]
    paid = con.execute("SELECT count(*) FROM orders_payments WHERE payment_id IS NOT NULL").fetchone()[0]
    unpaid = con.execute("SELECT count(*) FROM orders_payments WHERE payment_id IS NULL").fetchone()[0]
    dead = con.execute("SELECT count(*) FROM dead_letters").fetchone()[0]
    top_unpaid = con.execute(
        "SELECT customer, count(*) AS unpaid_orders, round(sum(amount), 2) AS unpaid_amount "
        "FROM orders_payments WHERE payment_id IS NULL GROUP BY customer "
        "ORDER BY unpaid_amount DESC LIMIT 5").fetchall()
    sample_letter = con.execute("SELECT letter FROM dead_letters LIMIT 1").fetchone()
    con.close()
    result = DemoResult(db_path, joined, paid, unpaid, dead, dict(acc.value), time.time() - started)
    if not quiet:
        print("interlace demo: orders LEFT JOIN payments within 10 minutes (local Spark -> DuckDB)")
        print(f"  rows written        {joined:>6}   (paid {paid}, unpaid {unpaid})")
        print(f"  late payments (DLQ) {dead:>6}")
        print(f"  counters            {json.dumps(result.counters, sort_keys=True)}")
        print("  top customers by unpaid amount:")
        for customer, n, amt in top_unpaid:
            print(f"    {customer}  {n:>3} orders  {amt:>9.2f}")
        if sample_letter:
            print(f"  a dead letter: {sample_letter[0][:160]}...")
        print(f"  DuckDB file: {db_path}  (tables orders_payments, dead_letters)")
        print(f"  took {result.seconds:.1f} s")
    return result
