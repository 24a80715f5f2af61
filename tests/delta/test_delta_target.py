"""The Delta target without Spark: each output kind lands as the DuckDB target's table.

Every test writes the same batches (as ``toPandas`` hands them over) through a
:class:`DeltaTarget` and a :class:`DuckDBTarget` and compares the two tables after **each**
batch; then what only Delta has: one commit per micro-batch carrying its application
transaction, a replayed batch skipped, the schema and path refusals, another writer's
conflicting commit retried, and the readers (delta-rs, polars, DuckDB) agreeing.
"""

from __future__ import annotations

import datetime as dt
import random
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from interlace.connectors import make_target
from interlace.connectors.delta import DeltaTarget
from interlace.connectors.duckdb import DuckDBTarget
from interlace.pipeline import Target

#: Cheap and Spark-free: the compatibility tier runs it beside each older PySpark line's
#: pyarrow and pandas (.ci/compat).
pytestmark = pytest.mark.compat

T0 = dt.datetime(2026, 1, 1)

CHANGES = T.StructType([
    T.StructField("id", T.StringType()), T.StructField("region", T.LongType()),
    T.StructField("left_v", T.StringType()), T.StructField("right_v", T.LongType()),
    T.StructField("op", T.StringType()), T.StructField("event_time", T.TimestampType()),
    T.StructField("version", T.LongType()),
])
GROUPS = T.StructType([
    T.StructField("region", T.StringType()), T.StructField("accounts", T.LongType()),
    T.StructField("op", T.StringType()), T.StructField("event_time", T.TimestampType()),
    T.StructField("version", T.LongType()),
])
WINDOWS = T.StructType([
    T.StructField("window_start", T.TimestampType()),
    T.StructField("window_end", T.TimestampType()),
    T.StructField("user", T.StringType()), T.StructField("n", T.LongType()),
    T.StructField("revision", T.LongType()), T.StructField("retracted", T.BooleanType()),
])
JOINED = T.StructType([
    T.StructField("id", T.LongType()), T.StructField("paid", T.DoubleType()),
    T.StructField("ts", T.TimestampType()), T.StructField("name", T.StringType()),
])


def _norm(v):
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NaT:
        return None
    if isinstance(v, pd.Timestamp):
        v = v.to_pydatetime()
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def rows(records) -> list[tuple]:
    return sorted((tuple(_norm(v) for v in r) for r in records), key=repr)


def delta_rows(path: Path, columns) -> list[tuple]:
    df = DeltaTable(str(path)).to_pandas()
    return rows(df[list(columns)].itertuples(index=False, name=None))


def duck_rows(db: Path, table: str, columns) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        cols = ", ".join(f'"{c}"' for c in columns)
        return rows(con.execute(f'SELECT {cols} FROM "{table}"').fetchall())
    finally:
        con.close()


class Pair:
    """A Delta and a DuckDB target fed the same batches; their tables compared after each."""

    def __init__(self, tmp: Path, schema, **kw):
        self.path, self.db = tmp / "table", tmp / "t.duckdb"
        self.delta = DeltaTarget(str(self.path), "p", **kw)
        self.duck = DuckDBTarget(self.db, "t", "p", **kw)
        self.delta.prepare(schema)
        self.duck.prepare(schema)
        self.columns = [n for n in schema.names if not (kw.get("changelog") and n == "op")]

    def write(self, pdf: pd.DataFrame, batch_id: int) -> list[tuple]:
        n_delta = self.delta.write(pdf.copy(), batch_id)
        n_duck = self.duck.write(pdf.copy(), batch_id)
        assert n_delta == n_duck
        got = delta_rows(self.path, self.columns)
        assert got == duck_rows(self.db, "t", self.columns), f"batch {batch_id}"
        return got


def change(op, key, version, left=None, right=None):
    ident, region = key
    if op == "delete":
        left = right = None
    return {"id": ident, "region": region, "left_v": left, "right_v": right, "op": op,
            "event_time": T0 + dt.timedelta(seconds=version), "version": version}


