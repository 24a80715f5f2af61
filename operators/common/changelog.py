"""Pieces the table joins share in their pure steps (SEMANTICS §4, §7).

The stream-table join (``stream_table/step.py``) and the table-table join
(``table/step.py``) read changelog updates from Arrow, tell tombstones from upserts, count
per call and turn rows they cannot use into dead letters. Those pieces are written once here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from interlace.operators.common.deadletters import dead_letter
from numpy.typing import NDArray

__all__ = ["add_count", "bools", "dead_letter_rows", "tombstone_mask"]


def bools(a: pa.ChunkedArray | pa.Array) -> NDArray[np.bool_]:
    """A boolean Arrow column as a numpy array (NULL must have been filled or not occur)."""
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=bool)


def add_count(counters: dict[str, int], name: str, n: int) -> None:
    """Add ``n`` to ``counters[name]`` (absent names stay absent while ``n`` is 0)."""
    if n:
        counters[name] = counters.get(name, 0) + n


def dead_letter_rows(
    rows: pa.Table,
    payload: pa.Schema,
    names: Sequence[str],
    side: str,
    reason: str,
    wm_us: int | None,
    output_schema: pa.Schema,
) -> pa.Table:
    """One output row per row of ``rows``: NULL columns and a dead letter (SEMANTICS §4).

    Args:
        rows: The rows, holding ``payload``'s internal columns.
        payload: The side's internal payload schema (``__il_l<i>`` / ``__il_r<i>``).
        names: The side's user column names, in payload order.
        side: ``"left"`` or ``"right"``.
        reason: ``"late"`` or ``"null_event_time"``.
        wm_us: The operator watermark, ``None`` before Spark has one.
        output_schema: The operator's output schema; its last column is ``_dead_letter``.
    """
    records = rows.select(payload.names).rename_columns(list(names)).to_pylist()
    # A Python loop, off the hot path: it runs only over rows that are dead-lettered.
    letters = [dead_letter(side, reason, wm_us, r) for r in records]
    cols = [pa.nulls(len(letters), f.type) for f in output_schema][:-1]
    return pa.Table.from_arrays([*cols, pa.array(letters, pa.string())], schema=output_schema)


def tombstone_mask(
    updates: pa.Table, tombstone_column: str | None, value_columns: Sequence[str]
) -> NDArray[np.bool_]:
    """SEMANTICS §7: the tombstone column is true, or (without one) every value is NULL.

    A NULL tombstone flag is not a delete; a table without value columns has no all-NULL
    tombstones (docs/table-joins-semantics-notes.md §5).
    """
    n = updates.num_rows
    if tombstone_column is not None:
        return bools(updates.column(tombstone_column).fill_null(False))
    if not value_columns:
        return np.zeros(n, dtype=bool)
    tomb = np.ones(n, dtype=bool)
    for v in value_columns:
        tomb &= bools(updates.column(v).is_null())
    return tomb
