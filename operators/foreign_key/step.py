"""The foreign-key join's pure core: state × micro-batch × watermark → changelog, new state.

:func:`step` advances one key group by one call (SEMANTICS §7, §9). It makes no Spark calls,
does no I/O and reads no clock: the operator watermark ``wm_us`` arrives as an argument.

The key group holds its own left rows and the whole right table (every right update is
replicated into every key group, :mod:`interlace.state.foreign_key`). §9 applies the due
updates one at a time by (event time, left before right, arrival); the step gives each its
position ``p`` in that order and answers every question with array lookups instead of a loop:

* the right version of a key as of ``p`` (the last right update of that key before ``p``,
  else the stored one) is a ``searchsorted`` over the right updates sorted by (key, position);
* a left update's previous version is the previous left update of its key, else the stored
  one; it emits from its own presence before and the join's presence after;
* the left rows a right update at ``q`` touches are the left versions (stored, or applied in
  the call) that are present, carry its key as foreign key and are current at ``q``: the
  versions are sorted by foreign key, each right update's range is found by
  ``searchsorted``, and the pairs are filtered by validity interval;
* output ``version`` is the key's stored next version plus the rank of the row among the
  key's rows of the call, by position.

Neighbours: ``plan.py`` (the plan it runs), :mod:`interlace.state.foreign_key` (the state).
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
    add_count,
    bools,
    changelog_step,
    reject_updates,
    take_or_null,
    tombstone_mask,
)
from interlace.operators.common.keys import key_codes
from interlace.operators.common.prepare import HOME_COLUMN, SIDE_COLUMN
from interlace.operators.foreign_key.plan import (
    LEFT_DELETED,
    LEFT_TIME,
    NEXT_VERSION,
    RIGHT_DELETED,
    RIGHT_TIME,
    ForeignKeyJoinPlan,
)
from interlace.state.buffers import TIME_COLUMN
from interlace.state.foreign_key import ForeignKeyState
from interlace.state.tables import SEQ_COLUMN
from numpy.typing import NDArray

__all__ = ["ForeignKeyStepResult", "step"]

_I64 = NDArray[np.int64]
_B = NDArray[np.bool_]
_MIN = np.iinfo(np.int64).min
#: Emitted rows: (left code, position, left source, right source, upsert, right values valid).
_Emitted = tuple[_I64, _I64, _I64, _I64, _B, _B]


@dataclass
class ForeignKeyStepResult:
    """What one call of :func:`step` produced.

    Attributes:
        output: Output rows (``plan.output_names``): the changelog rows, per left key in
            ``version`` order, then dead letters.
        state: The key group's versions and held updates after the call.
        next_due_us: The earliest event time among held updates (due when ``wm >`` it), or
            ``None``.
        counters: Per-call counts: ``applied_left/right``, ``upserts``, ``deletes``,
            ``held_left/right`` (received and not yet due), ``late_dropped_left/right``,
            ``dead_lettered_left/right``, ``null_key_dropped_left/right``,
            ``null_event_time_dropped_left/right``. A right update is counted only in its
            home key group (its copies elsewhere are applied silently).
    """

    output: pa.Table
    state: ForeignKeyState
    next_due_us: int | None
    counters: dict[str, int]


def step(
    plan: ForeignKeyJoinPlan, state: ForeignKeyState, batch: pa.Table, wm_us: int | None
) -> ForeignKeyStepResult:
    """Advance one key group by one call: apply the due updates, emit the changelog.

    The updates are taken, held and applied in the order of
    :func:`~interlace.operators.common.changelog.changelog_step` (SEMANTICS §7, §9). A left
    update emits for its own key, a right update for every left key whose present row refers
    to it: ``upsert`` if the join is present after, else ``delete`` if it was before, else,
    for a left update of an existing left row, Kafka's redundant ``delete``.

    Args:
        plan: The resolved join.
        state: The key group's versions and held updates before the call.
        batch: Input rows with ``plan.input_schema`` columns (both tables, tagged by side, the
            right table's copies flagged home or not), in arrival order.
        wm_us: The operator watermark ``(W + H) * 1000``, or ``None`` if Spark has none yet
            (then nothing is due under ``final``).

    Returns:
        A :class:`ForeignKeyStepResult`: the output, the new state, the next deadline and the
        counters.
    """
    output, (left, right), held, next_due_us, counters = changelog_step(
        plan, state.held, state.seq, batch, wm_us,
        lambda due, counters, letters: _Apply(plan, state, due, wm_us, counters, letters).run(),
    )
    return ForeignKeyStepResult(
        output=output,
        state=ForeignKeyState(left, right, held, state.seq + batch.num_rows),
        next_due_us=next_due_us,
        counters=counters,
    )


def _normalised(col: pa.ChunkedArray | pa.Array, typ: pa.DataType) -> pa.ChunkedArray:
    """``col`` cast to ``typ`` as one chunked array (``key_codes`` makes ``-0.0`` ``0.0``)."""
    out = col.cast(typ)
    return out if isinstance(out, pa.ChunkedArray) else pa.chunked_array([out], type=typ)


def _codes(parts: list[list[pa.ChunkedArray]], types: tuple[pa.DataType, ...],
           null_is_value: bool) -> list[_I64]:
    """Shared key codes of several tuples of columns (``parts[i][c]``: part ``i``, column ``c``)."""
    sizes = [len(p[0]) for p in parts]
    cols = []
    for c, typ in enumerate(types):
        chunks = [ch for p in parts for ch in _normalised(p[c], typ).chunks]
        cols.append(pa.chunked_array(chunks, type=typ))
    codes = key_codes(cols, sum(sizes), null_is_value=null_is_value)
    bounds = np.cumsum([0, *sizes])
    return [codes[bounds[i]:bounds[i + 1]] for i in range(len(parts))]


def _lookup(stored_codes: _I64, codes: _I64) -> _I64:
    """Per code, the stored row holding it (stored codes are distinct); -1 if none."""
    size = int(max(stored_codes.max(initial=-1), codes.max(initial=-1))) + 1
    table = np.full(size + 1, -1, dtype=np.int64)  # index -1 (a NULL code) reads table[-1]
    table[stored_codes] = np.arange(len(stored_codes), dtype=np.int64)
    return table[codes]


def _runs(codes: _I64) -> tuple[_I64, _B, _B]:
    """Positions sorted by (code, position), and where each code's run starts and ends."""
    order = np.argsort(codes, kind="stable")
    c = codes[order]
    first = np.ones(len(c), dtype=bool)
    first[1:] = c[1:] != c[:-1]
    last = np.ones(len(c), dtype=bool)
    last[:-1] = first[1:]
    return order, first, last


class _Apply:
    """Apply one call's due updates (a helper holding the call's arrays; see the module doc)."""

    def __init__(
        self,
        plan: ForeignKeyJoinPlan,
        state: ForeignKeyState,
        due: pa.Table,
        wm_us: int | None,
        counters: dict[str, int],
        letters: list[pa.Table],
    ) -> None:
        self.plan, self.state, self.due, self.wm_us = plan, state, due, wm_us
        self.counters, self.letters = counters, letters

    def run(self) -> tuple[tuple[pa.Table, pa.Table], pa.Table]:
        """Return the new left and right versions and the changelog."""
        plan, state = self.plan, self.state
        if not self.due.num_rows:
            return (state.left, state.right), plan.output_schema.empty_table()
        self._encode()
        if not self._drop_late():
            return (state.left, state.right), plan.output_schema.empty_table()
        self._order()
        emitted = [self._left_updates(), self._right_updates()]
        lcode, pos, lsrc, rsrc, upsert, rvalid = (
            np.concatenate([e[i] for e in emitted]) for i in range(6)
        )
        # version: per left key, the stored next version plus the rank among the call's rows.
        order = np.lexsort((pos, lcode))
        lcode, pos, lsrc, rsrc = lcode[order], pos[order], lsrc[order], rsrc[order]
        upsert, rvalid = upsert[order], rvalid[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = lcode[1:] != lcode[:-1]
        rank = np.arange(len(order)) - np.maximum.accumulate(
            np.where(first, np.arange(len(order)), 0))
        base = self._stored_versions(lcode)
        add_count(self.counters, "upserts", int(upsert.sum()))
        add_count(self.counters, "deletes", int((~upsert).sum()))
        output = self._changelog(pos, lsrc, rsrc, upsert, rvalid, base + rank)
        counts = np.bincount(lcode, minlength=self.n_lcodes)
        return (self._new_left(counts), self._new_right()), output

    # ---- codes, late updates, order ----

    def _encode(self) -> None:
        """Key codes: left primary keys; right keys and foreign keys in one code space."""
        plan, st, due = self.plan, self.state, self.due
        left, right = plan.sides
        self.side = np.asarray(due.column(SIDE_COLUMN).to_numpy(), dtype=np.int32)
        stored_l, due_l = _codes(
            [[st.left.column(k) for k in plan.key_internal],
             [due.column(k) for k in left.key_internal]],
            plan.key_types, True)
        stored_r, due_r, stored_fk, due_fk = _codes(
            [[st.right.column(k) for k in plan.fk_state],
             [due.column(k) for k in right.key_internal],
             [st.left.column(k) for k in plan.fk_state],
             [due.column(k) for k in plan.fk_internal]],
            plan.fk_types, False)
        self.stored_lcode, self.stored_rcode, self.stored_fk = stored_l, stored_r, stored_fk
        is_left = self.side == 0
        self.lcode = np.where(is_left, due_l, -1)
        self.rcode = np.where(is_left, -1, due_r)
        self.fk = np.where(is_left, due_fk, -1)
        self.srow_l = np.where(is_left, _lookup(stored_l, self.lcode), -1)
        self.srow_r = np.where(is_left, -1, _lookup(stored_r, self.rcode))
        self.n_lcodes = int(max(stored_l.max(initial=-1), due_l.max(initial=-1))) + 1

    def _drop_late(self) -> bool:
        """§9: reject updates older than the latest applied one of their key in their table.

        Within the call, a key's updates are applied in event-time order, so only the stored
        one matters. Returns whether any update is left.
        """
        st, due = self.state, self.due
        t = i64(due.column(TIME_COLUMN))
        lt = i64(st.left.column(LEFT_TIME)) if st.left.num_rows else np.zeros(1, np.int64)
        rt = i64(st.right.column(RIGHT_TIME)) if st.right.num_rows else np.zeros(1, np.int64)
        stored_t = np.where(self.srow_l >= 0, lt[np.maximum(self.srow_l, 0)], _MIN)
        stored_t = np.where(self.srow_r >= 0, rt[np.maximum(self.srow_r, 0)], stored_t)
        late = t < stored_t
        home = bools(due.column(HOME_COLUMN).fill_null(True))
        for s in (0, 1):
            mask = late & (self.side == s) & home
            if mask.any():
                reject_updates(self.plan, s, due.filter(pa.array(mask)), self.wm_us, "late",
                               self.counters, self.letters)
        if late.any():
            self._keep(~late)
        return bool(self.due.num_rows)

    def _keep(self, keep: _B | _I64) -> None:
        """Keep (a mask) or reorder (indices) the due updates and their arrays."""
        self.due = self.due.filter(pa.array(keep)) if keep.dtype == bool \
            else self.due.take(pa.array(keep))
        for name in ("side", "lcode", "rcode", "fk", "srow_l", "srow_r"):
            setattr(self, name, getattr(self, name)[keep])

    def _order(self) -> None:
        """§9: positions by event time, then left before right, then arrival."""
        plan, due = self.plan, self.due
        self._keep(np.lexsort((i64(due.column(SEQ_COLUMN)), self.side,
                               i64(due.column(TIME_COLUMN)))))
        due, side = self.due, self.side
        self.n = due.num_rows
        left, right = plan.sides
        self.deleted = np.where(
            side == 0,
            tombstone_mask(due, left.tombstone_internal, left.value_internal),
            tombstone_mask(due, right.tombstone_internal, right.value_internal),
        )
        home = bools(due.column(HOME_COLUMN).fill_null(True))
        add_count(self.counters, "applied_left", int((side == 0).sum()))
        add_count(self.counters, "applied_right", int(((side == 1) & home).sum()))
        # Right updates sorted by (key, position): the key's in-call versions in order.
        self.r_pos = np.flatnonzero(side == 1)
        r_order, _, self.r_last = _runs(self.rcode[self.r_pos])
        self.r_pos = self.r_pos[r_order]
        self.r_sorted = self.rcode[self.r_pos] * (self.n + 1) + self.r_pos
        # Right versions: stored rows, then the due rows by position.
        self.r_deleted = np.concatenate([
            bools(self.state.right.column(RIGHT_DELETED).fill_null(True)), self.deleted])

    # ---- the right table as of a position ----

    def _right_as_of(self, codes: _I64, pos: _I64) -> tuple[_I64, _B]:
        """The right version of ``codes`` before position ``pos``: (index, present).

        Index: into the right versions (stored rows, then ``m + p`` for the due row at ``p``);
        -1 when the key has none (a NULL foreign key, code -1, has none).
        """
        m = self.state.right.num_rows
        j = np.searchsorted(self.r_sorted, codes * (self.n + 1) + pos, side="left") - 1
        jj = np.maximum(j, 0)
        in_call = (j >= 0) & (codes >= 0)
        if len(self.r_pos):
            in_call &= self.rcode[self.r_pos[jj]] == codes
        else:
            in_call &= False
        stored = np.where(codes >= 0, _lookup(self.stored_rcode, codes), -1)
        src = np.where(in_call, m + self.r_pos[jj] if len(self.r_pos) else 0, stored)
        present = (src >= 0) & ~self.r_deleted[np.maximum(src, 0)] if len(self.r_deleted) \
            else np.zeros(len(codes), dtype=bool)
        return src, present

    # ---- emission ----

    def _left_updates(self) -> _Emitted:
        """A left update emits for its own key (with Kafka's redundant delete)."""
        st, n = self.state, self.n
        m = st.left.num_rows
        pos = np.flatnonzero(self.side == 0)
        order, first, last = _runs(self.lcode[pos])
        by_key = pos[order]
        prev = np.empty(len(by_key), dtype=np.int64)
        prev[1:] = m + by_key[:-1]
        prev[first] = self.srow_l[by_key[first]]
        stored_deleted = bools(st.left.column(LEFT_DELETED).fill_null(True))
        l_deleted = np.concatenate([stored_deleted, self.deleted])
        was_present = (prev >= 0) & ~l_deleted[np.maximum(prev, 0)]
        # The versions the right updates search: stored ones current until the key's first
        # in-call update, in-call ones from their position to the key's next one.
        self.l_first_pos = np.full(self.n_lcodes + 1, n, dtype=np.int64)
        self.l_first_pos[self.lcode[by_key[first]]] = by_key[first]
        nxt = np.full(len(by_key), n, dtype=np.int64)
        nxt[:-1] = np.where(last[:-1], n, by_key[1:])
        self.l_next = np.full(n, n, dtype=np.int64)
        self.l_next[by_key] = nxt
        self.l_last_pos = by_key[last]
        self.l_deleted = l_deleted

        partner, partner_present = self._right_as_of(self.fk[by_key], by_key)
        now_present = ~self.deleted[by_key]
        after = now_present & (partner_present | (self.plan.how == "left"))
        emits = after | was_present  # else nothing; a delete even if the join was absent
        sel = by_key[emits]
        return (self.lcode[sel], sel, m + sel, partner[emits], after[emits],
                (after & partner_present)[emits])

    def _right_updates(self) -> _Emitted:
        """A right update emits for every present left row whose foreign key is its key."""
        st = self.state
        m_l, m_r = st.left.num_rows, st.right.num_rows
        empty = np.zeros(0, dtype=np.int64)
        if not len(self.r_pos):
            return empty, empty, empty, empty, empty.astype(bool), empty.astype(bool)
        lpos = np.flatnonzero(self.side == 0)
        # Left versions: (left code, foreign key, valid from, valid until, index), present only.
        v_code = np.concatenate([self.stored_lcode, self.lcode[lpos]])
        v_fk = np.concatenate([self.stored_fk, self.fk[lpos]])
        v_from = np.concatenate([np.full(m_l, -1, dtype=np.int64), lpos])
        v_until = np.concatenate([self.l_first_pos[self.stored_lcode], self.l_next[lpos]])
        v_idx = np.concatenate([np.arange(m_l, dtype=np.int64), m_l + lpos])
        keep = ~self.l_deleted[v_idx] & (v_fk >= 0)
        v_code, v_fk, v_from, v_until, v_idx = (
            a[keep] for a in (v_code, v_fk, v_from, v_until, v_idx))
        by_fk = np.argsort(v_fk, kind="stable")
        fk_sorted = v_fk[by_fk]
        q = self.r_pos
        c = self.rcode[q]
        lo = np.searchsorted(fk_sorted, c, side="left")
        hi = np.searchsorted(fk_sorted, c, side="right")
        counts = hi - lo
        total = int(counts.sum())
        if not total:
            return empty, empty, empty, empty, empty.astype(bool), empty.astype(bool)
        pair_q = np.repeat(q, counts)
        offsets = np.repeat(lo - (np.cumsum(counts) - counts), counts)
        pair_v = by_fk[offsets + np.arange(total, dtype=np.int64)]
        current = (v_from[pair_v] < pair_q) & (pair_q < v_until[pair_v])
        pair_q, pair_v = pair_q[current], pair_v[current]
        upsert = ~self.deleted[pair_q]
        if self.plan.how == "left":
            emits = np.ones(len(pair_q), dtype=bool)  # a present left row: always present
            upsert = emits.copy()
        else:
            _, before = self._right_as_of(self.rcode[pair_q], pair_q)
            emits = upsert | before
        pair_q, pair_v, upsert = pair_q[emits], pair_v[emits], upsert[emits]
        rvalid = upsert & ~self.deleted[pair_q]
        return (v_code[pair_v], pair_q, v_idx[pair_v], m_r + pair_q, upsert, rvalid)

    def _stored_versions(self, lcode: _I64) -> _I64:
        """Each left code's stored next version (0 for a new key)."""
        left = self.state.left
        if not left.num_rows:
            return np.zeros(len(lcode), dtype=np.int64)
        srow = _lookup(self.stored_lcode, lcode)
        ver = i64(left.column(NEXT_VERSION))
        return np.where(srow >= 0, ver[np.maximum(srow, 0)], 0)

    def _changelog(self, pos: _I64, lsrc: _I64, rsrc: _I64, upsert: _B, rvalid: _B,
                   version: _I64) -> pa.Table:
        """The changelog rows (SEMANTICS §9 output columns)."""
        plan, st, due = self.plan, self.state, self.due
        left, right = plan.sides
        names = [*plan.key_internal, *left.value_internal]
        lsrc_table = pa.concat_tables([
            st.left.select(names),
            due.select([*left.key_internal, *left.value_internal]).rename_columns(names),
        ])
        keys = lsrc_table.select(list(plan.key_internal)).take(pa.array(lsrc))
        lvals = take_or_null(lsrc_table.select(list(left.value_internal)), lsrc, upsert)
        rnames = list(right.value_internal)
        rsrc_table = pa.concat_tables([st.right.select(rnames), due.select(rnames)])
        rvals = take_or_null(rsrc_table, rsrc, rvalid)
        cols: list[pa.Array | pa.ChunkedArray] = [*keys.columns, *lvals.columns, *rvals.columns]
        cols.append(pa.array(np.where(upsert, OP_UPSERT, OP_DELETE), pa.string()))
        times = pc.if_else(
            pa.array(self.side == 0),
            due.column(left.time_internal).cast(plan.time_type),
            due.column(right.time_internal).cast(plan.time_type),
        )
        cols.append(times.take(pa.array(pos)))
        cols.append(pa.array(version, pa.int64()))
        if plan.dlq:
            cols.append(pa.nulls(len(pos), pa.string()))
        return pa.Table.from_arrays(cols, schema=plan.output_schema)

    # ---- the new state ----

    def _new_left(self, emitted_per_code: _I64) -> pa.Table:
        """Untouched stored left rows (versions advanced), then each updated key's last row."""
        plan, st, due = self.plan, self.state, self.due
        left = plan.sides[0]
        n_codes = self.n_lcodes
        stored_ver = np.zeros(n_codes + 1, dtype=np.int64)
        if st.left.num_rows:
            stored_ver[self.stored_lcode] = i64(st.left.column(NEXT_VERSION))
        next_ver = stored_ver[:n_codes] + emitted_per_code
        touched = np.zeros(n_codes + 1, dtype=bool)
        last = self.l_last_pos
        touched[self.lcode[last]] = True
        kept = st.left
        if kept.num_rows:
            mask = ~touched[self.stored_lcode]
            kept = kept.filter(pa.array(mask)) if not mask.all() else kept
            codes = self.stored_lcode[mask]
            i = kept.schema.get_field_index(NEXT_VERSION)
            kept = kept.set_column(i, NEXT_VERSION, pa.array(next_ver[codes], pa.int64()))
        rows = due.take(pa.array(last))
        t = i64(rows.column(TIME_COLUMN))
        cols: list[pa.Array | pa.ChunkedArray] = [
            rows.column(k).cast(typ) for k, typ in zip(left.key_internal, plan.key_types,
                                                       strict=True)
        ]
        cols += [pa.array(t, pa.int64()), pa.array(self.deleted[last], pa.bool_())]
        cols += [rows.column(k).cast(typ) for k, typ in zip(plan.fk_internal, plan.fk_types,
                                                           strict=True)]
        cols += [rows.column(v) for v in left.value_internal]
        cols.append(pa.array(next_ver[self.lcode[last]], pa.int64()))
        updated = pa.Table.from_arrays(cols, schema=plan.left_schema)
        if not kept.num_rows:
            return updated
        return pa.concat_tables([kept, updated]).combine_chunks()

    def _new_right(self) -> pa.Table:
        """Untouched stored right rows, then each updated key's last update."""
        plan, st, due = self.plan, self.state, self.due
        right = plan.sides[1]
        last = self.r_pos[self.r_last] if len(self.r_pos) else self.r_pos
        if not len(last):
            return st.right
        rows = due.take(pa.array(last))
        cols: list[pa.Array | pa.ChunkedArray] = [
            rows.column(k).cast(typ) for k, typ in zip(right.key_internal, plan.fk_types,
                                                       strict=True)
        ]
        cols += [pa.array(i64(rows.column(TIME_COLUMN)), pa.int64()),
                 pa.array(self.deleted[last], pa.bool_())]
        cols += [rows.column(v) for v in right.value_internal]
        updated = pa.Table.from_arrays(cols, schema=plan.right_schema)
        if not st.right.num_rows:
            return updated
        size = int(max(self.stored_rcode.max(initial=-1), self.rcode.max(initial=-1))) + 1
        touched = np.zeros(size, dtype=bool)
        touched[self.rcode[last]] = True
        mask = ~touched[self.stored_rcode]
        kept = st.right.filter(pa.array(mask)) if not mask.all() else st.right
        return pa.concat_tables([kept, updated]).combine_chunks()
