"""The crash matrix (issue 13): SIGKILL ``interlace run`` anywhere, restart, lose nothing.

Each case runs a pipeline with :func:`interlace.testing.crash.run_with_kills`: the process
(driver and JVM) is killed at seeded instants, each a crash point
(:data:`interlace.faults.CRASH_POINTS`: after the batch's state is written, after its dead
letters are committed, inside the DuckDB transaction, after its commit and before Spark's
commit log) or a timed kill (inside a micro-batch, during the state commit, between batches),
and restarted from the checkpoint until the sources are exhausted. Its DuckDB tables (output
and dead letters) must equal, row for row, those of an uninterrupted run of the same pipeline
on the same input, and the uninterrupted run equals the oracle (here for the join and the
window; for the table joins the same inputs are checked against their oracles in
``test_stream_table_pipeline.py`` and ``test_table_pipelines.py``).

Pipelines: the join (``how = "full"``, late rows to a dead-letter table), the session window
(``late_data = "reopen"``: revisions and a retraction), the stream-table, table-table and
foreign-key joins, a chain (``examples/paid_sessions.toml``: a join, then session windows
over its output through a channel, SEMANTICS §11) and a table aggregation
(``examples/accounts_per_region.toml``: two queries and a channel, SEMANTICS §10) and a
join whose payments input goes idle (``examples/quiet_payments.toml``: heartbeats, SEMANTICS
§1); on the HDFS-backed and the RocksDB state store.

CI runs seven kills (each crash point once, each must fire) on the join (HDFS), the window
(RocksDB with changelog checkpointing), the foreign-key join (RocksDB), the chain
(RocksDB: after its channel write, between its stages), the table aggregation (HDFS:
inside its first query, after a channel write) and the idle input (RocksDB: while idle).
``INTERLACE_CRASH_MATRIX=full`` runs the full matrix: every pipeline on both stores, ten
seeded kills each (twenty per pipeline), over fresh trials until each kill has found a run to
interrupt; ``INTERLACE_CRASH_REPORT=<file>`` appends each case's trials to that file
(docs/reliability.md).
"""

from __future__ import annotations

import os
import runpy
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from cli_support import rows_of, run_here
from test_cli import (
    JOIN_TOML,
    ORDERS,
    PAYS,
    SESSION_CLICKS,
    WINDOW_TOML,
    at,
    naive_sessions,
    write_join_inputs,
    write_session_clicks,
)

from interlace.faults import CHAIN_POINTS, CRASH_POINTS
from interlace.preflight import preflight
from interlace.runner import run_pipeline
from interlace.testing.crash import (
    Kill,
    append_report,
    fresh_trials,
    run_with_kills,
    seeded_kills,
)
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import DEAD_LETTER_COLUMN, canonical_rows, oracle_join

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FULL = os.environ.get("INTERLACE_CRASH_MATRIX") == "full"
ONE_STAGE = tuple(p for p in CRASH_POINTS if p not in CHAIN_POINTS)
NO_DLQ = tuple(p for p in ONE_STAGE if p != "dead-letters-committed")

# ------------------------------------------------------------------------------------------
# The pipelines: each writes its inputs and its pipeline file into a folder
# ------------------------------------------------------------------------------------------

CRASH_JOIN_TOML = JOIN_TOML.replace('how = "left"', 'how = "full"\nlate_data = "dlq"').replace(
    "[spark]", '[dead_letter]\nkind = "duckdb"\npath = "out/result.duckdb"\n'
    'table = "letters"\n\n[spark]')


def crash_join_log():
    """Eight micro-batches of orders and payments, a late row on each side in two of them."""
    log = []
    for b in range(8):
        left = [{"order_id": b * 10 + i, "amount": float(i), "order_ts": at(b * 60 + i * 5)}
                for i in range(6)]
        right = [{"order_id": b * 10 + i, "paid": float(i), "pay_ts": at(b * 60 + i * 5 + 20)}
                 for i in range(1, 7, 2)]
        if b in (3, 6):  # the watermark is ~b * 60 - 5 s: these are late
            left.append({"order_id": 900 + b, "amount": 9.0, "order_ts": at(b * 60 - 100)})
            right.append({"order_id": 800 + b, "paid": 8.0, "pay_ts": at(b * 60 - 90)})
        log.append(JoinBatch(left=tuple(left), right=tuple(right)))
    log.append(JoinBatch(left=({"order_id": -1, "amount": 0.0, "order_ts": at(5000)},),
                         right=({"order_id": -1, "paid": 0.0, "pay_ts": at(5000)},)))
    return log


def setup_join(folder: Path, spark) -> str:
    write_join_inputs(folder, crash_join_log())
    (folder / "p.toml").write_text(CRASH_JOIN_TOML)
    return "p.toml"


