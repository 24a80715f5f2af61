"""Every output kind into Delta on real Spark, equal to the DuckDB target's table each batch.

Each pipeline runs once (``interlace run``'s runner, on the test session) with its
``[target]`` on Delta; the Delta target is wrapped so that every micro-batch is also applied
to a DuckDB target built from the same settings, and after each batch the Delta table (read
back with delta-rs) must hold the DuckDB table's rows. Then the final table is checked
against what the pipeline must compute: a left join (append output) against the oracle, a
tumbling window under ``reopen`` (revisions replace their window's row), session windows
under ``reopen`` (a session grows, two merge), seed 003's KTable-KTable table (inner, left,
full: the seed's last row), a foreign-key join and a table aggregation (changelogs applied by
MERGE). The example pipeline (``examples/customers_accounts_delta.toml``) runs as its
comment says, and its table reads back the same through polars and DuckDB.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import run_here
from delta_support import assert_one_commit_per_batch, delta_rows, to_delta
from test_cli import JOIN_TOML, WINDOW_TOML, at, expected_join, write_clicks, write_join_inputs
from test_crash_matrix import (
    check_aggregate,
    check_window,
    crash_join_log,
    setup_aggregate,
    setup_tables,
    setup_window,
)

import interlace.connectors.delta as delta_connector
import interlace.testing.seed003_tables as seed
from interlace.connectors import duckdb as duckdb_connector
from interlace.pipeline import Target
from interlace.testing.oracle import canonical_rows

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Tee:
    """A Delta target that also applies each batch to a DuckDB target and compares them."""

    def __init__(self, spec, ctx, db: Path):
        self.delta = ORIGINAL(spec, ctx)
        self.duck = duckdb_connector.target(
            Target(kind="duckdb", path=str(db), table="t", key=spec.key), ctx)
        self.db, self.compared = db, []

    def prepare(self, schema):
        self.delta.prepare(schema)
        self.duck.prepare(schema)

    def write(self, pdf, batch_id):
        n = self.delta.write(pdf.copy(), batch_id)
        assert self.duck.write(pdf.copy(), batch_id) == n
        con = duckdb.connect(str(self.db), read_only=True)
        try:
            duck = con.execute('SELECT * FROM "t"').fetchdf()
        finally:
            con.close()
        got = delta_rows(Path(self.delta.path))
        assert Counter(canonical_rows(got)) == Counter(canonical_rows(
            duck.to_dict("records"))), f"batch {batch_id}"
        self.compared.append((batch_id, len(got)))
        return n


ORIGINAL = delta_connector.target


@pytest.fixture
def tee(monkeypatch, tmp_path):
    made: list[Tee] = []

    def target(spec, ctx):
        made.append(Tee(spec, ctx, tmp_path / f"tee{len(made)}.duckdb"))
        return made[-1]

    monkeypatch.setattr(delta_connector, "target", target)
    return made


def write(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text)
    return name


def test_a_left_join_appends_each_batch_once(spark, tmp_path, tee):
    log = crash_join_log()
    write_join_inputs(tmp_path, log)
    run_here(spark, tmp_path, write(tmp_path, "p.toml", to_delta(JOIN_TOML, "out/joined")))
    (t,) = tee
    assert len(t.compared) >= 5
    got = delta_rows(tmp_path / "out/joined")
    assert Counter(canonical_rows(got)) == expected_join(log, JOIN_TOML)
    assert any(r[c] is None for r in got for c in r if c.endswith("paid"))  # unmatched orders
    batches = assert_one_commit_per_batch(tmp_path / "out/joined", "interlace.orders-payments")
    assert batches == [b for b, _ in t.compared if b in batches]


def test_tumbling_reopen_revisions_replace_their_windows_row(spark, tmp_path, tee):
    write_clicks(tmp_path, "json")
    text = WINDOW_TOML.format(fmt="json", extra='options = { maxFilesPerTrigger = "1" }',
                              target="duckdb", target_path="out/w.duckdb")
    run_here(spark, tmp_path, write(tmp_path, "w.toml", to_delta(text, "out/clicks")))
    got = {(r["user"], r["window_start"]): (r["clicks"], r["revision"])
           for r in delta_rows(tmp_path / "out/clicks")}
    # a@4 arrives late (wm 24 s) within the allowance: [0, 10) of a is re-emitted, 3 clicks.
    assert got[("a", at(0))] == (3, 1)
    assert got[("b", at(10))] == (1, 0) and len(got) == len(set(got))
    assert len(tee[0].compared) >= 3


def test_session_reopen_a_session_grows_and_two_merge(spark, tmp_path, tee):
    pipeline = setup_window(tmp_path, spark)
    path = tmp_path / pipeline
    path.write_text(to_delta(path.read_text(), "out/sessions"))
    run_here(spark, tmp_path, pipeline)
    check_window({"sessions": delta_rows(tmp_path / "out/sessions")})


def _seed_files(folder: Path) -> None:
    for side in ("left", "right"):
        rows = [{"key": seed.KEY, "v": v, "ts": seed.at(ts)}
                for ts, s, v, *_ in seed.TABLE_TABLE if s == side]
        (folder / "in" / side).mkdir(parents=True)
        schema = pa.schema([("key", pa.string()), ("v", pa.string()),
                            ("ts", pa.timestamp("us", tz="UTC"))])
        pq.write_table(pa.Table.from_pylist(rows, schema), folder / "in" / side / "0.parquet")


@pytest.mark.parametrize("how", ["inner", "left", "full"])
def test_seed003_ktable_ktable_lands_as_the_seeds_last_row(spark, tmp_path, tee, how):
    """All of the seed's changes of the one key in one batch: reduced to the newest."""
    _seed_files(tmp_path)
    source = ('[[sources]]\nname = "{0}"\nformat = "parquet"\npath = "in/{0}"\n'
              'schema = "key STRING, v STRING, ts TIMESTAMP"\nevent_time_column = "ts"\n\n')
    text = (f'name = "seed003-{how}"\n\n' + source.format("left") + source.format("right")
            + '[transform.join]\nkind = "table"\nleft_source = "left"\nright_source = "right"\n'
              'left_keys = ["key"]\nright_keys = ["key"]\n'
              f'how = "{how}"\nemit = "eager"\nlateness_ms = 0\nkey_groups = 2\n\n'
              '[target]\nkind = "delta"\npath = "out/joined"\n\n'
              '[spark]\ncheckpoint = "out/checkpoint"\nshuffle_partitions = 2\n')
    run_here(spark, tmp_path, write(tmp_path, "p.toml", text))
    got = delta_rows(tmp_path / "out/joined")
    assert [(r["key"], r["left_v"], r["right_v"]) for r in got] == [(seed.KEY, "D", "d")]
    want_changes = [c for e in seed.TABLE_TABLE if (c := e[{"inner": 3, "left": 4,
                                                            "full": 5}[how]]) is not None]
    assert got[0]["version"] == len(want_changes) - 1
    assert tee[0].compared


