"""The kinds of ``[transform.join]``: which spec each ``kind`` builds and what differs per kind.

A pipeline's ``join`` is one of the join specs below. Its TOML table names the spec with
``kind``; a table without ``kind`` is the stream-stream join, so every file written before
other kinds existed reads, and writes back, unchanged::

    [transform.join]
    kind = "stream_table"         # default "stream_stream_join"
    left_source = "orders"        # the stream
    right_source = "customers"    # the table's changelog
    left_keys = ["customer_id"]   # ... every StreamTableJoin field by its Python name

Each kind is one :class:`JoinKind` entry in :data:`JOIN_KINDS`: the spec class, the input
columns its fields name (checked against the sources' schemas), its output columns, and
whether its output is a changelog (SEMANTICS §9: ``op``, ``event_time``, ``version``, keyed
by the key columns), which the DuckDB target then applies by key instead of appending:

* ``"stream_stream_join"`` (the default): :class:`~interlace.Join`.
* ``"stream_table"``: :class:`~interlace.StreamTableJoin` (the left source is the stream,
  the right one the table's changelog); one row per stream row, appended.
* ``"table"``: :class:`~interlace.TableJoin`, two changelogs joined on their primary key; a
  changelog keyed by ``left_keys``.
* ``"foreign_key"``: :class:`~interlace.ForeignKeyJoin`, the left changelog's
  ``foreign_key_columns`` referring to the right one's ``right_keys``; a changelog keyed by
  ``left_keys``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any

from interlace.operators.common.changelog import EVENT_TIME_OUT, OP_COLUMN, VERSION_COLUMN
from interlace.operators.common.names import DEAD_LETTER_COLUMN
from interlace.operators.foreign_key import ForeignKeyJoin, foreign_key_join
from interlace.operators.join import Join, stream_join
from interlace.operators.stream_table import (
    RIGHT_VALID_FROM,
    StreamTableJoin,
    stream_table_join,
)
from interlace.operators.table import TableJoin, table_join

__all__ = [
    "JOIN_KIND",
    "JOIN_KINDS",
    "JoinKind",
    "JoinSpec",
    "field_applies",
    "join_kind",
    "kinds_phrase",
    "time_mode_of",
    "with_dead_letter",
]

#: The ``kind`` of ``[transform.join]`` when the table leaves it out (seed 000).
JOIN_KIND = "stream_stream_join"

JoinSpec = Join | StreamTableJoin | TableJoin | ForeignKeyJoin
"""The specs a pipeline's ``join`` may hold."""

# (left columns, right columns) -> output columns; a side is None when a SQL pre-stage hides
# its columns. Without ``_dead_letter``: validate.py adds it under late_data="dlq".
OutputColumns = Callable[[Any, Sequence[str] | None, Sequence[str] | None], list[str] | None]


@dataclass(frozen=True)
class JoinKind:
    """One ``kind`` of ``[transform.join]``.

    Attributes:
        kind: The TOML ``kind`` value.
        spec_type: The spec class the table's keys build.
        title: The operator in messages (``"stream-table join"``).
        side_labels: How messages name the left and the right input.
        two_sources: Why the two inputs are two sources, for the error when they are one.
        column_fields: ``(side, field)``: the spec fields naming columns of that side's
            input (a list, or one name), checked against its source's schema in this order.
            A field shared by both sides (``value_columns``, listed once per side) is not
            checked on a side whose own override (``left_value_columns``) is set: the
            override is what applies there, and is listed (and checked) itself.
        boolean_fields: ``(side, field)``: the fields naming a column that must be BOOLEAN
            (shared fields as in ``column_fields``).
        output_columns: The output columns, from the spec and both inputs' columns.
        apply: ``(left, right, spec, *, counters) -> streaming DataFrame``.
        changelog_key: For a kind whose output is a changelog (``op``, ``event_time``,
            ``version``): the output columns it is keyed by; the DuckDB target then applies
            it by key (:class:`interlace.connectors.duckdb.DuckDBTarget`). None: rows are appended.
        key_pairs: The ``(left field, right field)`` whose columns are compared pairwise by
            the join (``interlace validate`` checks that their types agree).
        output_fields: The spec fields that name or prefix output columns, for the error
            when two output columns collide.
        unknown_output_fix: What fixes the output columns when a side's ``sql`` pre-stage
            hides its columns.
    """

    kind: str
    spec_type: type[Any]
    title: str
    side_labels: tuple[str, str]
    two_sources: str
    column_fields: tuple[tuple[str, str], ...]
    boolean_fields: tuple[tuple[str, str], ...]
    output_columns: OutputColumns
    apply: Callable[..., Any]
    changelog_key: Callable[[Any], tuple[str, ...]] | None = None
    key_pairs: tuple[tuple[str, str], ...] = (("left_keys", "right_keys"),)
    output_fields: str = (
        "`left_prefix`, `right_prefix`, `output_left_columns`, `output_right_columns`"
    )
    unknown_output_fix: str = "list `output_left_columns` / `output_right_columns` to fix them"

    @property
    def field_names(self) -> list[str]:
        """The spec's fields, which are the TOML keys of ``[transform.join]`` besides three."""
        return [f.name for f in fields(self.spec_type)]

    @property
    def required_fields(self) -> list[str]:
        """The spec's fields without a default (``left_keys``, ...): required TOML keys."""
        return [
            f.name
            for f in fields(self.spec_type)
            if f.default is MISSING and f.default_factory is MISSING
        ]

    @property
    def processing_time(self) -> bool:
        """Whether the spec has ``time_mode`` (else it reads event time only)."""
        return "time_mode" in self.field_names