def check_join(tables: dict[str, list[dict]]) -> None:
    from interlace.pipeline import Pipeline

    p = Pipeline.from_toml(CRASH_JOIN_TOML)
    want = oracle_join(p.join, crash_join_log(), left_columns=ORDERS.names,
                       right_columns=PAYS.names)
    rows = [o.row for o in want.rows if o.row.get(DEAD_LETTER_COLUMN) is None]
    rows = [{k: v for k, v in r.items() if k != DEAD_LETTER_COLUMN} for r in rows]
    assert Counter(canonical_rows(tables["joined"])) == Counter(canonical_rows(rows))
    assert len(tables["letters"]) == sum(want.dead_lettered.values()) == 4


SESSION_TOML = WINDOW_TOML.format(fmt="json", extra="", target="duckdb",
                                  target_path="out/w.duckdb").replace(
    'kind = "tumbling"\nduration_ms = 10000', 'kind = "session"\ngap_ms = 5000').replace(
    'path = "out/w.duckdb"', 'path = "out/w.duckdb"\ntable = "sessions"\n'
    'key = ["window_start", "window_end", "user"]')


def setup_window(folder: Path, spark) -> str:
    write_session_clicks(folder)
    (folder / "w.toml").write_text(SESSION_TOML)
    return "w.toml"


def check_window(tables: dict[str, list[dict]]) -> None:
    got = {(r["user"], r["window_start"], r["window_end"]): r["clicks"]
           for r in tables["sessions"]}
    assert got == naive_sessions(SESSION_CLICKS[:-1], 5)


def setup_stream_table(folder: Path, spark) -> str:
    from interlace.demo import (
        CUSTOMERS_DDL,
        ORDERS_DDL,
        _write,
        generate_customer_tiers,
        generate_orders_payments,
    )

    orders, _ = generate_orders_payments(n_batches=4, orders_per_batch=60)
    _write(folder / "data/orders", orders, ORDERS_DDL, spark)
    _write(folder / "data/customers", generate_customer_tiers(n_batches=4), CUSTOMERS_DDL, spark)
    shutil.copy(EXAMPLES / "orders_tiers.toml", folder / "orders_tiers.toml")
    return "orders_tiers.toml"


def setup_tables(example: str):
    def setup(folder: Path, spark) -> str:
        runpy.run_path(str(EXAMPLES / "table_joins_data.py"))["write"](folder)
        shutil.copy(EXAMPLES / example, folder / example)
        return example

    return setup


def setup_chain(folder: Path, spark) -> str:
    """Example 1 of docs/chains.md (a join, then sessions), its target under out/."""
    runpy.run_path(str(EXAMPLES / "chains_data.py"))["write"](folder)
    text = (EXAMPLES / "paid_sessions.toml").read_text()
    (folder / "paid_sessions.toml").write_text(
        text.replace('kind = "duckdb"', 'kind = "duckdb"\npath = "out/chain.duckdb"') + "\n[spark]\n")
    return "paid_sessions.toml"


def check_chain(tables: dict[str, list[dict]]) -> None:
    from test_chain_pipelines import paid_sessions_expected

    from interlace.pipeline import Pipeline

    _, want = paid_sessions_expected(Pipeline.load(EXAMPLES / "paid_sessions.toml"),
                                     _chain_batches())
    assert len(want) >= 8
    assert Counter(canonical_rows(tables["paid_sessions"])) == Counter(canonical_rows(want))


def _chain_batches() -> dict:
    data = runpy.run_path(str(EXAMPLES / "chains_data.py"))
    orders, payments = data["orders_and_payments"]()
    return {"orders": orders, "payments": payments}


def setup_aggregate(folder: Path, spark) -> str:
    """examples/accounts_per_region.toml (a table aggregation: two queries and a channel)."""
    runpy.run_path(str(EXAMPLES / "accounts_per_region_data.py"))["write"](folder)
    text = (EXAMPLES / "accounts_per_region.toml").read_text()
    (folder / "agg.toml").write_text(
        text.replace('kind = "duckdb"', 'kind = "duckdb"\npath = "out/agg.duckdb"') + "\n[spark]\n")
    return "agg.toml"


def check_aggregate(tables: dict[str, list[dict]]) -> None:
    from interlace.pipeline import Pipeline
    from interlace.testing.oracles.table_aggregate import oracle_table_aggregate

    data = runpy.run_path(str(EXAMPLES / "accounts_per_region_data.py"))
    spec = Pipeline.load(EXAMPLES / "accounts_per_region.toml").aggregate
    want = oracle_table_aggregate(spec, data["BATCHES"],
                                  columns=[c.split()[0] for c in data["DDL"].split(", ")])
    final = {g[0]: (r["accounts"], r["total"], r["largest"], r["version"])
             for g, r in want.final(["region"]).items()}
    got = {r["region"]: (r["accounts"], r["total"], r["largest"], r["version"])
           for r in tables["accounts_per_region"]}
    assert got == final and len(got) == 3


