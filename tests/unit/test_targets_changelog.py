"""The DuckDB target applying changelog output (SEMANTICS §9) by key, exactly once; no Spark.

A changelog row is ``(key..., values..., op, event_time, version)``; the target keeps, per
key, the newest version: an ``upsert`` row, or nothing after a ``delete`` (remembered in
``_interlace_deleted_TABLE`` so an older upsert arriving later does not resurrect the key).
"""

from __future__ import annotations

import datetime as dt
import random
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from interlace.connectors import make_target
from interlace.connectors.duckdb import DuckDBTarget

SCHEMA = T.StructType([
    T.StructField("id", T.StringType()),
    T.StructField("region", T.LongType()),
    T.StructField("left_v", T.StringType()),
    T.StructField("right_v", T.LongType()),
    T.StructField("op", T.StringType()),
    T.StructField("event_time", T.TimestampType()),
    T.StructField("version", T.LongType()),
])
KEY = ("id", "region")
T0 = dt.datetime(2026, 1, 1)


def change(op, key, version, left=None, right=None):
    """One changelog row; a delete's value columns are NULL (SEMANTICS §9)."""
    ident, region = key
    if op == "delete":
        left = right = None
    return {"id": ident, "region": region, "left_v": left, "right_v": right, "op": op,
            "event_time": T0 + dt.timedelta(seconds=version), "version": version}


def frame(rows):
    """As ``toPandas`` hands a batch over: a BIGINT column with a NULL arrives as float64."""
    df = pd.DataFrame(rows, columns=SCHEMA.names)
    df["right_v"] = df["right_v"].astype("float64")
    return df


def target(db: Path) -> DuckDBTarget:
    t = DuckDBTarget(db, "joined", "p", KEY, changelog=True)
    t.prepare(SCHEMA)
    return t


