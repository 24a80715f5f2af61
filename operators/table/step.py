"""The table-table join's pure core: state × micro-batch × watermark → changelog, new state.

:func:`step` advances one key group by one call (SEMANTICS §7, §9). It makes no Spark calls,
does no I/O and reads no clock: the operator watermark ``wm_us`` arrives as an argument.

Vectorised per key group. §9 applies updates one at a time, but each key's outcome depends
only on its own updates, so the due updates are sorted by (key, event time, left before
right, arrival) and each key's run is folded with array arithmetic: the latest update of a
side at or before each position is a running maximum of positions (reset at the key's first
position, where the stored state takes over), so presence before and after each update, the
values to emit and the versions are gathers and cumulative sums. Neighbours: ``plan.py`` (the
plan it runs), :mod:`interlace.state.table_join` (the state it keeps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from interlace.operators.common.arrow import i64
from interlace.operators.common.changelog import (
    OP_DELETE,
    OP_UPSERT,
    SIDE_NAMES,
    add_count,
    bools,
    changelog_step,
    reject_updates,
    take_or_null,
    tombstone_mask,
)
from interlace.operators.common.keys import key_codes
from interlace.operators.common.prepare import SIDE_COLUMN
from interlace.operators.table.plan import NEXT_VERSION, SIDE_DELETED, SIDE_TIME, TableJoinPlan
from interlace.state.buffers import TIME_COLUMN
from interlace.state.table_join import TableJoinState
from interlace.state.tables import SEQ_COLUMN
from numpy.typing import NDArray

__all__ = ["TableJoinStepResult", "step"]

_NONE = np.int64(-1)


@dataclass
class TableJoinStepResult:
    """What one call of :func:`step` produced.

    Attributes:
        output: Output rows (``plan.output_names``): the changelog rows, per key in
            ``version`` order, then dead letters.
        state: The key group's per-key versions and held updates after the call.
        next_due_us: The earliest event time among held updates (due when ``wm >`` it), or
            ``None``.
        counters: Per-call counts: ``applied_left/right``, ``upserts``, ``deletes``,
            ``held_left/right`` (received and not yet due), ``late_dropped_left/right``,
            ``dead_lettered_left/right``, ``null_key_dropped_left/right``,
            ``null_event_time_dropped_left/right``.
    """

    output: pa.Table
    state: TableJoinState
    next_due_us: int | None
    counters: dict[str, int]


def _present(how: str, left: NDArray[np.bool_], right: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """§9 state of the join: inner both sides, left the left, full either."""
    if how == "inner":
        return left & right
    if how == "left":
        return left
    return left | right


def _key_columns(plan: TableJoinPlan, rows: pa.Table, side: NDArray[np.int32]) -> list[pa.Array]:
    """Each update's key in the common key types (from its own side's key columns)."""
    is_left = pa.array(side == 0)
    cols = []
    for i, typ in enumerate(plan.key_types):
        left = rows.column(plan.sides[0].key_internal[i]).cast(typ)
        right = rows.column(plan.sides[1].key_internal[i]).cast(typ)
        col = pc.if_else(is_left, left, right)  # -0.0 is 0.0 in key_codes
        cols.append(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    return cols


def _codes(
    plan: TableJoinPlan, stored: pa.Table, due_keys: list[pa.ChunkedArray]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Shared key codes of the stored keys and the due updates' keys."""
    m = stored.num_rows
    cols = [
        pa.chunked_array(stored.column(k).chunks + d.chunks, type=d.type)
        for k, d in zip(plan.key_internal, due_keys, strict=True)
    ]
    codes = key_codes(cols, m + len(due_keys[0]), null_is_value=True)
    return codes[:m], codes[m:]


