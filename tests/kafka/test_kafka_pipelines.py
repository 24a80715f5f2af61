"""Kafka in, Kafka out: a topic read as a table converges to the DuckDB target's table.

Each case runs one pipeline twice on the same input topics (two checkpoints): into a Kafka
topic (the Kafka target) and into DuckDB. The topic, read back with ``read_committed`` as a
compacted topic keeps it (each key's last value; a tombstone removes the key), must hold
exactly the DuckDB table's rows: a tumbling window under ``reopen`` (revisions), a table
aggregation (a changelog by group, deletes), a table-table join whose tables hold several
versions of each key (as before compaction) against the same join on the compacted table;
then bad input: malformed values dead-lettered with their topic, partition, offset and raw
bytes, a NULL key on a table topic counted, a tombstone for a key never seen.
"""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import pytest
from cli_support import run_here
from kafka_support import kafka_options, ms, source_toml, spark_toml, target_toml, values
from kafka_support import write_pipeline as write

from interlace.preflight import preflight
from interlace.runner import run_pipeline
from interlace.testing.kafka import create_topic, produce, read_table, read_topic

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

BASE = dt.datetime(2026, 1, 1)


def at(sec: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=sec)


def iso(x):
    if isinstance(x, dt.datetime):
        return x.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return x


def duckdb_rows(path, table):
    con = duckdb.connect(str(path), read_only=True)
    try:
        cur = con.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        return sorted(json.dumps({n: iso(v) for n, v in zip(names, row, strict=True)},
                                 sort_keys=True) for row in cur.fetchall())
    finally:
        con.close()


def topic_rows(broker, topic):
    return sorted(json.dumps(v, sort_keys=True) for v in read_table(broker.bootstrap, topic).values())


def run_into_both(spark, broker, tmp_path, name, body, out_topic, table):
    """Run ``body`` (sources and transform) into ``out_topic`` and into DuckDB ``table``."""
    kafka = f'name = "{name}"\n\n{body}' + target_toml(broker.bootstrap, out_topic) + \
        spark_toml("ck-kafka")
    local = (f'name = "{name}"\n\n{body}[target]\nkind = "duckdb"\npath = "out.duckdb"\n'
             f'table = "{table}"\n\n' + spark_toml("ck-duckdb"))
    write(tmp_path, "to_kafka", kafka)
    write(tmp_path, "to_duckdb", local)
    progress = run_here(spark, tmp_path, "to_kafka.toml")
    run_here(spark, tmp_path, "to_duckdb.toml")
    return progress, duckdb_rows(tmp_path / "out.duckdb", table)


CLICKS = "user STRING, n BIGINT, ts TIMESTAMP"


def test_tumbling_reopen_revisions_converge_on_a_compacted_topic(spark, broker, topics,
                                                                 tmp_path):
    clicks, out = topics("clicks"), topics("per-10s")
    create_topic(broker.bootstrap, clicks, 1)  # one partition: two records per micro-batch
    create_topic(broker.bootstrap, out, 2, compacted=True)
    # Batch 3 closes [0, 10) and [10, 20) (wm 26); batch 4's rows revise [10, 20), batch
    # 6's a@29 revises [20, 30), its b@1 is beyond the 15 s allowance (dropped).
    rows = [("a", 1, 1), ("a", 3, 3), ("a", 3, 12), ("b", 1, 14), ("a", 5, 25), ("b", 2, 26),
            ("a", 1, 27), ("b", 1, 27),
            ("a", 2, 15), ("b", 7, 18), ("a", 1, 40), ("b", 2, 41), ("a", 9, 29), ("b", 4, 1),
            ("a", 1, 70), ("b", 1, 70)]
    produce(broker.bootstrap, clicks,
            [(u, {"user": u, "n": n, "ts": at(s).isoformat() + "Z"}) for u, n, s in rows])
    body = (source_toml("clicks", broker.bootstrap, clicks, CLICKS, event_time="ts",
                        record_time=False, maxOffsetsPerTrigger="2")
            + '[transform.window]\nkind = "tumbling"\nduration_ms = 10_000\ngroup_by = ["user"]\n'
              'lateness_ms = 0\nlate_data = "reopen"\nallowed_lateness_ms = 15_000\n'
              'max_groups_per_window = 1_000\n\n'
              '[[transform.window.aggregations]]\nagg = "sum"\ncolumn = "n"\nas = "total"\n\n'
              '[[transform.window.aggregations]]\nagg = "count"\nas = "clicks"\n\n')
    progress, want = run_into_both(spark, broker, tmp_path, "per-10s", body, out, "per_10s")
    assert want, progress
    assert topic_rows(broker, out) == want
    revised = [v for v in values(read_topic(broker.bootstrap, out)) if v and v["revision"] > 0]
    assert revised, (progress, values(read_topic(broker.bootstrap, out)))  # the late rows re-emitted their windows: the topic kept the last revision


