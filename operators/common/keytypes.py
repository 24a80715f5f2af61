"""Key types: the type two inputs' key columns are compared in (Spark's type widening).

The join (``join/plan.py``) and the stream-table join (``stream_table/plan.py``) compare a key
column of one input with one of the other: :func:`common_key_arrow_type` gives the Arrow type
the step casts both to, :func:`spark_common_key_type` the Spark type the key group is hashed in
(so equal keys land in the same key group whatever their input types).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from interlace.operators.errors import ConfigError

__all__ = ["check_key_type", "common_key_arrow_type", "spark_common_key_type", "spark_key_types"]


def _nested(t: pa.DataType) -> bool:
    return bool(pa.types.is_nested(t) or pa.types.is_dictionary(t))


def check_key_type(field: str, name: str, typ: pa.DataType, what: str = "") -> None:
    """Raise :class:`ConfigError` if key column ``name`` has a type keys cannot be compared in.

    Keys (join keys, ``group_by`` columns) are compared by dictionary-encoding each column
    (:mod:`.keys`), which Arrow does for atomic types (numbers, decimals, strings, binary,
    booleans, dates, timestamps, durations) but not for structs, arrays or maps; Spark cannot
    hash a map into a key group either.

    Args:
        field: The spec field listing the column (``left_keys``, ``group_by``).
        name: The column.
        typ: Its Arrow type.
        what: The input, for the message (``"the input"``; empty: the field names it).
    """
    if _nested(typ):
        msg = (
            f"`{field}` column {name!r}{f' of {what}' if what else ''} has type {typ}; "
            "interlace compares keys of "
            "atomic types only (numbers, decimals, strings, binary, booleans, dates, "
            "timestamps), not structs, arrays or maps; key on its fields, or on "
            f"F.to_json({name!r}) (a string), instead"
        )
        raise ConfigError(msg)


def _decimal_of_arrow(t: pa.DataType) -> tuple[int, int]:
    return (t.precision, t.scale) if pa.types.is_decimal(t) else (20, 0)


def _widen_decimal(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Spark's decimal widening for comparisons: enough integer and fraction digits (max 38)."""
    scale = max(a[1], b[1])
    whole = max(a[0] - a[1], b[0] - b[1])
    return min(whole + scale, 38), min(scale, 38)


def common_key_arrow_type(
    lname: str,
    ltype: pa.DataType,
    rname: str,
    rtype: pa.DataType,
    fields: tuple[str, str] = ("left_keys", "right_keys"),
) -> pa.DataType:
    """Return the Arrow type the key columns ``lname`` and ``rname`` are compared in.

    ``fields`` names the spec fields that list them, for the message (the foreign-key join
    compares ``foreign_key_columns`` with ``right_keys``).

    Raises:
        ConfigError: The two types have no common type (naming both key fields), or one is
            nested (:func:`check_key_type`).
    """
    check_key_type(fields[0], lname, ltype)
    check_key_type(fields[1], rname, rtype)
    if ltype.equals(rtype):
        return ltype
    if pa.types.is_integer(ltype) and pa.types.is_integer(rtype):
        return pa.int64()
    exact = (pa.types.is_integer, pa.types.is_decimal)
    if all(any(p(t) for p in exact) for t in (ltype, rtype)):
        p_, s_ = _widen_decimal(_decimal_of_arrow(ltype), _decimal_of_arrow(rtype))
        return pa.decimal128(p_, s_)
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)
    if any(p(ltype) for p in numeric) and any(p(rtype) for p in numeric):
        return pa.float64()
    if (
        pa.types.is_string(ltype)
        and pa.types.is_large_string(rtype)
        or (pa.types.is_large_string(ltype) and pa.types.is_string(rtype))
    ):
        return pa.large_string()
    msg = (
        f"key columns `{fields[0]}` {lname!r} ({ltype}) and `{fields[1]}` {rname!r} ({rtype}) "
        "have incompatible types; cast one side so both keys have the same type"
    )
    raise ConfigError(msg)


def spark_common_key_type(lt: Any, rt: Any) -> Any:
    """Return the Spark type two key columns are compared in, ``None`` if incompatible."""
    from pyspark.sql import types as T

    if lt == rt:
        return lt
    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    numeric = (*integral, T.FloatType, T.DoubleType, T.DecimalType)
    if isinstance(lt, integral) and isinstance(rt, integral):
        return T.LongType()
    exact = (*integral, T.DecimalType)
    if isinstance(lt, exact) and isinstance(rt, exact):

        def dec(t: Any) -> tuple[int, int]:
            return (t.precision, t.scale) if isinstance(t, T.DecimalType) else (20, 0)

        p_, s_ = _widen_decimal(dec(lt), dec(rt))
        return T.DecimalType(p_, s_)
    if isinstance(lt, numeric) and isinstance(rt, numeric):
        return T.DoubleType()
    return None


def spark_key_types(
    left: Any,
    right: Any,
    left_keys: Sequence[str],
    right_keys: Sequence[str],
    fields: tuple[str, str] = ("left_keys", "right_keys"),
) -> list[Any]:
    """Return the Spark type each key pair of two DataFrames is compared (and hashed) in.

    ``fields`` names the spec fields listing the two sides' columns, for the message.

    Raises:
        ConfigError: A pair has no common type (naming both key fields and the fix).
    """
    types = []
    for lk, rk in zip(left_keys, right_keys, strict=True):
        lt, rt = left.schema[lk].dataType, right.schema[rk].dataType
        common = spark_common_key_type(lt, rt)
        if common is None:
            msg = (
                f"key columns `{fields[0]}` {lk!r} ({lt.simpleString()}) and `{fields[1]}` "
                f"{rk!r} ({rt.simpleString()}) have incompatible types; cast one side so both "
                "keys have the same type"
            )
            raise ConfigError(msg)
        types.append(common)
    return types
