"""Replay tests on real Spark: the stream-table join against its oracle (SEMANTICS §7–§8).

Seed 003's KStream-KTable table (inner, left; one record per micro-batch and all in one),
eager on the seed, late rows under dlq with a tombstone column and NULL keys, and a restart
from the checkpoint mid-log. One session-scoped SparkSession (tests/conftest.py).
"""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest
from pyspark.sql import types as T

import interlace.testing.seed003_tables as seed
from interlace import StreamTableJoin, stream_table_join
from interlace.metrics import counters
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles.stream_table import oracle_stream_table_join
from interlace.testing.replay import replay_join

pytestmark = pytest.mark.spark

BASE = dt.datetime(2026, 1, 1)
SEED_SCHEMA = T.StructType([
    T.StructField("k", T.StringType()),
    T.StructField("v", T.StringType()),
    T.StructField("event_time", T.TimestampType()),
])
STREAM = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("order", T.StringType()),
    T.StructField("ts", T.TimestampType()),
])
TABLE = T.StructType([
    T.StructField("id", T.IntegerType()),  # widened to bigint against the stream's key
    T.StructField("tier", T.StringType()),
    T.StructField("deleted", T.BooleanType()),
    T.StructField("ts", T.TimestampType()),
])


def at(sec: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=sec)


