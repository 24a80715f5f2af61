"""interlace: exact, documented stateful streaming operators for Spark Structured Streaming.

Public API::

    from interlace import Join, stream_join, Window, Aggregation, window_aggregate, local_session
"""

from interlace.operators import (
    Aggregation,
    ConfigError,
    Join,
    JoinOperator,
    StateCapError,
    Window,
    WindowOperator,
    prepare_join,
    prepare_window,
    stream_join,
    window_aggregate,
)
from interlace.pipeline import Pipeline, Source, SparkSettings, Target
from interlace.session import local_session
from interlace.state import StateDecodeError, StateVersionError

__all__ = [
    "Aggregation",
    "ConfigError",
    "Join",
    "JoinOperator",
    "Pipeline",
    "Source",
    "SparkSettings",
    "StateCapError",
    "StateDecodeError",
    "StateVersionError",
    "Target",
    "Window",
    "WindowOperator",
    "local_session",
    "prepare_join",
    "prepare_window",
    "stream_join",
    "window_aggregate",
]

__version__ = "0.1.0"
