"""Edge-exact parity on real Spark (issue 17): every time on a coarse grid of whole seconds.

Gaps, window sizes, hops, join bounds and lateness are whole seconds too, so the equalities
where streaming semantics break happen in most batches: rows exactly on a window's start and
end, session rows exactly one gap apart (in one batch and across batches), join pairs with
``r.t - l.t`` exactly ``lower`` and ``upper`` (and one second outside), rows exactly at the
watermark and exactly at a close time. Each case runs on the HDFS-backed and the RocksDB state
store and equals the oracle, batch by batch. On the HDFS-backed store it is also compared with
Spark's native operator (final output; ``left_anti`` has no native stream-stream form): the
log and the oracle are the same on both stores, so the RocksDB run equals native too, without
a second native run (CI time).
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from interlace import Aggregation, Join, Window, window_aggregate
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.replay import replay_join, replay_streams
from interlace.testing.window_oracle import WindowBatch, oracle_window

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1)
SENTINEL = 10_000  # seconds: moves every watermark past every row, flushing what is open
LATENESS_S = 2
STORES = ["hdfs", "rocksdb"]


def at(sec):
    return T0 + dt.timedelta(seconds=sec)


# ----------------------------------------------------------------------------------------
# Windows
# ----------------------------------------------------------------------------------------

WSCHEMA = T.StructType([
    T.StructField("user", T.StringType()),
    T.StructField("amount", T.LongType()),
    T.StructField("ts", T.TimestampType()),
])
WCOLS = list(WSCHEMA.names)
WAGGS = [Aggregation(agg="count", as_="n"), Aggregation(agg="sum", column="amount", as_="s"),
         Aggregation(agg="min", column="amount", as_="lo"),
         Aggregation(agg="max", column="amount", as_="hi")]
WINDOW_KINDS = {
    "tumbling": ({"duration_ms": 10_000}, lambda: F.window("ts", "10 seconds")),
    "hopping": ({"duration_ms": 10_000, "hop_ms": 5_000},
                lambda: F.window("ts", "10 seconds", "5 seconds")),
    "session": ({"gap_ms": 5_000}, lambda: F.session_window("ts", "5 seconds")),
}


def ev(user, sec, amount):
    return {"user": user, "amount": amount, "ts": at(sec)}


def grid_window_log(seed, batches=4):
    """Whole-second rows; each batch reaches LATENESS_S + 1 s behind the last one's maximum,
    so some rows sit exactly at Spark's watermark and exactly at window boundaries."""
    rnd = random.Random(seed)
    log = []
    for b in range(batches):
        base = b * 10
        rows = [ev(f"u{rnd.randrange(3)}", base + rnd.randrange(-LATENESS_S - 1, 10),
                   rnd.randrange(1, 50)) for _ in range(10)]
        log.append(rows)
    # Session rows exactly one gap (5 s) apart: 12 and 17 in one batch (Spark: one session
    # [12, 22) with count 2); 22 in the next batch chains on; 27 + 1 s later a new session.
    log[1] += [ev("s", 12, 1), ev("s", 17, 2)]
    log[2] += [ev("s", 22, 3), ev("s", 28, 4)]
    log[3] += [ev("s", 33, 5)]  # exactly one gap after 28, across batches
    log.append([ev("zz", SENTINEL, 0)])
    return [WindowBatch(rows=tuple(rows)) for rows in log]


def window_spec(kind):
    extra, _ = WINDOW_KINDS[kind]
    return Window(kind=kind, event_time_column="ts", group_by=["user"],
                  lateness_ms=LATENESS_S * 1000, max_groups_per_window=100, aggregations=WAGGS,
                  key_groups=3, **extra)


