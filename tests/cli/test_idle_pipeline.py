"""A pipeline whose payment feed goes quiet (examples/quiet_payments.toml; issue 33).

The example's orders keep coming; its payments stop after two files. The DuckDB table holds
the orders the oracle joins when the payments input gets a heartbeat at the orders' clock
(rule 1b), and the progress lines and Prometheus say since when payments are idle. Without
the idle timeout the same data writes only the three paid orders.

The processing time is a counter (each reading 400 ms later), so the payments go idle
after a few micro-batches whatever the machine's speed; the heartbeat written then is read by
the run that ``interlace run`` starts again at once (an ``availableNow`` run lists its files
when it starts).
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import itertools
from pathlib import Path

import pytest
from cli_support import read_table, rows_of, run_here

from interlace import Pipeline
from interlace.operators.common import idle
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_spec = importlib.util.spec_from_file_location("quiet_payments_data",
                                               EXAMPLES / "quiet_payments_data.py")
assert _spec is not None and _spec.loader is not None
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)


def _columns(ddl: str) -> list[str]:
    return [c.split()[0] for c in ddl.split(", ")]


def _us(t: dt.datetime) -> int:
    return (t - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)


@pytest.fixture
def ticking(monkeypatch):  # noqa: ANN001, ANN201
    counter = itertools.count()
    monkeypatch.setattr(idle, "_now_ms", lambda: 1_800_000_000_000 + 400 * next(counter))


def test_quiet_payments_writes_the_unpaid_orders_the_oracle_does(spark, tmp_path, ticking):
    orders, payments = data.write(tmp_path)
    (tmp_path / "q.toml").write_text((EXAMPLES / "quiet_payments.toml").read_text())
    progress = run_here(spark, tmp_path, "q.toml")
    p = Pipeline.load(tmp_path / "q.toml")
    last_order = max(r["order_ts"] for b in orders for r in b)
    log = [JoinBatch(left=tuple(o), right=tuple(pay))
           for o, pay in itertools.zip_longest(orders, payments, fillvalue=[])]
    log.append(JoinBatch(right_heartbeat_us=_us(last_order)))  # payments idle
    want = oracle_join(p.join, log, left_columns=_columns(data.ORDERS_DDL),
                       right_columns=_columns(data.PAYMENTS_DDL))
    got = rows_of(read_table(tmp_path / "out" / "quiet_payments.duckdb", "orders_payments"))
    joined = [{k: v for k, v in r.items() if k != "_dead_letter"}
              for b in want.rows_by_batch().values() for r in b if r["_dead_letter"] is None]
    assert canonical_rows(got) == canonical_rows(joined)
    unpaid = sorted(r["order_id"] for r in got if r["payment_id"] is None)
    # W reaches the last order's 10:05: orders before 09:55 are closed; 11 and 12 still wait.
    assert unpaid == [4, 5, 6, 7, 8, 9, 10]
    assert "idle payments since" in progress
    assert "dead letters" in progress and ", 0 dead letters" in progress


def test_without_the_timeout_the_quiet_payments_hold_every_unpaid_order(spark, tmp_path,
                                                                         ticking):
    data.write(tmp_path)
    (tmp_path / "q.toml").write_text((EXAMPLES / "quiet_payments.toml").read_text().replace(
        "idle_timeout_ms = 2_000", ""))
    progress = run_here(spark, tmp_path, "q.toml")
    got = rows_of(read_table(tmp_path / "out" / "quiet_payments.duckdb", "orders_payments"))
    assert sorted(r["order_id"] for r in got) == [1, 2, 3]
    assert all(r["payment_id"] is not None for r in got)
    assert "idle" not in progress
