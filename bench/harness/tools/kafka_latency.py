"""``bench/run.py kafka-latency``: the latency tool's join and tumbling window on a real
broker, topics in and a topic out, native vs interlace beside the broker's own floor.

The latency is the one :mod:`harness.tools.latency` measures, per output row: the wall time
it is out, minus the moment its semantics first allows it (event time = generation time, the
same rules). What changes is where both ends are (the latency tool: Spark's ``rate`` source,
and the moment its ``foreachBatch`` sink has collected the row's micro-batch):

* **Input:** a producer thread in the driver writes R records per second to each input topic
  (JSON values, two partitions, ``confluent-kafka`` with ``linger.ms`` 5); a record's event
  time ``ts`` is the wall time at which it was produced.
* **Output:** every engine's rows go to a fresh topic through Spark's own Kafka sink
  (``to_kafka_columns``; ``interlace-eo``: interlace's exactly-once target, each micro-batch
  one transaction written from the driver); a consumer thread reads that topic
  (``read_committed``) and notes, per record, the wall time it received it: "out" is
  visible to a consumer of the output topic. The row's allowed time travels in its value
  (``allowed_us``, computed as in the latency tool).

So a row's latency runs from its input record's production (or, for a join's and a window's
rows, from when the semantics allows them: the later input record, the window's end plus the
lateness) until a consumer of the output topic sees it: the broker both ways, Spark's Kafka
source and sink, the trigger's wait, the operator, the state commit and the watermark's extra
micro-batch. ``passthrough`` (the inputs decoded and written back, no operator; a record is
allowed when it is produced) is that path without an operator: the broker's floor.

Workloads: ``join-inner`` (the latency tool's: a right record carries a left record's key
0-5 s later, window +-6 s, lateness 2 s) and ``tumbling`` (5.3 s windows over 100 keys,
lateness 2 s). Engines ``passthrough``, ``native``, ``interlace`` (default) and
``interlace-eo``, interleaved within each repeat (each repeat reversed), each run on fresh
topics; the broker (:class:`interlace.testing.kafka.KafkaBroker`, 1 GB heap) serves them all.

    .venv/bin/python bench/run.py kafka-latency --rates 1000 --repeats 3

Each run's summary is a line of ``--out`` (JSONL, the latency tool's fields with ``source``
``kafka``, ``produced_per_s`` and ``rows_read``); the tables at the end are every run and the
median of each point's repeats (:func:`harness.tools.latency.median_points`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from harness.tools.latency import (
    DELAY_S,
    JOIN_WINDOW_MS,
    LATENESS_MS,
    TRIGGER,
    WINDOW_MS,
    Run,
    _batch_ms,
    _measured,
    _native_join,
    _table,
    median_points,
    schedule,
)

WORKLOADS = ("join-inner", "tumbling")
ENGINES = ("passthrough", "native", "interlace", "interlace-eo")
DEFAULT_ENGINES = "passthrough,native,interlace"
#: Each input's JSON value's fields, and its topics' names.
SCHEMAS = {"left": "lid BIGINT, lts TIMESTAMP", "right": "rid BIGINT, rts TIMESTAMP",
           "clicks": "k BIGINT, v BIGINT, ts TIMESTAMP"}
SIDES = {"join-inner": ("left", "right"), "tumbling": ("clicks",)}
#: The tables' columns of a Kafka run beside the latency tool's (the median table: the last
#: run's, not medians).
KAFKA_COLUMNS = ("produced_per_s", "rows_read")


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def records(workload: str, i: int, rate: int, now: float) -> list[tuple[str, str, dict]]:
    """``(side, key, value)`` of the ``i``-th tick of ``workload``'s inputs at ``now``.

    join-inner: left ``lid = i``; right ``rid = i - (i * 7919 % (5 R))``, the left record it
    matches produced 0-5 s earlier (none below 0), as the latency tool's rate sources.
    tumbling: ``k = i % 100``, ``v = i``.
    """
    ts = _iso(now)
    if workload == "tumbling":
        return [("clicks", str(i % 100), {"k": i % 100, "v": i, "ts": ts})]
    out = [("left", str(i), {"lid": i, "lts": ts})]
    rid = i - i * 7919 % (DELAY_S * rate)
    if rid >= 0:
        out.append(("right", str(rid), {"rid": rid, "rts": ts}))
    return out


class Producer(threading.Thread):
    """Writes ``rate`` ticks per second of ``workload``'s inputs until stopped; counts them."""

    def __init__(self, bootstrap: str, workload: str, topics: dict[str, str], rate: int) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer as KafkaProducer

        self.producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                       "log_level": 0})
        self.workload, self.topics, self.rate = workload, topics, rate
        self.stop_event = threading.Event()
        self.ticks: list[float] = []  # the wall time of each second's first tick
        self.produced = 0

    def run(self) -> None:
        start = time.time()
        while not self.stop_event.is_set():
            now = time.time()
            due = int((now - start) * self.rate)
            while self.produced < due:
                for side, key, value in records(self.workload, self.produced, self.rate, now):
                    self.producer.produce(self.topics[side], key=key, value=json.dumps(value))
                self.produced += 1
            self.producer.poll(0)
            time.sleep(0.005)
        self.producer.flush(30)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=60)


