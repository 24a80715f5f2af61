"""The stream-table join's pure core: state × micro-batch × watermark → output, new state.

:func:`step` advances one key group by one call (SEMANTICS §7–§8). It makes no Spark calls,
does no I/O and reads no clock: the operator watermark ``wm_us`` arrives as an argument.
Vectorised per key group: the as-of lookup sorts the history by (key code, time rank) packed
into one int64 and finds each stream row's version with one ``np.searchsorted``; retention is
array arithmetic over the same order. On a large history both run only on the keys a call can
change or read: the quiet keys are split off first and carried over (:func:`_split_quiet`),
so a call's sorting grows with what it touches, not with the table. Neighbours: ``plan.py``
(the plan it runs), :mod:`interlace.state.tables` (the state it keeps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from interlace.operators.common.arrow import i64
from interlace.operators.common.changelog import (
    add_count,
    bools,
    earliest_time_us,
    reject_updates,
    split_pending,
    tombstone_mask,
    with_dead_letters,
)
from interlace.operators.common.keys import (
    has_null_key,
    key_codes,
    key_codes_across,
    may_match,
)
from interlace.operators.stream_table.plan import (
    SIDE_COLUMN,
    STREAM,
    TABLE,
    StreamTablePlan,
)
from interlace.state.buffers import TIME_COLUMN
from interlace.state.tables import SEQ_COLUMN, TOMBSTONE_FLAG_COLUMN, StreamTableState
from numpy.typing import NDArray

__all__ = ["StreamTableStepResult", "step"]


@dataclass
class StreamTableStepResult:
    """What one call of :func:`step` produced.

    Attributes:
        output: Output rows (``plan.output_names``) as an Arrow table: the joined stream rows
            in event-time order (ties: arrival), then dead letters.
        state: The key group's history and held rows after the call.
        next_due_us: The earliest event time among held rows (due when ``wm >`` it), or
            ``None``.
        next_trim_us: The earliest ``wm`` at which retention would drop a stored version
            (reached when ``wm >=`` it), or ``None``.
        counters: Per-call counts: ``joined`` (rows emitted with a version),
            ``unmatched_left`` (``left`` rows emitted without one), ``absent_dropped_left``
            (``inner`` rows whose key was absent), ``held_left`` (stream rows received and
            not yet due), ``versions_inserted`` / ``versions_evicted``,
            ``late_dropped_left/right``, ``dead_lettered_left/right``,
            ``null_key_dropped_left/right``, ``null_event_time_dropped_left/right``.
    """

    output: pa.Table
    state: StreamTableState
    next_due_us: int | None
    next_trim_us: int | None
    counters: dict[str, int]


def _admit(
    plan: StreamTablePlan,
    side: int,
    rows: pa.Table,
    wm_us: int | None,
    counters: dict[str, int],
    letters: list[pa.Table],
) -> pa.Table:
    """Set aside a side's rows without an event time and its late rows (drop or dlq).

    Late (SEMANTICS §8): ``t < wm - HR`` on arrival. Without a watermark nothing is late.
    """
    null_t = bools(rows.column(TIME_COLUMN).is_null())
    for mask, reason in ((null_t, "null_event_time"), (None, "late")):
        if mask is None:
            if wm_us is None or not rows.num_rows:
                break
            mask = i64(rows.column(TIME_COLUMN)) < wm_us - plan.retention_us
        if not mask.any():
            continue
        reject_updates(plan, side, rows.filter(pa.array(mask)), wm_us, reason, counters, letters)
        rows = rows.filter(pa.array(~mask))
    return rows


def _as_of(
    plan: StreamTablePlan, probe: pa.Table, history: pa.Table
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """For each probe row, the history row of its key as of its event time (SEMANTICS §7).

    The version with the greatest event time ``<= t``, ties: the greatest arrival number.
    The history is sorted by (key code, rank of its time) packed into one int64 (ranks are
    dense over the history's distinct times, so the packing cannot overflow), then by arrival;
    each probe row's version is the last entry ``<=`` (its code, rank of the greatest history
    time ``<= t``), if that entry has its code.

    Returns:
        The history index per probe row (-1: none) and whether its key is present (a
        version exists and is not a tombstone).
    """
    n = probe.num_rows
    idx = np.full(n, -1, dtype=np.int64)
    if not n or not history.num_rows:
        return idx, np.zeros(n, dtype=bool)
    pcode, hcode = key_codes_across(
        probe, plan.stream_key_internal, history, plan.table_key_internal, plan.key_types
    )
    ht = i64(history.column(TIME_COLUMN))
    uniq_t = np.unique(ht)
    k = np.int64(len(uniq_t) + 1)
    hcomp = hcode * k + np.searchsorted(uniq_t, ht, "left")
    order = np.lexsort((i64(history.column(SEQ_COLUMN)), hcomp))
    rank = np.searchsorted(uniq_t, i64(probe.column(TIME_COLUMN)), "right") - 1
    pos = np.searchsorted(hcomp[order], pcode * k + rank, "right") - 1
    found = (pcode >= 0) & (pos >= 0)
    cand = order[np.maximum(pos, 0)]
    found &= hcode[cand] == pcode
    idx[found] = cand[found]
    tomb = bools(history.column(TOMBSTONE_FLAG_COLUMN))
    return idx, found & ~tomb[np.maximum(idx, 0)]


def _joined(
    plan: StreamTablePlan, due: pa.Table, history: pa.Table, counters: dict[str, int]
) -> pa.Table:
    """The output rows of the due stream rows, in event-time order (ties: arrival)."""
    by_time = np.lexsort((i64(due.column(SEQ_COLUMN)), i64(due.column(TIME_COLUMN))))
    due = due.take(pa.array(by_time))
    idx, present = _as_of(plan, due, history)
    add_count(counters, "joined", int(present.sum()))
    if plan.how == "inner":
        add_count(counters, "absent_dropped_left", int((~present).sum()))
        due = due.filter(pa.array(present))
        idx = idx[present]
        present = present[present]
    else:
        add_count(counters, "unmatched_left", int((~present).sum()))
    n = due.num_rows
    take = pa.array(np.maximum(idx, 0), mask=~present)
    cols: list[pa.Array | pa.ChunkedArray] = [due.column(c) for c in plan.stream_payload.names]
    for c in (*plan.value_internal, plan.valid_from_internal):
        col = history.column(c)
        cols.append(col.take(take) if history.num_rows else pa.nulls(n, col.type))
    if plan.dlq:
        cols.append(pa.nulls(n, pa.string()))
    return pa.Table.from_arrays(cols, schema=plan.output_schema)


def _retain(
    plan: StreamTablePlan, history: pa.Table, wm_us: int | None
) -> tuple[pa.Table, int | None]:
    """Apply SEMANTICS §7 retention: per key, keep the versions newer than ``wm - HR``.

    Plus the newest at or before ``wm - HR``, unless it is a tombstone: every lookup still to
    come is for a ``t >= wm - HR``, and a tombstone as of ``t`` and no version give the same
    absent key (docs/table-joins-semantics-notes.md §12 says why no lookup changes).

    Returns:
        The retained history, sorted by (key, time, arrival), and the earliest ``wm`` at which
        a retained version would be dropped (``None``: never without new updates): a version
        goes when the next one of its key reaches ``wm - HR``, a tombstone when it does.
    """
    n = history.num_rows
    if not n:
        return history, None
    codes = key_codes([history.column(k) for k in plan.table_key_internal], n, null_is_value=True)
    t = i64(history.column(TIME_COLUMN))
    order = np.lexsort((i64(history.column(SEQ_COLUMN)), t, codes))
    c, ts = codes[order], t[order]
    tomb = bools(history.column(TOMBSTONE_FLAG_COLUMN))[order]
    same_next = np.zeros(n, dtype=bool)
    same_next[:-1] = c[1:] == c[:-1]
    if wm_us is not None:
        older = ts <= wm_us - plan.retention_us
        next_older = np.zeros(n, dtype=bool)
        next_older[:-1] = older[1:]
        keep = ~older | (~(same_next & next_older) & ~tomb)
        if not keep.all():
            order, c, ts, tomb = order[keep], c[keep], ts[keep], tomb[keep]
            same_next = np.zeros(len(c), dtype=bool)
            same_next[:-1] = c[1:] == c[:-1]
    history = history.take(pa.array(order))
    same_prev = np.zeros(len(c), dtype=bool)
    same_prev[1:] = same_next[:-1]
    trim = ts[same_prev | tomb]
    return history, int(trim.min()) + plan.retention_us if len(trim) else None


def _split_quiet(
    plan: StreamTablePlan, stored: pa.Table, versions: pa.Table, due: pa.Table
) -> tuple[pa.Table | None, pa.Table]:
    """Split the stored history into its quiet rows and the rest, plus ``versions``.

    A **quiet** row is the only version of its key, not a tombstone, and its key neither gets
    a version nor is looked up in this call: the lookups never read it and retention keeps it
    (the newest version at or before ``wm - HR`` stays unless it is a tombstone), so the call
    can leave it as it is. Finding them costs a pass over the stored rows without hashing
    them all (the whole history's key codes and sort cost the call O(H log H) per key group,
    0.7 s at 2.5M keys; issue 34): the stored history keeps each key's rows next to each other
    (:func:`_retain` sorts by key; quiet rows go first, then the rest, each key in one of
    them), so a row whose key equals a neighbour's, or which is a tombstone, may have other
    versions; a row each of whose key columns holds a value that column has in this call's
    versions or due stream rows may be read. The second test looks at each column on its own
    (Arrow looks up no tuples), so it takes a superset of the rows read, never fewer.

    Returns:
        ``(quiet, active)``: ``active`` holds the other stored rows and ``versions``;
        ``(None, stored and versions)`` when the split is not worth it (small histories) or
        not possible (key types Arrow cannot look up).
    """
    n = stored.num_rows
    whole = pa.concat_tables([stored, versions]) if versions.num_rows else stored
    if n < max(_SPLIT_MIN_ROWS, 2) or n < _SPLIT_RATIO * (versions.num_rows + due.num_rows):
        return None, whole
    read = may_match(stored, plan.table_key_internal,
                     [(versions, plan.table_key_internal), (due, plan.stream_key_internal)],
                     plan.key_types)
    if read is None:
        return None, whole
    same = np.ones(n - 1, dtype=bool)
    for key in plan.table_key_internal:
        col = stored.column(key).combine_chunks()
        after, before = col.slice(1), col.slice(0, n - 1)
        equal = bools(pc.equal(after, before).fill_null(False))
        if pa.types.is_floating(col.type):  # NaN keys are equal keys (Arrow's hashing, Spark's)
            equal |= bools(pc.and_(pc.is_nan(after), pc.is_nan(before)).fill_null(False))
        same &= equal
    sel = read | bools(stored.column(TOMBSTONE_FLAG_COLUMN))
    sel[1:] |= same
    sel[:-1] |= same
    quiet = stored.filter(pa.array(~sel))
    return quiet, pa.concat_tables([stored.filter(pa.array(sel)), versions])


#: A call sorts the whole history (:func:`_split_quiet`) below this many stored rows, or
#: when they are fewer than ``_SPLIT_RATIO`` times its versions and due rows (tests set 0).
_SPLIT_MIN_ROWS = 10_000
_SPLIT_RATIO = 4


def step(
    plan: StreamTablePlan, state: StreamTableState, batch: pa.Table, wm_us: int | None
) -> StreamTableStepResult:
    """Advance one key group by one call: apply the table updates, join the due stream rows.

    Order (SEMANTICS §8): rows without an event time and late rows (``t < wm - HR``) of both
    inputs are set aside (dropped and counted, or dead letters under dlq); table updates with
    a NULL key are ignored and counted, the others enter their key's history; stream rows with
    a NULL key are dropped under ``inner`` (counted), kept under ``left`` (they join nothing);
    then the due stream rows (``eager``: all of them; ``final``: the held and new rows with
    ``wm > t``) join their key's version as of ``t``, in event-time order; the rest stay
    held. Last, retention trims the history with this call's ``wm``.

    Args:
        plan: The resolved join.
        state: The key group's history and held rows before the call.
        batch: Input rows with ``plan.input_schema`` columns (both inputs, tagged by side),
            in arrival order.
        wm_us: The operator watermark ``(W + H) * 1000``, or ``None`` if Spark has none yet
            (then nothing is late, nothing is due under ``final``, nothing is trimmed).

    Returns:
        The output, the new state, the next deadlines and the counters.
    """
    counters: dict[str, int] = {}
    letters: list[pa.Table] = []
    side = np.asarray(batch.column(SIDE_COLUMN).to_numpy(), dtype=np.int32)
    seq = pa.array(state.seq + np.arange(batch.num_rows, dtype=np.int64))
    batch = batch.append_column(SEQ_COLUMN, seq)
    rows = {}
    for s, payload in ((STREAM, plan.stream_payload), (TABLE, plan.table_payload)):
        picked = batch.filter(pa.array(side == s)).select([TIME_COLUMN, SEQ_COLUMN, *payload.names])
        rows[s] = _admit(plan, s, picked, wm_us, counters, letters)

    updates = rows[TABLE]
    null_key = has_null_key(updates, plan.table_key_internal)
    add_count(counters, "null_key_dropped_right", int(null_key.sum()))
    updates = updates.filter(pa.array(~null_key))
    tomb = pa.array(tombstone_mask(updates, plan.tombstone_internal, plan.value_internal))
    versions = updates.append_column(TOMBSTONE_FLAG_COLUMN, tomb).select(plan.history_schema.names)
    add_count(counters, "versions_inserted", updates.num_rows)

    arrived = rows[STREAM]
    if plan.how == "inner":
        null_key = has_null_key(arrived, plan.stream_key_internal)
        add_count(counters, "null_key_dropped_left", int(null_key.sum()))
        arrived = arrived.filter(pa.array(~null_key))
    due, held, new_held = split_pending(plan.emit, state.held, arrived, wm_us)
    quiet, active = _split_quiet(plan, state.history, versions, due)
    output = _joined(plan, due, active, counters)
    add_count(counters, "held_left", int(new_held.sum()))

    before = active.num_rows
    active, next_trim_us = _retain(plan, active, wm_us)
    add_count(counters, "versions_evicted", before - active.num_rows)
    history = active if quiet is None else pa.concat_tables([quiet, active])
    return StreamTableStepResult(
        output=with_dead_letters(output, letters),
        state=StreamTableState(
            history.combine_chunks(), held.combine_chunks(), state.seq + batch.num_rows
        ),
        next_due_us=earliest_time_us(held),
        next_trim_us=next_trim_us,
        counters=counters,
    )
