"""Write the data of examples/revenue_per_category.toml: orders and products changelogs.

One Parquet file per micro-batch and source (increasing modification times). Orders refer to a
product (a foreign key); products change price and category; an order changes quantity,
moves to another product, or is deleted; one order refers to a product that appears only
later. Run ``python examples/revenue_data.py FOLDER`` to write ``FOLDER/data/orders`` and
``FOLDER/data/products``.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path

BASE = dt.datetime(2026, 1, 1, 9, 0)
ORDERS_DDL = "order_id BIGINT, product STRING, qty BIGINT, deleted BOOLEAN, updated_ts TIMESTAMP"
PRODUCTS_DDL = ("product STRING, category STRING, price_cents BIGINT, deleted BOOLEAN, "
                "updated_ts TIMESTAMP")


def _o(order: int, product: str | None, qty: int | None, minutes: int,
       deleted: bool = False) -> dict:
    return {"order_id": order, "product": product, "qty": qty, "deleted": deleted,
            "updated_ts": BASE + dt.timedelta(minutes=minutes)}


def _p(product: str, category: str | None, price: int | None, minutes: int,
       deleted: bool = False) -> dict:
    return {"product": product, "category": category, "price_cents": price, "deleted": deleted,
            "updated_ts": BASE + dt.timedelta(minutes=minutes)}


#: One list per file (micro-batch), per source.
ORDERS = [
    [_o(1, "pen", 2, 1), _o(2, "mug", 1, 2), _o(3, "lamp", 1, 3)],
    [_o(4, "pen", 10, 12), _o(2, "mug", 3, 13), _o(5, "kettle", 1, 14)],
    [_o(3, None, None, 21, deleted=True), _o(1, "mug", 2, 22)],
    [_o(6, "pen", 1, 90)],  # later: moves the watermark past the rest
]
PRODUCTS = [
    [_p("pen", "office", 150, 0), _p("mug", "kitchen", 800, 0), _p("lamp", "home", 4000, 0)],
    [_p("pen", "office", 200, 10), _p("mug", "home", 800, 11)],
    [_p("kettle", "kitchen", 2500, 20)],
    [_p("pen", "office", 210, 90)],
]


_TYPES = {"BIGINT": "int64", "STRING": "string", "BOOLEAN": "bool_"}


def _write(folder: Path, batches: list[list[dict]], ddl: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(name, pa.timestamp("us", tz="UTC") if typ == "TIMESTAMP"
                         else getattr(pa, _TYPES[typ])())
                        for name, typ in (c.split() for c in ddl.split(", "))])
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(batches):
        path = folder / f"{i:03d}.parquet"
        utc = [{**r, "updated_ts": r["updated_ts"].replace(tzinfo=dt.UTC)} for r in rows]
        pq.write_table(pa.Table.from_pylist(utc, schema=schema), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def write(folder: str | os.PathLike[str]) -> tuple[list[list[dict]], list[list[dict]]]:
    """Write ``folder/data/orders`` and ``folder/data/products``; return both's batches."""
    _write(Path(folder) / "data" / "orders", ORDERS, ORDERS_DDL)
    _write(Path(folder) / "data" / "products", PRODUCTS, PRODUCTS_DDL)
    return ORDERS, PRODUCTS


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else ".")
