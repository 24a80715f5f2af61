"""Write the inputs of the chain examples ``paid_sessions.toml`` and ``page_views_week.toml``.

Run it with the folder to write into, then copy the pipeline files there (their relative
paths resolve against their own folder)::

    python examples/chains_data.py /tmp/chains
    cp examples/paid_sessions.toml examples/page_views_week.toml /tmp/chains/
    interlace run /tmp/chains/paid_sessions.toml

Each source gets one Parquet file per micro-batch (the pipelines read one file per source
per micro-batch, oldest first: the files' modification times are set in order). The data is
seeded, so every run writes the same rows. What it exercises (docs/chains.md walks through
example 1):

* ``orders`` / ``payments`` (seed 000's chain, example 1): six customers order over three
  hours in bursts (so sessions form, 30 minutes of quiet closing each); most orders are paid
  0 to 10 minutes later, some never; a few orders and payments arrive a file late (out of
  order), one payment 9 minutes after its order arrives in the batch after, one a day late
  (dropped by the join, counted).
* ``views`` (seed 002's week-over-week, example 2): page views of four pages over 20 days,
  out of order within each file (none behind the window's lateness, so the streaming result
  equals a batch computation of the same data); the daily counts are joined to the same
  page's count 7 days earlier.

``tests/cli/test_chain_pipelines.py`` writes the data with :func:`write` and checks both
pipelines' DuckDB tables against the oracles composed by hand and a batch computation.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import sys
from pathlib import Path
from typing import Any

ORDERS_DDL = "order_id BIGINT, customer STRING, amount DOUBLE, order_ts TIMESTAMP"
PAYMENTS_DDL = "order_id BIGINT, paid DOUBLE, pay_ts TIMESTAMP"
VIEWS_DDL = "page STRING, user STRING, view_ts TIMESTAMP"

_START = dt.datetime(2026, 1, 1, 9, 0)


def orders_and_payments(seed: int = 7) -> tuple[list[list[dict[str, Any]]], list[list[dict[str, Any]]]]:
    """Return (orders, payments), each a list of micro-batches of rows (example 1)."""
    rng = random.Random(seed)
    customers = [f"c{i}" for i in range(1, 7)]
    orders: list[dict[str, Any]] = []
    payments: list[dict[str, Any]] = []
    order_id = 0
    for burst in range(6):  # bursts 30 min apart: a customer's quiet of 30 min ends a session
        at = _START + dt.timedelta(minutes=35 * burst)
        for c in rng.sample(customers, 4):
            for _ in range(rng.randint(1, 3)):
                order_id += 1
                ts = at + dt.timedelta(minutes=rng.randint(0, 12), seconds=rng.randint(0, 59))
                amount = float(rng.randint(1, 40) * 5)
                orders.append({"order_id": order_id, "customer": c, "amount": amount,
                               "order_ts": ts})
                if rng.random() < 0.75:  # paid 0 to 10 minutes later (the bound, inclusive)
                    lag = dt.timedelta(seconds=rng.choice([0, 30, 240, 599, 600]))
                    payments.append({"order_id": order_id, "paid": amount, "pay_ts": ts + lag})
    paid = _batches(payments, "pay_ts", rng)
    # One payment a day late, in the last-but-one file: behind every watermark by then, the
    # join drops and counts it.
    paid[-2].append({"order_id": 1, "paid": 5.0, "pay_ts": _START - dt.timedelta(days=1)})
    return _batches(orders, "order_ts", rng), paid


def page_views(seed: int = 11) -> list[list[dict[str, Any]]]:
    """Return the page views, a list of micro-batches of rows (example 2)."""
    rng = random.Random(seed)
    rows = []
    day0 = dt.datetime(2026, 1, 1)
    for day in range(20):
        for page in ("home", "pricing", "docs", "blog"):
            for _ in range(rng.randint(0, 6) + (3 if page == "home" else 0)):
                ts = day0 + dt.timedelta(days=day, seconds=rng.randint(0, 86_399))
                rows.append({"page": page, "user": f"u{rng.randint(1, 30)}", "view_ts": ts})
    return _batches(rows, "view_ts", rng, per_batch=40, move=False)


def _batches(rows: list[dict[str, Any]], ts: str, rng: random.Random,
             per_batch: int = 8, move: bool = True) -> list[list[dict[str, Any]]]:
    """Cut rows in time order into micro-batches, each shuffled; with ``move``, move a few
    rows a batch later (out of order across micro-batches)."""
    rows = sorted(rows, key=lambda r: r[ts])
    n = max(1, (len(rows) + per_batch - 1) // per_batch)
    batches: list[list[dict[str, Any]]] = [rows[i * per_batch:(i + 1) * per_batch]
                                           for i in range(n)]
    for b in range(n - 1):
        if move and batches[b] and rng.random() < 0.5:
            batches[b + 1].append(batches[b].pop(rng.randrange(len(batches[b]))))
    for batch in batches:
        rng.shuffle(batch)
    return batches


def write_batches(folder: Path, batches: list[list[dict[str, Any]]], ddl: str) -> None:
    """Write one Parquet file per micro-batch, with increasing modification times."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    names = [c.split()[0] for c in ddl.split(", ")]
    types = {"BIGINT": pa.int64(), "STRING": pa.string(), "DOUBLE": pa.float64(),
             "TIMESTAMP": pa.timestamp("us", tz="UTC")}
    schema = pa.schema([(c.split()[0], types[c.split()[1]]) for c in ddl.split(", ")])
    for i, rows in enumerate(batches):
        frame = pd.DataFrame(rows, columns=names)
        for f in schema:
            if pa.types.is_timestamp(f.type):
                frame[f.name] = pd.to_datetime(frame[f.name]).dt.tz_localize("UTC")
        path = folder / f"part-{i:03d}.parquet"
        pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def write(folder: str | os.PathLike[str]) -> dict[str, list[list[dict[str, Any]]]]:
    """Write every source of both examples under ``folder/data``; return their batches."""
    root = Path(folder) / "data"
    orders, payments = orders_and_payments()
    views = page_views()
    write_batches(root / "orders", orders, ORDERS_DDL)
    write_batches(root / "payments", payments, PAYMENTS_DDL)
    write_batches(root / "views", views, VIEWS_DDL)
    return {"orders": orders, "payments": payments, "views": views}


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else ".")
