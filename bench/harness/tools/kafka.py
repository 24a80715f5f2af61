"""Kafka in, Kafka out: interlace vs Spark's native operators on the same broker, same run.

    .venv/bin/python bench/run.py kafka                     # 20,000 rows per input per batch
    .venv/bin/python bench/run.py kafka --rows 5000 --batches 3 --runs 1   # a smoke run

A real broker (:class:`interlace.testing.kafka.KafkaBroker`, 1 GB heap) holds each workload's
input topics (two partitions, JSON values, written before any query starts). Workloads:

* ``join``: a stream-stream inner join, ``|r.ts - l.ts| <= 5 s``, 10,000 keys, each
  micro-batch 10 s of event time per input, ``lateness_ms`` 2 s; a sentinel batch far ahead
  flushes it.
* ``tumbling``: count and sum per key and 10 s tumbling window, 10,000 keys, ``lateness_ms``
  2 s.

Engines, each one query, ``availableNow``, ``maxOffsetsPerTrigger`` = ``--rows`` per topic
(``maxFilesPerTrigger`` 1 for files), every output row written to a fresh topic:

* ``passthrough``: the inputs decoded (``kafka_input``) and written back as JSON, no
  operator: what the broker and Spark's Kafka source and sink cost;
* ``native``: Spark's interval join / ``groupBy(window(...))`` on the decoded inputs;
* ``interlace``: interlace's operator on the same inputs;

all three written with Spark's own Kafka sink (``to_kafka_columns``: the same sink for every
engine, so the ratio is the operators'); and

* ``interlace-eo``: interlace's operator into its exactly-once Kafka target
  (:class:`~interlace.connectors.kafka.KafkaTarget`: the batch collected to the driver, one
  transaction), what ``[target] kind = "kafka"`` costs;
* ``native-files`` / ``interlace-files``: the same operators reading the same rows from
  Parquet files (one per micro-batch) into the same sink: the file-source ratio in the same
  run, against which the Kafka ratio is read.

The engines are interleaved within each of ``--runs`` repeats; the best run counts. Each
engine's output row count is checked: native and interlace agree, and the exactly-once
target writes interlace's rows (read back with ``read_committed``). Results:
``bench/results/<date>-kafka.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parents[2] / "results"
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SPAN_MS = 10_000  # event time per micro-batch
KEYS = 10_000
SCHEMA = "k BIGINT, ts TIMESTAMP, v BIGINT"
ENGINES = ("passthrough", "native", "interlace", "interlace-eo", "native-files",
           "interlace-files")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bench/run.py kafka", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000, help="rows per input per micro-batch")
    ap.add_argument("--batches", type=int, default=6, help="micro-batches of data")
    ap.add_argument("--runs", type=int, default=2, help="repeats (engines interleaved)")
    ap.add_argument("--workloads", default="join,tumbling")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--stores", default="hdfs", help="hdfs and/or rocksdb")
    ap.add_argument("--out", type=Path, default=None, help="report path (.md; .json beside)")
    return ap


def _rows(rng: np.random.Generator, rows: int, batches: int, offset_ms: int) -> list[dict]:
    out = []
    for b in range(batches):
        ts = BASE_MS + b * SPAN_MS + np.sort(rng.integers(0, SPAN_MS, rows)) + offset_ms
        ks = rng.integers(0, KEYS, rows)
        vs = rng.integers(0, 1000, rows)
        out += [{"k": int(k), "ts": _iso(int(t)), "v": int(v)} for k, t, v in zip(ks, ts, vs)]
    end = BASE_MS + (batches + 100) * SPAN_MS
    out.append({"k": -1, "ts": _iso(end), "v": 0})  # flushes the watermark
    return out


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


def make_inputs(broker: Any, workload: str, rows: int, batches: int, root: Path) -> dict:
    """Topics and Parquet folders of one workload's inputs; returns their names and sizes."""
    import pandas as pd

    from interlace.testing.kafka import create_topic, produce

    rng = np.random.default_rng(20261201)
    sides = ("left", "right") if workload == "join" else ("clicks",)
    inputs = {}
    for i, side in enumerate(sides):
        data = _rows(rng, rows, batches, offset_ms=i * 1_000)
        topic = f"{workload}-{side}"
        create_topic(broker.bootstrap, topic, 2)
        produce(broker.bootstrap, topic, [(str(r["k"]), r) for r in data])
        folder = root / workload / side
        folder.mkdir(parents=True)
        frame = pd.DataFrame(data)
        frame["ts"] = pd.to_datetime(frame["ts"], utc=True)  # TIMESTAMP (adjusted to UTC)
        now = time.time() - 1_000
        parts = [frame.iloc[b * rows:(b + 1) * rows] for b in range(batches)] + [frame.iloc[-1:]]
        for b, part in enumerate(parts):
            path = folder / f"part-{b:04d}.parquet"
            part.to_parquet(path, index=False, coerce_timestamps="us",
                            allow_truncated_timestamps=True)
            os.utime(path, (now + b, now + b))  # the file source orders files by mtime
        inputs[side] = {"topic": topic, "folder": folder, "rows": len(data)}
    return inputs


