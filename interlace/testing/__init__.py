"""Test tools users can run on their own logs: oracles, replay harness, local driver.

* :func:`oracle_join`, :func:`oracle_window` — naive reference models of SEMANTICS.md; they
  import nothing from the operators or the state code, so they can judge them.
* :func:`replay_join`, :func:`replay_streams` — replay a log through real Spark, one
  micro-batch per log batch, and collect the output per batch.
* :func:`run_join_locally`, :func:`run_window_locally` — run the operators' own
  ``applyInPandasWithState`` functions without Spark, with Spark's watermark rules.
"""

from interlace.testing.local import run_join_locally, run_window_locally
from interlace.testing.log import JoinBatch, to_us
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.replay import ReplayResult, replay_join, replay_streams
from interlace.testing.window_oracle import WindowBatch, oracle_window

__all__ = [
    "JoinBatch",
    "ReplayResult",
    "WindowBatch",
    "canonical_rows",
    "oracle_join",
    "oracle_window",
    "replay_join",
    "replay_streams",
    "run_join_locally",
    "run_window_locally",
    "to_us",
]
