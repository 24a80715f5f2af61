"""The CLI as a user runs it (subprocess): validate, run every source format and target that
can run here, the metrics endpoint, and the progress lines on and off a terminal.

Tests of what a pipeline computes (a target's rows, the counts in the progress lines) run it
in-process on the test session with ``run_here``, which calls what ``interlace run`` calls; the
command line's own behaviour (exit codes, messages, the log file, the terminal, Ctrl-C) is
tested through a subprocess."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
import tty
import urllib.request
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from cli_support import INTERLACE, cli, read_table, rows_of, run_here
from pyspark.sql import types as T

from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.replay import write_parquet_rows
from interlace.testing.window_oracle import WindowBatch, oracle_window

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1)
ORDERS = T.StructType([T.StructField("order_id", T.LongType()), T.StructField("amount", T.DoubleType()),
                       T.StructField("order_ts", T.TimestampType())])
PAYS = T.StructType([T.StructField("order_id", T.LongType()), T.StructField("paid", T.DoubleType()),
                     T.StructField("pay_ts", T.TimestampType())])


def at(sec):
    return T0 + dt.timedelta(seconds=sec)


def join_log(n_batches=4):
    log = []
    for b in range(n_batches):
        left = tuple({"order_id": b * 10 + i, "amount": float(i), "order_ts": at(b * 60 + i * 5)}
                     for i in range(6))
        right = tuple({"order_id": b * 10 + i, "paid": float(i), "pay_ts": at(b * 60 + i * 5 + 20)}
                      for i in range(0, 6, 2))
        log.append(JoinBatch(left=left, right=right))
    log.append(JoinBatch(left=({"order_id": -1, "amount": 0.0, "order_ts": at(5000)},),
                         right=({"order_id": -1, "paid": 0.0, "pay_ts": at(5000)},)))
    return log


JOIN_TOML = """
name = "orders-payments"

[[sources]]
name = "orders"
format = "parquet"
path = "in/orders"
schema = "order_id BIGINT, amount DOUBLE, order_ts TIMESTAMP"
event_time_column = "order_ts"

[[sources]]
name = "payments"
format = "parquet"
path = "in/payments"
schema = "order_id BIGINT, paid DOUBLE, pay_ts TIMESTAMP"
event_time_column = "pay_ts"

[transform.join]
kind = "stream_stream_join"
left_source = "orders"
right_source = "payments"
left_keys = ["order_id"]
right_keys = ["order_id"]
how = "left"
lower_ms = 0
upper_ms = 30000
left_event_time_column = "order_ts"
right_event_time_column = "pay_ts"
lateness_ms = 5000
key_groups = 4

[target]
kind = "duckdb"
path = "out/result.duckdb"
table = "joined"

