"""A foreign-key join's key-group state: both tables' latest versions and the held updates.

The left table is partitioned by key group (of its primary key); the right table is
replicated: every key group holds all of it (each right update reaches every key group).
One key group's state (``foreign_key/step.py`` keeps it) is three Arrow tables and a counter:

* ``left``: one row per left primary key of the key group that ever had an applied update:
  the key columns (``__il_k<i>``, typed as the input), ``__il_lt`` (int64 µs: the event time
  of the latest applied left update, what a later one is judged late against),
  ``__il_ld`` (bool: that update was a tombstone), the foreign key (``__il_f<i>``, in the
  type it is compared with the right key in), the left value columns (``__il_l<i>``) and
  ``__il_ver`` (int64: the key's next output ``version``). A key stays after its deletion:
  its version and event time must survive.
* ``right``: one row per right key that ever had an applied update: the key
  (``__il_f<i>``), ``__il_rt``, ``__il_rd`` and the right value columns (``__il_r<i>``).
* ``held``: under ``emit="final"``, the updates waiting for ``wm > t`` (the prepared input's
  columns plus ``__il_seq``); empty under ``eager``.
* ``seq``: the next arrival number (ties between equal event times: the earlier arrival is
  applied first).

They are stored as Arrow IPC stream bytes (zstd) in the versioned msgpack envelope of
:mod:`interlace.state.blob`, kind ``"foreign_key"``: ``{"left": <IPC>, "right": <IPC>,
"held": <IPC>, "seq": int}`` (:func:`~interlace.state.tables.encode_tables`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from interlace.state.tables import TablesState

__all__ = ["ForeignKeyState", "decode_foreign_key_state", "encode_foreign_key_state"]


@dataclass
class ForeignKeyState(TablesState):
    """One key group's foreign-key join state (see the module docstring)."""

    KIND = "foreign_key"
    WHAT = "foreign-key"
    TABLES = ("left", "right", "held")

    left: pa.Table
    right: pa.Table
    held: pa.Table
    seq: int = 0


def encode_foreign_key_state(state: ForeignKeyState, fp: str) -> bytes:
    """Encode a key group's state as a version-1 ``foreign_key`` blob."""
    return state.encode(fp)


def decode_foreign_key_state(
    data: bytes, fp: str | None, left: pa.Schema, right: pa.Schema, held: pa.Schema
) -> ForeignKeyState:
    """Decode a ``foreign_key`` blob (running the migration chain).

    Args:
        data: The blob bytes.
        fp: The running spec's fingerprint (``None`` skips the check).
        left: Expected schema of the left table's versions.
        right: Expected schema of the right table's versions.
        held: Expected schema of the held updates.

    Raises:
        StateDecodeError: A stored table's schema differs from the expected one.
        StateVersionError: See :func:`interlace.state.blob.decode`.
    """
    return ForeignKeyState.decode(data, fp, left, right, held)
