"""Replay tests on real Spark: the foreign-key join against its oracle (SEMANTICS §7, §9).

Seed 003's foreign-key table (inner, left; one record per micro-batch and all in one, with
the right table replicated into three key groups), eager on the seed, late updates under dlq
with a tombstone column, NULL keys and a widened foreign key (counted once per right update,
not once per key group), a restart from the checkpoint mid-log, the low-level
``applyInPandasWithState`` usage, and input errors before any query. One session-scoped
SparkSession (tests/conftest.py).
"""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest
from pyspark.sql import types as T

import interlace.testing.seed003_tables as seed
from interlace import ForeignKeyJoin, foreign_key_join
from interlace.metrics import counters
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles.foreign_key import oracle_foreign_key_join
from interlace.testing.replay import replay_join

pytestmark = pytest.mark.spark

BASE = dt.datetime(2026, 1, 1)
SEED_LEFT = T.StructType([
    T.StructField("k", T.StringType()),
    T.StructField("fk", T.LongType()),
    T.StructField("event_time", T.TimestampType()),
])
SEED_RIGHT = T.StructType([
    T.StructField("fk", T.LongType()),
    T.StructField("v", T.StringType()),
    T.StructField("event_time", T.TimestampType()),
])
ORDERS = T.StructType([
    T.StructField("order_id", T.StringType()),
    T.StructField("product_id", T.IntegerType()),  # widened to bigint against the products
    T.StructField("qty", T.LongType()),
    T.StructField("ts", T.TimestampType()),
])
PRODUCTS = T.StructType([
    T.StructField("product_id", T.LongType()),
    T.StructField("name", T.StringType()),
    T.StructField("deleted", T.BooleanType()),
    T.StructField("ts", T.TimestampType()),
])
HOWS = {"inner": 4, "left": 5}  # the seed column of each how


def at(sec: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=sec)


