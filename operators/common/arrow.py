"""Arrow at the operators' edges: Spark schemas as Arrow schemas, frames in, tables out.

Spark hands an ``applyInPandasWithState`` function pandas frames and takes pandas frames back;
the operators' steps work on Arrow (``join/step.py``) or pandas (``window/step.py``). The
conversions both directions need are here, written once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray
from pyspark.sql import types as T

__all__ = ["arrow_schema_for", "frames_to_table", "i64", "table_to_pandas"]


def arrow_schema_for(
    schema: T.StructType, *, timestamp_unit: str = "ns", timestamp_tz: str | None = None
) -> pa.Schema:
    """Return the Arrow schema matching what Spark hands pandas for ``schema``.

    Timestamps arrive in pandas as naive ``datetime64[ns]`` in the session time zone, so by
    default they are kept naive here and round-trip unchanged. For files other tools read,
    ``timestamp_unit="us", timestamp_tz="UTC"`` gives what Spark itself writes for
    ``TimestampType`` (``TimestampNTZType`` stays naive).
    """
    from interlace.operators.common.compat import spark_to_arrow_type

    fields = []
    for f in schema.fields:
        if isinstance(f.dataType, T.TimestampType):
            at: pa.DataType = pa.timestamp(timestamp_unit, tz=timestamp_tz)
        elif isinstance(f.dataType, T.TimestampNTZType):
            at = pa.timestamp(timestamp_unit)
        else:  # timestamps nested in structs, arrays, maps: naive µs, as pandas holds them
            at = _with_naive_timestamps(spark_to_arrow_type(f.dataType), timestamp_tz)
        fields.append(pa.field(f.name, at, nullable=True))
    return pa.schema(fields)


def _with_naive_timestamps(t: pa.DataType, tz: str | None) -> pa.DataType:
    """``t`` with each nested timestamp's zone set to ``tz`` (``None``: naive)."""
    if pa.types.is_timestamp(t):
        return pa.timestamp(t.unit, tz=tz)
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_with_naive_timestamps(f.type, tz)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_with_naive_timestamps(t.key_type, tz)),
                       t.item_field.with_type(_with_naive_timestamps(t.item_type, tz)))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        field = t.value_field.with_type(_with_naive_timestamps(t.value_type, tz))
        return pa.list_(field) if pa.types.is_list(t) else pa.large_list(field)
    return t


def i64(a: pa.ChunkedArray | pa.Array) -> NDArray[np.int64]:
    """An Arrow integer column as an int64 numpy array (no copy where Arrow allows it)."""
    return np.asarray(a.to_numpy(), dtype=np.int64)


def frames_to_table(
    schema: pa.Schema, frames: Iterator[pd.DataFrame], sources: Sequence[str] = ()
) -> pa.Table:
    """Concatenate Spark's input frames into one Arrow table with ``schema``'s columns.

    Column ``i`` of the table is read from frame column ``sources[i]`` (default: the same
    name); a frame column named by several columns, such as a slot shared by both sides
    (:func:`interlace.operators.join.plan.payload_sources`), is converted once. One
    ``pa.array(..., from_pandas=True)`` per column (NaN/NaT become nulls, float64-with-NaN
    becomes a nullable int64): measured faster than ``pa.Table.from_pandas`` per frame
    (bench/join_variants.py ``fastconv``: 1.29x on the 10k-key workload, same output).
    """
    names = tuple(sources) or tuple(schema.names)
    tables = []
    for f in frames:
        if not len(f):
            continue
        done: dict[tuple[str, pa.DataType], pa.Array] = {}
        arrays = []
        for name, fld in zip(names, schema, strict=True):
            arr = done.get((name, fld.type))
            if arr is None:
                arr = done[(name, fld.type)] = pa.array(f[name], type=fld.type, from_pandas=True)
            arrays.append(arr)
        tables.append(pa.Table.from_arrays(arrays, schema=schema))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def table_to_pandas(table: pa.Table) -> pd.DataFrame:
    """Convert output rows to pandas without losing int64 precision to float NaN.

    Map columns become dicts, the form PySpark converts back to a ``MapType`` (Arrow's own
    ``(key, value)`` pairs fail the query there). Without Arrow's thread pool: Spark already
    keeps the cores busy.
    """
    return table.to_pandas(integer_object_nulls=True, date_as_object=True, use_threads=False,
                           maps_as_pydicts="lossy")