class Consumer(threading.Thread):
    """Reads ``topic`` from its beginning; each record's receive time minus its allowed time."""

    def __init__(self, bootstrap: str, topic: str, window: tuple[float, float]) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        from confluent_kafka import Consumer as KafkaConsumer

        self.consumer = KafkaConsumer({
            "bootstrap.servers": bootstrap, "group.id": f"latency-{uuid.uuid4()}",
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50, "log_level": 0})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
        self.window = window
        self.stop_event = threading.Event()
        self.latencies: list[float] = []
        self.received = 0

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                msgs = self.consumer.consume(1000, timeout=0.05)
                now = time.time()
                self.received += len(msgs)
                if not self.window[0] <= now <= self.window[1]:
                    continue
                for m in msgs:
                    if m.error() is None and m.value() is not None:
                        allowed = json.loads(m.value())["allowed_us"] / 1e6
                        self.latencies.append(now - allowed)
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)


def _fields(side: str) -> list[str]:
    """The names of a side's value fields (its id or key first, its event time last)."""
    return [f.split()[0] for f in SCHEMAS[side].split(", ")]


def _read(spark: Any, bootstrap: str, topic: str, side: str) -> Any:
    from interlace import kafka_input

    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).option("startingOffsets", "earliest").load())
    return kafka_input(raw, SCHEMAS[side], event_time_column=_fields(side)[-1]).select(
        *_fields(side))


def build(spark: Any, bootstrap: str, workload: str, engine: str,
          topics: dict[str, str]) -> Any:
    """The engine's output with its rows' allowed time (``allowed_us``, µs) as a column."""
    from pyspark.sql import functions as F

    from interlace import Aggregation, Join, Window, stream_join, window_aggregate

    frames = {side: _read(spark, bootstrap, topic, side) for side, topic in topics.items()}
    op = engine.removesuffix("-eo")
    if op == "passthrough":
        parts = [f.select(F.col(_fields(side)[0]).alias("id"),
                          F.col(_fields(side)[-1]).alias("ts"))
                 for side, f in frames.items()]
        out = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        return out.withColumn("allowed_us", F.unix_micros("ts"))
    if workload == "join-inner":
        left, right = frames["left"], frames["right"]
        if op == "native":
            out = _native_join(left, right, "inner").select(
                F.col("lid").alias("left_lid"), F.col("lts").alias("left_lts"),
                F.col("rid").alias("right_rid"), F.col("rts").alias("right_rts"))
        else:
            out = stream_join(left, right, Join(
                left_keys=["lid"], right_keys=["rid"], how="inner",
                time_window_ms=JOIN_WINDOW_MS, left_event_time_column="lts",
                right_event_time_column="rts", lateness_ms=LATENESS_MS))
        allowed = F.greatest(F.unix_micros("left_lts"), F.unix_micros("right_rts"))
        return out.withColumn("allowed_us", allowed)
    clicks = frames["clicks"]
    if op == "native":
        out = (clicks.withWatermark("ts", f"{LATENESS_MS} milliseconds")
               .groupBy(F.window("ts", f"{WINDOW_MS} milliseconds").alias("w"), "k")
               .agg(F.count(F.lit(1)).alias("n"), F.sum("v").alias("s"))
               .select(F.col("w.end").alias("window_end"), "k", "n", "s"))
    else:
        out = window_aggregate(clicks, Window(
            kind="tumbling", duration_ms=WINDOW_MS, event_time_column="ts", group_by=["k"],
            lateness_ms=LATENESS_MS, max_groups_per_window=1_000_000,
            aggregations=[Aggregation(agg="count", as_="n"),
                          Aggregation(agg="sum", column="v", as_="s")]))
    return out.withColumn("allowed_us",
                          F.unix_micros("window_end") + F.lit(LATENESS_MS * 1000))


