"""The crash matrix into Delta: SIGKILL ``interlace run`` of a pipeline writing a Delta table.

Two pipelines of ``tests/cli/test_crash_matrix.py`` with their ``[target]`` on Delta: the full
outer join of orders and payments (append output; its late rows to DuckDB dead letters) and
the table aggregation of ``examples/accounts_per_region.toml`` (a changelog by region,
applied by MERGE). Each is run once uninterrupted into Delta, which must equal the same
pipeline's DuckDB tables (the reference of the DuckDB crash matrix, checked against the
oracle); then again in a fresh folder with ``interlace run`` killed (SIGKILL of the driver and
its JVM) at crash points (:data:`interlace.faults.CRASH_POINTS`: after the batch's state is
written, before the Delta commit, after it and before Spark's commit log) and at timed
instants, restarted from the checkpoint after each kill. The final table equals the clean
run's, row for row, and its log shows one commit per micro-batch: each commit after the
table's creation carries one application transaction ``interlace.<pipeline>``, the batch ids
strictly increasing (a replayed batch was skipped, never committed again).

CI kills each pipeline five times on one state store each (ten instants), each kill chosen to
fire. ``INTERLACE_CRASH_MATRIX=full`` runs both on both stores with ten seeded kills each,
over fresh trials until every kill has found a run to interrupt
(:func:`interlace.testing.crash.fresh_trials`); ``INTERLACE_CRASH_REPORT=<file>`` appends each
case's trials (docs/delta.md, docs/reliability.md).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from cli_support import run_here
from delta_support import assert_one_commit_per_batch, tables, to_delta
from test_crash_matrix import (
    check_aggregate,
    check_join,
    reference,
    setup_aggregate,
    setup_join,
    with_store,
)

from interlace.testing.crash import Kill, append_report, fresh_trials, run_with_kills, seeded_kills
from interlace.testing.oracle import canonical_rows

pytestmark = pytest.mark.spark

FULL = os.environ.get("INTERLACE_CRASH_MATRIX") == "full"
POINTS = ("batch", "target-uncommitted", "target-committed")

# name: (setup, check, the Delta table's name, the pipeline's name, CI store, CI kills)
PIPELINES = {
    "join": (setup_join, check_join, "joined", "orders-payments", "hdfs",
             [Kill(point="batch", nth=2), Kill(point="target-uncommitted", nth=1),
              Kill(seconds=1.5), Kill(point="target-committed", nth=2),
              Kill(point="target-uncommitted", nth=1)]),
    "aggregate": (setup_aggregate, check_aggregate, "accounts_per_region",
                  "accounts-per-region", "rocksdb",
                  [Kill(point="target-uncommitted", nth=1), Kill(point="batch", nth=2),
                   Kill(point="target-committed", nth=1), Kill(seconds=1.0),
                   Kill(point="target-committed", nth=2)]),
}
CASES = [(name, store) for name, (*_, ci_store, _kills) in PIPELINES.items()
         for store in (("hdfs", "rocksdb") if FULL else (ci_store,))]


def setup(name: str, folder: Path, spark) -> str:
    """The pipeline of the DuckDB crash matrix, its target a Delta table under ``out/``."""
    make, _, table, *_ = PIPELINES[name]
    pipeline = make(folder, spark)
    path = folder / pipeline
    path.write_text(to_delta(path.read_text(), f"out/{table}"))
    return pipeline


def same(got: dict[str, list[dict]], want: dict[str, list[dict]], report: str = "") -> None:
    assert set(got) == set(want), (sorted(got), sorted(want))
    for table in want:
        g, w = Counter(canonical_rows(got[table])), Counter(canonical_rows(want[table]))
        assert g == w, (table, "lost", w - g, "twice or wrong", g - w, report)


def killed_trial(name, store, folder, kills, spark, want, *, stop_when_finished):
    """One trial in a fresh ``folder``: killed and restarted per ``kills`` (the finishing run
    in this process), then its tables against ``want`` and the table's log checked."""
    _, check, table, pipeline_name, *_ = PIPELINES[name]
    folder.mkdir()
    pipeline = setup(name, folder, spark)
    with_store(folder, pipeline, store)
    report = run_with_kills(pipeline, folder, kills, stop_when_finished=stop_when_finished,
                            finish=lambda: run_here(spark, folder, pipeline))
    got = tables(folder)
    same(got, want, report.summary())
    check(got)
    assert_one_commit_per_batch(folder / "out" / table, f"interlace.{pipeline_name}")
    return report


@pytest.mark.parametrize(("name", "store"), CASES)
def test_killed_pipeline_into_delta_equals_the_clean_run_one_commit_per_batch(
        name, store, tmp_path, tmp_path_factory, spark):
    _, check, table, pipeline_name, _, ci_kills = PIPELINES[name]
    clean = tmp_path / "clean"
    clean.mkdir()
    pipeline = setup(name, clean, spark)
    run_here(spark, clean, pipeline)
    want = tables(clean)
    check(want)
    duck = reference(name, tmp_path_factory, spark)  # Delta holds what DuckDB holds
    same(want, {t: rows for t, rows in duck.items() if not t.startswith("_interlace_deleted_")})
    assert len(assert_one_commit_per_batch(clean / "out" / table,
                                           f"interlace.{pipeline_name}")) > 3
    if not FULL:  # CI: one trial, every kill chosen to fire
        report = killed_trial(name, store, tmp_path / "killed", ci_kills, spark, want,
                              stop_when_finished=False)
        print(f"\ndelta {name} on {store}:\n{report.summary()}")
        assert report.kills == len(ci_kills), report.summary()
        return
    seed = sum(map(ord, f"delta/{name}/{store}"))
    kills = seeded_kills(seed, 10, points=POINTS, max_seconds=5.0)

    def trial(i, remaining):
        return killed_trial(name, store, tmp_path / f"trial{i}", remaining, spark, want,
                            stop_when_finished=True)

    trials = fresh_trials(kills, trial)
    print(f"\ndelta {name} on {store} (seed {seed}): {trials.fired} kills fired, never: "
          f"{[str(k) for k in trials.never]}\n{trials.summary()}")
    append_report(os.environ.get("INTERLACE_CRASH_REPORT"),
                  trials.record(suite="delta", pipeline=name, store=store, seed=seed))
    assert trials.fired == len(kills), trials.summary()
