"""Chains vs Spark's native chain: a stream-stream join, then a window over its output.

    .venv/bin/python bench/run.py chains                       # 100k rows per side per batch
    .venv/bin/python bench/run.py chains --rows 20000 --runs 1 --stores hdfs   # a smoke run

Workloads (issue 30, example 1 of docs/chains.md): orders LEFT JOIN payments (a payment 0 to
10 minutes after its order, ``lateness_ms`` 2 minutes), then per customer and window of the
join's ``order_ts``: ``count(*)`` and ``sum(amount)``, a tumbling window of 1 minute
(``chain-tumbling``) or a session window with a 30 s gap (``chain-session``).

* **native**: one query, Spark's own chain of stateful operators (Spark >= 3.4):
  ``withWatermark`` on both inputs, the time-interval left outer join, then
  ``groupBy(window(order_ts) | session_window(order_ts), customer).agg(...)`` in append
  mode; Spark propagates the join's output watermark to the aggregation.
* **interlace**: two queries, as ``interlace run`` runs a ``[[stages]]`` pipeline: stage 1
  ``stream_join`` into a channel (:class:`interlace.chain.ChannelWriter` in ``foreachBatch``),
  stage 2 ``window_aggregate`` over :func:`interlace.chain.read_channel` with ``lateness_ms``
  the join's lag (:func:`interlace.chain.min_lateness_ms`, 10 minutes), one after the other
  (``availableNow``).

Data (numpy, seeded): ``batches`` micro-batches of ``rows`` orders over ``keys`` customers,
each batch 60 s of event time, in order; 80% of orders paid 0-600 s later, the payment in the
micro-batch its time falls in; then a flush micro-batch one day ahead closes everything. No row
is late for either engine, so both emit the same windows: the verification run collects both
outputs and compares them row for row (counts, sums exact: amounts are multiples of 1/64).

Timed runs: every engine's last stage sinks to ``foreachBatch`` computing a count and an
order-independent checksum (one action per micro-batch), so the only extra work of the chain
is its channel. Reported per run: wall seconds (first query's start to last query's end) and
input rows per second (both inputs), per stage of the chain its seconds and the seconds spent
writing the channel (``ChannelWriter.write``: pandas to Arrow to Parquet, the clock), the
channel's bytes, and the native-to-interlace throughput ratio (best of ``--runs``).
Results go to ``bench/results/<date>-chains.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from harness import data as hdata
from harness import spark as hspark

ORDERS = pa.schema([("order_id", pa.int64()), ("customer", pa.int64()),
                    ("amount", pa.float64()), ("order_ts", hdata.TS)])
PAYMENTS = pa.schema([("order_id", pa.int64()), ("paid", pa.float64()), ("pay_ts", hdata.TS)])
SPAN_US = 60 * 1_000_000
BOUND_MS, LATENESS_MS = 600_000, 120_000
KINDS = {"chain-tumbling": {"kind": "tumbling", "duration_ms": 60_000},
         "chain-session": {"kind": "session", "gap_ms": 30_000}}

BENCH = Path(__file__).resolve().parents[2]  # bench/


def make_data(rows: int, batches: int, keys: int, seed: int) -> tuple[list, list]:
    """Per micro-batch Arrow tables of orders and payments; the last batch is the flush."""
    rng = np.random.default_rng(seed)
    t0 = hdata.T0_US
    orders, payments = [], []
    pay_by_batch: list[list[tuple[np.ndarray, ...]]] = [[] for _ in range(batches + 1)]
    for b in range(batches):
        ids = np.arange(b * rows, (b + 1) * rows, dtype=np.int64)
        t = np.sort(t0 + b * SPAN_US + rng.integers(0, SPAN_US, rows))
        amount = rng.integers(1, 64 * 100, rows) / 64
        orders.append(hdata.table(ORDERS, [ids, rng.integers(0, keys, rows), amount, t]))
        paid = rng.random(rows) < 0.8
        pt = t[paid] + rng.integers(0, BOUND_MS * 1000 + 1, int(paid.sum()))
        where = np.minimum((pt - t0) // SPAN_US, batches)  # the batch its time falls in
        for target in np.unique(where):
            m = where == target
            pay_by_batch[int(target)].append((ids[paid][m], amount[paid][m], pt[m]))
    for b in range(batches):
        parts = pay_by_batch[b]
        cols = [np.concatenate([p[i] for p in parts]) for i in range(3)] if parts else [
            np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)]
        order = np.argsort(cols[2], kind="stable")
        payments.append(hdata.table(PAYMENTS, [c[order] for c in cols]))
    late_pays = pay_by_batch[batches]  # paid after the last batch's span: in the flush batch
    flush = t0 + (batches + 1) * SPAN_US + 86_400 * 1_000_000
    orders.append(hdata.table(ORDERS, [np.array([-1]), np.array([-1]), np.array([0.0]),
                                       np.array([flush])]))
    extra = [np.concatenate([p[i] for p in late_pays]) for i in range(3)] if late_pays else [
        np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)]
    payments.append(hdata.table(PAYMENTS, [np.append(extra[0], -1), np.append(extra[1], 0.0),
                                           np.append(extra[2], flush)]))
    return orders, payments


def _inputs(spark: Any, root: Path) -> tuple[Any, Any]:
    return (hdata.read_stream(spark, root / "orders", ORDERS),
            hdata.read_stream(spark, root / "payments", PAYMENTS))


def _sink(collect: bool, out: list) -> Any:
    """The last stage's sink: a count and a checksum (timed), or the rows (verification)."""

    def sink(df: Any, _batch_id: int) -> None:
        df = df.filter("customer >= 0")
        if collect:
            out.extend(df.toPandas().to_dict("records"))
        else:
            row = df.selectExpr("count(*) AS n",
                                "sum(CAST(xxhash64(window_start, window_end, customer, n, "
                                "round(s, 6)) AS DECIMAL(20, 0))) AS h").first()
            out.append((row["n"], int(row["h"] or 0)))

    return sink


