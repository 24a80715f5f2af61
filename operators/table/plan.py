"""The table-table plan: a :class:`~.spec.TableJoin` resolved against the input schemas.

:class:`TableJoinPlan` is the picklable runtime description shipped to the Python workers
(times in µs): each table's internal columns (the left's ``__il_l<i>``, the right's
``__il_r<i>``), the key types both are compared in, the state schemas and the output columns
(SEMANTICS §9). Neighbours: ``spec.py``, ``step.py`` (runs a plan), ``shim.py`` (builds one
from Spark schemas).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from interlace.operators.common.changelog import (
    EVENT_TIME_OUT,
    OP_COLUMN,
    OP_DELETE,
    OP_UPSERT,
    SIDE_NAMES,
    VERSION_COLUMN,
    changelog_output_names,
)
from interlace.operators.common.keytypes import common_key_arrow_type
from interlace.operators.common.names import RESERVED_PREFIX
from interlace.operators.common.prepare import SIDE_COLUMN
from interlace.operators.common.tables import TableSide, spec_table_side
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
            spec_table_side(spec, side, schema)
            for side, schema in (("left", left), ("right", right))
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
