"""The Kafka helpers in Python, for a query of one's own: ``kafka_input``, ``kafka_writer``,
``to_kafka_columns``.

Seed 003's KTable-KTable join written by hand: both compacted topics read with
``spark.readStream.format("kafka")`` and decoded by :func:`interlace.kafka_input`, joined by
:func:`interlace.table_join`, written by :func:`interlace.kafka_writer` in ``foreachBatch``
(exactly once: a micro-batch handed to it again is skipped) and, beside it, by Spark's own
Kafka sink from :func:`interlace.to_kafka_columns` (at least once). Both topics, read as
tables, hold the seed's last row; the writer's holds each change once.
"""

from __future__ import annotations

import json

import pytest
from kafka_support import ms

import interlace.testing.seed003_tables as seed
from interlace import TableJoin, kafka_input, kafka_writer, table_join, to_kafka_columns
from interlace.testing.kafka import create_topic, produce, read_table, read_topic

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_a_table_join_by_hand_through_kafka_input_and_kafka_writer(spark, broker, topics,
                                                                   tmp_path):
    left, right, out, spark_out = (topics(n) for n in ("left", "right", "out", "spark-sink"))
    for t in (left, right, out, spark_out):
        create_topic(broker.bootstrap, t, 2, compacted=True)
    for side, topic in (("left", left), ("right", right)):
        produce(broker.bootstrap, topic, [
            (seed.KEY, None if v is None else {"v": v}, ms(seed.at(ts)))
            for ts, s, v, *_ in seed.TABLE_TABLE if s == side])

    def read(topic):
        raw = (spark.readStream.format("kafka")
               .option("kafka.bootstrap.servers", broker.bootstrap)
               .option("subscribe", topic).option("startingOffsets", "earliest").load())
        return kafka_input(raw, "v STRING", timestamp_column="event_time",
                           event_time_column="event_time")

    spec = TableJoin(left_keys=["key"], right_keys=["key"], how="full", emit="eager",
                     event_time_column="event_time", lateness_ms=0, key_groups=2)
    joined = table_join(read(left), read(right), spec)
    writer = kafka_writer(broker.bootstrap, out, "seed003-by-hand", key=("key",),
                          changelog=True)
    seen = []

    def both(df, batch_id):
        df.persist()
        writer(df, batch_id)
        writer(df, batch_id)  # as Spark replays a batch after a crash: skipped
        seen.append(batch_id)
        (to_kafka_columns(df, ("key",), changelog=True).write.format("kafka")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", spark_out)
         .save())
        df.unpersist()

    q = (joined.writeStream.foreachBatch(both).trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    q.awaitTermination()
    assert seen
    records = read_topic(broker.bootstrap, out)
    got = [("delete", None, None) if r["value"] is None else
           ("upsert", json.loads(r["value"])["left_v"], json.loads(r["value"])["right_v"])
           for r in records]
    want = [(c.op, c.left, c.right) for e in seed.TABLE_TABLE if (c := e[5]) is not None]
    assert got == want
    for topic in (out, spark_out):
        table = read_table(broker.bootstrap, topic)
        assert [(json.loads(k), v["left_v"], v["right_v"]) for k, v in table.items()] == \
            [({"key": seed.KEY}, "D", "d")]
    assert "op" not in json.loads(records[0]["value"])
    assert writer.target.last_committed == max(seen)
