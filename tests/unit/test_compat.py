"""The version differences of operators/common/compat.py, on whatever line this venv has."""

from __future__ import annotations

import warnings

import pyarrow as pa
import pyspark
import pytest
from pyspark.sql import types as T

from interlace.operators.common import compat
from interlace.operators.common.compat import (
    UnsupportedVersionError,
    require_supported_pyspark,
    source_offset,
    spark_to_arrow_type,
    to_pylist,
)
from interlace.operators.common.checks import check_carried_types
from interlace.operators.errors import ConfigError

pytestmark = pytest.mark.compat


@pytest.mark.parametrize("version", ["3.4.4", "3.3.0", "2.4.8", "3.4.0.dev0"])
def test_a_pyspark_below_the_range_is_refused_naming_version_range_and_fix(version):
    with pytest.raises(UnsupportedVersionError) as err:
        require_supported_pyspark(version, "17.0.0")
    text = str(err.value)
    assert f"PySpark {version}" in text and ">=3.5,<4.4" in text and "pip install" in text


@pytest.mark.parametrize("pyspark_ver,pyarrow_ver", [
    ("3.5.9", "17.0.0"), ("3.5.0", "17.0.0"), ("4.0.5", "26.0.1"), ("4.3.0", "26.0.1"),
    ("4.1.0.dev1", "21.0.0"), ("3.5.9", "25.0.1")])
def test_supported_pairs_pass_without_warning(pyspark_ver, pyarrow_ver):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        require_supported_pyspark(pyspark_ver, pyarrow_ver)


def test_pyspark_35_with_a_pyarrow_it_cannot_drive_is_refused_with_the_fix():
    bad = f"{compat.PYSPARK35_PYARROW_BELOW}.0.0"
    with pytest.raises(UnsupportedVersionError, match=rf"pyarrow>=17,<{compat.PYSPARK35_PYARROW_BELOW}"):
        require_supported_pyspark("3.5.9", bad)


def test_pyspark_35_without_distutils_is_refused_naming_setuptools():
    with pytest.raises(UnsupportedVersionError, match=r"pip install setuptools"):
        require_supported_pyspark("3.5.9", "17.0.0", has_distutils=False)
    require_supported_pyspark("3.5.9", "17.0.0", has_distutils=True)
    require_supported_pyspark("4.0.5", "19.0.1", has_distutils=False)  # 4.x needs none


def test_a_pyspark_newer_than_the_newest_tested_warns_once_and_works():
    with pytest.warns(RuntimeWarning, match="PySpark 4.4.0 is newer and untested"):
        require_supported_pyspark("4.4.0", "26.0.0")


def test_the_installed_pyspark_is_supported():
    require_supported_pyspark(pyspark.__version__, pa.__version__)


@pytest.mark.parametrize("dt,expected", [
    (T.TimestampType(), pa.timestamp("us", tz="UTC")),
    (T.TimestampNTZType(), pa.timestamp("us")),
    (T.StringType(), pa.string()),
    (T.StructType([T.StructField("t", T.TimestampType())]),
     pa.struct([pa.field("t", pa.timestamp("us", tz="UTC"))])),
    (T.MapType(T.StringType(), T.LongType()),
     pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.int64()))),
], ids=str)
def test_spark_to_arrow_type_gives_the_same_types_on_every_line(dt, expected):
    assert spark_to_arrow_type(dt) == expected


def test_a_string_column_is_never_a_type_error():
    check_carried_types(T.StructType([T.StructField("k", T.StringType())]), "the left input")


def test_a_type_pyspark_cannot_carry_names_the_pyspark_version_and_its_reason():
    schema = T.StructType([T.StructField("span", T.YearMonthIntervalType())])
    with pytest.raises(ConfigError) as err:
        check_carried_types(schema, "the left input")
    text = str(err.value)
    assert f"PySpark {pyspark.__version__}" in text and "cast('string')" in text


MAP_TABLE = pa.table({
    "m": pa.array([[("a", 1), ("b", 2), ("a", 3)], None, []],
                  pa.map_(pa.string(), pa.int64())),
    "s": pa.array([{"x": [("k", {"y": [("z", 1.5)]})]}, {"x": None}, None],
                  pa.struct([("x", pa.map_(pa.string(),
                                           pa.struct([("y", pa.map_(pa.string(),
                                                                    pa.float64()))])))])),
    "l": pa.array([[[("p", 1)]], [None], None], pa.list_(pa.map_(pa.string(), pa.int8()))),
    "i": pa.array([1, None, 3], pa.int64()),
})
EXPECTED = [
    {"m": {"a": 3, "b": 2}, "s": {"x": {"k": {"y": {"z": 1.5}}}}, "l": [{"p": 1}], "i": 1},
    {"m": None, "s": {"x": None}, "l": [None], "i": None},
    {"m": {}, "s": None, "l": None, "i": 3},
]


def test_to_pylist_gives_maps_as_dicts_at_every_depth_last_value_winning():
    assert to_pylist(MAP_TABLE) == EXPECTED


