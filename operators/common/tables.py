"""The vocabulary of the table joins (SEMANTICS §7–§9): emission modes, late data, table fields.

The stream-table join (``stream_table/spec.py``) and the table-table joins read a changelog
input: key columns, an event-time column (the update's valid-from time), ``value_columns``
and an optional boolean ``tombstone_column``. The checks of those fields that need no input
schema are here, written once; the readings chosen where SEMANTICS is silent are in
``docs/table-joins-semantics-notes.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import pyarrow as pa
from interlace.operators.common.checks import (
    as_name_tuple,
    check_event_time_columns,
    check_idle_timeouts,
    check_late_data_fields,
    check_literal,
    check_str_fields,
    require_names,
    side_field,
)
from interlace.operators.common.names import EVENT_TIME_OUT, RESERVED_PREFIX
from interlace.operators.common.spec import DEFAULT_DLQ_HORIZON_MS, LateDataFields
from interlace.operators.errors import ConfigError
from interlace.state import blob
from interlace.state.keygroups import DEFAULT_JOIN_KEY_GROUPS, KEY_GROUP_ID_SCHEME

__all__ = [
    "Emit",
    "TableLateData",
    "TWO_TABLE_ARGS",
    "TableJoinFields",
    "TablePlan",
    "TableSide",
    "TwoTableFields",
    "check_output_names",
    "check_table_late_data",
    "check_value_columns",
    "spec_table_side",
    "spec_table_sides",
    "table_side",
]

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


class TableJoinFields(LateDataFields):
    """What every table join's spec derives from its fields (SEMANTICS §7–§9).

    A mixin for the frozen spec dataclasses (it adds no fields and no slots), beside
    :class:`~interlace.operators.common.spec.LateDataFields`: each side's event-time column,
    the checks of the table vocabulary (``emit``, ``late_data`` without ``reopen``) and of the
    prefixes and key groups, and the state fingerprint's fields every table join has.
    """

    __slots__ = ()

    OPERATOR: ClassVar[str]
    """The operator's name in the state fingerprint."""

    left_keys: Sequence[str]
    right_keys: Sequence[str]
    how: str
    emit: str
    event_time_column: str | None
    left_event_time_column: str | None
    right_event_time_column: str | None
    left_prefix: str
    right_prefix: str

    def side_event_time_column(self, side: str) -> str | None:
        """Return the event-time column of ``side`` (``"left"`` / ``"right"``)."""
        override = getattr(self, f"{side}_event_time_column")
        return override if override is not None else self.event_time_column

    def _check_table_vocabulary(self, what: str) -> None:
        check_literal("emit", self.emit, Emit)
        check_table_late_data(self.late_data, what)
        check_late_data_fields(self.late_data, self.lateness_ms, None, self.dlq_horizon_ms, 0)

    def _check_prefixes_and_key_groups(self) -> None:
        check_str_fields(self, "left_prefix", "right_prefix")
        self._check_key_groups()

    def _fingerprint(
        self, left_columns: Sequence[str], right_columns: Sequence[str], **fields: object
    ) -> str:
        """The state fingerprint: the keys, ``how``, ``emit``, key groups, both inputs' columns.

        ``fields``: the operator's own fields that give its stored state its meaning.
        """
        return blob.fingerprint(
            {
                "operator": self.OPERATOR,
                "left_keys": list(self.left_keys),
                "right_keys": list(self.right_keys),
                "how": self.how,
                "emit": self.emit,
                **fields,
                "key_groups": self.key_groups,
                "key_group_ids": KEY_GROUP_ID_SCHEME,
                "left_columns": list(left_columns),
                "right_columns": list(right_columns),
            }
        )


