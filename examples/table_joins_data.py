"""Write the input changelogs of ``customers_accounts.toml`` and ``orders_products.toml``.

Run it with the folder to write into, then copy the two pipeline files there (their relative
paths resolve against their own folder)::

    python examples/table_joins_data.py /tmp/tables
    cp examples/customers_accounts.toml examples/orders_products.toml /tmp/tables/
    interlace run /tmp/tables/customers_accounts.toml

Each source gets four Parquet files, one per micro-batch (the pipelines read one file per
source per micro-batch, oldest first: the files' modification times are set in order). All
times are on 2026-01-01, UTC. What the data exercises (docs/pipelines.md walks through it):

* ``customers_cdc`` / ``accounts_cdc`` (the table-table join): customer c2's tier update of
  10:04 arrives a file *after* the one of 10:06 (an out-of-order update, put back in order
  under ``emit = "final"``); c3 is deleted at 10:09 (``deleted = true``, a tombstone); c2's
  account is closed (deleted) at 10:10.
* ``orders_cdc`` / ``products_cdc`` (the foreign-key join): the pen's price of 10:04 arrives
  after the one of 10:06; order 2 moves from ink to pen; order 3 refers to the pad before
  the pad exists; order 1 is deleted at 10:09.
* The last file of every source holds an update at 10:30 (c5, order 4): the watermark stays
  ``lateness_ms`` (5 minutes) behind the newest update, so these wait for later data and are
  not in the output when the files run out.

``tests/cli/test_table_pipelines.py`` writes the data with :func:`write` and checks both
pipelines' DuckDB tables against the oracles.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import Any

CUSTOMERS_DDL = "customer STRING, name STRING, tier STRING, deleted BOOLEAN, updated_ts TIMESTAMP"
ACCOUNTS_DDL = "customer STRING, balance DOUBLE, deleted BOOLEAN, updated_ts TIMESTAMP"
ORDERS_DDL = "order_id BIGINT, product STRING, qty INT, deleted BOOLEAN, updated_ts TIMESTAMP"
PRODUCTS_DDL = "product STRING, price DOUBLE, deleted BOOLEAN, updated_ts TIMESTAMP"


def at(minute: int) -> dt.datetime:
    """2026-01-01 10:MM UTC."""
    return dt.datetime(2026, 1, 1, 10, minute, tzinfo=dt.timezone.utc)


def _customer(customer: str, name: str | None, tier: str | None, minute: int,
              deleted: bool = False) -> dict[str, Any]:
    return {"customer": customer, "name": name, "tier": tier, "deleted": deleted,
            "updated_ts": at(minute)}


def _account(customer: str, balance: float | None, minute: int,
             deleted: bool = False) -> dict[str, Any]:
    return {"customer": customer, "balance": balance, "deleted": deleted,
            "updated_ts": at(minute)}


def _order(order_id: int, product: str | None, qty: int | None, minute: int,
           deleted: bool = False) -> dict[str, Any]:
    return {"order_id": order_id, "product": product, "qty": qty, "deleted": deleted,
            "updated_ts": at(minute)}


def _product(product: str, price: float | None, minute: int,
             deleted: bool = False) -> dict[str, Any]:
    return {"product": product, "price": price, "deleted": deleted, "updated_ts": at(minute)}


#: Source folder -> (schema DDL, rows per file). Files are read in this order, one per
#: micro-batch per source.
DATA: dict[str, tuple[str, list[list[dict[str, Any]]]]] = {
    "customers_cdc": (CUSTOMERS_DDL, [
        [_customer("c1", "Ada", "gold", 0), _customer("c2", "Bo", "silver", 0),
         _customer("c3", "Cy", "bronze", 1)],
        [_customer("c2", "Bo", "gold", 6), _customer("c4", "Di", "silver", 7)],
        [_customer("c2", "Bo", "bronze", 4),  # out of order: older than gold (10:06)
         _customer("c3", None, None, 9, deleted=True)],
        [_customer("c5", "Eve", "gold", 30)],
    ]),
    "accounts_cdc": (ACCOUNTS_DDL, [
        [_account("c1", 100.0, 0), _account("c2", 20.0, 1)],
        [_account("c1", 80.0, 5), _account("c3", 10.0, 6)],
        [_account("c1", 95.0, 8), _account("c2", None, 10, deleted=True)],
        [_account("c5", 1.0, 30)],
    ]),
    "orders_cdc": (ORDERS_DDL, [
        [_order(1, "pen", 2, 1), _order(2, "ink", 1, 1)],
        [_order(3, "pad", 1, 5), _order(2, "pen", 1, 7)],
        [_order(1, None, None, 9, deleted=True)],
        [_order(4, "ink", 3, 30)],
    ]),
    "products_cdc": (PRODUCTS_DDL, [
        [_product("pen", 2.5, 0), _product("ink", 4.0, 0)],
        [_product("pen", 3.0, 6)],
        [_product("pen", 2.75, 4),  # out of order: older than 3.0 (10:06)
         _product("pad", 1.5, 8)],
        [_product("ink", 4.5, 30)],
    ]),
}

_ARROW_TYPES = {"STRING": "string", "DOUBLE": "float64", "BOOLEAN": "bool_", "BIGINT": "int64",
                "INT": "int32"}


def _arrow_schema(ddl: str) -> Any:
    import pyarrow as pa

    fields = []
    for column in ddl.split(","):
        name, typ = column.split()
        arrow = (pa.timestamp("us", tz="UTC") if typ == "TIMESTAMP"
                 else getattr(pa, _ARROW_TYPES[typ])())
        fields.append(pa.field(name, arrow))
    return pa.schema(fields)


def write(root: str | os.PathLike[str]) -> list[Path]:
    """Write every source's files under ``root/data/`` and return the folders written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folders = []
    for name, (ddl, files) in DATA.items():
        folder = Path(root) / "data" / name
        folder.mkdir(parents=True, exist_ok=True)
        schema = _arrow_schema(ddl)
        for i, rows in enumerate(files):
            path = folder / f"{i:06d}.parquet"
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
            mtime = 1_700_000_000.0 + i  # Spark reads a folder's files oldest first
            os.utime(path, (mtime, mtime))
        folders.append(folder)
    return folders


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/table_joins_data.py FOLDER")
    for folder in write(sys.argv[1]):
        print(folder)