[spark]
checkpoint = "out/checkpoint"
shuffle_partitions = 2
"""


def write_join_inputs(root: Path, log):
    for name, schema, side in (("orders", ORDERS, "left"), ("payments", PAYS, "right")):
        (root / "in" / name).mkdir(parents=True, exist_ok=True)
        for i, b in enumerate(log):
            write_parquet_rows(root / "in" / name / f"{i:06d}.parquet", list(getattr(b, side)),
                               schema, 1_700_000_000.0 + i)


def expected_join(log, toml_text):
    from interlace.pipeline import Pipeline

    p = Pipeline.from_toml(toml_text)
    want = oracle_join(p.join, log, left_columns=ORDERS.names, right_columns=PAYS.names)
    return Counter(canonical_rows([o.row for o in want.rows]))


def test_validate_accepts_the_examples_and_reports_errors(tmp_path):
    repo = Path(__file__).resolve().parents[2]
    for example in sorted((repo / "examples").glob("*.toml")):
        proc = cli("validate", str(example), cwd=repo)
        assert "ok" in proc.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text(JOIN_TOML.replace('how = "left"', 'how = "left"\nbogus_key = 1'))
    proc = cli("validate", str(bad), cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "bogus_key" in proc.stderr


def dlq_join_case(root: Path):
    """Write the left join under dlq, with two payments far behind the watermark, to ``root``.

    The pipeline is ``root / "p.toml"``. Returns the log and the oracle's result.
    """
    from interlace.pipeline import Pipeline

    log = join_log()
    late = ({"order_id": 1, "paid": 9.0, "pay_ts": at(2)},
            {"order_id": 2, "paid": 9.0, "pay_ts": at(3)})
    log[3] = JoinBatch(left=log[3].left, right=log[3].right + late)
    write_join_inputs(root, log)
    text = JOIN_TOML.replace("lateness_ms = 5000", 'lateness_ms = 5000\nlate_data = "dlq"').replace(
        "[spark]",
        '[dead_letter]\nkind = "duckdb"\npath = "out/result.duckdb"\ntable = "letters"\n\n[spark]')
    (root / "p.toml").write_text(text)
    want = oracle_join(Pipeline.from_toml(text).join, log, left_columns=ORDERS.names,
                       right_columns=PAYS.names)
    return log, want


def stamp(ms):
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).strftime(
        "%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def progress_patterns(name, log, want, horizon_ms=86_400_000):
    """One regex per micro-batch: the progress line ``run_pipeline`` prints for it.

    Input rows from the log (one file per input per batch; 0 in the trailing no-data batch),
    the operator's watermark ``wm = W + H`` with Spark's ``W`` beside it (``H`` is the dlq
    horizon, a day by default: issue 11), output and cumulative late rows (dead letters) from
    the oracle; Spark's state metrics only by shape.
    """
    patterns, late = [], 0
    for b in range(want.num_batches):
        rows = want.rows_for_batch(b)
        letters = sum(1 for r in rows if r["_dead_letter"] is not None)
        late += letters
        n_in = len(log[b].left) + len(log[b].right) if b < len(log) else 0
        w_ms = want.spark_watermarks_ms[b]
        wm = stamp(w_ms) if w_ms <= 0 else f"{stamp(w_ms + horizon_ms)} (Spark's {stamp(w_ms)})"
        # Under dlq nothing is dropped: every late row is a dead letter (and the day-long
        # horizon keeps Spark's pre-filter away); the Parquet inputs have no malformed records.
        line = (f"[{name}] batch {b}: in {n_in} rows, watermark {wm}, "
                f"out {len(rows) - letters} rows, late {late}, dropped 0, malformed 0, state ")
        patterns.append(re.escape(line) + r"\d+ groups / \d+ bytes")
    assert late == 2 and want.num_batches == len(log) + 1
    return patterns


def assert_dlq_join_tables(root: Path, want) -> None:
    """The DuckDB tables of :func:`dlq_join_case` hold the oracle's rows and dead letters."""
    normal = [{k: v for k, v in o.row.items() if k != "_dead_letter"} for o in want.rows
              if o.row["_dead_letter"] is None]
    letters = sorted(json.loads(o.row["_dead_letter"])["row"]["pay_ts"] for o in want.rows
                     if o.row["_dead_letter"] is not None)
    got = rows_of(read_table(root / "out/result.duckdb", "joined"))
    assert Counter(canonical_rows(got)) == Counter(canonical_rows(normal))
    got_letters = read_table(root / "out/result.duckdb", "letters")["dead_letter"]
    assert sorted(json.loads(x)["row"]["pay_ts"] for x in got_letters) == letters
    assert len(letters) == 2


@pytest.mark.compat  # the compatibility tier (.ci/compat): every supported PySpark line
def test_run_join_pipeline_parquet_to_duckdb_with_dead_letters_equals_oracle(spark, tmp_path):
    log, want = dlq_join_case(tmp_path)
    progress = run_here(spark, tmp_path, "p.toml")
    # Not a terminal: one plain, newline-terminated progress line per micro-batch, no escapes
    # (the same lines `interlace run` writes to a stderr that is not a terminal).
    for pattern in progress_patterns("orders-payments", log, want):
        assert re.search(f"^{pattern}$", progress, re.MULTILINE), (pattern, progress)
    assert len(re.findall(r"^\[orders-payments\] batch ", progress, re.MULTILINE)) == \
        want.num_batches
    assert "\r" not in progress and "\x1b[K" not in progress
    assert re.search(r"^\[orders-payments\] done: .*\n", progress, re.MULTILINE)
    assert_dlq_join_tables(tmp_path, want)


