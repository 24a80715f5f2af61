"""Exceptions raised while reading or writing interlace state.

The hierarchy subclasses builtins so that ``except ValueError`` keeps working:

* :class:`InterlaceError` is the root of every interlace exception.
* :class:`StateDecodeError` (``ValueError``): a blob is not a valid interlace blob.
* :class:`StateVersionError` (``StateDecodeError``): a blob was written by a newer
  format version than this build understands, or by an operator with a different spec.
"""

from __future__ import annotations

__all__ = ["InterlaceError", "StateDecodeError", "StateVersionError"]


class InterlaceError(Exception):
    """Root of every exception interlace raises on purpose."""


class StateDecodeError(InterlaceError, ValueError):
    """A state blob could not be decoded."""


class StateVersionError(StateDecodeError):
    """A state blob has a format version or spec fingerprint this build cannot read."""
