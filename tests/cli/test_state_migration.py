"""A checkpoint written by the previous release continues (issue 13, state evolution).

``golden/join_v1_checkpoint/`` holds what ``interlace run`` left after the first two of four
input files of a full outer join with a dead-letter table, run by the release that wrote
state blobs of format version 1 (its ``make_fixture.py`` says which and how). Its state holds
rows of files 0 and 1 still waiting for a match: orders 4, 5 and 11, payments 2 and 10.

The test copies the checkpoint and the DuckDB file into a fresh folder, puts only files 2 and 3
in the input folders (Spark's file source remembers the files it read by absolute path, so
the first run's files would be read again), and continues it as ``interlace run`` does (in this
process, ``cli_support.run_here``): the current release migrates each key group's blob from
version 1 when it first reads it.

What the final DuckDB tables must equal, and why it is exact:

* **The oracle** (``interlace.testing.oracle.oracle_join``) over files 0, 1, then an empty
  micro-batch, then files 2 and 3, batch for batch (``_interlace_commits`` keeps each batch's
  row count). The empty batch is the no-data batch the first run ended with (its watermark had
  advanced); Spark restores that watermark on restart, so the continuation's batches 3 to 5
  see what the oracle's do (Spark restores the combined watermark, not each input's maximum
  event time; here each input's later files go past its earlier maximum, so that is moot). Without the empty batch the oracle gives the same rows (only their
  batch ids move), which the test checks too.
* **A run from scratch of the current release over the same split** (two runs, files 0-1 then
  2-3): the same rows, dead letters (their JSON parsed) and per-batch commits.

That the old state mattered: the continuation's output joins orders of files 0-1 with
payments of files 2-3 (and the reverse), and emits order 11 of file 1 null-padded at its
eviction. That it was migrated: Spark's state reader shows version-1 blobs in the fixture and
only version-2 blobs (without ``__il_tus``) after the continuation.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import msgpack
import pytest
from cli_support import rows_of, run_here

from interlace.state.blob import from_state_value
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import DEAD_LETTER_COLUMN, canonical_rows, oracle_join

pytestmark = pytest.mark.spark

FIXTURE = Path(__file__).parent / "golden" / "join_v1_checkpoint"
_spec = importlib.util.spec_from_file_location("make_fixture", FIXTURE / "make_fixture.py")
assert _spec and _spec.loader
make_fixture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixture)

COLUMNS = {"left_columns": ["order_id", "item", "order_ts"],
           "right_columns": ["order_id", "paid", "pay_ts"]}


def tables(folder: Path) -> dict[str, list[dict]]:
    """The target's rows, the dead letters (parsed) and the row count of each committed batch."""
    con = duckdb.connect(str(folder / "out/result.duckdb"), read_only=True)
    try:
        joined = rows_of(con.execute("SELECT * FROM joined").fetchdf())
        letters = [json.loads(r[0])
                   for r in con.execute("SELECT dead_letter FROM letters").fetchall()]
        commits = con.execute("SELECT tbl, batch_id, rows FROM _interlace_commits "
                              "ORDER BY tbl, batch_id").fetchall()
    finally:
        con.close()
    return {"joined": joined, "letters": letters, "commits": commits}


def state_values(spark, folder: Path) -> list:
    """The state row values of the checkpoint's last batch (Spark's state reader)."""
    rows = spark.read.format("statestore").load(str(folder / "out/checkpoint")).collect()
    return [r.value.groupState.blob for r in rows]


def envelopes(spark, folder: Path) -> list[dict]:
    """The state blob envelopes of the checkpoint's last batch, whichever encoding holds them."""
    return [msgpack.unpackb(from_state_value(v), raw=False) for v in state_values(spark, folder)]


def oracle(log):
    from interlace.pipeline import Pipeline

    return oracle_join(Pipeline.from_toml(make_fixture.PIPELINE).join, log, **COLUMNS)


def log_of(files) -> list[JoinBatch]:
    return [JoinBatch(left=tuple(o), right=tuple(p)) for o, p in files]


def normal_rows(want):
    return [{k: v for k, v in o.row.items() if k != DEAD_LETTER_COLUMN} for o in want.rows
            if o.row[DEAD_LETTER_COLUMN] is None]