def test_rerun_with_no_new_input_says_so_and_paths_resolve_against_the_files_folder(
        tmp_path, spark):
    job = tmp_path / "job"
    log = join_log(n_batches=2)
    write_join_inputs(job, log)
    (job / "p.toml").write_text(JOIN_TOML)
    # Run from the parent folder: in/, out/ and the checkpoint are job/'s (issue 11).
    first = cli("run", "job/p.toml", cwd=tmp_path)
    assert "[orders-payments] batch 0: in " in first.stderr
    assert (job / "out/result.duckdb").is_file() and not (tmp_path / "out").exists()
    # The checkpoint records the pipeline file that ran it (`interlace inspect CHECKPOINT`).
    record = json.loads((job / "out/checkpoint/interlace-pipeline.json").read_text())
    assert (record["file"], record["toml"], record["stage"]) == (
        str((job / "p.toml").resolve()), JOIN_TOML, "orders-payments")
    # The same pipeline file and checkpoint again (in-process: what run_pipeline prints is
    # under test here, the command line's resolution of paths above): nothing new.
    out = run_here(spark, job, "p.toml")
    assert "watermark -" not in out and "batch " not in out, out
    assert re.search(r"^\[orders-payments\] no new input: nothing to do \(checkpoint .*"
                     r"job/out/checkpoint is up to date\)$", out, re.MULTILINE), out


def test_run_on_a_terminal_rewrites_one_live_progress_line(tmp_path):
    log, want = dlq_join_case(tmp_path)
    master, slave = pty.openpty()
    tty.setraw(slave)  # the exact bytes: no "\n" -> "\r\n" translation by the terminal
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    try:
        proc = subprocess.Popen([*INTERLACE, "run", "p.toml"], cwd=tmp_path, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                                start_new_session=True)
    finally:
        os.close(slave)
    chunks: list[bytes] = []

    def read_terminal():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every process writing to the terminal has exited
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        reader.join(timeout=60)
        os.close(master)
    err = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, err
    # Each batch rewrites the line in place: carriage return, erase line, the new text, and no
    # newline until the run is done.
    patterns = progress_patterns("orders-payments", log, want)
    for pattern in patterns:
        assert re.search("\r\x1b\\[K" + pattern, err), (pattern, err)
    assert err.count("\r\x1b[K[orders-payments] batch ") == want.num_batches
    assert re.search("\r\x1b\\[K" + patterns[-1] + "\n\\[orders-payments\\] done: ", err), err
    assert not re.search(r"(^|\n)\[orders-payments\] batch ", err), err
    # No Python warning reaches the user, PySpark's workers' included (issue 10): not on the
    # terminal, nor in the run's log file, where Spark's and the workers' output goes.
    assert "Warning" not in err, err
    spark_log = (tmp_path / ".interlace/logs/p.log").read_text()
    assert "FutureWarning" not in spark_log, spark_log[-3000:]
    assert_dlq_join_tables(tmp_path, want)


def test_progress_late_count_is_as_of_each_batch_even_when_printing_lags(spark, tmp_path):
    from interlace.pipeline import Pipeline
    from interlace.runner import run_pipeline

    log, want = dlq_join_case(tmp_path)

    class StalledLog(io.StringIO):
        """Holds the first line until the query has run every batch: the runner then reports
        all the later batches at once, after the accumulator has counted all the late rows."""

        def write(self, text):
            if not self.getvalue():
                deadline = time.time() + 300
                while spark.streams.active and time.time() < deadline:
                    time.sleep(0.2)
            return super().write(text)

    out = StalledLog()
    run_pipeline(Pipeline.from_toml((tmp_path / "p.toml").read_text()), base=tmp_path,
                 spark=spark, progress=out)
    for pattern in progress_patterns("orders-payments", log, want):
        assert re.search(f"^{pattern}$", out.getvalue(), re.MULTILINE), (pattern, out.getvalue())


