"""Spark's own Delta reader (delta-spark) reads the table the Delta target wrote.

The target writes with delta-rs; a Spark user reads the table with
``spark.read.format("delta")``. A changelog (a delete, a newer version replacing a row) and
window output with UTC timestamps are written, then read back in a separate Spark process
started with delta-spark's jars (resolved with Maven: :func:`interlace.connectors.jars.
delta_spark_jars`) and its session extension; the rows equal delta-rs's. delta-spark is built
per Spark line and Maven Central serves it for 3.5 (3.3.2) and 4.0 to 4.2 (4.4.0), not for
4.3: on 4.3 this test is skipped, and the compatibility tier runs it on the served lines
(docs/delta.md#reading-the-table).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pandas as pd
import pyspark
import pytest
from delta_support import delta_rows
from pyspark.sql import types as T

from interlace.connectors.delta import DeltaTarget
from interlace.connectors.jars import DELTA_SPARK, delta_spark_jars

LINE = ".".join(pyspark.__version__.split(".")[:2])
pytestmark = [pytest.mark.spark, pytest.mark.compat, pytest.mark.skipif(
    LINE not in DELTA_SPARK, reason=f"Maven Central serves no delta-spark for PySpark {LINE}")]

READ = """
import json, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.jars", sys.argv[1])
         .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog",
                 "org.apache.spark.sql.delta.catalog.DeltaCatalog")
         .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false")
         .getOrCreate())
df = spark.read.format("delta").load(sys.argv[2])
print(json.dumps({"schema": df.schema.simpleString(),
                  "rows": [r.asDict() for r in df.collect()]}, default=str))
"""

SCHEMA = T.StructType([
    T.StructField("id", T.StringType()), T.StructField("amount", T.DoubleType()),
    T.StructField("op", T.StringType()), T.StructField("event_time", T.TimestampType()),
    T.StructField("version", T.LongType()),
])


def test_spark_reads_the_delta_targets_table_as_delta_rs_does(tmp_path):
    path = tmp_path / "table"
    target = DeltaTarget(str(path), "p", ("id",), changelog=True)
    target.prepare(SCHEMA)
    at = lambda s: dt.datetime(2026, 1, 1) + dt.timedelta(seconds=s)  # noqa: E731
    target.write(pd.DataFrame([("a", 1.0, "upsert", at(1), 0), ("b", 2.0, "upsert", at(2), 0),
                               ("c", 3.0, "upsert", at(3), 0)], columns=SCHEMA.names), 0)
    target.write(pd.DataFrame([("a", 5.0, "upsert", at(4), 1), ("b", None, "delete", at(5), 1)],
                              columns=SCHEMA.names), 1)
    jars = ",".join(str(j) for j in delta_spark_jars())
    proc = subprocess.run([sys.executable, "-c", READ, jars, str(path)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TZ": "UTC"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["schema"] == ("struct<id:string,amount:double,event_time:timestamp,"
                             "version:bigint>")
    want = sorted((r["id"], r["amount"], str(r["event_time"]), r["version"])
                  for r in delta_rows(path))
    assert sorted((r["id"], r["amount"], r["event_time"], r["version"])
                  for r in got["rows"]) == want == [
        ("a", 5.0, "2026-01-01 00:00:04", 1), ("c", 3.0, "2026-01-01 00:00:03", 0)]
