"""docs/tables.md's worked seed 003 tables are seed 003's (interlace/testing/seed003_tables.py).

The seed module's tables are what the operator and oracle tests check row by row; this test
makes sure the overview page prints the same rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import interlace.testing.seed003_tables as seed

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tables.md"


def _rows(after: str) -> list[list[str]]:
    """The body rows of the first Markdown table after the line starting with ``after``."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(after))
    body = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            body.append([c.strip() for c in line.strip("|").split("|")])
        elif body:
            break
    return body[2:]  # header and rule


def _cell(change: Any) -> str:
    if change is None:
        return ""
    if change.op == "delete":
        return "delete"
    return f"{change.left if change.left is not None else 'null'}-" \
           f"{change.right if change.right is not None else 'null'}"


def test_table_table_rows_are_seed_003s() -> None:
    want = [[str(ts), value or "null" if side == "left" else "", value or "null"
             if side == "right" else "", *map(_cell, (inner, left, full))]
            for ts, side, value, inner, left, full in seed.TABLE_TABLE]
    got = _rows("Table-table (KTable-KTable)")
    assert [[r[0], r[1], r[2], *r[3:]] for r in got] == want


def test_stream_table_rows_are_seed_003s() -> None:
    def pairs(ps: Any) -> str:
        return ", ".join(f"{x}-{y if y is not None else 'null'}" for x, y in ps)

    want = [[str(ts), value if side == "left" else "",
             (value or "null") if side == "right" else "", pairs(inner), pairs(left)]
            for ts, side, value, inner, left in seed.STREAM_TABLE]
    assert _rows("Stream-table (KStream-KTable)") == want
