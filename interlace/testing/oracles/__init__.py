"""Reference models (oracles) of the interlace operators, one naive oracle per operator.

* :mod:`~interlace.testing.oracles.join` — :func:`oracle_join`, the stream-stream join.
* :mod:`~interlace.testing.oracles.window` — :func:`oracle_window`, the window aggregation.
* :mod:`~interlace.testing.oracles.stream_table` — :func:`oracle_stream_table_join`, the
  stream-table join.
* :mod:`~interlace.testing.oracles.table` — :func:`oracle_table_join`, the table-table join.
* :mod:`~interlace.testing.oracles.foreign_key` — :func:`oracle_foreign_key_join`, the
  foreign-key table join.

What the oracles share is only what is the same for every operator, each written once:

* :mod:`~interlace.testing.oracles.spark_rules` — the Spark layer of ``SEMANTICS.md`` §1:
  processing time (rule 0), Spark's watermark ``W``, the pre-filter Spark applies with an
  event-time timeout, the trailing no-data batch and the operator watermark ``wm = W + H``.
* :mod:`~interlace.testing.oracles.resolve` — the spec fields every operator has alike
  (``late_data``, ``time_mode``, the horizon ``H``, the output-column check).
* :mod:`~interlace.testing.oracles.rows` — :class:`OracleRow`, the dead-letter output
  (``SEMANTICS.md`` §4) and :func:`canonical_rows`, to compare output as multisets.
* :mod:`~interlace.testing.oracles.changelog` — what the three table joins share: the §7
  reading of a changelog input, the §9 changelog output, :class:`TableOracleResult` and
  the Spark layer around their per-call models.

The oracles are deliberately naive (plain loops, no vectorisation, no key groups, no state
blobs) and import nothing from ``interlace.operators`` or ``interlace.state`` (nor pyspark),
so they can judge them; a test checks every module of this package for it.
"""

from interlace.testing.log import JoinBatch, JoinLog, to_us
from interlace.testing.oracles.changelog import (
    EMIT_MODES,
    TABLE_LATE_DATA_MODES,
    TableOracleResult,
)
from interlace.testing.oracles.foreign_key import FOREIGN_KEY_HOWS, oracle_foreign_key_join
from interlace.testing.oracles.join import JOIN_HOWS, JoinOracleResult, oracle_join
from interlace.testing.oracles.resolve import DEFAULT_DLQ_HORIZON_MS, LATE_DATA_MODES
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
from interlace.testing.oracles.stream_table import (
    RIGHT_VALID_FROM,
    STREAM_TABLE_HOWS,
    oracle_stream_table_join,
)
from interlace.testing.oracles.table import TABLE_HOWS, oracle_table_join
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
    "DEAD_LETTER_COLUMN",
    "DEFAULT_DLQ_HORIZON_MS",
    "DISTINCT_MODES",
    "EMIT_MODES",
    "FOREIGN_KEY_HOWS",
    "JOIN_HOWS",
    "LATE_DATA_MODES",
    "RIGHT_VALID_FROM",
    "STREAM_TABLE_HOWS",
    "TABLE_HOWS",
    "TABLE_LATE_DATA_MODES",
    "WATERMARK_POLICIES",
    "WINDOW_KINDS",
    "JoinBatch",
    "JoinLog",
    "JoinOracleResult",
    "OracleRow",
    "TableOracleResult",
    "WindowBatch",
    "WindowLog",
    "WindowOracleResult",
    "WindowOracleRow",
    "canonical_row",
    "canonical_rows",
    "dead_letter_json_value",
    "operator_wm_us",
    "oracle_foreign_key_join",
    "oracle_join",
    "oracle_stream_table_join",
    "oracle_table_join",
    "oracle_window",
    "processing_time_stamps",
    "spark_drops_row",
    "spark_event_time_ms",
    "to_us",
]
