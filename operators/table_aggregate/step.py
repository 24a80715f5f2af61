"""The table aggregation's pure core: two steps, by key then by group (SEMANTICS §7, §10).

A group's aggregate needs each key's previous row, and a key's rows live with the key, not
with its group: two groupings, so two stages, each an ``applyInPandasWithState`` query of its
own (Spark runs one per query) joined by a channel (docs/chains.md):

* :func:`key_step` (stage 1, per key group of the table's key) holds each key's current row,
  admits the call's updates (``final``: once ``wm > t``; ``eager``: on arrival), judges them
  late against their key's latest applied update, and emits per applied update a **delta**
  per group it touches: take the old row out (``__il_ho``), put the new one in
  (``__il_hn``), both in one row when the group stays the same.
* :func:`group_step` (stage 2, per key group of the group) applies the deltas it receives,
  each call's in the order of the updates (event time, then key, then the key's arrival),
  to each group's removable accumulators, and emits ``upsert`` when the group holds a row
  after a delta, ``delete`` when it held one before and none after.

Stage 2 receives stage 1's micro-batches one by one (the channel gives one file per
micro-batch), so each of its calls applies exactly the updates one call of the operator
SEMANTICS §10 describes would apply, in the same order.

No Spark calls, no I/O, no clock: the watermark arrives as an argument. Row by row in Python
(the accumulators are Python objects); neighbours: ``plan.py``,
:mod:`interlace.state.table_aggregate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from interlace.operators.common.changelog import add_count, split_pending
from interlace.operators.common.deadletters import dead_letter
from interlace.operators.errors import StateCapError
from interlace.operators.table_aggregate.plan import (
    AGG_INDEX,
    EVENT_TIME_IN,
    GROUP_ROW,
    HAS_NEW,
    HAS_OLD,
    LETTER_COLUMN,
    NEXT_VERSION,
    PRESENT_ROWS,
    TOMB_COLUMN,
    VALUE_COUNT,
    TableAggregatePlan,
)
from interlace.state.accumulators import SumOverflowError
from interlace.state.buffers import TIME_COLUMN
from interlace.state.table_aggregate import (
    CountState,
    GroupsState,
    KeyRowsState,
    MultisetState,
    SumState,
    canonical,
)
from interlace.state.tables import SEQ_COLUMN, TOMBSTONE_FLAG_COLUMN

__all__ = ["GroupStepResult", "KeyStepResult", "group_step", "key_step"]

_INT64 = (-(2**63), 2**63 - 1)


@dataclass
class KeyStepResult:
    """What one call of :func:`key_step` produced.

    Attributes:
        output: The deltas (``plan.delta_schema``), then the late updates' dead letters.
        state: The key group's rows and held updates after the call.
        next_due_us: The earliest held event time (due when ``wm >`` it), or ``None``.
        counters: ``applied``, ``held``, ``late_dropped``, ``dead_lettered``,
            ``null_key_dropped``, ``null_event_time_dropped``.
    """

    output: pa.Table
    state: KeyRowsState
    next_due_us: int | None
    counters: dict[str, int]


@dataclass
class GroupStepResult:
    """What one call of :func:`group_step` produced.

    Attributes:
        output: The changelog rows (``plan.output_schema``), dead letters passed through last.
        state: The key group's groups after the call.
        counters: ``upserts``, ``deletes``.
    """

    output: pa.Table
    state: GroupsState
    counters: dict[str, int]


def _columns(table: pa.Table, names: list[str]) -> list[list[Any]]:
    return [table.column(n).to_pylist() for n in names]


def _row_tuple(cols: list[list[Any]], i: int) -> tuple[Any, ...]:
    return tuple(canonical(c[i]) for c in cols)


# --- stage 1: by key ---------------------------------------------------------------------


def key_step(
    plan: TableAggregatePlan, state: KeyRowsState, batch: pa.Table, wm_us: int | None
) -> KeyStepResult:
    """Advance one key group of stage 1 by one call: apply the due updates, emit deltas.

    Args:
        plan: The resolved aggregation.
        state: The key group's rows and held updates before the call.
        batch: Updates in ``plan.input_schema``, in arrival order.
        wm_us: The operator watermark ``(W + H) * 1000``, or ``None`` before Spark has one.
    """
    counters: dict[str, int] = {}
    letters: list[str] = []
    arrived = batch.append_column(
        SEQ_COLUMN, pa.array(np.arange(state.seq, state.seq + batch.num_rows, dtype=np.int64)))
    keys = [plan.column(i) for i in plan.key_index]
    if arrived.num_rows:
        null_key = np.zeros(arrived.num_rows, dtype=bool)
        for k in keys:
            null_key |= np.asarray(arrived.column(k).is_null().to_numpy(zero_copy_only=False))
        add_count(counters, "null_key_dropped", int(null_key.sum()))
        null_time = np.asarray(arrived.column(TIME_COLUMN).is_null().to_numpy(
            zero_copy_only=False)) & ~null_key
        if null_time.any():
            _reject(plan, arrived.filter(pa.array(null_time)), "null_event_time", wm_us,
                    counters, letters)
        bad = null_key | null_time
        if bad.any():
            arrived = arrived.filter(pa.array(~bad))
    due, held, _ = split_pending(plan.spec.emit, state.held, arrived, wm_us)
    add_count(counters, "held", held.num_rows)
    rows = _KeyRows.load(plan, state.keys)
    deltas = _Deltas(plan)
    if due.num_rows:
        _apply_updates(plan, rows, due, wm_us, deltas, counters, letters)
    output = deltas.table(letters)
    times = held.column(TIME_COLUMN)
    next_due = int(pa.compute.min(times).as_py()) if held.num_rows else None
    return KeyStepResult(output, KeyRowsState(rows.table(), held, state.seq + batch.num_rows),
                         next_due, counters)


def _reject(plan: TableAggregatePlan, rows: pa.Table, reason: str, wm_us: int | None,
            counters: dict[str, int], letters: list[str]) -> None:
    """Count ``rows`` dropped for ``reason`` (late, null_event_time), or dead-letter them."""
    if not plan.dlq:
        add_count(counters, f"{reason}_dropped", rows.num_rows)
        return
    add_count(counters, "dead_lettered", rows.num_rows)
    records = rows.select([plan.column(i) for i in range(len(plan.names))]).rename_columns(
        list(plan.names)).to_pylist()
    letters += [dead_letter("input", reason, wm_us, r) for r in records]


@dataclass
class _KeyRows:
    """Stage 1's rows by key, as Python values: key -> [t, deleted, group, values]."""

    rows: dict[tuple[Any, ...], list[Any]]
    plan: TableAggregatePlan

    @classmethod
    def load(cls, plan: TableAggregatePlan, table: pa.Table) -> _KeyRows:
        nk, ng = len(plan.key_index), len(plan.group_index)
        cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
        rows: dict[tuple[Any, ...], list[Any]] = {}
        for i in range(table.num_rows):
            key = tuple(canonical(c[i]) for c in cols[:nk])
            t, deleted = cols[nk][i], cols[nk + 1][i]
            group = tuple(canonical(c[i]) for c in cols[nk + 2 : nk + 2 + ng])
            values = tuple(c[i] for c in cols[nk + 2 + ng :])
            rows[key] = [t, deleted, group, values]
        return cls(rows, plan)

    def table(self) -> pa.Table:
        schema = self.plan.keys_schema
        nk, ng = len(self.plan.key_index), len(self.plan.group_index)
        nv = len(self.plan.value_index)
        cols: list[list[Any]] = [[] for _ in schema]
        for key, (t, deleted, group, values) in self.rows.items():
            for j, v in enumerate(key):
                cols[j].append(v)
            cols[nk].append(t)
            cols[nk + 1].append(deleted)
            for j in range(ng):
                cols[nk + 2 + j].append(None if deleted else group[j])
            for j in range(nv):
                cols[nk + 2 + ng + j].append(None if deleted else values[j])
        return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(cols, schema,
                                                                          strict=True)],
                                    schema=schema)


