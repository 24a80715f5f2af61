"""The window's slots: find or create the slot of each (window, group) a row belongs to.

One slot per (window, group) holds its accumulators (:mod:`interlace.state.accumulators`).
Tumbling and hopping windows look their slot up (:func:`fixed_slots`); sessions merge with
the held sessions they overlap or touch (:func:`session_slots`). Called by ``step.py``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from interlace.operators.common.keys import key_codes, may_match
from interlace.operators.window.output import last_output_frame
from interlace.operators.window.plan import AggPlan, WindowPlan
from interlace.state.accumulators import DistinctCapError, SumOverflowError
from numpy.typing import NDArray

__all__ = ["Assignments", "Held", "fixed_slots", "group_codes", "session_slots"]


#: Held slots from which :func:`group_codes` first narrows them to the ones whose group may
#: be a new row's (and only when they are at least this many times the new rows): encoding
#: every held group is O(state) per call (issue 34); an ``is_in`` per column is far cheaper.
NARROW_MIN_SLOTS = 10_000
NARROW_RATIO = 4


def group_codes(
    slot_groups: pa.Table, n_old: int, new_groups: pa.Table, n_new: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Shared integer codes for group tuples (NULL is a value: SQL GROUP BY).

    Row counts are passed explicitly: with no ``group_by`` the tables have no columns. A float
    group's ``-0.0`` is ``0.0`` (:func:`.keys.key_codes`): one group, as in SQL (the output
    shows the value of the row that created the slot). Equal groups get equal codes among the
    new rows and the held slots a new row's group may equal; the other held slots (when
    narrowed: :data:`NARROW_MIN_SLOTS`) share one code that no new row has.
    """
    if new_groups.num_columns and n_old >= max(NARROW_MIN_SLOTS, NARROW_RATIO * n_new):
        names = new_groups.column_names
        mask = may_match(slot_groups, names, [(new_groups, names)],
                         [new_groups.schema.field(n).type for n in names], null_is_value=True)
        if mask is not None and not mask.all():
            cand = np.flatnonzero(mask)
            c_old, c_new = _codes(slot_groups.take(pa.array(cand)), len(cand), new_groups, n_new)
            old = np.full(n_old, int(max(c_old.max(initial=-1), c_new.max(initial=-1))) + 1,
                          dtype=np.int64)
            old[cand] = c_old
            return old, c_new
    return _codes(slot_groups, n_old, new_groups, n_new)


