"""Replay tests on real Spark: the join against the oracle, against Spark's native join, and
restarts from the checkpoint. One session-scoped SparkSession (tests/conftest.py)."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from interlace import ConfigError, Join, prepare_join, stream_join
from interlace.metrics import counters
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.replay import replay_join
from interlace.testing.seed003 import JOIN_KWARGS, SENTINEL_KEY, build_log

pytestmark = pytest.mark.spark

BASE = dt.datetime(2026, 1, 1)
SEED_SCHEMA = T.StructType([
    T.StructField("k", T.StringType()),
    T.StructField("v", T.StringType()),
    T.StructField("event_time", T.TimestampType()),
])
SCHEMA = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("v", T.StringType()),
    T.StructField("ts", T.TimestampType()),
])
COLS = ("id", "v", "ts")


def at(sec):
    return BASE + dt.timedelta(seconds=sec)


def assert_matches_oracle(result, log, spec, columns_left, columns_right, policy="min",
                          **oracle_kw):
    """Per batch, Spark's output equals the oracle's on the log as Spark scheduled it."""
    scheduled = result.scheduled(log, JoinBatch)
    want = oracle_join(spec, scheduled, left_columns=columns_left, right_columns=columns_right,
                       watermark_policy=policy, **oracle_kw)
    got = result.rows_by_batch()
    want_by = want.rows_by_batch()
    assert [b.watermark_ms for b in result.batches] == want.spark_watermarks_ms
    for b in sorted(set(got) | set(want_by)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(want_by.get(b, [])), f"batch {b}"
    return want


@pytest.mark.parametrize("how", ["inner", "left", "right", "full", "left_semi", "left_anti"])
def test_seed003_table_every_how_matches_oracle_batch_by_batch(spark, how, tmp_path):
    spec = Join(how=how, key_groups=4, **JOIN_KWARGS)
    log = build_log()
    result = replay_join(spark, log, SEED_SCHEMA, SEED_SCHEMA, spec, workdir=tmp_path)
    want = assert_matches_oracle(result, log, spec, list(SEED_SCHEMA.names), list(SEED_SCHEMA.names))
    assert want.rows, "the seed log must produce output"
    if how == "inner":
        pairs = sorted((r["left_v"], r["right_v"]) for _, r in result.rows
                       if r["left_k"] != SENTINEL_KEY)
        assert len(pairs) == 16 and ("D", "d") in pairs


def random_in_order_log(seed, n_batches=4, rows_per_side=25, keys=8, step_s=10):
    rnd = random.Random(seed)
    log = []
    for b in range(n_batches):
        def rows(tag):
            return tuple({"id": rnd.randrange(keys), "v": f"{tag}{b}_{i}",
                          "ts": at(b * step_s + rnd.randrange(step_s * 1000) / 1000)}
                         for i in range(rows_per_side))
        log.append(JoinBatch(left=rows("L"), right=rows("R")))
    # Sentinel on another key, far ahead, moves both watermarks past every row.
    log.append(JoinBatch(left=({"id": 10_000, "v": "SL", "ts": at(10_000)},),
                         right=({"id": 10_000, "v": "SR", "ts": at(10_000)},)))
    return log


NATIVE_HOW = {"inner": "inner", "left": "leftOuter", "right": "rightOuter", "full": "fullOuter",
              "left_semi": "leftSemi"}


# Random millisecond times, in order, against Spark's own join: the full join (every row of
# both sides, matched or not) and the semi join (no right columns). Every how, on both state
# stores, is compared with the native join on the whole-second grid of edge cases in
# test_edge_grid.py; running all five here too cost CI ~75 s for nothing that grid misses.
@pytest.mark.parametrize("how", ["full", "left_semi"])
def test_same_final_output_as_spark_native_join_on_in_order_data(spark, how, tmp_path):
    log = random_in_order_log(seed=hash(how) % 1000)
    lower, upper = -3_000, 4_000
    spec = Join(left_keys=["id"], right_keys=["id"], how=how, lower_ms=lower, upper_ms=upper,
                event_time_column="ts", key_groups=4)
    ours = replay_join(spark, log, SCHEMA, SCHEMA, spec, workdir=tmp_path / "ours")

    def native(left, right):
        lw = left.withWatermark("ts", "0 seconds").alias("l")
        rw = right.withWatermark("ts", "0 seconds").alias("r")
        cond = F.expr(f"l.id = r.id AND r.ts BETWEEN l.ts + INTERVAL {lower // 1000} SECONDS "
                      f"AND l.ts + INTERVAL {upper // 1000} SECONDS")
        joined = lw.join(rw, cond, NATIVE_HOW[how])
        if how == "left_semi":
            return joined.select("l.id", "l.v", "l.ts")
        return joined.select(*[F.col(f"l.{c}").alias(f"left_{c}") for c in COLS],
                             *[F.col(f"r.{c}").alias(f"right_{c}") for c in COLS])

    theirs = replay_join(spark, log, SCHEMA, SCHEMA, native, workdir=tmp_path / "native")

    def final(rows):
        keep = [r for _, r in rows if 10_000 not in (r.get("left_id"), r.get("right_id"), r.get("id"))]
        return Counter(canonical_rows(keep))

    assert final(ours.rows) == final(theirs.rows)
    assert sum(final(ours.rows).values()) > 10


def late_log():
    """Rows behind the watermark: some within the time bound's slack, some beyond."""
    return [
        JoinBatch(left=({"id": 1, "v": "A", "ts": at(10)},), right=({"id": 9, "v": "x", "ts": at(10)},)),
        JoinBatch(left=({"id": 2, "v": "B", "ts": at(40)},), right=({"id": 2, "v": "b", "ts": at(41)},)),
        # W = 10 - lateness ... these arrive after both sides moved to 40:
        JoinBatch(left=({"id": 3, "v": "C", "ts": at(30)}, {"id": 2, "v": "B2", "ts": at(33)}),
                  right=({"id": 1, "v": "a", "ts": at(12)}, {"id": 3, "v": "c", "ts": at(31)})),
        JoinBatch(left=({"id": 4, "v": "D", "ts": at(70)},), right=({"id": 4, "v": "d", "ts": at(70)},)),
        JoinBatch(left=({"id": 5, "v": "E", "ts": at(45)},), right=({"id": 5, "v": "e", "ts": at(46)},)),
        JoinBatch(left=({"id": 99, "v": "S", "ts": at(500)},), right=({"id": 99, "v": "s", "ts": at(500)},)),
    ]