def table(db: Path, name: str = "joined") -> dict[tuple, tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(f'SELECT * FROM "{name}"').fetchall()
        cols = [d[0] for d in con.description]
    finally:
        con.close()
    n = len(KEY)
    if name == "joined":
        assert cols == ["id", "region", "left_v", "right_v", "event_time", "version"]  # no op
    return {tuple(r[:n]): tuple(r[n:]) for r in rows}


def live(left, right, version):
    """What the table holds for a key whose newest change is this upsert."""
    return (left, right, T0 + dt.timedelta(seconds=version), version)


def test_upserts_and_deletes_apply_by_key_the_highest_version_winning(tmp_path):
    db = tmp_path / "t.duckdb"
    t = target(db)
    a, b, c = ("a", 1), ("b", 1), ("a", 2)  # ("a", 1) and ("a", 2) differ in one key column
    assert t.write(frame([change("upsert", a, 0, "A", 1), change("upsert", b, 0, "B", None),
                          change("upsert", c, 0, "C", 3)]), 0) == 3
    assert table(db) == {a: live("A", 1, 0), b: live("B", None, 0), c: live("C", 3, 0)}
    # In one batch: a changes twice (the newest, version 2, wins whatever the row order),
    # b is deleted, c gets a stale upsert (version 0 again: ignored).
    t.write(frame([change("upsert", a, 2, "A2", 20), change("upsert", a, 1, "A1", 10),
                   change("delete", b, 1), change("upsert", c, 0, "stale", 0)]), 1)
    assert table(db) == {a: live("A2", 20, 2), c: live("C", 3, 0)}
    assert table(db, "_interlace_deleted_joined") == {b: (1,)}
    # A lower version than the stored one is ignored, live or deleted: no resurrection.
    t.write(frame([change("upsert", a, 1, "old", 0), change("upsert", b, 0, "B-old", 0),
                   change("delete", c, 5)]), 2)
    assert table(db) == {a: live("A2", 20, 2)}
    assert table(db, "_interlace_deleted_joined") == {b: (1,), c: (5,)}
    # A newer upsert brings a deleted key back and clears its remembered delete.
    t.write(frame([change("upsert", b, 2, "B2", 7)]), 3)
    assert table(db) == {a: live("A2", 20, 2), b: live("B2", 7, 2)}
    assert table(db, "_interlace_deleted_joined") == {c: (5,)}


def test_a_delete_of_an_absent_key_removes_nothing_and_is_remembered(tmp_path):
    db = tmp_path / "t.duckdb"
    t = target(db)
    t.write(frame([change("upsert", ("x", 1), 0, "X", 1)]), 0)
    # Seed 003's foreign-key join may send a redundant delete for a key already absent.
    assert t.write(frame([change("delete", ("ghost", 1), 3)]), 1) == 1
    assert table(db) == {("x", 1): live("X", 1, 0)}
    t.write(frame([change("upsert", ("ghost", 1), 2, "late", 0)]), 2)  # older than the delete
    assert ("ghost", 1) not in table(db)
    assert table(db, "_interlace_deleted_joined") == {("ghost", 1): (3,)}


def test_a_replayed_batch_id_is_skipped_not_applied_twice(tmp_path):
    db = tmp_path / "t.duckdb"
    t = target(db)
    t.write(frame([change("upsert", ("k", 1), 0, "v0", 0)]), 0)
    t.write(frame([change("delete", ("k", 1), 1)]), 1)
    # Spark replays batch 1 after a crash: skipped by its id (even with other rows in it,
    # which the version rule alone would apply).
    assert t.write(frame([change("delete", ("k", 1), 1), change("upsert", ("n", 1), 0, "N", 1)]),
                   1) == 0
    # A later batch with the same rows as batch 0 under a new id: ignored by version.
    t.write(frame([change("upsert", ("k", 1), 0, "v0", 0)]), 2)
    assert table(db) == {}
    con = duckdb.connect(str(db), read_only=True)
    commits = con.execute("SELECT batch_id, rows FROM _interlace_commits ORDER BY 1").fetchall()
    con.close()
    assert commits == [(0, 1), (1, 1), (2, 1)]


def test_a_bad_batch_applies_nothing_and_a_retry_applies_it_once(tmp_path):
    db = tmp_path / "t.duckdb"
    t = target(db)
    t.write(frame([change("upsert", ("k", 1), 0, "v0", 0)]), 0)
    bad = frame([change("upsert", ("k", 1), 1, "v1", 1), change("upsert", ("j", 1), 0, "J", 0)])
    bad.loc[1, "op"] = "insert"
    with pytest.raises(ValueError, match=r"`op` values \['insert'\]"):
        t.write(bad, 1)
    assert table(db) == {("k", 1): live("v0", 0, 0)}  # the transaction rolled back whole
    bad.loc[1, "op"] = "upsert"
    t.write(bad, 1)
    assert table(db) == {("k", 1): live("v1", 1, 1), ("j", 1): live("J", 0, 0)}


@pytest.mark.parametrize(("rows", "message"), [
    ([change("upsert", (None, 1), 0, "x", 0)], r"NULL key \['id', 'region'\]"),
    ([{**change("upsert", ("k", 1), 0, "x", 0), "version": None}], "NULL `version`"),
])
def test_a_change_without_key_or_version_is_refused(tmp_path, rows, message):
    t = target(tmp_path / "t.duckdb")
    with pytest.raises(ValueError, match=message):
        t.write(frame(rows), 0)


def test_a_changelog_target_needs_a_key_and_the_changelog_columns(tmp_path):
    with pytest.raises(ValueError, match="needs `key`"):
        DuckDBTarget(tmp_path / "a.duckdb", "t", "p", (), changelog=True).prepare(SCHEMA)
    plain = T.StructType([f for f in SCHEMA.fields if f.name != "version"])
    with pytest.raises(ValueError, match=r"lacks \['version'\]"):
        DuckDBTarget(tmp_path / "b.duckdb", "t", "p", KEY, changelog=True).prepare(plain)
    with pytest.raises(ValueError, match="must not include"):
        DuckDBTarget(tmp_path / "c.duckdb", "t", "p", ("id", "version"),
                     changelog=True).prepare(SCHEMA)


def test_make_target_builds_a_changelog_duckdb_target(tmp_path):
    spec = type("Spec", (), {"kind": "duckdb", "path": "o.duckdb", "table": None, "key": KEY})()
    t = make_target(spec, "p", base=tmp_path, default_table="x-y", changelog=True)
    assert isinstance(t, DuckDBTarget) and t.changelog and t.key == KEY
    assert (t.path, t.table) == (tmp_path / "o.duckdb", "x_y")
    assert not make_target(spec, "p", base=tmp_path, default_table="x").changelog


# Each key's history: versions 0..n-1, each an upsert (value = version) or a delete.
histories = st.dictionaries(
    st.sampled_from([("a", 1), ("a", 2), ("b", 1), ("c", 3)]),
    st.lists(st.sampled_from(["upsert", "delete"]), min_size=1, max_size=5),
    min_size=1,
)


@settings(max_examples=30, deadline=None)
@given(histories=histories, seed=st.integers(0, 2**32 - 1), n_batches=st.integers(1, 4),
       replays=st.lists(st.integers(0, 3), max_size=3))
def test_the_table_converges_to_each_keys_newest_change_in_any_order(histories, seed,
                                                                     n_batches, replays):
    """Whatever order and batching the changes arrive in, with replayed batch ids."""
    changes = [change(op, key, v, f"{key[0]}{v}", v)
               for key, ops in histories.items() for v, op in enumerate(ops)]
    rnd = random.Random(seed)
    rnd.shuffle(changes)
    cuts = sorted(rnd.sample(range(1, len(changes)), min(n_batches - 1, len(changes) - 1)))
    batches = [changes[i:j] for i, j in zip([0, *cuts], [*cuts, len(changes)], strict=True)]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "t.duckdb"
        t = target(db)
        for b, rows in enumerate(batches):
            t.write(frame(rows), b)
            for r in replays:  # Spark re-running an earlier batch with its id
                if r <= b:
                    assert t.write(frame(batches[r]), r) == 0
        got = table(db)
        deleted = table(db, "_interlace_deleted_joined")
    want = {key: live(f"{key[0]}{len(ops) - 1}", len(ops) - 1, len(ops) - 1)
            for key, ops in histories.items() if ops[-1] == "upsert"}
    assert got == want
    assert deleted == {key: (len(ops) - 1,) for key, ops in histories.items()
                       if ops[-1] == "delete"}
    assert not np.isnan([v[1] for v in got.values() if v[1] is not None]).any()


GROUP_SCHEMA = T.StructType([
    T.StructField("region", T.StringType()),
    T.StructField("accounts", T.LongType()),
    T.StructField("op", T.StringType()),
    T.StructField("event_time", T.TimestampType()),
    T.StructField("version", T.LongType()),
])


def group_change(op, region, version, accounts=None):
    return {"region": region, "accounts": None if op == "delete" else accounts, "op": op,
            "event_time": T0 + dt.timedelta(seconds=version), "version": version}


def group_table(db: Path, name: str = "per_region") -> set[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return set(con.execute(f'SELECT * FROM "{name}"').fetchall())
    finally:
        con.close()


@pytest.mark.parametrize("key", [("region",), ()])
def test_a_group_changelog_applies_by_group_null_safely_the_highest_version_winning(tmp_path,
                                                                                    key):
    """A table aggregation's changelog (``by_group``): groups may be NULL, or absent (one
    global group), so no PRIMARY KEY; per group the highest version wins, live or deleted."""
    db = tmp_path / "g.duckdb"
    t = DuckDBTarget(db, "per_region", "p", key, changelog=True, by_group=True)
    t.prepare(GROUP_SCHEMA)

    def frame_of(rows):
        df = pd.DataFrame(rows, columns=GROUP_SCHEMA.names)
        df["accounts"] = df["accounts"].astype("float64")
        return df

    def at(v):
        return T0 + dt.timedelta(seconds=v)

    if key:
        t.write(frame_of([group_change("upsert", "eu", 0, 2), group_change("upsert", None, 0, 1),
                          group_change("upsert", "us", 0, 5)]), 0)
        # NULL is one group: its newer version replaces it; a stale eu change is ignored; us
        # is deleted (remembered: an older upsert does not bring it back).
        t.write(frame_of([group_change("upsert", None, 2, 3), group_change("upsert", None, 1, 9),
                          group_change("upsert", "eu", 0, 7), group_change("delete", "us", 1)]),
                1)
        t.write(frame_of([group_change("upsert", "us", 0, 4)]), 2)
        assert group_table(db) == {("eu", 2, at(0), 0), (None, 3, at(2), 2)}
        assert group_table(db, "_interlace_deleted_per_region") == {("us", 1)}
    else:  # one global group
        t.write(frame_of([group_change("upsert", None, 0, 2), group_change("upsert", None, 1, 4)]),
                0)
        t.write(frame_of([group_change("upsert", None, 0, 9)]), 1)
        assert group_table(db) == {(None, 4, at(1), 1)}
        t.write(frame_of([group_change("delete", None, 2)]), 2)
        assert group_table(db) == set()