WINDOW_TOML = """
name = "clicks"

[[sources]]
name = "clicks"
format = "{fmt}"
path = "in/clicks"
schema = "user STRING, page STRING, ts TIMESTAMP"
event_time_column = "ts"
{extra}

[transform.window]
kind = "tumbling"
duration_ms = 10000
lateness_ms = 1000
group_by = ["user"]
late_data = "reopen"
allowed_lateness_ms = 20000
max_groups_per_window = 1000
key_groups = 2

[[transform.window.aggregations]]
agg = "count"
as = "clicks"

[[transform.window.aggregations]]
agg = "count_distinct"
column = "page"
mode = "exact"
max_distinct_values_per_group = 100
as = "pages"

[target]
kind = "{target}"
path = "{target_path}"

[spark]
checkpoint = "out/checkpoint"
shuffle_partitions = 2
"""

CLICKS = [
    [("a", "/x", 1), ("b", "/y", 2), ("a", "/y", 3)],
    [("a", "/z", 12), ("b", "/x", 14)],
    [("b", "/x", 25)],
    [("a", "/q", 4), ("z", "/", 500)],   # a@4 is late (wm = 24 s): re-emits window [0, 10)
]


def clicks_log():
    return [WindowBatch(rows=tuple({"user": u, "page": p, "ts": at(s)} for u, p, s in b)) for b in CLICKS]


def write_clicks(root: Path, fmt: str):
    folder = root / "in" / "clicks"
    folder.mkdir(parents=True)
    for i, batch in enumerate(CLICKS):
        path = folder / f"{i:06d}.{fmt}"
        if fmt == "json":
            path.write_text("".join(json.dumps({"user": u, "page": p, "ts": at(s).isoformat() + "Z"}) + "\n"
                                    for u, p, s in batch))
        else:
            path.write_text("".join(f"{u},{p},{at(s).isoformat()}Z\n" for u, p, s in batch))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def expected_window(toml_text):
    from interlace.pipeline import Pipeline

    p = Pipeline.from_toml(toml_text)
    want = oracle_window(p.window, clicks_log(), columns=["user", "page", "ts"])
    return Counter(canonical_rows([o.row for o in want.rows]))


def test_json_source_parquet_target_window_reopen_equals_oracle(spark, tmp_path):
    write_clicks(tmp_path, "json")
    text = WINDOW_TOML.format(fmt="json", extra="", target="parquet", target_path="out/parquet")
    (tmp_path / "w.toml").write_text(text)
    run_here(spark, tmp_path, "w.toml")
    # The whole folder reads back with Spark and with pandas (issue 11): microsecond UTC
    # timestamps, and typed columns in the empty first batch's file too.
    assert (tmp_path / "out/parquet/batch_id=0/part.parquet").is_file()
    folder = str(tmp_path / "out/parquet")
    by_spark = [r.asDict() for r in spark.read.parquet(folder).drop("batch_id").collect()]
    assert Counter(canonical_rows(by_spark)) == expected_window(text)
    whole = pd.read_parquet(folder).drop(columns=["batch_id"])
    assert str(whole["window_start"].dt.tz) == "UTC"
    whole["window_start"] = whole["window_start"].dt.tz_localize(None)
    whole["window_end"] = whole["window_end"].dt.tz_localize(None)
    assert Counter(canonical_rows(rows_of(whole))) == expected_window(text)
    df = pd.concat([pd.read_parquet(p) for p in sorted((tmp_path / "out/parquet").glob("*/*.parquet"))])
    for c in ("window_start", "window_end"):
        df[c] = pd.to_datetime(df[c]).dt.tz_localize(None) if getattr(df[c].dtype, "tz", None) is None \
            else df[c].dt.tz_convert("UTC").dt.tz_localize(None)
    got = Counter(canonical_rows(rows_of(df)))
    want = expected_window(text)
    assert got == want
    assert any(r["revision"] == 1 for r in rows_of(df))


SESSION_CLICKS = [
    [("a", "/x", 0), ("a", "/y", 3), ("b", "/x", 1), ("c", "/x", 0)],
    [("c", "/y", 10), ("b", "/y", 12)],
    [("b", "/z", 17)],
    [("b", "/q", 19)],
    # Late (wm = 18) but within the allowance: a@7 extends the emitted [0, 8) to [0, 12);
    # c@5 touches the emitted [0, 5) and [10, 15) and merges them ([10, 15) is retracted).
    [("a", "/z", 7), ("c", "/z", 5)],
    [("z", "/", 500)],
]


