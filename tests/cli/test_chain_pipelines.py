"""Chains run on Spark (SEMANTICS §11): the examples' final DuckDB tables equal the oracles
composed by hand, one micro-batch per input file and all files at once.

``examples/paid_sessions.toml`` (seed 000: a left join, then a session window over its
output) and ``examples/page_views_week.toml`` (seed 002: a daily tumbling window, then a
foreign-key join of its output with itself a week earlier), on the data
``examples/chains_data.py`` writes. The expected tables come from the upstream stage's oracle,
the channel rule (:func:`interlace.testing.chain.channel_files`: each upstream micro-batch's
rows and its watermark as the clock), the stage's ``output_sql`` written out in Python, and
the downstream stage's oracle; example 2 is also checked against a batch computation of the
same data with pandas.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import shutil
from itertools import zip_longest
from pathlib import Path

import pandas as pd
import pytest

from cli_support import read_table, rows_of, run_here
from interlace.pipeline import Pipeline
from interlace.testing.chain import channel_files, join_log, window_log
from interlace.testing.log import JoinBatch
from interlace.testing.oracles import (
    WindowBatch,
    oracle_foreign_key_join,
    oracle_join,
    oracle_window,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_spec = importlib.util.spec_from_file_location("chains_data", EXAMPLES / "chains_data.py")
assert _spec is not None and _spec.loader is not None
chains_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chains_data)

ALL_AT_ONCE = '\noptions = { maxFilesPerTrigger = "1000" }\n'


def _columns(ddl: str) -> list[str]:
    return [c.split()[0] for c in ddl.split(", ")]


def _setup(tmp_path: Path, example: str, at_once: bool) -> tuple[Path, dict, Pipeline]:
    batches = chains_data.write(tmp_path)
    text = (EXAMPLES / example).read_text()
    if at_once:  # every file in the first micro-batch
        for src in ("orders", "payments", "views"):
            text = text.replace(f'path = "data/{src}"', f'path = "data/{src}"{ALL_AT_ONCE}')
        batches = {k: [[r for b in v for r in b]] for k, v in batches.items()}
    (tmp_path / example).write_text(text)
    return tmp_path, batches, Pipeline.load(tmp_path / example)


def _paid(row: dict) -> dict:
    """``paid``'s output_sql, written out."""
    paid = row["right_order_id"] is not None
    return {**row, "paid_amount": row["left_amount"] if paid else None,
            "unpaid_amount": None if paid else row["left_amount"]}


def _week_before(row: dict) -> dict:
    """``daily``'s output_sql, written out."""
    return {**row, "week_before": row["window_start"] - dt.timedelta(days=7)}


def _key(row: dict, names: list[str]) -> tuple:
    return tuple((row[n] is None, row[n]) for n in names)


def paid_sessions_expected(p: Pipeline, batches: dict) -> tuple[object, list[dict]]:
    """Example 1's final table from the oracles composed by hand: (the join's oracle result,
    the session rows in ``(left_customer, window_start)`` order)."""
    paid, sessions = (r.pipeline for r in p.stage_runs())
    log = [JoinBatch(left=o, right=pmt)
           for o, pmt in zip_longest(batches["orders"], batches["payments"], fillvalue=[])]
    up = oracle_join(paid.join, log, left_columns=_columns(chains_data.ORDERS_DDL),
                     right_columns=_columns(chains_data.PAYMENTS_DDL))
    files = [(tuple(_paid(r) for r in rows), clock)
             for rows, clock in channel_files(up, horizon_ms=paid.join.horizon_ms)]
    channel_columns = [*up.output_columns, "paid_amount", "unpaid_amount"]
    down = oracle_window(sessions.window, window_log(files), columns=channel_columns)
    names = ["left_customer", "window_start"]
    return up, sorted((o.row for o in down.rows), key=lambda r: _key(r, names))


@pytest.mark.parametrize("at_once", [
    # File per batch runs in the compatibility tier (.ci/compat) on every PySpark line.
    pytest.param(False, id="file-per-batch", marks=pytest.mark.compat),
    pytest.param(True, id="all-at-once")])
