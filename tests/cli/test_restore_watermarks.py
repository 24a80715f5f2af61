"""A join restarted with rows of one input only moves ``W`` as an uninterrupted run (issue 30).

Spark keeps no per-input watermark across a restart: the restarted query counts an input
that has delivered no row yet as 0, so its ``W`` stays at the restored one until *both*
inputs deliver rows again. Every join of a new pipeline checkpoint therefore reads heartbeat
sources (docs/idle-inputs.md, "Restarts"): at each start, each input gets a restore heartbeat
with its own greatest event time, read from ``_idle.json``, which the run's ``foreachBatch``
updates before Spark commits each micro-batch (so a kill right after a commit leaves it
exact).

Here payments are ahead of orders when the first run stops; the second run reads orders
only. With the heartbeats, the unpaid orders the catching-up orders close come out, as the
oracle (one log, no restart) says; a checkpoint written without heartbeat sources (an
earlier interlace's) shows what Spark alone does: they stay held.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from cli_support import read_table, rows_of, run_here

from interlace import Pipeline
from interlace.operators.common import idle
from interlace.pipeline.checkpoint import SPEC_FILE, spec_record
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.replay import write_parquet_rows

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOML = (EXAMPLES / "quiet_payments.toml").read_text().replace(
    "idle_timeout_ms = 2_000       # quiet for 2 s of processing time: idle\n", "")
BASE = dt.datetime(2026, 1, 1, 9, 0)
ORDERS_DDL = "order_id BIGINT, customer STRING, amount DOUBLE, order_ts TIMESTAMP"
PAYMENTS_DDL = "payment_id STRING, order_id BIGINT, paid DOUBLE, pay_ts TIMESTAMP"


def _order(order: int, minutes: int) -> dict:
    return {"order_id": order, "customer": "c", "amount": 1.0 * order,
            "order_ts": BASE + dt.timedelta(minutes=minutes)}


def _payment(order: int, minutes: int) -> dict:
    return {"payment_id": f"p{order}", "order_id": order, "paid": 1.0 * order,
            "pay_ts": BASE + dt.timedelta(minutes=minutes)}


#: The first run's files: payments reach 09:40, orders 09:05 (W = 09:05).
FIRST = JoinBatch(left=(_order(1, 0), _order(2, 5)), right=(_payment(1, 2), _payment(99, 40)))
#: The second run's file, orders only, to 09:35: W = min(09:35, 09:40) closes orders 2 and 3.
SECOND = JoinBatch(left=(_order(3, 20), _order(4, 35)))


def _run_twice(spark, folder: Path, monkeypatch) -> list[dict]:
    """Run the first file of each input, then (a restart, as a new process) the second."""
    import interlace.runner as runner

    # Only the micro-batch's own writer (before Spark's commit) may save the clocks: no
    # listener, no progress report after the commit (a kill can come before either).
    monkeypatch.setattr(idle.Heartbeats, "listen", lambda self, spark: None)
    monkeypatch.setattr(runner, "idle_sources", lambda *args: {})
    def write(name: str, index: int, rows: tuple[dict, ...], ddl: str) -> None:
        path = folder / "data" / name / f"{index:03d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_parquet_rows(path, rows, spark.createDataFrame([], ddl).schema,
                           1_700_000_000 + index)

    (folder / "q.toml").write_text(TOML)
    write("orders", 0, FIRST.left, ORDERS_DDL)
    write("payments", 0, FIRST.right, PAYMENTS_DDL)
    run_here(spark, folder, "q.toml")
    idle._BY_LOCATION.clear()  # a new process knows only the checkpoint
    write("orders", 1, SECOND.left, ORDERS_DDL)
    run_here(spark, folder, "q.toml")
    return rows_of(read_table(folder / "out" / "quiet_payments.duckdb", "orders_payments"))


def test_a_restart_reading_one_input_moves_w_as_the_uninterrupted_run(spark, tmp_path,
                                                                      monkeypatch):
    got = _run_twice(spark, tmp_path, monkeypatch)
    p = Pipeline.from_toml(TOML)
    want = oracle_join(p.join, [FIRST, SECOND], left_columns=[c.split()[0] for c in
                                                              ORDERS_DDL.split(", ")],
                       right_columns=[c.split()[0] for c in PAYMENTS_DDL.split(", ")])
    joined = [{k: v for k, v in r.items() if k != "_dead_letter"}
              for b in want.rows_by_batch().values() for r in b if r["_dead_letter"] is None]
    assert canonical_rows(got) == canonical_rows(joined)
    unpaid = sorted(r["order_id"] for r in got if r["payment_id"] is None)
    assert unpaid == [2, 3]  # 09:05 and 09:20, closed by W = 09:35; order 4 still waits
    beats = json.loads((p.checkpoint_folder(tmp_path) / "heartbeats" / "_idle.json").read_text())
    nine_forty = int((BASE + dt.timedelta(minutes=40)).replace(tzinfo=dt.UTC).timestamp() * 1e6)
    assert beats["right"]["max_clock_us"] == nine_forty


def test_a_checkpoint_without_heartbeat_sources_holds_them_as_spark_does(spark, tmp_path,
                                                                         monkeypatch):
    """The witness: an earlier interlace's checkpoint (its record without the key) keeps its
    sources, and its restart's ``W`` stays where the first run left it."""
    p = Pipeline.from_toml(TOML)
    record = spec_record(p)
    record["spec"].pop("idle inputs (idle_timeout_ms: heartbeat sources)")
    folder = p.checkpoint_folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / SPEC_FILE).write_text(json.dumps(record))
    got = _run_twice(spark, tmp_path, monkeypatch)
    assert sorted(r["order_id"] for r in got) == [1]  # order 1 paid; 2 and 3 held
    assert not (folder / "heartbeats").exists()