def naive_sessions(clicks, gap_s):
    """Final sessions straight from the rows: per user, times chaining with gaps <= gap."""
    out = {}
    for user in {u for b in clicks for u, _, _ in b}:
        times = sorted(s for b in clicks for u, _, s in b if u == user)
        start = last = times[0]
        count = 1
        for t in times[1:]:
            if t - last > gap_s:
                out[(user, at(start), at(last + gap_s))] = count
                start, count = t, 0
            last, count = t, count + 1
        out[(user, at(start), at(last + gap_s))] = count
    return out


def write_session_clicks(root: Path) -> None:
    """:data:`SESSION_CLICKS` as one JSON file per micro-batch under ``root/in/clicks``."""
    folder = root / "in" / "clicks"
    folder.mkdir(parents=True)
    for i, batch in enumerate(SESSION_CLICKS):
        path = folder / f"{i:06d}.json"
        path.write_text("".join(json.dumps({"user": u, "page": p, "ts": at(s).isoformat() + "Z"})
                                + "\n" for u, p, s in batch))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def test_session_reopen_into_duckdb_converges_to_the_final_sessions(spark, tmp_path):
    """Issue 11: a late row that grows or merges emitted sessions leaves no stale row."""
    write_session_clicks(tmp_path)
    text = WINDOW_TOML.format(fmt="json", extra="", target="duckdb", target_path="out/w.duckdb")
    text = text.replace('kind = "tumbling"\nduration_ms = 10000', 'kind = "session"\ngap_ms = 5000')
    text = text.replace('path = "out/w.duckdb"', 'path = "out/w.duckdb"\ntable = "sessions"\n'
                        'key = ["window_start", "window_end", "user"]')
    (tmp_path / "w.toml").write_text(text)
    run_here(spark, tmp_path, "w.toml")
    got = {(r["user"], r["window_start"], r["window_end"]): r["clicks"]
           for r in rows_of(read_table(tmp_path / "out/w.duckdb", "sessions"))}
    want = naive_sessions(SESSION_CLICKS[:-1], 5)  # the sentinel's own session never closes
    assert got == want
    assert want[("a", at(0), at(12))] == 3 and want[("c", at(0), at(15))] == 3
    # The operator did re-emit (revision 1) and retract (the absorbed [10, 15) of c).
    from interlace.pipeline import Pipeline

    rows = [o.row for o in oracle_window(Pipeline.from_toml(text).window,
                                         [WindowBatch(rows=tuple({"user": u, "page": p, "ts": at(s)}
                                                                 for u, p, s in b))
                                          for b in SESSION_CLICKS],
                                         columns=["user", "page", "ts"]).rows]
    assert any(r["retracted"] for r in rows) and any(r["revision"] == 1 for r in rows)


BAD_TOML = """
name = "bad"

[[sources]]
name = "events"
format = "json"
path = "in/events"
schema = "user STRING, amount DOUBLE, ts TIMESTAMP"
event_time_column = "ts"

[transform.window]
kind = "tumbling"
duration_ms = 10000
lateness_ms = 1000
group_by = ["user"]
late_data = "dlq"
dlq_horizon_ms = 1000
max_groups_per_window = 100
key_groups = 2

[[transform.window.aggregations]]
agg = "sum"
column = "amount"
as = "total"

[target]
kind = "duckdb"
path = "out/b.duckdb"
table = "totals"

[dead_letter]
kind = "duckdb"
path = "out/b.duckdb"
table = "letters"

[spark]
checkpoint = "out/checkpoint"
shuffle_partitions = 2
"""


