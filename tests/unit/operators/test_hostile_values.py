"""Spark-free tests of the hostile-input fixes (issue 13; docs/reliability.md, "Hostile input").

Each pins one bug the hostile-input property tests found (``tests/property/test_hostile_*.py``)
or one type the operators refuse before a query starts.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from interlace.operators.common.arrow import table_to_pandas
from interlace.operators.common.checks import check_carried_types
from interlace.operators.common.deadletters import dead_letter
from interlace.operators.common.keys import key_codes
from interlace.operators.join import JoinPlan
from interlace.operators.stream_table.plan import StreamTablePlan
from interlace.operators.window import Aggregation, Window, WindowPlan
from interlace.operators.common.prepare import group_key_sql as _group_sql
from pyspark.sql import types as T

from interlace import ConfigError, Join, StreamTableJoin
from interlace.testing.local import run_window_locally
from interlace.testing.oracle import canonical_rows
from interlace.testing.window_oracle import WindowBatch, oracle_window

T0 = dt.datetime(2026, 1, 1)
COUNT = Aggregation(agg="count", as_="n")


def window(group_by, schema, **kw):
    base = dict(kind="tumbling", duration_ms=1000, event_time_column="t", group_by=group_by,
                max_groups_per_window=100, aggregations=[COUNT], key_groups=1)
    return Window(**{**base, **kw})


def test_window_timeout_call_with_a_decimal_group_emits_instead_of_failing():
    # The timeout call has no rows: its empty frame's float64 column once failed the Arrow
    # conversion to decimal(38,18) ("Got bytestring of length 8").
    schema = pa.schema([("g", pa.decimal128(38, 18)), ("t", pa.timestamp("us"))])
    spec = window(["g"], schema, key_groups=4)
    log = [WindowBatch(rows=({"g": Decimal("1.500000000000000000"), "t": T0},)),
           WindowBatch(rows=({"g": Decimal("2.000000000000000000"),
                              "t": T0 + dt.timedelta(seconds=30)},))]
    run = run_window_locally(spec, log, schema)
    assert [(r["g"], r["n"]) for _, r in run.rows] == [(Decimal("1.500000000000000000"), 1)]


def test_key_codes_of_no_rows_in_empty_decimal_chunks():
    empty = pa.chunked_array([pa.array([], pa.decimal128(38, 18))] * 2)
    for null_is_value in (True, False):
        assert key_codes([empty], 0, null_is_value=null_is_value).tolist() == []


def test_key_codes_equal_minus_zero_and_zero_for_every_caller():
    """One mechanism for every operator: ``-0.0`` and ``0.0`` get one code (SQL), float32 too,
    in a first column and in a further one, with NULL as a value or not."""
    for typ in (pa.float64(), pa.float32()):
        col = pa.chunked_array([pa.array([0.0, -0.0], typ), pa.array([None, 1.5, -0.0], typ)])
        other = pa.chunked_array([pa.array(["a", "a", "b", "b", "a"])])
        for null_is_value in (True, False):
            c = key_codes([col], 5, null_is_value=null_is_value).tolist()
            assert c[0] == c[1] == c[4] and len({c[0], c[2], c[3]}) == 3
            c = key_codes([other, col], 5, null_is_value=null_is_value).tolist()
            assert c[0] == c[1] == c[4] and c[3] not in (c[0], c[2])


def test_window_groups_minus_zero_with_zero_and_nan_with_null():
    schema = pa.schema([("g", pa.float64()), ("t", pa.timestamp("us"))])
    spec = window(["g"], schema)
    rows = tuple({"g": g, "t": T0} for g in (0.0, -0.0, float("nan"), None, float("inf")))
    log = [WindowBatch(rows=rows), WindowBatch(rows=({"g": 1.0, "t": T0.replace(year=2027)},))]
    got = canonical_rows(r for _, r in run_window_locally(spec, log, schema).rows)
    # The oracle sees what PySpark hands over: NaN as NULL.
    clean = tuple({**r, "g": None if r["g"] != r["g"] else r["g"]} for r in rows)
    want = oracle_window(spec, [WindowBatch(rows=clean), log[1]], columns=schema.names)
    assert got == canonical_rows(o.row for o in want.rows)
    assert [(r[0][1], r[1][1]) for r in got] == [(None, 2), (0.0, 2), (float("inf"), 1)]


def test_window_group_key_group_hashes_nan_as_null_and_minus_zero_as_zero():
    assert _group_sql("g", T.DoubleType()) == (
        "IF(isnan(`g`), CAST(NULL AS double), `g` + CAST(0 AS double))")
    assert _group_sql("g", T.FloatType()).startswith("IF(isnan(`g`), CAST(NULL AS float)")
    assert _group_sql("g", T.StringType()) == "`g`"


@pytest.mark.parametrize("when", [dt.datetime(1, 1, 1), dt.datetime(1500, 6, 1, 0, 0, 0, 7),
                                  dt.datetime(9999, 12, 30)])
def test_windows_outside_the_nanosecond_range_are_emitted(when):
    schema = pa.schema([("g", pa.string()), ("t", pa.timestamp("us"))])
    spec = window(["g"], schema, aggregations=[COUNT, Aggregation(agg="min", column="t",
                                                                  as_="first_t")])
    from interlace.operators.window.step import WindowState, step_window

    plan = WindowPlan.from_schema(spec, schema)
    us = (when - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    batch = pd.DataFrame({"__il_tus": [us], "g": ["a"], "t": [us]})
    held = step_window(plan, WindowState.empty(plan), batch, wm_us=None)
    empty = pd.DataFrame({"__il_tus": np.zeros(0, np.int64), "g": [], "t": []})
    result = step_window(plan, held.state, empty, wm_us=us + 10_000_000)
    out = result.output.iloc[0]
    assert out["window_start"].to_pydatetime().replace(tzinfo=None) == when.replace(
        microsecond=0)
    assert out["n"] == 1
    assert out["first_t"].to_pydatetime().replace(tzinfo=None) == when


def test_dead_letters_take_numpy_arrays_maps_and_nested_timestamps():
    row = {"arr": np.array([1.0, np.nan, np.inf]), "m": {"a": np.int64(1)},
           "st": {"t": pd.Timestamp("1950-01-01 00:00:01"), "l": np.array(["x", None])},
           "nat": pd.NaT, "when": np.datetime64("NaT")}
    letter = json.loads(dead_letter("input", "late", None, row))
    assert letter["row"] == {"arr": [1.0, None, None], "m": {"a": 1},
                             "st": {"t": "1950-01-01T00:00:01.000000", "l": ["x", None]},
                             "nat": None, "when": None}


def test_output_maps_become_dicts_for_pyspark():
    table = pa.table({"m": pa.array([{"a": 1, "b": None}, None],
                                    pa.map_(pa.string(), pa.int64()))})
    assert table_to_pandas(table)["m"].tolist() == [{"a": 1, "b": None}, None]


NESTED = [pa.struct([("a", pa.int64())]), pa.list_(pa.string()),
          pa.map_(pa.string(), pa.int64())]


@pytest.mark.parametrize("typ", NESTED, ids=str)
def test_nested_join_keys_are_a_config_error_naming_the_column_and_the_type(typ):
    schema = pa.schema([("k", typ), ("t", pa.timestamp("us"))])
    spec = Join(left_keys=["k"], right_keys=["k"], time_window_ms=0, event_time_column="t")
    with pytest.raises(ConfigError, match=r"`left_keys` column 'k' has type .*(struct|list|map)"):
        JoinPlan.from_schemas(spec, schema, schema)
    st_spec = StreamTableJoin(left_keys=["k"], right_keys=["k"], event_time_column="t")
    with pytest.raises(ConfigError, match="column 'k' has type"):
        StreamTablePlan.from_schemas(st_spec, schema, schema)


@pytest.mark.parametrize("typ", NESTED, ids=str)
def test_nested_group_by_is_a_config_error_naming_the_column_and_the_type(typ):
    schema = pa.schema([("g", typ), ("t", pa.timestamp("us"))])
    with pytest.raises(ConfigError, match=r"`group_by` column 'g' of the input has type"):
        WindowPlan.from_schema(window(["g"], schema), schema)


# PySpark 3.5 has no CalendarIntervalType class (the legacy interval is 4.0's); where it has
# one, it is checked too.
_LEGACY_INTERVAL = ([T.CalendarIntervalType(), T.ArrayType(T.CalendarIntervalType())]
                    if hasattr(T, "CalendarIntervalType") else [])


@pytest.mark.parametrize("typ", [T.YearMonthIntervalType(),
                                 T.StructType([T.StructField("i", T.YearMonthIntervalType())]),
                                 *_LEGACY_INTERVAL], ids=str)
def test_types_pyspark_cannot_hand_to_pandas_are_a_config_error(typ):
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("span", typ)])
    with pytest.raises(ConfigError, match=rf"column 'span' of the left input has type "
                                          rf"{typ.simpleString().replace('(', '.').replace(')', '.')}"):
        check_carried_types(schema, "the left input")


@pytest.mark.parametrize("typ", [T.DecimalType(38, 18), T.BinaryType(), T.DayTimeIntervalType(),
                                 T.MapType(T.StringType(), T.ArrayType(T.DoubleType())),
                                 T.StructType([T.StructField("t", T.TimestampType())]),
                                 T.DateType(), T.TimestampNTZType()], ids=str)
def test_types_interlace_carries_pass_the_check(typ):
    check_carried_types(T.StructType([T.StructField("c", typ)]), "the input")
