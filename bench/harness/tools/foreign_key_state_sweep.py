"""State at scale for the foreign-key join on local Spark: the right table grows, the change stays.

    .venv/bin/python bench/run.py state fk-sweep --right 100000 1000000 --stores hdfs rocksdb

Issue 34's fourth operator. Micro-batch 0 loads ``--left`` orders (100,000) and a products
table of ``--right`` keys; then ``--batches`` micro-batches of 10,000 order updates (random
orders, random products) and 1,000 product updates (random products) each, so the right
table (the state every key group holds, docs/foreign-key-join.md) grows while the change per
micro-batch stays. ``foreign_key_join(how="left", emit="eager")``, the default key groups
(``--key-groups``: others),
into a no-op sink, ``availableNow``, one file per input per micro-batch (increasing
modification times). Spark has no foreign-key join, so there is no native beside it. The
figure is the median ``triggerExecution`` of the update micro-batches after the first; state
is ``memoryUsedBytes`` at the last one (RocksDB: its memory, not its files). Results go to
``bench/results/<date>-state-fk.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness import spark as hspark

TS = pa.timestamp("us")
ORDERS = pa.schema([("order_id", pa.int64()), ("product_id", pa.int64()), ("qty", pa.int64()),
                    ("ts", TS)])
PRODUCTS = pa.schema([("product_id", pa.int64()), ("name", pa.string()),
                      ("price", pa.float64()), ("ts", TS)])
T0_US = 1_767_225_600_000_000  # 2026-01-01

BENCH = Path(__file__).resolve().parents[2]  # bench/


def write_data(root: Path, right: int, left: int, batches: int, seed: int) -> None:
    """One Parquet file per input per micro-batch, modification times increasing."""
    rng = np.random.default_rng(seed)
    for b in range(batches + 1):
        n_o, n_p = (left, right) if b == 0 else (10_000, 1_000)
        o_ids = np.arange(left) if b == 0 else rng.integers(0, left, n_o)
        p_ids = np.arange(right) if b == 0 else rng.integers(0, right, n_p)
        t = T0_US + b * 10_000_000
        tables = {
            "orders": pa.table([pa.array(o_ids, pa.int64()),
                                pa.array(rng.integers(0, right, n_o), pa.int64()),
                                pa.array(np.ones(n_o, np.int64)),
                                pa.array(np.full(n_o, t), TS)], schema=ORDERS),
            "products": pa.table([pa.array(p_ids, pa.int64()),
                                  pa.array([f"p{b}"] * n_p, pa.string()),
                                  pa.array(rng.random(n_p)),
                                  pa.array(np.full(n_p, t), TS)], schema=PRODUCTS),
        }
        for name, table in tables.items():
            path = root / name / f"{b:06d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path)
            os.utime(path, (1_700_000_000 + b, 1_700_000_000 + b))


def run(spark: Any, root: Path, work: Path, key_groups: int | None = None) -> dict[str, Any]:
    from pyspark.sql import types as T

    from interlace import ForeignKeyJoin, foreign_key_join

    def schema(s: pa.Schema) -> Any:
        kinds = {pa.int64(): T.LongType(), pa.string(): T.StringType(),
                 pa.float64(): T.DoubleType(), TS: T.TimestampType()}
        return T.StructType([T.StructField(f.name, kinds[f.type]) for f in s])

    spec = ForeignKeyJoin(left_keys=["order_id"], foreign_key_columns=["product_id"],
                          right_keys=["product_id"], how="left", emit="eager",
                          event_time_column="ts",
                          **({"key_groups": key_groups} if key_groups else {}))
    frames = [spark.readStream.schema(schema(s)).option("maxFilesPerTrigger", 1)
              .parquet(str(root / name)) for name, s in (("orders", ORDERS),
                                                         ("products", PRODUCTS))]
    out = foreign_key_join(frames[0], frames[1], spec)
    rows: list[int] = []

    def sink(df: Any, _batch: int) -> None:
        rows.append(df.count())

    start = time.monotonic()
    query = (out.writeStream.foreachBatch(sink).option("checkpointLocation", str(work))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.monotonic() - start
    progress = [p for p in query.recentProgress if int(p.get("numInputRows") or 0) > 0]
    times = [p["durationMs"]["triggerExecution"] for p in progress]
    ops = (progress[-1].get("stateOperators") or [{}]) if progress else [{}]
    return {"seconds": seconds, "batch_ms": times, "median_ms": statistics.median(times[2:]),
            "state_bytes": sum(int(o.get("memoryUsedBytes") or 0) for o in ops),
            "key_groups": spec.key_groups,
            "output_rows": sum(rows)}


def parser() -> argparse.ArgumentParser:
    """``bench/run.py state fk-sweep --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py state fk-sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("--right", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--left", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--stores", nargs="+", default=["hdfs"])
    ap.add_argument("--key-groups", type=int, default=None,
                    help="the join's key_groups (default: the spec's)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, default=None)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    spark = hspark.open_session(dict(c.split("=", 1) for c in args.conf))
    tmp = Path(tempfile.mkdtemp(prefix="interlace-fk-state-"))
    results = []
    try:
        for right in args.right:
            data = tmp / f"data-{right}"
            write_data(data, right, args.left, args.batches, 20261127)
            for store in args.stores:
                hspark.use_store(spark, store)
                r = run(spark, data, tmp / f"{store}-{right}", args.key_groups)
                results.append({"store": store, "right_keys": right, "left": args.left, **r})
                print(json.dumps(results[-1]), flush=True)
                shutil.rmtree(tmp / f"{store}-{right}", ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [f"# Foreign-key join, state at scale ({dt.date.today()})", "",
             f"`{' '.join(sys.argv)}`: micro-batch 0 "
             f"loads {args.left:,} orders and the products table, then {args.batches} "
             "micro-batches of 10,000 order and 1,000 product updates; the median "
             "`triggerExecution` of the update micro-batches after the first.", "",
             "| store | right keys | key groups | load ms | ms/batch | state MiB | output rows |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['store']} | {r['right_keys']:,} | {r['key_groups']} | "
                     f"{r['batch_ms'][0]:,} | {r['median_ms']:,.0f} | "
                     f"{r['state_bytes'] / 2**20:,.1f} | {r['output_rows']:,} |")
    report = "\n".join(lines) + "\n"
    out = args.out or BENCH / "results" / f"{dt.date.today()}-state-fk.md"
    out.write_text(report)
    out.with_suffix(".json").write_text(json.dumps({"args": sys.argv[1:],
                                                     "versions": hspark.versions(),
                                                     "runs": results}, indent=1))
    print(report)
    return 0
