"""Compare collected outputs: exact multiset equality, and the checks a workload reports.

Outputs are compared as multisets of rows: both frames are normalised (timestamps to int64
µs, keys and counts to int64, doubles to float64), sorted by every column and compared
cell by cell, NULL equal to NULL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd


@dataclasses.dataclass
class Check:
    """One verification: ``what`` was compared, whether it held, and the numbers.

    ``by_design``: a difference the workload expects (a native that answers another question,
    e.g. stream-static's snapshot values): reported, not a failure.
    """

    what: str
    ok: bool
    detail: str
    by_design: bool = False

    @property
    def failed(self) -> bool:
        """A difference that makes the harness exit non-zero."""
        return not self.ok and not self.by_design


def to_us(col: pd.Series) -> np.ndarray:
    """Timestamps (tz-aware or naive; int64 µs already) to int64 µs; NULL to int64 min."""
    if pd.api.types.is_integer_dtype(col):
        return col.to_numpy(dtype=np.int64)
    s = pd.to_datetime(col, utc=True)
    out = s.dt.tz_localize(None).to_numpy().astype("datetime64[us]").view(np.int64)
    return np.where(s.isna().to_numpy(), np.iinfo(np.int64).min, out)


def normalize(frame: pd.DataFrame, columns: Sequence[str], times: Sequence[str] = (),
              ints: Sequence[str] = ()) -> pd.DataFrame:
    """``columns`` of ``frame``: ``times`` as int64 µs, ``ints`` as nullable Int64, the rest
    as given; sorted by every column (NULLs last), index reset."""
    out = frame.loc[:, list(columns)].copy()
    for c in times:
        out[c] = to_us(out[c])
    for c in ints:
        out[c] = pd.array(out[c], dtype="Int64")
    return out.sort_values(list(columns), kind="stable", na_position="last").reset_index(drop=True)


def diff_rows(a: pd.DataFrame, b: pd.DataFrame) -> tuple[int, int]:
    """Rows only in ``a`` and only in ``b`` (as multisets) of two normalised frames."""
    cols = list(a.columns)
    ca = a.assign(_n=a.groupby(cols, dropna=False).cumcount())
    cb = b.assign(_n=b.groupby(cols, dropna=False).cumcount())
    m = ca.merge(cb, how="outer", on=[*cols, "_n"], indicator=True)
    return int((m["_merge"] == "left_only").sum()), int((m["_merge"] == "right_only").sum())


def same_rows(a: pd.DataFrame, b: pd.DataFrame, what: str) -> Check:
    """Exact multiset equality of two normalised frames with the same columns."""
    if len(a) == len(b) and a.equals(b):
        return Check(what, True, f"{len(a):,} rows, identical")
    only_a, only_b = diff_rows(a, b)
    return Check(what, False, f"{len(a):,} vs {len(b):,} rows; {only_a:,} only in the first, "
                              f"{only_b:,} only in the second")


def auto_normalize(frame: pd.DataFrame) -> pd.DataFrame:
    """Every column of ``frame``, datetimes as int64 µs, sorted by every column."""
    times = [c for c in frame.columns if pd.api.types.is_datetime64_any_dtype(frame[c])]
    return normalize(frame, list(frame.columns), times=times)


def count_check(what: str, got: int, want: int, by_design: bool = False) -> Check:
    """``got == want`` for a row count or a sum."""
    return Check(what, got == want, f"{got:,} (expected {want:,})", by_design and got != want)
