"""The stream-table plan: a :class:`~.spec.StreamTableJoin` resolved against the input schemas.

:class:`StreamTablePlan` is the picklable runtime description shipped to the Python workers
(times in µs): the internal column names of both inputs (the stream's ``__il_l<i>``, the
table's ``__il_r<i>``), the key types both are compared in, the table's value, valid-from and
tombstone columns, the state schemas and the output columns (SEMANTICS §8). Neighbours:
``spec.py``, ``step.py`` (runs a plan), ``shim.py`` (builds one from Spark schemas).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from interlace.operators.common.checks import require_names, side_field
from interlace.operators.common.keytypes import common_key_arrow_type
from interlace.operators.common.names import DEAD_LETTER_COLUMN, RESERVED_PREFIX
from interlace.operators.common.prepare import SIDE_COLUMN
from interlace.operators.common.tables import TablePlan, check_output_names, table_side
from interlace.operators.stream_table.spec import StreamTableJoin
from interlace.state.buffers import TIME_COLUMN
from interlace.state.tables import held_schema, history_schema

__all__ = [
    "RIGHT_VALID_FROM",
    "SIDE_COLUMN",
    "SIDE_NAMES",
    "STREAM",
    "TABLE",
    "StreamTablePlan",
]

STREAM, TABLE = 0, 1
SIDE_NAMES = ("left", "right")
RIGHT_VALID_FROM = "right_valid_from"
"""The output column holding the joined version's event time (NULL when absent), SEMANTICS §8."""
_STREAM_INTERNAL = RESERVED_PREFIX + "l"
_TABLE_INTERNAL = RESERVED_PREFIX + "r"
_STREAM, _TABLE = "the stream (left input)", "the table (right input)"


@dataclass(frozen=True)
class StreamTablePlan(TablePlan):
    """Everything :func:`~.step.step` needs, resolved against the input schemas.

    Built by :func:`~.shim.prepare_stream_table_join`; tests build it from Arrow schemas with
    :meth:`from_schemas`. Times are in microseconds (``_us``). The prepared input
    (:attr:`input_schema`) holds the side tag, the µs time, every stream column and every
    table column (a row fills its own side's, the other side's are NULL).
    """

    retention_us: int
    stream_names: tuple[str, ...]
    table_names: tuple[str, ...]
    stream_payload: pa.Schema
    table_payload: pa.Schema
    stream_key_internal: tuple[str, ...]
    table_key_internal: tuple[str, ...]
    key_types: tuple[pa.DataType, ...]
    value_names: tuple[str, ...]
    value_internal: tuple[str, ...]
    valid_from_internal: str
    tombstone_internal: str | None

    def side_columns(self, side: int) -> tuple[pa.Schema, tuple[str, ...]]:
        """Input ``side``'s internal payload schema and its column names (0 stream, 1 table)."""
        if side == STREAM:
            return self.stream_payload, self.stream_names
        return self.table_payload, self.table_names

    @property
    def input_schema(self) -> pa.Schema:
        """The prepared input's schema: side tag, µs time, stream columns, table columns."""
        head = [pa.field(SIDE_COLUMN, pa.int32()), pa.field(TIME_COLUMN, pa.int64())]
        return pa.schema(head + list(self.stream_payload) + list(self.table_payload))

    @property
    def history_columns(self) -> tuple[str, ...]:
        """The table columns a version keeps: keys, values, the valid-from time (no repeats)."""
        names = (*self.table_key_internal, *self.value_internal, self.valid_from_internal)
        return tuple(dict.fromkeys(names))

    @property
    def history_schema(self) -> pa.Schema:
        """Schema of the version history (:mod:`interlace.state.tables`)."""
        return history_schema([self.table_payload.field(n) for n in self.history_columns])

    @property
    def held_schema(self) -> pa.Schema:
        """Schema of the held stream rows (:mod:`interlace.state.tables`)."""
        return held_schema(self.stream_payload)

    @property
    def state_schemas(self) -> tuple[pa.Schema, ...]:
        """The state's tables (:class:`~interlace.state.tables.StreamTableState`)."""
        return (self.history_schema, self.held_schema)

    @property
    def output_schema(self) -> pa.Schema:
        """Arrow schema of the output rows, in :attr:`output_names` order."""
        types = [f.type for f in self.stream_payload]
        types += [self.table_payload.field(n).type for n in self.value_internal]
        types.append(self.table_payload.field(self.valid_from_internal).type)
        return self._output_schema(types)

    @classmethod
    def from_schemas(
        cls, spec: StreamTableJoin, stream: pa.Schema, table: pa.Schema
    ) -> StreamTablePlan:
        """Resolve ``spec`` against the Arrow schemas of the stream and the table (no Spark).

        Raises:
            ConfigError: A key, event-time, value or tombstone column is missing, the
                tombstone column is not boolean, key types are incompatible, or two output
                columns collide.
        """
        sn = tuple(stream.names)
        set_, tet = spec.side_event_time_column("left"), spec.side_event_time_column("right")
        assert set_ is not None and tet is not None
        require_names(sn, spec.left_keys, "left_keys", _STREAM)
        require_names(sn, [set_], side_field(spec, "left", "event_time_column"), _STREAM,
                      verb="name")
        # SEMANTICS §7: the table's value columns default to every column but the keys, the
        # event time and the tombstone column.
        side = table_side(
            table,
            _TABLE_INTERNAL,
            spec.right_keys,
            "right_keys",
            tet,
            side_field(spec, "right", "event_time_column"),
            spec.tombstone_column,
            "tombstone_column",
            spec.value_columns,
            "value_columns",
            _TABLE,
        )
        spay = pa.schema([pa.field(f"{_STREAM_INTERNAL}{i}", f.type) for i, f in enumerate(stream)])
        key_types = tuple(
            common_key_arrow_type(lk, stream.field(lk).type, rk, table.field(rk).type)
            for lk, rk in zip(spec.left_keys, spec.right_keys, strict=True)
        )
        return cls(
            how=spec.how,
            emit=spec.emit,
            late_data=spec.late_data,
            retention_us=spec.retention_ms * 1000,
            horizon_ms=spec.horizon_ms,
            stream_names=sn,
            table_names=side.names,
            stream_payload=spay,
            table_payload=side.payload,
            stream_key_internal=tuple(spay.names[sn.index(k)] for k in spec.left_keys),
            table_key_internal=side.key_internal,
            key_types=key_types,
            value_names=side.value_names,
            value_internal=side.value_internal,
            valid_from_internal=side.time_internal,
            tombstone_internal=side.tombstone_internal,
            output_names=_output_names(spec, sn, side.value_names),
            fp=spec.state_fingerprint(sn, side.names),
        )


def _output_names(
    spec: StreamTableJoin, stream: Sequence[str], values: Sequence[str]
) -> tuple[str, ...]:
    names = [spec.left_prefix + c for c in stream]
    names += [spec.right_prefix + c for c in values]
    names.append(RIGHT_VALID_FROM)
    if spec.late_data == "dlq":
        names.append(DEAD_LETTER_COLUMN)
    return check_output_names(
        names,
        f"from `left_prefix`={spec.left_prefix!r}, `right_prefix`={spec.right_prefix!r}, "
        f"`value_columns` and the fixed {RIGHT_VALID_FROM!r}",
        "choose distinct prefixes or fewer value columns",
    )
