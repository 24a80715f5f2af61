"""``kafka_input`` on the connector's columns, without a broker: keys, tombstones, bad values.

A batch DataFrame with the Kafka source's schema (``key``, ``value`` as binary, ``topic``,
``partition``, ``offset``, ``timestamp``) stands in for the connector's rows.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from interlace import kafka_input
from interlace.operators.errors import ConfigError

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1)
SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
          "timestamp TIMESTAMP")


def records(spark, rows):
    data = [(None if k is None else k.encode(), None if v is None else
             (v if isinstance(v, bytes) else v.encode()), "t", 0, i, T0 + dt.timedelta(seconds=i))
            for i, (k, v) in enumerate(rows)]
    return spark.createDataFrame(data, SCHEMA)


def test_json_keys_tombstones_and_bad_records(spark):
    df = records(spark, [
        ('{"customer": "c1"}', '{"tier": "gold", "ts": "2026-01-01T00:01:00Z"}'),
        ('{"customer": "c1"}', None),                                   # a tombstone
        ('not json', '{"tier": "x", "ts": "2026-01-01T00:02:00Z"}'),     # a bad key
        ('{"customer": "c2"}', '{"tier": 5, "ts": "soon"}'),             # not the schema
        ('{"customer": "c3"}', '{}'),                                    # no fields: an update
    ])
    out = kafka_input(df, "tier STRING, ts TIMESTAMP", key_format="json",
                      key_schema="customer STRING", timestamp_column="kafka_ts",
                      tombstone_column="deleted", event_time_column="ts")
    assert out.columns == ["customer", "tier", "ts", "kafka_ts", "deleted", "_corrupt_record"]
    rows = [r.asDict() for r in out.orderBy("kafka_ts").collect()]
    assert (rows[0]["customer"], rows[0]["tier"], rows[0]["ts"]) == (
        "c1", "gold", T0 + dt.timedelta(minutes=1))
    # The tombstone: no fields, so the record's timestamp is its event time; deleted = true.
    assert (rows[1]["tier"], rows[1]["ts"], rows[1]["deleted"]) == (
        None, T0 + dt.timedelta(seconds=1), True)
    assert rows[1]["_corrupt_record"] is None
    for bad, offset in ((rows[2], 2), (rows[3], 3)):
        assert bad["ts"] is None and bad["tier"] is None and bad["deleted"] is False
        corrupt = json.loads(bad["_corrupt_record"])
        assert (corrupt["topic"], corrupt["partition"], corrupt["offset"]) == ("t", 0, offset)
    assert json.loads(rows[2]["_corrupt_record"])["key"] == "not json"
    assert (rows[4]["customer"], rows[4]["tier"], rows[4]["deleted"]) == ("c3", None, False)
    assert rows[4]["ts"] is None and rows[4]["_corrupt_record"] is None  # {} parses: no time


def test_string_keys_and_the_record_timestamp_as_event_time(spark):
    df = records(spark, [("a", '{"n": 1}'), (None, '{"n": 2}'), ("b", b"\xff")])
    out = kafka_input(df, "n BIGINT", timestamp_column="t", event_time_column="t")
    rows = [r.asDict() for r in out.orderBy("n").collect()]
    by_key = {r["key"]: r for r in rows}
    assert by_key["a"]["t"] == T0 and by_key[None]["n"] == 2
    bad = by_key["b"]
    assert bad["t"] is None and json.loads(bad["_corrupt_record"])["value_base64"] == "/w=="


def test_a_value_schema_that_is_not_fields_is_refused(spark):
    df = records(spark, [("a", "1")])
    with pytest.raises(ConfigError, match="event_time_column 'nope'"):
        kafka_input(df, "n BIGINT", event_time_column="nope")
    with pytest.raises(ConfigError, match="key_format"):
        kafka_input(df, "n BIGINT", key_format="avro")
