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
five; window +-6 s, lateness 2 s), ``tumbling`` (5.3 s windows over 100 keys, lateness 2 s),
``session`` (gap 2 s; 100 keys active 3.7 s each, then never again), ``chain-session``
(``join-left`` with such a key on the left, then a session window over the join's output by
it: native in one query, interlace as two queries joined by a channel, as
``interlace run --continuous`` runs a chain; a session is allowed at its end plus the join's
lag, 6 s, plus the lateness: 8 s).

    .venv/bin/python bench/run.py latency --rates 1000,4000 --stores hdfs

``bench/run.py kafka-latency`` measures ``join-inner`` and ``tumbling`` the same way on a real
broker, topics in and a topic out (:mod:`harness.tools.kafka_latency`).
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
#: Tumbling windows of 5.3 s, not 5: their ends drift against the 1-second trigger, so a run
#: meets every phase between them (at whole seconds every window would wait the same).
WINDOW_MS = 5_300
TABLE_KEYS = 1_000  # the stream-table join's table: 1,000 keys, updated at a tenth of the rate
ENGINES = ("native", "interlace", "floor", "floor-tws")
WORKLOADS = ("join-inner", "join-left", "stream-table", "stream-table-eager", "tumbling", "session",
             "chain-session")


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
    batch_ms: list[int] = field(default_factory=list)  # the output query's batches (trigger)
    #: a chain's first query (interlace, floor: the join into the channel), its batches
    upstream_batch_ms: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """p50 / p95 / p99 / max (ms), the output rows and the input rows per second."""
        lat = np.asarray(self.latencies) * 1000
        pct = (lambda q: round(float(np.percentile(lat, q)))) if len(lat) else (lambda q: None)
        return {"workload": self.workload, "engine": self.engine, "rate": self.rate,
                "store": self.store, "rows_out": len(lat), "p50_ms": pct(50),
                "p95_ms": pct(95), "p99_ms": pct(99),
                "max_ms": round(float(lat.max())) if len(lat) else None,
                "processed_per_s": round(self.input_rows / self.seconds) if self.seconds else 0,
                "batches": self.batches,
                "batch_ms_p50": _median(self.batch_ms),
                "upstream_batch_ms_p50": _median(self.upstream_batch_ms)}


def _median(values: list[int]) -> int | None:
    return round(float(np.median(values))) if values else None


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


def _join(spark: Any, rate: int, engine: str, how: str) -> tuple[Any, Any, list[Any]]:
    """The join's output and its rows' allowed time (a column, µs)."""
    from pyspark.sql import functions as F

    left, right = _join_inputs(spark, rate, how)
    if engine != "native":
        from interlace import Join, prepare_join

        op = prepare_join(left, right, Join(
            left_keys=["lid"], right_keys=["rid"], how=how, time_window_ms=JOIN_WINDOW_MS,
            left_event_time_column="lts", right_event_time_column="rts",
            lateness_ms=LATENESS_MS))
        out = op.apply() if engine == "interlace" else _floor(op, engine)
    else:
        out = _native_join(left, right, how).select(F.col("lts").alias("left_lts"),
                                                    F.col("rts").alias("right_rts"))
    lts, rts = F.unix_micros(F.col("left_lts")), F.unix_micros(F.col("right_rts"))
    close = lts + (JOIN_WINDOW_MS + LATENESS_MS) * 1000
    return out, F.when(rts.isNull(), close).otherwise(F.greatest(lts, rts)), []


def _native_join(left: Any, right: Any, how: str) -> Any:
    """Spark's interval join of the join inputs (``inner`` or ``left``): window +-6 s, each
    input watermarked with the lateness."""
    from pyspark.sql import functions as F

    delay = f"{LATENESS_MS} milliseconds"
    cond = F.expr(f"lid = rid AND rts BETWEEN lts - INTERVAL {JOIN_WINDOW_MS} MILLISECONDS "
                  f"AND lts + INTERVAL {JOIN_WINDOW_MS} MILLISECONDS")
    return left.withWatermark("lts", delay).join(right.withWatermark("rts", delay), cond,
                                                 "inner" if how == "inner" else "left_outer")


