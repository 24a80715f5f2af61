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
by the key columns), which the DuckDB target then applies by key instead of appending.
The table joins to come (``"table"``: ``TableJoin``; ``"foreign_key"``: ``ForeignKeyJoin``)
are added the same way: one entry each, with their ``changelog_key``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from interlace.operators.common.names import DEAD_LETTER_COLUMN
from interlace.operators.join import Join, stream_join
from interlace.operators.stream_table import (
    RIGHT_VALID_FROM,
    StreamTableJoin,
    stream_table_join,
)

__all__ = [
    "JOIN_KIND",
    "JOIN_KINDS",
    "JoinKind",
    "JoinSpec",
    "join_kind",
    "kinds_phrase",
    "time_mode_of",
    "with_dead_letter",
]

#: The ``kind`` of ``[transform.join]`` when the table leaves it out (seed 000).
JOIN_KIND = "stream_stream_join"

JoinSpec = Join | StreamTableJoin
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
        boolean_fields: ``(side, field)``: the fields naming a column that must be BOOLEAN.
        output_columns: The output columns, from the spec and both inputs' columns.
        apply: ``(left, right, spec, *, counters) -> streaming DataFrame``.
        changelog_key: For a kind whose output is a changelog (``op``, ``event_time``,
            ``version``): the output columns it is keyed by; the DuckDB target then applies
            it by key (:class:`interlace.targets.DuckDBTarget`). None: rows are appended.
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

    @property
    def field_names(self) -> list[str]:
        """The spec's fields, which are the TOML keys of ``[transform.join]`` besides three."""
        return [f.name for f in fields(self.spec_type)]

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
