"""The vocabulary of the table joins (SEMANTICS §7–§9): emission modes, late data, table fields.

The stream-table join (``stream_table/spec.py``) and the table-table joins read a changelog
input: key columns, an event-time column (the update's valid-from time), ``value_columns``
and an optional boolean ``tombstone_column``. The checks of those fields that need no input
schema are here, written once; the readings chosen where SEMANTICS is silent are in
``docs/table-joins-semantics-notes.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from interlace.operators.common.checks import as_name_tuple, check_literal
from interlace.operators.errors import ConfigError

__all__ = ["Emit", "TableLateData", "check_table_late_data", "check_value_columns"]

Emit = Literal["final", "eager"]
"""When a table join acts on a row.

* ``"final"``: in the first call where ``wm > t`` (the result does not depend on how rows were
  split into micro-batches, as long as none arrives behind the watermark).
* ``"eager"``: in the call that receives it, against what has been received so far.
"""

TableLateData = Literal["drop", "dlq"]
"""What a table join does with a late row (``"reopen"`` has no meaning for tables).

* ``"drop"``: discarded and counted.
* ``"dlq"``: sent to the dead-letter column ``_dead_letter`` (SEMANTICS §4).
"""


def check_table_late_data(late_data: object, what: str) -> None:
    """Reject ``late_data`` values a table join does not support, naming the fix.

    Args:
        late_data: The value given.
        what: The operator, for the message (``"the stream-table join"``).
    """
    if late_data == "reopen":
        msg = (
            f"`late_data`='reopen' is not supported by {what} (SEMANTICS §8, §9: a table "
            "version that arrives late is never re-joined); use late_data='drop' (counted) or "
            "'dlq' (dead letters), and raise `lateness_ms` to accept later rows"
        )
        raise ConfigError(msg)
    check_literal("late_data", late_data, TableLateData)


def check_value_columns(
    field: str,
    value_columns: object,
    keys: Sequence[str],
    event_time_column: str | None,
    tombstone_column: str | None,
) -> tuple[str, ...] | None:
    """Normalise ``value_columns`` and reject overlaps with the keys, event time, tombstone.

    Args:
        field: The spec field (``"value_columns"``).
        value_columns: The value given (``None``: every other column, resolved later).
        keys: The table's key columns.
        event_time_column: The table's event-time column, if known.
        tombstone_column: The tombstone column, if any.

    Returns:
        The value columns as a tuple, or ``None``.
    """
    names = as_name_tuple(field, value_columns, allow_none=True)
    if tombstone_column is not None and (
        not isinstance(tombstone_column, str) or not tombstone_column
    ):
        msg = (
            f"`tombstone_column` must be a column name (got tombstone_column={tombstone_column!r})"
        )
        raise ConfigError(msg)
    if tombstone_column is not None and tombstone_column in keys:
        msg = (
            f"`tombstone_column` {tombstone_column!r} is a key column ({list(keys)}); the "
            "tombstone flag must be a boolean column of its own"
        )
        raise ConfigError(msg)
    if names is None:
        return None
    excluded = {*keys, *([event_time_column] if event_time_column else [])}
    excluded |= {tombstone_column} if tombstone_column else set()
    overlap = [n for n in names if n in excluded]
    if overlap:
        msg = (
            f"`{field}` {overlap} overlap the table's keys, event-time column or "
            f"`tombstone_column` (got {field}={list(names)}); leave them out: keys and the "
            "valid-from time are output on their own"
        )
        raise ConfigError(msg)
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        msg = f"`{field}` names {dupes} more than once; list each value column once"
        raise ConfigError(msg)
    return names
