"""Operator counters collected from the Python workers with a Spark accumulator.

Every ``step`` call returns per-call counts (matches, unmatched rows emitted, late rows dropped,
null-key rows dropped, rows dead-lettered, rows evicted); the operator function adds them to an
accumulator, so rows that are not emitted are still accounted for on the driver::

    counters = interlace.metrics.counters(spark)
    out = stream_join(left, right, spec, counters=counters)
    ...
    counters.value  # {"matches": 120, "late_dropped_left": 3, ...}

Rows that Spark itself drops behind its watermark before the operator sees them are counted by
Spark, in the query progress (``stateOperators[].numRowsDroppedByWatermark``). Accumulator
updates from a retried task may be counted twice (Spark's accumulator semantics): treat them as
metrics, not as data.
"""

from __future__ import annotations

from typing import Any

from pyspark.accumulators import AccumulatorParam

__all__ = ["CounterParam", "counters"]


class CounterParam(AccumulatorParam):  # type: ignore[type-arg]
    """Adds dicts of name -> int."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        """Return an empty dict."""
        return {}

    def addInPlace(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:  # noqa: N802
        """Add ``b`` into ``a``."""
        for k, v in b.items():
            a[k] = a.get(k, 0) + v
        return a


def counters(spark: Any) -> Any:
    """Return a new counters accumulator (``.value`` is a dict name -> int)."""
    return spark.sparkContext.accumulator({}, CounterParam())
