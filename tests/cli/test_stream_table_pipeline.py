"""``examples/orders_tiers.toml`` (``[transform.join] kind = "stream_table"``) runs on Spark.

The example file is copied into a folder holding the demo's generated orders and tier
changelog (smaller: four micro-batches), checked by ``preflight`` as ``interlace run`` does,
and run in-process on the session-scoped ``spark`` fixture. Its DuckDB table must be
:func:`~interlace.testing.oracles.oracle_stream_table_join` on the same log, written once: a
rerun from the checkpoint finds nothing to do and changes nothing.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from cli_support import read_table, rows_of

from interlace.demo import (
    CUSTOMERS_DDL,
    DELETED_CUSTOMER,
    NEW_CUSTOMERS,
    ORDERS_DDL,
    _write,
    generate_customer_tiers,
    generate_orders_payments,
)
from interlace import StreamTableJoin
from interlace.pipeline import parse_ddl
from interlace.preflight import preflight
from interlace.runner import run_pipeline
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles import oracle_stream_table_join

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "orders_tiers.toml"


def names(ddl):
    return [c for c, _ in parse_ddl(ddl)]


def test_the_stream_table_example_pipeline_equals_the_oracle_exactly_once(spark, tmp_path):
    orders, _ = generate_orders_payments(n_batches=4, orders_per_batch=60)
    customers = generate_customer_tiers(n_batches=4)
    _write(tmp_path / "data/orders", orders, ORDERS_DDL, spark)
    _write(tmp_path / "data/customers", customers, CUSTOMERS_DDL, spark)
    shutil.copy(EXAMPLE, tmp_path / "orders_tiers.toml")
    p = preflight(tmp_path / "orders_tiers.toml", base=tmp_path)
    assert isinstance(p.join, StreamTableJoin)

    summary = run_pipeline(p, base=tmp_path, spark=spark, progress=None)
    want = oracle_stream_table_join(
        p.join, [JoinBatch(left=o, right=c) for o, c in zip(orders, customers, strict=True)],
        left_columns=names(ORDERS_DDL), right_columns=names(CUSTOMERS_DDL))
    db = tmp_path / "out/orders_tiers.duckdb"
    got = rows_of(read_table(db, "orders_tiers"))
    assert Counter(canonical_rows(got)) == Counter(canonical_rows(o.row for o in want.rows))
    assert len(got) == sum(len(b) for b in orders) - 1  # the sentinel order stays held
    assert summary.output_rows == len(got) and summary.batches == want.num_batches
    # Customers without a version yet (NEW_CUSTOMERS) give NULL tiers under how = "left".
    assert {r["customer"] for r in got if r["tier"] is None} <= {*NEW_CUSTOMERS,
                                                                 DELETED_CUSTOMER}
    assert len({r["tier"] for r in got}) == 4  # gold, silver, bronze and None
    assert summary.counters["joined"] + summary.counters["unmatched_left"] == len(got)

    again = run_pipeline(p, base=tmp_path, spark=spark, progress=None)
    assert again.batches == 0
    assert Counter(canonical_rows(rows_of(read_table(db, "orders_tiers")))) == Counter(
        canonical_rows(got))