def _batch_ms(progress: list) -> float:
    """The median time a data micro-batch took (``triggerExecution``), ms."""
    times = [p["durationMs"]["triggerExecution"] for p in progress
             if int(p.get("numInputRows") or 0) > 0]
    return float(statistics.median(times)) if times else 0.0


def run_native(spark: Any, root: Path, kind: dict, work: Path, collect: bool) -> dict:
    """Spark's own join-then-window in one query."""
    from pyspark.sql import functions as F

    orders, payments = _inputs(spark, root)
    o = orders.withWatermark("order_ts", f"{LATENESS_MS} milliseconds").alias("o")
    p = payments.withWatermark("pay_ts", f"{LATENESS_MS} milliseconds").alias("p")
    joined = o.join(p, F.expr("o.order_id = p.order_id AND p.pay_ts BETWEEN o.order_ts AND "
                              f"o.order_ts + INTERVAL {BOUND_MS // 1000} SECONDS"), "leftOuter")
    win = (F.window("order_ts", "1 minute") if kind["kind"] == "tumbling"
           else F.session_window("order_ts", f"{kind['gap_ms'] // 1000} seconds"))
    out = (joined.groupBy(win.alias("w"), F.col("o.customer").alias("customer"))
           .agg(F.count(F.lit(1)).alias("n"), F.sum("o.amount").alias("s"))
           .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                   "customer", "n", "s"))
    rows: list = []
    start = time.monotonic()
    q = (out.writeStream.outputMode("append").foreachBatch(_sink(collect, rows))
         .option("checkpointLocation", str(work / "native")).trigger(availableNow=True).start())
    q.awaitTermination()
    seconds = time.monotonic() - start
    return {"seconds": seconds, "rows": rows,
            "stages": {"native": {"seconds": seconds, "batches": len(q.recentProgress),
                                  "batch_ms": _batch_ms(q.recentProgress)}}}


