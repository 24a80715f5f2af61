"""freeze_worker_gc in real PySpark Python workers: on by default, off with the variable."""

from __future__ import annotations

import pandas as pd
from pyspark.sql import functions as F

SCHEMA = "frozen long, env string"


def test_spark_workers_freeze_unless_turned_off(spark):
    def probe(pdf: pd.DataFrame) -> pd.DataFrame:
        import gc
        import os

        from interlace.operators.common.worker import prepare_worker as freeze_worker_gc

        freeze_worker_gc()
        return pd.DataFrame({"frozen": [gc.get_freeze_count()],
                             "env": [os.environ.get("INTERLACE_WORKER_GC_FREEZE", "")]})

    df = spark.range(8).withColumn("g", F.col("id") % 4)
    on = df.groupBy("g").applyInPandas(probe, SCHEMA).collect()
    # A Python worker is recognised as one (earlier tests' operators may have frozen it first).
    assert len(on) == 4 and all(r.frozen > 10_000 for r in on)

    # A UDF's environment selects its worker pool, so these calls run in fresh workers that
    # see the variable, as they would with spark.executorEnv.INTERLACE_WORKER_GC_FREEZE=0.
    env = spark.sparkContext.environment
    env["INTERLACE_WORKER_GC_FREEZE"] = "0"
    try:
        off = df.groupBy("g").applyInPandas(probe, SCHEMA).collect()
    finally:
        del env["INTERLACE_WORKER_GC_FREEZE"]
    assert len(off) == 4 and all(r.env == "0" and r.frozen == 0 for r in off)