def change_frame(records):
    df = pd.DataFrame(records, columns=CHANGES.names)
    df["right_v"] = df["right_v"].astype("float64")  # a BIGINT with a NULL, as toPandas
    return df


histories = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 2)),
    st.lists(st.sampled_from(["upsert", "delete"]), min_size=1, max_size=5),
    min_size=1,
)


@settings(max_examples=25, deadline=None)
@given(histories=histories, seed=st.integers(0, 2**32 - 1), n_batches=st.integers(1, 4))
def test_a_changelog_converges_like_duckdb_after_every_batch(histories, seed, n_batches):
    """Each key's changes in version order across batches (as an operator sends them), in
    any order within a batch, several changes of one key in one batch; stale repeats too."""
    per_key = [[change(op, key, v, f"{key[0]}{v}", v) for v, op in enumerate(ops)]
               for key, ops in histories.items()]
    rnd = random.Random(seed)
    batches: list[list[dict]] = [[] for _ in range(n_batches)]
    for changes in per_key:
        cuts = sorted(rnd.choices(range(n_batches), k=len(changes)))
        for b, c in zip(cuts, changes, strict=True):
            batches[b].append(c)
    for b in range(1, n_batches):  # a stale change of a live key re-sent later: ignored
        newest: dict = {}
        for c in (c for batch in batches[:b] for c in batch):
            k = (c["id"], c["region"])
            if c["version"] >= newest.get(k, c)["version"]:
                newest[k] = c
        stale = [c for c in batches[b - 1] if newest[(c["id"], c["region"])]["op"] == "upsert"]
        if stale and rnd.random() < 0.5:  # (after a delete: test_an_older_upsert_after_...)
            batches[b].append(rnd.choice(stale))
    for batch in batches:
        rnd.shuffle(batch)
    with tempfile.TemporaryDirectory() as tmp:
        pair = Pair(Path(tmp), CHANGES, key=("id", "region"), changelog=True)
        for b, batch in enumerate(batches):
            pair.write(change_frame(batch), b)
        final = delta_rows(pair.path, ["id", "region", "version"])
    want = sorted(((k[0], k[1], len(ops) - 1) for k, ops in histories.items()
                   if ops[-1] == "upsert"), key=repr)
    assert final == want


@pytest.mark.parametrize("key", [("region",), ()])
def test_a_group_changelog_matches_null_groups_and_the_global_group(tmp_path, key):
    def frame_of(records):
        df = pd.DataFrame([{"region": g, "accounts": None if op == "delete" else a, "op": op,
                            "event_time": T0 + dt.timedelta(seconds=v), "version": v}
                           for op, g, v, a in records], columns=GROUPS.names)
        df["accounts"] = df["accounts"].astype("float64")
        return df

    pair = Pair(tmp_path, GROUPS, key=key, changelog=True, by_group=True)
    if key:
        pair.write(frame_of([("upsert", "eu", 0, 2), ("upsert", None, 0, 1),
                             ("upsert", "us", 0, 5)]), 0)
        got = pair.write(frame_of([("upsert", None, 2, 3), ("upsert", None, 1, 9),
                                   ("upsert", "eu", 0, 7), ("delete", "us", 1, None)]), 1)
        assert got == rows([("eu", 2, T0, 0), (None, 3, T0 + dt.timedelta(seconds=2), 2)])
    else:
        pair.write(frame_of([("upsert", None, 0, 2), ("upsert", None, 1, 4)]), 0)
        assert pair.write(frame_of([("upsert", None, 0, 9)]), 1) == rows(
            [(None, 4, T0 + dt.timedelta(seconds=1), 1)])
        assert pair.write(frame_of([("delete", None, 2, None)]), 2) == []


