"""``interlace demo`` end to end: what it writes to DuckDB is what the oracles compute.

The demo runs once per module, in-process on the session-scoped ``spark`` fixture (no second
JVM), with its stdout and stderr captured. The tests then read the four DuckDB tables and
compare them with the join, window and stream-table oracles fed the same generated data
(:func:`interlace.demo.generate_orders_payments`, :func:`interlace.demo.generate_clicks`,
:func:`interlace.demo.generate_customer_tiers`): the demo writes one Parquet file per input
per micro-batch and reads them one per trigger, so batch ``b`` of each oracle log is file
``b``.
"""

from __future__ import annotations

import contextlib
import io
from collections import Counter

import pytest
from cli_support import read_table, rows_of

from interlace.demo import (
    CLICKS_DDL,
    CUSTOMERS_DDL,
    DELETED_AT,
    DELETED_CUSTOMER,
    NEW_CUSTOMERS,
    ORDERS_DDL,
    PAYMENTS_DDL,
    demo_pipelines,
    demo_tiers_pipeline,
    generate_clicks,
    generate_customer_tiers,
    generate_orders_payments,
    run_demo,
)
from interlace.pipeline import parse_ddl
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import DEAD_LETTER_COLUMN, canonical_rows, oracle_join
from interlace.testing.oracles import oracle_stream_table_join
from interlace.testing.window_oracle import WindowBatch, oracle_window

pytestmark = pytest.mark.spark

TABLES = ("orders_payments", "late_payments", "clicks_per_minute", "orders_tiers")


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


def tiers_log():
    orders, _ = generate_orders_payments()
    return [JoinBatch(left=o, right=c)
            for o, c in zip(orders, generate_customer_tiers(), strict=True)]


@pytest.fixture(scope="module")
def tiers_oracle(demo):
    _, workdir, _, _ = demo
    spec = demo_tiers_pipeline(workdir).join
    return oracle_stream_table_join(spec, tiers_log(), left_columns=names(ORDERS_DDL),
                                    right_columns=names(CUSTOMERS_DDL))


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


def test_demo_orders_tiers_table_equals_the_stream_table_oracle(demo, tiers_oracle):
    result, workdir, _, _ = demo
    got = rows_of(read_table(result.duckdb_path, "orders_tiers"))
    want = [o.row for o in tiers_oracle.rows]
    assert list(got[0]) == ["order_id", "customer", "amount", "order_ts", "tier",
                            "right_valid_from"]
    assert Counter(canonical_rows(got)) == Counter(canonical_rows(want))
    # Every real order, once; the sentinel order (three hours ahead) is still held at the end.
    orders, _ = generate_orders_payments()
    real = sorted(r["order_id"] for batch in orders for r in batch if r["order_id"] > 0)
    assert sorted(r["order_id"] for r in got) == real
    assert sum(result.tiered_orders.values()) == len(real)
    assert result.tiered_orders == Counter(r["tier"] for r in want)
    # What the demo shows happened: the deleted customer's later orders have no tier, the new
    # customers' orders before their first version neither, and a tier as of the order time
    # is not the customer's last one.
    mine = [r for r in got if r["customer"] == DELETED_CUSTOMER]
    before = [r for r in mine if r["order_ts"] < DELETED_AT]
    after = [r for r in mine if r["order_ts"] >= DELETED_AT]
    assert before and after and result.deleted_customer_orders == (len(before), len(after))
    assert all(r["tier"] is not None for r in before) and all(r["tier"] is None for r in after)
    for customer in NEW_CUSTOMERS:
        tiers = [r["tier"] for r in sorted(got, key=lambda r: r["order_ts"])
                 if r["customer"] == customer]
        assert tiers[0] is None and tiers[-1] is not None, (customer, tiers)
    last = {}
    for r in sorted(got, key=lambda r: r["order_ts"]):
        last[r["customer"]] = r["tier"]
    assert sum(1 for r in got if r["tier"] != last[r["customer"]]) > 100