def assert_matches_oracle(result, log, spec, stream, table, **kw):
    """Per batch, Spark's output equals the oracle's on the log as Spark scheduled it."""
    scheduled = result.scheduled(log, JoinBatch)
    want = oracle_stream_table_join(spec, scheduled, left_columns=stream.names,
                                    right_columns=table.names, **kw)
    assert [b.watermark_ms for b in result.batches] == want.spark_watermarks_ms
    got, want_by = result.rows_by_batch(), want.rows_by_batch()
    for b in sorted(set(got) | set(want_by)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(want_by.get(b, [])), f"batch {b}"
    return want


# The left join, one update per micro-batch and all in one, runs in the compatibility tier
# (.ci/compat) on every supported PySpark line.
@pytest.mark.parametrize("how", [pytest.param(h, marks=pytest.mark.compat) if h == "left" else h
                                 for h in ("inner", "left")])
@pytest.mark.parametrize("one_per_batch", [True, False], ids=["one-per-batch", "all-in-one"])
def test_seed003_kstream_ktable_matches_oracle_batch_by_batch(spark, how, one_per_batch,
                                                              tmp_path):
    spec = StreamTableJoin(how=how, key_groups=2, **seed.STREAM_TABLE_KWARGS)
    log = seed.stream_table_log(one_per_batch=one_per_batch)
    result = replay_join(spark, log, SEED_SCHEMA, SEED_SCHEMA,
                         lambda s, t: stream_table_join(s, t, spec), workdir=tmp_path)
    assert_matches_oracle(result, log, spec, SEED_SCHEMA, SEED_SCHEMA)
    pairs = sorted((r["left_v"], r["right_v"]) for _, r in result.rows
                   if r["left_k"] == seed.KEY)
    assert pairs == sorted(p for e in seed.STREAM_TABLE for p in (e[3] if how == "inner" else e[4]))


def test_seed003_eager_emits_each_row_in_its_records_batch(spark, tmp_path):
    spec = StreamTableJoin(how="left", emit="eager", key_groups=2, **seed.STREAM_TABLE_KWARGS)
    log = seed.stream_table_log(sentinel=False)
    result = replay_join(spark, log, SEED_SCHEMA, SEED_SCHEMA,
                         lambda s, t: stream_table_join(s, t, spec), workdir=tmp_path)
    assert_matches_oracle(result, log, spec, SEED_SCHEMA, SEED_SCHEMA)
    by_log_batch = {b.batch_id: b.log_index for b in result.batches}
    got = sorted((by_log_batch[b], r["left_v"], r["right_v"]) for b, r in result.rows)
    assert got == [(i, x, y) for i, e in enumerate(seed.STREAM_TABLE) for x, y in e[4]]


def late_log():
    """Out-of-order table updates within lateness, late rows of both inputs, a delete, NULLs."""
    def o(i, name, sec):
        return {"id": i, "order": name, "ts": at(sec)}

    def c(i, tier, sec, deleted=False):
        return {"id": i, "tier": tier, "deleted": deleted, "ts": at(sec)}

    return [
        JoinBatch(left=(o(1, "o1", 10),), right=(c(1, "gold", 5), c(2, None, 5))),
        JoinBatch(left=(o(1, "o2", 40), o(2, "o3", 41), o(None, "o4", 41)),
                  right=(c(1, "silver", 38), c(None, "x", 40))),
        # W = 40 - 2 - 1 = 37 s after batch 1; wm = W + 1 s (HR) + dlq horizon in Spark terms:
        JoinBatch(left=(o(1, "late", 20), o(2, "o5", 39)),
                  right=(c(1, "bronze", 39), c(2, "old", 21), c(2, None, 40, deleted=True))),
        JoinBatch(left=(o(9, "S", 500),), right=(c(9, "S", 500),)),
    ]


def test_late_rows_become_dead_letters_and_everything_is_counted(spark, tmp_path):
    spec = StreamTableJoin(left_keys=["id"], right_keys=["id"], how="left", emit="final",
                           event_time_column="ts", lateness_ms=2_000, history_retention_ms=1_000,
                           tombstone_column="deleted", late_data="dlq",
                           dlq_horizon_ms=3_600_000, key_groups=3)
    log = late_log()
    acc = counters(spark)
    result = replay_join(spark, log, STREAM, TABLE,
                         lambda s, t: stream_table_join(s, t, spec, counters=acc),
                         workdir=tmp_path)
    want = assert_matches_oracle(result, log, spec, STREAM, TABLE)
    letters = [json.loads(r["_dead_letter"]) for _, r in result.rows if r["_dead_letter"]]
    assert {(d["side"], d["row"].get("order") or d["row"].get("tier")) for d in letters} == {
        ("left", "late"), ("right", "old")}
    for side in ("left", "right"):
        assert acc.value.get(f"dead_lettered_{side}", 0) == want.dead_lettered[side] == 1
        assert acc.value.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped[side]
    tiers = {r["left_order"]: r["right_tier"] for _, r in result.rows if r["left_order"]}
    assert tiers["o1"] == "gold" and tiers["o2"] == "bronze" and tiers["o3"] is None
    assert tiers["o4"] is None  # NULL key under left: emitted, joins nothing


def in_order_log(n_batches=5, per_side=6, keys=3):
    """Rows of both inputs in every batch (Spark forgets per-input watermarks on restart, so
    a batch with one input only would move W differently after it), tombstones included."""
    rnd = random.Random(12)
    log = []
    for b in range(n_batches):
        def rows(tag, tombstones):
            return tuple({"k": f"k{rnd.randrange(keys)}",
                          "v": None if tombstones and rnd.random() < 0.2 else f"{tag}{b}_{i}",
                          "event_time": at(b * 10 + rnd.randrange(10_000) / 1000)}
                         for i in range(per_side))
        log.append(JoinBatch(left=rows("L", False), right=rows("R", True)))
    sentinel = {"k": "z", "v": "S", "event_time": at(10_000)}
    return [*log, JoinBatch(left=(sentinel,), right=(sentinel,))]


def test_restart_from_checkpoint_mid_log_matches_the_oracle(spark, tmp_path):
    spec = StreamTableJoin(left_keys=["k"], right_keys=["k"], event_time_column="event_time",
                           how="left", lateness_ms=3_000, key_groups=2)
    log = in_order_log()
    result = replay_join(spark, log, SEED_SCHEMA, SEED_SCHEMA,
                         lambda s, t: stream_table_join(s, t, spec), workdir=tmp_path,
                         restart_at=[2, 4])
    want = assert_matches_oracle(result, log, spec, SEED_SCHEMA, SEED_SCHEMA)
    assert len(want.rows) == 30  # every stream row once (the sentinel stays held)
    assert sum(r["right_v"] is not None for _, r in result.rows) > 10


def test_input_errors_are_raised_before_any_query(spark, tmp_path):
    from pyspark.sql import functions as F

    from interlace import ConfigError

    for name, schema in (("s", STREAM), ("t", TABLE)):
        (tmp_path / name).mkdir()
    stream = spark.readStream.schema(STREAM).parquet(str(tmp_path / "s"))
    table = spark.readStream.schema(TABLE).parquet(str(tmp_path / "t"))
    ok = dict(left_keys=["id"], right_keys=["id"], event_time_column="ts")
    with pytest.raises(ConfigError, match=r"`tombstone_column` 'tier' must be a boolean"):
        stream_table_join(stream, table, StreamTableJoin(**ok, tombstone_column="tier"))
    with pytest.raises(ConfigError, match=r"`right_keys` names column\(s\) \['nope'\]"):
        stream_table_join(stream, table, StreamTableJoin(**{**ok, "right_keys": ["nope"]}))
    with pytest.raises(ConfigError, match=r"`value_columns` names column\(s\) \['price'\]"):
        stream_table_join(stream, table, StreamTableJoin(**ok, value_columns=["price"]))
    with pytest.raises(ConfigError, match=r"`right_event_time_column` column 'tier' .* Timestamp"):
        stream_table_join(stream, table, StreamTableJoin(**ok, right_event_time_column="tier"))
    with pytest.raises(ConfigError, match="must be a streaming DataFrame"):
        stream_table_join(stream, spark.range(3), StreamTableJoin(**ok))
    with pytest.raises(ConfigError, match="already carries a watermark"):
        stream_table_join(stream, table.withWatermark("ts", "1 second"), StreamTableJoin(**ok))
    with pytest.raises(ConfigError, match="incompatible types"):
        stream_table_join(stream.withColumn("id", F.col("id").cast("string")), table,
                          StreamTableJoin(**ok))


def test_low_level_apply_in_pandas_with_state_gives_identical_rows(spark, tmp_path):
    from pyspark.sql.streaming.state import GroupStateTimeout

    from interlace import prepare_stream_table_join

    spec = StreamTableJoin(how="left", key_groups=2, **seed.STREAM_TABLE_KWARGS)
    log = seed.stream_table_log(one_per_batch=False)

    def low_level(stream, table):
        op = prepare_stream_table_join(stream, table, spec)
        return op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
            op.func, op.output_schema, op.state_schema, "append",
            GroupStateTimeout.EventTimeTimeout)

    result = replay_join(spark, log, SEED_SCHEMA, SEED_SCHEMA, low_level, workdir=tmp_path)
    assert_matches_oracle(result, log, spec, SEED_SCHEMA, SEED_SCHEMA)