@pytest.mark.parametrize(
    ("how", "late_data", "extra"),
    [
        ("left", "drop", {}),
        ("full", "reopen", {"allowed_lateness_ms": 20_000}),
        ("inner", "dlq", {}),
        ("left_anti", "dlq", {"dlq_horizon_ms": 3_600_000}),
    ],
)
def test_late_rows_under_each_policy_match_oracle(spark, one_run_store, how, late_data, extra,
                                                  tmp_path):
    spec = Join(left_keys=["id"], right_keys=["id"], how=how, time_window_ms=5_000,
                event_time_column="ts", lateness_ms=2_000, late_data=late_data, key_groups=3, **extra)
    log = late_log()
    acc = counters(spark)
    result = replay_join(spark, log, SCHEMA, SCHEMA,
                         lambda l, r: stream_join(l, r, spec, counters=acc), workdir=tmp_path)
    want = assert_matches_oracle(result, log, spec, list(COLS), list(COLS))
    one_run_store.check(tmp_path / "checkpoint")
    # Nothing vanishes: the accumulator accounts for every row the operator did not emit.
    for side in ("left", "right"):
        assert acc.value.get(f"late_dropped_{side}", 0) == want.late_dropped.get(side, 0)
        assert acc.value.get(f"dead_lettered_{side}", 0) == want.dead_lettered.get(side, 0)
        assert acc.value.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped.get(side, 0)
    if late_data == "dlq":
        assert sum(want.dead_lettered.values()) > 0
        assert any(r.get("_dead_letter") for _, r in result.rows)
    if late_data == "drop":
        assert sum(want.late_dropped.values()) > 0


# The compatibility tier's join (.ci/compat: every supported PySpark line): a full outer join
# (matched rows, and unmatched ones of both sides once the watermark passes them) against the
# oracle, stopped and restarted from its checkpoint, on each state store.
@pytest.mark.compat
def test_restart_from_checkpoint_mid_log_gives_uninterrupted_output(spark, state_store, tmp_path):
    spec = Join(left_keys=["id"], right_keys=["id"], how="full", time_window_ms=4_000,
                event_time_column="ts", key_groups=4)
    log = random_in_order_log(seed=11, n_batches=4)
    straight = replay_join(spark, log, SCHEMA, SCHEMA, spec, workdir=tmp_path / "a")
    restarted = replay_join(spark, log, SCHEMA, SCHEMA, spec, workdir=tmp_path / "b", restart_at=[2])
    assert Counter(canonical_rows([r for _, r in restarted.rows])) == Counter(
        canonical_rows([r for _, r in straight.rows]))
    # The restarted run is also exactly the oracle on the schedule Spark ran (the first run
    # ends with a no-data batch, which the schedule records).
    assert_matches_oracle(restarted, log, spec, list(COLS), list(COLS))
    state_store.check(tmp_path / "b" / "checkpoint")


