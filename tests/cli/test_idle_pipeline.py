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
    done = next(line for line in progress.splitlines() if "] done:" in line)
    assert ", idle payments since " in done, done
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


CHAIN_TOML = """
name = "quiet-chain"

[[sources]]
name = "orders"
format = "parquet"
path = "data/orders"
schema = "order_id BIGINT, customer STRING, amount DOUBLE, order_ts TIMESTAMP"
event_time_column = "order_ts"
options = { maxFilesPerTrigger = "1" }

[[sources]]
name = "payments"
format = "parquet"
path = "data/payments"
schema = "payment_id STRING, order_id BIGINT, paid DOUBLE, pay_ts TIMESTAMP"
event_time_column = "pay_ts"
options = { maxFilesPerTrigger = "1" }
IDLE

[[stages]]
name = "paid"

[stages.transform.join]
kind = "stream_stream_join"
left_source = "orders"
right_source = "payments"
left_keys = ["order_id"]
right_keys = ["order_id"]
how = "left"
lower_ms = 0
upper_ms = 600_000
left_prefix = ""
right_prefix = ""
output_left_columns = ["order_id", "order_ts"]
output_right_columns = ["payment_id"]

[[stages]]
name = "per_half_hour"

[stages.transform.window]
source = "paid"
kind = "tumbling"
duration_ms = 1_800_000
event_time_column = "order_ts"
max_groups_per_window = 1_000

[[stages.transform.window.aggregations]]
agg = "count"
as = "orders"

[target]
kind = "duckdb"
path = "out/chain.duckdb"
table = "per_half_hour"
"""


@pytest.mark.parametrize("idle_timeout", [True, False])
def test_a_window_behind_the_join_keeps_flowing_when_payments_go_quiet(spark, tmp_path, ticking,
                                                                       idle_timeout):
    """A chain: the join, then 30-minute windows over its output (SEMANTICS §11).

    With payments idle the join's watermark reaches 10:05, the window stage's (its channel's
    clock, less the join's 10-minute lag on ``order_ts``) 09:55: the 09:00-09:30 window closes
    with its six orders (three paid, three written unpaid). Without the timeout the join's
    watermark stays at 09:15 and no window closes.
    """
    data.write(tmp_path)
    (tmp_path / "c.toml").write_text(CHAIN_TOML.replace(
        "IDLE", "idle_timeout_ms = 2_000" if idle_timeout else ""))
    run_here(spark, tmp_path, "c.toml")
    db = tmp_path / "out" / "chain.duckdb"
    got = rows_of(read_table(db, "per_half_hour")) if db.exists() else []
    if idle_timeout:
        assert [(r["window_start"], r["window_end"], r["orders"]) for r in got] == [
            (dt.datetime(2026, 1, 1, 9, 0), dt.datetime(2026, 1, 1, 9, 30), 6)]
    else:
        assert got == []