def test_a_v1_checkpoint_continues_and_equals_the_oracle_and_a_run_from_scratch(
        tmp_path, spark):
    first = make_fixture.FIRST_RUN
    cont = tmp_path / "continued"
    cont.mkdir()
    make_fixture.unpack(FIXTURE, cont)
    shutil.copytree(FIXTURE / "later", cont / "in")
    make_fixture.set_mtimes(cont / "in")
    before = tables(cont)
    assert [(t, b) for t, b, _ in before["commits"]] == [
        (t, b) for t in ("joined", "letters") for b in range(3)]
    # The previous release's state: one key group holding orders 4, 5, 11, payments 2, 10.
    assert [e["v"] for e in envelopes(spark, cont)] == [1]
    # ... in a binary blob column (spark.interlace.state.encoding = binary).
    assert {type(v) for v in state_values(spark, cont)} == {bytes}
    progress = run_here(spark, cont, "p.toml")
    assert "batch 3: in " in progress and "batch 0: in " not in progress, progress
    got = tables(cont)
    # What is left (orders 99, payments 98, never evicted) was written in the current format,
    # without __il_tus: each side's time comes from its event-time column.
    after = envelopes(spark, cont)
    assert after and {e["v"] for e in after} == {3}
    assert {(e["body"]["times"]["left"], e["body"]["times"]["right"]) for e in after} == {
        ("__il_l2", "__il_r2")}
    # The run kept the checkpoint's binary blob column (Spark refuses another state schema).
    assert {type(v) for v in state_values(spark, cont)} == {bytes}

    # (a) The oracle over the whole input, with the first run's no-data batch.
    files = make_fixture.FILES
    want = oracle(log_of(files[:first]) + [JoinBatch(left=(), right=())]
                  + log_of(files[first:]))
    assert Counter(canonical_rows(got["joined"])) == Counter(canonical_rows(normal_rows(want)))
    assert sorted(map(json.dumps, got["letters"])) == sorted(
        json.dumps(json.loads(o.row[DEAD_LETTER_COLUMN])) for o in want.rows
        if o.row[DEAD_LETTER_COLUMN] is not None)
    for table, is_letter in (("joined", False), ("letters", True)):
        per_batch = [(b, sum(1 for o in want.rows if o.batch == b
                             and (o.row[DEAD_LETTER_COLUMN] is not None) == is_letter))
                     for b in range(want.num_batches)]
        assert [(b, n) for tbl, b, n in got["commits"] if tbl == table] == per_batch, table
    plain = oracle(log_of(files))
    assert Counter(canonical_rows(normal_rows(plain))) == Counter(
        canonical_rows(normal_rows(want)))

    # The first run's state mattered: rows of both runs met, and a buffered order was evicted.
    new = Counter(canonical_rows(got["joined"])) - Counter(canonical_rows(before["joined"]))
    pairs = {(r.get("left_order_id"), r.get("right_order_id"))
             for r in (dict(c) for c in new.elements())}
    assert {(4, 4), (5, 5), (10, 10), (11, None)} <= pairs, pairs
    assert len(got["letters"]) == 1 and got["letters"][0]["row"]["order_id"] == 7

    # (b) The current release from scratch over the same split: the same tables.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    shutil.copy(FIXTURE / "p.toml", scratch / "p.toml")
    for files_run in ("in", "later"):  # the fixture's own files, in the same two runs
        shutil.copytree(FIXTURE / files_run, scratch / "in", dirs_exist_ok=True)
        make_fixture.set_mtimes(scratch / "in")
        run_here(spark, scratch, "p.toml")
    fresh = tables(scratch)
    # A new checkpoint holds each blob as base64 text (the default state encoding).
    texts = state_values(spark, scratch)
    assert texts and {type(v) for v in texts} == {str}
    assert {e["v"] for e in envelopes(spark, scratch)} == {3}
    assert fresh["commits"] == got["commits"]
    assert Counter(canonical_rows(fresh["joined"])) == Counter(canonical_rows(got["joined"]))
    assert sorted(map(json.dumps, fresh["letters"])) == sorted(map(json.dumps, got["letters"]))


def test_the_python_api_continues_an_old_checkpoint_with_the_binary_setting_only(
        tmp_path, spark):
    """Without ``interlace run``'s detection, the state encoding is the session's setting:
    the default (base64 text) is refused by Spark on the fixture's binary state column,
    naming both types; ``spark.interlace.state.encoding = binary`` continues it."""
    from interlace.operators.common.shim import STATE_ENCODING_CONF
    from interlace.preflight import preflight
    from interlace.runner import build_query_input

    folder = tmp_path / "api"
    folder.mkdir()
    make_fixture.unpack(FIXTURE, folder)
    shutil.copytree(FIXTURE / "later", folder / "in")
    make_fixture.set_mtimes(folder / "in")
    pipeline = preflight(folder / "p.toml", base=folder)
    batches: list[int] = []

    def continue_with_the_api() -> None:
        out = build_query_input(spark, pipeline, base=folder)
        query = (out.writeStream.foreachBatch(lambda df, b: batches.append(b) or df.collect())
                 .option("checkpointLocation", str(pipeline.checkpoint_folder(folder)))
                 .trigger(availableNow=True).start())
        query.awaitTermination()

    assert spark.conf.get(STATE_ENCODING_CONF, None) is None
    with pytest.raises(Exception, match=r"(?s)STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE.*"
                                        r"blob,BinaryType.*blob,StringType"):
        continue_with_the_api()
    assert batches == []
    spark.conf.set(STATE_ENCODING_CONF, "binary")
    try:
        continue_with_the_api()
    finally:
        spark.conf.unset(STATE_ENCODING_CONF)
    assert batches and min(batches) == 3
    assert {type(v) for v in state_values(spark, folder)} == {bytes}
    assert {e["v"] for e in envelopes(spark, folder)} == {3}