def _latest_at(mine: NDArray[np.bool_], group_start: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per position, the last position ``<=`` it in its key's run where ``mine``; -1 if none."""
    pos = np.where(mine, np.arange(len(mine), dtype=np.int64), _NONE)
    last = np.maximum.accumulate(pos) if len(pos) else pos
    return np.where(last >= group_start, last, _NONE)


def step(
    plan: TableJoinPlan, state: TableJoinState, batch: pa.Table, wm_us: int | None
) -> TableJoinStepResult:
    """Advance one key group by one call: apply the due updates, emit the changelog.

    The updates are taken, held and applied in the order of
    :func:`~interlace.operators.common.changelog.changelog_step` (SEMANTICS §7, §9). Each
    applied update emits ``upsert`` if the join is present after it, else ``delete`` if it
    was present before, else nothing.

    Args:
        plan: The resolved join.
        state: The key group's per-key versions and held updates before the call.
        batch: Input rows with ``plan.input_schema`` columns (both tables, tagged by side), in
            arrival order.
        wm_us: The operator watermark ``(W + H) * 1000``, or ``None`` if Spark has none yet
            (then nothing is due under ``final``).

    Returns:
        A :class:`TableJoinStepResult`: the output, the new state, the next deadline and the
        counters.
    """
    output, keys, held, next_due_us, counters = changelog_step(
        plan, state.held, state.seq, batch, wm_us,
        lambda due, counters, letters: _apply(plan, state.keys, due, wm_us, counters, letters),
    )
    return TableJoinStepResult(
        output=output,
        state=TableJoinState(keys, held, state.seq + batch.num_rows),
        next_due_us=next_due_us,
        counters=counters,
    )


def _apply(
    plan: TableJoinPlan,
    stored: pa.Table,
    due: pa.Table,
    wm_us: int | None,
    counters: dict[str, int],
    letters: list[pa.Table],
) -> tuple[pa.Table, pa.Table]:
    """Apply the due updates to the stored keys; return the new keys table and the changelog."""
    empty_out = plan.output_schema.empty_table()
    if not due.num_rows:
        return stored, empty_out
    side = np.asarray(due.column(SIDE_COLUMN).to_numpy(), dtype=np.int32)
    # Each update's key in the common key types, computed once: the codes, the output rows
    # and the new state all read it.
    keys = pa.table(_key_columns(plan, due, side), names=list(plan.key_internal))
    stored_codes, due_codes = _codes(plan, stored, keys.columns)
    # The stored row of each due update's key (-1: a new key). Stored codes are distinct.
    lookup = np.full(int(due_codes.max(initial=0)) + 1, -1, dtype=np.int64)
    known = stored_codes < len(lookup)
    lookup[stored_codes[known]] = np.arange(len(stored_codes), dtype=np.int64)[known]
    srow = lookup[due_codes]

    # §9 late: older than the latest applied update of its key in its own table. Within the
    # call, a key's updates are applied in event-time order, so only the stored one matters.
    t = i64(due.column(TIME_COLUMN))
    stored_t = [
        np.where(srow >= 0, i64(stored.column(SIDE_TIME[s]).fill_null(np.iinfo(np.int64).min))
                 .take(np.maximum(srow, 0)) if stored.num_rows else 0, np.iinfo(np.int64).min)
        for s in (0, 1)
    ]
    late = t < np.where(side == 0, stored_t[0], stored_t[1])
    if late.any():
        for s in (0, 1):
            mask = late & (side == s)
            if mask.any():
                reject_updates(plan, s, due.filter(pa.array(mask)), wm_us, "late", counters,
                               letters)
        keep = pa.array(~late)
        due, side, t, srow = due.filter(keep), side[~late], t[~late], srow[~late]
        keys = keys.filter(keep)
        due_codes = due_codes[~late]
        if not due.num_rows:
            return stored, empty_out

    # §9: one at a time by key, event time, left before right, arrival.
    order = np.lexsort((i64(due.column(SEQ_COLUMN)), side, t, due_codes))
    due, keys = due.take(pa.array(order)), keys.take(pa.array(order))
    side, t, srow, codes = side[order], t[order], srow[order], due_codes[order]
    n = len(order)
    first = np.ones(n, dtype=bool)
    first[1:] = codes[1:] != codes[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(n, dtype=np.int64), 0))
    last = np.ones(n, dtype=bool)
    last[:-1] = first[1:]
    for s, name in enumerate(SIDE_NAMES):
        add_count(counters, f"applied_{name}", int((side == s).sum()))

    # Per side: the latest update at or before each position (own), else the stored version.
    m = stored.num_rows
    has_stored = srow >= 0
    sides = [_side_values(plan, s, stored, due) for s in (0, 1)]
    src, present, stored_present = [], [], []
    for s in (0, 1):
        own = _latest_at(side == s, group_start)
        from_store = np.where(has_stored, srow, _NONE)
        idx = np.where(own >= 0, m + own, from_store)
        ever = idx >= 0  # the side has a version (maybe a tombstone)
        deleted = sides[s][2]
        src.append(idx)
        present.append(ever & ~deleted[np.maximum(idx, 0)])
        stored_present.append(has_stored & ~deleted[np.maximum(from_store, 0)])
    after = _present(plan.how, present[0], present[1])
    before = np.empty(n, dtype=bool)
    before[1:] = after[:-1]
    before[first] = _present(plan.how, stored_present[0], stored_present[1])[first]
    upsert = after
    delete = ~after & before
    emitted = upsert | delete
    add_count(counters, "upserts", int(upsert.sum()))
    add_count(counters, "deletes", int(delete.sum()))

    # Versions: the stored next version, plus the rows emitted earlier in the key's run.
    base = np.zeros(n, dtype=np.int64)
    if m:
        base = np.where(has_stored, i64(stored.column(NEXT_VERSION)).take(np.maximum(srow, 0)), 0)
    prior: NDArray[np.int64] = np.cumsum(emitted, dtype=np.int64) - emitted
    version = base + prior - prior[group_start]

    output = _changelog(plan, sides, keys, due, side, src, upsert, delete, version)
    new_keys = _new_keys(plan, stored, sides, keys, src, first, last, version + emitted, srow)
    return new_keys, output