def measure(spark: Any, broker: Any, workload: str, engine: str, rate: int, store: str,
            warmup_s: float, seconds: float, tag: str) -> dict[str, Any]:
    """One run on fresh topics: produce at ``rate``, run the engine, consume its output; its
    summary (:meth:`harness.tools.latency.Run.summary`, with what was produced and read)."""
    from harness.spark import use_store

    from interlace import to_kafka_columns
    from interlace.connectors.kafka import KafkaTarget
    from interlace.testing.kafka import create_topic

    use_store(spark, store)
    topics = {side: f"{workload}-{side}-{tag}" for side in SIDES[workload]}
    out_topic = f"{workload}-out-{engine}-{tag}"
    for t in (*topics.values(), out_topic):
        create_topic(broker.bootstrap, t, 2)
    work = Path(tempfile.mkdtemp(prefix=f"kafka-latency-{workload}-{engine}-"))
    run = Run(workload, engine, rate, store)
    df = build(spark, broker.bootstrap, workload, engine, topics)
    writer = (df.writeStream.option("checkpointLocation", str(work / "checkpoint"))
              .trigger(processingTime=TRIGGER))
    target = None
    if engine == "interlace-eo":
        target = KafkaTarget(broker.bootstrap, out_topic, f"latency-{tag}")
        target.prepare(df.schema)
        t = target
        writer = writer.foreachBatch(lambda b, i: t.write(b.toPandas(), i))
    else:
        writer = (to_kafka_columns(df).writeStream.format("kafka")
                  .option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("topic", out_topic)
                  .option("checkpointLocation", str(work / "checkpoint"))
                  .trigger(processingTime=TRIGGER))
    start = time.time()
    window = (start + warmup_s, start + warmup_s + seconds)
    consumer = Consumer(broker.bootstrap, out_topic, window)
    producer = Producer(broker.bootstrap, workload, topics, rate)
    consumer.start()
    producer.start()
    query = writer.start()
    produced_at_window: list[int] = []
    try:
        while time.time() < window[1]:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            if not produced_at_window and time.time() >= window[0]:
                produced_at_window.append(producer.produced)
            time.sleep(0.2)
        produced_at_window.append(producer.produced)
        for p in _measured(query, window):
            run.input_rows += int(p["numInputRows"])
            run.batches += 1
        run.batch_ms = _batch_ms(query, window)
        run.seconds = seconds
    finally:
        query.stop()
        producer.stop()
        consumer.stop()
        if target is not None:
            target.close()
        shutil.rmtree(work, ignore_errors=True)
    run.latencies = consumer.latencies
    s = run.summary()
    # produced_per_s: ticks per second (each a record per input; join-inner's right side
    # skips its first 5 s of keys), what the producer kept up in the measured window.
    ticks = produced_at_window[-1] - produced_at_window[0] if len(produced_at_window) > 1 else 0
    s.update(source="kafka", produced_per_s=round(ticks / seconds), rows_read=consumer.received)
    return s


def parser() -> argparse.ArgumentParser:
    """``bench/run.py kafka-latency`` options (``bench/run.py latency``'s that apply)."""
    ap = argparse.ArgumentParser(prog="bench/run.py kafka-latency",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help=f"comma-separated, of {', '.join(WORKLOADS)}")
    ap.add_argument("--engines", default=DEFAULT_ENGINES,
                    help=f"comma-separated, of {', '.join(ENGINES)} (interlace-eo: interlace "
                    "into its exactly-once Kafka target)")
    ap.add_argument("--rates", default="1000", help="records per second (per input topic)")
    ap.add_argument("--stores", default="hdfs", help="hdfs, rocksdb")
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds dropped at the start")
    ap.add_argument("--seconds", type=float, default=40.0, help="seconds measured")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs per point, the engines interleaved (each repeat reverses their "
                    "order)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting of the session (repeatable)")
    ap.add_argument("--out", type=Path, default=None, help="append each run's summary (JSONL)")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Every (workload, rate, store), the engines interleaved ``--repeats`` times, one query
    at a time on one broker; a table of every run, then of the medians."""
    from harness.spark import open_session, parse_conf

    from interlace.testing.kafka import KafkaBroker, spark_conf_for_kafka

    args = parser().parse_args(argv)
    workloads, engines = args.workloads.split(","), args.engines.split(",")
    for flag, named, known in (("--engines", engines, ENGINES),
                               ("--workloads", workloads, WORKLOADS)):
        unknown = [n for n in named if n not in known]
        if unknown:
            raise SystemExit(f"{flag}: unknown {', '.join(unknown)}; choose of "
                             f"{', '.join(known)}")
    conf = parse_conf(args.conf)
    rows = []
    with KafkaBroker(heap="1g") as broker:
        spark = open_session({**spark_conf_for_kafka(), **conf})
        n = 0
        for workload in workloads:
            for rate in (int(r) for r in args.rates.split(",")):
                for store in args.stores.split(","):
                    for rep, engine in schedule(engines, args.repeats):
                        s = measure(spark, broker, workload, engine, rate, store, args.warmup,
                                    args.seconds, f"{n}")
                        n += 1
                        s["repeat"] = rep
                        if conf:
                            s["conf"] = conf
                        rows.append(s)
                        print(json.dumps(s), flush=True)
                        if args.out is not None:
                            with args.out.open("a") as fh:
                                fh.write(json.dumps(s) + "\n")
        spark.stop()
    print(_table(rows, middle=KAFKA_COLUMNS))
    print()
    print(_table(list(median_points(rows).values()), "repeats", middle=KAFKA_COLUMNS))
    return 0
