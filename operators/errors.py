"""Configuration and runtime errors raised by interlace operators."""

from __future__ import annotations

from interlace.state.errors import InterlaceError, StateDecodeError, StateVersionError

__all__ = [
    "ConfigError",
    "InterlaceError",
    "StateCapError",
    "StateDecodeError",
    "StateVersionError",
]


class ConfigError(InterlaceError, ValueError):
    """A spec or its inputs are invalid; raised before any query starts.

    The message names the field in backticks, the rule, the value received and the fix.
    """


class StateCapError(InterlaceError, RuntimeError):
    """A fail-loud state cap was hit inside a running query."""
