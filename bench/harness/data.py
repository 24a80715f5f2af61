"""Input files shared by every workload: Parquet per micro-batch, read back as a stream.

Each input of a workload is a folder holding one Parquet file per micro-batch, written up
front (not timed) with mtimes in batch order, so a file source with ``maxFilesPerTrigger=1``
reads file ``i`` in micro-batch ``i`` (with two inputs, file ``i`` of each). Both engines read
the same files.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

#: Event time of the first row: a multiple of 60 s, so windows align with micro-batches.
T0 = dt.datetime(2026, 3, 2, 9, 0, 0, tzinfo=dt.timezone.utc)
T0_US = int(T0.timestamp() * 1_000_000)
TS = pa.timestamp("us", tz="UTC")
_BASE_MTIME = 1_700_000_000.0


def write_batches(d: Path, tables: list[pa.Table]) -> None:
    """Write ``tables[i]`` to ``d/<i>.parquet``, mtimes in order (file ``i`` = batch ``i``)."""
    d.mkdir(parents=True, exist_ok=True)
    for i, table in enumerate(tables):
        path = d / f"{i:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        os.utime(path, (_BASE_MTIME + i, _BASE_MTIME + i))


def table(schema: pa.Schema, columns: list[Any]) -> pa.Table:
    """An Arrow table of ``schema`` from numpy columns (int64 µs for timestamp fields)."""
    arrays = [pa.array(c).cast(f.type) if f.type == TS else pa.array(c, type=f.type)
              for f, c in zip(schema, columns, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


def spark_schema(schema: pa.Schema) -> Any:
    """The Spark schema of an Arrow schema of int64 / float64 / bool / UTC µs timestamps."""
    from pyspark.sql import types as T

    types = {pa.int64(): T.LongType(), pa.float64(): T.DoubleType(), pa.bool_(): T.BooleanType(),
             TS: T.TimestampType()}
    return T.StructType([T.StructField(f.name, types[f.type]) for f in schema])


def read_stream(spark: Any, d: Path, schema: pa.Schema) -> Any:
    """A streaming DataFrame over folder ``d``, one file per micro-batch."""
    return (spark.readStream.schema(spark_schema(schema)).option("maxFilesPerTrigger", 1)
            .parquet(str(d)))