def setup_idle(folder: Path, spark) -> str:
    """examples/quiet_payments.toml: the payments input goes idle, heartbeats move W."""
    runpy.run_path(str(EXAMPLES / "quiet_payments_data.py"))["write"](folder)
    shutil.copy(EXAMPLES / "quiet_payments.toml", folder / "quiet_payments.toml")
    return "quiet_payments.toml"


def check_idle(tables: dict[str, list[dict]]) -> None:
    """Paid orders 1-3; unpaid 4-10 (W reaches the last order's 10:05 once payments idle)."""
    rows = tables["orders_payments"]
    assert sorted(r["order_id"] for r in rows if r["payment_id"] is not None) == [1, 2, 3]
    assert sorted(r["order_id"] for r in rows if r["payment_id"] is None) == list(range(4, 11))
    assert not tables.get("late_payments")


def no_check(tables: dict[str, list[dict]]) -> None:
    """The table joins' inputs are checked against their oracles in other modules."""
    assert any(tables.values())


# name: (setup, oracle check, crash points that exist in it, the store CI runs it on)
PIPELINES = {
    "join": (setup_join, check_join, CRASH_POINTS, "hdfs"),
    "window": (setup_window, check_window, NO_DLQ, "rocksdb-changelog"),
    "stream_table": (setup_stream_table, no_check, NO_DLQ, "rocksdb"),
    "table": (setup_tables("customers_accounts.toml"), no_check, NO_DLQ, "hdfs"),
    "foreign_key": (setup_tables("orders_products.toml"), no_check, NO_DLQ, "rocksdb"),
    "chain": (setup_chain, check_chain, (*NO_DLQ, *CHAIN_POINTS), "rocksdb"),
    # The first query's micro-batch in its channel: "channel-written" (as a chain's).
    "aggregate": (setup_aggregate, check_aggregate, (*NO_DLQ, "channel-written"), "hdfs"),
    # An idle input (issue 33): killed while the payments are idle, restarted from there.
    "idle": (setup_idle, check_idle, NO_DLQ, "rocksdb"),
}
# CI: three pipelines on the three stores, each crash point once (every kill costs a JVM start,
# ~20 s; the timed kills and the stream-table and table-table pipelines run in the full matrix).
CI_KILLS = {
    "join": [Kill(point="dead-letters-committed", nth=1), Kill(point="target-committed", nth=2)],
    "window": [Kill(point="target-uncommitted", nth=2)],
    "foreign_key": [Kill(point="batch", nth=2)],
    # Right after the join's output reached the channel, and between the two stages (the
    # target's transaction is killed in the window's case above).
    "chain": [Kill(point="channel-written", nth=3), Kill(point="stage-started", nth=2)],
    # Inside the table aggregation's first query, after its third micro-batch's channel file.
    "aggregate": [Kill(point="channel-written", nth=3)],
    # After the fifth micro-batch's commit (two visits a batch): payments idle by then.
    "idle": [Kill(point="target-committed", nth=11)],
}
STORES = {"hdfs": (None, ".delta"), "rocksdb": ("", ".zip"),
          "rocksdb-changelog": ("\nchangelog_checkpointing = true", ".changelog")}
# Timed kills are drawn from 0 to this many seconds after a run's first progress line (default
# 6): a fresh run of the table-table and foreign-key pipelines finishes its input about 5 s
# after it, the window's about 4 s, so a kill drawn later could never fire (never fired: with
# 6 s +5.05, +5.23, +5.69 (tables), +5.97, +5.56 (window); with 4.5 s +4.48, +4.17 (window)).
KILL_SECONDS = {"window": 3.0, "table": 4.5, "foreign_key": 4.5,
                # The chain's two stages run one after the other, its second one from about
                # 8 s after the first progress line: later kills reach it.
                "chain": 15.0,
                # Its first query runs alone first; the second starts some 6 s later.
                "aggregate": 10.0,
                # Six micro-batches of orders, then a second run for the heartbeats.
                "idle": 6.0}
CASES = [(name, store) for name, (*_, ci_store) in PIPELINES.items()
         for store in (("hdfs", "rocksdb") if FULL else (ci_store,)) if FULL or name in CI_KILLS]


def with_store(folder: Path, pipeline: str, store: str) -> None:
    """Put the pipeline on ``store`` (its ``[spark]`` table chooses the provider)."""
    path = folder / pipeline
    extra = STORES[store][0]
    if extra is not None:
        text = path.read_text()
        assert "[spark]" in text
        path.write_text(text.replace("[spark]", f'[spark]\nstate_store = "rocksdb"{extra}', 1))


