"""``interlace demo`` end to end: what it writes to DuckDB is what the oracles compute.

The demo runs once per module, in-process on the session-scoped ``spark`` fixture (no second
JVM), with its stdout and stderr captured. The tests then read the three DuckDB tables and
compare them with the join and window oracles fed the same generated data
(:func:`interlace.demo.generate_orders_payments`, :func:`interlace.demo.generate_clicks`):
the demo writes one Parquet file per input per micro-batch and reads them one per trigger, so
batch ``b`` of each oracle log is file ``b``.
"""

from __future__ import annotations

import contextlib
import io
from collections import Counter

import pytest
from cli_support import read_table, rows_of

from interlace.demo import (
    CLICKS_DDL,
    ORDERS_DDL,
    PAYMENTS_DDL,
    demo_pipelines,
    generate_clicks,
    generate_orders_payments,
    run_demo,
)
from interlace.pipeline import parse_ddl
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import DEAD_LETTER_COLUMN, canonical_rows, oracle_join
from interlace.testing.window_oracle import WindowBatch, oracle_window

pytestmark = pytest.mark.spark

TABLES = ("orders_payments", "late_payments", "clicks_per_minute")


def names(ddl):
    return [c for c, _ in parse_ddl(ddl)]


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory):
    """Run the demo once (not quiet); return its result, workdir and captured output."""
    workdir = tmp_path_factory.mktemp("demo")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        result = run_demo(workdir, spark=spark)
    return result, workdir, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def join_oracle(demo):
    _, workdir, _, _ = demo
    join, _ = demo_pipelines(workdir)
    orders, payments = generate_orders_payments()
    log = [JoinBatch(left=o, right=p) for o, p in zip(orders, payments, strict=True)]
    return oracle_join(join.join, log, left_columns=names(ORDERS_DDL),
                       right_columns=names(PAYMENTS_DDL))


@pytest.fixture(scope="module")
def window_oracle(demo):
    _, workdir, _, _ = demo
    _, window = demo_pipelines(workdir)
    log = [WindowBatch(rows=b) for b in generate_clicks()]
    return oracle_window(window.window, log, columns=names(CLICKS_DDL))


def last_revisions(oracle_rows):
    """What the DuckDB upsert on (window_start, window_end, user) keeps: the highest revision."""
    last = {}
    for o in oracle_rows:
        r = o.row
        k = (r["window_start"], r["window_end"], r["user"])
        assert not r["retracted"]  # tumbling windows are never retracted
        if k not in last or r["revision"] > last[k]["revision"]:
            last[k] = r
    return last


def test_demo_orders_payments_table_equals_the_join_oracle(demo, join_oracle):
    result, _, _, _ = demo
    want = [{k: v for k, v in o.row.items() if k != DEAD_LETTER_COLUMN}
            for o in join_oracle.rows if o.row[DEAD_LETTER_COLUMN] is None]
    got = rows_of(read_table(result.duckdb_path, "orders_payments"))
    assert Counter(canonical_rows(got)) == Counter(canonical_rows(want))
    # The sentinel order (order_id -1) only moves the watermark; the summary leaves it out.
    real = [r for r in want if r["order_id"] > 0]
    paid = sum(1 for r in real if r["payment_id"] is not None)
    assert (result.paid, result.unpaid) == (paid, len(real) - paid)
    assert paid > 0 and len(real) - paid > 0  # both a match and an unpaid order happen


def test_demo_late_payments_table_holds_the_oracles_dead_letters(demo, join_oracle):
    result, _, _, _ = demo
    want = [{DEAD_LETTER_COLUMN: o.row[DEAD_LETTER_COLUMN]} for o in join_oracle.rows
            if o.row[DEAD_LETTER_COLUMN] is not None]
    df = read_table(result.duckdb_path, "late_payments")
    assert list(df.columns) == ["dead_letter"]
    got = rows_of(df.rename(columns={"dead_letter": DEAD_LETTER_COLUMN}))
    # canonical_rows parses the JSON: side, reason, watermark and the row's values must agree.
    assert Counter(canonical_rows(got)) == Counter(canonical_rows(want))
    assert result.late_payments == len(want) == join_oracle.dead_lettered["right"] > 0


def test_demo_clicks_per_minute_table_keeps_the_oracles_last_revision(demo, window_oracle):
    result, _, _, _ = demo
    last = last_revisions(window_oracle.rows)
    got = rows_of(read_table(result.duckdb_path, "clicks_per_minute"))
    assert len(got) == len(last)

    def exact(rows):  # everything but the approximate distinct count
        return Counter(canonical_rows({k: v for k, v in r.items() if k != "unique_pages"}
                                      for r in rows))

    assert exact(got) == exact(last.values())
    # unique_pages is HyperLogLog (p=14); the oracle counts exactly. At most 25 pages per
    # window, where the sketch's linear counting is practically exact: allow 1 off.
    for r in got:
        true = last[(r["window_start"], r["window_end"], r["user"])]["unique_pages"]
        assert abs(r["unique_pages"] - true) <= 1, (r, true)
    real = [r for r in last.values() if r["user"] != "-"]
    reopened = sum(1 for r in last.values() if r["revision"] > 0)
    assert result.click_windows == len(real)
    assert result.reopened_windows == reopened > 0  # late clicks did re-emit windows
    # Too late even for reopen: dropped by the operator, or removed by Spark's pre-filter
    # (t <= the previous batch's W) before the operator sees them; both must be counted.
    assert result.late_clicks_removed_by_spark == window_oracle.spark_dropped > 0
    assert result.late_clicks_dropped == window_oracle.late_dropped + window_oracle.spark_dropped


def test_demo_prints_a_summary_naming_the_duckdb_file_and_tables(demo):
    result, workdir, stdout, stderr = demo
    assert result.duckdb_path == workdir.resolve() / "demo.duckdb"
    assert result.duckdb_path.is_file()
    lines = stdout.splitlines()
    assert lines[0] == "interlace demo (local Spark -> DuckDB)"
    assert (f"  DuckDB file: {result.duckdb_path} (tables orders_payments, late_payments, "
            "clicks_per_minute)") in lines
    assert (f"  orders LEFT JOIN payments within 10 min: {result.paid} paid, {result.unpaid} "
            f"unpaid, {result.late_payments} late payments dead-lettered") in lines
    assert (f"  clicks per user per minute (reopen): {result.click_windows} windows, "
            f"{result.reopened_windows} re-emitted with late clicks, "
            f"{result.late_clicks_dropped} clicks too late even for reopen "
            f"({result.late_clicks_removed_by_spark} of them removed by Spark's watermark "
            "filter)") in lines
    assert any(line.startswith("    a dead letter: {") for line in lines)
    assert lines[-1].startswith("  took ") and lines[-1].endswith(" s")
    # Progress went to stderr, one plain line per batch (not a terminal), for both pipelines.
    for name in ("orders-payments", "clicks-per-minute"):
        assert f"[{name}] batch 0: in " in stderr and f"[{name}] done: " in stderr
    assert "\r" not in stderr