def window_rows(spans, revision, retracted=False):
    at = lambda s: T0 + dt.timedelta(seconds=s)  # noqa: E731
    return pd.DataFrame({"window_start": [at(s) for s, _, _, _ in spans],
                         "window_end": [at(e) for _, e, _, _ in spans],
                         "user": [u for _, _, u, _ in spans], "n": [n for _, _, _, n in spans],
                         "revision": revision, "retracted": retracted})


@pytest.mark.parametrize("key", [(), ("window_start", "window_end", "user")])
def test_window_revisions_and_a_merged_session_match_duckdb(tmp_path, key):
    """Sessions under reopen: a session grows, one absorbs another (its retracted row), the
    NULL group is one group; tumbling-style revisions of the same bounds replace their row."""
    pair = Pair(tmp_path, WINDOWS, key=key, window_groups=("user",))
    pair.write(window_rows([(0, 8, "a", 2), (0, 5, "c", 1), (0, 5, None, 1), (9, 14, None, 1)],
                           0), 0)
    pair.write(window_rows([(10, 15, "c", 1)], 0), 1)
    batch = pd.concat([window_rows([(0, 12, "a", 3), (0, 15, "c", 3), (0, 7, None, 2)], 1),
                       window_rows([(10, 15, "c", 1)], 1, retracted=True)])
    pair.write(batch.reset_index(drop=True), 2)
    got = pair.write(window_rows([(9, 14, None, 4), (20, 25, "a", 1)], 2), 3)
    assert len(got) == 5


def test_upserts_by_key_take_the_higher_revision_and_retractions_delete(tmp_path):
    schema = T.StructType([T.StructField("user", T.StringType()), T.StructField("n", T.LongType()),
                           T.StructField("revision", T.LongType()),
                           T.StructField("retracted", T.BooleanType())])
    pair = Pair(tmp_path, schema, key=("user",))

    def frame(records):
        return pd.DataFrame(records, columns=schema.names)

    pair.write(frame([("a", 1, 0, False), ("b", 1, 0, False), ("a", 2, 1, False)]), 0)
    got = pair.write(frame([("a", 9, 0, False), ("b", 1, 0, True), ("c", 3, 0, False)]), 1)
    assert got == rows([("a", 2, 1, False), ("c", 3, 0, False)])


def joined_frame():
    return pd.DataFrame({"id": [7.0, np.nan], "paid": [1.5, np.nan],
                         "ts": pd.to_datetime(["2026-01-01 00:00:01", None]),
                         "name": ["x", None]})


def test_appends_once_per_batch_and_a_replayed_batch_changes_nothing(tmp_path):
    pair = Pair(tmp_path, JOINED)
    pair.write(joined_frame(), 0)
    pair.write(joined_frame().iloc[:0], 1)  # an empty batch: no commit
    pair.write(joined_frame(), 2)
    assert pair.delta.write(joined_frame(), 2) == 0  # Spark replaying batch 2
    assert pair.delta.write(joined_frame(), 0) == 0
    table = DeltaTable(str(pair.path))
    assert table.transaction_version("interlace.p") == 2
    writes = [h for h in table.history() if h["operation"] != "CREATE TABLE"]
    assert len(writes) == 2 and len(delta_rows(pair.path, JOINED.names)) == 4
    # UTC-aware timestamps: the table keeps the oldest protocol every reader takes.
    proto = table.protocol()
    assert (proto.min_reader_version, proto.min_writer_version) == (1, 2)
    assert 'PrimitiveType("timestamp")' in str(table.schema().fields[2].type)  # not _ntz
    assert str(table.to_pyarrow_table().schema.field("ts").type) == "timestamp[us, tz=UTC]"


def test_naive_timestamps_are_read_in_the_sessions_time_zone_and_stored_as_utc(tmp_path):
    """``toPandas`` hands over the session's wall-clock times: 10:00 in New York is 15:00 UTC."""
    target = DeltaTarget(str(tmp_path / "t"), "p", time_zone="America/New_York")
    target.prepare(JOINED)
    target.write(joined_frame().iloc[:1].assign(ts=pd.Timestamp("2026-01-01 10:00:00")), 0)
    stored = DeltaTable(str(tmp_path / "t")).to_pyarrow_table().column("ts").to_pylist()
    assert stored == [dt.datetime(2026, 1, 1, 15, 0, tzinfo=dt.timezone.utc)]


