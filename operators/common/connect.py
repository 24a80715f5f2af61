"""Spark Connect detection: what needs a classic SparkSession says so before a query starts.

Used by the operators' input checks (``check_counters``) and by :func:`interlace.metrics.counters`.
"""

from __future__ import annotations

from interlace.operators.errors import ConfigError

__all__ = ["check_counters", "is_connect", "require_classic"]


def is_connect(obj: object) -> bool:
    """Whether ``obj`` (a SparkSession or DataFrame) is a Spark Connect client object.

    By type, not by :func:`pyspark.sql.utils.is_remote` (a process-wide flag), and without
    importing ``pyspark.sql.connect`` (which needs the ``connect`` extra).
    """
    return type(obj).__module__.startswith("pyspark.sql.connect.")


def require_classic(obj: object, feature: str, instead: str) -> None:
    """Raise :class:`ConfigError` naming ``feature`` if ``obj`` belongs to Spark Connect."""
    if is_connect(obj):
        msg = (
            f"{feature} needs a classic SparkSession: Spark Connect clients have no "
            f"SparkContext, hence no accumulators. {instead} (docs/deploy.md, \"Spark Connect\")"
        )
        raise ConfigError(msg)


def check_counters(df: object, counters: object) -> None:
    """Raise :class:`ConfigError` if ``counters`` is given with a Spark Connect ``df``."""
    if counters is not None:
        require_classic(
            df,
            "`counters` (a SparkContext accumulator)",
            "Leave `counters` unset over Spark Connect; the query progress still counts the rows "
            "Spark dropped (interlace.metrics.spark_dropped_rows)",
        )