class _Deltas:
    """Stage 1's output rows, column by column (``plan.delta_schema``)."""

    def __init__(self, plan: TableAggregatePlan) -> None:
        self.plan = plan
        self.cols: list[list[Any]] = [[] for _ in plan.delta_schema]

    def add(self, t: int, et: Any, seq: int, old: bool, new: bool, key: tuple[Any, ...],
            group: tuple[Any, ...], old_values: tuple[Any, ...] | None,
            new_values: tuple[Any, ...] | None) -> None:
        nv = len(self.plan.value_index)
        row = [t, et, seq, old, new, *key, *group,
               *(old_values if old_values is not None else (None,) * nv),
               *(new_values if new_values is not None else (None,) * nv)]
        if self.plan.dlq:
            row.append(None)
        for c, v in zip(self.cols, row, strict=True):
            c.append(v)

    def table(self, letters: list[str]) -> pa.Table:
        schema = self.plan.delta_schema
        if letters:
            width = len(schema)
            for j in range(width - 1):
                self.cols[j] += [None] * len(letters)
            self.cols[-1] += letters
        return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(self.cols, schema,
                                                                          strict=True)],
                                    schema=schema)


def _apply_updates(plan: TableAggregatePlan, rows: _KeyRows, due: pa.Table, wm_us: int | None,
                   deltas: _Deltas, counters: dict[str, int], letters: list[str]) -> None:
    """Apply the due updates one at a time, per key in (event time, arrival) order."""
    key_cols = _columns(due, [plan.column(i) for i in plan.key_index])
    group_cols = _columns(due, [plan.column(i) for i in plan.group_index])
    value_cols = _columns(due, [plan.column(i) for i in plan.value_index])
    t = due.column(TIME_COLUMN).to_pylist()
    et = due.column(plan.column(plan.time_index)).to_pylist()
    seq = due.column(SEQ_COLUMN).to_pylist()
    tomb = due.column(TOMB_COLUMN).to_pylist()
    keys = [_row_tuple(key_cols, i) for i in range(due.num_rows)]
    order = sorted(range(due.num_rows), key=lambda i: (t[i], seq[i]))
    late: list[int] = []
    for i in order:
        key = keys[i]
        stored = rows.rows.get(key)
        if stored is not None and t[i] < stored[0]:
            late.append(i)
            continue
        add_count(counters, "applied", 1)
        had = stored is not None and not stored[1]
        group = _row_tuple(group_cols, i)
        values = tuple(c[i] for c in value_cols)
        deleted = bool(tomb[i])
        if had and not deleted and stored is not None and stored[2] == group:
            deltas.add(t[i], et[i], seq[i], True, True, key, group, stored[3], values)
        else:
            if had and stored is not None:
                deltas.add(t[i], et[i], seq[i], True, False, key, stored[2], stored[3], None)
            if not deleted:
                deltas.add(t[i], et[i], seq[i], False, True, key, group, None, values)
        rows.rows[key] = [t[i], deleted, group, values]
    if late:
        _reject(plan, due.take(pa.array(sorted(late))), "late", wm_us, counters, letters)


