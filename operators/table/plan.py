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
from interlace.operators.common.changelog import ChangelogPlan
from interlace.operators.common.keytypes import common_key_arrow_type
from interlace.operators.common.names import RESERVED_PREFIX
from interlace.operators.common.tables import spec_table_sides
from interlace.operators.table.spec import TableJoin

__all__ = ["TableJoinPlan"]

#: Per side: the latest applied update's µs time and its tombstone flag (state ``keys``).
SIDE_TIME = (RESERVED_PREFIX + "lt", RESERVED_PREFIX + "rt")
SIDE_DELETED = (RESERVED_PREFIX + "ld", RESERVED_PREFIX + "rd")
NEXT_VERSION = RESERVED_PREFIX + "ver"


@dataclass(frozen=True)
class TableJoinPlan(ChangelogPlan):
    """Everything :func:`~.step.step` needs, resolved against the input schemas.

    Built by :func:`~.shim.prepare_table_join`; tests build it from Arrow schemas with
    :meth:`from_schemas`. The prepared input (:attr:`input_schema`) holds the side tag, the µs
    time, every left column and every right column (a row fills its own side's);
    :attr:`key_types` are the types both tables' keys are compared in.
    """

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
    def state_schemas(self) -> tuple[pa.Schema, ...]:
        """The state's tables (:class:`~interlace.state.table_join.TableJoinState`): keys, held."""
        return (self.keys_schema, self.held_schema)

    @classmethod
    def from_schemas(cls, spec: TableJoin, left: pa.Schema, right: pa.Schema) -> TableJoinPlan:
        """Resolve ``spec`` against the Arrow schemas of both tables (no Spark).

        Raises:
            ConfigError: A key, event-time, value or tombstone column is missing, a tombstone
                column is not boolean, key types are incompatible, or two output columns
                collide.
        """
        sides = spec_table_sides(spec, left, right)
        key_types = tuple(
            common_key_arrow_type(lk, left.field(lk).type, rk, right.field(rk).type)
            for lk, rk in zip(spec.left_keys, spec.right_keys, strict=True)
        )
        return cls._resolved(spec, left, right, sides, key_types=key_types)