def _codes(
    slot_groups: pa.Table, n_old: int, new_groups: pa.Table, n_new: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    columns = [
        pa.chunked_array(
            slot_groups.column(name).chunks + new_groups.column(name).chunks,
            type=new_groups.schema.field(name).type,
        )
        for name in new_groups.column_names
    ]
    codes = key_codes(columns, n_old + n_new, null_is_value=True)
    return codes[:n_old], codes[n_old:]


@dataclass(frozen=True)
class Held:
    """A key group's slots before this call's rows are assigned, with their columns as arrays."""

    slots: pa.Table
    accs: list[Any]
    codes: NDArray[np.int64]
    start: NDArray[np.int64]
    end: NDArray[np.int64]
    emitted: NDArray[np.bool_]
    revision: NDArray[np.int64]


@dataclass(frozen=True)
class Assignments:
    """This call's taken (row, window) assignments: group code, ``[start, end)``, group values."""

    codes: NDArray[np.int64]
    starts: NDArray[np.int64]
    ends: NDArray[np.int64]
    groups: pa.Table


def fixed_slots(
    plan: WindowPlan, held: Held, new: Assignments
) -> tuple[NDArray[np.int64], pa.Table, list[Any], NDArray[np.bool_]]:
    """Find or create the slot of each (window start, group) assignment.

    Held slots are distinct (window start, group) pairs, so a lookup finds each assignment's
    slot; new slots are appended in ascending (start, group) order, each made from the first
    assignment of its pair. A pair is a code ``start ordinal * groups + group code``: a window
    start is a multiple of the hop, so its ordinal is ``start // hop`` less the least one.
    When the codes fit a table a few times the assignments' size (windows of a few hops, the
    usual case), a direct-address table finds and numbers them in linear time
    (:func:`_pairs_by_table`); otherwise sorting does (:func:`_pairs_by_sort`), with the same
    result.
    """
    slots, accs, old_codes, slot_start = held.slots, held.accs, held.codes, held.start
    new_codes, starts, ends, group_tbl = new.codes, new.starts, new.ends, new.groups
    n_old, n_new = len(slot_start), len(starts)
    g_count = max(int(max(old_codes.max(initial=-1), new_codes.max(initial=-1))) + 1, 1)
    k_old, k_new = slot_start // plan.hop_us, starts // plan.hop_us
    k_min = int(min(k_old.min(initial=np.iinfo(np.int64).max),
                    k_new.min(initial=np.iinfo(np.int64).max)))
    k_max = int(max(k_old.max(initial=k_min), k_new.max(initial=k_min)))
    size = (k_max - k_min + 1) * g_count  # a Python int: no overflow
    if n_old + n_new and size <= TABLE_FACTOR * (n_old + n_new) + TABLE_MIN:
        old_comb = (k_old - k_min) * g_count + old_codes
        new_comb = (k_new - k_min) * g_count + new_codes
        target, fresh_first, fresh_of = _pairs_by_table(old_comb, new_comb, size)
    else:
        # Starts far apart (in hops) could overflow ``ordinal * groups``: rank them instead.
        _, s_codes = np.unique(np.concatenate([slot_start, starts]), return_inverse=True)
        comb = s_codes.astype(np.int64).ravel() * g_count + np.concatenate(
            [old_codes, new_codes])
        target, fresh_first, fresh_of = _pairs_by_sort(comb[:n_old], comb[n_old:])
    if len(fresh_first):
        missing = target < 0
        target[missing] = n_old + fresh_of
        add = plan.new_slots(starts[fresh_first], ends[fresh_first], group_tbl, fresh_first)
        slots = pa.concat_tables([slots, add]).combine_chunks()
        accs = [a.accumulator().grow(s, len(fresh_first))
                for a, s in zip(plan.aggs, accs, strict=True)]
    return target, slots, accs, np.zeros(slots.num_rows, dtype=bool)


#: :func:`fixed_slots` uses a direct-address table of the (start, group) codes when it has at
#: most ``TABLE_FACTOR`` entries per assignment and held slot, plus ``TABLE_MIN``.
TABLE_FACTOR = 8
TABLE_MIN = 1 << 16


def _pairs_by_table(
    old_comb: NDArray[np.int64], new_comb: NDArray[np.int64], size: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Each new code's held slot (-1: none); the pairs to create, as :func:`_pairs_by_sort`.

    Codes lie in ``[0, size)``. Returns ``target`` (held slot per new code, -1 if none), the
    first new code of each missing pair in ascending code order, and each missing new code's
    rank among those pairs.
    """
    table = np.full(size, -1, dtype=np.int64)
    table[old_comb] = np.arange(len(old_comb), dtype=np.int64)
    target = table[new_comb]
    missing = np.flatnonzero(target < 0)
    if not len(missing):
        return target, missing, missing
    m_comb = new_comb[missing]
    first = np.full(size, len(missing), dtype=np.int64)
    np.minimum.at(first, m_comb, np.arange(len(missing), dtype=np.int64))
    present = first < len(missing)
    rank = np.cumsum(present) - 1
    return target, missing[first[present]], rank[m_comb]


def _pairs_by_sort(
    old_comb: NDArray[np.int64], new_comb: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """:func:`_pairs_by_table` for codes of any range: a binary search among the held ones."""
    order = np.argsort(old_comb, kind="stable")
    pos = np.searchsorted(old_comb[order], new_comb)
    hit = pos < len(order)
    hit[hit] = old_comb[order[pos[hit]]] == new_comb[hit]
    target = np.full(len(new_comb), -1, dtype=np.int64)
    target[hit] = order[pos[hit]]
    missing = np.flatnonzero(~hit)
    if not len(missing):
        return target, missing, missing
    _, first_idx, inv = np.unique(new_comb[missing], return_index=True, return_inverse=True)
    return target, missing[first_idx], inv.ravel().astype(np.int64)


def session_slots(
    plan: WindowPlan, held: Held, new: Assignments
) -> tuple[NDArray[np.int64], pa.Table, list[Any], NDArray[np.bool_], list[pd.DataFrame], int, int]:
    """Merge new rows' windows ``[t, t + gap)`` with the held sessions of their groups.

    Intervals of one group that overlap or touch (``start <= other end`` and ``other start <=
    end``, i.e. rows at most ``gap`` apart) chain into one cluster: sort by (group, start), keep
    the running max of end per group, and start a new cluster only where a start is strictly
    after the running end (Spark's ``session_window`` merges while ``start <= current end``).
    Held sessions take part alike, emitted or not, so a row touching a session kept under
    reopen merges into it. Per cluster with new rows, the survivor is the earliest-starting
    emitted session, else the earliest held one, else a new slot; every other held session of
    the cluster is merged into it, and an absorbed session that had been emitted is retracted
    (its last output, ``revision + 1``, ``retracted=true``). Vectorised with numpy (a stable
    lexsort, a running max per group, reductions per cluster); no loop over rows, and no
    pandas, whose fixed cost per operation made a call with a few rows cost ~20 ms.
    """
    slots, accs, old_codes, slot_start = held.slots, held.accs, held.codes, held.start
    slot_end, emitted, revision = held.end, held.emitted, held.revision
    new_codes, starts, ends, group_tbl = new.codes, new.starts, new.ends, new.groups
    n_old, n_new = slots.num_rows, len(starts)
    if n_new == 0:
        return np.zeros(0, dtype=np.int64), slots, accs, np.zeros(n_old, dtype=bool), [], 0, 0
    # Only the held sessions of the groups with new rows can merge: a cluster is one group's,
    # and one without new rows is left as it is. Leaving the others out keeps a call with a
    # few rows from sorting every held session of its key group (same clusters, same order).
    touched = np.flatnonzero(np.isin(old_codes, new_codes))
    n_touched = len(touched)
    g = np.concatenate([old_codes[touched], new_codes]).astype(np.int64)
    st = np.concatenate([slot_start[touched], starts]).astype(np.int64)
    en = np.concatenate([slot_end[touched], ends]).astype(np.int64)
    old = np.concatenate([np.ones(n_touched, dtype=bool), np.zeros(n_new, dtype=bool)])
    idx = np.concatenate([touched, np.arange(n_new)]).astype(np.int64)
    em = np.concatenate([emitted[touched], np.zeros(n_new, dtype=bool)])
    # Sort by (group, start, held last); numpy's lexsort is stable, its last key primary.
    order = np.lexsort((old, st, g))
    g, st, en, old, idx, em = g[order], st[order], en[order], old[order], idx[order], em[order]
    n = len(g)
    first_of_group = np.ones(n, dtype=bool)
    first_of_group[1:] = g[1:] != g[:-1]
    # The running max of the end within each group: a cumulative max of (group ordinal, rank
    # of the end), which no end of an earlier group can pass.
    end_rank = np.empty(n, dtype=np.int64)
    by_end = np.argsort(en, kind="stable")
    end_rank[by_end] = np.arange(n)
    run = np.maximum.accumulate((np.cumsum(first_of_group) - 1) * n + end_rank) % n
    run_max = en[by_end[run]]
    # Touching merges: a new cluster only where the start is strictly after the running end.
    new_cluster = first_of_group.copy()
    new_cluster[1:] |= st[1:] > run_max[:-1]
    c = np.cumsum(new_cluster) - 1
    has_new = np.bincount(c, weights=~old, minlength=int(c[-1]) + 1) > 0
    keep_item = has_new[c]
    g, st, en, old, idx, em, c = (a[keep_item] for a in (g, st, en, old, idx, em, c))
    # Clusters are contiguous runs of c: their bounds, and each one's position.
    seg = np.flatnonzero(np.concatenate([[True], c[1:] != c[:-1]]))
    clusters = c[seg]
    bound_s = np.minimum.reduceat(st, seg)
    bound_e = np.maximum.reduceat(en, seg)
    # Survivor per cluster: earliest emitted held session, else earliest held session.
    o_c, o_idx, o_em = c[old], idx[old], em[old]
    slot_for = np.full(len(clusters), -1, dtype=np.int64)
    with_old, first_old = np.unique(o_c, return_index=True)
    slot_for[np.searchsorted(clusters, with_old)] = o_idx[first_old]
    with_em, first_em = np.unique(o_c[o_em], return_index=True)
    slot_for[np.searchsorted(clusters, with_em)] = o_idx[o_em][first_em]
    need_new = np.flatnonzero(slot_for < 0)  # positions of clusters of new rows only
    # New slots for clusters made only of new rows.
    if len(need_new):
        n_c, n_idx = c[~old], idx[~old]
        with_new, first_new = np.unique(n_c, return_index=True)
        first_row = n_idx[first_new][np.searchsorted(with_new, clusters[need_new])]
        add = plan.new_slots(bound_s[need_new], bound_e[need_new], group_tbl, first_row)
        slot_for[need_new] = n_old + np.arange(len(need_new))
        slots = pa.concat_tables([slots, add]).combine_chunks()
        accs = [
            a.accumulator().grow(s, len(need_new)) for a, s in zip(plan.aggs, accs, strict=True)
        ]
    # Absorbed held sessions: merge into the survivor, retract if emitted.
    o_slot = slot_for[np.searchsorted(clusters, o_c)]
    absorbed_mask = o_idx != o_slot
    a_idx, a_to = o_idx[absorbed_mask], o_slot[absorbed_mask]
    retracts: list[pd.DataFrame] = []
    if len(a_idx):
        em_idx = a_idx[emitted[a_idx]]
        if len(em_idx) and plan.keeps_last_output:
            retracts.append(last_output_frame(plan, slots, em_idx, revision[em_idx] + 1))
    # Survivors take the cluster's bounds (an error in the merge below names them).
    all_start = np.asarray(slots.column("start").to_numpy(), dtype=np.int64).copy()
    all_end = np.asarray(slots.column("end").to_numpy(), dtype=np.int64).copy()
    all_start[slot_for] = np.minimum(all_start[slot_for], bound_s)
    all_end[slot_for] = np.maximum(all_end[slot_for], bound_e)
    slots = slots.set_column(0, "start", pa.array(all_start)).set_column(
        1, "end", pa.array(all_end)
    )
    if len(a_idx):
        merged = []
        for a, s in zip(plan.aggs, accs, strict=True):
            with naming_window(plan, a, slots):
                merged.append(a.accumulator().merge(s, a.accumulator().take(s, a_idx), a_to))
        accs = merged
    target = np.empty(n_new, dtype=np.int64)
    target[idx[~old]] = slot_for[np.searchsorted(clusters, c[~old])]
    changed = np.zeros(slots.num_rows, dtype=bool)
    if len(a_idx):
        drop = a_idx
        keep = np.setdiff1d(np.arange(slots.num_rows), drop)
        remap = np.full(slots.num_rows, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        slots = slots.take(pa.array(keep))
        accs = [a.accumulator().take(s, keep) for a, s in zip(plan.aggs, accs, strict=True)]
        target = remap[target]
        changed = np.zeros(slots.num_rows, dtype=bool)
    return target, slots, accs, changed, retracts, len(need_new), len(a_idx)


@contextmanager
def naming_window(plan: WindowPlan, agg: AggPlan, slots: pa.Table) -> Iterator[None]:
    """Re-raise an accumulator's slot error naming ``agg``, its window and the pipeline.

    An integer sum out of int64 (:class:`SumOverflowError`) or an exact ``count_distinct``
    past its cap (:class:`DistinctCapError`) names an internal slot; ``slots`` is the slot
    table those slot numbers index.
    """
    try:
        yield
    except (SumOverflowError, DistinctCapError) as e:
        start, end = (int(slots.column(c)[e.slot].as_py()) for c in ("start", "end"))
        where = f"on window [{iso_utc(start)}, {iso_utc(end)}) for pipeline {plan.name}"
        raise e.named(f"{agg.agg}({agg.column}) AS {agg.alias}", agg.column, where) from None


def iso_utc(us: int) -> str:
    """A window bound (µs since the epoch) as an ISO 8601 UTC string, for messages."""
    dt = _dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=us)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ") if dt.microsecond == 0 else dt.isoformat() + "Z"