# --- stage 2: by group -------------------------------------------------------------------


@dataclass
class _Group:
    """One group's next version, rows present and accumulators."""

    version: int = 0
    n: int = 0
    accs: list[Any] = field(default_factory=list)


def _new_accs(plan: TableAggregatePlan) -> list[Any]:
    accs: list[Any] = []
    for a, (kind, scale) in zip(plan.spec.aggregations, plan.sum_kinds, strict=True):
        if a.agg in ("sum", "avg"):
            accs.append(SumState(kind, scale))
        elif a.agg in ("min", "max", "count_distinct"):
            accs.append(MultisetState())
        elif a.column is not None:
            accs.append(CountState())
        else:
            accs.append(None)  # count(*): the group's row count
    return accs


def _load_groups(plan: TableAggregatePlan, state: GroupsState) -> dict[tuple[Any, ...], _Group]:
    ng = len(plan.group_index)
    table = state.groups
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    groups: dict[tuple[Any, ...], _Group] = {}
    ordered: list[_Group] = []
    for i in range(table.num_rows):
        g = _Group(cols[ng][i], cols[ng + 1][i], _new_accs(plan))
        for j, acc in enumerate(g.accs):
            text = cols[ng + 2 + j][i]
            if isinstance(acc, SumState):
                g.accs[j] = SumState.load(acc.kind, acc.scale, text)
            elif isinstance(acc, CountState):
                g.accs[j] = CountState.load(text)
        groups[tuple(canonical(c[i]) for c in cols[:ng])] = g
        ordered.append(g)
    values = state.values
    if values.num_rows:
        rows = values.column(GROUP_ROW).to_pylist()
        aggs = values.column(AGG_INDEX).to_pylist()
        counts = values.column(VALUE_COUNT).to_pylist()
        typed = {i: values.column(f"__il_m{i}").to_pylist() for i in plan.multiset_aggs}
        for r, a, c, j in zip(rows, aggs, counts, range(len(rows)), strict=True):
            ordered[r].accs[a].counts[canonical(typed[a][j])] = c
    return groups


def _store_groups(plan: TableAggregatePlan, groups: dict[tuple[Any, ...], _Group]) -> GroupsState:
    schema, vschema = plan.groups_schema, plan.values_schema
    ng = len(plan.group_index)
    cols: list[list[Any]] = [[] for _ in schema]
    vcols: list[list[Any]] = [[] for _ in vschema]
    slot = {a: 3 + j for j, a in enumerate(plan.multiset_aggs)}
    for r, (key, g) in enumerate(groups.items()):
        for j in range(ng):
            cols[j].append(key[j])
        cols[ng].append(g.version)
        cols[ng + 1].append(g.n)
        for j, acc in enumerate(g.accs):
            cols[ng + 2 + j].append(acc.dump() if isinstance(acc, SumState | CountState) else "")
            if isinstance(acc, MultisetState):
                for value, count in acc.counts.items():
                    vcols[0].append(r)
                    vcols[1].append(j)
                    vcols[2].append(count)
                    for a, s in slot.items():
                        vcols[s].append(value if a == j else None)
    return GroupsState(
        pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)],
                             schema=schema),
        pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(vcols, vschema, strict=True)],
                             schema=vschema),
    )