def test_max_watermark_policy(spark, tmp_path):
    spark.conf.set("spark.sql.streaming.multipleWatermarkPolicy", "max")
    try:
        spec = Join(left_keys=["id"], right_keys=["id"], how="left", time_window_ms=5_000,
                    event_time_column="ts", lateness_ms=1_000, key_groups=2)
        log = late_log()
        result = replay_join(spark, log, SCHEMA, SCHEMA, spec, workdir=tmp_path)
        assert_matches_oracle(result, log, spec, list(COLS), list(COLS), policy="max")
    finally:
        spark.conf.unset("spark.sql.streaming.multipleWatermarkPolicy")


def test_low_level_apply_in_pandas_with_state_gives_identical_rows(spark, tmp_path):
    from pyspark.sql.streaming.state import GroupStateTimeout

    spec = Join(left_keys=["id"], right_keys=["id"], how="full", time_window_ms=4_000,
                event_time_column="ts", key_groups=4)
    log = random_in_order_log(seed=5, n_batches=3)

    def low_level(left, right):
        op = prepare_join(left, right, spec)
        return op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
            op.func, op.output_schema, op.state_schema, "append", GroupStateTimeout.EventTimeTimeout)

    a = replay_join(spark, log, SCHEMA, SCHEMA, low_level, workdir=tmp_path / "a")
    b = replay_join(spark, log, SCHEMA, SCHEMA, spec, workdir=tmp_path / "b")
    assert Counter(canonical_rows([r for _, r in a.rows])) == Counter(canonical_rows([r for _, r in b.rows]))
    assert {bid for bid, _ in a.rows} == {bid for bid, _ in b.rows}


def test_input_errors_are_raised_before_any_query(spark, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    stream = spark.readStream.schema(SCHEMA).parquet(str(src))
    ok = dict(left_keys=["id"], right_keys=["id"], time_window_ms=1_000, event_time_column="ts")
    with pytest.raises(ConfigError, match=r"`event_time_column` column 'v' .* must be a TimestampType"):
        stream_join(stream, stream, Join(**{**ok, "event_time_column": "v"}))
    with pytest.raises(ConfigError, match=r"already carries a watermark on column 'ts'"):
        stream_join(stream.withWatermark("ts", "1 second"), stream, Join(**ok))
    with pytest.raises(ConfigError, match=r"`right_keys` names column\(s\) \['nope'\]"):
        stream_join(stream, stream, Join(**{**ok, "right_keys": ["nope"]}))
    with pytest.raises(ConfigError, match=r"`event_time_column` names column\(s\) \['zz'\]"):
        stream_join(stream, stream, Join(**{**ok, "event_time_column": "zz"}))
    with pytest.raises(ConfigError, match="must be a streaming DataFrame"):
        stream_join(spark.range(3), stream, Join(**ok))
    with pytest.raises(ConfigError, match=r"time_mode`='processing' synthesizes .* 'ts'"):
        stream_join(stream, stream, Join(**{**ok, "time_mode": "processing"}))
    with pytest.raises(ConfigError, match=r"reserved prefix"):
        stream_join(stream.withColumnRenamed("v", "__il_v"), stream, Join(**ok))
    with pytest.raises(ConfigError, match="incompatible types"):
        stream_join(stream.withColumn("id", F.col("id").cast("string")), stream, Join(**ok))


def test_processing_time_matches_oracle(spark, tmp_path):
    """time_mode="processing": both sides' rows take the micro-batch's timestamp (oracle
    rule 0), so with a 1 ms window only rows of the same micro-batch match."""
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("v", T.StringType())])
    log = [
        JoinBatch(left=[{"id": 1, "v": "L1"}, {"id": 2, "v": "L2"}], right=[{"id": 1, "v": "R1"}]),
        JoinBatch(left=[{"id": 3, "v": "L3"}], right=[{"id": 2, "v": "R2"}, {"id": 3, "v": "R3"}]),
        JoinBatch(left=[{"id": 4, "v": "L4"}], right=[{"id": 5, "v": "R5"}]),
        JoinBatch(left=[{"id": 6, "v": "L6"}], right=[{"id": 6, "v": "R6"}]),
    ]
    spec = Join(left_keys=["id"], right_keys=["id"], how="full", time_window_ms=1,
                event_time_column="pt", time_mode="processing", key_groups=2)
    result = replay_join(spark, log, schema, schema, spec, workdir=tmp_path)
    times = result.scheduled_times_ms()
    assert all(b - a > 1 for a, b in zip(times, times[1:]))
    assert_matches_oracle(result, log, spec, ["id", "v"], ["id", "v"], batch_times_ms=times)
    pairs = {(r["left_v"], r["right_v"]) for _, r in result.rows}
    # Same-batch keys match; L2 (batch 0) and R2 (batch 1) are a batch apart: unmatched.
    assert {("L1", "R1"), ("L6", "R6")} <= pairs
    assert ("L2", None) in pairs and (None, "R2") in pairs and ("L2", "R2") not in pairs


