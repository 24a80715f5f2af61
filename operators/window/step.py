"""The window's pure core: state × micro-batch × watermark → output, dead letters, new state.

:func:`step_window` advances one key group by one call (the order is in the package
docstring, :mod:`interlace.operators.window`). It makes no Spark calls, does no I/O and reads
no clock: ``wm_us`` arrives as an argument. :class:`WindowState` is a key group's state and
its blob. Neighbours: ``slots.py`` (which slot each row goes to), ``output.py`` (the output
frames), ``plan.py`` (the :class:`WindowPlan` it runs).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from interlace.operators.common.deadletters import dead_letter, pandas_records
from interlace.operators.common.names import DEAD_LETTER_COLUMN, TIME_US_COLUMN
from interlace.operators.errors import StateCapError
from interlace.operators.window.output import output_frame, remember_output
from interlace.operators.window.plan import WindowPlan
from interlace.operators.window.slots import (
    Assignments,
    Held,
    fixed_slots,
    group_codes,
    iso_utc,
    naming_window,
    session_slots,
)
from interlace.state import blob
from interlace.state.buffers import ipc_to_table, table_to_ipc
from numpy.typing import NDArray

__all__ = ["WindowState", "WindowStepResult", "step_window"]


@dataclass
class WindowState:
    """A key group's windows: one slot per (window, group) plus each aggregation's state."""

    slots: pa.Table
    accs: list[Any]
    seq: int = 0

    @classmethod
    def empty(cls, plan: WindowPlan) -> WindowState:
        """No windows."""
        return cls(plan.slot_schema.empty_table(), [a.accumulator().init(0) for a in plan.aggs], 0)

    def encode(self, plan: WindowPlan, *, compress: bool = True) -> bytes:
        """Encode as a ``window`` blob, its body zstd-compressed (format 3).

        ``compress=False`` writes the plain body (state sizing measures its bytes); both
        decode alike.
        """
        body = {
            "slots": table_to_ipc(self.slots),
            "accs": [
                a.accumulator().to_msgpack(s) for a, s in zip(plan.aggs, self.accs, strict=True)
            ],
            "seq": int(self.seq),
        }
        return blob.encode("window", plan.fp, body, compress=compress)

    @classmethod
    def decode(cls, data: bytes, plan: WindowPlan) -> WindowState:
        """Decode a ``window`` blob (running the migration chain)."""
        body = blob.decode(data, kind="window", fp=plan.fp)
        accs = [
            a.accumulator().from_msgpack(o) for a, o in zip(plan.aggs, body["accs"], strict=True)
        ]
        return cls(ipc_to_table(body["slots"]), accs, int(body["seq"]))


@dataclass
class WindowStepResult:
    """Output, new state, the earliest pending deadline (µs, ``wm >=`` rule) and counters."""

    output: pd.DataFrame
    state: WindowState
    next_deadline_us: int | None
    counters: dict[str, int] = field(default_factory=dict)


def step_window(
    plan: WindowPlan, state: WindowState, batch: pd.DataFrame, wm_us: int | None
) -> WindowStepResult:
    """Advance one key group by one call (see the module docstring for the order).

    Args:
        plan: The resolved window.
        state: The key group's windows before the call.
        batch: Input rows: ``__il_tus`` (int64 µs) and the input columns by name.
        wm_us: ``(W + H) * 1000``, or ``None`` while Spark has no watermark.

    Returns:
        Output frame (``plan.output_names``), new state, next deadline and counters.

    Raises:
        StateCapError: A window of this key group passed ``max_groups_per_window``.
    """
    counters: dict[str, int] = {}
    slots, accs, seq = state.slots, list(state.accs), state.seq
    null_letters: list[str] = []
    # An integer column holds no NULL time (Spark's is float64 or object when one is NULL).
    times = batch[TIME_US_COLUMN]
    if len(batch) and times.dtype.kind not in "iu" and times.isna().any():
        # A row without an event time belongs to no window: dead-letter it under dlq (reason
        # "null_event_time"), else count it.
        null_t = batch[TIME_US_COLUMN].isna().to_numpy()
        if plan.late_data == "dlq":
            null_letters = _dead_letters(plan, batch[null_t], wm_us, reason="null_event_time")
            counters["dead_lettered"] = len(null_letters)
        else:
            counters["null_event_time_dropped"] = int(null_t.sum())
        batch = batch[~null_t].reset_index(drop=True)
    n = len(batch)
    t = np.asarray(batch[TIME_US_COLUMN].to_numpy(), dtype=np.int64) if n else np.zeros(0, np.int64)
    row_seq = seq + np.arange(n, dtype=np.int64)
    seq += n
    retract_parts: list[pd.DataFrame] = []
    changed = np.zeros(slots.num_rows, dtype=bool)
    al = plan.allowance_us

    if plan.kind != "session":
        # Assign: every k * hop with start <= t < start + d (tumbling: hop == d).
        k_lo = (t - plan.duration_us) // plan.hop_us + 1
        k_hi = t // plan.hop_us
        counts = np.maximum(k_hi - k_lo + 1, 0)
        rows = np.repeat(np.arange(n, dtype=np.int64), counts)
        offs = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(
            np.cumsum(counts) - counts, counts
        )
        starts = (np.repeat(k_lo, counts) + offs) * plan.hop_us
        ends = starts + plan.duration_us
        closed = (wm_us >= ends) if wm_us is not None else np.zeros(len(rows), dtype=bool)
        keep = ~closed | (
            (wm_us < ends + al)
            if (wm_us is not None and plan.late_data == "reopen")
            else np.zeros(len(rows), dtype=bool)
        )
        late_row = np.zeros(n, dtype=bool)
        late_row[rows[closed]] = True
        dropped_row = np.zeros(n, dtype=bool)
        dropped_row[rows[~keep]] = True
        rows, starts, ends = rows[keep], starts[keep], ends[keep]
    else:
        ends_own = t + plan.gap_us
        closed_row = (wm_us >= ends_own) if wm_us is not None else np.zeros(n, dtype=bool)
        keep_row = ~closed_row | (
            (wm_us < ends_own + al)
            if (wm_us is not None and plan.late_data == "reopen")
            else np.zeros(n, dtype=bool)
        )
        late_row, dropped_row = closed_row, ~keep_row
        rows = np.flatnonzero(keep_row).astype(np.int64)
        starts, ends = t[rows], ends_own[rows]

    letters = null_letters
    if plan.late_data == "dlq":
        if late_row.any():
            letters = letters + _dead_letters(plan, batch.iloc[np.flatnonzero(late_row)], wm_us)
            counters["dead_lettered"] = len(letters)
    elif dropped_row.any():
        counters["late_dropped"] = int(dropped_row.sum())

    if len(rows):
        # Column by column: a frame's row-and-column selection costs more than the rest.
        group_tbl = pa.Table.from_arrays(
            [_rows_of(batch[f.name], rows, f.type) for f in plan.group_schema],
            schema=plan.group_schema,
        )
    else:
        # A timeout call's empty frame has float64 columns, which Arrow cannot convert to
        # every group type (decimal: "Got bytestring of length 8").
        group_tbl = plan.group_schema.empty_table()
    old_codes, new_codes = group_codes(
        slots.select(list(plan.group_by)), slots.num_rows, group_tbl, len(rows)
    )
    slot_start = np.asarray(slots.column("start").to_numpy(), dtype=np.int64)
    slot_end = np.asarray(slots.column("end").to_numpy(), dtype=np.int64)
    emitted = np.asarray(slots.column("emitted").to_numpy(zero_copy_only=False), dtype=bool)
    revision = np.asarray(slots.column("revision").to_numpy(), dtype=np.int64)

    held = Held(slots, accs, old_codes, slot_start, slot_end, emitted, revision)
    new = Assignments(new_codes, starts, ends, group_tbl)
    if plan.kind != "session":
        n_before = slots.num_rows
        target, slots, accs, changed = fixed_slots(plan, held, new)
        n_created, n_absorbed = slots.num_rows - n_before, 0
    else:
        target, slots, accs, changed, retract_parts, n_created, n_absorbed = session_slots(
            plan, held, new
        )

    # Aggregate the taken (row, window) assignments. Each input column is gathered once, however
    # many aggregations read it (accumulators never modify their inputs).
    if len(rows):
        t_rows, seq_rows = t[rows], row_seq[rows]
        values = {
            c: batch[c].to_numpy()[rows] for c in dict.fromkeys(a.column for a in plan.aggs) if c
        }
        for i, a in enumerate(plan.aggs):
            column = values[a.column] if a.column else None
            with naming_window(plan, a, slots):
                accs[i] = a.accumulator().update(accs[i], target, column, t_rows, seq_rows)
        changed[target] = True

    if n_created:
        counters["windows_created"] = n_created
    if n_absorbed:
        counters["windows_absorbed"] = n_absorbed
    slot_start = np.array(slots.column("start").to_numpy(), dtype=np.int64)
    slot_end = np.array(slots.column("end").to_numpy(), dtype=np.int64)
    emitted = np.array(slots.column("emitted").to_numpy(zero_copy_only=False), dtype=bool)
    revision = np.array(slots.column("revision").to_numpy(), dtype=np.int64)
    dirty = np.array(slots.column("dirty").to_numpy(zero_copy_only=False), dtype=bool) | changed
    _check_cap(plan, slot_start, slot_end)

    # Emit every closed window that is new or changed.
    closed = (wm_us >= slot_end) if wm_us is not None else np.zeros(len(slot_end), dtype=bool)
    emit = np.flatnonzero(closed & dirty)
    parts = list(retract_parts)
    if len(emit):
        new_rev = np.where(emitted[emit], revision[emit] + 1, 0)
        frame, raw = output_frame(plan, slots, accs, emit, new_rev, retracted=False)
        parts.append(frame)
        revision[emit] = new_rev
        emitted[emit] = True
        dirty[emit] = False
        counters["windows_emitted"] = len(emit)
        if plan.keeps_last_output:
            slots = remember_output(plan, slots, emit, raw)
    if letters:
        dl = pd.DataFrame({c: [None] * len(letters) for c in plan.output_names})
        dl[DEAD_LETTER_COLUMN] = letters
        parts.append(dl)

    # Evict: drop / dlq every closed window; reopen windows with wm >= end + AL.
    if wm_us is None:
        evict = np.zeros(len(slot_end), dtype=bool)
    elif plan.late_data == "reopen":
        evict = wm_us >= slot_end + al
    else:
        evict = closed
    slots = (
        slots.set_column(2, "emitted", pa.array(emitted))
        .set_column(3, "revision", pa.array(revision))
        .set_column(4, "dirty", pa.array(dirty))
    )
    if evict.any():
        keep_idx = np.flatnonzero(~evict)
        slots = slots.take(pa.array(keep_idx))
        accs = [a.accumulator().take(s, keep_idx) for a, s in zip(plan.aggs, accs, strict=True)]
        counters["windows_evicted"] = int(evict.sum())
        slot_end, dirty = slot_end[keep_idx], dirty[keep_idx]
    # Next deadline: a dirty window emits at wm >= end; a clean kept (reopen) one is evicted
    # at wm >= end + AL.
    deadlines = np.where(dirty, slot_end, slot_end + al)
    with warnings.catch_warnings():
        # All-null dead-letter columns next to typed ones: the result dtype is what we want.
        warnings.simplefilter("ignore", FutureWarning)
        out = (
            pd.concat(parts, ignore_index=True) if len(parts) > 1 else (parts[0] if parts else None)
        )
    out = out if out is not None else _no_output(tuple(plan.output_names)).copy(deep=False)
    names = plan.output_names
    return WindowStepResult(
        out[names] if len(out.columns) and list(out.columns) != names else out,
        WindowState(slots, accs, seq),
        int(deadlines.min()) if len(deadlines) else None,
        counters,
    )


def _rows_of(column: pd.Series, rows: NDArray[np.int64], typ: pa.DataType) -> pa.Array:
    """Rows ``rows`` of an input column as Arrow (NaN and None NULL, as ``from_pandas``).

    A plain numpy column is indexed as an array (a Series' ``iloc`` costs ten times more);
    extension columns (tz-aware, nullable, categorical) go through pandas.
    """
    if isinstance(column.dtype, np.dtype):
        return pa.array(column.to_numpy()[rows], type=typ, from_pandas=True)
    return pa.Array.from_pandas(column.iloc[rows], type=typ)


@functools.lru_cache(maxsize=64)
def _no_output(names: tuple[str, ...]) -> pd.DataFrame:
    """An empty output frame with ``names`` (built once: most calls emit nothing)."""
    return pd.DataFrame({c: [] for c in names})


def _dead_letters(
    plan: WindowPlan, rows: pd.DataFrame, wm_us: int | None, reason: str = "late"
) -> list[str]:
    """One JSON dead letter per late row (a loop over late rows only, off the hot path)."""
    return [
        dead_letter("input", reason, wm_us, row) for row in pandas_records(rows[list(plan.columns)])
    ]


def _check_cap(plan: WindowPlan, start: NDArray[np.int64], end: NDArray[np.int64]) -> None:
    if not len(start):
        return
    key = start if plan.kind != "session" else np.zeros(len(start), dtype=np.int64)
    uniq, counts = np.unique(key, return_counts=True)
    over = np.flatnonzero(counts > plan.max_groups)
    if len(over):
        w = uniq[over[0]]
        i = int(np.flatnonzero(key == w)[0])
        s_us, e_us = int(start[i]), int(end[i])
        msg = (
            f"window state cap hit: max_groups_per_window={plan.max_groups} reached on "
            f"window [{iso_utc(s_us)}, {iso_utc(e_us)}) for pipeline {plan.name}"
        )
        raise StateCapError(msg)