def assert_matches_oracle(result, log, spec, left, right):
    """Per batch, Spark's output equals the oracle's on the log as Spark scheduled it."""
    scheduled = result.scheduled(log, JoinBatch)
    want = oracle_foreign_key_join(spec, scheduled, left_columns=left.names,
                                   right_columns=right.names)
    assert [b.watermark_ms for b in result.batches] == want.spark_watermarks_ms
    got, want_by = result.rows_by_batch(), want.rows_by_batch()
    for b in sorted(set(got) | set(want_by)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(want_by.get(b, [])), f"batch {b}"
    return want


# The left join, one update per micro-batch and all in one, runs in the compatibility tier
# (.ci/compat) on every supported PySpark line.
@pytest.mark.parametrize("how", [pytest.param(h, marks=pytest.mark.compat) if h == "left" else h
                                 for h in HOWS])
@pytest.mark.parametrize("one_per_batch", [True, False], ids=["one-per-batch", "all-in-one"])
def test_seed003_foreign_key_table_matches_oracle_batch_by_batch(spark, how, one_per_batch,
                                                                 tmp_path):
    spec = ForeignKeyJoin(how=how, key_groups=3, **seed.FOREIGN_KEY_KWARGS)
    log = seed.foreign_key_log(one_per_batch=one_per_batch)
    result = replay_join(spark, log, SEED_LEFT, SEED_RIGHT,
                         lambda o, p: foreign_key_join(o, p, spec), workdir=tmp_path)
    assert_matches_oracle(result, log, spec, SEED_LEFT, SEED_RIGHT)
    for key in ("k", "q"):
        got = [(r["op"], r["left_fk"], r["right_v"]) for _, r in
               sorted(result.rows, key=lambda br: br[1]["version"]) if r["k"] == key]
        want = [(c.op, c.left, c.right) for e in seed.FOREIGN_KEY
                if (c := e[HOWS[how]]) is not None and c.key == key]
        assert got == want, key


def test_seed003_eager_emits_each_change_in_its_records_batch(spark, tmp_path):
    spec = ForeignKeyJoin(how="inner", emit="eager", key_groups=2, **seed.FOREIGN_KEY_KWARGS)
    log = seed.foreign_key_log(sentinel=False)
    result = replay_join(spark, log, SEED_LEFT, SEED_RIGHT,
                         lambda o, p: foreign_key_join(o, p, spec), workdir=tmp_path)
    assert_matches_oracle(result, log, spec, SEED_LEFT, SEED_RIGHT)
    by_log_batch = {b.batch_id: b.log_index for b in result.batches}
    got = sorted((by_log_batch[b], r["k"], r["op"], r["right_v"]) for b, r in result.rows)
    assert got == sorted((i, c.key, c.op, c.right) for i, e in enumerate(seed.FOREIGN_KEY)
                         if (c := e[HOWS["inner"]]) is not None)


def late_log():
    """Out-of-order and late updates of both tables, a flagged delete, NULL keys."""
    def o(oid, pid, qty, sec):
        return {"order_id": oid, "product_id": pid, "qty": qty, "ts": at(sec)}

    def p(pid, name, sec, deleted=False):
        return {"product_id": pid, "name": name, "deleted": deleted, "ts": at(sec)}

    return [
        JoinBatch(left=(o("o1", 1, 2, 10), o("o2", 1, 1, 10), o("o3", 2, 5, 11)),
                  right=(p(1, "pen", 5), p(2, "ink", 5))),
        JoinBatch(left=(o("o1", 2, 2, 40), o(None, 1, 9, 41), o("o4", None, 1, 41)),
                  right=(p(1, "pen v2", 38), p(None, "x", 40))),
        # W = 41 - 2 = 39 s after batch 1: an update older than its key's latest is late.
        JoinBatch(left=(o("o1", 1, 2, 20),),
                  right=(p(1, "pen v0", 21), p(2, None, 42, deleted=True))),
        JoinBatch(left=(o("z", 9, 0, 500),), right=(p(9, "S", 500),)),
    ]


def test_late_updates_become_dead_letters_counted_once_per_update(spark, tmp_path):
    spec = ForeignKeyJoin(left_keys=["order_id"], foreign_key_columns=["product_id"],
                          right_keys=["product_id"], how="left", emit="eager",
                          event_time_column="ts", lateness_ms=2_000, right_tombstone_column="deleted",
                          late_data="dlq", dlq_horizon_ms=3_600_000, key_groups=3)
    log = late_log()
    acc = counters(spark)
    result = replay_join(spark, log, ORDERS, PRODUCTS,
                         lambda o, p: foreign_key_join(o, p, spec, counters=acc),
                         workdir=tmp_path)
    want = assert_matches_oracle(result, log, spec, ORDERS, PRODUCTS)
    letters = [json.loads(r["_dead_letter"]) for _, r in result.rows if r["_dead_letter"]]
    assert sorted((d["side"], d["row"].get("order_id") or d["row"].get("name"))
                  for d in letters) == [("left", "o1"), ("right", "pen v0")]
    for side in ("left", "right"):
        # The right table reaches all three key groups; only its home copy counts.
        assert acc.value.get(f"dead_lettered_{side}", 0) == want.dead_lettered[side] == 1
        assert acc.value.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped[side] == 1
    assert acc.value.get("applied_right", 0) == 5  # 7 updates - 1 late - 1 NULL key
    names = {r["order_id"]: r["right_name"] for _, r in sorted(
        result.rows, key=lambda br: br[1]["version"] or 0) if r["order_id"]}
    assert names == {"o1": None, "o2": "pen v2", "o3": None, "o4": None, "z": "S"}


def in_order_log(n_batches=5, per_side=5, orders=6, products=3):
    """Updates of both tables in every batch (Spark forgets per-input watermarks on restart,
    so a batch with one input only would move W differently after it), tombstones included."""
    rnd = random.Random(12)
    log = []
    for b in range(n_batches):
        left = tuple({"k": f"o{rnd.randrange(orders)}",
                      "fk": None if rnd.random() < 0.15 else rnd.randrange(products),
                      "event_time": at(b * 10 + rnd.randrange(10_000) / 1000)}
                     for _ in range(per_side))
        right = tuple({"fk": rnd.randrange(products),
                       "v": None if rnd.random() < 0.2 else f"p{b}_{i}",
                       "event_time": at(b * 10 + rnd.randrange(10_000) / 1000)}
                      for i in range(per_side))
        log.append(JoinBatch(left=left, right=right))
    return [*log, JoinBatch(left=({"k": "z", "fk": 99, "event_time": at(10_000)},),
                            right=({"fk": 99, "v": "S", "event_time": at(10_000)},))]


def test_restart_from_checkpoint_mid_log_matches_the_oracle(spark, tmp_path):
    spec = ForeignKeyJoin(left_keys=["k"], foreign_key_columns=["fk"], right_keys=["fk"],
                          event_time_column="event_time", how="inner", lateness_ms=3_000,
                          key_groups=2)
    log = in_order_log()
    result = replay_join(spark, log, SEED_LEFT, SEED_RIGHT,
                         lambda o, p: foreign_key_join(o, p, spec), workdir=tmp_path,
                         restart_at=[2, 4])
    want = assert_matches_oracle(result, log, spec, SEED_LEFT, SEED_RIGHT)
    assert sum(o.row["op"] == "upsert" for o in want.rows) > 5
    assert any(o.row["op"] == "delete" for o in want.rows)


def test_low_level_apply_in_pandas_with_state_gives_identical_rows(spark, tmp_path):
    from pyspark.sql.streaming.state import GroupStateTimeout

    from interlace import prepare_foreign_key_join

    spec = ForeignKeyJoin(how="left", key_groups=2, **seed.FOREIGN_KEY_KWARGS)
    log = seed.foreign_key_log(one_per_batch=False)

    def low_level(orders, products):
        op = prepare_foreign_key_join(orders, products, spec)
        return op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
            op.func, op.output_schema, op.state_schema, "append",
            GroupStateTimeout.EventTimeTimeout)

    result = replay_join(spark, log, SEED_LEFT, SEED_RIGHT, low_level, workdir=tmp_path)
    assert_matches_oracle(result, log, spec, SEED_LEFT, SEED_RIGHT)