def test_paid_sessions_equal_the_join_and_window_oracles_composed(spark, tmp_path, at_once):
    folder, batches, p = _setup(tmp_path, "paid_sessions.toml", at_once)
    run_here(spark, folder, "paid_sessions.toml")
    sessions = p.stage_runs()[1].pipeline
    assert sessions.window.lateness_ms == 600_000  # the join's left_order_ts lag: its bound
    up, want = paid_sessions_expected(p, batches)
    names = ["left_customer", "window_start"]
    got = sorted(rows_of(read_table(folder / "interlace.duckdb", "paid_sessions")),
                 key=lambda r: _key(r, names))
    assert got == want
    assert len(want) >= 8  # sessions of several customers closed within the run
    assert any(r["paid"] is not None and r["unpaid"] is not None for r in want)
    if not at_once:  # the day-late payment, behind the watermark
        assert up.late_dropped["right"] + up.spark_dropped["right"] >= 1

    # A rerun finds nothing new in either stage and leaves the table as it is.
    out = run_here(spark, folder, "paid_sessions.toml")
    assert out.count("no new input") == 2
    assert sorted(rows_of(read_table(folder / "interlace.duckdb", "paid_sessions")),
                  key=lambda r: _key(r, names)) == want


def _applied(rows: list[dict], key: list[str]) -> list[dict]:
    """A changelog applied by key, keeping the highest version; deletes remove the key."""
    last: dict[tuple, dict] = {}
    for r in rows:
        k = tuple(r[c] for c in key)
        if k not in last or r["version"] > last[k]["version"]:
            last[k] = r
    return [r for r in last.values() if r["op"] == "upsert"]


@pytest.mark.parametrize("at_once", [False, True], ids=["file-per-batch", "all-at-once"])
def test_page_views_week_equal_the_composed_oracles_and_a_batch_computation(
    spark, tmp_path, at_once
):
    folder, batches, p = _setup(tmp_path, "page_views_week.toml", at_once)
    run_here(spark, folder, "page_views_week.toml")
    daily, compare = (r.pipeline for r in p.stage_runs())

    up = oracle_window(daily.window, [WindowBatch(rows=b) for b in batches["views"]],
                       columns=_columns(chains_data.VIEWS_DDL))
    files = [(tuple(_week_before(r) for r in rows), clock)
             for rows, clock in channel_files(up, horizon_ms=daily.window.horizon_ms)]
    columns = [*up.output_columns, "week_before"]
    down = oracle_foreign_key_join(compare.join, join_log(files, files), left_columns=columns,
                                   right_columns=columns)
    key = ["page", "window_start"]
    want = _applied([o.row for o in down.rows], key)
    table = rows_of(read_table(folder / "interlace.duckdb", "page_views_week"))
    shown = [c for c in table[0] if c in want[0]] if table else []
    assert sorted(({c: r[c] for c in shown} for r in table), key=lambda r: _key(r, key)) == \
        sorted(({c: r[c] for c in shown} for r in want), key=lambda r: _key(r, key))
    assert {"page", "window_start", "left_views", "right_views"} <= set(shown)

    # The same from a batch computation: views per page and day, each beside the page's
    # views 7 days earlier (None where that day had none), for the days the chain applied.
    views = pd.DataFrame([r for b in batches["views"] for r in b])
    views["day"] = views["view_ts"].dt.floor("D")
    counts = views.groupby(["page", "day"]).size().rename("views").reset_index()
    before = counts.assign(day=counts["day"] + pd.Timedelta(days=7))
    joined = counts.merge(before, on=["page", "day"], how="left", suffixes=("", "_before"))
    batch = {(r.page, r.day.to_pydatetime()): (int(r.views), None if pd.isna(r.views_before)
                                               else int(r.views_before))
             for r in joined.itertuples()}
    got = {(r["page"], r["window_start"]): (r["left_views"], r["right_views"]) for r in table}
    assert got and {k: batch[k] for k in got} == got
    assert len(got) >= 40 and any(v[1] is not None for v in got.values())


def test_a_continuous_chain_runs_its_stages_at_once_and_stops_on_ctrl_c(tmp_path):
    """``interlace run --continuous``: both stages run at once in one session, each printing
    its own progress; the table then equals the composed oracles (each stage still reads one
    file per micro-batch, so the split is the same as under availableNow)."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import time

    from cli_support import INTERLACE

    folder, batches, p = _setup(tmp_path, "paid_sessions.toml", False)
    _, want = paid_sessions_expected(p, batches)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([*INTERLACE, "run", "paid_sessions.toml", "--continuous"],
                            cwd=folder, env=env, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    deadline, seen, out = time.time() + 300, [], 0
    while time.time() < deadline and out < len(want):
        line = proc.stderr.readline()
        seen.append(line)
        m = re.match(r"\[paid-sessions\.sessions\] batch \d+: .* out (\d+) rows", line)
        out += int(m.group(1)) if m else 0
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=120)[1]
    text = "".join(seen) + rest
    assert proc.returncode == 130, text
    assert out == len(want), text
    assert "[paid-sessions.paid] batch 0:" in text and "[paid-sessions.sessions] done:" in text
    names = ["left_customer", "window_start"]
    got = sorted(rows_of(read_table(folder / "interlace.duckdb", "paid_sessions")),
                 key=lambda r: _key(r, names))
    assert got == want


MIXED_TOML = """
name = "tiered-counts"

