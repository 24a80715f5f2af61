"""The window oracle's public import path: a re-export of :mod:`interlace.testing.oracles`.

The reference model of the window aggregation lives in
:mod:`interlace.testing.oracles.window`; the Spark layer it shares with the join oracle is
in :mod:`interlace.testing.oracles.spark_rules`. This module keeps the documented import
path working:

>>> from interlace.testing.window_oracle import WindowBatch, WindowOracleResult, oracle_window
>>> WindowBatch(rows=[{"k": 1}]).rows
({'k': 1},)
"""

from interlace.testing.oracles.window import (
    AGGREGATIONS,
    DISTINCT_MODES,
    WINDOW_KINDS,
    WindowBatch,
    WindowLog,
    WindowOracleResult,
    WindowOracleRow,
    oracle_window,
)

__all__ = [
    "AGGREGATIONS",
    "DISTINCT_MODES",
    "WINDOW_KINDS",
    "WindowBatch",
    "WindowLog",
    "WindowOracleResult",
    "WindowOracleRow",
    "oracle_window",
]