@pytest.mark.filterwarnings("ignore:Encountered key")
def test_to_pylist_equals_pyarrows_own_lossy_dicts_where_pyarrow_has_them():
    table = MAP_TABLE.select(["m", "i"])
    try:
        own = table.to_pylist(maps_as_pydicts="lossy")
    except TypeError:  # pyarrow 17
        own = [{"m": {"a": 3, "b": 2}, "i": 1}, {"m": None, "i": None}, {"m": {}, "i": 3}]
    assert to_pylist(table) == own


@pytest.mark.parametrize("raw,expected", [
    (None, None), ("None", None), ("null", None), ('{"logOffset": 3}', {"logOffset": 3}),
    ({"logOffset": 4}, {"logOffset": 4}), ("7", 7)])
def test_source_offset_reads_every_lines_progress_form(raw, expected):
    assert source_offset(raw) == expected


def test_progress_json_reads_a_progress_object_through_its_json_text():
    class Progress(dict):  # PySpark 4.0's form: str() of dicts inside, the JSON beside
        json = '{"batchId": 3, "sources": [{"startOffset": {"logOffset": 0}, "endOffset": null}]}'

    p = Progress(batchId=3, sources=[{"startOffset": "{'logOffset': 0}", "endOffset": "None"}])
    got = compat.progress_json(p)
    assert got["sources"][0]["startOffset"] == {"logOffset": 0}
    assert source_offset(got["sources"][0]["endOffset"]) is None
    assert compat.progress_json({"batchId": 1}) == {"batchId": 1}


def test_observed_rows_stand_in_only_where_every_source_reports_none():
    from pyspark.sql import Row

    observed = {"src_orders": Row(max_event_time=None, rows=7), "src_up": {"rows": 5},
                "other": {"rows": 100}}
    spark35 = {"numInputRows": 0, "sources": [{"numInputRows": 0}, {"numInputRows": 0}],
               "observedMetrics": observed}
    got, from_sources = compat.with_observed_input_rows(spark35, channels=["up"])
    assert got["numInputRows"] == 12 and from_sources == 7
    spark4 = {**spark35, "numInputRows": 12, "sources": [{"numInputRows": 7},
                                                          {"numInputRows": 5}]}
    assert compat.with_observed_input_rows(spark4, ["up"]) == (spark4, None)
    empty = {**spark35, "observedMetrics": {"src_orders": {"rows": 0}}}
    assert compat.with_observed_input_rows(empty) == (empty, None)


def test_import_caches_are_invalidated_every_task_exactly_on_pyspark_35_40_and_41():
    import sys

    line = tuple(int(x) for x in pyspark.__version__.split(".")[:2])
    assert compat.pyspark_invalidates_import_caches_every_task() == (
        line in {(3, 5), (4, 0), (4, 1)})
    # Read without importing PySpark's worker module (that would make this process look like
    # a worker to prepare_worker).
    assert "pyspark.worker" not in sys.modules


def test_the_import_cache_fast_path_invalidates_only_when_sys_path_changed(monkeypatch):
    import importlib
    import sys

    from interlace.operators.common.worker import install_import_cache_fast_path

    calls = []
    monkeypatch.setattr(importlib, "invalidate_caches", lambda: calls.append(1))
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert install_import_cache_fast_path(force=True)
    assert not install_import_cache_fast_path(force=True)  # once per process
    importlib.invalidate_caches()
    importlib.invalidate_caches()
    assert calls == []  # as PySpark 4.2+: nothing added, nothing invalidated
    sys.path.append("/nonexistent/added-by-a-task")
    importlib.invalidate_caches()
    assert calls == [1]
    importlib.invalidate_caches()
    assert calls == [1]
    sys.path.remove("/nonexistent/added-by-a-task")
    importlib.invalidate_caches()
    assert calls == [1, 1]


def test_the_import_cache_fast_path_is_not_installed_where_pyspark_guards_itself(monkeypatch):
    import importlib

    from interlace.operators.common.worker import install_import_cache_fast_path

    monkeypatch.setattr(importlib, "invalidate_caches", lambda: None)
    monkeypatch.setattr(compat, "pyspark_invalidates_import_caches_every_task", lambda: False)
    assert not install_import_cache_fast_path()
    assert not getattr(importlib.invalidate_caches, "_interlace", False)


def test_observed_fields_reads_every_form_a_progress_holds():
    from pyspark.sql import Row

    assert compat.observed_fields(Row(rows=3, max_event_time=None)) == {
        "rows": 3, "max_event_time": None}
    assert compat.observed_fields({"rows": 4}) == {"rows": 4}  # a progress read from JSON
    assert compat.observed_fields(None) == {}  # not reported yet
    # Spark Connect: Row(values=[...], schema={...}).
    connect = Row(values=[5, "2026-01-01"], schema={"fields": [{"name": "rows"},
                                                               {"name": "max_event_time"}]})
    assert compat.observed_fields(connect) == {"rows": 5, "max_event_time": "2026-01-01"}