ACCOUNTS = "region STRING, balance BIGINT"


def test_table_aggregation_changelog_converges_with_deletes(spark, broker, topics, tmp_path):
    accounts, out = topics("accounts"), topics("per-region")
    # lateness 60 s: the two partitions' records interleave freely and none is late.
    create_topic(broker.bootstrap, accounts, 2, compacted=True)
    create_topic(broker.bootstrap, out, 1, compacted=True)
    records = [("x1", {"region": "eu", "balance": 10}, 1), ("x2", {"region": "eu", "balance": 5}, 2),
               ("x3", {"region": "us", "balance": 7}, 3), ("x1", {"region": "us", "balance": 4}, 5),
               ("x3", None, 6),  # deleted: us keeps x1 only
               ("x2", {"region": "eu", "balance": 8}, 8), ("x4", {"region": "apac", "balance": 1}, 9),
               ("x4", None, 10),  # apac's only account goes: the group is deleted
               ("zz", {"region": "eu", "balance": 0}, 100)]  # moves the watermark on
    produce(broker.bootstrap, accounts, [(k, v, ms(at(s))) for k, v, s in records])
    body = (source_toml("accounts", broker.bootstrap, accounts, ACCOUNTS, event_time="ts",
                        extra='tombstone_column = "deleted"\n', maxOffsetsPerTrigger="3")
            + '[transform.aggregate]\nkeys = ["key"]\ngroup_by = ["region"]\n'
              'lateness_ms = 60_000\n'
              'tombstone_column = "deleted"\n\n'
              '[[transform.aggregate.aggregations]]\nagg = "count"\nas = "accounts"\n\n'
              '[[transform.aggregate.aggregations]]\nagg = "sum"\ncolumn = "balance"\n'
              'as = "total"\n\n')
    progress, want = run_into_both(spark, broker, tmp_path, "per-region", body, out, "per_region")
    assert topic_rows(broker, out) == want
    regions = {json.loads(k)["region"]: v for k, v in read_table(broker.bootstrap, out).items()}
    assert set(regions) == {"eu", "us"}, progress  # apac was deleted: a tombstone
    assert (regions["us"]["accounts"], regions["us"]["total"]) == (1, 4)
    tombstones = [r for r in read_topic(broker.bootstrap, out) if r["value"] is None]
    assert [json.loads(r["key"])["region"] for r in tombstones] == ["apac"]


CUSTOMERS, BALANCES = "name STRING", "balance BIGINT"


def _table_join_body(broker, left, right, how="left"):
    return (source_toml("customers", broker.bootstrap, left, CUSTOMERS)
            + source_toml("accounts", broker.bootstrap, right, BALANCES)
            + '[transform.join]\nkind = "table"\nleft_source = "customers"\n'
              'right_source = "accounts"\nleft_keys = ["key"]\nright_keys = ["key"]\n'
              f'how = "{how}"\nlateness_ms = 0\nkey_groups = 2\n\n')


