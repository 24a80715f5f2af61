"""interlace: exact, documented stateful streaming operators for Spark Structured Streaming.

Public API::

    from interlace import Join, stream_join, Window, Aggregation, window_aggregate, local_session
    from interlace import StreamTableJoin, stream_table_join, TableJoin, table_join
    from interlace import ForeignKeyJoin, foreign_key_join
    from interlace import TableAggregate, table_aggregate
    from interlace import kafka_input, kafka_writer, to_kafka_columns   # docs/kafka.md
    from interlace import delta_writer                                  # docs/delta.md
"""

import importlib.util as _importlib_util

if _importlib_util.find_spec("interlace.operators") is None:  # pragma: no cover - set-up error
    raise ImportError(
        f"interlace is being imported from its source folder {__path__[0]} without an install "
        "that maps operators/ and state/ into it (the working directory shadows the installed "
        "package): run from another directory, or install the checkout with `pip install -e .`"
    )
else:
    # A PySpark below the supported range (or PySpark 3.5 beside a pyarrow it cannot drive) is
    # refused before anything else is imported, naming the installed version, the range and
    # the fix.
    from interlace.operators.common.compat import require_supported_pyspark

    require_supported_pyspark()

from interlace.connectors.delta import delta_writer
from interlace.connectors.kafka import kafka_input, kafka_writer, to_kafka_columns
from interlace.inspection import inspect
from interlace.operators import (
    Aggregation,
    ConfigError,
    ForeignKeyJoin,
    ForeignKeyJoinOperator,
    Join,
    JoinOperator,
    StateCapError,
    StreamTableJoin,
    StreamTableOperator,
    TableAggregate,
    TableAggregateOperator,
    TableJoin,
    TableJoinOperator,
    Window,
    WindowOperator,
    foreign_key_join,
    prepare_foreign_key_join,
    prepare_join,
    prepare_stream_table_join,
    prepare_table_aggregate,
    prepare_table_join,
    prepare_window,
    stream_join,
    stream_table_join,
    table_aggregate,
    table_join,
    window_aggregate,
)
from interlace.operators.common.pending import schedule_pending_no_data_batch
from interlace.pipeline import Pipeline, Source, SparkSettings, Target
from interlace.session import local_session
from interlace.state import StateDecodeError, StateVersionError

__all__ = [
    "Aggregation",
    "ConfigError",
    "ForeignKeyJoin",
    "ForeignKeyJoinOperator",
    "Join",
    "JoinOperator",
    "Pipeline",
    "Source",
    "SparkSettings",
    "StateCapError",
    "StateDecodeError",
    "StateVersionError",
    "StreamTableJoin",
    "StreamTableOperator",
    "TableAggregate",
    "TableAggregateOperator",
    "TableJoin",
    "TableJoinOperator",
    "Target",
    "Window",
    "WindowOperator",
    "delta_writer",
    "foreign_key_join",
    "inspect",
    "kafka_input",
    "kafka_writer",
    "local_session",
    "prepare_foreign_key_join",
    "prepare_join",
    "prepare_stream_table_join",
    "prepare_table_aggregate",
    "prepare_table_join",
    "prepare_window",
    "schedule_pending_no_data_batch",
    "stream_join",
    "stream_table_join",
    "table_aggregate",
    "table_join",
    "to_kafka_columns",
    "window_aggregate",
]

__version__ = "0.1.0"
