"""A SparkSession for local use, set up the way interlace is tested."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["local_session"]


def local_session(
    app_name: str = "interlace",
    *,
    master: str = "local[2]",
    shuffle_partitions: int = 4,
    conf: Mapping[str, str] | None = None,
) -> Any:
    """Return (or create) a local SparkSession for interlace.

    Sets ``PYSPARK_PYTHON`` (and the driver's) to the running interpreter so Python workers
    import the same interlace, turns the UI and console progress bar off, uses UTC as the
    session time zone and a small number of shuffle partitions.

    Args:
        app_name: Spark application name.
        master: Spark master URL.
        shuffle_partitions: ``spark.sql.shuffle.partitions``.
        conf: Extra Spark settings (win over the defaults).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # PySpark 4.3's own worker code (not interlace) triggers this pandas 2.x FutureWarning on
    # every grouped call; local workers inherit the environment, so silence just that message.
    os.environ.setdefault(
        "PYTHONWARNINGS", "ignore:The behavior of DataFrame concatenation:FutureWarning"
    )
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.memory": "2g",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    }
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
