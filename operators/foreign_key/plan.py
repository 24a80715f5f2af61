"""The foreign-key join's plan: a :class:`~.spec.ForeignKeyJoin` resolved against the schemas.

:class:`ForeignKeyJoinPlan` is the picklable runtime description shipped to the Python
workers (times in µs): each table's internal columns (the left's ``__il_l<i>``, the right's
``__il_r<i>``), the types the foreign key and the right key are compared in, the state
schemas and the output columns (SEMANTICS §9). Neighbours: ``spec.py``, ``step.py`` (runs a
plan), ``shim.py`` (builds one from Spark schemas).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from interlace.operators.common.changelog import changelog_output_names
from interlace.operators.common.checks import require_names
from interlace.operators.common.keytypes import common_key_arrow_type
from interlace.operators.common.names import RESERVED_PREFIX
from interlace.operators.common.prepare import HOME_COLUMN, SIDE_COLUMN
from interlace.operators.common.tables import TableSide, spec_table_side
from interlace.operators.foreign_key.spec import ForeignKeyJoin
from interlace.state.buffers import TIME_COLUMN
from interlace.state.tables import SEQ_COLUMN

__all__ = ["FK_PREFIX", "ForeignKeyJoinPlan"]

KEY_PREFIX = RESERVED_PREFIX + "k"
#: The foreign key in the state (left versions) and the right key (right versions).
FK_PREFIX = RESERVED_PREFIX + "f"
#: Per table: the latest applied update's µs time and its tombstone flag.
LEFT_TIME, LEFT_DELETED = RESERVED_PREFIX + "lt", RESERVED_PREFIX + "ld"
RIGHT_TIME, RIGHT_DELETED = RESERVED_PREFIX + "rt", RESERVED_PREFIX + "rd"
NEXT_VERSION = RESERVED_PREFIX + "ver"


@dataclass(frozen=True)
class ForeignKeyJoinPlan:
    """Everything :func:`~.step.step` needs, resolved against the input schemas.

    Built by :func:`~.shim.prepare_foreign_key_join`; tests build it from Arrow schemas with
    :meth:`from_schemas`. The prepared input (:attr:`input_schema`) holds the side tag, the µs
    time, the home flag (false on the copies of a right update outside its home key group),
    every left column and every right column (a row fills its own side's).
    """

    how: str
    emit: str
    late_data: str
    horizon_ms: int
    sides: tuple[TableSide, TableSide]
    left_key_types: tuple[pa.DataType, ...]
    fk_types: tuple[pa.DataType, ...]
    fk_internal: tuple[str, ...]
    time_type: pa.DataType
    output_names: tuple[str, ...]
    fp: str

    @property
    def dlq(self) -> bool:
        """Whether late updates are dead-lettered."""
        return self.late_data == "dlq"

    @property
    def key_internal(self) -> tuple[str, ...]:
        """The left versions' key columns (``__il_k<i>``)."""
        return tuple(f"{KEY_PREFIX}{i}" for i in range(len(self.left_key_types)))

    @property
    def fk_state(self) -> tuple[str, ...]:
        """The foreign key / right key columns of the state (``__il_f<i>``)."""
        return tuple(f"{FK_PREFIX}{i}" for i in range(len(self.fk_types)))

    @property
    def input_schema(self) -> pa.Schema:
        """The prepared input's schema: side tag, µs time, home flag, left and right columns."""
        head = [
            pa.field(SIDE_COLUMN, pa.int32()),
            pa.field(TIME_COLUMN, pa.int64()),
            pa.field(HOME_COLUMN, pa.bool_()),
        ]
        return pa.schema(head + list(self.sides[0].payload) + list(self.sides[1].payload))

    @property
    def held_schema(self) -> pa.Schema:
        """Schema of the held updates: the prepared input plus the arrival number."""
        return self.input_schema.append(pa.field(SEQ_COLUMN, pa.int64()))

    def value_fields(self, side: int) -> list[pa.Field]:
        """The internal value fields of ``side`` (0 left, 1 right)."""
        s = self.sides[side]
        return [s.payload.field(n) for n in s.value_internal]

    def _fk_fields(self) -> list[pa.Field]:
        return [pa.field(n, t) for n, t in zip(self.fk_state, self.fk_types, strict=True)]

    @property
    def left_schema(self) -> pa.Schema:
        """Schema of the left versions (:mod:`interlace.state.foreign_key`)."""
        keys = [pa.field(n, t) for n, t in zip(self.key_internal, self.left_key_types,
                                                strict=True)]
        head = [pa.field(LEFT_TIME, pa.int64()), pa.field(LEFT_DELETED, pa.bool_())]
        tail = [pa.field(NEXT_VERSION, pa.int64())]
        return pa.schema(keys + head + self._fk_fields() + self.value_fields(0) + tail)

    @property
    def right_schema(self) -> pa.Schema:
        """Schema of the right versions (:mod:`interlace.state.foreign_key`)."""
        head = [pa.field(RIGHT_TIME, pa.int64()), pa.field(RIGHT_DELETED, pa.bool_())]
        return pa.schema(self._fk_fields() + head + self.value_fields(1))

    @property
    def output_schema(self) -> pa.Schema:
        """Arrow schema of the output rows, in :attr:`output_names` order."""
        types = list(self.left_key_types)
        types += [f.type for f in self.value_fields(0)] + [f.type for f in self.value_fields(1)]
        types += [pa.string(), self.time_type, pa.int64()]
        if self.dlq:
            types.append(pa.string())
        return pa.schema([pa.field(n, t) for n, t in zip(self.output_names, types, strict=True)])

    @classmethod
    def from_schemas(
        cls, spec: ForeignKeyJoin, left: pa.Schema, right: pa.Schema
    ) -> ForeignKeyJoinPlan:
        """Resolve ``spec`` against the Arrow schemas of both tables (no Spark).

        Raises:
            ConfigError: A key, foreign-key, event-time, value or tombstone column is
                missing, a tombstone column is not boolean, a foreign-key column and its right
                key have incompatible types, or two output columns collide.
        """
        sides = tuple(
            spec_table_side(spec, side, schema)
            for side, schema in (("left", left), ("right", right))
        )
        require_names(left.names, spec.foreign_key_columns, "foreign_key_columns",
                      "the left table")
        fk_types = tuple(
            common_key_arrow_type(fk, left.field(fk).type, rk, right.field(rk).type,
                                  fields=("foreign_key_columns", "right_keys"))
            for fk, rk in zip(spec.foreign_key_columns, spec.right_keys, strict=True)
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
            left_key_types=tuple(left.field(k).type for k in spec.left_keys),
            fk_types=fk_types,
            fk_internal=tuple(sides[0].internal(c) for c in spec.foreign_key_columns),
            time_type=left.field(spec.side_event_time_column("left")).type,
            output_names=names,
            fp=spec.state_fingerprint(left.names, right.names),
        )