def native_window(kind):
    _, window = WINDOW_KINDS[kind]

    def build(frames):
        df = frames["events"].withWatermark("ts", f"{LATENESS_S} seconds")
        agg = df.groupBy(window().alias("w"), "user").agg(
            F.count(F.lit(1)).alias("n"), F.sum("amount").alias("s"),
            F.min("amount").alias("lo"), F.max("amount").alias("hi"))
        return agg.select(F.col("w.start").alias("window_start"),
                          F.col("w.end").alias("window_end"), "user", "n", "s", "lo", "hi")

    return build


def final_windows(rows):
    return Counter(canonical_rows([r for _, r in rows if r["user"] != "zz"]))


@pytest.mark.parametrize("state_store", STORES, indirect=True)
@pytest.mark.parametrize("kind", list(WINDOW_KINDS))
def test_windows_on_the_grid_equal_spark_native_and_the_oracle(spark, state_store, kind,
                                                                tmp_path):
    spec = window_spec(kind)
    log = grid_window_log(seed={"tumbling": 1, "hopping": 2, "session": 3}[kind])
    streams = {"events": (WSCHEMA, [list(b.rows) for b in log])}
    ours = replay_streams(spark, streams, lambda f: window_aggregate(f["events"], spec),
                          workdir=tmp_path / "ours")
    state_store.check(tmp_path / "ours" / "checkpoint")
    if state_store.name == "hdfs":  # native once: the oracle below is the same on both stores
        theirs = replay_streams(spark, streams, native_window(kind), workdir=tmp_path / "native")
        assert final_windows(ours.rows) == final_windows(theirs.rows)
    assert sum(final_windows(ours.rows).values()) >= 8

    want = oracle_window(spec, ours.scheduled(log, WindowBatch), columns=WCOLS)
    assert [b.watermark_ms for b in ours.batches] == want.spark_watermarks_ms
    got, exp = ours.rows_by_batch(), {}
    for o in want.rows:
        exp.setdefault(o.batch, []).append(o.row)
    for b in sorted(set(got) | set(exp)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(exp.get(b, [])), f"batch {b}"

    # The edges really occurred: rows exactly at Spark's watermark, on window bounds.
    epoch_s = (T0 - dt.datetime(1970, 1, 1)) // dt.timedelta(seconds=1)
    marks = {b.watermark_ms // 1000 - epoch_s for b in ours.batches if b.watermark_ms}
    secs = {(r["ts"] - T0) // dt.timedelta(seconds=1) for b in log for r in b.rows}
    assert marks & secs, "no row exactly at a watermark"
    assert any(s % 10 == 0 for s in secs)
    if kind == "session":
        s_rows = sorted((r["window_start"], r["window_end"], r["n"]) for _, r in ours.rows
                        if r["user"] == "s")
        # 12, 17, 22 chain (each exactly one gap apart, 22 in a later batch); 28 is 6 s after
        # 22, so it starts a new session, which 33 (exactly one gap later, a batch later) joins.
        assert s_rows == [(at(12), at(27), 3), (at(28), at(38), 2)]


# ----------------------------------------------------------------------------------------
# Joins
# ----------------------------------------------------------------------------------------

JSCHEMA = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("v", T.StringType()),
    T.StructField("ts", T.TimestampType()),
])
JCOLS = list(JSCHEMA.names)
LOWER_S, UPPER_S = -2, 3
NATIVE_HOW = {"inner": "inner", "left": "leftOuter", "right": "rightOuter", "full": "fullOuter",
              "left_semi": "leftSemi", "left_anti": None}


def grid_join_log(seed, batches=4):
    """Whole-second rows on 4 keys, plus pairs exactly ``lower`` / ``upper`` apart and one
    second outside either bound; rows reach LATENESS_S + 1 s behind the previous maximum."""
    rnd = random.Random(seed)
    log = []
    n = 0
    for b in range(batches):
        base = b * 10

        def row(tag, sec, key=None):
            nonlocal n
            n += 1
            return {"id": rnd.randrange(4) if key is None else key, "v": f"{tag}{n}",
                    "ts": at(sec)}

        left = [row("L", base + rnd.randrange(-LATENESS_S - 1, 10)) for _ in range(6)]
        right = [row("R", base + rnd.randrange(-LATENESS_S - 1, 10)) for _ in range(6)]
        # Exact bounds on a key of their own per batch: r.t - l.t = lower, upper (match) and
        # lower - 1, upper + 1 (no match).
        key = 100 + b
        left.append(row("Le", base + 4, key))
        right += [row("Rlo", base + 4 + LOWER_S, key), row("Rhi", base + 4 + UPPER_S, key),
                  row("Rlo-", base + 4 + LOWER_S - 1, key), row("Rhi+", base + 4 + UPPER_S + 1, key)]
        log.append(JoinBatch(left=tuple(left), right=tuple(right)))
    log.append(JoinBatch(left=({"id": SENTINEL, "v": "SL", "ts": at(SENTINEL)},),
                         right=({"id": SENTINEL, "v": "SR", "ts": at(SENTINEL)},)))
    return log


def native_join(how):
    def build(left, right):
        lw = left.withWatermark("ts", f"{LATENESS_S} seconds").alias("l")
        rw = right.withWatermark("ts", f"{LATENESS_S} seconds").alias("r")
        cond = F.expr(f"l.id = r.id AND r.ts BETWEEN l.ts + INTERVAL {LOWER_S} SECONDS "
                      f"AND l.ts + INTERVAL {UPPER_S} SECONDS")
        joined = lw.join(rw, cond, NATIVE_HOW[how])
        if how == "left_semi":
            return joined.select("l.id", "l.v", "l.ts")
        return joined.select(*[F.col(f"l.{c}").alias(f"left_{c}") for c in JCOLS],
                             *[F.col(f"r.{c}").alias(f"right_{c}") for c in JCOLS])

    return build


def final_joined(rows):
    keep = [r for _, r in rows if SENTINEL not in (r.get("left_id"), r.get("right_id"), r.get("id"))]
    return Counter(canonical_rows(keep))


@pytest.mark.parametrize("state_store", STORES, indirect=True)
@pytest.mark.parametrize("how", list(NATIVE_HOW))
def test_joins_on_the_grid_equal_spark_native_and_the_oracle(spark, state_store, how, tmp_path):
    spec = Join(left_keys=["id"], right_keys=["id"], how=how, lower_ms=LOWER_S * 1000,
                upper_ms=UPPER_S * 1000, event_time_column="ts", lateness_ms=LATENESS_S * 1000,
                key_groups=3)
    log = grid_join_log(seed=sorted(NATIVE_HOW).index(how))
    ours = replay_join(spark, log, JSCHEMA, JSCHEMA, spec, workdir=tmp_path / "ours")
    state_store.check(tmp_path / "ours" / "checkpoint")
    if NATIVE_HOW[how] is not None and state_store.name == "hdfs":  # as for the windows
        theirs = replay_join(spark, log, JSCHEMA, JSCHEMA, native_join(how),
                             workdir=tmp_path / "native")
        assert final_joined(ours.rows) == final_joined(theirs.rows)

    want = oracle_join(spec, ours.scheduled(log, JoinBatch), left_columns=JCOLS,
                       right_columns=JCOLS)
    assert [b.watermark_ms for b in ours.batches] == want.spark_watermarks_ms
    got, exp = ours.rows_by_batch(), want.rows_by_batch()
    for b in sorted(set(got) | set(exp)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(exp.get(b, [])), f"batch {b}"

    # The exact-bound pairs: matched at lower and upper, never one second outside.
    if how in ("inner", "full"):
        tags = Counter(r["right_v"].rstrip("0123456789") for _, r in ours.rows
                       if r["left_v"] and r["right_v"] and 100 <= r["left_id"] < SENTINEL)
        assert tags == {"Rlo": len(log) - 1, "Rhi": len(log) - 1}, tags
