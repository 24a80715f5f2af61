"""Value columns in canonical form: normalisation, state dtypes and their promotion.

Every accumulator reads its value column through :func:`_normalize`, which turns numpy, pandas
or pyarrow input into one of the :data:`ValueDtype` dtypes plus a validity mask (NULL, NaN and
NaT are NULLs), and folds it into state columns whose dtype :func:`_retype` chooses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, Union, cast

import numpy as np
import pandas as pd
from numpy.typing import NDArray

ValueDtype = Literal["int64", "float64", "bool", "object"]
"""State dtype of a value column.

- ``int64``: integers and timestamps (microseconds since the epoch, UTC).
- ``float64``: floating point.
- ``bool``: booleans.
- ``object``: anything compared as Python objects (strings, bytes, Decimal).
"""

ValuesLike: TypeAlias = Union["NDArray[Any]", "pd.Series[Any]", Any]
"""A numpy array, a pandas Series/ExtensionArray or a pyarrow array."""


@dataclass(frozen=True, slots=True, eq=False)
class _Values:
    """A value column in canonical form.

    ``data`` has one of the :data:`ValueDtype` dtypes and the input's length;
    positions where ``valid`` is False hold a filler and must be ignored.
    """

    data: NDArray[Any]
    valid: NDArray[np.bool_]
    dtype: ValueDtype


def _dtype_name(arr: NDArray[Any]) -> ValueDtype:
    kind = arr.dtype.kind
    if kind == "i":
        return "int64"
    if kind == "f":
        return "float64"
    if kind == "b":
        return "bool"
    return "object"


def _filler(dtype: ValueDtype) -> Any:
    """Return the value that fills empty slots, so equal states encode equally."""
    return {"int64": 0, "float64": 0.0, "bool": False, "object": None}[dtype]


def _empty_column(dtype: ValueDtype, n: int) -> NDArray[Any]:
    if dtype == "object":
        return np.full(n, None, dtype=object)
    return np.zeros(n, dtype=np.dtype(dtype))


def _zeros(dtype: ValueDtype, n: int) -> NDArray[Any]:
    """Return ``n`` additive zeros (Python ``0`` for object, which adds to Decimal)."""
    if dtype == "object":
        return np.zeros(n, dtype=np.int64).astype(object)
    return np.zeros(n, dtype=np.dtype(dtype))


def _datetimes_to_us(arr: NDArray[Any]) -> NDArray[np.int64]:
    # numpy floors when it coarsens a datetime64 unit, also before 1970.
    return arr.astype("datetime64[us]").view(np.int64)


def _normalize_numpy(arr: NDArray[Any]) -> _Values:
    kind = arr.dtype.kind
    n = arr.shape[0]
    if kind in "iu":
        return _Values(arr.astype(np.int64, copy=False), np.ones(n, dtype=bool), "int64")
    if kind == "f":
        data = arr.astype(np.float64, copy=False)
        valid = ~np.isnan(data)
        return _Values(np.where(valid, data, 0.0), valid, "float64")
    if kind == "b":
        return _Values(arr.astype(bool, copy=False), np.ones(n, dtype=bool), "bool")
    if kind in "mM":
        valid = ~np.isnat(arr)
        unit = "timedelta64[us]" if kind == "m" else "datetime64[us]"
        data = arr.astype(unit).view(np.int64)
        return _Values(np.where(valid, data, 0), valid, "int64")
    if kind in "US":
        return _Values(arr.astype(object), np.ones(n, dtype=bool), "object")
    obj = arr.astype(object, copy=False)
    valid = ~np.asarray(pd.isna(obj), dtype=bool)
    if valid.all():
        present = obj
    else:
        present = obj[valid]
    inferred = pd.api.types.infer_dtype(present, skipna=False) if len(present) else "empty"
    target: ValueDtype | None = None
    if inferred == "integer":
        target = "int64"
    elif inferred in ("floating", "mixed-integer-float"):
        target = "float64"
    elif inferred == "boolean":
        target = "bool"
    elif inferred in ("datetime", "datetime64"):
        stamps = pd.to_datetime(pd.Series(present, dtype=object), utc=True)
        us = _datetimes_to_us(stamps.dt.tz_localize(None).to_numpy())
        data = np.zeros(n, dtype=np.int64)
        data[valid] = us
        return _Values(data, valid, "int64")
    if target is None:
        data = obj.copy()
        data[~valid] = None
        return _Values(data, valid, "object")
    data = np.full(n, _filler(target), dtype=np.dtype(target))
    data[valid] = present.astype(np.dtype(target))
    return _Values(data, valid, target)


def _normalize(values: ValuesLike, n: int) -> _Values:
    """Turn ``values`` (numpy, pandas or pyarrow) into canonical form.

    Raises:
        ValueError: ``values`` is None or does not have ``n`` elements.

    """
    if values is None:
        msg = "`values` is required (one per row); only count(*) takes values=None"
        raise ValueError(msg)
    if isinstance(values, (pd.Series, pd.Index)):
        values = values.array
    elif not isinstance(values, (np.ndarray, pd.api.extensions.ExtensionArray)) and hasattr(
        values, "to_pandas"
    ):
        values = values.to_pandas().array  # pyarrow Array / ChunkedArray
    if isinstance(values, pd.api.extensions.ExtensionArray):
        dtype = values.dtype
        if isinstance(dtype, pd.DatetimeTZDtype):
            values = values.tz_convert("UTC").tz_localize(None)
            out = _normalize_numpy(np.asarray(values.to_numpy(), dtype="datetime64[ns]"))
        elif dtype.kind in "iufb" and not isinstance(values, pd.arrays.NumpyExtensionArray):
            isna = np.asarray(values.isna(), dtype=bool)
            target = {"i": "int64", "u": "int64", "f": "float64", "b": "bool"}[dtype.kind]
            data = values.to_numpy(dtype=target, na_value=_filler(cast(ValueDtype, target)))
            out = _Values(data, ~isna, cast(ValueDtype, target))
        elif isinstance(values, pd.arrays.NumpyExtensionArray) or dtype.kind in "mM":
            out = _normalize_numpy(values.to_numpy())
        else:  # strings, categoricals, arrow-backed columns...
            out = _normalize_numpy(values.to_numpy(dtype=object, na_value=None))
    else:
        out = _normalize_numpy(np.asarray(values))
    if out.data.shape != (n,):
        msg = f"`values` must have one element per slot (got {out.data.shape[0]}, expected {n})"
        raise ValueError(msg)
    return out


def _coerce(data: NDArray[Any], src: ValueDtype, dst: ValueDtype) -> NDArray[Any]:
    """Cast non-null ``data`` of dtype ``src`` to ``dst``."""
    if src == dst:
        return data
    if dst == "object":
        return data.astype(object)
    return data.astype(np.dtype(dst))


def _promote(a: ValueDtype, b: ValueDtype) -> ValueDtype:
    """Return the dtype that holds both ``a`` and ``b`` values."""
    if a == b:
        return a
    if "object" in (a, b):
        return "object"
    if "float64" in (a, b):
        return "float64"
    return "int64"  # int64 with bool


def _unify(
    column: NDArray[Any],
    column_used: bool,
    incoming: ValueDtype,
    configured: ValueDtype | None,
) -> ValueDtype:
    """Choose the dtype a value column has after taking in ``incoming`` values.

    A configured dtype always wins. Otherwise an unused column adopts the
    incoming dtype and a used one is promoted (int64 + float64 -> float64).
    """
    if configured is not None:
        return configured
    if not column_used:
        return incoming
    return _promote(_dtype_name(column), incoming)


def _retype(
    column: NDArray[Any],
    column_used: bool,
    data: NDArray[Any],
    dtype: ValueDtype,
    configured: ValueDtype | None,
) -> tuple[ValueDtype, NDArray[Any], NDArray[Any]]:
    """Bring a state column and incoming ``data`` of ``dtype`` to one dtype (see :func:`_unify`).

    Returns:
        The chosen dtype, ``column`` and ``data`` cast to it (uncopied where already of it).

    """
    target = _unify(column, column_used, dtype, configured)
    return target, _coerce(column, _dtype_name(column), target), _coerce(data, dtype, target)


def _nullable_series(data: NDArray[Any], valid: NDArray[np.bool_]) -> pd.Series[Any]:
    """Wrap a value column as a Series with SQL NULLs where ``valid`` is False."""
    kind = data.dtype.kind
    mask = ~valid
    if kind == "i":
        return pd.Series(pd.arrays.IntegerArray(data.astype(np.int64), mask.copy()))
    if kind == "f":
        return pd.Series(pd.arrays.FloatingArray(data.astype(np.float64), mask.copy()))
    if kind == "b":
        return pd.Series(pd.arrays.BooleanArray(data.astype(bool), mask.copy()))
    out = data.astype(object)
    out[mask] = None
    return pd.Series(out, dtype=object)


def _order_codes(values: NDArray[Any]) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """Factorize non-null ``values`` into codes that sort like the values.

    Equal values share a code and ``codes[i] < codes[j]`` iff
    ``values[i] < values[j]``, so strings or Decimals can be reduced with integer
    ufuncs. Hash-based: only the distinct values are compared (sorted).

    Returns:
        The codes and the distinct values (``uniques[codes] == values``).

    """
    codes, uniques = pd.factorize(values, sort=True)
    return np.asarray(codes, dtype=np.int64), np.asarray(uniques, dtype=values.dtype)
