"""Columnar (Arrow) per-side join buffers and their blob body.

A key group's join state is two Arrow tables, one per side, holding every buffered row of
every key in that key group:

* ``__il_tus`` (int64): the row's event time in microseconds since the epoch.
* ``__il_m`` (bool): whether the row has matched at least once (outer / anti joins need it).
* the side's payload columns (``__il_l0, __il_l1, ...`` or ``__il_r0, ...``), which include the
  key columns and the original event-time column, typed as the input's Arrow schema.

They are stored as Arrow IPC stream bytes inside the versioned msgpack envelope of
:mod:`interlace.state.blob` (kind ``"join"``), so the layout survives restarts and upgrades.
The IPC buffers are compressed with :data:`JOIN_IPC_COMPRESSION` (zstd): every blob byte
crosses from the JVM to Python and back in each micro-batch, and Arrow IPC compression is
self-describing, so readers need no setting and uncompressed blobs (written before
compression was turned on) read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from interlace.state import blob
from interlace.state.errors import StateDecodeError

__all__ = [
    "JOIN_IPC_COMPRESSION",
    "MATCHED_COLUMN",
    "TIME_COLUMN",
    "JoinBuffers",
    "buffer_schema",
    "decode_join_state",
    "encode_join_state",
    "ipc_to_table",
    "table_to_ipc",
]

TIME_COLUMN = "__il_tus"
MATCHED_COLUMN = "__il_m"
JOIN_IPC_COMPRESSION: str | None = "zstd"
"""Arrow IPC buffer codec for join blobs (``None``: uncompressed); read at call time."""


def buffer_schema(payload: pa.Schema) -> pa.Schema:
    """Return the buffer schema for a side whose payload columns are ``payload``."""
    fields = [pa.field(TIME_COLUMN, pa.int64()), pa.field(MATCHED_COLUMN, pa.bool_())]
    return pa.schema(fields + list(payload))


@dataclass
class JoinBuffers:
    """The buffered rows of one key group, per side (see the module docstring)."""

    left: pa.Table
    right: pa.Table
    extra: dict[str, int] = field(default_factory=dict)

    @classmethod
    def empty(cls, left_schema: pa.Schema, right_schema: pa.Schema) -> JoinBuffers:
        """Return buffers with no rows for the given buffer schemas."""
        return cls(left_schema.empty_table(), right_schema.empty_table())

    @property
    def num_rows(self) -> int:
        """Rows buffered on both sides."""
        return int(self.left.num_rows) + int(self.right.num_rows)


def table_to_ipc(table: pa.Table, compression: str | None = None) -> bytes:
    """Serialise ``table`` as Arrow IPC stream bytes (deterministic for equal tables).

    Args:
        table: The table.
        compression: Buffer codec (``"zstd"``, ``"lz4"``) or ``None``; readers detect it.
    """
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        if table.num_rows:
            writer.write_table(table.combine_chunks())
    return bytes(sink.getvalue().to_pybytes())


def ipc_to_table(data: bytes) -> pa.Table:
    """Read Arrow IPC stream bytes written by :func:`table_to_ipc`."""
    try:
        return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        msg = f"join buffer is not a valid Arrow IPC stream ({len(data)} bytes)"
        raise StateDecodeError(msg) from exc


def encode_join_state(buffers: JoinBuffers, fp: str) -> bytes:
    """Encode a key group's buffers as a version-1 ``join`` blob."""
    body = {
        "left": table_to_ipc(buffers.left, JOIN_IPC_COMPRESSION),
        "right": table_to_ipc(buffers.right, JOIN_IPC_COMPRESSION),
        "extra": dict(sorted(buffers.extra.items())),
    }
    return blob.encode("join", fp, body)


def decode_join_state(
    data: bytes, fp: str | None, left_schema: pa.Schema, right_schema: pa.Schema
) -> JoinBuffers:
    """Decode a ``join`` blob (running the migration chain) into buffers.

    Args:
        data: The blob bytes.
        fp: The running spec's fingerprint (``None`` skips the check).
        left_schema: Expected left buffer schema.
        right_schema: Expected right buffer schema.

    Raises:
        StateDecodeError: If the buffers' schemas differ from the expected ones.
        StateVersionError: See :func:`interlace.state.blob.decode`.
    """
    body = blob.decode(data, kind="join", fp=fp)
    left = ipc_to_table(body["left"])
    right = ipc_to_table(body["right"])
    for side, table, schema in (("left", left, left_schema), ("right", right, right_schema)):
        if not table.schema.equals(schema):
            msg = (
                f"{side} join buffer schema {table.schema} differs from the input's {schema}; "
                "the input columns changed between restarts; start from a new checkpoint"
            )
            raise StateDecodeError(msg)
    extra = {str(k): int(v) for k, v in dict(body.get("extra", {})).items()}
    return JoinBuffers(left, right, extra)
