"""Columnar (Arrow) per-side join buffers and their blob body.

A key group's join state is two Arrow tables, one per side, holding every buffered row of
every key in that key group. In memory (what :func:`~interlace.operators.join.step.step`
reads and returns) each has:

* ``__il_tus`` (int64): the row's event time in microseconds since the epoch.
* ``__il_m`` (bool): whether the row has matched at least once (outer / anti joins need it).
* the side's payload columns (``__il_l0, __il_l1, ...`` or ``__il_r0, ...``), which include the
  key columns and the original event-time column, typed as the input's Arrow schema.

They are stored as Arrow IPC stream bytes inside the versioned msgpack envelope of
:mod:`interlace.state.blob` (kind ``"join"``), so the layout survives restarts and upgrades.
Since format version 2 a side's stored table leaves ``__il_tus`` out when the side's
event-time payload column gives it back exactly (that column read as UTC, in µs: always so
in a UTC session; the body's ``"times"`` names the column), and :func:`decode_join_state`
recomputes it; version-1 bodies are upgraded by :func:`upgrade_join_body_v1`. The IPC buffers
are compressed with :data:`JOIN_IPC_COMPRESSION` (zstd): every blob byte crosses from the JVM
to Python and back in each micro-batch, and Arrow IPC compression is self-describing, so
readers need no setting and uncompressed blobs (written before compression was turned on) read
the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from interlace.state import blob
from interlace.state.errors import StateDecodeError
from numpy.typing import NDArray

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
    "upgrade_join_body_v1",
]

TIME_COLUMN = "__il_tus"
MATCHED_COLUMN = "__il_m"
JOIN_IPC_COMPRESSION: str | None = "zstd"
"""Arrow IPC buffer codec for join blobs (``None``: uncompressed); read at call time."""

_SIDES = ("left", "right")
_US_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1}


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


def _micros(column: pa.ChunkedArray) -> NDArray[np.int64] | None:
    """A timestamp column as int64 µs since the epoch (its values read as UTC).

    ``None`` if the column is not a timestamp or holds a null. Nanoseconds are floor-divided
    by 1000; callers that drop ``__il_tus`` compare the result with it, so a value that is not
    a whole µs keeps the stored column.
    """
    typ = column.type
    if not pa.types.is_timestamp(typ) or column.null_count:
        return None
    raw = np.asarray(column.to_numpy()).view(np.int64)  # datetime64[unit], no copy
    if typ.unit == "ns":
        return raw // 1000
    factor = _US_PER_UNIT[typ.unit]
    return raw if factor == 1 else raw * factor


def _without_time(table: pa.Table, candidates: Sequence[str]) -> tuple[pa.Table, str | None]:
    """``table`` without ``__il_tus`` and the candidate column that gives it back, if any.

    The first of ``candidates`` (payload columns) whose :func:`_micros` equals ``__il_tus`` on
    every row is the one; none (another session time zone, no timestamp column): ``table``
    is returned whole, with ``None``.
    """
    stored = table.column(TIME_COLUMN)
    if stored.null_count:
        return table, None
    want = np.asarray(stored.to_numpy(), dtype=np.int64)
    for name in candidates:
        if name == TIME_COLUMN or name not in table.column_names:
            continue
        got = _micros(table.column(name))
        if got is not None and np.array_equal(got, want):
            return table.drop_columns([TIME_COLUMN]), name
    return table, None


def _with_time(table: pa.Table, name: str, side: str) -> pa.Table:
    """``table`` with ``__il_tus`` recomputed from its event-time column ``name`` (first)."""
    got = _micros(table.column(name)) if name in table.column_names else None
    if got is None:
        msg = (
            f"{side} join buffer has no timestamp column {name!r} without nulls to recompute "
            f"the event time from (columns {table.column_names})"
        )
        raise StateDecodeError(msg)
    return table.add_column(0, pa.field(TIME_COLUMN, pa.int64()), pa.array(got, pa.int64()))


def encode_join_state(
    buffers: JoinBuffers, fp: str, time_columns: Sequence[str | None] | None = None
) -> bytes:
    """Encode a key group's buffers as a current-version (2) ``join`` blob.

    Args:
        buffers: The buffers (in-memory layout, with ``__il_tus``).
        fp: The spec fingerprint.
        time_columns: Each side's event-time payload column (``JoinPlan.time_columns``), or
            ``None`` to look for it among the side's timestamp columns. A side's
            ``__il_tus`` is left out of the blob when that column gives it back exactly.
    """
    body: dict[str, Any] = {}
    times: dict[str, str | None] = {}
    for i, (side, table) in enumerate(zip(_SIDES, (buffers.left, buffers.right), strict=True)):
        if time_columns is None:
            candidates = _timestamp_columns(table)
        else:
            name = time_columns[i]
            candidates = [] if name is None else [name]
        stored, times[side] = _without_time(table, candidates)
        body[side] = table_to_ipc(stored, JOIN_IPC_COMPRESSION)
    body["times"] = times
    body["extra"] = dict(sorted(buffers.extra.items()))
    return blob.encode("join", fp, body)


def _timestamp_columns(table: pa.Table) -> list[str]:
    return [f.name for f in table.schema if pa.types.is_timestamp(f.type)]


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
    times = body.get("times") or {}
    tables = []
    for side, schema in (("left", left_schema), ("right", right_schema)):
        table = ipc_to_table(body[side])
        name = times.get(side)
        if name is not None:
            table = _with_time(table, name, side)
        if not table.schema.equals(schema):
            msg = (
                f"{side} join buffer schema {table.schema} differs from the input's {schema}; "
                "the input columns changed between restarts; start from a new checkpoint"
            )
            raise StateDecodeError(msg)
        tables.append(table)
    extra = {str(k): int(v) for k, v in dict(body.get("extra", {})).items()}
    return JoinBuffers(tables[0], tables[1], extra)


def upgrade_join_body_v1(body: Mapping[str, Any]) -> dict[str, Any]:
    """Upgrade a version-1 ``join`` body to version 2 (the migration step for kind ``join``).

    A version-1 side holds ``__il_tus``, ``__il_m``, then the payload. A migration sees no
    spec, so the event-time column is found by value: the first timestamp payload column
    that gives ``__il_tus`` back exactly (see :func:`encode_join_state`). That side is
    re-encoded without ``__il_tus`` and the column named in ``"times"``; a side with no such
    column keeps its bytes as they were (a version-2 side may hold ``__il_tus``).

    Raises:
        StateDecodeError: The body has no ``left`` / ``right`` Arrow IPC bytes.
    """
    out: dict[str, Any] = {}
    times: dict[str, str | None] = {}
    for side in _SIDES:
        data = body.get(side)
        if not isinstance(data, bytes):
            msg = f"version-1 join state has no {side} buffer (body keys {sorted(body)})"
            raise StateDecodeError(msg)
        table = ipc_to_table(data)
        if TIME_COLUMN not in table.column_names:
            msg = f"version-1 {side} join buffer has no {TIME_COLUMN} column"
            raise StateDecodeError(msg)
        stored, times[side] = _without_time(table, _timestamp_columns(table))
        out[side] = data if times[side] is None else table_to_ipc(stored, JOIN_IPC_COMPRESSION)
    out["times"] = times
    out["extra"] = dict(body.get("extra") or {})
    return out


blob.register_body_upgrade("join", 1, upgrade_join_body_v1)
