"""The table-table plan: a :class:`~.spec.TableJoin` resolved against the input schemas.

:class:`TableJoinPlan` is the picklable runtime description shipped to the Python workers
(times in µs): each table's internal columns (the left's ``__il_l<i>``, the right's
``__il_r<i>``), the key types both are compared in, the state schemas and the output columns
(SEMANTICS §9). Neighbours: ``spec.py``, ``step.py`` (runs a plan), ``shim.py`` (builds one
from Spark schemas).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from interlace.operators.common.keytypes import common_key_arrow_type
from interlace.operators.common.names import DEAD_LETTER_COLUMN, RESERVED_PREFIX
from interlace.operators.common.prepare import SIDE_COLUMN
from interlace.operators.common.tables import TableSide, table_side
from interlace.operators.errors import ConfigError
from interlace.operators.table.spec import TableJoin
from interlace.state.buffers import TIME_COLUMN
from interlace.state.tables import SEQ_COLUMN

__all__ = [
    "EVENT_TIME_OUT",
    "OP_COLUMN",
    "OP_DELETE",
    "OP_UPSERT",
    "SIDE_NAMES",
    "TableJoinPlan",
    "VERSION_COLUMN",
    "changelog_output_names",
]

OP_COLUMN, EVENT_TIME_OUT, VERSION_COLUMN = "op", "event_time", "version"
"""The fixed output columns of a changelog (SEMANTICS §9)."""
OP_UPSERT, OP_DELETE = "upsert", "delete"
SIDE_NAMES = ("left", "right")
KEY_PREFIX = RESERVED_PREFIX + "k"
#: Per side: the latest applied update's µs time and its tombstone flag (state ``keys``).
SIDE_TIME = (RESERVED_PREFIX + "lt", RESERVED_PREFIX + "rt")
SIDE_DELETED = (RESERVED_PREFIX + "ld", RESERVED_PREFIX + "rd")
NEXT_VERSION = RESERVED_PREFIX + "ver"


@dataclass(frozen=True)
class TableJoinPlan:
    """Everything :func:`~.step.step` needs, resolved against the input schemas.

    Built by :func:`~.shim.prepare_table_join`; tests build it from Arrow schemas with
    :meth:`from_schemas`. The prepared input (:attr:`input_schema`) holds the side tag, the µs
    time, every left column and every right column (a row fills its own side's).
    """

    how: str
    emit: str
    late_data: str
    horizon_ms: int
    sides: tuple[TableSide, TableSide]
    key_types: tuple[pa.DataType, ...]
    time_type: pa.DataType
    output_names: tuple[str, ...]
    fp: str

    @property
    def dlq(self) -> bool:
        """Whether late updates are dead-lettered."""
        return self.late_data == "dlq"

    @property
    def key_internal(self) -> tuple[str, ...]:
        """The state's key columns (``__il_k<i>``, in the common key types)."""
        return tuple(f"{KEY_PREFIX}{i}" for i in range(len(self.key_types)))

    @property
    def input_schema(self) -> pa.Schema:
        """The prepared input's schema: side tag, µs time, left columns, right columns."""
        head = [pa.field(SIDE_COLUMN, pa.int32()), pa.field(TIME_COLUMN, pa.int64())]
        return pa.schema(head + list(self.sides[0].payload) + list(self.sides[1].payload))

    @property
    def held_schema(self) -> pa.Schema:
        """Schema of the held updates: the prepared input plus the arrival number."""
        return self.input_schema.append(pa.field(SEQ_COLUMN, pa.int64()))

    def value_fields(self, side: int) -> list[pa.Field]:
        """The internal value fields of ``side`` (0 left, 1 right)."""
        s = self.sides[side]
        return [s.payload.field(n) for n in s.value_internal]

    @property
    def keys_schema(self) -> pa.Schema:
        """Schema of the per-key state table (:mod:`interlace.state.table_join`)."""
        fields = [pa.field(n, t) for n, t in zip(self.key_internal, self.key_types, strict=True)]
        for side in (0, 1):
            fields.append(pa.field(SIDE_TIME[side], pa.int64()))
            fields.append(pa.field(SIDE_DELETED[side], pa.bool_()))
            fields += self.value_fields(side)
        fields.append(pa.field(NEXT_VERSION, pa.int64()))
        return pa.schema(fields)

    @property
    def output_schema(self) -> pa.Schema:
        """Arrow schema of the output rows, in :attr:`output_names` order."""
        types = list(self.key_types)
        types += [f.type for f in self.value_fields(0)] + [f.type for f in self.value_fields(1)]
        types += [pa.string(), self.time_type, pa.int64()]
        if self.dlq:
            types.append(pa.string())
        return pa.schema([pa.field(n, t) for n, t in zip(self.output_names, types, strict=True)])

    @classmethod
    def from_schemas(cls, spec: TableJoin, left: pa.Schema, right: pa.Schema) -> TableJoinPlan:
        """Resolve ``spec`` against the Arrow schemas of both tables (no Spark).

        Raises:
            ConfigError: A key, event-time, value or tombstone column is missing, a tombstone
                column is not boolean, key types are incompatible, or two output columns
                collide.
        """
        sides = tuple(
            _side(spec, side, schema) for side, schema in (("left", left), ("right", right))
        )
        key_types = tuple(
            common_key_arrow_type(lk, left.field(lk).type, rk, right.field(rk).type)
            for lk, rk in zip(spec.left_keys, spec.right_keys, strict=True)
        )
        names = changelog_output_names(
            spec.left_keys,
            [spec.left_prefix + v for v in sides[0].value_names],
            [spec.right_prefix + v for v in sides[1].value_names],
            spec.late_data == "dlq",
        )
        return cls(
            how=spec.how,
            emit=spec.emit,
            late_data=spec.late_data,
            horizon_ms=spec.horizon_ms,
            sides=(sides[0], sides[1]),
            key_types=key_types,
            time_type=left.field(spec.side_event_time_column("left")).type,
            output_names=names,
            fp=spec.state_fingerprint(left.names, right.names),
        )


def _side(spec: TableJoin, side: str, schema: pa.Schema) -> TableSide:
    """Resolve one table of ``spec`` (``side``: ``"left"`` / ``"right"``)."""
    et = spec.side_event_time_column(side)
    assert et is not None

    def field(name: str) -> str:
        return f"{side}_{name}" if getattr(spec, f"{side}_{name}") is not None else name

    return table_side(
        schema,
        RESERVED_PREFIX + side[0],
        spec.left_keys if side == "left" else spec.right_keys,
        f"{side}_keys",
        et,
        field("event_time_column"),
        spec.side_tombstone_column(side),
        field("tombstone_column"),
        spec.side_value_columns(side),
        field("value_columns"),
        f"the {side} table",
    )


def changelog_output_names(
    keys: Sequence[str], left_values: Sequence[str], right_values: Sequence[str], dlq: bool
) -> tuple[str, ...]:
    """The output columns of a changelog join (SEMANTICS §9), checked for collisions.

    Args:
        keys: The output key columns (named as the left table's primary key).
        left_values: The left value columns, prefixed.
        right_values: The right value columns, prefixed.
        dlq: Whether ``_dead_letter`` is added.

    Raises:
        ConfigError: Two output columns share a name, or one uses the reserved prefix.
    """
    names = [*keys, *left_values, *right_values, OP_COLUMN, EVENT_TIME_OUT, VERSION_COLUMN]
    if dlq:
        names.append(DEAD_LETTER_COLUMN)
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        msg = (
            f"output columns {dupes} appear twice (the keys, `left_prefix` / `right_prefix` + "
            f"value columns, and the fixed {OP_COLUMN!r}, {EVENT_TIME_OUT!r}, "
            f"{VERSION_COLUMN!r}); choose other prefixes or value columns"
        )
        raise ConfigError(msg)
    bad = [n for n in names if n.startswith(RESERVED_PREFIX)]
    if bad:
        msg = (
            f"output columns {bad} use the reserved prefix {RESERVED_PREFIX!r}; change "
            "`left_prefix` / `right_prefix`"
        )
        raise ConfigError(msg)
    return tuple(names)
