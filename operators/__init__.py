"""interlace operators: specs, the functions for ``applyInPandasWithState``, and wrappers."""

from interlace.operators.errors import ConfigError, StateCapError
from interlace.operators.join import Join, JoinFunction, JoinOperator, prepare_join, stream_join

__all__ = [
    "ConfigError",
    "Join",
    "JoinFunction",
    "JoinOperator",
    "StateCapError",
    "prepare_join",
    "stream_join",
]
