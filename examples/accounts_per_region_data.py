"""Write the data of examples/accounts_per_region.toml: an accounts table's changelog (CDC).

One JSON file per micro-batch (increasing modification times, so Spark's file source takes
them in order). Accounts open, change balance, move between regions and close (a
``deleted`` update): the table aggregation keeps per region the open accounts, their total
and largest balance, exact under every move and delete. Run ``python
examples/accounts_per_region_data.py FOLDER`` to write ``FOLDER/data/accounts``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path

BASE = dt.datetime(2026, 1, 1, 9, 0)
DDL = "account_id STRING, region STRING, balance BIGINT, deleted BOOLEAN, ts TIMESTAMP"


def _u(account: str, region: str | None, balance: int | None, minutes: int,
       deleted: bool = False) -> dict:
    return {"account_id": account, "region": region, "balance": balance, "deleted": deleted,
            "ts": BASE + dt.timedelta(minutes=minutes)}


#: One list per file (micro-batch).
BATCHES = [
    [_u("a1", "eu", 100, 0), _u("a2", "eu", 50, 1), _u("a3", "us", 70, 2)],
    [_u("a1", "us", 120, 5), _u("a4", "apac", 10, 6), _u("a2", "eu", 55, 7)],
    [_u("a3", None, None, 12, deleted=True), _u("a5", "apac", 5, 13)],
    [_u("a2", None, None, 21, deleted=True), _u("a6", "eu", 40, 22)],
    [_u("a4", "eu", 11, 30), _u("a7", "us", 3, 31)],
    [_u("a8", "us", 1, 120)],  # later: moves the watermark past the rest
]


def write(folder: str | os.PathLike[str]) -> list[list[dict]]:
    """Write ``folder/data/accounts/NNN.json``; return the batches written."""
    out = Path(folder) / "data" / "accounts"
    out.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(BATCHES):
        path = out / f"{i:03d}.json"
        path.write_text("".join(json.dumps({**r, "ts": r["ts"].isoformat()}) + "\n"
                                for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return BATCHES


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else ".")
