"""interlace operators: specs, the functions for ``applyInPandasWithState``, and wrappers."""

from interlace.operators.errors import ConfigError, StateCapError
from interlace.operators.join import Join, JoinFunction, JoinOperator, prepare_join, stream_join
from interlace.operators.stream_table import (
    StreamTableJoin,
    StreamTableJoinFunction,
    StreamTableOperator,
    prepare_stream_table_join,
    stream_table_join,
)
from interlace.operators.table import (
    TableJoin,
    TableJoinFunction,
    TableJoinOperator,
    prepare_table_join,
    table_join,
)
from interlace.operators.window import (
    Aggregation,
    Window,
    WindowFunction,
    WindowOperator,
    prepare_window,
    window_aggregate,
)

__all__ = [
    "Aggregation",
    "ConfigError",
    "Join",
    "JoinFunction",
    "JoinOperator",
    "StateCapError",
    "StreamTableJoin",
    "StreamTableJoinFunction",
    "StreamTableOperator",
    "TableJoin",
    "TableJoinFunction",
    "TableJoinOperator",
    "Window",
    "WindowFunction",
    "WindowOperator",
    "prepare_join",
    "prepare_stream_table_join",
    "prepare_table_join",
    "prepare_window",
    "stream_join",
    "stream_table_join",
    "table_join",
    "window_aggregate",
]
