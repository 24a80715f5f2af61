"""Replay tests on real Spark: the table-table join against its oracle (SEMANTICS §7, §9).

Seed 003's KTable-KTable table (inner, left, full with one update per micro-batch; full
under eager with all updates in one), a random split with out-of-order and late updates under
dlq with a tombstone column, NULL keys and widened key types (counters checked), a restart
from the checkpoint mid-log, input errors before any query and the low-level
``applyInPandasWithState`` usage. One session-scoped SparkSession (tests/conftest.py).
"""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest
from pyspark.sql import types as T

import interlace.testing.seed003_tables as seed
from interlace import TableJoin, table_join
from interlace.metrics import counters
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles.table import oracle_table_join
from interlace.testing.replay import replay_join

pytestmark = pytest.mark.spark

BASE = dt.datetime(2026, 1, 1)
SEED_SCHEMA = T.StructType([
    T.StructField("k", T.StringType()),
    T.StructField("v", T.StringType()),
    T.StructField("event_time", T.TimestampType()),
])
CUSTOMERS = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("name", T.StringType()),
    T.StructField("deleted", T.BooleanType()),
    T.StructField("ts", T.TimestampType()),
])
ACCOUNTS = T.StructType([
    T.StructField("id", T.IntegerType()),  # widened to bigint against the left key
    T.StructField("balance", T.LongType()),
    T.StructField("deleted", T.BooleanType()),
    T.StructField("ts", T.TimestampType()),
])
HOWS = {"inner": 3, "left": 4, "full": 5}  # the seed column of each how


def at(sec: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=sec)