def test_a_table_topic_before_compaction_gives_the_compacted_result(spark, broker, topics,
                                                                     tmp_path):
    """Several versions per key (as a compacted topic holds them until the cleaner runs)
    give the table the topic's last versions alone give, in Kafka and in DuckDB."""
    names = {f"c{i}": [f"n{i}.{j}" for j in range(3)] for i in range(6)}
    full, compacted = [], []
    for i, (k, versions) in enumerate(names.items()):
        for j, name in enumerate(versions):
            full.append((k, {"name": name}, ms(at(10 * j + i))))
        compacted.append((k, {"name": versions[-1]}, ms(at(20 + i))))
    deleted = ("c5", None, ms(at(30)))
    full.append(deleted)
    compacted.append(deleted)
    accounts = [(f"c{i}", {"balance": 100 * i}, ms(at(i))) for i in range(0, 6, 2)]
    end = [("zz", {"name": "end"}, ms(at(1_000)))]  # moves the watermark past every version
    got = {}
    for label, left_rows in (("full", full), ("compacted", compacted)):
        left, right, out = (topics(f"{name}-{label}")
                            for name in ("customers", "accounts", "joined"))
        for t in (left, right, out):
            create_topic(broker.bootstrap, t, 2, compacted=True)
        produce(broker.bootstrap, left, left_rows + end)
        produce(broker.bootstrap, right, accounts + [("zz", {"balance": 0}, ms(at(1_000)))])
        folder = tmp_path / label
        _, want = run_into_both(spark, broker, folder, "customers-accounts",
                                _table_join_body(broker, left, right), out, "joined")
        got[label] = topic_rows(broker, out)
        assert got[label] == want
    strip = [{k: v for k, v in json.loads(r).items() if k not in ("version", "event_time")}
             for r in got["full"]]
    strip_c = [{k: v for k, v in json.loads(r).items() if k not in ("version", "event_time")}
               for r in got["compacted"]]
    assert strip == strip_c
    # c5 deleted; zz's updates are at the final watermark, so still held (emit final).
    assert {r["key"]: r["left_name"] for r in strip} == {f"c{i}": f"n{i}.2" for i in range(5)}


def test_malformed_values_are_dead_letters_with_topic_partition_offset_and_bytes(
        spark, broker, topics, tmp_path):
    clicks, out, dead = topics("clicks"), topics("per-10s"), topics("dead")
    create_topic(broker.bootstrap, clicks, 1)
    create_topic(broker.bootstrap, out, 1)
    create_topic(broker.bootstrap, dead, 1)
    good = [("a", {"user": "a", "n": i, "ts": at(i).isoformat() + "Z"}) for i in range(1, 4)]
    produce(broker.bootstrap, clicks, [
        *good,
        ("a", b"not json {"),                                       # offset 3: not JSON
        ("a", {"user": "a", "n": "many", "ts": at(5).isoformat()}),  # offset 4: not the schema
        ("a", b"\xff\xfe"),                                         # offset 5: not UTF-8
        ("a", {"user": "a", "n": 9, "ts": at(30).isoformat() + "Z"}),
    ])
    body = (f'name = "bad-values"\n\n'
            + source_toml("clicks", broker.bootstrap, clicks, CLICKS, event_time="ts",
                          record_time=False)
            + '[transform.window]\nkind = "tumbling"\nduration_ms = 10_000\ngroup_by = ["user"]\n'
              'lateness_ms = 0\nlate_data = "dlq"\nmax_groups_per_window = 1_000\n\n'
              '[[transform.window.aggregations]]\nagg = "count"\nas = "clicks"\n\n'
            + target_toml(broker.bootstrap, out)
            + target_toml(broker.bootstrap, dead, table="dead_letter")
            + spark_toml("ck"))
    write(tmp_path, "p", body)
    summary = run_pipeline(preflight(tmp_path / "p.toml", base=tmp_path), base=tmp_path,
                           spark=spark)
    assert summary.malformed == 3
    letters = [json.loads(v["dead_letter"]) for v in values(read_topic(broker.bootstrap, dead))]
    assert {d["reason"] for d in letters} == {"null_event_time"}
    corrupt = sorted((json.loads(d["row"]["_corrupt_record"]) for d in letters),
                     key=lambda c: c["offset"])
    assert [(c["topic"], c["partition"], c["offset"]) for c in corrupt] == \
        [(clicks, 0, 3), (clicks, 0, 4), (clicks, 0, 5)]
    assert corrupt[0]["value"] == "not json {"
    assert '"n": "many"' in corrupt[1]["value"]
    assert corrupt[2]["value_base64"] == "//4="
    windows = values(read_topic(broker.bootstrap, out))
    assert [(w["user"], w["clicks"]) for w in windows] == [("a", 3)]  # [0, 10s): the 3 good