def _join_output(
    j: Join, left: Sequence[str] | None, right: Sequence[str] | None
) -> list[str] | None:
    """Join output (SEMANTICS §2): prefixed left and right columns; semi / anti: the left's."""
    lsel = list(j.output_left_columns) if j.output_left_columns is not None else left
    rsel = list(j.output_right_columns) if j.output_right_columns is not None else right
    if j.how in ("left_semi", "left_anti"):
        return None if lsel is None else list(lsel)
    if lsel is None or rsel is None:
        return None
    return [j.left_prefix + c for c in lsel] + [j.right_prefix + c for c in rsel]


def _stream_table_output(
    j: StreamTableJoin, left: Sequence[str] | None, right: Sequence[str] | None
) -> list[str] | None:
    """Stream-table output (SEMANTICS §8): stream columns, table values, ``right_valid_from``."""
    if left is None or (right is None and j.value_columns is None):
        return None
    if j.value_columns is not None:
        values = list(j.value_columns)
    else:  # §7: every table column but the keys, the event time and the tombstone column
        assert right is not None
        excluded = {*j.right_keys, j.side_event_time_column("right"), j.tombstone_column}
        values = [c for c in right if c not in excluded]
    names = [j.left_prefix + c for c in left] + [j.right_prefix + c for c in values]
    return [*names, RIGHT_VALID_FROM]


def _side_values(
    j: TableJoin | ForeignKeyJoin, side: str, columns: Sequence[str] | None
) -> list[str] | None:
    """Return one table's value columns (SEMANTICS §7).

    As given, else every column but the keys, the event time and the tombstone column; None
    when a ``sql`` pre-stage hides the columns.
    """
    given = j.side_value_columns(side)
    if given is not None:
        return list(given)
    if columns is None:
        return None
    keys = j.left_keys if side == "left" else j.right_keys
    excluded = {*keys, j.side_event_time_column(side), j.side_tombstone_column(side)}
    return [c for c in columns if c not in excluded]


def _changelog_output(
    j: TableJoin | ForeignKeyJoin, left: Sequence[str] | None, right: Sequence[str] | None
) -> list[str] | None:
    """Changelog output (SEMANTICS §9): the left keys, prefixed values, ``op`` ... ``version``."""
    lvals, rvals = _side_values(j, "left", left), _side_values(j, "right", right)
    if lvals is None or rvals is None:
        return None
    values = [j.left_prefix + c for c in lvals] + [j.right_prefix + c for c in rvals]
    return [*j.left_keys, *values, OP_COLUMN, EVENT_TIME_OUT, VERSION_COLUMN]


def _left_keys(j: TableJoin | ForeignKeyJoin) -> tuple[str, ...]:
    """The key of a table join's changelog: the left table's primary key (SEMANTICS §9)."""
    return tuple(j.left_keys)


#: The value and tombstone fields of the table joins, per side (the shared field on both
#: sides, each override on its own side).
_TABLE_COLUMN_FIELDS: tuple[tuple[str, str], ...] = (
    ("left", "value_columns"),
    ("left", "left_value_columns"),
    ("right", "value_columns"),
    ("right", "right_value_columns"),
    ("left", "tombstone_column"),
    ("left", "left_tombstone_column"),
    ("right", "tombstone_column"),
    ("right", "right_tombstone_column"),
)


