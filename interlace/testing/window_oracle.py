"""The window oracle's public import path: a re-export of :mod:`interlace.testing.oracles`.

The reference model of the window aggregation lives in
:mod:`interlace.testing.oracles.window`; the Spark layer it shares with the join oracle is
in :mod:`interlace.testing.oracles.spark_rules`. This module keeps the documented import
path working and exports the public names of :mod:`interlace.testing.oracles.window`:

>>> from interlace.testing.window_oracle import WindowBatch, WindowOracleResult, oracle_window
>>> WindowBatch(rows=[{"k": 1}]).rows
({'k': 1},)
"""

from interlace.testing.oracles import window
from interlace.testing.oracles.window import *  # noqa: F403 -- exactly window.__all__

__all__: list[str] = []
__all__ += window.__all__