def _read(spark: Any, broker: Any, inp: dict, rows: int, files: bool) -> Any:
    from interlace import kafka_input

    if files:
        return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
                .parquet(str(inp["folder"])))
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
           .option("subscribe", inp["topic"]).option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", str(rows)).load())
    return kafka_input(raw, "k BIGINT, ts TIMESTAMP, v BIGINT", event_time_column="ts"
                       ).drop("key", "_corrupt_record")


def build(spark: Any, broker: Any, workload: str, engine: str, inputs: dict, rows: int) -> Any:
    """The output DataFrame of one engine on one workload."""
    from pyspark.sql import functions as F

    from interlace import Aggregation, Join, Window, stream_join, window_aggregate

    files = engine.endswith("-files")
    op = engine.removesuffix("-files").removesuffix("-eo")
    frames = {side: _read(spark, broker, inp, rows, files) for side, inp in inputs.items()}
    if op == "passthrough":
        out = None
        for f in frames.values():
            out = f if out is None else out.unionByName(f)
        return out
    if workload == "join":
        left, right = frames["left"], frames["right"]
        if op == "native":
            cond = F.expr("l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL 5 SECONDS AND "
                          "l.ts + INTERVAL 5 SECONDS")
            joined = left.withWatermark("ts", "2 seconds").alias("l").join(
                right.withWatermark("ts", "2 seconds").alias("r"), cond, "inner")
            return joined.select(*(F.col(f"{s[0]}.{c}").alias(f"{s}_{c}")
                                   for s in ("left", "right") for c in ("k", "ts", "v")))
        spec = Join(left_keys=["k"], right_keys=["k"], how="inner", time_window_ms=5_000,
                    event_time_column="ts", lateness_ms=2_000, key_groups=16)
        return stream_join(left, right, spec)
    clicks = frames["clicks"]
    if op == "native":
        return (clicks.withWatermark("ts", "2 seconds")
                .groupBy(F.window("ts", "10 seconds"), "k")
                .agg(F.count(F.lit(1)).alias("n"), F.sum("v").alias("total"))
                .select(F.col("window.start").alias("window_start"),
                        F.col("window.end").alias("window_end"), "k", "n", "total"))
    spec = Window(kind="tumbling", duration_ms=10_000, event_time_column="ts", group_by=["k"],
                  lateness_ms=2_000, max_groups_per_window=1_000_000, key_groups=16,
                  aggregations=[Aggregation(agg="count", as_="n"),
                                Aggregation(agg="sum", column="v", as_="total")])
    return window_aggregate(clicks, spec)


