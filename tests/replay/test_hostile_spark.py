"""Hostile input through real Spark (issue 13): fixed batches, not Hypothesis.

The join (``full``, ``dlq``) and the stream-table join (``left``, ``dlq``) on a key of a
unicode string, a binary, a decimal(38,18) and a double, and the window (tumbling under
``dlq``, session under ``drop``) grouped by a double, over NULL keys and event times, NaN /
±inf / -0.0, nested payloads with a nested timestamp, event times before 1970, timestamps
pandas cannot hold (0001-01-01, 9999-12-31, in the event time, in a payload and nested).
Each query must run to the end, equal the oracle (NaN as NULL, rows without an event time or
with a timestamp pandas cannot hold left out, as docs/reliability.md says), and account for
every input row by id: output, dead letter, Spark's watermark filter, or a documented
counter. The same, drawn by Hypothesis without Spark: ``tests/property/test_hostile_input.py``,
``test_hostile_table_joins.py`` and ``test_hostile_window.py``.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from hostile import assert_accounted, dead_letters, oracle_rows, spark_dropped_ids
from pyspark.sql import functions as F
from pyspark.sql import types as T

from interlace import (
    Aggregation,
    ConfigError,
    Join,
    StreamTableJoin,
    Window,
    stream_join,
    stream_table_join,
    window_aggregate,
)
from interlace.metrics import counters
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.oracles.stream_table import oracle_stream_table_join
from interlace.testing.replay import replay_join, replay_streams
from interlace.testing.window_oracle import WindowBatch, oracle_window

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1)
END = dt.datetime(2262, 4, 10)
NAN, INF = float("nan"), float("inf")
OLD, FAR = dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)
PRE_EPOCH = dt.datetime(1969, 12, 31, 23, 59, 59)
NESTED = T.StructType([T.StructField("a", T.LongType()),
                       T.StructField("b", T.ArrayType(T.StringType())),
                       T.StructField("t", T.TimestampType())])
JOIN_SCHEMA = T.StructType([
    T.StructField("id", T.LongType()), T.StructField("ks", T.StringType()),
    T.StructField("kb", T.BinaryType()), T.StructField("kd", T.DecimalType(38, 18)),
    T.StructField("kf", T.DoubleType()), T.StructField("f", T.DoubleType()),
    T.StructField("u", T.StringType()), T.StructField("d", T.DecimalType(38, 18)),
    T.StructField("st", NESTED), T.StructField("arr", T.ArrayType(T.DoubleType())),
    T.StructField("m", T.MapType(T.StringType(), T.LongType())),
    T.StructField("pt", T.TimestampType()), T.StructField("ts", T.TimestampType()),
])
JOIN_COLUMNS = JOIN_SCHEMA.names
TIMESTAMPS = ("ts", "pt", "st")  # the columns holding timestamps, nested in `st`


def at(sec: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=sec)


KEY = {"ks": "e\u0301\U0001f389", "kb": b"\x00\xff", "kd": Decimal("1.500000000000000000"),
       "kf": -0.0}
PAYLOAD = {"f": NAN, "u": "\u0000\u00e9", "d": Decimal("-99999999999999999999.999999999999999999"),
           "st": {"a": -(2**63), "b": ["x", None], "t": at(0.5)}, "arr": [1.0, NAN, INF],
           "m": {"a": 1, "\U0001f389": None}, "pt": T0}


def jrow(row_id: int, when: dt.datetime | None, **kw: Any) -> dict[str, Any]:
    return {"id": row_id, **KEY, **PAYLOAD, "ts": when, **kw}


def join_log() -> list[JoinBatch]:
    return [
        JoinBatch(
            left=[
                jrow(0, at(0)),
                jrow(1, at(0), f=-INF, u=None, st=None, arr=None, m=None),  # duplicate time
                jrow(2, at(0), kf=NAN),                       # NaN key: NULL, never matches
                jrow(3, None),                                # dead letter: null_event_time
                jrow(4, FAR),                                 # 9999: out_of_range_dropped
                jrow(5, OLD, kb=b""),                         # 0001: out_of_range_dropped
                jrow(6, at(1), st={"a": 1, "b": [], "t": FAR}),  # nested 9999: dropped
            ],
            right=[
                jrow(10, at(1), kf=0.0, f=INF),               # -0.0 == 0.0: matches 0 and 1
                jrow(11, at(0), ks=None),                     # NULL key: emitted unmatched
                jrow(12, PRE_EPOCH),                          # Spark's filter (t <= 0)
                jrow(13, at(0), pt=FAR),                      # payload 9999: dropped
                jrow(14, at(1), kd=Decimal("-0.000000000000000001"), kb=b""),  # no partner
            ],
        ),
        JoinBatch(
            left=[jrow(7, at(2), ks="e\u0301")],              # no partner: unmatched later
            right=[jrow(15, at(-30))],                        # late: a dead letter
        ),
        JoinBatch(left=[jrow(-1, END, ks="end")], right=[jrow(-2, END, ks="end")]),
    ]


def replay_two_inputs(spark: Any, tmp_path: Any, log: list[JoinBatch], operator: Any,
                      oracle: Any, spec: Any) -> tuple[Any, list[int], dict[str, int], list[Any],
                                                       list[dict[str, Any]]]:
    """Replay ``log`` through ``operator(left, right, spec, counters=...)`` on Spark and check
    it equals ``oracle`` batch by batch (NaN as NULL, rows without an event time or with a
    timestamp pandas cannot hold left out). Returns the scheduled batches, Spark's watermarks,
    the counters, the dead letters and the other output rows."""
    acc = counters(spark)
    result = replay_join(spark, log, JOIN_SCHEMA, JOIN_SCHEMA,
                         lambda left, right: operator(left, right, spec, counters=acc),
                         workdir=tmp_path)
    scheduled = result.scheduled(log, JoinBatch)
    want = oracle(spec, [JoinBatch(left=oracle_rows(b.left, timestamps=TIMESTAMPS),
                                   right=oracle_rows(b.right, timestamps=TIMESTAMPS))
                         for b in scheduled],
                  left_columns=JOIN_COLUMNS, right_columns=JOIN_COLUMNS)
    watermarks = [b.watermark_ms for b in result.batches]
    assert watermarks == want.spark_watermarks_ms
    got, exp = result.rows_by_batch(), want.rows_by_batch()
    for b in sorted(set(got) | set(exp)):
        mine = [r for r in got.get(b, []) if "null_event_time" not in (r["_dead_letter"] or "")]
        a, e = canonical_rows(mine), canonical_rows(exp.get(b, []))
        assert a == e, (b, [x for x in a if x not in e], [x for x in e if x not in a])
    rows = [r for _, r in result.rows]
    normal = [r for r in rows if r["_dead_letter"] is None]
    return scheduled, watermarks, dict(acc.value), dead_letters(rows), normal


def test_join_on_hostile_rows_equals_the_oracle_and_accounts_for_every_row(spark, tmp_path):
    spec = Join(left_keys=list(KEY), right_keys=list(KEY), how="full", time_window_ms=2000,
                event_time_column="ts", late_data="dlq", key_groups=8)
    scheduled, watermarks, c, letters, normal = replay_two_inputs(
        spark, tmp_path, join_log(), stream_join, oracle_join, spec)
    assert {(d["side"], d["reason"], d["row"]["id"]) for d in letters} == {
        ("left", "null_event_time", 3), ("right", "late", 15)}
    pairs = {(r["left_id"], r["right_id"]) for r in normal}
    assert {(0, 10), (1, 10), (2, None), (None, 11), (7, None), (None, 14)} <= pairs
    for side, lost in (("left", {4, 5, 6}), ("right", {13})):
        batches = [getattr(b, side) for b in scheduled]
        spark_ids = spark_dropped_ids(batches, watermarks, timestamps=TIMESTAMPS)
        assert c.get(f"out_of_range_dropped_{side}", 0) == len(lost)
        assert_accounted(
            {r["id"] for rows_ in batches for r in rows_ if r["id"] >= 0},
            output={r[f"{side}_id"] for r in normal if r[f"{side}_id"] is not None} - {-1, -2},
            dead={d["row"]["id"] for d in letters if d["side"] == side},
            spark=spark_ids,
            counted={n: c.get(f"{n}_{side}", 0) for n in (
                "late_dropped", "null_key_dropped", "null_event_time_dropped",
                "out_of_range_dropped")})
    assert spark_dropped_ids([b.right for b in scheduled], watermarks) == {12}
    # Every hostile value came back as it went in (NaN as NULL).
    zero = next(r for r in normal if r["left_id"] == 0 and r["right_id"] == 10)
    assert (zero["left_ks"], zero["left_kb"], zero["left_kd"]) == (KEY["ks"], KEY["kb"],
                                                                  KEY["kd"])
    assert zero["left_f"] is None and zero["right_f"] == INF
    assert zero["left_st"].asDict() == {"a": -(2**63), "b": ["x", None], "t": at(0.5)}
    assert zero["left_m"] == {"a": 1, "\U0001f389": None} and zero["left_u"] == "\u0000\u00e9"
    assert zero["left_arr"][0] == 1.0 and zero["left_arr"][2] == INF


def test_stream_table_join_on_hostile_rows_equals_the_oracle_and_accounts_for_every_row(
        spark, tmp_path):
    """The join's hostile batches as a stream (left) and a table's updates (right): the as-of
    join by the same four hostile keys, the table's values nested, NaN and 9999 included."""
    spec = StreamTableJoin(left_keys=list(KEY), right_keys=list(KEY), how="left",
                           event_time_column="ts", late_data="dlq", dlq_horizon_ms=60_000,
                           value_columns=["f", "u", "d", "st", "arr", "m", "pt"], key_groups=4)
    log = join_log()
    # Stream row 8 (key -0.0, 2 s) finds table update 10 (key 0.0, valid from 1 s).
    log[1] = JoinBatch(left=[*log[1].left, jrow(8, at(2))], right=log[1].right)
    scheduled, watermarks, c, letters, normal = replay_two_inputs(
        spark, tmp_path, log, stream_table_join, oracle_stream_table_join, spec)
    assert {(d["side"], d["reason"], d["row"]["id"]) for d in letters} == {
        ("left", "null_event_time", 3), ("right", "late", 15)}
    # The stream: every row emitted once (left join), a dead letter, Spark's, or counted.
    stream = [b.left for b in scheduled]
    assert_accounted(
        {r["id"] for rows_ in stream for r in rows_ if r["id"] >= 0},
        output={r["left_id"] for r in normal} - {-1},
        dead={d["row"]["id"] for d in letters if d["side"] == "left"},
        spark=spark_dropped_ids(stream, watermarks, timestamps=TIMESTAMPS),
        counted={f"{n}_left": c.get(f"{n}_left", 0) for n in (
            "late_dropped", "null_key_dropped", "null_event_time_dropped",
            "out_of_range_dropped", "absent_dropped")})
    # The table: every update enters the history (END's too), a dead letter, Spark's, or counted.
    table = [b.right for b in scheduled]
    assert_accounted(
        {r["id"] for rows_ in table for r in rows_ if r["id"] >= 0}, output=set(),
        dead={d["row"]["id"] for d in letters if d["side"] == "right"},
        spark=spark_dropped_ids(table, watermarks, timestamps=TIMESTAMPS),
        counted={"versions_inserted": c.get("versions_inserted", 0) - 1,
                 **{f"{n}_right": c.get(f"{n}_right", 0) for n in (
                     "late_dropped", "null_key_dropped", "null_event_time_dropped",
                     "out_of_range_dropped")}})
    assert c.get("out_of_range_dropped_left", 0) == 3 and c.get("out_of_range_dropped_right") == 1
    # Stream row 8 got update 10's values as they went in; rows 0 and 1 (0 s) came before it.
    assert {r["left_id"] for r in normal if r["right_u"] is not None} == {8}
    one = next(r for r in normal if r["left_id"] == 8)
    assert one["right_f"] == INF and one["right_st"].asDict() == PAYLOAD["st"]
    assert one["right_m"] == PAYLOAD["m"] and one["right_arr"][2] == INF