def _changelog_kind(
    *,
    kind: str,
    spec_type: type[TableJoin | ForeignKeyJoin],
    title: str,
    two_sources: str,
    key_fields: tuple[tuple[str, str], ...],
    apply: Callable[..., Any],
    **more: Any,
) -> JoinKind:
    """The kind of a join of two changelog tables (table-table, foreign-key; SEMANTICS §9).

    Both read two tables' value and tombstone fields and output a changelog keyed by the left
    keys (:func:`_changelog_output`); ``key_fields`` are the kind's key fields, ``more`` its
    other :class:`JoinKind` fields.
    """
    return JoinKind(
        kind=kind,
        spec_type=spec_type,
        title=title,
        side_labels=("left table", "right table"),
        two_sources=two_sources,
        column_fields=(*key_fields, *_TABLE_COLUMN_FIELDS),
        boolean_fields=tuple((side, f) for side, f in _TABLE_COLUMN_FIELDS if "tombstone" in f),
        output_columns=_changelog_output,
        apply=apply,
        changelog_key=_left_keys,
        output_fields=(
            "`left_prefix`, `right_prefix` and the value columns, beside the keys and the fixed "
            "'op', 'event_time', 'version'"
        ),
        unknown_output_fix=(
            "set `left_value_columns` / `right_value_columns` (or `value_columns`) for the "
            "sides with a `sql` pre-stage"
        ),
        **more,
    )


JOIN_KINDS: dict[str, JoinKind] = {
    JOIN_KIND: JoinKind(
        kind=JOIN_KIND,
        spec_type=Join,
        title="stream-stream join",
        side_labels=("left", "right"),
        two_sources="declare a stream twice, under two names, to join it with itself",
        column_fields=(
            ("left", "left_keys"),
            ("left", "output_left_columns"),
            ("right", "right_keys"),
            ("right", "output_right_columns"),
        ),
        boolean_fields=(),
        output_columns=_join_output,
        apply=stream_join,
    ),
    "stream_table": JoinKind(
        kind="stream_table",
        spec_type=StreamTableJoin,
        title="stream-table join",
        side_labels=("stream (left)", "table (right)"),
        two_sources="the stream and the table's changelog",
        column_fields=(
            ("left", "left_keys"),
            ("right", "right_keys"),
            ("right", "value_columns"),
            ("right", "tombstone_column"),
        ),
        boolean_fields=(("right", "tombstone_column"),),
        output_columns=_stream_table_output,
        apply=stream_table_join,
        output_fields="`left_prefix`, `right_prefix`, `value_columns`",
        unknown_output_fix=(
            "the table's `value_columns` fix its part; the stream's columns are known once "
            "Spark reads it"
        ),
    ),
    "table": _changelog_kind(
        kind="table",
        spec_type=TableJoin,
        title="table-table join",
        two_sources="the changelogs of two tables",
        key_fields=(("left", "left_keys"), ("right", "right_keys")),
        apply=table_join,
    ),
    "foreign_key": _changelog_kind(
        kind="foreign_key",
        spec_type=ForeignKeyJoin,
        title="foreign-key join",
        two_sources="the changelogs of the referring table and of the referred one",
        key_fields=(
            ("left", "left_keys"),
            ("left", "foreign_key_columns"),
            ("right", "right_keys"),
        ),
        apply=foreign_key_join,
        key_pairs=(("foreign_key_columns", "right_keys"),),
    ),
}
"""Every ``kind`` of ``[transform.join]``, by its TOML name (the default first)."""


def join_kind(spec: object) -> JoinKind:
    """Return the kind of a join spec.

    Raises:
        TypeError: ``spec`` is not one of the join specs (an invariant: the pipeline checks
            its ``join`` when it is built).
    """
    for kind in JOIN_KINDS.values():
        if isinstance(spec, kind.spec_type):
            return kind
    msg = f"not a join spec: {spec!r}"
    raise TypeError(msg)


def field_applies(spec: object, side: str, field: str) -> bool:
    """Whether the spec field ``field`` names a column of ``side``'s input.

    A field shared by both sides (``value_columns``, ``tombstone_column``) does not where
    that side sets its own override (``left_value_columns``); a side's own field always does.
    """
    if field.startswith(("left_", "right_")):
        return True
    return getattr(spec, f"{side}_{field}", None) is None


def kinds_phrase() -> str:
    """Return the valid kinds for a message: ``'stream_stream_join' (the default) or ...``."""
    names = [repr(k) for k in JOIN_KINDS]
    names[0] += " (the default)"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def time_mode_of(spec: object) -> str:
    """Return the join's ``time_mode`` (``"event"`` for kinds that read event time only)."""
    return str(getattr(spec, "time_mode", "event"))


def with_dead_letter(spec: Any, names: list[str]) -> list[str]:
    """Return ``names`` plus ``_dead_letter`` under ``late_data="dlq"`` (SEMANTICS §4)."""
    return [*names, DEAD_LETTER_COLUMN] if spec.late_data == "dlq" else names