#: The Args lines of :class:`TwoTableFields`' fields from ``event_time_column`` to
#: ``right_prefix``, written once: each spec's docstring has them at its ``{two_table_args}``
#: line (:func:`~interlace.operators.common.docs.fill_doc`).
TWO_TABLE_ARGS = """
event_time_column: Event-time (valid-from) column of both tables.
left_event_time_column: Overrides ``event_time_column`` for the left table.
right_event_time_column: Overrides ``event_time_column`` for the right table.
lateness_ms: How far behind the maximum event time seen an update may arrive.
emit: See :data:`~interlace.operators.common.tables.Emit`.
tombstone_column: Optional boolean column of both tables; true = delete (NULL is not
    a delete). Without it, an update whose value columns are all NULL is a tombstone.
left_tombstone_column: Overrides ``tombstone_column`` for the left table.
right_tombstone_column: Overrides ``tombstone_column`` for the right table.
value_columns: The value columns of both tables (default: every column but the keys,
    the event time and the tombstone column).
left_value_columns: Overrides ``value_columns`` for the left table.
right_value_columns: Overrides ``value_columns`` for the right table.
late_data: ``"drop"`` (counted) or ``"dlq"`` (dead letters); ``"reopen"`` is an error.
dlq_horizon_ms: Under ``dlq``: how far behind ``wm`` a late update may be and still
    reach the operator to be dead-lettered (older ones are dropped by Spark).
left_prefix: Prefix of the left value columns in the output.
right_prefix: Prefix of the right value columns in the output.
"""


@dataclass(frozen=True)
class TwoTableFields(TableJoinFields):
    """The fields of a join of two changelog tables (SEMANTICS §7, §9) and what derives from them.

    The base of the frozen spec dataclasses of the table-table and foreign-key joins: it
    declares the fields both have (each spec narrows ``how`` to its own values and lists them
    all in its docstring), and the spec calls :meth:`_check_table_fields` from its
    ``__post_init__`` once its keys are normalised. ``value_columns`` / ``tombstone_column``
    apply to both tables, ``left_value_columns`` / ``right_tombstone_column`` ... to one
    (docs/table-joins-semantics-notes.md §10). No slots of its own: the specs have them.
    """

    __slots__ = ()

    left_keys: Sequence[str]
    right_keys: Sequence[str]
    how: str = "inner"
    event_time_column: str | None = None
    left_event_time_column: str | None = None
    right_event_time_column: str | None = None
    lateness_ms: int = 0
    emit: Emit = "final"
    tombstone_column: str | None = None
    left_tombstone_column: str | None = None
    right_tombstone_column: str | None = None
    value_columns: Sequence[str] | None = None
    left_value_columns: Sequence[str] | None = None
    right_value_columns: Sequence[str] | None = None
    late_data: TableLateData = "drop"
    dlq_horizon_ms: int = DEFAULT_DLQ_HORIZON_MS
    left_prefix: str = "left_"
    right_prefix: str = "right_"
    key_groups: int = DEFAULT_JOIN_KEY_GROUPS
    left_idle_timeout_ms: int | None = None
    right_idle_timeout_ms: int | None = None

    @property
    def horizon_ms(self) -> int:
        """``H``: 0 (SEMANTICS §7), plus ``dlq_horizon_ms`` under dlq (semantics notes §1)."""
        return self.dlq_horizon_ms if self.late_data == "dlq" else 0

    def output_lags_ms(self) -> dict[str, int]:
        """Return the lag of each output time column, in ms (SEMANTICS §11).

        The lag of a column: every row emitted in a micro-batch has a time in that column at
        or after ``wm - lag``, ``wm`` being the operator watermark of the micro-batch before
        it. A chain stage reading this output on that column needs ``lateness_ms >= lag``
        (docs/chains.md derives each value). Output columns not listed have no such bound.

        An update is applied (and its changes emitted with its ``event_time``) once ``wm``
        passes it (``final``) or on arrival (``eager``); Spark's filter has removed every
        update at or behind the previous ``W = wm - H``: ``event_time`` lags by ``H`` (0,
        or ``dlq_horizon_ms`` under dlq).
        """
        return {EVENT_TIME_OUT: self.horizon_ms}

    def side_tombstone_column(self, side: str) -> str | None:
        """Return the tombstone column of ``side``'s table (its own, else the shared one)."""
        override = getattr(self, f"{side}_tombstone_column")
        return override if override is not None else self.tombstone_column

    def side_value_columns(self, side: str) -> tuple[str, ...] | None:
        """Return ``side``'s value columns as given (``None``: every other column)."""
        override = getattr(self, f"{side}_value_columns")
        chosen = override if override is not None else self.value_columns
        return None if chosen is None else tuple(chosen)

    def state_fingerprint(self, left_columns: Sequence[str], right_columns: Sequence[str]) -> str:
        """Fingerprint of the fields that give the stored versions their meaning.

        ``lateness_ms``, ``late_data`` and the prefixes are not in it: changing them keeps
        every stored version meaningful.
        """
        return self._fingerprint(
            left_columns,
            right_columns,
            tombstone=[self.side_tombstone_column(s) for s in ("left", "right")],
            values=[self.side_value_columns(s) for s in ("left", "right")],
            **self._own_fingerprint_fields(),
        )

    def _own_fingerprint_fields(self) -> dict[str, object]:
        """The spec's own fields in the state fingerprint (the foreign key columns)."""
        return {}

    def _check_table_fields(self, what: str) -> None:
        setattr_ = object.__setattr__
        self._check_table_vocabulary(what)
        check_event_time_columns(self)
        check_idle_timeouts(self)
        for field in ("value_columns", "left_value_columns", "right_value_columns"):
            setattr_(self, field, as_name_tuple(field, getattr(self, field), allow_none=True))
        for side in ("left", "right"):
            check_value_columns(
                side_field(self, side, "value_columns"),
                self.side_value_columns(side),
                self.left_keys if side == "left" else self.right_keys,
                self.side_event_time_column(side),
                self.side_tombstone_column(side),
            )
        self._check_prefixes_and_key_groups()