def duckdb_tables(folder: Path) -> dict[str, list[dict]]:
    """Every user table of every DuckDB file under ``out/`` (interlace's own tables left out)."""
    out: dict[str, list[dict]] = {}
    for db in sorted((folder / "out").glob("*.duckdb")):
        con = duckdb.connect(str(db), read_only=True)
        try:
            names = [r[0] for r in con.execute("SHOW TABLES").fetchall()]
            for name in names:
                if name == "_interlace_commits":
                    batches = con.execute("SELECT tbl, batch_id, count(*) FROM "
                                          "_interlace_commits GROUP BY ALL HAVING count(*) > 1"
                                          ).fetchall()
                    assert not batches, f"batches committed twice: {batches}"
                    continue
                out[name] = rows_of(con.execute(f'SELECT * FROM "{name}"').fetchdf())
        finally:
            con.close()
    return out


_REFERENCE: dict[str, dict[str, list[dict]]] = {}


def reference(name: str, tmp_path_factory, spark) -> dict[str, list[dict]]:
    """The tables of an uninterrupted run (once per pipeline), checked against the oracle.

    Run in-process on the test session (``run_pipeline``, as ``interlace run`` does, on the
    default state store; the provider does not change the output)."""
    if name not in _REFERENCE:
        setup, check, *_ = PIPELINES[name]
        folder = tmp_path_factory.mktemp(f"reference-{name}")
        pipeline = setup(folder, spark)
        summary = run_pipeline(preflight(folder / pipeline, base=folder), base=folder,
                               spark=spark, progress=None)  # in-process: no JVM to start
        assert summary.batches > 1
        tables = duckdb_tables(folder)
        check(tables)
        _REFERENCE[name] = tables
    return _REFERENCE[name]


def killed_trial(name: str, store: str, folder: Path, kills: list[Kill], spark,
                 want: dict[str, list[dict]], *, fresh_trials: bool):
    """One trial: the pipeline in a fresh ``folder``, killed and restarted per ``kills`` (the
    last run continues the checkpoint in this process, on the test session: no JVM to start),
    its tables then equal ``want``, the uninterrupted run's. With ``fresh_trials`` the kills
    stop once a run finishes the sources (the report's ``unused`` kills are for a fresh
    trial)."""
    setup, check, *_ = PIPELINES[name]
    pipeline = setup(folder, spark)
    with_store(folder, pipeline, store)
    report = run_with_kills(pipeline, folder, kills, stop_when_finished=fresh_trials,
                            finish=lambda: run_here(spark, folder, pipeline))
    got = duckdb_tables(folder)
    assert set(got) == set(want)
    for table in want:
        lost = Counter(canonical_rows(want[table])) - Counter(canonical_rows(got[table]))
        extra = Counter(canonical_rows(got[table])) - Counter(canonical_rows(want[table]))
        assert not lost and not extra, (table, "lost", lost, "duplicated or wrong", extra,
                                        report.summary())
    check(got)
    suffix = STORES[store][1]
    ckpt = next(p.parent for p in folder.rglob("offsets") if (p.parent / "state").is_dir())
    assert any(p.name.endswith(suffix) for p in (ckpt / "state").rglob("*")), store
    return report


@pytest.mark.parametrize(("name", "store"), CASES)
def test_killed_and_restarted_run_equals_the_uninterrupted_run(name, store, tmp_path,
                                                               tmp_path_factory, spark):
    _, _, points, _ = PIPELINES[name]
    want = reference(name, tmp_path_factory, spark)
    seed = sum(map(ord, f"{name}/{store}"))
    if not FULL:  # CI: one trial, every kill chosen to fire
        report = killed_trial(name, store, tmp_path, CI_KILLS[name], spark, want,
                              fresh_trials=False)
        print(f"\n{name} on {store}:\n{report.summary()}")
        assert report.kills == len(CI_KILLS[name]), report.summary()
        return
    # The full matrix: ten seeded kills, over as many fresh trials as it takes for each kill
    # to find a run to interrupt (interlace.testing.crash.fresh_trials: a kill that does not
    # fire even first in a fresh trial is reported, and an earlier one takes its place).
    kills = seeded_kills(seed, 10, points=points, max_seconds=KILL_SECONDS.get(name, 6.0))

    def trial(i: int, remaining: list[Kill]):
        folder = tmp_path / f"trial{i}"
        folder.mkdir()
        return killed_trial(name, store, folder, remaining, spark, want, fresh_trials=True)

    trials = fresh_trials(kills, trial)
    print(f"\n{name} on {store} (seed {seed}): {trials.fired} kills fired, never: "
          f"{[str(k) for k in trials.never]}\n{trials.summary()}")
    append_report(os.environ.get("INTERLACE_CRASH_REPORT"),
                  trials.record(pipeline=name, store=store, seed=seed))
    assert trials.fired == len(kills), trials.summary()
