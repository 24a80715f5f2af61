"""Helpers shared by the Delta tests: put a pipeline's target on Delta, read tables back.

``tests/delta`` is on pytest's ``pythonpath`` (pyproject.toml), so test modules import this
as ``delta_support``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import duckdb
from cli_support import rows_of
from deltalake import DeltaTable


def to_delta(toml_text: str, path: str, key: str = "") -> str:
    """``toml_text`` with its ``[target]`` table replaced by a delta target at ``path``."""
    target = f'[target]\nkind = "delta"\npath = "{path}"\n{key}\n'
    text, n = re.subn(r"(?ms)^\[target\]\n.*?(?=^\[)|^\[target\]\n.*\Z", target, toml_text)
    assert n == 1, "the pipeline has one [target]"
    return text


def _naive(v):
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def delta_rows(path: Path) -> list[dict]:
    """The table's rows, its UTC-aware timestamps as naive UTC (as DuckDB's tables hold them)."""
    return [{k: _naive(v) for k, v in r.items()}
            for r in rows_of(DeltaTable(str(path)).to_pandas())]


def tables(folder: Path) -> dict[str, list[dict]]:
    """Every Delta table under ``out/`` (by folder name) and every DuckDB user table."""
    out: dict[str, list[dict]] = {}
    for log in sorted((folder / "out").glob("*/_delta_log")):
        out[log.parent.name] = delta_rows(log.parent)
    for db in sorted((folder / "out").glob("*.duckdb")):
        con = duckdb.connect(str(db), read_only=True)
        try:
            for (name,) in con.execute("SHOW TABLES").fetchall():
                if name != "_interlace_commits":
                    out[name] = rows_of(con.execute(f'SELECT * FROM "{name}"').fetchdf())
        finally:
            con.close()
    return out


def commits(path: Path) -> list[tuple[int, str, list[tuple[str, int]]]]:
    """Each commit of the table: ``(version, operation, [(txn app id, txn version)])``."""
    out = []
    for f in sorted((path / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        op = next(a["commitInfo"].get("operation", "") for a in actions if "commitInfo" in a)
        txns = [(a["txn"]["appId"], a["txn"]["version"]) for a in actions if "txn" in a]
        out.append((int(f.stem), op, txns))
    return out


def assert_one_commit_per_batch(path: Path, app_id: str) -> list[int]:
    """Every commit after the table's creation carries one txn of ``app_id``, its batch ids
    strictly increasing: no micro-batch was applied twice. Returns those batch ids."""
    log = commits(path)
    assert log[0][1] == "CREATE TABLE" and log[0][2] == [], log[0]
    batches = []
    for version, op, txns in log[1:]:
        assert txns and {a for a, _ in txns} == {app_id} and len(txns) == 1, (version, op, txns)
        batches.append(txns[0][1])
    assert batches == sorted(set(batches)), f"a batch committed twice: {batches}"
    return batches