def test_polars_and_duckdb_read_the_table_as_deltalake_does(tmp_path):
    pair = Pair(tmp_path, CHANGES, key=("id", "region"), changelog=True)
    pair.write(change_frame([change("upsert", ("a", 1), 0, "x", 1),
                             change("upsert", ("b", 2), 0, "y", 2),
                             change("delete", ("b", 2), 1)]), 0)
    want = delta_rows(pair.path, pair.columns)
    assert rows(pl.read_delta(str(pair.path)).select(pair.columns).iter_rows()) == want
    ds = DeltaTable(str(pair.path)).to_pyarrow_dataset()  # noqa: F841 (DuckDB scans it)
    assert rows(duckdb.sql("SELECT id, region, left_v, right_v, event_time, version FROM ds")
                .fetchall()) == want == rows([("a", 1, "x", 1, T0, 0)])


def test_a_path_holding_another_tables_schema_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "table"
    other = pd.DataFrame({"id": [1], "paid": ["text"]})
    write_deltalake(str(path), other)
    target = DeltaTarget(str(path), "p")
    with pytest.raises(ValueError, match="another schema") as err:
        target.prepare(JOINED)
    msg = str(err.value)
    assert "paid: table string, output double" in msg and "ts: table absent" in msg
    assert "new path" in msg
    assert DeltaTable(str(path)).version() == 0  # nothing was written


def test_a_path_that_is_not_a_delta_table_is_refused(tmp_path):
    path = tmp_path / "files"
    path.mkdir()
    (path / "part-0.parquet").write_bytes(b"not delta")
    with pytest.raises(ValueError, match=r"holds files but no Delta table \(no _delta_log"):
        DeltaTarget(str(path), "p").prepare(JOINED)
    assert sorted(p.name for p in path.iterdir()) == ["part-0.parquet"]


def test_an_existing_table_of_the_same_columns_in_another_order_is_written(tmp_path):
    path = tmp_path / "table"
    first = DeltaTarget(str(path), "p")
    first.prepare(JOINED)
    first.write(joined_frame(), 0)
    reordered = T.StructType(list(reversed(JOINED.fields)))
    again = DeltaTarget(str(path), "q")
    again.prepare(reordered)
    again.write(joined_frame()[reordered.names], 0)
    assert len(delta_rows(path, JOINED.names)) == 4


class Raced(DeltaTarget):
    """Reads the table, then another writer commits before this one's commit (a race)."""

    racers: list
    opened = 0

    def _open(self):
        table = super()._open()
        self.opened += 1
        if self.racers:
            self.racers.pop(0)()
        return table


def raced(path: Path, attempts: int = 5) -> tuple[Raced, DeltaTarget]:
    target = Raced(str(path), "p", ("id", "region"), changelog=True, attempts=attempts)
    target.racers = []
    target.prepare(CHANGES)
    target.write(change_frame([change("upsert", ("a", 1), 0, "x", 1)]), 0)
    other = DeltaTarget(str(path), "other", ("id", "region"), changelog=True)
    other.prepare(CHANGES)
    return target, other


def test_another_writers_conflicting_commit_is_retried_and_both_writes_kept(tmp_path):
    """The other writer rewrites the file this batch rewrites: Delta refuses the later
    commit; the batch is tried again on the new table and lands."""
    path = tmp_path / "table"
    target, other = raced(path)
    target.racers = [lambda: other.write(change_frame([change("upsert", ("a", 1), 1, "o", 9),
                                                       change("upsert", ("b", 1), 0, "o", 9)]), 0)]
    target.write(change_frame([change("upsert", ("a", 1), 2, "y", 2)]), 1)
    assert target.opened == 3  # prepare's batch, the conflicted attempt, the retry
    assert delta_rows(path, ["id", "region", "left_v", "version"]) == rows(
        [("a", 1, "y", 2), ("b", 1, "o", 0)])
    table = DeltaTable(str(path))
    assert table.transaction_version("interlace.p") == 1
    assert table.transaction_version("interlace.other") == 0


