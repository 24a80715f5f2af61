"""A table aggregation as a chain stage on Spark (SEMANTICS §10, §11; issue 30's example 3).

``examples/revenue_per_category.toml``: a foreign-key join of orders with their products
(a changelog), then a table aggregation of that changelog by category. The DuckDB table
equals the two oracles composed through the channel (the join's files and clocks,
``output_sql`` written out in Python, the aggregation's oracle over them), and the revenue
per category computed by hand from the data, one micro-batch per file.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from itertools import zip_longest
from pathlib import Path

import pytest
from cli_support import read_table, rows_of, run_here

from interlace import Pipeline
from interlace.testing.chain import channel_files
from interlace.testing.log import JoinBatch
from interlace.testing.oracles import oracle_foreign_key_join
from interlace.testing.oracles.table_aggregate import oracle_table_aggregate

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_spec = importlib.util.spec_from_file_location("revenue_data", EXAMPLES / "revenue_data.py")
assert _spec is not None and _spec.loader is not None
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)


def _columns(ddl: str) -> list[str]:
    return [c.split()[0] for c in ddl.split(", ")]


def test_revenue_per_category_equals_the_composed_oracles(spark, tmp_path):
    orders, products = data.write(tmp_path)
    (tmp_path / "r.toml").write_text((EXAMPLES / "revenue_per_category.toml").read_text())
    run_here(spark, tmp_path, "r.toml")
    joined, per_category = (r.pipeline for r in Pipeline.load(tmp_path / "r.toml").stage_runs())
    log = [JoinBatch(left=tuple(o), right=tuple(p))
           for o, p in zip_longest(orders, products, fillvalue=[])]
    up = oracle_foreign_key_join(joined.join, log, left_columns=_columns(data.ORDERS_DDL),
                                 right_columns=_columns(data.PRODUCTS_DDL))
    files = channel_files(up, horizon_ms=joined.join.horizon_ms)

    def projected(r: dict) -> dict:  # the stage's output_sql
        revenue = (None if r["qty"] is None or r["price_cents"] is None
                   else r["qty"] * r["price_cents"])
        return {**r, "revenue_cents": revenue, "gone": r["op"] == "delete"}

    columns = [*up.output_columns, "revenue_cents", "gone"]
    want = oracle_table_aggregate(per_category.aggregate,
                                  [[projected(r) for r in rows] for rows, _ in files],
                                  columns=columns, clocks_us=[c for _, c in files])
    final = {g[0]: r for g, r in want.final(["category"]).items()}
    got = {r["category"]: r for r in rows_of(read_table(tmp_path / "interlace.duckdb",
                                                        "revenue_per_category"))}
    fields = ("orders", "units", "revenue_cents", "version")
    assert {g: tuple(r[f] for f in fields) for g, r in got.items()} == {
        g: tuple(r[f] for f in fields) for g, r in final.items()}
    # By hand, as of 10:30 (the 10:30 updates not yet due): pen 200 office, mug moved to home,
    # kettle 2500 in kitchen; order 1 (mug, 2), 2 (mug, 3), 4 (pen, 10), 5 (kettle, 1);
    # order 3 (the lamp) deleted, so `home` holds only the mugs.
    assert {g: (r["orders"], r["units"], r["revenue_cents"]) for g, r in got.items()} == {
        "office": (1, 10, 2000), "home": (2, 5, 4000), "kitchen": (1, 1, 2500)}
    # `interlace inspect` of the aggregation stage (its upstream stage built, not read): the
    # first query holds what the oracle's holds (each order's current row; the 10:30 updates
    # are held upstream, by the join), the second each category's last row.
    from interlace.inspection import inspect_pipeline

    keys, groups = inspect_pipeline(spark, Pipeline.load(tmp_path / "r.toml"), tmp_path,
                                    only="per_category")
    assert (keys.stage, keys.operator, groups.operator) == (
        "revenue.per_category", "aggregate_keys", "aggregate_groups")
    assert Counter((i["item"], i["key"], i["event_time"], i["releases_at"])
                   for i in keys.items) == Counter(
        (h.kind, f"order_id={h.key[0]}", h.event_time_us, h.releases_at_us)
        for h in want.held_keys[-1])
    assert len(keys.items) >= 4 and {i["item"] for i in keys.items} <= {"key row", "deleted key"}
    assert {i["key"]: json.loads(i["row"]) for i in groups.items} == {
        f"category={'null' if h.group[0] is None else h.group[0]}": {**h.row, "rows": h.rows}
        for h in want.held_groups[-1]}
