"""``bench/run.py latency``: what a row waits from arrival to its output's commit, native vs
interlace, at steady input rates (issue 46).

Each workload reads Spark's ``rate`` source (rows generated at a steady rate; a row's
``timestamp`` is its generation time, which is also its event time) and runs with a
processing-time trigger of one second into a ``foreachBatch`` sink, which notes the wall time
when it has collected each micro-batch's rows (Spark commits the batch right after it
returns). Per output row, the latency is that time minus the moment the row's semantics
first allows it (SEMANTICS.md; event time = generation time):

* a join's matched row: the later of its two input rows' generation times;
* an unmatched left row of a left outer join: its close time, ``t + window + lateness`` (the
  watermark passes it then, in both engines);
* a window or session: its end plus the lateness.

So what is measured is the engine's own delay: the trigger's wait, planning, the operator,
the state commit and the watermark's extra micro-batch. The first ``--warmup`` seconds are
dropped; p50 / p95 / p99 / max of the next ``--seconds`` are reported per workload, engine,
rate and state store, with the rows per second each engine processed (below the input rate:
it fell behind, and its latency grows with the run).

Workloads (``--workloads``): ``join-inner`` and ``join-left`` (two rate sources of R rows/s
each; a right row's key is a left row's, 0-5 s later; the left join drops one right row in
five; window +-6 s, lateness 2 s), ``tumbling`` (5 s windows over 100 keys, lateness 2 s),
``session`` (gap 2 s; 100 keys active 3 s each, then never again).

    .venv/bin/python bench/run.py latency --rates 1000,4000 --stores hdfs
"""

from __future__ import annotations

import argparse
import calendar
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

TRIGGER = "1 second"
LATENESS_MS = 2_000
JOIN_WINDOW_MS = 6_000
DELAY_S = 5  # a right row follows its left row by 0-5 s
WORKLOADS = ("join-inner", "join-left", "tumbling", "session")


@dataclass
class Run:
    """One measured run: its latencies (s) and rows, and what the query processed."""

    workload: str
    engine: str
    rate: int
    store: str
    latencies: list[float] = field(default_factory=list)
    input_rows: int = 0
    seconds: float = 0.0
    batches: int = 0

    def summary(self) -> dict[str, Any]:
        """p50 / p95 / p99 / max (ms), the output rows and the input rows per second."""
        lat = np.asarray(self.latencies) * 1000
        pct = (lambda q: round(float(np.percentile(lat, q)))) if len(lat) else (lambda q: None)
        return {"workload": self.workload, "engine": self.engine, "rate": self.rate,
                "store": self.store, "rows_out": len(lat), "p50_ms": pct(50),
                "p95_ms": pct(95), "p99_ms": pct(99),
                "max_ms": round(float(lat.max())) if len(lat) else None,
                "processed_per_s": round(self.input_rows / self.seconds) if self.seconds else 0,
                "batches": self.batches}


def _rate(spark: Any, rate: int) -> Any:
    return (spark.readStream.format("rate").option("rowsPerSecond", rate)
            .option("numPartitions", 2).load())


def _join_inputs(spark: Any, rate: int, how: str) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    left = _rate(spark, rate).select(F.col("value").alias("lid"), F.col("timestamp").alias("lts"))
    delay = F.col("value") * 7919 % (DELAY_S * rate)  # rows: 0-5 s behind at `rate` rows/s
    right = _rate(spark, rate).select((F.col("value") - delay).alias("rid"),
                                      F.col("timestamp").alias("rts"))
    right = right.where(F.col("rid") >= 0)
    if how == "left":
        right = right.where(F.col("rid") % 5 != 0)
    return left, right


def _join(spark: Any, rate: int, engine: str, how: str) -> tuple[Any, Any]:
    """The join's output and its rows' allowed time (a column, µs)."""
    from pyspark.sql import functions as F

    left, right = _join_inputs(spark, rate, how)
    if engine == "interlace":
        from interlace import Join, stream_join

        out = stream_join(left, right, Join(
            left_keys=["lid"], right_keys=["rid"], how=how, time_window_ms=JOIN_WINDOW_MS,
            left_event_time_column="lts", right_event_time_column="rts",
            lateness_ms=LATENESS_MS))
    else:
        delay = f"{LATENESS_MS} milliseconds"
        cond = F.expr(f"lid = rid AND rts BETWEEN lts - INTERVAL {JOIN_WINDOW_MS} MILLISECONDS "
                      f"AND lts + INTERVAL {JOIN_WINDOW_MS} MILLISECONDS")
        out = (left.withWatermark("lts", delay)
               .join(right.withWatermark("rts", delay), cond,
                     "inner" if how == "inner" else "left_outer")
               .select(F.col("lts").alias("left_lts"), F.col("rts").alias("right_rts")))
    lts, rts = F.unix_micros(F.col("left_lts")), F.unix_micros(F.col("right_rts"))
    close = lts + (JOIN_WINDOW_MS + LATENESS_MS) * 1000
    return out, F.when(rts.isNull(), close).otherwise(F.greatest(lts, rts))