def test_input_errors_are_raised_before_any_query(spark, tmp_path):
    from pyspark.sql import functions as F

    from interlace import ConfigError

    for name in ("o", "p"):
        (tmp_path / name).mkdir()
    orders = spark.readStream.schema(ORDERS).parquet(str(tmp_path / "o"))
    products = spark.readStream.schema(PRODUCTS).parquet(str(tmp_path / "p"))
    ok = dict(left_keys=["order_id"], foreign_key_columns=["product_id"],
              right_keys=["product_id"], event_time_column="ts")
    with pytest.raises(ConfigError, match=r"`foreign_key_columns` names column\(s\) \['pid'\]"):
        foreign_key_join(orders, products,
                         ForeignKeyJoin(**{**ok, "foreign_key_columns": ["pid"]}))
    with pytest.raises(ConfigError, match=r"`foreign_key_columns` 'product_id' .* incompatible"):
        foreign_key_join(orders.withColumn("product_id", F.col("product_id").cast("string")),
                         products, ForeignKeyJoin(**ok))
    with pytest.raises(ConfigError, match=r"tombstone_column` 'name' must be a boolean"):
        foreign_key_join(orders, products, ForeignKeyJoin(**ok, right_tombstone_column="name"))
    with pytest.raises(ConfigError, match="already carries a watermark"):
        foreign_key_join(orders, products.withWatermark("ts", "1 second"), ForeignKeyJoin(**ok))