def run_interlace(spark: Any, root: Path, kind: dict, work: Path, collect: bool) -> dict:
    """The chain: the join into a channel, then the window over it, as ``interlace run``."""
    from interlace.operators.common.arrow import arrow_schema_for

    from interlace import Aggregation, Join, Window, stream_join, window_aggregate
    from interlace.chain import ChannelWriter, min_lateness_ms, read_channel

    orders, payments = _inputs(spark, root)
    join = Join(left_keys=["order_id"], right_keys=["order_id"], how="left", lower_ms=0,
                upper_ms=BOUND_MS, left_event_time_column="order_ts",
                right_event_time_column="pay_ts", lateness_ms=LATENESS_MS,
                left_prefix="", right_prefix="p_", output_right_columns=["order_id"])
    paid = stream_join(orders, payments, join)
    channel, ckpt = work / "channel", work / "paid"
    writer = ChannelWriter([channel], ckpt, join.horizon_ms,
                           arrow_schema_for(paid.schema, timestamp_unit="us", timestamp_tz="UTC"))
    write_s = [0.0]

    def to_channel(df: Any, batch_id: int) -> None:
        pdf = df.toPandas()
        t = time.monotonic()
        writer.write(pdf, batch_id)
        write_s[0] += time.monotonic() - t

    start = time.monotonic()
    q1 = (paid.writeStream.foreachBatch(to_channel).option("checkpointLocation", str(ckpt))
          .trigger(availableNow=True).start())
    q1.awaitTermination()
    mid = time.monotonic()
    channel_bytes = sum(f.stat().st_size for f in channel.glob("*.parquet"))
    window = Window(**kind, event_time_column="order_ts", group_by=["customer"],
                    lateness_ms=min_lateness_ms(join, "order_ts"),
                    max_groups_per_window=1_000_000,
                    aggregations=[Aggregation(agg="count", as_="n"),
                                  Aggregation(agg="sum", column="amount", as_="s")])
    out = window_aggregate(read_channel(spark, channel, paid.schema), window)
    rows: list = []
    q2 = (out.writeStream.foreachBatch(_sink(collect, rows))
          .option("checkpointLocation", str(work / "window")).trigger(availableNow=True).start())
    q2.awaitTermination()
    end = time.monotonic()
    return {"seconds": end - start, "rows": rows, "channel_bytes": channel_bytes,
            "stages": {"join": {"seconds": mid - start, "channel_write_s": write_s[0],
                                "batches": len(q1.recentProgress),
                                "batch_ms": _batch_ms(q1.recentProgress)},
                       "window": {"seconds": end - mid, "batches": len(q2.recentProgress),
                                  "batch_ms": _batch_ms(q2.recentProgress)}}}


ENGINES = {"native": run_native, "interlace": run_interlace}


def _canonical(rows: list[dict]) -> list[tuple]:
    return sorted((str(r["window_start"]), str(r["window_end"]), int(r["customer"]), int(r["n"]),
                   round(float(r["s"]), 6)) for r in rows)