def test_a_foreign_key_join_changelog_converges(spark, tmp_path, tee):
    pipeline = setup_tables("orders_products.toml")(tmp_path, spark)
    path = tmp_path / pipeline
    path.write_text(to_delta(path.read_text(), "out/orders_products"))
    run_here(spark, tmp_path, pipeline)
    got = {r["order_id"]: r for r in delta_rows(tmp_path / "out/orders_products")}
    assert got and len(tee[0].compared) >= 3
    assert all("op" not in r for r in got.values())


@pytest.mark.compat
def test_a_table_aggregation_converges_deletes_included(spark, tmp_path, tee):
    pipeline = setup_aggregate(tmp_path, spark)
    path = tmp_path / pipeline
    path.write_text(to_delta(path.read_text(), "out/accounts_per_region"))
    run_here(spark, tmp_path, pipeline)
    check_aggregate({"accounts_per_region": delta_rows(tmp_path / "out/accounts_per_region")})
    assert len(tee[0].compared) >= 3
    assert_one_commit_per_batch(tmp_path / "out/accounts_per_region",
                                "interlace.accounts-per-region")
    # A rerun reads nothing new and commits nothing.
    before = len(list((tmp_path / "out/accounts_per_region/_delta_log").glob("*.json")))
    run_here(spark, tmp_path, pipeline)
    assert len(list((tmp_path / "out/accounts_per_region/_delta_log").glob("*.json"))) == before
    # The checkpoint lost: a new one would start at batch 0, which the table holds: refused.
    shutil.rmtree(tmp_path / ".interlace" / "checkpoints")
    with pytest.raises(ValueError, match="the query's checkpoint is new"):
        run_here(spark, tmp_path, pipeline)


def test_the_example_runs_as_written_and_reads_back_through_polars_and_duckdb(tmp_path):
    """``examples/customers_accounts_delta.toml`` on the bundled data, through the CLI."""
    from cli_support import cli

    shutil.copy(EXAMPLES / "customers_accounts_delta.toml", tmp_path)
    shutil.copy(EXAMPLES / "table_joins_data.py", tmp_path)
    import runpy

    runpy.run_path(str(tmp_path / "table_joins_data.py"))["write"](tmp_path)
    proc = cli("run", "customers_accounts_delta.toml", cwd=tmp_path)
    assert "done" in proc.stdout + proc.stderr
    path = tmp_path / "out" / "customers_accounts"
    want = sorted(json.dumps(r, default=str, sort_keys=True) for r in delta_rows(path))
    by_polars = pl.read_delta(str(path)).to_pandas()
    for c in ("event_time",):
        by_polars[c] = by_polars[c].dt.tz_convert("UTC").dt.tz_localize(None)
    from cli_support import rows_of

    assert sorted(json.dumps(r, default=str, sort_keys=True) for r in rows_of(by_polars)) == want
    from deltalake import DeltaTable

    ds = DeltaTable(str(path)).to_pyarrow_dataset()  # noqa: F841 (DuckDB scans it)
    assert duckdb.sql("SELECT count(*) FROM ds").fetchall() == [(len(want),)]
    assert {r["customer"] for r in delta_rows(path)} == {"c1", "c2", "c4"}
