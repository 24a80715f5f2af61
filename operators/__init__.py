"""interlace operators: specs, the functions for ``applyInPandasWithState``, and wrappers."""

from interlace.operators.errors import ConfigError, StateCapError
from interlace.operators.join import Join, JoinFunction, JoinOperator, prepare_join, stream_join
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
    "Window",
    "WindowFunction",
    "WindowOperator",
    "prepare_join",
    "prepare_window",
    "stream_join",
    "window_aggregate",
]