@dataclass(frozen=True)
class TableSide:
    """One changelog input resolved against its Arrow schema (SEMANTICS §7).

    Attributes:
        names: The input's column names, in order.
        payload: The internal payload schema: one field per input column, named
            ``<internal_prefix><i>`` with the input's type.
        key_internal: The key columns' internal names.
        value_names: The value columns (user names), resolved from the default.
        value_internal: Their internal names.
        time_internal: The event-time column's internal name.
        tombstone_internal: The tombstone column's internal name, if any.
    """

    names: tuple[str, ...]
    payload: pa.Schema
    key_internal: tuple[str, ...]
    value_names: tuple[str, ...]
    value_internal: tuple[str, ...]
    time_internal: str
    tombstone_internal: str | None

    def internal(self, name: str) -> str:
        """The internal name of the input column ``name``."""
        return str(self.payload.names[self.names.index(name)])


@dataclass(frozen=True)
class TablePlan:
    """What every table join's plan holds: the modes, the output columns, the fingerprint.

    The base of the stream-table, table-table and foreign-key plans (picklable, shipped to the
    Python workers).
    """

    how: str
    emit: str
    late_data: str
    horizon_ms: int
    output_names: tuple[str, ...]
    fp: str

    replicated_side: ClassVar[int | None] = None
    """The side whose rows reach every key group (the prepared input has the home flag)."""

    @property
    def dlq(self) -> bool:
        """Whether late rows are dead-lettered."""
        return self.late_data == "dlq"

    @property
    def output_schema(self) -> pa.Schema:
        """Arrow schema of the output rows, in :attr:`output_names` order."""
        raise NotImplementedError

    def side_columns(self, side: int) -> tuple[pa.Schema, tuple[str, ...]]:
        """Input ``side``'s internal payload schema and its column names (0 left, 1 right)."""
        raise NotImplementedError

    @property
    def state_schemas(self) -> tuple[pa.Schema, ...]:
        """The schema of each table of the key-group state, in the state's ``TABLES`` order."""
        raise NotImplementedError

    def _output_schema(self, types: Sequence[pa.DataType]) -> pa.Schema:
        """The output schema: :attr:`output_names` typed ``types``, plus the dead letter (dlq)."""
        typed = [*types, pa.string()] if self.dlq else list(types)
        return pa.schema([pa.field(n, t) for n, t in zip(self.output_names, typed, strict=True)])