WINDOW_SCHEMA = T.StructType([
    T.StructField("id", T.LongType()), T.StructField("bit", T.LongType()),
    T.StructField("g", T.DoubleType()), T.StructField("x", T.DoubleType()),
    T.StructField("u", T.StringType()), T.StructField("pt", T.TimestampType()),
    T.StructField("ts", T.TimestampType()),
])
AGGS = [
    Aggregation(agg="count", as_="n"), Aggregation(agg="sum", column="bit", as_="bits"),
    Aggregation(agg="sum", column="x", as_="x_sum"), Aggregation(agg="min", column="x", as_="x_min"),
    Aggregation(agg="max", column="x", as_="x_max"), Aggregation(agg="avg", column="x", as_="x_avg"),
    Aggregation(agg="count_distinct", column="u", mode="exact",
                max_distinct_values_per_group=10, as_="u_distinct"),
    Aggregation(agg="max", column="pt", as_="pt_max"),
]


def wrow(row_id: int, g: float | None, x: float | None, when: dt.datetime | None,
         **kw: Any) -> dict[str, Any]:
    return {"id": row_id, "bit": 1 << row_id if row_id >= 0 else 0, "g": g, "x": x,
            "u": "e\u0301", "pt": T0, "ts": when, **kw}


def window_log() -> list[WindowBatch]:
    return [
        WindowBatch(rows=(
            wrow(0, NAN, 1.0, at(0)), wrow(1, None, INF, at(0.2)),   # NaN and NULL: one group
            wrow(2, -0.0, NAN, at(0.4), u="\U0001f389"), wrow(3, 0.0, -INF, at(0.4)),  # one group
            wrow(4, INF, 1e308, at(0.6)), wrow(5, INF, -INF, at(0.6)),
            wrow(6, 1.0, 2.0, None),                      # null_event_time
            wrow(7, 1.0, 2.0, PRE_EPOCH),                 # Spark's filter
            wrow(8, 1.0, 2.0, FAR), wrow(9, 1.0, 2.0, OLD),  # out_of_range_dropped
            wrow(10, 1.0, 2.0, at(0.6), pt=FAR),          # payload 9999: out_of_range_dropped
        )),
        WindowBatch(rows=(wrow(11, 1.0, 2.0, at(5)),)),
        WindowBatch(rows=(wrow(12, 1.0, 3.0, at(0.1)), wrow(13, NAN, 4.0, at(9)))),  # 12: late
        WindowBatch(rows=(wrow(-1, 99.0, 0.0, END),)),
    ]


