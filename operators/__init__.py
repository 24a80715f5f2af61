"""interlace operators: specs, the functions for ``applyInPandasWithState``, and wrappers."""

from interlace.operators.errors import ConfigError, StateCapError
from interlace.operators.foreign_key import (
    ForeignKeyJoin,
    ForeignKeyJoinFunction,
    ForeignKeyJoinOperator,
    foreign_key_join,
    prepare_foreign_key_join,
)
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
from interlace.operators.table_aggregate import (
    TableAggregate,
    TableAggregateOperator,
    prepare_table_aggregate,
    table_aggregate,
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
    "ForeignKeyJoin",
    "ForeignKeyJoinFunction",
    "ForeignKeyJoinOperator",
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
    "TableAggregate",
    "TableAggregateOperator",
    "Window",
    "WindowFunction",
    "WindowOperator",
    "foreign_key_join",
    "prepare_foreign_key_join",
    "prepare_join",
    "prepare_stream_table_join",
    "prepare_table_aggregate",
    "prepare_table_join",
    "prepare_window",
    "stream_join",
    "stream_table_join",
    "table_aggregate",
    "table_join",
    "window_aggregate",
]