_Values = tuple[pa.Table, NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_]]


def _side_values(plan: TableJoinPlan, s: int, stored: pa.Table, due: pa.Table) -> _Values:
    """Side ``s``'s value columns, µs times, tombstone flags and whether each is a version.

    Stored rows, then due rows. A stored key whose side never had an update has no version.
    """
    sd = plan.sides[s]
    names = list(sd.value_internal)
    values = pa.concat_tables([stored.select(names), due.select(names)])
    stored_time = stored.column(SIDE_TIME[s])
    times = np.concatenate([i64(stored_time.fill_null(0)), i64(due.column(TIME_COLUMN))])
    deleted = np.concatenate([
        bools(stored.column(SIDE_DELETED[s]).fill_null(True)),
        tombstone_mask(due, sd.tombstone_internal, sd.value_internal),
    ])
    known = np.concatenate([bools(pc.is_valid(stored_time)), np.ones(due.num_rows, dtype=bool)])
    return values, times, deleted, known


def _changelog(
    plan: TableJoinPlan,
    sides: list[_Values],
    keys: pa.Table,
    due: pa.Table,
    side: NDArray[np.int32],
    src: list[NDArray[np.int64]],
    upsert: NDArray[np.bool_],
    delete: NDArray[np.bool_],
    version: NDArray[np.int64],
) -> pa.Table:
    """The changelog rows of the applied updates that emit (SEMANTICS §9 output columns)."""
    emitted = upsert | delete
    rows = np.flatnonzero(emitted)
    cols: list[pa.Array | pa.ChunkedArray] = list(keys.take(pa.array(rows)).columns)
    for s in (0, 1):
        values, _, deleted, _ = sides[s]
        idx = src[s][rows]
        valid = upsert[rows] & (idx >= 0)
        valid &= ~deleted[np.maximum(idx, 0)]
        taken = take_or_null(values, idx, valid)
        cols += [taken.column(c) for c in taken.column_names]
    op = np.where(upsert[rows], OP_UPSERT, OP_DELETE)
    cols.append(pa.array(op, pa.string()))
    times = []
    for s in (0, 1):
        col = due.column(plan.sides[s].time_internal).take(pa.array(rows))
        times.append(col.cast(plan.time_type))
    cols.append(pc.if_else(pa.array(side[rows] == 0), times[0], times[1]))
    cols.append(pa.array(version[rows], pa.int64()))
    if plan.dlq:
        cols.append(pa.nulls(len(rows), pa.string()))
    return pa.Table.from_arrays(cols, schema=plan.output_schema)


def _new_keys(
    plan: TableJoinPlan,
    stored: pa.Table,
    sides: list[_Values],
    keys: pa.Table,
    src: list[NDArray[np.int64]],
    first: NDArray[np.bool_],
    last: NDArray[np.bool_],
    next_version: NDArray[np.int64],
    srow: NDArray[np.int64],
) -> pa.Table:
    """The keys table after the call: untouched stored keys, then each touched key's last state."""
    ends = np.flatnonzero(last)
    cols: list[pa.Array | pa.ChunkedArray] = list(keys.take(pa.array(ends)).columns)
    for s in (0, 1):
        values, times, deleted, known = sides[s]
        idx = src[s][ends]
        # A side that never had an update stays NULL (not a tombstone at the epoch: §9 judges
        # a later update late against the time of one already applied, and there is none).
        valid = (idx >= 0) & known[np.maximum(idx, 0)]
        cols.append(pa.array(np.where(valid, times[np.maximum(idx, 0)], 0), pa.int64(),
                             mask=~valid))
        cols.append(pa.array(deleted[np.maximum(idx, 0)], pa.bool_(), mask=~valid))
        taken = take_or_null(values, idx, valid)
        cols += [taken.column(c) for c in taken.column_names]
    cols.append(pa.array(next_version[ends], pa.int64()))
    touched = pa.Table.from_arrays(cols, schema=plan.keys_schema)
    kept = np.ones(stored.num_rows, dtype=bool)
    kept[srow[first & (srow >= 0)]] = False
    if not stored.num_rows:
        return touched
    untouched = stored.filter(pa.array(kept)) if not kept.all() else stored
    return pa.concat_tables([untouched, touched]).combine_chunks()
