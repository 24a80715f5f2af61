"""interlace over Spark Connect: a local Connect server started from the PySpark installation.

One server and one Connect session for the whole module (the ``connect_spark`` fixture): the
server is a separate JVM (``spark-submit --class ...SparkConnectServer``, bound to 127.0.0.1,
token-guarded; :func:`interlace.testing.connect.local_connect_server`) and the pytest process
is only its client, so the rest of the suite keeps its classic session-scoped ``spark``. The
Connect session makes PySpark treat the process as a Connect client (the process-wide
``SPARK_CONNECT_MODE_ENABLED``); the fixture restores the environment when the module ends.

* ``stream_join`` and ``window_aggregate`` replays (the same ``replay_streams`` the classic
  tests use) equal their oracles batch by batch, watermarks included;
* the operators' input checks (which read schema metadata) work over Connect;
* what needs a SparkContext (the counters accumulator) fails with a ConfigError naming it.
"""

from __future__ import annotations

import datetime as dt
import os
import time

import pytest
from pyspark.sql import types as T

from interlace import Aggregation, ConfigError, Join, Window, local_session, stream_join
from interlace import window_aggregate
from interlace.metrics import counters
from interlace.testing.connect import local_connect_server
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.replay import replay_join, replay_streams
from interlace.testing.window_oracle import WindowBatch, oracle_window

pytestmark = pytest.mark.spark

#: Set by PySpark when a Connect session is created; process-wide, so restored afterwards.
CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")

T0 = dt.datetime(2026, 1, 1)
JOIN_SCHEMA = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("v", T.StringType()),
    T.StructField("ts", T.TimestampType()),
])
JOIN_COLS = list(JOIN_SCHEMA.names)
WINDOW_SCHEMA = T.StructType([
    T.StructField("user", T.StringType()),
    T.StructField("amount", T.LongType()),
    T.StructField("page", T.StringType()),
    T.StructField("ts", T.TimestampType()),
])
WINDOW_COLS = list(WINDOW_SCHEMA.names)


def at(sec):
    return T0 + dt.timedelta(seconds=sec)


@pytest.fixture(scope="module")
def connect_spark(tmp_path_factory):
    saved = {k: os.environ.get(k) for k in CONNECT_ENV}
    log = tmp_path_factory.mktemp("connect-server") / "server.log"
    started = time.monotonic()
    with local_connect_server(conf={"spark.driver.memory": "1g"}, log_path=log) as url:
        assert url.startswith("sc://localhost:")
        session = local_session(remote=url, shuffle_partitions=2)
        print(f"\n[connect] server up and session open in {time.monotonic() - started:.1f} s")
        try:
            yield session
        finally:
            session.stop()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def test_the_session_is_a_connect_client_set_up_like_local_session(connect_spark):
    assert type(connect_spark).__module__ == "pyspark.sql.connect.session"
    assert connect_spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert connect_spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert connect_spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") == "100000"


def late_join_log():
    """Out-of-order rows, some behind the watermark; a sentinel far ahead closes everything."""
    def row(i, v, sec):
        return {"id": i, "v": v, "ts": at(sec)}

    return [
        JoinBatch(left=(row(1, "A", 10),), right=(row(9, "x", 10),)),
        JoinBatch(left=(row(2, "B", 40),), right=(row(2, "b", 41), row(1, "a1", 11))),
        JoinBatch(left=(row(3, "C", 30), row(2, "B2", 39)), right=(row(1, "a", 12), row(3, "c", 31))),
        JoinBatch(left=(row(4, "D", 70),), right=(row(4, "d", 71), row(5, "e", 69))),
        JoinBatch(left=(row(99, "S", 500),), right=(row(99, "s", 500),)),
    ]


