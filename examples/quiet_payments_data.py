"""Write the data of examples/quiet_payments.toml: orders, and payments that stop.

One Parquet file per micro-batch and source (increasing modification times). Orders arrive
every few minutes for an hour; payments arrive for the first orders only, then the payment
feed goes quiet (an outage, a night without card traffic). Without an idle timeout the
join's watermark waits for the payments forever and no unpaid order is written; with
``idle_timeout_ms`` on the payments source they are written once the feed has been quiet that
long. Run ``python examples/quiet_payments_data.py FOLDER`` to write ``FOLDER/data/orders``
and ``FOLDER/data/payments``.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path

BASE = dt.datetime(2026, 1, 1, 9, 0)
ORDERS_DDL = "order_id BIGINT, customer STRING, amount DOUBLE, order_ts TIMESTAMP"
PAYMENTS_DDL = "payment_id STRING, order_id BIGINT, paid DOUBLE, pay_ts TIMESTAMP"


def _order(order: int, minutes: int) -> dict:
    return {"order_id": order, "customer": f"c{order % 3}", "amount": 10.0 * order,
            "order_ts": BASE + dt.timedelta(minutes=minutes)}


def _payment(order: int, minutes: int) -> dict:
    return {"payment_id": f"p{order}", "order_id": order, "paid": 10.0 * order,
            "pay_ts": BASE + dt.timedelta(minutes=minutes)}


#: One list per file (micro-batch), per source: six files of orders, 12 minutes apart ...
ORDERS = [[_order(2 * i + 1, 12 * i), _order(2 * i + 2, 12 * i + 5)] for i in range(6)]
#: ... and two of payments, for orders 1 to 3; then nothing.
PAYMENTS = [[_payment(1, 2), _payment(2, 7)], [_payment(3, 15)]]

_TYPES = {"BIGINT": "int64", "STRING": "string", "DOUBLE": "float64"}


def _write(folder: Path, batches: list[list[dict]], ddl: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(name, pa.timestamp("us", tz="UTC") if typ == "TIMESTAMP"
                         else getattr(pa, _TYPES[typ])())
                        for name, typ in (c.split() for c in ddl.split(", "))])
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(batches):
        path = folder / f"{i:03d}.parquet"
        utc = [{k: v.replace(tzinfo=dt.UTC) if isinstance(v, dt.datetime) else v
                for k, v in r.items()} for r in rows]
        pq.write_table(pa.Table.from_pylist(utc, schema=schema), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def write(folder: str | os.PathLike[str]) -> tuple[list[list[dict]], list[list[dict]]]:
    """Write ``folder/data/orders`` and ``folder/data/payments``; return both's batches."""
    _write(Path(folder) / "data" / "orders", ORDERS, ORDERS_DDL)
    _write(Path(folder) / "data" / "payments", PAYMENTS, PAYMENTS_DDL)
    return ORDERS, PAYMENTS


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else ".")
