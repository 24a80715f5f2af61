"""prepare_worker in real PySpark Python workers: the GC freeze on by default, off with the
variable; the padding fast path installed; the import cache fast path exactly where this
PySpark invalidates the import caches at every task (4.0, 4.1)."""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import functions as F

SCHEMA = "frozen long, env string, padding boolean, imports boolean"


@pytest.mark.compat  # the compatibility tier (.ci/compat): every supported PySpark line
def test_spark_workers_freeze_unless_turned_off(spark):
    def probe(pdf: pd.DataFrame) -> pd.DataFrame:
        import gc
        import importlib
        import os

        from interlace.operators.common.worker import prepare_worker as freeze_worker_gc

        from pandas.core.internals.concat import JoinUnit

        freeze_worker_gc()
        return pd.DataFrame({"frozen": [gc.get_freeze_count()],
                             "env": [os.environ.get("INTERLACE_WORKER_GC_FREEZE", "")],
                             "padding": [getattr(JoinUnit._is_valid_na_for, "_interlace", False)],
                             "imports": [getattr(importlib.invalidate_caches, "_interlace",
                                                 False)]})

    df = spark.range(8).withColumn("g", F.col("id") % 4)
    on = df.groupBy("g").applyInPandas(probe, SCHEMA).collect()
    # A Python worker is recognised as one (earlier tests' operators may have frozen it first).
    assert len(on) == 4 and all(r.frozen > 10_000 and r.padding for r in on)
    from interlace.operators.common.compat import pyspark_invalidates_import_caches_every_task

    assert {r.imports for r in on} == {pyspark_invalidates_import_caches_every_task()}

    # A UDF's environment selects its worker pool, so these calls run in fresh workers that
    # see the variable, as they would with spark.executorEnv.INTERLACE_WORKER_GC_FREEZE=0.
    env = spark.sparkContext.environment
    env["INTERLACE_WORKER_GC_FREEZE"] = "0"
    try:
        off = df.groupBy("g").applyInPandas(probe, SCHEMA).collect()
    finally:
        del env["INTERLACE_WORKER_GC_FREEZE"]
    # The freeze's variable leaves the padding fast path on.
    assert len(off) == 4 and all(r.env == "0" and r.frozen == 0 and r.padding for r in off)
