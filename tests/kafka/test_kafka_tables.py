"""Seed 003's tables through a real broker: compacted topics in, a changelog topic out.

Each input record of the seed is a Kafka record (key ``k1``, value ``{"v": ...}`` or a null
value, a tombstone, with the seed's time as its record timestamp) on a compacted topic; the
pipeline (``interlace run``'s runner, on the test session) reads both topics as tables, joins
them and writes the changelog to a topic with the Kafka target. Read back with
``read_committed``, the topic holds the seed's changes for ``k1`` in order (an upsert as the
row's JSON, a delete as a tombstone), and as a table (last value per key) the seed's final
row. The stream-table join (KStream-KTable) and a tumbling window run likewise.
"""

from __future__ import annotations

import json

import pytest
from cli_support import run_here
from kafka_support import ms, source_toml, spark_toml, target_toml, values, write_pipeline

import interlace.testing.seed003_tables as seed
from interlace.testing.kafka import create_topic, produce, read_table, read_topic

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

HOWS = {"inner": 3, "left": 4, "full": 5}  # the seed column of each how


def _table_records(side):
    return [(seed.KEY, None if v is None else {"v": v}, ms(seed.at(ts)))
            for ts, s, v, *_ in seed.TABLE_TABLE if s == side]


@pytest.mark.parametrize("how", list(HOWS))
def test_seed003_ktable_ktable_from_compacted_topics(spark, broker, topics, tmp_path, how):
    left, right, out = topics("left"), topics("right"), topics("joined")
    for t in (left, right, out):
        create_topic(broker.bootstrap, t, 2, compacted=True)
    produce(broker.bootstrap, left, _table_records("left"))
    produce(broker.bootstrap, right, _table_records("right"))
    text = (f'name = "seed003-{how}"\n\n'
            + source_toml("left", broker.bootstrap, left, "v STRING")
            + source_toml("right", broker.bootstrap, right, "v STRING")
            + '[transform.join]\nkind = "table"\nleft_source = "left"\nright_source = "right"\n'
              'left_keys = ["key"]\nright_keys = ["key"]\n'
              f'how = "{how}"\nemit = "eager"\nlateness_ms = 0\nkey_groups = 2\n\n'
            + target_toml(broker.bootstrap, out)
            + spark_toml("checkpoint"))
    write_pipeline(tmp_path, "p", text)
    run_here(spark, tmp_path, "p.toml")
    records = read_topic(broker.bootstrap, out)
    assert {json.loads(r["key"])["key"] for r in records} == {seed.KEY}
    got = [("delete", None, None) if v is None else ("upsert", v["left_v"], v["right_v"])
           for v in values(records)]
    want = [(c.op, c.left, c.right) for e in seed.TABLE_TABLE if (c := e[HOWS[how]]) is not None]
    assert got == want
    # As a compacted topic (or a KTable) reads it: the seed's last row, D - d.
    table = read_table(broker.bootstrap, out)
    assert [(json.loads(k)["key"], v["left_v"], v["right_v"]) for k, v in table.items()] == \
        [(seed.KEY, "D", "d")]
    # A rerun from the checkpoint writes nothing more.
    run_here(spark, tmp_path, "p.toml")
    assert len(read_topic(broker.bootstrap, out)) == len(records)


def test_seed003_kstream_ktable_from_a_topic_and_a_compacted_topic(spark, broker, topics,
                                                                     tmp_path):
    stream, table, out = topics("stream"), topics("table"), topics("enriched")
    create_topic(broker.bootstrap, stream, 2)
    create_topic(broker.bootstrap, table, 2, compacted=True)
    create_topic(broker.bootstrap, out, 2)
    rows = {"left": [], "right": []}
    for ts, side, v, *_ in seed.STREAM_TABLE:
        rows[side].append((seed.KEY, None if v is None else {"v": v}, ms(seed.at(ts))))
    for side in rows:  # the sentinel moves the watermark past every record (emit final)
        rows[side].append((seed.SENTINEL_KEY, {"v": "S"}, ms(seed.at(seed.SENTINEL_SECONDS))))
    produce(broker.bootstrap, stream, rows["left"])
    produce(broker.bootstrap, table, rows["right"])
    text = ('name = "seed003-stream-table"\n\n'
            + source_toml("orders", broker.bootstrap, stream, "v STRING")
            + source_toml("tiers", broker.bootstrap, table, "v STRING")
            + '[transform.join]\nkind = "stream_table"\nleft_source = "orders"\n'
              'right_source = "tiers"\nleft_keys = ["key"]\nright_keys = ["key"]\n'
              'how = "left"\nlateness_ms = 0\nkey_groups = 2\n\n'
            + target_toml(broker.bootstrap, out)
            + spark_toml("checkpoint"))
    write_pipeline(tmp_path, "p", text)
    run_here(spark, tmp_path, "p.toml")
    got = sorted((v["left_v"], v["right_v"]) for v in values(read_topic(broker.bootstrap, out))
                 if v["left_key"] == seed.KEY)
    assert got == sorted(p for e in seed.STREAM_TABLE for p in e[4])
