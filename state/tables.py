"""A stream-table join's key-group state: the table's version history and the held rows.

One key group's state (``stream_table/step.py`` keeps it) is two Arrow tables and a counter:

* ``history``: every retained table version of every key in the key group, one row each:
  ``__il_tus`` (int64, the version's event time in µs), ``__il_seq`` (int64, its arrival
  number: among equal event times the later arrival wins), ``__il_del`` (bool, a tombstone),
  then the table's key columns, value columns and event-time column (``__il_r<i>``, typed as
  the input's Arrow schema). History retention (SEMANTICS §7) trims it in every call.
* ``held``: the stream rows waiting for ``wm > t`` under ``emit="final"`` (empty under
  ``eager``): ``__il_tus``, ``__il_seq``, then every stream column (``__il_l<i>``).
* ``seq``: the next arrival number.

They are stored as Arrow IPC stream bytes (zstd, as the join buffers:
:data:`~interlace.state.buffers.JOIN_IPC_COMPRESSION`) in the versioned msgpack envelope of
:mod:`interlace.state.blob`, kind ``"stream_table"``:
``{"history": <IPC>, "held": <IPC>, "seq": int}``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Self

import pyarrow as pa
from interlace.state import blob
from interlace.state.buffers import JOIN_IPC_COMPRESSION, TIME_COLUMN, ipc_to_table, table_to_ipc
from interlace.state.errors import StateDecodeError

__all__ = [
    "SEQ_COLUMN",
    "TOMBSTONE_FLAG_COLUMN",
    "StreamTableState",
    "TablesState",
    "decode_stream_table_state",
    "decode_tables",
    "encode_stream_table_state",
    "encode_tables",
    "held_schema",
    "history_schema",
]

SEQ_COLUMN = "__il_seq"
TOMBSTONE_FLAG_COLUMN = "__il_del"


def history_schema(table_fields: Sequence[pa.Field]) -> pa.Schema:
    """The history's schema: time, arrival number, tombstone flag, then ``table_fields``."""
    head = [
        pa.field(TIME_COLUMN, pa.int64()),
        pa.field(SEQ_COLUMN, pa.int64()),
        pa.field(TOMBSTONE_FLAG_COLUMN, pa.bool_()),
    ]
    return pa.schema(head + list(table_fields))


def held_schema(stream_payload: pa.Schema) -> pa.Schema:
    """The held rows' schema: time, arrival number, then the stream's payload columns."""
    head = [pa.field(TIME_COLUMN, pa.int64()), pa.field(SEQ_COLUMN, pa.int64())]
    return pa.schema(head + list(stream_payload))


class TablesState:
    """Base of the table joins' key-group states: named Arrow tables and the next arrival number.

    A subclass is a dataclass whose fields are its tables, in :attr:`TABLES` order, then
    ``seq: int = 0``; it names its blob :attr:`KIND` and itself in messages (:attr:`WHAT`).
    Stored by :func:`encode_tables` (``{<table>: <IPC>, ..., "seq": int}``).
    """

    KIND: ClassVar[str]
    WHAT: ClassVar[str]
    TABLES: ClassVar[tuple[str, ...]]
    seq: int

    @classmethod
    def empty(cls, *schemas: pa.Schema) -> Self:
        """Return a state with no rows (one schema per table, in :attr:`TABLES` order)."""
        make: Callable[..., Self] = cls
        return make(*(schema.empty_table() for schema in schemas))

    @property
    def num_rows(self) -> int:
        """Rows in all the tables."""
        return sum(int(getattr(self, name).num_rows) for name in self.TABLES)

    def encode(self, fp: str) -> bytes:
        """Encode the state as a version-1 blob of :attr:`KIND`."""
        tables = {name: getattr(self, name) for name in self.TABLES}
        return encode_tables(self.KIND, fp, tables, self.seq)

    @classmethod
    def decode(cls, data: bytes, fp: str | None, *schemas: pa.Schema) -> Self:
        """Decode a blob of :attr:`KIND` (``schemas``: each table's, in :attr:`TABLES` order).

        Raises as :func:`decode_tables`.
        """
        expected = dict(zip(cls.TABLES, schemas, strict=True))
        tables, seq = decode_tables(data, cls.KIND, fp, expected, cls.WHAT)
        make: Callable[..., Self] = cls
        return make(*(tables[name] for name in cls.TABLES), seq)


@dataclass
class StreamTableState(TablesState):
    """One key group's stream-table state (see the module docstring)."""

    KIND = "stream_table"
    WHAT = "stream-table"
    TABLES = ("history", "held")

    history: pa.Table
    held: pa.Table
    seq: int = 0


def encode_tables(kind: str, fp: str, tables: dict[str, pa.Table], seq: int) -> bytes:
    """Encode named Arrow tables and an arrival counter as a version-1 blob of ``kind``.

    The layout of the table joins' states (:class:`TablesState`):
    ``{<name>: <Arrow IPC, zstd>, ..., "seq": int}``.
    """
    body: dict[str, object] = {
        name: table_to_ipc(table, JOIN_IPC_COMPRESSION) for name, table in tables.items()
    }
    body["seq"] = int(seq)
    return blob.encode(kind, fp, body)


def decode_tables(
    data: bytes, kind: str, fp: str | None, schemas: dict[str, pa.Schema], what: str
) -> tuple[dict[str, pa.Table], int]:
    """Decode a blob written by :func:`encode_tables`, checking each table's schema.

    Args:
        data: The blob bytes.
        kind: The blob kind expected.
        fp: The running spec's fingerprint (``None`` skips the check).
        schemas: The expected schema of each stored table, by name.
        what: The operator, for messages (``"stream-table"``).

    Raises:
        StateDecodeError: A stored table's schema differs from the expected one.
        StateVersionError: See :func:`interlace.state.blob.decode`.
    """
    body = blob.decode(data, kind=kind, fp=fp)
    tables = {name: ipc_to_table(body[name]) for name in schemas}
    for name, want in schemas.items():
        got = tables[name].schema
        if not got.equals(want):
            msg = (
                f"{what} {name} schema {got} differs from the expected {want}; the input "
                "columns changed between restarts; start from a new checkpoint"
            )
            raise StateDecodeError(msg)
    return tables, int(body.get("seq", 0))


def encode_stream_table_state(state: StreamTableState, fp: str) -> bytes:
    """Encode a key group's state as a version-1 ``stream_table`` blob."""
    return state.encode(fp)


def decode_stream_table_state(
    data: bytes, fp: str | None, history: pa.Schema, held: pa.Schema
) -> StreamTableState:
    """Decode a ``stream_table`` blob (running the migration chain).

    Args:
        data: The blob bytes.
        fp: The running spec's fingerprint (``None`` skips the check).
        history: Expected history schema.
        held: Expected held-rows schema.

    Raises:
        StateDecodeError: A stored table's schema differs from the expected one.
        StateVersionError: See :func:`interlace.state.blob.decode`.
    """
    return StreamTableState.decode(data, fp, history, held)