[[sources]]
name = "views"
format = "parquet"
path = "data/views"
schema = "page STRING, user STRING, view_ts TIMESTAMP"
event_time_column = "view_ts"

[[sources]]
name = "owners"
format = "json"
path = "data/owners"
schema = "page STRING, team STRING, updated_ts TIMESTAMP"
event_time_column = "updated_ts"

[[stages]]
name = "daily"

[stages.transform.window]
source = "views"
kind = "tumbling"
duration_ms = 86_400_000
lateness_ms = 3_600_000
group_by = ["page"]
max_groups_per_window = 1_000

[[stages.transform.window.aggregations]]
agg = "count"
as = "views"

[[stages]]
name = "owned"

[stages.transform.join]
kind = "stream_table"
left_source = "daily"
right_source = "owners"
left_keys = ["page"]
right_keys = ["page"]
how = "left"
left_event_time_column = "window_end"
right_event_time_column = "updated_ts"
lateness_ms = 3_600_000

[target]
kind = "duckdb"
table = "owned"
"""


def test_a_stage_joined_with_a_source_takes_both_watermarks(spark, tmp_path):
    """A stage reading a stage and a source: the source keeps its own watermark (its event
    time, its pre-filter), the stage's input follows the clock; Spark takes the minimum."""
    import json
    import os

    from interlace.testing.oracles import oracle_stream_table_join

    batches = chains_data.write(tmp_path)
    owners_dir = tmp_path / "data" / "owners"
    owners_dir.mkdir(parents=True)
    day = dt.datetime(2026, 1, 1)
    owners = [[{"page": p, "team": f"{p}-a", "updated_ts": day} for p in
               ("home", "pricing", "docs")]]
    for d in range(1, 24):  # one owner change every few days, a file per downstream batch
        rows = ([{"page": "docs", "team": f"docs-{d}", "updated_ts": day + dt.timedelta(days=d)}]
                if d % 3 == 0 else [])
        owners.append(rows)
    for i, rows in enumerate(owners):
        path = owners_dir / f"part-{i:03d}.json"
        path.write_text("".join(json.dumps({**r, "updated_ts": r["updated_ts"].isoformat()})
                                + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    (tmp_path / "t.toml").write_text(MIXED_TOML)
    run_here(spark, tmp_path, "t.toml")
    p = Pipeline.load(tmp_path / "t.toml")
    daily, owned = (r.pipeline for r in p.stage_runs())
    assert owned.join.lateness_ms == 3_600_000  # above window_end's lag (0): kept
    up = oracle_window(daily.window, [WindowBatch(rows=b) for b in batches["views"]],
                       columns=_columns(chains_data.VIEWS_DDL))
    files = channel_files(up, horizon_ms=daily.window.horizon_ms)
    log = join_log(files, None, right_rows=owners)
    down = oracle_stream_table_join(owned.join, log, left_columns=up.output_columns,
                                    right_columns=["page", "team", "updated_ts"])
    key = ["left_page", "left_window_start"]
    want = sorted((o.row for o in down.rows), key=lambda r: _key(r, key))
    got = sorted(rows_of(read_table(tmp_path / "interlace.duckdb", "owned")),
                 key=lambda r: _key(r, key))
    assert got == want and len(want) >= 40
    assert {r["right_team"] for r in want if r["left_page"] == "docs"} >= {"docs-a", "docs-3"}
    assert any(r["right_team"] is None for r in want)  # the blog has no owner


CHANGELOG_TOML = """
name = "orders-profiles"

[[sources]]
name = "customers"
format = "parquet"
path = "data/customers_cdc"
schema = "customer STRING, name STRING, tier STRING, deleted BOOLEAN, updated_ts TIMESTAMP"
event_time_column = "updated_ts"

[[sources]]
name = "accounts"
format = "parquet"
path = "data/accounts_cdc"
schema = "customer STRING, balance DOUBLE, deleted BOOLEAN, updated_ts TIMESTAMP"
event_time_column = "updated_ts"

[[sources]]
name = "purchases"
format = "json"
path = "data/purchases"
schema = "purchase_id BIGINT, customer STRING, bought_ts TIMESTAMP"
event_time_column = "bought_ts"

[[stages]]
name = "profiles"
output_sql = "SELECT *, op = 'delete' AS gone FROM output"

[stages.transform.join]
kind = "table"
left_source = "customers"
right_source = "accounts"
left_keys = ["customer"]
right_keys = ["customer"]
how = "left"
lateness_ms = 300_000
tombstone_column = "deleted"
left_prefix = ""
right_prefix = ""

[[stages]]
name = "enriched"

[stages.transform.join]
kind = "stream_table"
left_source = "purchases"
right_source = "profiles"
left_keys = ["customer"]
right_keys = ["customer"]
how = "left"
left_event_time_column = "bought_ts"
right_event_time_column = "event_time"
tombstone_column = "gone"
value_columns = ["tier", "balance"]
lateness_ms = 300_000

[target]
kind = "duckdb"
table = "enriched"
"""


def test_a_changelog_crosses_a_channel_and_is_read_as_a_table(spark, tmp_path):
    """A table-table join's changelog (upserts, a delete) read by a stream-table join as its
    table: each purchase gets the joined profile as of its time, a deleted customer none."""
    import json
    import os
    import runpy

    from interlace.testing.oracles import oracle_stream_table_join, oracle_table_join

    tables = runpy.run_path(str(EXAMPLES / "table_joins_data.py"))
    tables["write"](tmp_path)
    day = dt.datetime(2026, 1, 1, 10, 0)
    purchases = [[{"purchase_id": 10 * f + i, "customer": c,
                   "bought_ts": day + dt.timedelta(minutes=m)}
                  for i, (c, m) in enumerate(rows)]
                 for f, rows in enumerate([[("c1", 2), ("c2", 3)], [("c3", 7), ("c2", 8)],
                                           [("c3", 12), ("c1", 11)], [("c5", 31), ("c4", 20)],
                                           [("c1", 40)], [("c2", 50)]])]
    folder = tmp_path / "data" / "purchases"
    folder.mkdir(parents=True)
    for i, rows in enumerate(purchases):
        path = folder / f"{i:03d}.json"
        path.write_text("".join(json.dumps({**r, "bought_ts": r["bought_ts"].isoformat()})
                                + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    (tmp_path / "c.toml").write_text(CHANGELOG_TOML)
    run_here(spark, tmp_path, "c.toml")
    p = Pipeline.load(tmp_path / "c.toml")
    profiles, enriched = (r.pipeline for r in p.stage_runs())
    data = tables["DATA"]
    cust, acct = data["customers_cdc"][1], data["accounts_cdc"][1]
    naive = lambda rows: [[{**r, "updated_ts": r["updated_ts"].replace(tzinfo=None)}  # noqa: E731
                           for r in b] for b in rows]
    log = [JoinBatch(left=c, right=a) for c, a in zip_longest(naive(cust), naive(acct),
                                                             fillvalue=[])]
    up = oracle_table_join(profiles.join, log, left_columns=_columns(tables["CUSTOMERS_DDL"]),
                           right_columns=_columns(tables["ACCOUNTS_DDL"]))
    files = [(tuple({**r, "gone": r["op"] == "delete"} for r in rows), clock)
             for rows, clock in channel_files(up, horizon_ms=profiles.join.horizon_ms)]
    assert any(r["op"] == "delete" for rows, _ in files for r in rows)
    down = oracle_stream_table_join(
        enriched.join, join_log(None, files, left_rows=purchases),
        left_columns=["purchase_id", "customer", "bought_ts"],
        right_columns=[*up.output_columns, "gone"])
    key = ["left_purchase_id"]
    want = sorted((o.row for o in down.rows), key=lambda r: _key(r, key))
    got = sorted(rows_of(read_table(tmp_path / "interlace.duckdb", "enriched")),
                 key=lambda r: _key(r, key))
    assert got == want
    # The purchases before the table's watermark (its changelog stops at 10:30) are joined.
    assert sorted(r["left_purchase_id"] for r in want) == [0, 1, 10, 11, 20, 21]
    tiers = {r["left_purchase_id"]: r["right_tier"] for r in want}
    assert tiers[0] == "gold" and tiers[20] is None  # c3 was deleted at 10:09
