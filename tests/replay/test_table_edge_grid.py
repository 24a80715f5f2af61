"""Edge-exact parity of the table joins on real Spark: every time on a grid of whole seconds.

Lateness, history retention and the dlq horizon are whole seconds too, so the equalities
where the rules of SEMANTICS §7–§9 turn happen in most batches: a stream row at exactly a
version's valid-from time (it joins that version), two versions of one key at one time (the
later arrival wins), a stream row exactly at ``wm`` (held under ``final``: due when
``wm > t``), a row exactly at ``wm - HR`` (not late) and one second below (late), versions
exactly ``HR`` apart at the retention boundary, table-table updates of one key at one time
on both sides (left before right) and exactly at the latest applied one (not late). Each case
runs on the HDFS-backed and the RocksDB state store and is compared with the oracle batch by
batch.
"""

from __future__ import annotations

import datetime as dt
import random

import pytest
from pyspark.sql import types as T

from interlace import StreamTableJoin, TableJoin, stream_table_join, table_join
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles.stream_table import oracle_stream_table_join
from interlace.testing.oracles.table import oracle_table_join
from interlace.testing.replay import replay_join

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1)
SENTINEL = 10_000  # seconds: moves every watermark past every row
STORES = ["hdfs", "rocksdb"]
SCHEMA = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("v", T.StringType()),
    T.StructField("ts", T.TimestampType()),
])
COLS = list(SCHEMA.names)


def at(sec):
    return T0 + dt.timedelta(seconds=sec)


def row(key, value, sec):
    return {"id": key, "v": value, "ts": at(sec)}


def grid_log(seed, batches=5):
    """Whole-second rows of both inputs in every batch, reaching up to 6 s behind the last
    batch's maximum, with deliberate ties (see the module docstring)."""
    rnd = random.Random(seed)
    log = []
    for b in range(batches):
        base = b * 6
        def rows(tag):
            return [row(rnd.randrange(3), None if rnd.random() < 0.15 else f"{tag}{b}.{i}",
                        base + rnd.randrange(-6, 7)) for i in range(6)]
        log.append([rows("L"), rows("R")])
    # Same-time ties: a stream row at a version's time; two versions of key 5 at one time.
    log[1][1] += [row(5, "first", 8), row(5, "second", 8)]
    log[1][0] += [row(5, "at-version", 8)]
    log[2][0] += [row(5, "later", 12)]
    log[2][1] += [row(5, "third", 12)]
    log.append([[row(9, "S", SENTINEL)], [row(9, "S", SENTINEL)]])
    return [JoinBatch(left=tuple(left), right=tuple(right)) for left, right in log]


def assert_batches_equal(result, want):
    assert [b.watermark_ms for b in result.batches] == want.spark_watermarks_ms
    got, want_by = result.rows_by_batch(), want.rows_by_batch()
    for b in sorted(set(got) | set(want_by)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(want_by.get(b, [])), f"batch {b}"


STREAM_TABLE_CASES = {
    "final-drop": dict(emit="final", late_data="drop", history_retention_ms=1_000),
    "eager-dlq": dict(emit="eager", late_data="dlq", history_retention_ms=2_000,
                      dlq_horizon_ms=3_000),
}


@pytest.mark.parametrize("state_store", STORES, indirect=True)
@pytest.mark.parametrize("case", list(STREAM_TABLE_CASES))
def test_stream_table_on_the_grid_equals_the_oracle(spark, state_store, case, tmp_path):
    spec = StreamTableJoin(left_keys=["id"], right_keys=["id"], how="left",
                           event_time_column="ts", lateness_ms=2_000, key_groups=3,
                           **STREAM_TABLE_CASES[case])
    log = grid_log(seed=sorted(STREAM_TABLE_CASES).index(case))
    result = replay_join(spark, log, SCHEMA, SCHEMA, lambda s, t: stream_table_join(s, t, spec),
                         workdir=tmp_path)
    state_store.check(tmp_path / "checkpoint")
    want = oracle_stream_table_join(spec, result.scheduled(log, JoinBatch), left_columns=COLS,
                                    right_columns=COLS)
    assert_batches_equal(result, want)
    joined = {r["left_v"]: r["right_v"] for _, r in result.rows if r["left_v"]}
    assert joined["at-version"] == "second"  # the version at exactly t; the later arrival
    assert sum(v is not None for v in joined.values()) >= 5
    assert sum(want.late_dropped.values()) + sum(want.dead_lettered.values()) > 0


@pytest.mark.parametrize("state_store", STORES, indirect=True)
def test_table_table_on_the_grid_equals_the_oracle(spark, state_store, tmp_path):
    spec = TableJoin(left_keys=["id"], right_keys=["id"], how="full", emit="eager",
                     event_time_column="ts", lateness_ms=2_000, late_data="dlq",
                     dlq_horizon_ms=3_000, key_groups=3)
    log = grid_log(seed=7)
    result = replay_join(spark, log, SCHEMA, SCHEMA, lambda s, t: table_join(s, t, spec),
                         workdir=tmp_path)
    state_store.check(tmp_path / "checkpoint")
    want = oracle_table_join(spec, result.scheduled(log, JoinBatch), left_columns=COLS,
                             right_columns=COLS)
    assert_batches_equal(result, want)
    assert sum(want.dead_lettered.values()) > 0 and len(want.rows) >= 10
