"""The padding fast path gives pandas' own concatenation results, and only faster.

``install_padding_fast_path`` replaces pandas 2.x's ``JoinUnit._is_valid_na_for`` in a PySpark
worker (operators/common/worker.py). Each case concatenates the same frames with pandas' method
and with the replacement and asserts identical frames and dtypes; the cases cover the blocks
the shortcut answers (one NA object repeated, valid or not for the result's dtype) and the ones
it hands back (mixed NA objects, values that are not NA).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from interlace.operators.common.worker import install_padding_fast_path
from pandas.core.internals import concat as pandas_concat

# Proves the fast path exact against the pandas of each PySpark line (.ci/compat).
pytestmark = pytest.mark.compat


def _state_rows(n: int) -> list[pd.DataFrame]:
    return [pd.DataFrame.from_dict({"properties": [b'{"timeoutMs": -1}'],
                                    "keyRowAsUnsafe": [b"\0" * 16], "object": [None],
                                    "oldTimeoutTimestamp": [-1]}) for _ in range(n)]


def _padding(n: int) -> pd.DataFrame:
    # What PySpark 4.3's construct_record_batch pads the state rows with.
    return pd.DataFrame(columns=["properties", "keyRowAsUnsafe", "object", "oldTimeoutTimestamp"],
                        index=[x for x in range(n)])


NAT = pd.NaT
CASES = {
    "pyspark's state padding": lambda: [*_state_rows(3), _padding(500)],
    "padding only": lambda: [_padding(0), _padding(7)],
    "one None repeated under floats": lambda: [
        pd.DataFrame({"x": [1.5]}), pd.DataFrame({"x": np.array([None] * 6, dtype=object)})],
    # NaT is no valid NA of a float column: pandas keeps the objects (a shortcut that said
    # "valid" would give float64 NaN).
    "one NaT repeated under floats": lambda: [
        pd.DataFrame({"x": [1.5]}), pd.DataFrame({"x": np.array([NAT] * 6, dtype=object)})],
    "one NaT repeated under timestamps": lambda: [
        pd.DataFrame({"x": pd.to_datetime(["2026-01-01"])}),
        pd.DataFrame({"x": np.array([NAT] * 6, dtype=object)})],
    "one pd.NA repeated under ints": lambda: [
        pd.DataFrame({"x": [1]}), pd.DataFrame({"x": np.array([pd.NA] * 6, dtype=object)})],
    "None and NaN mixed": lambda: [
        pd.DataFrame({"x": [1.5]}), pd.DataFrame({"x": np.array([None, np.nan] * 3, dtype=object)})],
    "NaN and NaT mixed": lambda: [
        pd.DataFrame({"x": [1.5]}), pd.DataFrame({"x": np.array([np.nan, NAT] * 3, dtype=object)})],
    "one value repeated, not NA": lambda: [
        pd.DataFrame({"x": [1.5]}), pd.DataFrame({"x": np.array([b"v"] * 6, dtype=object)})],
    "two columns, one block": lambda: [
        pd.DataFrame({"x": [1.5], "y": [2]}),
        pd.DataFrame({"x": np.array([None] * 4, dtype=object),
                      "y": np.array([None] * 4, dtype=object)})],
}


@pytest.fixture
def restore_pandas(monkeypatch):
    # The fast path patches pandas' class: start from pandas' own method (even if an earlier
    # test installed the fast path) and put back what was there after the test.
    current = pandas_concat.JoinUnit._is_valid_na_for
    monkeypatch.setattr(pandas_concat.JoinUnit, "_is_valid_na_for",
                        getattr(current, "__wrapped__", current))
    return pandas_concat.JoinUnit._is_valid_na_for


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_fast_path_concatenates_as_pandas_does(case, restore_pandas):
    make = CASES[case]
    want = pd.concat(make(), ignore_index=True)
    assert install_padding_fast_path() is True
    assert pandas_concat.JoinUnit._is_valid_na_for is not restore_pandas
    got = pd.concat(make(), ignore_index=True)
    assert list(got.dtypes) == list(want.dtypes)
    pd.testing.assert_frame_equal(got, want)
    assert [type(v) for v in got.to_numpy().ravel()] == [type(v) for v in want.to_numpy().ravel()]


def test_installs_once_and_asks_once_per_block_not_once_per_value(restore_pandas, monkeypatch):
    calls = []
    original = pandas_concat.is_valid_na_for_dtype

    def counted(obj, dtype):
        calls.append(obj)
        return original(obj, dtype)

    monkeypatch.setattr(pandas_concat, "is_valid_na_for_dtype", counted)
    pd.concat([*_state_rows(4), _padding(1_000)], ignore_index=True)
    per_value = len(calls)
    assert per_value >= 1_000  # pandas' own: a Python call per padded value
    calls.clear()
    assert install_padding_fast_path() is True
    assert install_padding_fast_path() is False  # already there
    got = pd.concat([*_state_rows(4), _padding(1_000)], ignore_index=True)
    assert 1 <= len(calls) <= 4  # once per block
    assert len(got) == 1_004 and got["oldTimeoutTimestamp"].iloc[:4].tolist() == [-1] * 4
