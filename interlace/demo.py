"""``interlace demo``: three pipelines on local Spark into one embedded DuckDB file.

1. **orders ⋈ payments** — a ``left`` join, payment within 10 minutes after the order, so
   unpaid orders surface once their window has passed; ``late_data="dlq"``: late payments are
   not lost, they land in a dead-letter table.
2. **clicks per user per minute** — tumbling 1-minute windows with the click count and the
   approximate number of distinct pages, ``late_data="reopen"``: a late click re-emits its
   window with corrected counts (``revision`` + 1) and DuckDB upserts on
   ``(window_start, window_end, user)``.
3. **orders enriched with the customer's tier** — a ``left`` stream-table join of the same
   orders with a changelog of customer tiers, as of each order's time: customers change
   tier (some changes arrive a micro-batch late), two customers appear mid-stream, and one
   is deleted (a tombstone, ``deleted = true``); its later orders have no tier.

The data is generated deterministically (seeded) with out-of-order and late events, one
Parquet file per input per micro-batch. The pipelines are built with the Python facade
(:class:`~interlace.pipeline.Pipeline`, the same objects a TOML file gives) and run by
:func:`~interlace.runner.run_pipeline`, exactly-once into DuckDB.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DemoResult",
    "demo_pipelines",
    "demo_tiers_pipeline",
    "generate_clicks",
    "generate_customer_tiers",
    "generate_orders_payments",
    "run_demo",
]

BASE = dt.datetime(2026, 3, 2, 9, 0, 0)
ORDERS_DDL = "order_id BIGINT, customer STRING, amount DOUBLE, order_ts TIMESTAMP"
PAYMENTS_DDL = "payment_id STRING, order_id BIGINT, paid DOUBLE, pay_ts TIMESTAMP"
CLICKS_DDL = "user STRING, page STRING, click_ts TIMESTAMP"
CUSTOMERS_DDL = "customer STRING, tier STRING, deleted BOOLEAN, updated_ts TIMESTAMP"
TIERS = ("bronze", "silver", "gold")
#: The customer the changelog deletes (a tombstone) in micro-batch 3, at 09:17:12.
DELETED_CUSTOMER = "c07"
DELETED_AT = BASE + dt.timedelta(minutes=17, seconds=12)
#: Customers whose first version arrives mid-stream (micro-batch 2): no tier before it.
NEW_CUSTOMERS = ("c58", "c59")


def generate_orders_payments(
    n_batches: int = 6, orders_per_batch: int = 200, seed: int = 7
) -> tuple[list[list[dict[str, Any]]], list[list[dict[str, Any]]]]:
    """Return per-batch orders and payments with out-of-order and late events.

    About 85% of orders are paid 1-9 minutes after the order; some payments arrive a batch late,
    about 2% far behind the watermark (late); rows are shuffled within a batch.
    """
    rnd = random.Random(seed)
    orders: list[list[dict[str, Any]]] = [[] for _ in range(n_batches + 1)]
    payments: list[list[dict[str, Any]]] = [[] for _ in range(n_batches + 1)]
    oid = 0
    for b in range(n_batches):
        for _ in range(orders_per_batch):
            oid += 1
            ts = BASE + dt.timedelta(minutes=b * 5, seconds=rnd.randrange(300))
            amount = round(rnd.uniform(5, 250), 2)
            orders[b].append(
                {
                    "order_id": oid,
                    "customer": f"c{rnd.randrange(60):02d}",
                    "amount": amount,
                    "order_ts": ts,
                }
            )
            if rnd.random() < 0.85:
                pay_ts = ts + dt.timedelta(seconds=rnd.randrange(60, 540))
                target = b + (1 if rnd.random() < 0.1 else 0)
                if rnd.random() < 0.02:
                    target = b + 3  # very late: past the join window plus lateness
                if target < n_batches:
                    payments[target].append(
                        {"payment_id": f"p{oid}", "order_id": oid, "paid": amount, "pay_ts": pay_ts}
                    )
        rnd.shuffle(orders[b])
        rnd.shuffle(payments[b])
    # A last batch far ahead moves the watermark on, so unpaid orders are emitted.
    end = BASE + dt.timedelta(hours=3)
    orders[-1].append({"order_id": -1, "customer": "-", "amount": 0.0, "order_ts": end})
    payments[-1].append({"payment_id": "-", "order_id": -1, "paid": 0.0, "pay_ts": end})
    return orders, payments


def generate_clicks(
    n_batches: int = 6, per_batch: int = 400, seed: int = 11
) -> list[list[dict[str, Any]]]:
    """Per-batch clicks of 40 users on 25 pages; ~4% arrive 1, 3 or 4 batches (minutes) late."""
    rnd = random.Random(seed)
    batches: list[list[dict[str, Any]]] = [[] for _ in range(n_batches + 1)]
    for b in range(n_batches):
        for _ in range(per_batch):
            ts = BASE + dt.timedelta(
                minutes=b, seconds=rnd.randrange(60), milliseconds=rnd.randrange(1000)
            )
            target = b + (rnd.choice([1, 3, 4]) if rnd.random() < 0.04 else 0)
            if target < n_batches:
                batches[target].append(
                    {
                        "user": f"u{rnd.randrange(40):02d}",
                        "page": f"/p/{rnd.randrange(25)}",
                        "click_ts": ts,
                    }
                )
        rnd.shuffle(batches[b])
    batches[-1].append({"user": "-", "page": "-", "click_ts": BASE + dt.timedelta(hours=1)})
    return batches


def generate_customer_tiers(
    n_batches: int = 6, changes_per_batch: int = 8, seed: int = 13
) -> list[list[dict[str, Any]]]:
    """Per-batch changelog of the tiers of the orders' 60 customers (``CUSTOMERS_DDL``).

    Batch 0 holds every customer's first version (valid from a month before the orders) but
    :data:`NEW_CUSTOMERS`', whose first version arrives in batch 2 at 09:11. Each batch then
    changes the tier of a few customers at a time inside its five minutes; a change in the last
    90 seconds of them arrives one batch later half the time (still within ``lateness_ms``).
    Batch 3 deletes :data:`DELETED_CUSTOMER` (``deleted = true``) at :data:`DELETED_AT`; the
    last batch holds a sentinel customer ``"-"`` three hours ahead, so that the watermark
    passes every order. Rows are shuffled within a batch.
    """
    rnd = random.Random(seed)
    batches: list[list[dict[str, Any]]] = [[] for _ in range(n_batches + 1)]

    def version(
        customer: str, tier: str | None, ts: dt.datetime, deleted: bool = False
    ) -> dict[str, Any]:
        return {"customer": customer, "tier": tier, "deleted": deleted, "updated_ts": ts}

    since = BASE - dt.timedelta(days=30)
    regulars = [f"c{c:02d}" for c in range(60) if f"c{c:02d}" not in NEW_CUSTOMERS]
    for i, customer in enumerate(regulars):
        batches[0].append(version(customer, rnd.choice(TIERS), since + dt.timedelta(minutes=i)))
    for b in range(n_batches):
        start = BASE + dt.timedelta(minutes=5 * b)
        for _ in range(changes_per_batch):
            customer = rnd.choice(regulars)
            offset = rnd.randrange(300)
            if customer == DELETED_CUSTOMER and start + dt.timedelta(seconds=offset) >= DELETED_AT:
                continue  # deleted for good
            target = b + (1 if offset >= 210 and rnd.random() < 0.5 else 0)
            batches[target].append(
                version(customer, rnd.choice(TIERS), start + dt.timedelta(seconds=offset))
            )
    for i, customer in enumerate(NEW_CUSTOMERS):
        batches[2].append(version(customer, TIERS[i], BASE + dt.timedelta(minutes=11, seconds=i)))
    batches[3].append(version(DELETED_CUSTOMER, None, DELETED_AT, deleted=True))
    for rows in batches:
        rnd.shuffle(rows)
    batches[-1].append(version("-", "-", BASE + dt.timedelta(hours=3)))
    return batches


def _write(folder: Path, batches: list[list[dict[str, Any]]], ddl: str, spark: Any) -> None:
    from pyspark.sql.types import _parse_datatype_string

    from interlace.testing.replay import write_parquet_rows

    schema = _parse_datatype_string(ddl)
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(batches):
        write_parquet_rows(folder / f"{i:06d}.parquet", rows, schema, 1_700_000_000.0 + i)


def _source(root: Path, name: str, schema: str, event_time_column: str) -> Any:
    """A demo input: the Parquet files :func:`_write` wrote into ``root / "data" / name``."""
    from interlace.pipeline import Source

    return Source(
        name=name,
        format="parquet",
        path=str(root / "data" / name),
        schema=schema,
        event_time_column=event_time_column,
    )


def _orders(root: Path) -> Any:
    """The orders, the left input of the first and the third pipeline."""
    return _source(root, "orders", ORDERS_DDL, "order_ts")


def _join_pipeline(
    root: Path, name: str, right: Any, join: Any, table: str, **fields: Any
) -> Any:
    """A demo pipeline joining the orders with ``right`` into ``table`` of the DuckDB file."""
    from interlace.pipeline import Pipeline, SparkSettings, Target

    return Pipeline(
        name=name,
        sources=(_orders(root), right),
        join=join,
        left_source="orders",
        right_source=right.name,
        target=Target(kind="duckdb", path=str(root / "demo.duckdb"), table=table),
        spark=SparkSettings(checkpoint=str(root / "checkpoints" / name)),
        **fields,
    )


def demo_pipelines(root: Path) -> tuple[Any, Any]:
    """The two demo pipelines, writing into ``root / "demo.duckdb"``."""
    from interlace.operators.join import Join
    from interlace.operators.window import Aggregation, Window
    from interlace.pipeline import Pipeline, SparkSettings, Target

    db = str(root / "demo.duckdb")
    join = _join_pipeline(
        root,
        "orders-payments",
        _source(root, "payments", PAYMENTS_DDL, "pay_ts"),
        Join(
            left_keys=["order_id"],
            right_keys=["order_id"],
            how="left",
            lower_ms=0,
            upper_ms=600_000,  # payment within 10 minutes after the order
            left_event_time_column="order_ts",
            right_event_time_column="pay_ts",
            lateness_ms=120_000,
            late_data="dlq",
            dlq_horizon_ms=3_600_000,
            left_prefix="",
            right_prefix="",
            output_left_columns=["order_id", "customer", "amount", "order_ts"],
            output_right_columns=["payment_id", "paid", "pay_ts"],
            key_groups=8,
            name="orders-payments",
        ),
        "orders_payments",
        dead_letter=Target(kind="duckdb", path=db, table="late_payments"),
    )
    window = Pipeline(
        name="clicks-per-minute",
        sources=(_source(root, "clicks", CLICKS_DDL, "click_ts"),),
        window=Window(
            kind="tumbling",
            duration_ms=60_000,
            event_time_column="click_ts",
            lateness_ms=10_000,
            group_by=["user"],
            late_data="reopen",
            allowed_lateness_ms=120_000,
            max_groups_per_window=100_000,
            key_groups=8,
            name="clicks-per-minute",
            aggregations=[
                Aggregation(agg="count", as_="clicks"),
                Aggregation(agg="count_distinct", column="page", as_="unique_pages"),
            ],
        ),
        target=Target(
            kind="duckdb",
            path=db,
            table="clicks_per_minute",
            key=["window_start", "window_end", "user"],
        ),
        spark=SparkSettings(checkpoint=str(root / "checkpoints/clicks-per-minute")),
    )
    return join, window


def demo_tiers_pipeline(root: Path) -> Any:
    """The third demo pipeline: orders LEFT JOIN the customers' tiers as of the order time.

    It reads the orders of :func:`demo_pipelines` and the tier changelog of
    :func:`generate_customer_tiers`, and writes ``orders_tiers`` into ``root / "demo.duckdb"``
    (one row per order, appended exactly once per micro-batch).
    """
    from interlace.operators.stream_table import StreamTableJoin

    return _join_pipeline(
        root,
        "orders-tiers",
        _source(root, "customers", CUSTOMERS_DDL, "updated_ts"),
        StreamTableJoin(
            left_keys=["customer"],
            right_keys=["customer"],
            how="left",  # every order, with a NULL tier when the customer has none
            left_event_time_column="order_ts",
            right_event_time_column="updated_ts",
            lateness_ms=120_000,
            tombstone_column="deleted",
            left_prefix="",
            right_prefix="",
            key_groups=8,
        ),
        "orders_tiers",
    )


def demo_chain_pipeline(root: Path) -> Any:
    """The fourth demo pipeline, a chain (seed 000): the join, then sessions per customer.

    Stage ``paid``: orders LEFT JOIN payments (0 to 10 minutes after the order), adding the
    paid and the unpaid amount. Stage ``sessions``: a session window per customer (30 minutes
    of quiet end one) over the join's output: orders, amount paid and unpaid per customer
    session, into ``customer_sessions`` (docs/chains.md). The window's ``lateness_ms`` is left
    out: it is the join's lag on ``order_ts``, its 10-minute bound.
    """
    from interlace.operators.join import Join
    from interlace.operators.window import Aggregation, Window
    from interlace.pipeline import Pipeline, SparkSettings, Stage, Target

    paid = Stage(
        name="paid",
        left_source="orders",
        right_source="payments",
        join=Join(left_keys=["order_id"], right_keys=["order_id"], how="left", lower_ms=0,
                  upper_ms=600_000, left_event_time_column="order_ts",
                  right_event_time_column="pay_ts", lateness_ms=120_000, key_groups=8),
        output_sql=(
            "SELECT *, CASE WHEN right_order_id IS NOT NULL THEN left_amount END AS paid, "
            "CASE WHEN right_order_id IS NULL THEN left_amount END AS unpaid FROM output"
        ),
    )
    sessions = Stage(
        name="sessions",
        window_source="paid",
        window=Window(
            kind="session", gap_ms=1_800_000, event_time_column="left_order_ts",
            group_by=["left_customer"], max_groups_per_window=100_000, key_groups=8,
            aggregations=[Aggregation(agg="count", as_="orders"),
                          Aggregation(agg="sum", column="paid", as_="paid"),
                          Aggregation(agg="sum", column="unpaid", as_="unpaid")],
        ),
    )
    return Pipeline(
        name="paid-sessions",
        sources=(_orders(root), _source(root, "payments", PAYMENTS_DDL, "pay_ts")),
        stages=(paid, sessions),
        target=Target(kind="duckdb", path=str(root / "demo.duckdb"), table="customer_sessions"),
        spark=SparkSettings(checkpoint=str(root / "checkpoints" / "paid-sessions")),
    )


@dataclass
class DemoResult:
    """What the demo wrote.

    Attributes:
        duckdb_path: The DuckDB file holding the three tables.
        paid: Orders joined with their payment (the sentinel order left out).
        unpaid: Orders emitted unpaid, with null payment columns.
        late_payments: Rows in ``late_payments`` (dead letters).
        click_windows: Rows in ``clicks_per_minute`` (the sentinel user left out).
        reopened_windows: Of those, windows re-emitted by late clicks (``revision > 0``).
        late_clicks_dropped: Clicks too late even for reopen: dropped by the operator
            (``late_dropped``) or removed by Spark's watermark pre-filter before it.
        late_clicks_removed_by_spark: Of those, the ones Spark removed
            (``numRowsDroppedByWatermark``).
        seconds: Wall time of the whole demo.
        tiered_orders: Rows in ``orders_tiers`` per tier as of the order time (``None``: the
            customer had no tier then: not yet a customer, or deleted).
        deleted_customer_orders: :data:`DELETED_CUSTOMER`'s orders before and after its
            deletion.
        customer_sessions: Rows in ``customer_sessions``, the chain's output (the sentinel
            customer left out).
        session_amounts: Over those sessions: (orders, amount paid, amount unpaid).
    """

    duckdb_path: Path
    paid: int
    unpaid: int
    late_payments: int
    click_windows: int
    reopened_windows: int
    late_clicks_dropped: int
    late_clicks_removed_by_spark: int
    seconds: float
    tiered_orders: dict[str | None, int]
    deleted_customer_orders: tuple[int, int]
    customer_sessions: int = 0
    session_amounts: tuple[int, float, float] = (0, 0.0, 0.0)


def run_demo(
    workdir: Path | None = None,
    *,
    spark: Any = None,
    quiet: bool = False,
    master: str | None = None,
) -> DemoResult:
    """Generate the data, run both pipelines, print a summary (unless ``quiet``).

    ``master`` is the Spark master URL of the session the demo creates (default ``local[2]``;
    ignored when ``spark`` is given). On a cluster, ``workdir`` must be a folder the executors
    see at the same path (data and checkpoints live there). Without ``workdir`` everything
    goes to a temporary folder that is removed at the end (the summary is printed first).
    """
    started = time.time()
    root = Path(workdir).resolve() if workdir else Path(tempfile.mkdtemp(prefix="interlace-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        return _run_demo(root, spark, quiet, master, started, keep=workdir is not None)
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)


def _run_demo(
    root: Path, spark: Any, quiet: bool, master: str | None, started: float, *, keep: bool
) -> DemoResult:
    import duckdb

    from interlace.runner import run_pipeline
    from interlace.session import local_session

    spark = spark or local_session("interlace-demo", **({"master": master} if master else {}))
    orders, payments = generate_orders_payments()
    _write(root / "data/orders", orders, ORDERS_DDL, spark)
    _write(root / "data/payments", payments, PAYMENTS_DDL, spark)
    _write(root / "data/clicks", generate_clicks(), CLICKS_DDL, spark)
    _write(root / "data/customers", generate_customer_tiers(), CUSTOMERS_DDL, spark)
    join, window = demo_pipelines(root)
    log = None if quiet else sys.stderr
    run_pipeline(join, base=root, spark=spark, progress=log)
    w = run_pipeline(window, base=root, spark=spark, progress=log)
    run_pipeline(demo_tiers_pipeline(root), base=root, spark=spark, progress=log)
    run_pipeline(demo_chain_pipeline(root), base=root, spark=spark, progress=log)
    # Clicks Spark's pre-filter removed (t <= the previous batch's W) never reach the operator,
    # so its late_dropped counter misses them; the run counts them from the query progress.
    removed_by_spark = w.spark_dropped

    con = duckdb.connect(str(root / "demo.duckdb"), read_only=True)
    try:
        q = lambda sql, params=None: con.execute(sql, params).fetchall()  # noqa: E731
        paid = q(
            "SELECT count(*) FROM orders_payments WHERE payment_id IS NOT NULL AND order_id > 0"
        )[0][0]
        unpaid = q(
            "SELECT count(*) FROM orders_payments WHERE payment_id IS NULL AND order_id > 0"
        )[0][0]
        late = q("SELECT count(*) FROM late_payments")[0][0]
        windows = q("SELECT count(*) FROM clicks_per_minute WHERE user <> '-'")[0][0]
        reopened = q("SELECT count(*) FROM clicks_per_minute WHERE revision > 0")[0][0]
        top_unpaid = q(
            "SELECT customer, count(*), round(sum(amount), 2) FROM orders_payments "
            "WHERE payment_id IS NULL AND order_id > 0 GROUP BY customer "
            "ORDER BY 3 DESC LIMIT 3"
        )
        busiest = q(
            "SELECT strftime(window_start, '%H:%M'), user, clicks, unique_pages, revision "
            "FROM clicks_per_minute WHERE user <> '-' ORDER BY clicks DESC, "
            "window_start, user LIMIT 3"
        )
        letter = q("SELECT dead_letter FROM late_payments LIMIT 1")
        tiers: dict[str | None, int] = dict(
            q("SELECT tier, count(*) FROM orders_tiers WHERE order_id > 0 GROUP BY 1")
        )
        deleted = q(
            "SELECT count(*) FILTER (WHERE order_ts < ?), count(*) FILTER (WHERE order_ts >= ?) "
            "FROM orders_tiers WHERE customer = ?",
            [DELETED_AT, DELETED_AT, DELETED_CUSTOMER],
        )[0]
        sessions = q(
            "SELECT count(*), sum(orders), round(coalesce(sum(paid), 0), 2), "
            "round(coalesce(sum(unpaid), 0), 2) FROM customer_sessions "
            "WHERE left_customer <> '-'"
        )[0]
    finally:
        con.close()
    result = DemoResult(
        duckdb_path=root / "demo.duckdb",
        paid=paid,
        unpaid=unpaid,
        late_payments=late,
        click_windows=windows,
        reopened_windows=reopened,
        late_clicks_dropped=w.counters.get("late_dropped", 0) + removed_by_spark,
        late_clicks_removed_by_spark=removed_by_spark,
        seconds=time.time() - started,
        tiered_orders=tiers,
        deleted_customer_orders=(deleted[0], deleted[1]),
        customer_sessions=sessions[0],
        session_amounts=(int(sessions[1] or 0), float(sessions[2]), float(sessions[3])),
    )
    if not quiet:
        print("interlace demo (local Spark -> DuckDB)")
        print(
            f"  orders LEFT JOIN payments within 10 min: {paid} paid, {unpaid} unpaid, "
            f"{late} late payments dead-lettered"
        )
        for customer, n, amount in top_unpaid:
            print(f"    unpaid: {customer} {n} orders, {amount:.2f}")
        if letter:
            print(f"    a dead letter: {letter[0][0][:150]}...")
        print(
            f"  clicks per user per minute (reopen): {windows} windows, {reopened} re-emitted "
            f"with late clicks, {result.late_clicks_dropped} clicks too late even for reopen "
            f"({result.late_clicks_removed_by_spark} of them removed by Spark's watermark filter)"
        )
        for start, user, clicks, pages, rev in busiest:
            print(f"    {start} {user}: {clicks} clicks on ~{pages} pages (revision {rev})")
        print(
            f"  orders with the customer's tier as of the order time (stream-table, left): "
            f"{sum(tiers.values())} orders, {tiers.get(None, 0)} without a tier"
        )
        print(
            "    "
            + ", ".join(f"{t} {tiers.get(t, 0)}" for t in reversed(TIERS))
            + f", none {tiers.get(None, 0)}"
        )
        print(
            f"    {DELETED_CUSTOMER}, deleted at {DELETED_AT:%H:%M:%S}: "
            f"{result.deleted_customer_orders[0]} orders with a tier before, "
            f"{result.deleted_customer_orders[1]} without one after"
        )
        n, paid_amount, unpaid_amount = result.session_amounts
        print(
            f"  a chain, the join then sessions per customer (30 min of quiet): "
            f"{result.customer_sessions} sessions of {n} orders, {paid_amount:.2f} paid, "
            f"{unpaid_amount:.2f} unpaid"
        )
        if keep:
            print(
                f"  DuckDB file: {result.duckdb_path} (tables orders_payments, late_payments, "
                "clicks_per_minute, orders_tiers, customer_sessions)"
            )
        else:
            print(
                "  DuckDB file: removed with the demo's temporary folder (interlace demo "
                "--workdir DIR keeps it, the data and the checkpoints)"
            )
        print(f"  took {result.seconds:.0f} s")
    return result
