"""The crash matrix on Kafka: SIGKILL ``interlace run`` of a Kafka → Kafka pipeline, restart.

Two pipelines read topics of a real broker and write a topic with the Kafka target: a left
join of orders and payments (append output) and a table aggregation of an accounts table
topic (a changelog by region, deletes as tombstones). Each is run once uninterrupted into a
reference topic, then again into a fresh topic with ``interlace run`` killed (SIGKILL of the
driver and its JVM) at crash points (:data:`interlace.faults.CRASH_POINTS`: after the batch's
state is written, inside the target's Kafka transaction, after its commit and before Spark's
commit log) and at timed instants, and restarted from the checkpoint after each kill. Read
with ``read_committed``, the topic must hold what the reference holds: the join's rows, each
exactly once; the aggregation's table (each region's last value), with no change of a region
written twice (each ``version`` once). A ``read_uncommitted`` read shows what aborted
attempts left (the kill inside the transaction), which ``read_committed`` never returns.

CI kills each pipeline five times on one state store each (ten instants), each kill chosen to
fire. ``INTERLACE_CRASH_MATRIX=full`` runs both pipelines on both stores with ten seeded kills
each, as ``tests/cli/test_crash_matrix.py`` does: over fresh trials (a new checkpoint and output
topic each, :func:`interlace.testing.crash.fresh_trials`) until every seeded kill has found a
run to interrupt, each trial's topic checked against the reference; each case asserts that its
ten kills fired, and ``INTERLACE_CRASH_REPORT=<file>`` appends its trials (the kills, which
fired, the batches of each run) to that file (docs/kafka.md, docs/reliability.md).
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from cli_support import run_here
from kafka_support import ms, source_toml, spark_toml, target_toml, values, write_pipeline

from interlace.testing.crash import (
    Kill,
    append_report,
    fresh_trials,
    run_with_kills,
    seeded_kills,
)
from interlace.testing.kafka import create_topic, produce, read_table, read_topic

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

FULL = os.environ.get("INTERLACE_CRASH_MATRIX") == "full"
POINTS = ("batch", "target-uncommitted", "target-committed")
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def iso(sec: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(BASE_MS / 1000 + sec, tz=timezone.utc).isoformat()


def join_inputs(broker, topics):
    orders, payments = topics("orders"), topics("payments")
    create_topic(broker.bootstrap, orders, 2)
    create_topic(broker.bootstrap, payments, 2)
    o, p = [], []
    for b in range(8):
        for i in range(6):
            oid = b * 10 + i
            o.append((str(oid), {"order_id": oid, "amount": float(i), "order_ts": iso(b * 60 + i * 5)}))
            if i % 2:
                p.append((str(oid), {"order_id": oid, "paid": float(i),
                                     "pay_ts": iso(b * 60 + i * 5 + 20)}))
    o.append(("-1", {"order_id": -1, "amount": 0.0, "order_ts": iso(5_000)}))
    p.append(("-1", {"order_id": -1, "paid": 0.0, "pay_ts": iso(5_000)}))
    produce(broker.bootstrap, orders, o)
    produce(broker.bootstrap, payments, p)
    return orders, payments


def join_pipeline(broker, inputs, out, store):
    orders, payments = inputs
    return ('name = "paid-orders"\n\n'
            + source_toml("orders", broker.bootstrap, orders,
                          "order_id BIGINT, amount DOUBLE, order_ts TIMESTAMP",
                          event_time="order_ts", record_time=False, maxOffsetsPerTrigger="4")
            + source_toml("payments", broker.bootstrap, payments,
                          "order_id BIGINT, paid DOUBLE, pay_ts TIMESTAMP",
                          event_time="pay_ts", record_time=False, maxOffsetsPerTrigger="2")
            + '[transform.join]\nleft_source = "orders"\nright_source = "payments"\n'
              'left_keys = ["order_id"]\nright_keys = ["order_id"]\nhow = "left"\n'
              'lower_ms = 0\nupper_ms = 60_000\nlateness_ms = 30_000\nkey_groups = 4\n\n'
            + target_toml(broker.bootstrap, out)
            + spark_toml("checkpoint", store))


def aggregate_inputs(broker, topics):
    accounts = topics("accounts")
    create_topic(broker.bootstrap, accounts, 2, compacted=True)
    regions = ["eu", "us", "apac"]
    records, now = [], {}
    for i in range(120):  # accounts move between regions (every 40 updates) and are deleted
        key = f"a{i % 12}"
        value = (None if i % 11 == 10 else
                 {"region": regions[(i % 12 + i // 40) % 3], "balance": i})
        records.append((key, value, BASE_MS + i * 5_000))
        now[key] = value and value["region"]
    # Then apac's accounts are all deleted: the region goes (a tombstone of its group).
    for j, key in enumerate(k for k, r in sorted(now.items()) if r == "apac"):
        records.append((key, None, BASE_MS + (121 + j) * 5_000))
    records.append(("end", {"region": "eu", "balance": 0}, BASE_MS + 10_000_000))
    produce(broker.bootstrap, accounts, records)
    return (accounts,)


def aggregate_pipeline(broker, inputs, out, store):
    (accounts,) = inputs
    return ('name = "accounts-per-region"\n\n'
            + source_toml("accounts", broker.bootstrap, accounts, "region STRING, balance BIGINT",
                          event_time="ts", extra='tombstone_column = "deleted"\n',
                          maxOffsetsPerTrigger="6")
            + '[transform.aggregate]\nkeys = ["key"]\ngroup_by = ["region"]\n'
              'lateness_ms = 60_000\ntombstone_column = "deleted"\n\n'
              '[[transform.aggregate.aggregations]]\nagg = "count"\nas = "accounts"\n\n'
              '[[transform.aggregate.aggregations]]\nagg = "sum"\ncolumn = "balance"\n'
              'as = "total"\n\n'
            + target_toml(broker.bootstrap, out)
            + spark_toml("checkpoint", store))


def check_join(broker, got_topic, want_topic):
    got = Counter(json.dumps(v, sort_keys=True) for v in values(read_topic(broker.bootstrap, got_topic)))
    want = Counter(json.dumps(v, sort_keys=True) for v in values(read_topic(broker.bootstrap, want_topic)))
    assert sum(want.values()) > 40
    assert got == want, ("lost", want - got, "twice or wrong", got - want)


def check_aggregate(broker, got_topic, want_topic):
    records = read_topic(broker.bootstrap, got_topic)
    changes = Counter((r["key"], None if r["value"] is None else json.loads(r["value"])["version"])
                      for r in records if r["value"] is not None)
    assert all(n == 1 for n in changes.values()), [c for c, n in changes.items() if n > 1]
    assert read_table(broker.bootstrap, got_topic) == read_table(broker.bootstrap, want_topic)
    assert any(r["value"] is None for r in records)  # a region emptied: its tombstone


PIPELINES = {
    "join": (join_inputs, join_pipeline, check_join, "hdfs",
             [Kill(point="batch", nth=2), Kill(point="target-uncommitted", nth=1),
              Kill(seconds=1.5), Kill(point="target-committed", nth=2),
              Kill(point="target-uncommitted", nth=1)]),
    "aggregate": (aggregate_inputs, aggregate_pipeline, check_aggregate, "rocksdb",
                  [Kill(point="target-uncommitted", nth=1), Kill(point="batch", nth=2),
                   Kill(point="target-committed", nth=1), Kill(seconds=1.0),
                   Kill(point="target-uncommitted", nth=1)]),
}
CASES = [(name, store) for name, (*_, ci_store, _kills) in PIPELINES.items()
         for store in (("hdfs", "rocksdb") if FULL else (ci_store,))]


def killed_trial(name, store, broker, inputs, want, folder, out, kills, spark, *,
                 stop_when_finished):
    """One trial: the pipeline into the fresh topic ``out`` from a fresh checkpoint in
    ``folder``, killed and restarted per ``kills`` (the finishing run in this process), then
    ``out`` read back against the reference topic ``want``. With ``stop_when_finished`` the kills
    stop once a run finishes the inputs (the report's ``unused`` kills are for a fresh trial).
    """
    _, pipeline, check, *_ = PIPELINES[name]
    create_topic(broker.bootstrap, out, 2, compacted=name == "aggregate")
    write_pipeline(folder, "p", pipeline(broker, inputs, out, store))
    report = run_with_kills("p.toml", folder, kills, stop_when_finished=stop_when_finished,
                            finish=lambda: run_here(spark, folder, "p.toml"))
    check(broker, out, want)
    # A kill inside a transaction left records that only read_uncommitted returns.
    if any(r.killed and r.kill.point == "target-uncommitted" for r in report.runs):
        assert len(read_topic(broker.bootstrap, out, committed=False)) > \
            len(read_topic(broker.bootstrap, out))
    return report


@pytest.mark.parametrize(("name", "store"), CASES)
def test_killed_kafka_pipeline_reads_back_exactly_once(name, store, spark, broker, topics,
                                                       tmp_path):
    make_inputs, pipeline, _, _, ci_kills = PIPELINES[name]
    inputs = make_inputs(broker, topics)
    want = topics("reference")
    create_topic(broker.bootstrap, want, 2, compacted=name == "aggregate")
    write_pipeline(tmp_path / "reference", "p", pipeline(broker, inputs, want, store))
    run_here(spark, tmp_path / "reference", "p.toml")
    if not FULL:  # CI: one trial, every kill chosen to fire
        report = killed_trial(name, store, broker, inputs, want, tmp_path / "killed",
                              topics("killed"), ci_kills, spark, stop_when_finished=False)
        print(f"\n{name} on {store}:\n{report.summary()}")
        assert report.kills == len(ci_kills), report.summary()
        return
    seed = sum(map(ord, f"{name}/{store}"))
    kills = seeded_kills(seed, 10, points=POINTS, max_seconds=5.0)

    def trial(i, remaining):
        return killed_trial(name, store, broker, inputs, want, tmp_path / f"trial{i}",
                            topics(f"killed{i}"), remaining, spark, stop_when_finished=True)

    trials = fresh_trials(kills, trial)
    print(f"\nkafka {name} on {store} (seed {seed}): {trials.fired} kills fired, never: "
          f"{[str(k) for k in trials.never]}\n{trials.summary()}")
    append_report(os.environ.get("INTERLACE_CRASH_REPORT"),
                  trials.record(suite="kafka", pipeline=name, store=store, seed=seed))
    assert trials.fired == len(kills), trials.summary()