def check_output_names(names: Sequence[str], origin: str, fix: str) -> tuple[str, ...]:
    """Return a join's output columns, checked: no name twice, none with the reserved prefix.

    Args:
        names: The output columns.
        origin: Where they come from, for the message on a name that appears twice.
        fix: What to change then.

    Raises:
        ConfigError: Two output columns share a name, or one uses the reserved prefix.
    """
    dupes = sorted({n for n in names if list(names).count(n) > 1})
    if dupes:
        msg = f"output columns {dupes} appear twice ({origin}); {fix}"
        raise ConfigError(msg)
    bad = [n for n in names if n.startswith(RESERVED_PREFIX)]
    if bad:
        msg = (
            f"output columns {bad} use the reserved prefix {RESERVED_PREFIX!r}; change "
            "`left_prefix` / `right_prefix`"
        )
        raise ConfigError(msg)
    return tuple(names)


def table_side(
    schema: pa.Schema,
    internal_prefix: str,
    keys: Sequence[str],
    key_field: str,
    event_time: str,
    event_time_field: str,
    tombstone: str | None,
    tombstone_field: str,
    values: Sequence[str] | None,
    values_field: str,
    what: str,
) -> TableSide:
    """Resolve one changelog input against its Arrow ``schema``.

    The ``*_field`` arguments name the spec field that set each value, for messages.

    Raises:
        ConfigError: A key, event-time, value or tombstone column is missing, or the tombstone
            column is not boolean.
    """
    names = tuple(schema.names)
    require_names(names, keys, key_field, what)
    require_names(names, [event_time], event_time_field, what, verb="name")
    if tombstone is not None:
        require_names(names, [tombstone], tombstone_field, what, verb="name")
        if not pa.types.is_boolean(schema.field(tombstone).type):
            msg = (
                f"`{tombstone_field}` {tombstone!r} must be a boolean column (true = delete), "
                f"got {schema.field(tombstone).type}; cast it, e.g. "
                f"F.col({tombstone!r}).cast('boolean')"
            )
            raise ConfigError(msg)
    if values is not None:
        require_names(names, values, values_field, what)
        value_names = tuple(values)
    else:
        # SEMANTICS §7: every column but the keys, the event time and the tombstone column.
        excluded = {*keys, event_time, tombstone}
        value_names = tuple(n for n in names if n not in excluded)
    payload = pa.schema([pa.field(f"{internal_prefix}{i}", f.type) for i, f in enumerate(schema)])

    def internal(name: str) -> str:
        return str(payload.names[names.index(name)])

    return TableSide(
        names=names,
        payload=payload,
        key_internal=tuple(internal(k) for k in keys),
        value_names=value_names,
        value_internal=tuple(internal(v) for v in value_names),
        time_internal=internal(event_time),
        tombstone_internal=None if tombstone is None else internal(tombstone),
    )


def spec_table_side(spec: TwoTableFields, side: str, schema: pa.Schema) -> TableSide:
    """Resolve one table of a two-table join ``spec`` (``side``: ``"left"`` / ``"right"``).

    The table's keys are ``{side}_keys`` (for the foreign-key join, the left table's primary
    key and the right table's key); messages name the spec field that set each column (its
    per-side override or the shared field).
    """
    et = spec.side_event_time_column(side)
    assert et is not None
    return table_side(
        schema,
        RESERVED_PREFIX + side[0],
        spec.left_keys if side == "left" else spec.right_keys,
        f"{side}_keys",
        et,
        side_field(spec, side, "event_time_column"),
        spec.side_tombstone_column(side),
        side_field(spec, side, "tombstone_column"),
        spec.side_value_columns(side),
        side_field(spec, side, "value_columns"),
        f"the {side} table",
    )


def spec_table_sides(
    spec: TwoTableFields, left: pa.Schema, right: pa.Schema
) -> tuple[TableSide, TableSide]:
    """Resolve both tables of a two-table join ``spec`` (:func:`spec_table_side`)."""
    return spec_table_side(spec, "left", left), spec_table_side(spec, "right", right)