def _stream_table(spark: Any, rate: int, engine: str,
                  emit: str = "final") -> tuple[Any, Any, list[Any]]:
    """A left join of a stream (R rows/s over 1,000 keys) with a table of those keys updated
    at R/10 rows/s, and its rows' allowed time (µs).

    interlace: ``stream_table_join(how="left", emit="final")``: a row joins the table as of
    its time once the watermark passes it, so it is allowed at ``t + lateness``; under
    ``emit="eager"`` (``stream-table-eager``) it joins the versions received so far in the
    call that receives it, so it is allowed at ``t``. native: the
    closest Spark query with event-time semantics, the left outer interval join of the stream
    with the updates (``u.ts BETWEEN s.ts - 6 s AND s.ts``): a matched row is allowed when the
    stream row arrives (its updates are older), an unmatched one at ``t + lateness``, when the
    watermark passes it. Spark's answer differs (every update of the 6 s, not the version as
    of ``t``); the latencies are each engine's against its own semantics.
    """
    from pyspark.sql import functions as F

    stream = _rate(spark, rate).select(
        (F.col("value") * 7919 % TABLE_KEYS).alias("k"), F.col("value").alias("v"),
        F.col("timestamp").alias("ts"))
    table = _rate(spark, max(rate // 10, 1)).select(
        (F.col("value") % TABLE_KEYS).alias("k"), F.col("value").alias("tv"),
        F.col("timestamp").alias("ts"))
    if engine != "native":
        from interlace import StreamTableJoin, prepare_stream_table_join

        op = prepare_stream_table_join(stream, table, StreamTableJoin(
            left_keys=["k"], right_keys=["k"], how="left", event_time_column="ts",
            lateness_ms=LATENESS_MS, emit=emit))
        out = op.apply() if engine == "interlace" else _floor(op, engine)
        allowed = F.unix_micros(F.col("left_ts"))
        return out, allowed + LATENESS_MS * 1000 if emit == "final" else allowed, []
    delay = f"{LATENESS_MS} milliseconds"
    out = (stream.withWatermark("ts", delay).alias("s")
           .join(table.withWatermark("ts", delay).alias("u"), F.expr(
               f"s.k = u.k AND u.ts BETWEEN s.ts - INTERVAL {JOIN_WINDOW_MS} MILLISECONDS "
               "AND s.ts"), "left_outer")
           .select(F.col("s.ts").alias("left_ts"), F.col("u.ts").alias("right_ts")))
    lts = F.unix_micros(F.col("left_ts"))
    return out, F.when(F.col("right_ts").isNull(), lts + LATENESS_MS * 1000).otherwise(lts), []


def _window(spark: Any, rate: int, engine: str, kind: str) -> tuple[Any, Any, list[Any]]:
    """The window aggregation's output and its rows' allowed time (µs): end + lateness."""
    from pyspark.sql import functions as F

    src = _rate(spark, rate)
    if kind == "session":
        key = _session_key(rate, "value")
    else:
        key = F.col("value") % 100
    events = src.select(key.alias("k"), F.col("value").alias("v"), F.col("timestamp").alias("ts"))
    if engine != "native":
        from interlace import Aggregation, Window, prepare_window

        sizes = {"gap_ms": 2_000} if kind == "session" else {"duration_ms": WINDOW_MS}
        op = prepare_window(events, Window(
            kind=kind, event_time_column="ts", lateness_ms=LATENESS_MS, group_by=["k"],
            max_groups_per_window=1_000_000, **sizes,
            aggregations=[Aggregation(agg="count", as_="n"),
                          Aggregation(agg="sum", column="v", as_="s")]))
        out = op.apply() if engine == "interlace" else _floor(op, engine)
    else:
        win = (F.session_window("ts", "2 seconds") if kind == "session"
               else F.window("ts", f"{WINDOW_MS} milliseconds"))
        out = (events.withWatermark("ts", f"{LATENESS_MS} milliseconds")
               .groupBy(win.alias("w"), "k").agg(F.count(F.lit(1)).alias("n"),
                                                  F.sum("v").alias("s"))
               .select(F.col("w.end").alias("window_end"), "k", "n", "s"))
    return out, F.unix_micros(F.col("window_end")) + LATENESS_MS * 1000, []


def _floor(op: Any, engine: str) -> Any:
    """The no-op floor on interlace's prepared operator (``harness.floor``): the same query
    shape, an ``applyInPandasWithState`` that keeps 8 bytes of state and emits nothing; its
    batch times are what any such operator pays per micro-batch. ``floor-tws``: the same
    no-op on ``transformWithStateInPandas`` (PySpark 4.0+, RocksDB store only)."""
    from harness.floor import floor_on, tws_floor_on

    return tws_floor_on(op) if engine == "floor-tws" else floor_on(op, freeze=True)


def _session_key(rate: int, column: str) -> Any:
    """100 keys at a time, each active 3.7 s of ``column`` (a rate source's value), then never
    again: their sessions close. 3.7 s, not 3: the sessions' ends drift against the 1-second
    trigger, so a run meets every phase between them (at whole seconds it would measure one)."""
    from pyspark.sql import functions as F

    return F.col(column) % 100 + 100 * F.floor(F.col(column) / F.lit(3.7 * rate))


def _chain(spark: Any, rate: int, engine: str, work: Path) -> tuple[Any, Any, list[Any]]:
    """A left join, then a session window (gap 2 s) over its output by the left row's key.

    native: one query (Spark propagates the join's output watermark to the aggregation).
    interlace: two queries as ``interlace run --continuous`` runs a chain: the join into a
    channel (processing-time trigger), the window over the channel, started together. A
    session's allowed time: its end plus the join's lag on the left time (its window, 6 s)
    plus the lateness (2 s): the first moment the watermark can pass end + lag, when no joined
    row of it can come any more, in either engine (Spark holds the aggregation's watermark
    back by the join's window; interlace's second query by its lateness, the lag).
    """
    from interlace.operators.common.arrow import arrow_schema_for
    from pyspark.sql import functions as F

    from interlace import Aggregation, Join, Window, prepare_join, prepare_window, stream_join
    from interlace.chain import ChannelWriter, min_lateness_ms, read_channel

    left, right = _join_inputs(spark, rate, "left")
    left = left.withColumn("k", _session_key(rate, "lid"))
    join = Join(left_keys=["lid"], right_keys=["rid"], how="left", time_window_ms=JOIN_WINDOW_MS,
                left_event_time_column="lts", right_event_time_column="rts",
                lateness_ms=LATENESS_MS)
    lag_ms = min_lateness_ms(join, "left_lts")
    aggs = [Aggregation(agg="count", as_="n")]
    if engine != "native":
        # floor: both queries, the channel between them, a no-op operator in each (it emits
        # nothing, so the channel carries the upstream's ticks: its clock, no rows)
        paid = (stream_join(left, right, join) if engine == "interlace"
                else _floor(prepare_join(left, right, join), engine))
        channel, checkpoint = work / "channel", work / "join"
        writer = ChannelWriter([channel], checkpoint, join.horizon_ms,
                               arrow_schema_for(paid.schema, timestamp_unit="us",
                                                timestamp_tz="UTC"))
        q1 = (paid.writeStream.foreachBatch(lambda df, i: writer.write(df.toPandas(), i))
              .option("checkpointLocation", str(checkpoint))
              .trigger(processingTime=TRIGGER).start())
        op = prepare_window(read_channel(spark, channel, paid.schema), Window(
            kind="session", gap_ms=2_000, event_time_column="left_lts", group_by=["left_k"],
            lateness_ms=lag_ms, max_groups_per_window=1_000_000, aggregations=aggs))
        out = op.apply() if engine == "interlace" else _floor(op, engine)
        upstream = [q1]
    else:
        out = (_native_join(left, right, "left")
               .groupBy(F.session_window("lts", "2 seconds").alias("w"), "k")
               .agg(F.count(F.lit(1)).alias("n"))
               .select(F.col("w.end").alias("window_end"), "k", "n"))
        upstream = []
    return out, F.unix_micros(F.col("window_end")) + (lag_ms + LATENESS_MS) * 1000, upstream


BUILDERS: dict[str, Callable[..., tuple[Any, Any, list[Any]]]] = {
    "join-inner": lambda spark, rate, engine: _join(spark, rate, engine, "inner"),
    "join-left": lambda spark, rate, engine: _join(spark, rate, engine, "left"),
    "stream-table": _stream_table,
    "stream-table-eager": lambda spark, rate, engine: _stream_table(spark, rate, engine, "eager"),
    "tumbling": lambda spark, rate, engine: _window(spark, rate, engine, "tumbling"),
    "session": lambda spark, rate, engine: _window(spark, rate, engine, "session"),
}
#: Workloads whose builder takes a work folder (for its first query's checkpoint, channel).
CHAINS = {"chain-session": _chain}


def measure(spark: Any, workload: str, engine: str, rate: int, store: str,
            warmup_s: float, seconds: float, reader_trigger: str | None = None) -> Run:
    """Run one workload on one engine at ``rate`` rows/s; return its measured run.

    ``reader_trigger``: the processing-time trigger of an interlace chain's second query, the
    one reading the channel (default: ``interlace run --continuous``'s, one second).
    """
    from harness.spark import use_store

    use_store(spark, store)
    run = Run(workload, engine, rate, store)
    work = Path(tempfile.mkdtemp(prefix=f"latency-{workload}-{engine}-"))
    if workload in CHAINS:
        out, allowed, upstream = CHAINS[workload](spark, rate, engine, work)
    else:
        out, allowed, upstream = BUILDERS[workload](spark, rate, engine)
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

    query = (out.writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(work / "checkpoint"))
             .trigger(processingTime=(reader_trigger or TRIGGER) if upstream
                      else TRIGGER).start())
    queries = [*upstream, query]
    try:
        while time.time() < window[1]:
            for q in queries:
                if q.exception() is not None:
                    raise RuntimeError(str(q.exception()))
            time.sleep(0.5)
        for p in _measured(queries[0], window):  # the query reading the sources
            run.input_rows += int(p["numInputRows"])
            run.batches += 1
        run.batch_ms = _batch_ms(query, window)
        if upstream:
            run.upstream_batch_ms = _batch_ms(queries[0], window)
        run.seconds = seconds
    finally:
        for q in queries:
            q.stop()
        shutil.rmtree(work, ignore_errors=True)
    return run