def test_stream_join_replay_over_connect_matches_oracle(connect_spark, tmp_path):
    spec = Join(left_keys=["id"], right_keys=["id"], how="full", time_window_ms=5_000,
                event_time_column="ts", lateness_ms=2_000, key_groups=3)
    log = late_join_log()
    started = time.monotonic()
    result = replay_join(connect_spark, log, JOIN_SCHEMA, JOIN_SCHEMA, spec, workdir=tmp_path)
    scheduled = result.scheduled(log, JoinBatch)
    want = oracle_join(spec, scheduled, left_columns=JOIN_COLS, right_columns=JOIN_COLS)
    assert [b.watermark_ms for b in result.batches] == want.spark_watermarks_ms
    got, exp = result.rows_by_batch(), want.rows_by_batch()
    for b in sorted(set(got) | set(exp)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(exp.get(b, [])), f"batch {b}"
    assert any(r.row["left_id"] is None for r in want.rows), "the log must emit unmatched rows"
    assert sum(r.row["left_id"] is not None for r in want.rows) >= 4, "... and matches"
    assert sum(want.late_dropped.values()) > 0, "the log must hold rows the operator drops"
    print(f"\n[connect] join: {len(result.rows)} rows in {len(result.batches)} batches = oracle "
          f"(late dropped {dict(want.late_dropped)}) in {time.monotonic() - started:.1f} s")


def messy_window_log():
    def ev(user, sec, amount, page):
        return {"user": user, "amount": amount, "page": page, "ts": at(sec)}

    return [
        WindowBatch(rows=(ev("a", 1, 3, "/a"), ev("b", 2.5, 4, "/b"), ev(None, 3, 1, "/a"))),
        WindowBatch(rows=(ev("a", 12, 5, "/c"), ev("a", 4.5, 7, "/b"))),
        WindowBatch(rows=(ev("b", 25, 1, "/a"), ev("a", 6, 2, "/d"), ev("b", 11, 6, "/b"))),
        WindowBatch(rows=(ev("a", 16, 9, "/a"), ev("a", 41, 1, "/a"), ev("a", 7, 3, "/f"))),
        WindowBatch(rows=(ev("b", 27, 2, "/e"), ev("b", 70, 1, "/a"))),
    ]


def test_session_window_replay_over_connect_matches_oracle(connect_spark, tmp_path):
    spec = Window(kind="session", gap_ms=4_000, event_time_column="ts", group_by=["user"],
                  lateness_ms=2_000, late_data="reopen", allowed_lateness_ms=20_000,
                  max_groups_per_window=100, key_groups=3,
                  aggregations=[Aggregation(agg="count", as_="n"),
                                Aggregation(agg="sum", column="amount", as_="amount_sum"),
                                Aggregation(agg="last", column="page", as_="last_page")])
    log = messy_window_log()
    started = time.monotonic()
    result = replay_streams(connect_spark, {"events": (WINDOW_SCHEMA, [list(b.rows) for b in log])},
                            lambda f: window_aggregate(f["events"], spec), workdir=tmp_path)
    want = oracle_window(spec, result.scheduled(log, WindowBatch), columns=WINDOW_COLS)
    assert [b.watermark_ms for b in result.batches] == want.spark_watermarks_ms
    got, exp = result.rows_by_batch(), {}
    for o in want.rows:
        exp.setdefault(o.batch, []).append(o.row)
    for b in sorted(set(got) | set(exp)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(exp.get(b, [])), f"batch {b}"
    assert any(r["revision"] > 0 for _, r in result.rows), "reopen must revise a session"
    print(f"\n[connect] session window: {len(result.rows)} rows in {len(result.batches)} batches "
          f"= oracle in {time.monotonic() - started:.1f} s")


def test_counters_fail_with_a_clear_message_over_connect(connect_spark, tmp_path):
    with pytest.raises(ConfigError, match=r"interlace\.metrics\.counters\(\) needs a classic "
                                          r"SparkSession: Spark Connect .* no SparkContext"):
        counters(connect_spark)
    src = tmp_path / "src"
    src.mkdir()
    stream = connect_spark.readStream.schema(JOIN_SCHEMA).parquet(str(src))
    join = Join(left_keys=["id"], right_keys=["id"], time_window_ms=1_000, event_time_column="ts")
    window = Window(kind="tumbling", duration_ms=1_000, event_time_column="ts",
                    max_groups_per_window=10, aggregations=[Aggregation(agg="count", as_="n")])
    # Whatever was passed as counters (say, an accumulator of another, classic session).
    with pytest.raises(ConfigError, match=r"`counters` \(a SparkContext accumulator\) needs a "
                                          r"classic SparkSession.*Leave `counters` unset"):
        stream_join(stream, stream, join, counters=object())
    with pytest.raises(ConfigError, match=r"`counters` \(a SparkContext accumulator\)"):
        window_aggregate(stream, window, counters=object())
    # Without counters the same calls build their queries.
    assert stream_join(stream, stream, join).isStreaming
    assert window_aggregate(stream, window).isStreaming


def test_input_checks_work_over_connect(connect_spark, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    stream = connect_spark.readStream.schema(JOIN_SCHEMA).parquet(str(src))
    ok = dict(left_keys=["id"], right_keys=["id"], time_window_ms=1_000, event_time_column="ts")
    with pytest.raises(ConfigError, match=r"already carries a watermark on column 'ts'"):
        stream_join(stream.withWatermark("ts", "1 second"), stream, Join(**ok))
    with pytest.raises(ConfigError, match=r"`event_time_column` column 'v' .* TimestampType"):
        stream_join(stream, stream, Join(**{**ok, "event_time_column": "v"}))
    with pytest.raises(ConfigError, match="must be a streaming DataFrame"):
        stream_join(connect_spark.range(3), stream, Join(**ok))


def test_an_idle_input_gets_its_heartbeats_over_connect(connect_spark, tmp_path, monkeypatch):
    """Idle inputs (docs/idle-inputs.md) over Spark Connect: the listener runs in the client.

    A left outer join whose right input stops after its first file: the second run (5 s of
    processing time later) stamps the right input with the left's clock, and the unpaid 00:20
    row is written.
    """
    from interlace.operators.common import idle
    from interlace.testing.replay import write_parquet_rows

    spec = Join(left_keys=["id"], right_keys=["id"], how="left", time_window_ms=5_000,
                event_time_column="ts", right_idle_timeout_ms=1_000)
    runs = [(0, [([(1, 10)], [(1, 10)]), ([(2, 20)], []), ([(3, 60)], [])]),
            (5_000, [([(4, 61)], [])])]
    out_dir = str(tmp_path / "out")

    def write(df, batch_id):  # refers to nothing but out_dir: it runs on the server
        df.write.mode("append").parquet(out_dir)

    for side in ("left", "right"):
        (tmp_path / side).mkdir()
    n = 0
    for now_ms, batches in runs:
        monkeypatch.setattr(idle, "_now_ms", lambda now=now_ms: now)
        for left, right in batches:
            for side, rows in (("left", left), ("right", right)):
                write_parquet_rows(tmp_path / side / f"{n:04d}.parquet",
                                   [{"id": i, "v": f"{i}", "ts": at(s)} for i, s in rows],
                                   JOIN_SCHEMA, 1.7e9 + n)
            n += 1
        frames = [connect_spark.readStream.schema(JOIN_SCHEMA).option("maxFilesPerTrigger", 1)
                  .parquet(str(tmp_path / side)) for side in ("left", "right")]
        out = stream_join(*frames, spec, heartbeat_location=str(tmp_path / "beats"))
        query = (out.writeStream.foreachBatch(write)
                 .option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        beats = idle.heartbeats_at(tmp_path / "beats")
        assert beats is not None
        for p in query.recentProgress:
            beats.observe(p["observedMetrics"] or {})
    rows = {(r["left_id"], r["right_id"]) for r in connect_spark.read.parquet(out_dir).collect()}
    assert rows == {(1, 1), (2, None)}
    idle.unlisten(connect_spark)  # before the module's session stops (else Connect warns)
    assert getattr(connect_spark, "_interlace_idle_listener", None) is None