def assert_matches_oracle(result, log, spec, left, right):
    """Per batch, Spark's output equals the oracle's on the log as Spark scheduled it."""
    scheduled = result.scheduled(log, JoinBatch)
    want = oracle_table_join(spec, scheduled, left_columns=left.names, right_columns=right.names)
    assert [b.watermark_ms for b in result.batches] == want.spark_watermarks_ms
    got, want_by = result.rows_by_batch(), want.rows_by_batch()
    for b in sorted(set(got) | set(want_by)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(want_by.get(b, [])), f"batch {b}"
    return want


def seed_changes(result, how):
    rows = sorted((r for _, r in result.rows if r["k"] == seed.KEY), key=lambda r: r["version"])
    got = [(r["op"], r["left_v"], r["right_v"]) for r in rows]
    want = [(c.op, c.left, c.right) for e in seed.TABLE_TABLE if (c := e[HOWS[how]]) is not None]
    return got, want


# The full join runs in the compatibility tier (.ci/compat) on every PySpark line.
@pytest.mark.parametrize("how", [pytest.param(h, marks=pytest.mark.compat) if h == "full" else h
                                 for h in HOWS])
def test_seed003_ktable_ktable_one_update_per_batch(spark, how, tmp_path):
    spec = TableJoin(how=how, key_groups=2, **seed.TABLE_TABLE_KWARGS)
    log = seed.table_table_log(one_per_batch=True)
    result = replay_join(spark, log, SEED_SCHEMA, SEED_SCHEMA,
                         lambda left, right: table_join(left, right, spec), workdir=tmp_path)
    assert_matches_oracle(result, log, spec, SEED_SCHEMA, SEED_SCHEMA)
    got, want = seed_changes(result, how)
    assert got == want


def test_seed003_all_in_one_batch_under_eager(spark, tmp_path):
    spec = TableJoin(how="full", emit="eager", key_groups=2, **seed.TABLE_TABLE_KWARGS)
    log = seed.table_table_log(one_per_batch=False, sentinel=False)
    result = replay_join(spark, log, SEED_SCHEMA, SEED_SCHEMA,
                         lambda left, right: table_join(left, right, spec), workdir=tmp_path)
    assert_matches_oracle(result, log, spec, SEED_SCHEMA, SEED_SCHEMA)
    got, want = seed_changes(result, "full")
    assert got == want and {b for b, _ in result.rows} == {0}


def random_log(seed_=5, n_batches=5):
    """Out-of-order and late updates of both tables, deletes by column, NULL keys."""
    rnd = random.Random(seed_)
    log = []
    for b in range(n_batches):
        def rows(tag):
            out = []
            for i in range(rnd.randint(2, 5)):
                key = rnd.choice([1, 2, 3, None])
                gone = rnd.random() < 0.2
                value = f"{tag}{b}.{i}" if tag == "C" else b * 10 + i
                row = {"id": key, "deleted": gone, "ts": at(10 * b + rnd.randint(-12, 3))}
                row["name" if tag == "C" else "balance"] = value
                out.append(row)
            return tuple(out)
        log.append(JoinBatch(left=rows("C"), right=rows("A")))
    sentinel = {"id": 99, "deleted": False, "ts": at(1_000)}
    return [*log, JoinBatch(left=({**sentinel, "name": "S"},),
                            right=({**sentinel, "balance": 0},))]


def test_random_split_late_updates_under_dlq_and_counters(spark, tmp_path):
    spec = TableJoin(left_keys=["id"], right_keys=["id"], how="full", emit="eager",
                     event_time_column="ts", lateness_ms=4_000, tombstone_column="deleted",
                     late_data="dlq", dlq_horizon_ms=3_600_000, key_groups=3)
    log = random_log()
    acc = counters(spark)
    result = replay_join(spark, log, CUSTOMERS, ACCOUNTS,
                         lambda left, right: table_join(left, right, spec, counters=acc),
                         workdir=tmp_path)
    want = assert_matches_oracle(result, log, spec, CUSTOMERS, ACCOUNTS)
    letters = [json.loads(r["_dead_letter"]) for _, r in result.rows if r["_dead_letter"]]
    assert letters and all(d["reason"] == "late" for d in letters)
    for side in ("left", "right"):
        assert acc.value.get(f"dead_lettered_{side}", 0) == want.dead_lettered[side]
        assert acc.value.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped[side]
    assert sum(want.null_key_dropped.values()) > 0
    assert any(r["op"] == "delete" for _, r in result.rows)


def in_order_log(n_batches=5, per_side=5, keys=4):
    """Updates of both tables in every batch (Spark forgets per-input watermarks on restart,
    so a batch with one input only would move W differently after it), tombstones included."""
    rnd = random.Random(12)
    log = []
    for b in range(n_batches):
        def rows(tag):
            return tuple({"k": f"k{rnd.randrange(keys)}",
                          "v": None if rnd.random() < 0.2 else f"{tag}{b}_{i}",
                          "event_time": at(b * 10 + rnd.randrange(10_000) / 1000)}
                         for i in range(per_side))
        log.append(JoinBatch(left=rows("L"), right=rows("R")))
    sentinel = {"k": "z", "v": "S", "event_time": at(10_000)}
    return [*log, JoinBatch(left=(sentinel,), right=(sentinel,))]


def test_restart_from_checkpoint_mid_log_matches_the_oracle(spark, tmp_path):
    spec = TableJoin(left_keys=["k"], right_keys=["k"], event_time_column="event_time",
                     how="left", lateness_ms=3_000, key_groups=2)
    log = in_order_log()
    result = replay_join(spark, log, SEED_SCHEMA, SEED_SCHEMA,
                         lambda left, right: table_join(left, right, spec), workdir=tmp_path,
                         restart_at=[2, 4])
    want = assert_matches_oracle(result, log, spec, SEED_SCHEMA, SEED_SCHEMA)
    assert len(want.rows) > 10
    versions = {}
    for _, r in result.rows:
        versions.setdefault(r["k"], []).append(r["version"])
    assert all(sorted(v) == list(range(len(v))) for v in versions.values())


def test_input_errors_are_raised_before_any_query(spark, tmp_path):
    from pyspark.sql import functions as F

    from interlace import ConfigError

    for name in ("c", "a"):
        (tmp_path / name).mkdir()
    left = spark.readStream.schema(CUSTOMERS).parquet(str(tmp_path / "c"))
    right = spark.readStream.schema(ACCOUNTS).parquet(str(tmp_path / "a"))
    ok = dict(left_keys=["id"], right_keys=["id"], event_time_column="ts")
    with pytest.raises(ConfigError, match=r"`tombstone_column` 'name' must be a boolean"):
        table_join(left, right, TableJoin(**ok, tombstone_column="name"))
    with pytest.raises(ConfigError, match=r"`right_tombstone_column` 'balance' must be a boolean"):
        table_join(left, right, TableJoin(**ok, right_tombstone_column="balance"))
    with pytest.raises(ConfigError, match=r"`right_keys` names column\(s\) \['nope'\]"):
        table_join(left, right, TableJoin(**{**ok, "right_keys": ["nope"]}))
    with pytest.raises(ConfigError, match=r"`right_value_columns` names column\(s\)"):
        table_join(left, right, TableJoin(**ok, right_value_columns=["price"]))
    with pytest.raises(ConfigError, match="must be a streaming DataFrame"):
        table_join(left, spark.range(3), TableJoin(**ok))
    with pytest.raises(ConfigError, match="already carries a watermark"):
        table_join(left, right.withWatermark("ts", "1 second"), TableJoin(**ok))
    with pytest.raises(ConfigError, match="incompatible types"):
        table_join(left.withColumn("id", F.col("id").cast("string")), right, TableJoin(**ok))


def test_low_level_apply_in_pandas_with_state_gives_identical_rows(spark, tmp_path):
    from pyspark.sql.streaming.state import GroupStateTimeout

    from interlace import prepare_table_join

    spec = TableJoin(how="left", key_groups=2, **seed.TABLE_TABLE_KWARGS)
    log = seed.table_table_log(one_per_batch=False)

    def low_level(left, right):
        op = prepare_table_join(left, right, spec)
        return op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
            op.func, op.output_schema, op.state_schema, "append",
            GroupStateTimeout.EventTimeTimeout)

    result = replay_join(spark, log, SEED_SCHEMA, SEED_SCHEMA, low_level, workdir=tmp_path)
    assert_matches_oracle(result, log, spec, SEED_SCHEMA, SEED_SCHEMA)
    got, want = seed_changes(result, "left")
    assert got == want
