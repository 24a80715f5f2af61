"""interlace: exact, documented stateful streaming operators for Spark Structured Streaming.

Public API::

    from interlace import Join, stream_join, prepare_join, local_session
"""

from interlace.operators import (
    ConfigError,
    Join,
    JoinOperator,
    StateCapError,
    prepare_join,
    stream_join,
)
from interlace.session import local_session
from interlace.state import StateDecodeError, StateVersionError

__all__ = [
    "ConfigError",
    "Join",
    "JoinOperator",
    "StateCapError",
    "StateDecodeError",
    "StateVersionError",
    "local_session",
    "prepare_join",
    "stream_join",
]

__version__ = "0.1.0"