def test_bad_records_are_counted_per_batch_and_dead_letters_keep_the_raw_input(spark, tmp_path):
    """Issue 11: nothing bad vanishes without a trace."""
    def rec(user, amount, sec):
        ts = at(sec).isoformat() + "Z" if isinstance(sec, int) else sec
        return json.dumps({"user": user, "amount": amount, "ts": ts})

    batches = [
        [rec("a", 1, 1), rec("a", "abc", 2), rec("b", 2, 3)],  # "abc" is not a DOUBLE
        [rec("a", 4, 30), rec("a", 5, "not-a-time")],         # unparsable event time
        [rec("z", 0, 40)],
        # b@2 is behind the previous batch's Spark watermark (28 s): Spark removes it.
        [rec("b", 7, 2), rec("z", 0, 500)],
    ]
    folder = tmp_path / "in" / "events"
    folder.mkdir(parents=True)
    for i, lines in enumerate(batches):
        (folder / f"{i:06d}.json").write_text("\n".join(lines) + "\n")
        os.utime(folder / f"{i:06d}.json", (1_700_000_000 + i, 1_700_000_000 + i))
    (tmp_path / "b.toml").write_text(BAD_TOML)
    progress = run_here(spark, tmp_path, "b.toml")
    for b, (dropped, malformed) in enumerate([(0, 1), (0, 1), (0, 0), (1, 0)]):
        assert re.search(rf"^\[bad\] batch {b}: .*, dropped {dropped}, malformed {malformed}, "
                         r"state ", progress, re.MULTILINE), progress
    assert re.search(r"^\[bad\] done: .* 2 malformed, ", progress, re.MULTILINE)
    totals = {(r["user"], r["window_start"]): r["total"]
              for r in rows_of(read_table(tmp_path / "out/b.duckdb", "totals"))}
    assert totals == {("a", at(0)): 1.0, ("b", at(0)): 2.0, ("a", at(30)): 4.0,
                      ("z", at(40)): 0.0}
    letters = [json.loads(x) for x in read_table(tmp_path / "out/b.duckdb", "letters")["dead_letter"]]
    assert [x["reason"] for x in letters] == ["null_event_time"]
    assert letters[0]["row"]["ts"] is None
    assert json.loads(letters[0]["row"]["_corrupt_record"]) == {"user": "a", "amount": 5,
                                                                 "ts": "not-a-time"}


def test_csv_source_console_target(spark, tmp_path, capsys):
    write_clicks(tmp_path, "csv")
    text = WINDOW_TOML.format(fmt="csv", extra='options = { header = "false" }', target="console",
                              target_path="unused")
    (tmp_path / "w.toml").write_text(text.replace('path = "unused"\n', ""))
    run_here(spark, tmp_path, "w.toml")
    out = capsys.readouterr().out
    assert "window_start" in out and "clicks" in out
    assert "revision" in out


def test_duckdb_upsert_keeps_the_highest_revision(spark, tmp_path):
    write_clicks(tmp_path, "json")
    text = WINDOW_TOML.format(fmt="json", extra="", target="duckdb", target_path="out/w.duckdb")
    (tmp_path / "w.toml").write_text(text)
    run_here(spark, tmp_path, "w.toml")
    got = rows_of(read_table(tmp_path / "out/w.duckdb", "clicks"))
    # One row per (window, user): the last revision of each window from the oracle.
    from interlace.pipeline import Pipeline

    spec = Pipeline.from_toml(text).window
    want = oracle_window(spec, clicks_log(), columns=["user", "page", "ts"])
    last = {}
    for o in want.rows:
        k = (o.row["window_start"], o.row["user"])
        if k not in last or o.row["revision"] >= last[k]["revision"]:
            last[k] = o.row
    assert Counter(canonical_rows(got)) == Counter(canonical_rows(last.values()))


