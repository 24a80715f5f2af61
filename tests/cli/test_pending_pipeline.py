"""``interlace run`` after a stop between a micro-batch's commit and its no-data micro-batch.

The run schedules the no-data micro-batch Spark owes
(:func:`~interlace.operators.common.pending.schedule_pending_no_data_batch`) before it starts
the query: the window the moved watermark closed reaches the DuckDB table, where Spark alone
would hold it until new rows arrive (``tests/replay/test_pending_no_data.py`` shows Spark's
behaviour). The stop is made exactly there: the pipeline's own query, built by
:func:`~interlace.runner.build_query_input` as the run builds it, runs its first micro-batch
under a one-day processing-time trigger and is stopped before the next.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter

import pytest
from cli_support import read_table, rows_of

import interlace.runner as runner
from interlace.pipeline.checkpoint import state_encoding_for
from interlace.preflight import preflight
from interlace.testing.oracle import canonical_rows
from interlace.testing.window_oracle import WindowBatch, oracle_window

pytestmark = pytest.mark.spark

TOML = """
name = "clicks"

[[sources]]
name = "clicks"
format = "json"
path = "in/clicks"
schema = "user STRING, ts TIMESTAMP"
event_time_column = "ts"

[transform.window]
kind = "tumbling"
duration_ms = 10000
lateness_ms = 0
event_time_column = "ts"
group_by = ["user"]
max_groups_per_window = 100

[[transform.window.aggregations]]
agg = "count"
as = "n"

[target]
kind = "duckdb"
path = "out/clicks.duckdb"
table = "clicks"
"""

ROWS = [("a", "2026-01-01T00:00:01Z"), ("a", "2026-01-01T00:00:05Z"),
        ("b", "2026-01-01T00:00:30Z")]


def _stop_after_first_commit(spark, p, base):  # noqa: ANN001
    checkpoint = p.checkpoint_folder(base)
    with state_encoding_for(spark, checkpoint):
        out = runner.build_query_input(spark, p, base=base)
    query = (out.writeStream.foreachBatch(lambda df, _: df.collect())  # runs the operator
             .option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="1 day").start())  # next trigger: midnight UTC
    deadline = time.time() + 120
    while not (checkpoint / "commits" / "0").exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    query.stop()
    assert sorted(f.name for f in (checkpoint / "commits").iterdir() if f.name.isdigit()) == ["0"]


def test_a_run_after_a_stop_before_the_no_data_batch_emits_what_it_closes(
        spark, tmp_path, monkeypatch):
    (tmp_path / "p.toml").write_text(TOML)
    (tmp_path / "in/clicks").mkdir(parents=True)
    p = preflight(tmp_path / "p.toml", base=tmp_path)
    assert runner.run_pipeline(p, base=tmp_path, spark=spark, progress=None).batches == 0
    (tmp_path / "in/clicks/0.json").write_text(
        "".join(json.dumps({"user": u, "ts": t}) + "\n" for u, t in ROWS))
    _stop_after_first_commit(spark, p, tmp_path)  # batch 0 committed: W = 30 s from now on

    # Spark alone (the scheduling left out) runs nothing and leaves the checkpoint as it was.
    monkeypatch.setattr(runner, "schedule_pending_no_data_batch", lambda *a: None)
    alone = runner.run_pipeline(p, base=tmp_path, spark=spark, progress=None)
    assert alone.batches == 0 and alone.output_rows == 0
    assert not (p.checkpoint_folder(tmp_path) / "offsets" / "1").exists()
    monkeypatch.undo()

    summary = runner.run_pipeline(p, base=tmp_path, spark=spark, progress=None)
    assert summary.batches == 1 and summary.output_rows == 1
    got = rows_of(read_table(tmp_path / "out/clicks.duckdb", "clicks"))
    log = [WindowBatch(rows=tuple({"user": u, "ts": dt.datetime.fromisoformat(t[:-1])}
                                  for u, t in ROWS)), WindowBatch(rows=())]
    want = oracle_window(p.window, log, columns=["user", "ts"])
    assert Counter(canonical_rows(got)) == Counter(canonical_rows(o.row for o in want.rows))
    assert [(r["user"], r["n"]) for r in got] == [("a", 2)]
