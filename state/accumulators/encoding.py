"""msgpack encoding of accumulator state columns.

msgpack-native and deterministic: arrays as little-endian raw bytes with their dtype, numpy
scalars converted with ``.item()``, so equal states encode to equal bytes (pinned by
``tests/unit/state/test_accumulators_golden.py``).
"""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

#: The integers msgpack holds natively (int64 and uint64).
_MSGPACK_INT = (-(2**63), 2**64 - 1)


def _encode_object(value: Any) -> Any:
    """Encode one Python value msgpack-natively.

    Scalars msgpack knows stay as they are; others become ``[tag, text]``
    (values are never lists, so a list is always a tag).
    """
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, int) and not isinstance(value, bool) and not (
            _MSGPACK_INT[0] <= value <= _MSGPACK_INT[1]):
        return ["int", str(value)]  # a decimal sum's units may pass 64 bits
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    if isinstance(value, decimal.Decimal):
        return ["decimal", str(value)]
    if isinstance(value, _dt.datetime):
        return ["datetime", value.isoformat()]
    if isinstance(value, _dt.date):
        return ["date", value.isoformat()]
    msg = f"cannot store a {type(value).__name__} value in accumulator state: {value!r}"
    raise TypeError(msg)


def _decode_object(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        tag, text = value
        if tag == "decimal":
            return decimal.Decimal(text)
        if tag == "int":
            return int(text)
        if tag == "datetime":
            return _dt.datetime.fromisoformat(text)
        if tag == "date":
            return _dt.date.fromisoformat(text)
        msg = f"unknown tagged value in accumulator state: {value!r}"
        raise ValueError(msg)
    return value


def _encode_array(arr: NDArray[Any]) -> list[Any]:
    """Encode an array as ``[dtype, payload]``.

    The payload is the raw little-endian bytes; for object arrays a list of the
    values (dtype ``"O"``: strings, bytes and None only) or of encoded values
    (dtype ``"O+"``, see :func:`_encode_object`).
    """
    if arr.dtype.kind == "O":
        if pd.api.types.infer_dtype(arr, skipna=True) in ("string", "bytes", "empty"):
            return ["O", arr.tolist()]
        return ["O+", [_encode_object(v) for v in arr.tolist()]]
    little = arr.dtype.newbyteorder("<") if arr.dtype.byteorder != "|" else arr.dtype
    return [little.str, np.ascontiguousarray(arr, dtype=little).tobytes()]


def _decode_array(obj: Any) -> NDArray[Any]:
    dtype, payload = obj
    if dtype in ("O", "O+"):
        out = np.empty(len(payload), dtype=object)
        out[:] = payload if dtype == "O" else [_decode_object(v) for v in payload]
        return out
    return np.frombuffer(payload, dtype=np.dtype(dtype)).astype(np.dtype(dtype).newbyteorder("="))


def _check_header(obj: Any, agg: str, mode: str | None) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping) or obj.get("agg") != agg or obj.get("mode") != mode:
        got = (obj.get("agg"), obj.get("mode")) if isinstance(obj, Mapping) else type(obj)
        msg = f"accumulator state is not {agg} (mode {mode}): got {got}"
        raise ValueError(msg)
    return obj