@pytest.mark.parametrize("kind,late_data", [("tumbling", "dlq"), ("session", "drop")])
def test_window_on_hostile_rows_equals_the_oracle_and_accounts_for_every_row(
        spark, tmp_path, kind, late_data):
    size = {"duration_ms": 1000} if kind == "tumbling" else {"gap_ms": 1000}
    spec = Window(kind=kind, event_time_column="ts", group_by=["g"], aggregations=AGGS,
                  late_data=late_data, max_groups_per_window=100, key_groups=16, **size)
    log = window_log()
    acc = counters(spark)
    result = replay_streams(spark, {"e": (WINDOW_SCHEMA, [list(b.rows) for b in log])},
                            lambda f: window_aggregate(f["e"], spec, counters=acc),
                            workdir=tmp_path)
    scheduled = result.scheduled(log, WindowBatch)
    want = oracle_window(spec, [WindowBatch(rows=tuple(oracle_rows(b.rows))) for b in scheduled],
                         columns=WINDOW_SCHEMA.names)
    watermarks = [b.watermark_ms for b in result.batches]
    assert watermarks == want.spark_watermarks_ms
    got, exp = result.rows_by_batch(), {}
    for o in want.rows:
        exp.setdefault(o.batch, []).append(o.row)
    for b in sorted(set(got) | set(exp)):
        mine = [r for r in got.get(b, [])
                if "null_event_time" not in (r.get("_dead_letter") or "")]
        assert canonical_rows(mine) == canonical_rows(exp.get(b, [])), f"batch {b}"

    c = dict(acc.value)
    rows = [r for _, r in result.rows]
    windows = [r for r in rows if r.get("_dead_letter") is None]
    # NaN and NULL are one group, -0.0 and 0.0 another: each emitted once.
    first = [("NULL" if r["g"] is None else r["g"], r["n"]) for r in windows
             if r["window_start"] < at(1)]
    assert sorted(first, key=str) == sorted([(0.0, 2), (INF, 2), ("NULL", 2)], key=str)
    taken: set[int] = set()
    for w in windows:
        ids = {i for i in range(14) if w["bits"] >> i & 1}
        assert w["n"] == len(ids) and not ids & taken
        taken |= ids
    assert c.get("out_of_range_dropped", 0) == 3
    batches = [b.rows for b in scheduled]
    assert_accounted(
        {r["id"] for rows_ in batches for r in rows_ if r["id"] >= 0},
        output=taken, dead={d["row"]["id"] for d in dead_letters(rows)},
        spark=spark_dropped_ids(batches, watermarks, timestamps=TIMESTAMPS),
        counted={n: c.get(n, 0) for n in ("late_dropped", "null_event_time_dropped",
                                           "out_of_range_dropped")})
    # 7 (before the epoch) in every case; 12 too under drop, whose W is not held back by H.
    assert 7 in spark_dropped_ids(batches, watermarks, timestamps=TIMESTAMPS)


