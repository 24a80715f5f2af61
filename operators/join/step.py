"""The join's pure core: state × micro-batch × watermark → output, dead letters, new state.

:func:`step` advances one key group by one call. It makes no Spark calls, does no I/O and
reads no clock: the operator watermark ``wm_us`` arrives as an argument (the shim, ``shim.py``,
computes it from Spark's). Vectorised: each side sorted by event time, matches bounded with
``np.searchsorted``, one gather per side; a buffer many times a call's rows is first
narrowed to the rows whose keys may match (:func:`_candidates`). Neighbours: ``plan.py`` (the
:class:`JoinPlan` it runs), :mod:`interlace.state.buffers` (the per-side buffers it keeps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from interlace.operators.common.arrow import i64
from interlace.operators.common.compat import to_pylist
from interlace.operators.common.deadletters import dead_letter
from interlace.operators.common.keys import has_null_key, key_codes_across, may_match
from interlace.operators.common.names import DEAD_LETTER_COLUMN
from interlace.operators.join.plan import LEFT, RIGHT, SIDE_COLUMN, SIDE_NAMES, JoinPlan
from interlace.state.buffers import MATCHED_COLUMN, TIME_COLUMN, JoinBuffers
from numpy.typing import NDArray

__all__ = ["StepResult", "step"]


@dataclass
class StepResult:
    """What one call of :func:`step` produced.

    Attributes:
        output: Output rows (``plan.output_names`` columns) as an Arrow table.
        state: The key group's buffers after the call.
        next_close_us: The earliest close time among buffered rows, or ``None`` if empty.
        counters: Per-call counts: ``matches``, ``unmatched_left``, ``unmatched_right``,
            ``semi``, ``late_dropped_left/right``, ``null_key_dropped_left/right``,
            ``dead_lettered_left/right``, ``inserted_left/right`` (rows added to a buffer),
            ``evicted_left/right`` (rows removed from a buffer).
    """

    output: pa.Table
    state: JoinBuffers
    next_close_us: int | None
    counters: dict[str, int]



def _key_codes(
    plan: JoinPlan,
    probe: pa.Table,
    probe_keys: Sequence[str],
    build: pa.Table,
    build_keys: Sequence[str],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Encode the key tuples of ``probe`` and ``build`` as shared ints; -1 where a key is null."""
    return key_codes_across(probe, probe_keys, build, build_keys, plan.key_types)


def _match(
    plan: JoinPlan,
    this: int,
    probe: pa.Table,
    build: pa.Table,
    build_m: NDArray[np.bool_],
    out: _Out,
) -> tuple[NDArray[np.bool_], int]:
    """Match this call's rows of side ``this`` (``probe``) against the other side's ``build``.

    A pair matches on equal keys and the time bound seen from ``this`` side. Left probing
    right: ``r.t in [l.t + lower, l.t + upper]``; right probing left:
    ``l.t in [r.t - upper, r.t - lower]``. Marks the matched build rows in ``build_m`` (in
    place) and adds the pairs to ``out`` (not under semi / anti).

    Returns:
        The matched flags of the probe rows and the number of pairs.
    """
    probe_m = np.zeros(probe.num_rows, dtype=bool)
    if not (probe.num_rows and build.num_rows):
        return probe_m, 0
    keys = (plan.left_key_internal, plan.right_key_internal)
    lo_us, hi_us = (
        (plan.lower_us, plan.upper_us) if this == LEFT else (-plan.upper_us, -plan.lower_us)
    )
    rows = _candidates(plan, probe, keys[this], build, keys[1 - this])
    cand = build if rows is None else build.take(pa.array(rows))
    pcode, bcode = _key_codes(plan, probe, keys[this], cand, keys[1 - this])
    pt = i64(probe.column(TIME_COLUMN))
    pi, bi = _interval_pairs(pcode, pt + lo_us, pt + hi_us, bcode, i64(cand.column(TIME_COLUMN)))
    if rows is not None:
        bi = rows[bi]
    probe_m[pi] = True
    build_m[bi] = True
    if plan.how not in ("left_semi", "left_anti"):
        if this == LEFT:
            out.add(probe, pi, build, bi, len(pi))
        else:
            out.add(build, bi, probe, pi, len(pi))
    return probe_m, len(pi)


