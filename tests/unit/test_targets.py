"""Targets without Spark: what the console prints, what Parquet files hold, how DuckDB converges."""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from pyspark.sql import types as T

from interlace.connectors.console import ConsoleTarget
from interlace.connectors.duckdb import DuckDBTarget
from interlace.connectors.parquet import ParquetTarget

SCHEMA = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("paid", T.DoubleType()),
    T.StructField("ts", T.TimestampType()),
    T.StructField("name", T.StringType()),
])


def frame():
    """As ``toPandas`` hands it over: a BIGINT column with a NULL arrives as float64."""
    return pd.DataFrame({"id": [7.0, np.nan], "paid": [1.5, np.nan],
                         "ts": pd.to_datetime(["2026-01-01 00:00:01", None]),
                         "name": ["x", None]})


def test_console_prints_sql_nulls_and_integers(capsys):
    target = ConsoleTarget(label="joined")
    target.prepare(SCHEMA)
    assert target.write(frame(), 3) == 2
    out = capsys.readouterr().out
    assert "-- joined, batch 3: 2 rows" in out
    assert "NaN" not in out and "NaT" not in out and "None" not in out
    lines = out.splitlines()
    assert lines[2].split() == ["7", "1.5", "2026-01-01", "00:00:01", "x"]
    assert lines[3].split() == ["NULL"] * 4


def test_parquet_files_have_the_output_schema_even_when_empty(tmp_path):
    target = ParquetTarget(tmp_path / "out")
    target.prepare(SCHEMA)
    target.write(frame().iloc[:0], 0)  # the empty first micro-batch
    target.write(frame(), 1)
    for b in (0, 1):
        schema = pq.read_schema(tmp_path / f"out/batch_id={b}/part.parquet")
        assert str(schema.field("ts").type) == "timestamp[us, tz=UTC]"
        assert str(schema.field("id").type) == "int64" and str(schema.field("name").type) == "string"
    whole = pd.read_parquet(tmp_path / "out")
    assert len(whole) == 2 and whole["id"].isna().sum() == 1


def session_rows(rows, revision, retracted=False):
    return pd.DataFrame({"window_start": [dt.datetime(2026, 1, 1, 0, 0, s) for s, _, _, _ in rows],
                         "window_end": [dt.datetime(2026, 1, 1, 0, 0, e) for _, e, _, _ in rows],
                         "user": [u for _, _, u, _ in rows], "n": [n for _, _, _, n in rows],
                         "revision": revision, "retracted": retracted})


def test_duckdb_window_output_converges_whatever_the_key(tmp_path):
    schema = T.StructType([T.StructField("window_start", T.TimestampType()),
                           T.StructField("window_end", T.TimestampType()),
                           T.StructField("user", T.StringType()), T.StructField("n", T.LongType()),
                           T.StructField("revision", T.LongType()),
                           T.StructField("retracted", T.BooleanType())])
    for key in ((), ("window_start", "window_end", "user"), ("user", "window_end")):
        db = tmp_path / f"k{len(key)}.duckdb"
        target = DuckDBTarget(db, "s", "p", key, window_groups=("user",))
        target.prepare(schema)
        target.write(session_rows([(0, 8, "a", 2), (0, 5, "c", 1), (0, 5, None, 1),
                                   (9, 14, None, 1)], 0), 0)
        target.write(session_rows([(10, 15, "c", 1)], 0), 1)
        # a grows to [0, 12); c's [0, 5) absorbs [10, 15) (retracted); the NULL group's [0, 5)
        # grows to [0, 7), its [9, 14) stays.
        batch = pd.concat([session_rows([(0, 12, "a", 3), (0, 15, "c", 3), (0, 7, None, 2)], 1),
                           session_rows([(10, 15, "c", 1)], 1, retracted=True)])
        # The batch's output rows are reported written (retractions included), not deletions.
        assert target.write(batch.reset_index(drop=True), 2) == 4
        con = duckdb.connect(str(db), read_only=True)
        got = sorted(con.execute("SELECT window_start, window_end, user, n FROM s").fetchall(),
                     key=str)
        con.close()
        t = lambda s: dt.datetime(2026, 1, 1, 0, 0, s)  # noqa: E731
        assert got == sorted([(t(0), t(12), "a", 3), (t(0), t(15), "c", 3), (t(0), t(7), None, 2),
                              (t(9), t(14), None, 1)], key=str), key