def test_null_key_on_a_table_topic_is_counted_and_a_never_seen_tombstone_changes_nothing(
        spark, broker, topics, tmp_path):
    left, right, out = topics("customers"), topics("accounts"), topics("joined")
    # A compacted topic refuses a record without a key (the broker validates it): the NULL
    # key comes from an uncompacted table topic (a CDC feed's, say).
    create_topic(broker.bootstrap, left, 1)
    for t in (right, out):
        create_topic(broker.bootstrap, t, 1, compacted=True)
    produce(broker.bootstrap, left, [("c1", {"name": "Ann"}, ms(at(1))),
                                     (None, {"name": "nobody"}, ms(at(2))),
                                     ("zz", {"name": "end"}, ms(at(100)))])
    produce(broker.bootstrap, right, [("ghost", None, ms(at(3))),  # deletes a key never seen
                                      ("c1", {"balance": 5}, ms(at(4))),
                                      ("zz", {"balance": 0}, ms(at(100)))])
    body = ('name = "nulls"\n\n' + _table_join_body(broker, left, right, how="full")
            + target_toml(broker.bootstrap, out) + spark_toml("ck"))
    write(tmp_path, "p", body)
    summary = run_pipeline(preflight(tmp_path / "p.toml", base=tmp_path), base=tmp_path,
                           spark=spark)
    null_keys = {k: v for k, v in summary.counters.items() if "null_key" in k}
    assert sum(null_keys.values()) == 1, summary.counters
    records = read_topic(broker.bootstrap, out)
    keys = [json.loads(r["key"])["key"] for r in records]
    assert "ghost" not in keys and None not in keys
    table = {json.loads(k)["key"]: (v["left_name"], v["right_balance"])
             for k, v in read_table(broker.bootstrap, out).items()}
    assert table == {"c1": ("Ann", 5)}  # zz is still held: its updates are at the watermark


def test_target_options_reach_the_producer(spark, broker, topics, tmp_path):
    """``kafka.``-prefixed target options go to the producer (here: a bad acks is refused)."""
    src, out = topics("in"), topics("out")
    create_topic(broker.bootstrap, src, 1)
    create_topic(broker.bootstrap, out, 1)
    produce(broker.bootstrap, src, [("a", {"user": "a", "n": 1, "ts": at(1).isoformat() + "Z"})])
    opts = kafka_options(broker.bootstrap, topic=out, **{"kafka.acks": "0"})
    body = (f'name = "acks"\n\n'
            + source_toml("clicks", broker.bootstrap, src, CLICKS, event_time="ts",
                          record_time=False)
            + '[transform.window]\nkind = "tumbling"\nduration_ms = 10_000\n'
              'max_groups_per_window = 1_000\n\n'
              '[[transform.window.aggregations]]\nagg = "count"\nas = "clicks"\n\n'
            + f'[target]\nkind = "kafka"\noptions = {opts}\n\n' + spark_toml("ck"))
    write(tmp_path, "p", body)
    with pytest.raises(Exception, match="acks"):  # idempotence (transactions) needs acks=all
        run_pipeline(preflight(tmp_path / "p.toml", base=tmp_path), base=tmp_path, spark=spark)
