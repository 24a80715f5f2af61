"""The join oracle's public import path: a re-export of :mod:`interlace.testing.oracles`.

The reference model of the stream-stream join lives in
:mod:`interlace.testing.oracles.join`, the Spark layer it shares with the window oracle in
:mod:`interlace.testing.oracles.spark_rules`, and the output rows (dead letters,
:func:`canonical_rows`) in :mod:`interlace.testing.oracles.rows`. This module keeps the
documented import path working:

>>> from interlace.testing.oracle import DEAD_LETTER_COLUMN, canonical_rows, oracle_join
>>> canonical_rows([{"b": 1, DEAD_LETTER_COLUMN: None}])
[(('_dead_letter', None), ('b', 1))]
"""

from interlace.testing.log import JoinBatch, JoinLog, to_us
from interlace.testing.oracles.join import JOIN_HOWS, JoinOracleResult, oracle_join
from interlace.testing.oracles.rows import (
    DEAD_LETTER_COLUMN,
    OracleRow,
    canonical_row,
    canonical_rows,
    dead_letter_json_value,
)
from interlace.testing.oracles.spark_rules import (
    WATERMARK_POLICIES,
    operator_wm_us,
    processing_time_stamps,
    spark_drops_row,
    spark_event_time_ms,
)
from interlace.testing.oracles.spec import DEFAULT_DLQ_HORIZON_MS, LATE_DATA_MODES

__all__ = [
    "DEAD_LETTER_COLUMN",
    "DEFAULT_DLQ_HORIZON_MS",
    "JOIN_HOWS",
    "LATE_DATA_MODES",
    "WATERMARK_POLICIES",
    "JoinBatch",
    "JoinLog",
    "JoinOracleResult",
    "OracleRow",
    "canonical_row",
    "canonical_rows",
    "dead_letter_json_value",
    "operator_wm_us",
    "oracle_join",
    "processing_time_stamps",
    "spark_drops_row",
    "spark_event_time_ms",
    "to_us",
]