def test_some_orders_get_a_tier_change_that_arrived_after_them(demo, tiers_oracle):
    """The demo's tier changes delivered a micro-batch late matter: ``emit="eager"`` (the
    versions received so far) would give those orders their customer's previous tier."""
    _, workdir, _, _ = demo
    spec = demo_tiers_pipeline(workdir).join
    eager = oracle_stream_table_join(spec, tiers_log(), emit="eager",
                                     left_columns=names(ORDERS_DDL),
                                     right_columns=names(CUSTOMERS_DDL))
    final = {o.row["order_id"]: o.row["tier"] for o in tiers_oracle.rows}
    joined = [o.row for o in eager.rows if o.row["order_id"] > 0]  # eager joins the sentinel
    changed = [r for r in joined if r["tier"] != final[r["order_id"]]]
    assert changed and len(joined) == len(final)


def test_demo_customer_sessions_equal_the_join_and_window_oracles_composed(demo):
    """The chain (issue 30, example 1): the join's oracle, the channel, the window's oracle."""
    from interlace.demo import demo_chain_pipeline
    from interlace.testing.chain import channel_files, window_log

    result, workdir, _, _ = demo
    paid, sessions = (r.pipeline for r in demo_chain_pipeline(workdir).stage_runs())
    orders, payments = generate_orders_payments()
    log = [JoinBatch(left=o, right=p) for o, p in zip(orders, payments, strict=True)]
    up = oracle_join(paid.join, log, left_columns=names(ORDERS_DDL),
                     right_columns=names(PAYMENTS_DDL))

    def projected(row):  # stage paid's output_sql
        matched = row["right_order_id"] is not None
        return {**row, "paid": row["left_amount"] if matched else None,
                "unpaid": None if matched else row["left_amount"]}

    files = [(tuple(projected(r) for r in rows), clock)
             for rows, clock in channel_files(up, horizon_ms=paid.join.horizon_ms)]
    down = oracle_window(sessions.window, window_log(files),
                         columns=[*up.output_columns, "paid", "unpaid"])
    got = rows_of(read_table(result.duckdb_path, "customer_sessions"))

    def rounded(rows):  # float sums: the order of the additions differs, not the amounts
        return Counter(canonical_rows([{k: round(v, 6) if isinstance(v, float) else v
                                        for k, v in r.items()} for r in rows]))

    assert rounded(got) == rounded([o.row for o in down.rows])
    real = [r for r in got if r["left_customer"] != "-"]
    assert result.customer_sessions == len(real) >= 50
    assert result.session_amounts[0] == sum(r["orders"] for r in real)


def test_demo_prints_a_summary_naming_the_duckdb_file_and_tables(demo):
    result, workdir, stdout, stderr = demo
    assert result.duckdb_path == workdir.resolve() / "demo.duckdb"
    assert result.duckdb_path.is_file()
    lines = stdout.splitlines()
    assert lines[0] == "interlace demo (local Spark -> DuckDB)"
    assert (f"  DuckDB file: {result.duckdb_path} (tables orders_payments, late_payments, "
            "clicks_per_minute, orders_tiers, customer_sessions)") in lines
    n, paid, unpaid = result.session_amounts
    assert ("  a chain, the join then sessions per customer (30 min of quiet): "
            f"{result.customer_sessions} sessions of {n} orders, {paid:.2f} paid, "
            f"{unpaid:.2f} unpaid") in lines
    tiers = result.tiered_orders
    assert ("  orders with the customer's tier as of the order time (stream-table, left): "
            f"{sum(tiers.values())} orders, {tiers[None]} without a tier") in lines
    assert (f"    gold {tiers['gold']}, silver {tiers['silver']}, bronze {tiers['bronze']}, "
            f"none {tiers[None]}") in lines
    assert (f"    {DELETED_CUSTOMER}, deleted at {DELETED_AT:%H:%M:%S}: "
            f"{result.deleted_customer_orders[0]} orders with a tier before, "
            f"{result.deleted_customer_orders[1]} without one after") in lines
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
    for name in ("orders-payments", "clicks-per-minute", "orders-tiers", "paid-sessions.paid",
                 "paid-sessions.sessions"):
        assert f"[{name}] batch 0: in " in stderr and f"[{name}] done: " in stderr
    assert "\r" not in stderr