ORDERS = T.StructType([
    T.StructField("order_id", T.IntegerType()),
    T.StructField("placed_at", T.TimestampType()),
    T.StructField("amount", T.DoubleType()),
])
PAYMENTS = T.StructType([
    T.StructField("paid_at", T.TimestampType()),
    T.StructField("order_id", T.LongType()),
    T.StructField("amount", T.DoubleType()),
    T.StructField("method", T.StringType()),
])


def test_sides_of_other_shapes_share_slots_and_match_oracle(spark, tmp_path):
    # int vs bigint keys (own slots, hashed as bigint), a shared double, a right-only string,
    # event times at other positions under other names (both read from __il_t).
    spec = Join(left_keys=["order_id"], right_keys=["order_id"], how="full", lower_ms=0,
                upper_ms=5_000, left_event_time_column="placed_at",
                right_event_time_column="paid_at", lateness_ms=1_000, key_groups=3)
    src = tmp_path / "empty"
    src.mkdir()
    op = prepare_join(spark.readStream.schema(ORDERS).parquet(str(src)),
                      spark.readStream.schema(PAYMENTS).parquet(str(src)), spec)
    assert [(f.name, f.dataType.simpleString()) for f in op.prepared.schema.fields][4:] == [
        ("__il_oor", "boolean"),  # docs/reliability.md, "Hostile input"
        ("__il_s0", "int"), ("__il_s1", "double"), ("__il_s2", "bigint"), ("__il_s3", "string")]
    rnd = random.Random(11)
    log = []
    for b in range(3):
        log.append(JoinBatch(
            left=tuple({"order_id": rnd.randrange(6), "placed_at": at(b * 10 + i),
                        "amount": float(i)} for i in range(8)),
            right=tuple({"paid_at": at(b * 10 + i + rnd.randrange(4)), "order_id": rnd.randrange(6),
                         "amount": i / 2, "method": rnd.choice(["card", None])}
                        for i in range(8))))
    log.append(JoinBatch(left=({"order_id": 99, "placed_at": at(1_000), "amount": 0.0},),
                         right=({"paid_at": at(1_000), "order_id": 99, "amount": 0.0,
                                 "method": "x"},)))
    result = replay_join(spark, log, ORDERS, PAYMENTS, spec, workdir=tmp_path / "run")
    want = assert_matches_oracle(result, log, spec, list(ORDERS.names), list(PAYMENTS.names))
    rows = [o.row for o in want.rows]
    assert any(r["left_order_id"] is not None and r["right_order_id"] is not None for r in rows)
    assert any(r["right_method"] == "card" for r in rows)


def test_local_session_sets_arrow_chunks_of_100000_rows_and_user_conf_wins(spark, arrow_chunks):
    """``local_session`` (so ``interlace run``) raises Spark's 10,000 rows per Arrow chunk to
    100,000 (docs/deploy.md, "Arrow batch size"); a user's ``conf`` entry wins over it."""
    from interlace import local_session
    from interlace.session import ARROW_BATCH_KEY

    assert spark.conf.get(ARROW_BATCH_KEY) == "100000"
    again = local_session("interlace-tests", shuffle_partitions=2, conf={ARROW_BATCH_KEY: "5000"})
    assert again.conf.get(ARROW_BATCH_KEY) == "5000"


def test_a_key_group_cut_into_arrow_chunks_matches_oracle(spark, arrow_chunks, tmp_path):
    """Spark cuts a key group's rows into chunks of ``spark.sql.execution.arrow.
    maxRecordsPerBatch`` rows and calls the function once with all of them, one frame per chunk
    (local_session raises the setting to 100,000, so the other tests see one frame). With 3
    rows per chunk, the calls with rows see several frames; the output is still the oracle's."""
    spec = Join(left_keys=["id"], right_keys=["id"], how="full", time_window_ms=4_000,
                event_time_column="ts", key_groups=2)
    log = random_in_order_log(seed=21, n_batches=3)
    arrow_chunks.rows(3)
    result = replay_join(spark, log, SCHEMA, SCHEMA,
                         lambda left, right: arrow_chunks.apply(prepare_join(left, right, spec)),
                         workdir=tmp_path)
    assert_matches_oracle(result, log, spec, list(COLS), list(COLS))
    # 50 rows per micro-batch over 2 key groups: every data micro-batch's calls got chunks.
    assert arrow_chunks.several.value >= 3
