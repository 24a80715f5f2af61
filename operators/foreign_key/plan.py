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
from interlace.operators.common.changelog import ChangelogPlan
from interlace.operators.common.checks import require_names
from interlace.operators.common.keytypes import common_key_arrow_type
from interlace.operators.common.names import RESERVED_PREFIX
from interlace.operators.common.tables import spec_table_sides
from interlace.operators.foreign_key.spec import ForeignKeyJoin

__all__ = ["FK_PREFIX", "ForeignKeyJoinPlan"]

#: The foreign key in the state (left versions) and the right key (right versions).
FK_PREFIX = RESERVED_PREFIX + "f"
#: Per table: the latest applied update's µs time and its tombstone flag.
LEFT_TIME, LEFT_DELETED = RESERVED_PREFIX + "lt", RESERVED_PREFIX + "ld"
RIGHT_TIME, RIGHT_DELETED = RESERVED_PREFIX + "rt", RESERVED_PREFIX + "rd"
NEXT_VERSION = RESERVED_PREFIX + "ver"


@dataclass(frozen=True)
class ForeignKeyJoinPlan(ChangelogPlan):
    """Everything :func:`~.step.step` needs, resolved against the input schemas.

    Built by :func:`~.shim.prepare_foreign_key_join`; tests build it from Arrow schemas with
    :meth:`from_schemas`. The prepared input (:attr:`input_schema`) holds the side tag, the µs
    time, the home flag (false on the copies of a right update outside its home key group),
    every left column and every right column (a row fills its own side's). :attr:`key_types`
    are the left primary key's, :attr:`fk_types` those the foreign key and the right key are
    compared in.
    """

    fk_types: tuple[pa.DataType, ...]
    fk_internal: tuple[str, ...]

    replicated_side = 1

    @property
    def fk_state(self) -> tuple[str, ...]:
        """The foreign key / right key columns of the state (``__il_f<i>``)."""
        return tuple(f"{FK_PREFIX}{i}" for i in range(len(self.fk_types)))

    def _fk_fields(self) -> list[pa.Field]:
        return [pa.field(n, t) for n, t in zip(self.fk_state, self.fk_types, strict=True)]

    @property
    def left_schema(self) -> pa.Schema:
        """Schema of the left versions (:mod:`interlace.state.foreign_key`)."""
        keys = [pa.field(n, t) for n, t in zip(self.key_internal, self.key_types, strict=True)]
        head = [pa.field(LEFT_TIME, pa.int64()), pa.field(LEFT_DELETED, pa.bool_())]
        tail = [pa.field(NEXT_VERSION, pa.int64())]
        return pa.schema(keys + head + self._fk_fields() + self.value_fields(0) + tail)

    @property
    def right_schema(self) -> pa.Schema:
        """Schema of the right versions (:mod:`interlace.state.foreign_key`)."""
        head = [pa.field(RIGHT_TIME, pa.int64()), pa.field(RIGHT_DELETED, pa.bool_())]
        return pa.schema(self._fk_fields() + head + self.value_fields(1))

    @property
    def state_schemas(self) -> tuple[pa.Schema, ...]:
        """The state's tables (:class:`~interlace.state.foreign_key.ForeignKeyState`)."""
        return (self.left_schema, self.right_schema, self.held_schema)

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
        sides = spec_table_sides(spec, left, right)
        require_names(left.names, spec.foreign_key_columns, "foreign_key_columns",
                      "the left table")
        fk_types = tuple(
            common_key_arrow_type(fk, left.field(fk).type, rk, right.field(rk).type,
                                  fields=("foreign_key_columns", "right_keys"))
            for fk, rk in zip(spec.foreign_key_columns, spec.right_keys, strict=True)
        )
        return cls._resolved(
            spec,
            left,
            right,
            sides,
            key_types=tuple(left.field(k).type for k in spec.left_keys),
            fk_types=fk_types,
            fk_internal=tuple(sides[0].internal(c) for c in spec.foreign_key_columns),
        )
