"""A table-table join's key-group state: the latest version of each side per key, held updates.

One key group's state (``table/step.py`` keeps it) is two Arrow tables and a counter:

* ``keys``: one row per key of the key group that ever had an applied update:
  the key columns (``__il_k<i>``, in the type both tables compare them in), then per side
  ``__il_lt`` / ``__il_rt`` (int64 µs: the event time of the side's latest applied update,
  NULL if none: the lateness check of SEMANTICS §9), ``__il_ld`` / ``__il_rd`` (bool: that
  update was a tombstone) and the side's value columns (internal names ``__il_l<i>`` /
  ``__il_r<i>``, typed as the input), last ``__il_ver`` (int64: the key's next output
  ``version``). A key stays after both sides are deleted: its version and the event times a
  later update is judged late against must survive.
* ``held``: under ``emit="final"``, the updates waiting for ``wm > t`` (the prepared input's
  columns plus ``__il_seq``); empty under ``eager``.
* ``seq``: the next arrival number (ties between equal event times: the earlier arrival is
  applied first).

They are stored as Arrow IPC stream bytes (zstd) in the versioned msgpack envelope of
:mod:`interlace.state.blob`, kind ``"table_join"``: ``{"keys": <IPC>, "held": <IPC>,
"seq": int}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from interlace.state.tables import TablesState

__all__ = ["TableJoinState", "decode_table_join_state", "encode_table_join_state"]


@dataclass
class TableJoinState(TablesState):
    """One key group's table-table state (see the module docstring)."""

    KIND = "table_join"
    WHAT = "table-join"
    TABLES = ("keys", "held")

    keys: pa.Table
    held: pa.Table
    seq: int = 0


def encode_table_join_state(state: TableJoinState, fp: str) -> bytes:
    """Encode a key group's state as a version-1 ``table_join`` blob."""
    return state.encode(fp)


def decode_table_join_state(
    data: bytes, fp: str | None, keys: pa.Schema, held: pa.Schema
) -> TableJoinState:
    """Decode a ``table_join`` blob (running the migration chain).

    Args:
        data: The blob bytes.
        fp: The running spec's fingerprint (``None`` skips the check).
        keys: Expected schema of the per-key table.
        held: Expected schema of the held updates.

    Raises:
        StateDecodeError: A stored table's schema differs from the expected one.
        StateVersionError: See :func:`interlace.state.blob.decode`.
    """
    return TableJoinState.decode(data, fp, keys, held)
