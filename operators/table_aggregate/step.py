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
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
from interlace.operators.common.arrow import i64
from interlace.operators.common.changelog import add_count, split_pending, take_or_null
from interlace.operators.common.deadletters import dead_letter
from interlace.operators.common.keys import key_codes
from interlace.operators.errors import StateCapError
from interlace.operators.table_aggregate.counts import counts_only, counts_step
from interlace.operators.table_aggregate.plan import (
    AGG_INDEX,
    EVENT_TIME_IN,
    GROUP_ROW,
    HAS_NEW,
    HAS_OLD,
    LETTER_COLUMN,
    TOMB_COLUMN,
    VALUE_COUNT,
    TableAggregatePlan,
    with_letters,
)
from interlace.state.accumulators import DecimalOverflowError, SumOverflowError, decimal_result
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

__all__ = ["GroupStepResult", "KeyStepResult", "group_rows", "group_step", "key_step"]

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
    keys_table, deltas = state.keys, plan.delta_schema.empty_table()
    if due.num_rows:
        keys_table, deltas = _apply_updates(plan, state.keys, due, wm_us, counters, letters)
    deltas = with_letters(deltas, letters)
    times = held.column(TIME_COLUMN)
    next_due = int(pa.compute.min(times).as_py()) if held.num_rows else None
    return KeyStepResult(deltas, KeyRowsState(keys_table, held, state.seq + batch.num_rows),
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


def _apply_updates(plan: TableAggregatePlan, stored: pa.Table, due: pa.Table,
                   wm_us: int | None, counters: dict[str, int],
                   letters: list[str]) -> tuple[pa.Table, pa.Table]:
    """Apply the due updates, per key in (event time, arrival) order; return keys and deltas.

    Vectorised as the table-table join's step: the due updates are sorted by (key, event
    time, arrival); each one's previous row is the one before it in its key's run, or the
    stored row at the run's start; the deltas are gathers of the stored and due rows.
    """
    nk = len(plan.key_index)
    key_names = [f.name for f in plan.key_fields]
    gv_names = [f.name for f in plan.keys_schema][nk + 2:]
    due_keys = [due.column(plan.column(i)) for i in plan.key_index]
    m = stored.num_rows
    codes = key_codes([pa.chunked_array(stored.column(k).chunks + d.chunks, type=d.type)
                       for k, d in zip(key_names, due_keys, strict=True)],
                      m + due.num_rows, null_is_value=True)
    stored_codes, due_codes = codes[:m], codes[m:]
    lookup = np.full(int(codes.max(initial=0)) + 1, -1, dtype=np.int64)
    lookup[stored_codes] = np.arange(m, dtype=np.int64)
    srow = lookup[due_codes]
    t = i64(due.column(TIME_COLUMN))
    # SEMANTICS §10 (§9): late iff older than its key's applied update. Within the call a
    # key's updates apply in event-time order, so only the stored one can be newer.
    late = np.zeros(len(t), dtype=bool)
    if m:
        stored_t = i64(stored.column(TIME_COLUMN))
        late = (srow >= 0) & (t < stored_t[np.maximum(srow, 0)])
    if late.any():
        _reject(plan, due.filter(pa.array(late)), "late", wm_us, counters, letters)
        keep = ~late
        due, t, srow, due_codes = due.filter(pa.array(keep)), t[keep], srow[keep], due_codes[keep]
        if not due.num_rows:
            return stored, plan.delta_schema.empty_table()
    order = np.lexsort((i64(due.column(SEQ_COLUMN)), t, due_codes))
    due, t, srow, due_codes = due.take(pa.array(order)), t[order], srow[order], due_codes[order]
    n = due.num_rows
    add_count(counters, "applied", n)
    first = np.ones(n, dtype=bool)
    first[1:] = due_codes[1:] != due_codes[:-1]
    last = np.ones(n, dtype=bool)
    last[:-1] = first[1:]
    # Stored rows, then due rows: groups and values, tombstone flags, group codes.
    due_gv = pa.table([due.column(plan.column(i))
                       for i in (*plan.group_index, *plan.value_index)], names=gv_names)
    src = pa.concat_tables([stored.select(gv_names), due_gv]) if m else due_gv
    deleted = np.concatenate([
        np.asarray(stored.column(TOMBSTONE_FLAG_COLUMN).to_numpy(zero_copy_only=False),
                   dtype=bool) if m else np.zeros(0, bool),
        np.asarray(due.column(TOMB_COLUMN).to_numpy(zero_copy_only=False), dtype=bool)])
    ng = len(plan.group_index)
    gcodes = key_codes([src.column(c) for c in gv_names[:ng]], src.num_rows,
                       null_is_value=True)
    here = m + np.arange(n, dtype=np.int64)
    prev = np.where(first, srow, here - 1)  # -1: the key had no row
    had = (prev >= 0) & ~deleted[np.maximum(prev, 0)]
    new = ~deleted[here]
    same = had & new & (gcodes[np.maximum(prev, 0)] == gcodes[here])
    a = np.flatnonzero(same)
    b = np.flatnonzero(had & ~same)
    c = np.flatnonzero(new & ~same)
    pos = np.concatenate([a, b, c])
    ho = np.concatenate([np.ones(len(a) + len(b), bool), np.zeros(len(c), bool)])
    hn = np.concatenate([np.ones(len(a), bool), np.zeros(len(b), bool), np.ones(len(c), bool)])
    gidx = np.concatenate([here[a], prev[b], here[c]])
    taken = due.take(pa.array(pos))
    groups = src.select(gv_names[:ng]).take(pa.array(gidx))
    values = src.select(gv_names[ng:])
    old = take_or_null(values, np.where(ho, prev[pos], 0), ho)
    newv = take_or_null(values, here[pos], hn)
    cols: list[Any] = [taken.column(TIME_COLUMN), taken.column(plan.column(plan.time_index)),
                       taken.column(SEQ_COLUMN), pa.array(ho), pa.array(hn),
                       *(taken.column(plan.column(i)) for i in plan.key_index),
                       *groups.columns, *old.columns, *newv.columns]
    if plan.dlq:
        cols.append(pa.nulls(len(pos), pa.string()))
    deltas = pa.Table.from_arrays(cols, schema=plan.delta_schema)
    # The keys after the call: untouched stored keys, then each touched key's last update.
    ends = np.flatnonzero(last)
    ended = due.take(pa.array(ends))
    touched = pa.Table.from_arrays(
        [*(ended.column(plan.column(i)) for i in plan.key_index), ended.column(TIME_COLUMN),
         ended.column(TOMB_COLUMN),
         *due_gv.take(pa.array(ends)).columns], schema=plan.keys_schema)
    if not m:
        return touched, deltas
    kept = np.ones(m, dtype=bool)
    kept[srow[first & (srow >= 0)]] = False
    untouched = stored.filter(pa.array(kept)) if not kept.all() else stored
    return pa.concat_tables([untouched, touched]).combine_chunks(), deltas


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


def group_rows(plan: TableAggregatePlan,
               state: GroupsState) -> list[tuple[tuple[Any, ...], int, int, list[Any]]]:
    """Each group of a stage-2 state: ``(group values, next version, rows present, aggregates)``.

    The aggregates are those of the group's last emitted row (NULL for a group left empty,
    whose last row was a ``delete``); ``interlace inspect`` shows them.
    """
    return [(group, g.version, g.n,
             _results(plan, g, group) if g.n else [None] * len(plan.spec.aggregations))
            for group, g in _load_groups(plan, state).items()]


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


def _check_decimal(plan: TableAggregatePlan, a: Any, total: Any, value: Any, where: str) -> None:
    """Fail as Spark's ``sum`` / ``avg`` do when a decimal result is past its type's digits.

    An ``avg`` fails when the sum it averages does too; ``state/accumulators/decimals.py``
    has the window's same rule.
    """
    typ = plan.types[plan.names.index(a.column)]
    what = " (the sum it averages)" if a.agg == "avg" else ""
    checks = [(total, *decimal_result("sum", typ.precision, typ.scale), what,
               "ARITHMETIC_OVERFLOW")]
    if a.agg == "avg":  # the mean past its type: Spark's cast of it fails
        checks.append((value, *decimal_result("avg", typ.precision, typ.scale), "",
                       "NUMERIC_VALUE_OUT_OF_RANGE"))
    for number, p, sc, note, code in checks:
        if number.copy_abs() >= Decimal(10) ** (p - sc):  # copy_abs: never rounds
            raise DecimalOverflowError(0, f"DECIMAL({p},{sc}){note}", f"{a.agg}({a.column}) AS "
                                       f"{a.as_}", a.column, where, code)


def _results(plan: TableAggregatePlan, g: _Group, group: tuple[Any, ...]) -> list[Any]:
    """The group's aggregates, in the spec's order (fails loud past a cap or a number type)."""
    out: list[Any] = []
    for a, acc in zip(plan.spec.aggregations, g.accs, strict=True):
        if acc is None:
            out.append(g.n)
        elif isinstance(acc, CountState):
            out.append(acc.result())
        elif isinstance(acc, SumState):
            value = acc.sum() if a.agg == "sum" else acc.avg()
            where = f"on group {list(group)} of the table aggregation"
            if a.agg == "sum" and acc.kind == "int" and value is not None and not (
                    _INT64[0] <= value <= _INT64[1]):
                raise SumOverflowError(0, f"{a.agg}({a.column}) AS {a.as_}", a.column, where)
            if acc.kind == "decimal" and value is not None:
                _check_decimal(plan, a, acc.sum(), value, where)
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
    if plan.vectorised and counts_only(plan):
        fast = counts_step(plan, state, deltas, letters)
        if fast is not None:
            return GroupStepResult(*fast)
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
                       key=lambda i: (t[i], _row_tuple(key_cols, i), seq[i]))
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
    output = pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(out, schema, strict=True)],
                                  schema=schema)
    return GroupStepResult(with_letters(output, letters), _store_groups(plan, groups), counters)