def _candidates(
    plan: JoinPlan,
    probe: pa.Table,
    probe_keys: Sequence[str],
    build: pa.Table,
    build_keys: Sequence[str],
) -> NDArray[np.int64] | None:
    """The build rows whose key may equal a probe row's, when the buffer is the large side.

    Encoding every buffered key for each call (:func:`_key_codes`) grows with the buffer, not
    with the call; a buffer many times the call's rows is first narrowed to the rows whose
    key columns hold the probe's values (:func:`~interlace.operators.common.keys.may_match`,
    a superset of the matches). ``None``: use the whole buffer.
    """
    n = build.num_rows
    if n < max(_NARROW_MIN_ROWS, 1) or n < _NARROW_RATIO * probe.num_rows:
        return None
    mask = may_match(build, build_keys, [(probe, probe_keys)], plan.key_types)
    return None if mask is None else np.flatnonzero(mask)


#: A call narrows the other side's buffer (:func:`_candidates`) from this many rows, and when
#: it holds at least ``_NARROW_RATIO`` times the call's rows of this side (tests set 0).
_NARROW_MIN_ROWS = 10_000
_NARROW_RATIO = 4


def _interval_pairs(
    p_code: NDArray[np.int64],
    p_lo: NDArray[np.int64],
    p_hi: NDArray[np.int64],
    b_code: NDArray[np.int64],
    b_t: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Return every (probe i, build j) with equal non-negative codes and lo_i <= t_j <= hi_i.

    Vectorised: build rows are sorted by (code, rank of t) packed into one int64 (ranks are
    dense over the build's distinct times, so the packing cannot overflow), and each probe
    row's range is found with two ``searchsorted`` calls; the ranges are then expanded with
    ``repeat``/``arange`` — no Python loop over rows.
    """
    empty = np.zeros(0, dtype=np.int64)
    b_idx = np.flatnonzero(b_code >= 0)
    if len(p_code) == 0 or len(b_idx) == 0:
        return empty, empty
    bt, bc = b_t[b_idx], b_code[b_idx]
    uniq_t = np.unique(bt)
    k = np.int64(len(uniq_t) + 1)
    comp = bc * k + np.searchsorted(uniq_t, bt, "left")
    order = np.argsort(comp, kind="stable")
    comp_sorted = comp[order]
    pc_ = np.where(p_code >= 0, p_code, 0)
    lo = np.searchsorted(comp_sorted, pc_ * k + np.searchsorted(uniq_t, p_lo, "left"), "left")
    hi = np.searchsorted(comp_sorted, pc_ * k + np.searchsorted(uniq_t, p_hi, "right"), "left")
    counts = np.where(p_code >= 0, np.maximum(hi - lo, 0), 0).astype(np.int64)
    total = int(counts.sum())
    if total == 0:
        return empty, empty
    pi = np.repeat(np.arange(len(p_code), dtype=np.int64), counts)
    run_start = np.repeat(np.cumsum(counts) - counts, counts)
    pos = np.repeat(lo, counts) + (np.arange(total, dtype=np.int64) - run_start)
    return pi, b_idx[order[pos]]



class _Out:
    """Collects output parts and assembles them into one Arrow table at the end."""

    def __init__(self, plan: JoinPlan, wm_us: int | None) -> None:
        self.plan = plan
        self.wm_us = wm_us
        self.parts: list[pa.Table] = []
        self.types = {
            o.name: (plan.left_payload if o.side == LEFT else plan.right_payload)
            .field(o.internal)
            .type
            for o in plan.outputs
        }

    def add(
        self,
        left: pa.Table | None,
        left_idx: NDArray[np.int64] | None,
        right: pa.Table | None,
        right_idx: NDArray[np.int64] | None,
        n: int,
    ) -> None:
        """Add ``n`` rows gathered from ``left``/``right`` (``None`` side: nulls)."""
        if n == 0:
            return
        cols: list[pa.Array | pa.ChunkedArray] = []
        for o in self.plan.outputs:
            src, idx = (left, left_idx) if o.side == LEFT else (right, right_idx)
            if src is None:
                cols.append(pa.nulls(n, self.types[o.name]))
            else:
                col = src.column(o.internal)
                cols.append(col.take(pa.array(idx)) if idx is not None else col)
        if self.plan.dlq:
            cols.append(pa.nulls(n, pa.string()))
        self.parts.append(pa.Table.from_arrays(cols, names=self.plan.output_names))

    def dead_letters(self, side: int, rows: pa.Table, reason: str = "late") -> None:
        """Add one dead-letter row per row of ``rows`` (a side's payload columns)."""
        n = rows.num_rows
        if n == 0:
            return
        names = self.plan.left_names if side == LEFT else self.plan.right_names
        payload = self.plan.left_payload if side == LEFT else self.plan.right_payload
        records = to_pylist(rows.select(payload.names).rename_columns(list(names)))
        # A Python loop, off the hot path: it runs only over late rows under dlq.
        letters = [dead_letter(SIDE_NAMES[side], reason, self.wm_us, r) for r in records]
        cols = [pa.nulls(n, self.types[o.name]) for o in self.plan.outputs]
        cols.append(pa.array(letters, pa.string()))
        self.parts.append(pa.Table.from_arrays(cols, names=self.plan.output_names))

    def table(self) -> pa.Table:
        """Return every part concatenated (an empty table with the output schema if none)."""
        if not self.parts:
            fields = [pa.field(name, typ) for name, typ in self.types.items()]
            if self.plan.dlq:
                fields.append(pa.field(DEAD_LETTER_COLUMN, pa.string()))
            return pa.schema(fields).empty_table()
        return pa.concat_tables(self.parts)


def step(plan: JoinPlan, state: JoinBuffers, batch: pa.Table, wm_us: int | None) -> StepResult:
    """Advance one key group by one call: ingest ``batch``, match, evict.

    Order (SEMANTICS §2): late rows are set aside (dropped / dead-lettered); null-key rows
    are emitted unmatched (preserved side) or dropped; left rows are matched against the right
    buffer and inserted; right rows are matched against the left buffer (which now holds this
    call's left rows); then every buffered row with ``wm_us > close`` is evicted, emitting the
    never-matched rows of a preserved side. Outputs are computed before any row is evicted.

    Args:
        plan: The resolved join.
        state: The key group's buffers before the call.
        batch: Input rows with ``plan.input_schema`` columns (both sides, tagged by side).
        wm_us: The operator watermark ``(W + H) * 1000``, or ``None`` if Spark has none yet
            (then nothing is late and nothing is evicted).

    Returns:
        The output rows, the new buffers, the earliest remaining close time and counters.
    """
    how = plan.how
    counters: dict[str, int] = {}
    out = _Out(plan, wm_us)
    keep_left_outer = how in ("left", "full", "left_anti")
    keep_right_outer = how in ("right", "full")
    side = np.asarray(batch.column(SIDE_COLUMN).to_numpy(), dtype=np.int32)
    bounds = {LEFT: plan.upper_us + plan.allowance_us, RIGHT: -plan.lower_us + plan.allowance_us}
    incoming: dict[int, pa.Table] = {}
    for s, payload, keys, keep in (
        (LEFT, plan.left_payload, plan.left_key_internal, keep_left_outer),
        (RIGHT, plan.right_payload, plan.right_key_internal, keep_right_outer),
    ):
        rows = batch.filter(pa.array(side == s)).select([TIME_COLUMN, *payload.names])
        name = SIDE_NAMES[s]
        # A row without an event time can be neither judged nor matched: dead-letter it under
        # dlq (reason "null_event_time"), else count it.
        null_t = np.asarray(
            rows.column(TIME_COLUMN).is_null().to_numpy(zero_copy_only=False), dtype=bool
        )
        if null_t.any():
            if plan.dlq:
                out.dead_letters(s, rows.filter(pa.array(null_t)), reason="null_event_time")
                counters[f"dead_lettered_{name}"] = int(null_t.sum())
            else:
                counters[f"null_event_time_dropped_{name}"] = int(null_t.sum())
            rows = rows.filter(pa.array(~null_t))
        if wm_us is not None and rows.num_rows:
            late = wm_us > i64(rows.column(TIME_COLUMN)) + bounds[s]
            if late.any():
                n_late = int(late.sum())
                if plan.dlq:
                    out.dead_letters(s, rows.filter(pa.array(late)))
                    counters[f"dead_lettered_{name}"] = (
                        counters.get(f"dead_lettered_{name}", 0) + n_late
                    )
                else:
                    counters[f"late_dropped_{name}"] = n_late
                rows = rows.filter(pa.array(~late))
        null_key = has_null_key(rows, keys)
        if null_key.any():
            nulls = rows.filter(pa.array(null_key))
            if keep:
                if s == LEFT:
                    out.add(nulls, None, None, None, nulls.num_rows)
                else:
                    out.add(None, None, nulls, None, nulls.num_rows)
                counters[f"unmatched_{name}"] = (
                    counters.get(f"unmatched_{name}", 0) + nulls.num_rows
                )
            else:
                counters[f"null_key_dropped_{name}"] = nulls.num_rows
            rows = rows.filter(pa.array(~null_key))
        incoming[s] = rows

    new_left, new_right = incoming[LEFT], incoming[RIGHT]
    left_buf, right_buf = state.left, state.right
    right_m = np.asarray(
        right_buf.column(MATCHED_COLUMN).to_numpy(zero_copy_only=False), dtype=bool
    )
    old_left_m = np.asarray(
        left_buf.column(MATCHED_COLUMN).to_numpy(zero_copy_only=False), dtype=bool
    )

    # Phase 1: this call's left rows against the right buffer (r.t in [l.t+lower, l.t+upper]).
    new_left_m, n_matches = _match(plan, LEFT, new_left, right_buf, right_m, out)

    # Insert this call's left rows; phase 2 then sees them.
    new_left_buf = new_left.append_column(MATCHED_COLUMN, pa.array(new_left_m)).select(
        plan.left_buffer_schema.names
    )
    left_all = (
        pa.concat_tables([left_buf, new_left_buf]).combine_chunks()
        if new_left.num_rows
        else left_buf
    )
    left_m = np.concatenate([old_left_m, new_left_m])

    # Phase 2: this call's right rows against the left buffer (l.t in [r.t-upper, r.t-lower]).
    new_right_m, n_right = _match(plan, RIGHT, new_right, left_all, left_m, out)
    counters["matches"] = n_matches + n_right

    if how == "left_semi":
        # Each left row once, in the call where it first matches.
        was = np.concatenate([old_left_m, np.zeros(new_left.num_rows, dtype=bool)])
        first = left_m & ~was
        idx = np.flatnonzero(first)
        out.add(left_all, idx, None, None, len(idx))
        counters["semi"] = len(idx)

    new_right_buf = new_right.append_column(MATCHED_COLUMN, pa.array(new_right_m)).select(
        plan.right_buffer_schema.names
    )
    right_buf = right_buf.set_column(
        right_buf.schema.get_field_index(MATCHED_COLUMN), MATCHED_COLUMN, pa.array(right_m)
    )
    right_all = (
        pa.concat_tables([right_buf, new_right_buf]).combine_chunks()
        if new_right.num_rows
        else right_buf
    )
    left_all = left_all.set_column(
        left_all.schema.get_field_index(MATCHED_COLUMN), MATCHED_COLUMN, pa.array(left_m)
    )
    right_m = np.concatenate([right_m, new_right_m])

    # Eviction: wm > close. Semi/anti also drop matched left rows at once: they can never be
    # emitted again, and right rows only exist to mark left rows.
    lclose = i64(left_all.column(TIME_COLUMN)) + bounds[LEFT]
    rclose = i64(right_all.column(TIME_COLUMN)) + bounds[RIGHT]
    if wm_us is not None:
        l_evict = wm_us > lclose
        r_evict = wm_us > rclose
    else:
        l_evict = np.zeros(left_all.num_rows, dtype=bool)
        r_evict = np.zeros(right_all.num_rows, dtype=bool)
    if keep_left_outer:
        idx = np.flatnonzero(l_evict & ~left_m)
        out.add(left_all, idx, None, None, len(idx))
        counters["unmatched_left"] = counters.get("unmatched_left", 0) + len(idx)
    if keep_right_outer:
        idx = np.flatnonzero(r_evict & ~right_m)
        out.add(None, None, right_all, idx, len(idx))
        counters["unmatched_right"] = counters.get("unmatched_right", 0) + len(idx)
    l_drop = l_evict | (left_m if how in ("left_semi", "left_anti") else False)
    counters["inserted_left"] = new_left.num_rows
    counters["inserted_right"] = new_right.num_rows
    counters["evicted_left"] = int(np.sum(l_drop))
    counters["evicted_right"] = int(r_evict.sum())
    if l_drop.any():
        left_all = left_all.filter(pa.array(~l_drop))
        lclose = lclose[~l_drop]
    if r_evict.any():
        right_all = right_all.filter(pa.array(~r_evict))
        rclose = rclose[~r_evict]
    closes = [int(c.min()) for c in (lclose, rclose) if len(c)]
    return StepResult(
        output=out.table(),
        state=JoinBuffers(left_all, right_all, state.extra),
        next_close_us=min(closes) if closes else None,
        counters={k: v for k, v in counters.items() if v},
    )
