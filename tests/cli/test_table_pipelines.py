"""``[transform.join] kind = "table"`` and ``"foreign_key"`` run on Spark into DuckDB, exactly once.

``examples/customers_accounts.toml`` (table-table join) and ``examples/orders_products.toml``
(foreign-key join) are copied into a folder holding the changelogs that
``examples/table_joins_data.py`` writes (an out-of-order update and a delete on each
pipeline), checked by ``preflight`` as ``interlace run`` does, and run in-process on the
session-scoped ``spark`` fixture. Each DuckDB table must equal

* the oracle's changelog (:func:`~interlace.testing.oracles.oracle_table_join`,
  :func:`~interlace.testing.oracles.oracle_foreign_key_join`) on the same micro-batches,
  applied per key by highest ``version`` (deletes remove the key), and
* the join of both tables' snapshots as of the final watermark, computed here from the
  input files (the latest update per key with ``t < wm``, tombstones removing the key; the
  updates at or after ``wm`` are still held under ``emit = "final"``),

and a rerun from the checkpoint finds nothing to do and changes nothing.
"""

from __future__ import annotations

import runpy
import shutil
from collections import Counter
from pathlib import Path

import pytest
from cli_support import read_table, rows_of

from interlace import ForeignKeyJoin, TableJoin
from interlace.preflight import preflight
from interlace.runner import run_pipeline
from interlace.testing.log import JoinBatch, to_us
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles import oracle_foreign_key_join, oracle_table_join

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DATA = runpy.run_path(str(EXAMPLES / "table_joins_data.py"))

# example file, left folder, right folder, spec type, oracle, DuckDB table, the key of the
# right table's row a left row joins (its own key, or its foreign key).
CASES = {
    "table": ("customers_accounts.toml", "customers_cdc", "accounts_cdc", TableJoin,
              oracle_table_join, "customers_accounts", "customer"),
    "foreign_key": ("orders_products.toml", "orders_cdc", "products_cdc", ForeignKeyJoin,
                    oracle_foreign_key_join, "orders_products", "product"),
}


def naive(rows):
    """The rows with naive UTC event times (what the oracles and DuckDB hold)."""
    return [{**r, "updated_ts": r["updated_ts"].replace(tzinfo=None)} for r in rows]


def apply_changelog(rows, key):
    """The changelog applied per key by highest version, deletes removing the key."""
    newest = {}
    for r in rows:
        k = tuple(r[c] for c in key)
        if k not in newest or r["version"] > newest[k]["version"]:
            newest[k] = r
    return [{c: v for c, v in r.items() if c != "op"} for r in newest.values()
            if r["op"] == "upsert"]


def snapshot(files, key, wm_us):
    """Each key's latest update before ``wm`` (event time), None where it is a tombstone."""
    latest = {}
    for r in (r for rows in files for r in rows):
        if to_us(r["updated_ts"]) < wm_us:
            k = r[key]
            if k not in latest or r["updated_ts"] > latest[k]["updated_ts"]:
                latest[k] = r
    return {k: r for k, r in latest.items() if not r["deleted"]}


def value_columns(ddl, *excluded):
    return [c.split()[0] for c in ddl.split(",") if c.split()[0] not in excluded]


@pytest.mark.parametrize("kind", list(CASES))
def test_the_table_join_example_pipelines_equal_the_oracle_and_the_snapshot_join_exactly_once(
        spark, tmp_path, kind):
    example, left_name, right_name, spec_type, oracle, table, right_key = CASES[kind]
    DATA["write"](tmp_path)
    shutil.copy(EXAMPLES / example, tmp_path / example)
    p = preflight(tmp_path / example, base=tmp_path)
    assert isinstance(p.join, spec_type) and p.join.emit == "final"
    (left_ddl, left_files), (right_ddl, right_files) = (DATA["DATA"][left_name],
                                                        DATA["DATA"][right_name])
    left_files = [naive(rows) for rows in left_files]
    right_files = [naive(rows) for rows in right_files]

    summary = run_pipeline(p, base=tmp_path, spark=spark, progress=None)

    want = oracle(p.join, [JoinBatch(left=lf, right=rf)
                           for lf, rf in zip(left_files, right_files, strict=True)],
                  left_columns=value_columns(left_ddl), right_columns=value_columns(right_ddl))
    assert want.late_dropped == {"left": 0, "right": 0}  # the out-of-order updates are not late
    assert summary.batches == want.num_batches and summary.output_rows == len(want.rows)
    assert {r["op"] for r in (o.row for o in want.rows)} == {"upsert", "delete"}
    db = tmp_path / "out" / f"{table}.duckdb"
    got = rows_of(read_table(db, table))
    key = list(p.join.left_keys)
    assert Counter(canonical_rows(got)) == Counter(
        canonical_rows(apply_changelog([o.row for o in want.rows], key)))

    # The join of both tables' snapshots as of the final watermark (updates at 10:30 held).
    wm_us = want.spark_watermarks_ms[-1] * 1000
    left_now = snapshot(left_files, key[0], wm_us)
    right_now = snapshot(right_files, p.join.right_keys[0], wm_us)
    left_values = value_columns(left_ddl, key[0], "deleted", "updated_ts")
    right_values = value_columns(right_ddl, p.join.right_keys[0], "deleted", "updated_ts")
    expected = []
    for k, left in left_now.items():
        right = right_now.get(left[right_key])
        expected.append({key[0]: k, **{c: left[c] for c in left_values},
                         **{c: None if right is None else right[c] for c in right_values}})
    data_columns = [key[0], *left_values, *right_values]
    assert sorted(got[0]) == sorted([*data_columns, "event_time", "version"])
    assert Counter(canonical_rows({c: r[c] for c in data_columns} for r in got)) == Counter(
        canonical_rows(expected))
    if kind == "table":  # the out-of-order tier, the deleted customer, the closed account
        by_key = {r["customer"]: r for r in got}
        assert sorted(by_key) == ["c1", "c2", "c4"]  # c3 deleted, c5 held
        assert by_key["c2"]["tier"] == "gold" and by_key["c2"]["balance"] is None
        assert by_key["c1"]["balance"] == 95.0
    else:  # the out-of-order price, the deleted order, the order that moved product
        by_key = {r["order_id"]: r for r in got}
        assert sorted(by_key) == [2, 3]  # order 1 deleted, order 4 held
        assert (by_key[2]["product"], by_key[2]["price"]) == ("pen", 3.0)
        assert by_key[3]["price"] == 1.5
    deleted = rows_of(read_table(db, f"_interlace_deleted_{table}"))
    assert [r[key[0]] for r in deleted] == (["c3"] if kind == "table" else [1])

    again = run_pipeline(p, base=tmp_path, spark=spark, progress=None)
    assert again.batches == 0 and again.output_rows == 0
    assert Counter(canonical_rows(rows_of(read_table(db, table)))) == Counter(
        canonical_rows(got))