def test_types_the_operators_cannot_carry_fail_before_the_query_starts(spark, tmp_path):
    (tmp_path / "in").mkdir()
    base = T.StructType([T.StructField("k", T.LongType()), T.StructField("ts", T.TimestampType())])

    def stream(schema: T.StructType) -> Any:
        return spark.readStream.schema(schema).parquet(str(tmp_path / "in"))

    df = stream(base).withColumn("span", F.make_ym_interval(F.lit(1), F.lit(2)))
    spec = Join(left_keys=["k"], right_keys=["k"], time_window_ms=0, event_time_column="ts")
    with pytest.raises(ConfigError, match=r"column 'span' of the left input has type "
                                          r"interval year to month"):
        stream_join(df, stream(base), spec)
    nested = stream(base).withColumn("k", F.struct(F.col("k")))
    with pytest.raises(ConfigError, match=r"`left_keys` column 'k' has type struct"):
        stream_join(nested, nested, spec)
    mapped = stream(base).withColumn("g", F.create_map(F.lit("a"), F.col("k")))
    window = Window(kind="tumbling", duration_ms=1000, event_time_column="ts", group_by=["g"],
                    aggregations=[Aggregation(agg="count", as_="n")], max_groups_per_window=10)
    with pytest.raises(ConfigError, match=r"`group_by` column 'g' of the input has type map"):
        window_aggregate(mapped, window)


def test_key_groups_put_minus_zero_with_zero(spark):
    """The join hashes a double key as is (``join/shim.py``), and its step takes -0.0 equal to
    0.0: that needs Spark's hash to be equal for both, as it is for every NaN."""
    row = spark.sql("SELECT xxhash64(CAST(-0.0 AS DOUBLE)) = xxhash64(CAST(0.0 AS DOUBLE)) AS z, "
                    "xxhash64(CAST('NaN' AS DOUBLE)) = xxhash64(sqrt(-1D)) AS n").first()
    assert row["z"] and row["n"]