def _results(plan: TableAggregatePlan, g: _Group, group: tuple[Any, ...]) -> list[Any]:
    """The group's aggregates, in the spec's order (fails loud past a cap or int64)."""
    out: list[Any] = []
    for a, acc in zip(plan.spec.aggregations, g.accs, strict=True):
        if acc is None:
            out.append(g.n)
        elif isinstance(acc, CountState):
            out.append(acc.result())
        elif isinstance(acc, SumState):
            value = acc.sum() if a.agg == "sum" else acc.avg()
            if a.agg == "sum" and acc.kind == "int" and value is not None and not (
                    _INT64[0] <= value <= _INT64[1]):
                raise SumOverflowError(0, f"sum({a.column}) AS {a.as_}", a.column,
                                       f"on group {list(group)} of the table aggregation")
            out.append(value)
        elif a.agg == "min":
            out.append(acc.minimum())
        elif a.agg == "max":
            out.append(acc.maximum())
        else:
            n = acc.distinct()
            cap = a.max_distinct_values_per_group
            if cap is not None and n > cap:
                msg = (
                    f"exact count_distinct cap hit: count_distinct({a.column}) AS {a.as_} "
                    f"passed max_distinct_values_per_group={cap} ({n} distinct values) on "
                    f"group {list(group)} of the table aggregation; raise "
                    "`max_distinct_values_per_group`"
                )
                raise StateCapError(msg)
            out.append(n)
    return out


def group_step(plan: TableAggregatePlan, state: GroupsState, deltas: pa.Table) -> GroupStepResult:
    """Advance one key group of stage 2 by one call: apply the deltas, emit the changelog.

    Args:
        plan: The resolved aggregation.
        state: The key group's groups before the call.
        deltas: Stage 1's rows for this key group (``plan.delta_schema``), one stage-1
            micro-batch's.
    """
    counters: dict[str, int] = {}
    letters: list[str] = []
    if plan.dlq and deltas.num_rows:
        letter = deltas.column(LETTER_COLUMN)
        is_letter = np.asarray(letter.is_valid().to_numpy(zero_copy_only=False))
        if is_letter.any():
            letters = letter.filter(pa.array(is_letter)).to_pylist()
            deltas = deltas.filter(pa.array(~is_letter))
    groups = _load_groups(plan, state)
    nk, ng, nv = len(plan.key_index), len(plan.group_index), len(plan.value_index)
    schema = plan.output_schema
    out: list[list[Any]] = [[] for _ in schema]
    if deltas.num_rows:
        t = deltas.column(TIME_COLUMN).to_pylist()
        et = deltas.column(EVENT_TIME_IN).to_pylist()
        seq = deltas.column(SEQ_COLUMN).to_pylist()
        ho = deltas.column(HAS_OLD).to_pylist()
        hn = deltas.column(HAS_NEW).to_pylist()
        key_cols = _columns(deltas, [f"__il_k{j}" for j in range(nk)])
        group_cols = _columns(deltas, [f"__il_g{j}" for j in range(ng)])
        old_cols = _columns(deltas, [f"__il_o{j}" for j in range(nv)])
        new_cols = _columns(deltas, [f"__il_n{j}" for j in range(nv)])
        column_of = [None if a.column is None else plan.spec.columns.index(a.column)
                     for a in plan.spec.aggregations]
        # SEMANTICS §10: one update at a time, by event time; a key's updates in arrival
        # order; updates of different keys at one event time in key order.
        order = sorted(range(deltas.num_rows),
                       key=lambda i: (t[i], _sortable(_row_tuple(key_cols, i)), seq[i]))
        for i in order:
            group = _row_tuple(group_cols, i)
            g = groups.get(group)
            if g is None:
                g = groups[group] = _Group(0, 0, _new_accs(plan))
            before = g.n > 0
            for flag, cols, sign in ((ho[i], old_cols, -1), (hn[i], new_cols, 1)):
                if flag:
                    g.n += sign
                    for acc, col in zip(g.accs, column_of, strict=True):
                        if acc is not None and col is not None:
                            acc.add(cols[col][i], sign)
            if g.n > 0:
                values, op = _results(plan, g, group), "upsert"
                add_count(counters, "upserts", 1)
            elif before:
                values, op = [None] * len(plan.spec.aggregations), "delete"
                add_count(counters, "deletes", 1)
            else:
                continue
            row = [*group, *values, op, et[i], g.version]
            if plan.dlq:
                row.append(None)
            for c, v in zip(out, row, strict=True):
                c.append(v)
            g.version += 1
    if letters:
        for c in out[:-1]:
            c += [None] * len(letters)
        out[-1] += letters
    output = pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(out, schema, strict=True)],
                                  schema=schema)
    return GroupStepResult(output, _store_groups(plan, groups), counters)


def _sortable(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A key tuple Python can order (NaN, which never is a key here, aside)."""
    return key