def run_engine(spark: Any, broker: Any, workload: str, engine: str, inputs: dict, rows: int,
               work: Path, tag: str) -> dict:
    """One timed run: build, start, wait; seconds, rows in, rows out (read back)."""
    from interlace import to_kafka_columns
    from interlace.connectors.kafka import KafkaTarget
    from interlace.testing.kafka import create_topic, read_topic

    out_topic = f"out-{workload}-{engine}-{tag}"
    create_topic(broker.bootstrap, out_topic, 2)
    df = build(spark, broker, workload, engine, inputs, rows)
    ckpt = work / f"ck-{workload}-{engine}-{tag}"
    writer = df.writeStream.option("checkpointLocation", str(ckpt)).trigger(availableNow=True)
    target = None
    if engine == "interlace-eo":
        target = KafkaTarget(broker.bootstrap, out_topic, f"bench-{tag}")
        target.prepare(df.schema)
        t = target
        writer = writer.foreachBatch(lambda b, i: t.write(b.toPandas(), i))
    else:
        writer = (to_kafka_columns(df).writeStream.format("kafka")
                  .option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("topic", out_topic)
                  .option("checkpointLocation", str(ckpt)).trigger(availableNow=True))
    start = time.perf_counter()
    q = writer.start()
    q.awaitTermination()
    seconds = time.perf_counter() - start
    batches = len(q.recentProgress)
    if target is not None:
        target.close()
    out_rows = len(read_topic(broker.bootstrap, out_topic, timeout_s=120))
    shutil.rmtree(ckpt, ignore_errors=True)
    rows_in = sum(i["rows"] for i in inputs.values())
    return {"workload": workload, "engine": engine, "seconds": round(seconds, 2),
            "rows_in": rows_in, "rows_out": out_rows, "batches": batches,
            "rows_per_s": round(rows_in / seconds)}


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def report(results: list[dict], args: argparse.Namespace, versions: dict) -> str:
    """The markdown report: best run per engine, the ratios, every run."""
    best: dict[tuple[str, str, str], dict] = {}
    for r in results:
        key = (r["store"], r["workload"], r["engine"])
        if key not in best or r["rows_per_s"] > best[key]["rows_per_s"]:
            best[key] = r
    lines = [f"# Kafka in, Kafka out: interlace vs native ({dt.date.today().isoformat()})", "",
             f"Command: `{' '.join(['bench/run.py', 'kafka', *sys.argv[2:]])}`. "
             f"{args.rows:,} rows per input per micro-batch, {args.batches} micro-batches, "
             f"best of {args.runs} (engines interleaved). " + ", ".join(
                 f"{k} {v}" for k, v in versions.items() if k != "interlace_path"), "",
             "Input rows per second (every input's rows, sentinels included, over the query's "
             "wall time):", "",
             "| store | workload | passthrough | native | interlace | interlace / native "
             "(Kafka) | interlace / native (files) | interlace exactly-once | eo / interlace |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for store in sorted({k[0] for k in best}):
        for w in sorted({k[1] for k in best if k[0] == store}):
            def rps(e: str, store: str = store, w: str = w) -> float | None:
                r = best.get((store, w, e))
                return r["rows_per_s"] if r else None
            cells = [f"{rps(e):,.0f}" if rps(e) else "-" for e in
                     ("passthrough", "native", "interlace")]
            lines.append(
                f"| {store} | {w} | {' | '.join(cells)} | "
                f"{_ratio(rps('interlace'), rps('native'))} | "
                f"{_ratio(rps('interlace-files'), rps('native-files'))} | "
                f"{rps('interlace-eo') or 0:,.0f} | "
                f"{_ratio(rps('interlace-eo'), rps('interlace'))} |")
    lines += ["", "Every run (seconds from start to the end of `awaitTermination`, rows read "
              "from every input, rows read back from the output topic):", "",
              "| run | store | workload | engine | seconds | rows in | rows out | batches |",
              "|---:|---|---|---|---:|---:|---:|---:|"]
    lines += [f"| {r['run']} | {r['store']} | {r['workload']} | {r['engine']} | {r['seconds']} | "
              f"{r['rows_in']:,} | {r['rows_out']:,} | {r['batches']} |" for r in results]
    return "\n".join(lines) + "\n"


def check(results: list[dict]) -> list[str]:
    """Native and interlace write the same number of rows; so does the exactly-once target."""
    problems = []
    for key in {(r["store"], r["workload"], r["run"]) for r in results}:
        got = {r["engine"]: r["rows_out"] for r in results
               if (r["store"], r["workload"], r["run"]) == key}
        ops = {e: n for e, n in got.items() if e != "passthrough"}
        if len(set(ops.values())) > 1:
            problems.append(f"{key}: output rows differ: {ops}")
    return problems


def main(argv: list[str] | None = None) -> int:
    from harness.spark import versions

    from interlace import local_session
    from interlace.session import state_store_conf
    from interlace.testing.kafka import KafkaBroker, spark_conf_for_kafka

    args = parser().parse_args(argv)
    workloads = args.workloads.split(",")
    engines = args.engines.split(",")
    unknown = [e for e in engines if e not in ENGINES] + [
        w for w in workloads if w not in ("join", "tumbling")]
    if unknown:
        print(f"unknown engine or workload: {unknown} (engines: {ENGINES})", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="interlace-bench-kafka-"))
    results: list[dict] = []
    with KafkaBroker(heap="1g") as broker:
        spark = local_session("bench-kafka", shuffle_partitions=4, conf=spark_conf_for_kafka())
        inputs = {w: make_inputs(broker, w, args.rows, args.batches, work / "inputs")
                  for w in workloads}
        for store in args.stores.split(","):
            for k, v in state_store_conf(store).items():
                spark.conf.set(k, v)
            for run in range(args.runs):
                for w in workloads:
                    for e in engines:
                        r = run_engine(spark, broker, w, e, inputs[w], args.rows, work,
                                       f"{store}-{run}")
                        r.update(store=store, run=run)
                        results.append(r)
                        print(json.dumps(r), flush=True)
        spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    problems = check(results)
    text = report(results, args, versions())
    if problems:
        text += "\n**Checks failed:** " + "; ".join(problems) + "\n"
    out = args.out or RESULTS / f"{dt.date.today().isoformat()}-kafka.md"
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    print(text)
    return 1 if problems else 0