def _batch_ms(query: Any, window: tuple[float, float]) -> list[int]:
    return [int(p["durationMs"]["triggerExecution"]) for p in _measured(query, window)]


def _measured(query: Any, window: tuple[float, float]) -> list[dict[str, Any]]:
    """The query's progress reports of micro-batches that started inside ``window``."""
    out = []
    for p in query.recentProgress:
        p = p if isinstance(p, dict) else json.loads(p.json)
        t = calendar.timegm(time.strptime(p["timestamp"][:19], "%Y-%m-%dT%H:%M:%S"))
        if window[0] <= t <= window[1]:
            out.append(p)
    return out


def parser() -> argparse.ArgumentParser:
    """``bench/run.py latency`` options."""
    ap = argparse.ArgumentParser(prog="bench/run.py latency", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help=f"comma-separated, of {', '.join(WORKLOADS)}")
    ap.add_argument("--engines", default="native,interlace",
                    help="native, interlace, floor (no rows out: its batch times only; "
                    "chain-session: both queries', the channel between them), floor-tws (the "
                    "floor on transformWithStateInPandas: --stores rocksdb)")
    ap.add_argument("--rates", default="1000,4000", help="input rows per second (per input)")
    ap.add_argument("--stores", default="hdfs", help="hdfs, rocksdb")
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds dropped at the start")
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds measured")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs per point, the engines interleaved (each repeat reverses their "
                    "order); --plot takes each point's median")
    ap.add_argument("--reader-trigger", default=None,
                    help="chain-session: the trigger of interlace's query reading the channel "
                    "(default: interlace run --continuous's, '1 second')")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting of the session (repeatable; recorded in each run's "
                    "summary), e.g. spark.sql.shuffle.partitions=2 (default 4)")
    ap.add_argument("--out", type=Path, default=None, help="append each run's summary (JSONL)")
    ap.add_argument("--plot", type=Path, nargs="+", default=None, metavar="JSONL",
                    help="measure nothing: plot these --out files into --png (matplotlib, the "
                    "`bench` extra)")
    ap.add_argument("--png", type=Path, default=Path(__file__).resolve().parents[3] / "docs"
                    / "performance-latency.png")
    return ap