def test_kafka_source_without_connector_is_a_clear_error(tmp_path):
    text = """
name = "k"
[[sources]]
name = "events"
format = "kafka"
options = { "kafka.bootstrap.servers" = "localhost:9", subscribe = "events" }
[transform.window]
kind = "tumbling"
duration_ms = 1000
event_time_column = "timestamp"
max_groups_per_window = 10
[[transform.window.aggregations]]
agg = "count"
as = "n"
[target]
kind = "console"
[spark]
conf = { "spark.interlace.kafka.resolveConnector" = "false" }  # as without Maven
"""
    (tmp_path / "k.toml").write_text(text)
    proc = cli("run", "k.toml", cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "spark-sql-kafka" in proc.stderr and "not on the classpath" in proc.stderr


def test_metrics_endpoint_is_scraped_during_a_run_and_matches_the_oracle(spark, tmp_path):
    from interlace.metrics import PipelineMetrics
    from interlace.pipeline import Pipeline
    from interlace.runner import run_pipeline

    log = join_log()
    write_join_inputs(tmp_path, log)
    text = JOIN_TOML.replace('how = "left"', 'how = "left"\nlate_data = "drop"')
    p = Pipeline.from_toml(text)
    metrics = PipelineMetrics(p.name, "join")
    scrapes: list[str] = []
    stop = threading.Event()

    def scrape():
        while not stop.is_set():
            port = getattr(metrics, "port", None)  # set once the run binds a free port
            try:
                if port is None:
                    raise OSError("not serving yet")
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    scrapes.append(r.read().decode())
            except OSError:
                pass
            time.sleep(0.2)

    t = threading.Thread(target=scrape, daemon=True)
    t.start()
    try:
        out = io.StringIO()
        summary = run_pipeline(p, base=tmp_path, spark=spark, metrics=metrics, metrics_port=0,
                               progress=out)
    finally:
        stop.set()
        t.join(timeout=5)
    assert scrapes, "the endpoint was never reachable during the run"
    assert f"metrics: http://127.0.0.1:{metrics.port}/metrics" in out.getvalue()
    assert any("interlace_join_matches_total" in s for s in scrapes)
    want = oracle_join(p.join, log, left_columns=ORDERS.names, right_columns=PAYS.names)
    pairs = sum(1 for o in want.rows if o.row["right_order_id"] is not None)
    unmatched = sum(1 for o in want.rows if o.row["right_order_id"] is None)

    def value(name, **labels):
        return metrics.registry.get_sample_value(name, {"pipeline": p.name, **labels}) or 0

    assert value("interlace_join_matches_total") == pairs
    assert value("interlace_join_unmatched_emitted_total", side="left") == unmatched
    assert value("interlace_output_rows_total") == pairs + unmatched == summary.output_rows
    assert value("interlace_batches_total") == len(want.spark_watermarks_ms)
    last = [s for s in scrapes if "interlace_batches_total" in s][-1]
    scraped = _sample(last, "interlace_join_matches_total")
    assert 0 <= scraped <= pairs
    assert value("interlace_watermark_seconds", source="orders") > 0


def _sample(text, name):
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_explain_prints_the_seed_003_table(tmp_path):
    from interlace.testing.seed003 import KAFKA_TABLE

    events = [{"side": side, "ts": sec, "key": "k", "value": v} for sec, side, v, *_ in KAFKA_TABLE]
    (tmp_path / "log.json").write_text(json.dumps({"events": events}))
    proc = cli("explain", "log.json", "--time-window-ms", "15000", "--late-data", "reopen",
               "--allowed-lateness-ms", "5000", "--how", "inner,left,full", cwd=tmp_path)
    lines = proc.stdout.splitlines()
    assert lines[0].split("|")[0].strip() == "ts" and "full" in lines[0]
    row_15 = next(line for line in lines if line.startswith("15 "))
    assert all(p in row_15 for p in ("D - a", "D - b", "D - c", "D - d"))
    assert "E - null" in lines[-1] and "no-data batch" in lines[-1]


def test_rate_source_runs_continuously_and_stops_cleanly_on_ctrl_c(tmp_path):
    text = """
name = "rate"
[[sources]]
name = "ticks"
format = "rate"
options = { rowsPerSecond = "50" }
event_time_column = "timestamp"
[transform.window]
kind = "tumbling"
duration_ms = 1000
max_groups_per_window = 10
key_groups = 1
[[transform.window.aggregations]]
agg = "count"
as = "n"
[target]
kind = "duckdb"
path = "out/rate.duckdb"
[spark]
checkpoint = "out/checkpoint"
shuffle_partitions = 1
"""
    (tmp_path / "r.toml").write_text(text)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([*INTERLACE, "run", "r.toml", "--continuous"], cwd=tmp_path, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    deadline, seen = time.time() + 300, []
    while time.time() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if "out " in line and "batch" in line and " out 0 rows" not in line:
            break
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, "".join(seen) + rest
    assert "done:" in rest
    counts = read_table(tmp_path / "out/rate.duckdb", "rate")["n"]
    assert len(counts) >= 1 and (counts > 0).all()