def _window(spark: Any, rate: int, engine: str, kind: str) -> tuple[Any, Any]:
    """The window aggregation's output and its rows' allowed time (µs): end + lateness."""
    from pyspark.sql import functions as F

    src = _rate(spark, rate)
    if kind == "session":  # 100 keys at a time, each active 3 s, then never again
        key = F.col("value") % 100 + 100 * F.floor(F.col("value") / (3 * rate))
    else:
        key = F.col("value") % 100
    events = src.select(key.alias("k"), F.col("value").alias("v"), F.col("timestamp").alias("ts"))
    if engine == "interlace":
        from interlace import Aggregation, Window, window_aggregate

        sizes = {"gap_ms": 2_000} if kind == "session" else {"duration_ms": 5_000}
        out = window_aggregate(events, Window(
            kind=kind, event_time_column="ts", lateness_ms=LATENESS_MS, group_by=["k"],
            max_groups_per_window=1_000_000, **sizes,
            aggregations=[Aggregation(agg="count", as_="n"),
                          Aggregation(agg="sum", column="v", as_="s")]))
    else:
        win = (F.session_window("ts", "2 seconds") if kind == "session"
               else F.window("ts", "5 seconds"))
        out = (events.withWatermark("ts", f"{LATENESS_MS} milliseconds")
               .groupBy(win.alias("w"), "k").agg(F.count(F.lit(1)).alias("n"),
                                                  F.sum("v").alias("s"))
               .select(F.col("w.end").alias("window_end"), "k", "n", "s"))
    return out, F.unix_micros(F.col("window_end")) + LATENESS_MS * 1000


BUILDERS: dict[str, Callable[[Any, int, str], tuple[Any, Any]]] = {
    "join-inner": lambda spark, rate, engine: _join(spark, rate, engine, "inner"),
    "join-left": lambda spark, rate, engine: _join(spark, rate, engine, "left"),
    "tumbling": lambda spark, rate, engine: _window(spark, rate, engine, "tumbling"),
    "session": lambda spark, rate, engine: _window(spark, rate, engine, "session"),
}


def measure(spark: Any, workload: str, engine: str, rate: int, store: str,
            warmup_s: float, seconds: float) -> Run:
    """Run one workload on one engine at ``rate`` rows/s; return its measured run."""
    from harness.spark import use_store

    use_store(spark, store)
    run = Run(workload, engine, rate, store)
    out, allowed = BUILDERS[workload](spark, rate, engine)
    start = time.time()
    window = (start + warmup_s, start + warmup_s + seconds)
    lock = threading.Lock()

    def sink(df: Any, batch_id: int) -> None:
        got = df.select(allowed.alias("allowed_us")).toPandas()
        now = time.time()
        if window[0] <= now <= window[1]:
            lat = now - got["allowed_us"].to_numpy(dtype=np.float64) / 1e6
            with lock:
                run.latencies.extend(lat.tolist())

    checkpoint = Path(tempfile.mkdtemp(prefix=f"latency-{workload}-{engine}-"))
    query = (out.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime=TRIGGER).start())
    try:
        while time.time() < window[1]:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.5)
        for p in query.recentProgress:
            stamp = p.get("timestamp") if isinstance(p, dict) else p.timestamp
            t = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
            if window[0] <= t <= window[1]:
                rows = p["numInputRows"] if isinstance(p, dict) else p.numInputRows
                run.input_rows += int(rows)
                run.batches += 1
        run.seconds = seconds
    finally:
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    return run


def parser() -> argparse.ArgumentParser:
    """``bench/run.py latency`` options."""
    ap = argparse.ArgumentParser(prog="bench/run.py latency", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help=f"comma-separated, of {', '.join(WORKLOADS)}")
    ap.add_argument("--engines", default="native,interlace")
    ap.add_argument("--rates", default="1000,4000", help="input rows per second (per input)")
    ap.add_argument("--stores", default="hdfs", help="hdfs, rocksdb")
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds dropped at the start")
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds measured")
    ap.add_argument("--out", type=Path, default=None, help="append each run's summary (JSONL)")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run every (workload, rate, store, engine), one query at a time; print a table."""
    from harness.spark import open_session

    args = parser().parse_args(argv)
    spark = open_session({})
    rows = []
    for workload in args.workloads.split(","):
        for rate in (int(r) for r in args.rates.split(",")):
            for store in args.stores.split(","):
                for engine in args.engines.split(","):
                    s = measure(spark, workload, engine, rate, store, args.warmup,
                                args.seconds).summary()
                    rows.append(s)
                    print(json.dumps(s), flush=True)
                    if args.out is not None:
                        with args.out.open("a") as fh:
                            fh.write(json.dumps(s) + "\n")
    print(_table(rows))
    return 0


def _table(rows: list[dict[str, Any]]) -> str:
    head = ("workload", "rate", "store", "engine", "p50_ms", "p95_ms", "p99_ms", "max_ms",
            "processed_per_s", "rows_out")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows]
    return "\n".join(lines)