def medians(files: list[Path]) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    """Each point (workload, engine, store, rate) of the files: the median of its repeats'
    percentiles and batch times (``repeats``: how many). A later file's runs of a point
    replace an earlier file's."""
    runs: dict[tuple[str, str, str, int], tuple[Path, list[dict[str, Any]]]] = {}
    for f in files:
        for line in f.read_text().splitlines():
            r = json.loads(line)
            key = (r["workload"], r["engine"], r["store"], r["rate"])
            if key not in runs or runs[key][0] != f:
                runs[key] = (f, [])
            runs[key][1].append(r)
    return {key: _point(rs) for key, (_, rs) in runs.items()}


def median_points(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    """:func:`medians` of the runs of one measurement (summaries, not files)."""
    runs: dict[tuple[str, str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        runs.setdefault((r["workload"], r["engine"], r["store"], r["rate"]), []).append(r)
    return {key: _point(rs) for key, rs in runs.items()}


def _point(rs: list[dict[str, Any]]) -> dict[str, Any]:
    """One point: its last run's fields, each figure the median over its runs."""
    point = dict(rs[-1], repeats=len(rs))
    point.pop("repeat", None)
    for h in ("p50_ms", "p95_ms", "p99_ms", "max_ms", "processed_per_s", "batch_ms_p50",
              "upstream_batch_ms_p50"):
        point[h] = _median([r[h] for r in rs if r.get(h) is not None])
    return point


def plot(files: list[Path], png: Path) -> list[dict[str, Any]]:
    """p50 and p99 against the input rate, one panel per workload, one line per engine and
    store (each point the median of its repeats, :func:`medians`); return the points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    points = medians(files)
    workloads = [w for w in WORKLOADS if any(k[0] == w for k in points)]
    cols = min(len(workloads), 4)
    nrows = -(-len(workloads) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 3.2 * nrows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(workloads):]:
        ax.set_visible(False)
    for ax, workload in zip(flat, workloads, strict=False):
        series = sorted({(k[1], k[2]) for k, r in points.items()
                         if k[0] == workload and r["p99_ms"] is not None})  # a floor: none
        for engine, store in series:
            rows = sorted((r for k, r in points.items()
                           if k[:3] == (workload, engine, store)), key=lambda r: r["rate"])
            rates = [r["rate"] for r in rows]
            color = "tab:blue" if engine == "interlace" else "tab:gray"
            style = "-" if store == "hdfs" else "--"
            ax.plot(rates, [r["p99_ms"] / 1000 for r in rows], style, color=color,
                    marker="o" if store == "hdfs" else "s", label=f"{engine} p99 ({store})")
            ax.plot(rates, [r["p50_ms"] / 1000 for r in rows], style, color=color, marker=".",
                    alpha=0.45, label=f"{engine} p50 ({store})")
        ax.set_title(workload)
        ax.set_xlabel("input rows/s (per input)")
        ax.set_xscale("log")
        ticks = sorted({k[3] for k in points if k[0] == workload})
        ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("latency beyond the semantics (s)")
    flat[len(workloads) - 1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return list(points.values())


def main(argv: list[str] | None = None) -> int:
    """Run every (workload, rate, store, engine), one query at a time; print a table."""
    from harness.spark import open_session, parse_conf

    args = parser().parse_args(argv)
    if args.plot:
        print(_table(sorted(plot(args.plot, args.png),
                            key=lambda r: (WORKLOADS.index(r["workload"]), r["rate"],
                                           r["store"], r["engine"])), "repeats"))
        print(f"wrote {args.png}")
        return 0
    engines, workloads = args.engines.split(","), args.workloads.split(",")
    for flag, named, known in (("--engines", engines, ENGINES),
                               ("--workloads", workloads, WORKLOADS)):
        unknown = [n for n in named if n not in known]
        if unknown:
            raise SystemExit(f"{flag}: unknown {', '.join(unknown)}; choose of "
                             f"{', '.join(known)}")
    conf = parse_conf(args.conf)
    spark = open_session(conf)
    rows = []
    for workload in workloads:
        for rate in (int(r) for r in args.rates.split(",")):
            for store in args.stores.split(","):
                for rep, engine in schedule(engines, args.repeats):
                    s = measure(spark, workload, engine, rate, store, args.warmup,
                                args.seconds, args.reader_trigger).summary()
                    s["repeat"] = rep
                    if conf:
                        s["conf"] = conf
                    rows.append(s)
                    print(json.dumps(s), flush=True)
                    if args.out is not None:
                        with args.out.open("a") as fh:
                            fh.write(json.dumps(s) + "\n")
    print(_table(rows))
    return 0


def schedule(engines: list[str], repeats: int) -> list[tuple[int, str]]:
    """(repeat, engine) in the order they run: each repeat runs every engine, in turn
    reversed, so a drift of the machine or the JVM over the runs touches each engine alike."""
    return [(rep, e) for rep in range(repeats) for e in (engines if rep % 2 == 0
                                                         else engines[::-1])]


def _table(rows: list[dict[str, Any]], last: str = "repeat",
           middle: tuple[str, ...] = ("upstream_batch_ms_p50",)) -> str:
    head = ("workload", "rate", "store", "engine", "p50_ms", "p95_ms", "p99_ms", "max_ms",
            "processed_per_s", "rows_out", "batch_ms_p50", *middle, last)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r.get(h)) for h in head) + " |" for r in rows]
    return "\n".join(lines)
