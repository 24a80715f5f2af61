"""A table aggregation as a pipeline on Spark (SEMANTICS §10): ``[transform.aggregate]``.

``examples/accounts_per_region.toml`` over ``examples/accounts_per_region_data.py``, one
micro-batch per file and all at once: the DuckDB table, the changelog applied by group
(NULL-safe, one row per live group), equals the oracle's groups, equals a batch ``GROUP BY``
of the table's final snapshot, and a rerun finds nothing new.
"""

from __future__ import annotations

import importlib.util
import io
import shutil
from pathlib import Path

import pytest
from cli_support import read_table, rows_of, run_here

from interlace import Pipeline
from interlace.testing.oracles.table_aggregate import aggregate_rows, oracle_table_aggregate

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_spec = importlib.util.spec_from_file_location("accounts_data",
                                               EXAMPLES / "accounts_per_region_data.py")
assert _spec is not None and _spec.loader is not None
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)


def _snapshot(batches: list[list[dict]], before_minutes: int) -> dict:
    latest: dict = {}
    for r in sorted((r for b in batches for r in b), key=lambda r: r["ts"]):
        latest[r["account_id"]] = r
    groups: dict = {}
    for r in latest.values():
        if not r["deleted"] and (r["ts"] - data.BASE).total_seconds() < before_minutes * 60:
            groups.setdefault(r["region"], []).append(r)
    return groups


@pytest.mark.parametrize("at_once", [False, True])
def test_the_example_converges_in_duckdb(spark, tmp_path, at_once):
    batches = data.write(tmp_path)
    text = (EXAMPLES / "accounts_per_region.toml").read_text()
    if at_once:
        text = text.replace('maxFilesPerTrigger = "1"', 'maxFilesPerTrigger = "1000"')
    (tmp_path / "p.toml").write_text(text)
    progress = run_here(spark, tmp_path, "p.toml")
    assert "done" in progress
    spec = Pipeline.load(tmp_path / "p.toml").aggregate
    log = batches if not at_once else [[r for b in batches for r in b]]
    want = oracle_table_aggregate(spec, log, columns=[c.split()[0] for c in data.DDL.split(", ")])
    got = {r["region"]: r for r in rows_of(read_table(tmp_path / "interlace.duckdb",
                                                      "accounts_per_region"))}
    final = want.final(["region"])
    assert {g[0]: (r["accounts"], r["total"], r["largest"], r["version"])
            for g, r in final.items()} == {
        g: (r["accounts"], r["total"], r["largest"], r["version"]) for g, r in got.items()}
    # The last update (a8 at 11:00) is not yet due: the table as of just before it.
    snap = _snapshot(batches, 120)
    assert {g: aggregate_rows(spec.aggregations, rows) for g, rows in snap.items()} == {
        g: [r["accounts"], r["total"], r["largest"]] for g, r in got.items()}
    assert set(got) == {"eu", "us", "apac"}
    if not at_once:
        _inspect_holds_what_the_oracle_holds(tmp_path, want)
    # A rerun reads nothing new and changes nothing.
    again = run_here(spark, tmp_path, "p.toml")
    assert "no new input" in again
    assert rows_of(read_table(tmp_path / "interlace.duckdb", "accounts_per_region")) == list(
        got.values()) or sorted(map(str, rows_of(read_table(
            tmp_path / "interlace.duckdb", "accounts_per_region")))) == sorted(
        map(str, got.values()))
    shutil.rmtree(tmp_path / "data")


def _inspect_holds_what_the_oracle_holds(root: Path, want) -> None:
    """``interlace inspect --json``: a8's 11:00 update pending until ``wm > 11:00``, each
    account's current row, each region's last row; as the oracle holds them."""
    import contextlib
    import datetime as dt
    import json
    from collections import Counter

    from interlace.cli import main

    def iso(us: int | None) -> str | None:
        return None if us is None else (
            dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=us)).isoformat() + "Z"

    out = io.StringIO()
    with contextlib.chdir(root), contextlib.redirect_stdout(out):
        assert main(["inspect", "p.toml", "--json"]) == 0
    keys, groups = json.loads(out.getvalue())
    assert (keys["summary"]["operator"], groups["summary"]["operator"]) == (
        "aggregate_keys", "aggregate_groups")
    assert Counter((i["item"], i["key"], i["event_time"], i["releases_at"], i["rule"])
                   for i in keys["items"]) == Counter(
        (h.kind, f"account_id={h.key[0]}", iso(h.event_time_us), iso(h.releases_at_us),
         "none" if h.releases_at_us is None else "wm > releases_at")
        for h in want.held_keys[-1])
    (a8,) = [i for i in keys["items"] if i["releases_at"] is not None]
    assert a8["key"] == "account_id=a8" and a8["wait_ms"] > 0
    assert {i["key"]: i["row"] for i in groups["items"]} == {
        f"region={'null' if h.group[0] is None else h.group[0]}": {**h.row, "rows": h.rows}
        for h in want.held_groups[-1]}