def test_a_conflict_on_every_attempt_is_reported_with_nothing_written(tmp_path):
    path = tmp_path / "table"
    target, other = raced(path, attempts=2)
    target.racers = [
        lambda v=v: other.write(change_frame([change("upsert", ("a", 1), v, "o", v)]), v)
        for v in (1, 2)]
    with pytest.raises(RuntimeError, match="conflicted with another writer's commit 2 times"):
        target.write(change_frame([change("upsert", ("a", 1), 3, "y", 2)]), 1)
    assert DeltaTable(str(path)).transaction_version("interlace.p") == 0
    assert delta_rows(path, ["id", "region", "left_v", "version"]) == [("a", 1, "o", 2)]


def test_an_older_upsert_after_a_delete_in_a_later_batch_comes_back(tmp_path):
    """The documented difference (docs/delta.md): Delta keeps no deleted keys, DuckDB does.
    No interlace operator sends this order; a hand-fed changelog might."""
    path = tmp_path / "table"
    target = DeltaTarget(str(path), "p", ("id", "region"), changelog=True)
    target.prepare(CHANGES)
    target.write(change_frame([change("upsert", ("a", 1), 0, "x", 1),
                               change("delete", ("a", 1), 2)]), 0)
    target.write(change_frame([change("upsert", ("a", 1), 1, "late", 1)]), 1)
    assert delta_rows(path, ["id", "left_v", "version"]) == [("a", "late", 1)]


def test_make_target_builds_a_delta_target_from_the_pipeline_spec(tmp_path):
    spec = Target(kind="delta", path="lake/joined", key=["id"],
                  options={"AWS_REGION": "eu-west-1"})
    t = make_target(spec, "orders", base=tmp_path, default_table="orders", changelog=True)
    assert isinstance(t, DeltaTarget)
    assert (t.path, t.key, t.changelog, t.app_id) == (
        str(tmp_path / "lake/joined"), ("id",), True, "interlace.orders")
    assert t.storage_options == {"AWS_REGION": "eu-west-1"}


def test_dead_letters_into_delta_are_appended_once_per_batch(tmp_path):
    """``[dead_letter] kind = "delta"``: the runner's dead-letter schema, appended."""
    spec = Target(kind="delta", path="out/letters")
    t = make_target(spec, "orders", base=tmp_path, default_table="orders_dead_letters")
    t.prepare(T.StructType([T.StructField("dead_letter", T.StringType())]))
    letters = pd.DataFrame({"dead_letter": ['{"reason": "late"}', '{"reason": "null_key"}']})
    assert t.write(letters, 3) == 2
    assert t.write(letters, 3) == 0  # replayed
    assert sorted(DeltaTable(str(tmp_path / "out/letters")).to_pandas()["dead_letter"]) == [
        '{"reason": "late"}', '{"reason": "null_key"}']


def test_a_new_checkpoint_on_a_table_holding_its_batches_is_refused(tmp_path):
    """Its batch ids start at 0 again: they would be skipped as written, silently."""
    path = str(tmp_path / "t")
    first = DeltaTarget(path, "p")
    first.prepare(JOINED)
    for b in range(3):
        first.write(joined_frame(), b)
    with pytest.raises(ValueError, match=r"already holds batches 0 to 2 of interlace.p, but "
                                         r"the query's checkpoint is new"):
        DeltaTarget(path, "p", fresh_checkpoint=True).prepare(JOINED)
    DeltaTarget(path, "q", fresh_checkpoint=True).prepare(JOINED)  # another pipeline: fine
    DeltaTarget(path, "p").prepare(JOINED)  # the same checkpoint continuing: fine