def parser() -> argparse.ArgumentParser:
    """``bench/run.py chains --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py chains", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000, help="orders per micro-batch")
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--keys", type=int, default=10_000, help="customers")
    ap.add_argument("--runs", type=int, default=2, help="timed runs per engine")
    ap.add_argument("--stores", nargs="+", default=list(hspark.STORES))
    ap.add_argument("--workloads", nargs="+", default=list(KINDS))
    ap.add_argument("--out", type=Path, default=None)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    spark = hspark.open_session({})
    tmp = Path(tempfile.mkdtemp(prefix="interlace-chains-"))
    orders, payments = make_data(args.rows, args.batches, args.keys, seed=20261127)
    hdata.write_batches(tmp / "data" / "orders", orders)
    hdata.write_batches(tmp / "data" / "payments", payments)
    input_rows = sum(t.num_rows for t in orders + payments)
    results: list[dict] = []
    out_rows: dict[str, int] = {}
    try:
        for store in args.stores:
            hspark.use_store(spark, store)
            for name in args.workloads:
                kind = KINDS[name]
                outputs = {}
                for engine, fn in ENGINES.items():  # the verification run: the outputs agree
                    work = tmp / f"{store}-{name}-{engine}-verify"
                    outputs[engine] = _canonical(fn(spark, tmp / "data", kind, work, True)["rows"])
                    shutil.rmtree(work, ignore_errors=True)
                assert outputs["native"] == outputs["interlace"], f"{name}/{store}: outputs differ"
                assert len(outputs["native"]) > 0
                out_rows[name] = len(outputs["native"])
                for run in range(args.runs):
                    for engine, fn in ENGINES.items():  # alternate the engines
                        work = tmp / f"{store}-{name}-{engine}-{run}"
                        r = fn(spark, tmp / "data", kind, work, False)
                        shutil.rmtree(work, ignore_errors=True)
                        results.append({"store": store, "workload": name, "engine": engine,
                                        "run": run, "seconds": r["seconds"],
                                        "rows_per_s": input_rows / r["seconds"],
                                        "out_rows": sum(n for n, _ in r["rows"]),
                                        "checksum": sum(h or 0 for _, h in r["rows"]),
                                        "stages": r["stages"],
                                        "channel_bytes": r.get("channel_bytes")})
                        print(json.dumps(results[-1]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report = _report(results, args, input_rows, out_rows)
    out = args.out or BENCH / "results" / f"{dt.date.today()}-chains.md"
    out.write_text(report)
    out.with_suffix(".json").write_text(json.dumps({"args": {k: str(v) for k, v in
                                                             vars(args).items()},
                                                    "versions": hspark.versions(),
                                                    "runs": results}, indent=1))
    print(report)
    return 0


def _report(results: list[dict], args: Any, input_rows: int, out_rows: dict[str, int]) -> str:
    lines = [f"# Chains vs native ({dt.date.today()})", "",
             f"`{' '.join(sys.argv)}`: {args.rows} orders per "
             f"micro-batch, {args.batches} micro-batches + a flush, {args.keys} customers, "
             f"{input_rows} input rows (both sides), output rows "
             f"{', '.join(f'{n} {k}' for k, n in out_rows.items())}; best "
             f"of {args.runs} timed runs per engine, engines alternated. The outputs of both "
             "engines were collected once and are equal row for row.", "",
             "| store | workload | native rows/s | interlace rows/s | interlace / native | "
             "join stage s | channel write s | window stage s | native ms per batch | "
             "join ms per batch | window ms per batch |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for store in args.stores:
        for name in args.workloads:
            rs = [r for r in results if r["store"] == store and r["workload"] == name]
            best = {e: max((r for r in rs if r["engine"] == e), key=lambda r: r["rows_per_s"])
                    for e in ENGINES}
            checks = {r["checksum"] for r in rs}
            assert len(checks) == 1, f"{store}/{name}: checksums differ {checks}"
            st = best["interlace"]["stages"]
            lines.append(
                f"| {store} | {name} | {best['native']['rows_per_s']:,.0f} | "
                f"{best['interlace']['rows_per_s']:,.0f} | "
                f"{best['interlace']['rows_per_s'] / best['native']['rows_per_s']:.2f}x | "
                f"{st['join']['seconds']:.1f} | {st['join']['channel_write_s']:.1f} | "
                f"{st['window']['seconds']:.1f} | "
                f"{best['native']['stages']['native']['batch_ms']:,.0f} | "
                f"{st['join']['batch_ms']:,.0f} | {st['window']['batch_ms']:,.0f} |")
    medians = {e: statistics.median(r["seconds"] for r in results if r["engine"] == e)
               for e in ENGINES}
    lines += ["", f"Median wall seconds over every run: native {medians['native']:.1f}, "
              f"interlace {medians['interlace']:.1f}. Per batch: the median "
              "`triggerExecution` of the data micro-batches, the processing latency of a "
              "micro-batch in each query (native: the whole chain; interlace: per stage, their "
              "sum the chain's, plus, run continuously, up to one trigger interval of the "
              "window's query before it picks a new channel file up).", ""]
    return "\n".join(lines) + "\n"
