"""Stage 2 of the table aggregation, vectorised, for counts and integer sums.

When every aggregation is ``count``, ``count(col)`` or ``sum`` / ``avg`` of an integer
column, a group's aggregates after each delta are running sums: the stored value plus a
cumulative sum of the deltas within the group's run (the deltas sorted as
:func:`~interlace.operators.table_aggregate.step.group_step` applies them: event time, key,
arrival). So the changelog is computed with numpy over the whole call, without a Python
loop per delta, and gives the rows the row-by-row path gives (the property tests run both).

It declines (returns ``None``, the row-by-row path runs) when a sum could reach 2**52 in
the call: there the row-by-row path's exact integers (and its fail-loud int64 check) and its
exactly rounded average are needed. Neighbours: ``step.py`` (the state layout, the other
aggregations), ``plan.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from interlace.operators.common.changelog import add_count
from interlace.operators.common.keys import key_codes
from interlace.operators.table_aggregate.plan import (
    EVENT_TIME_IN,
    HAS_NEW,
    HAS_OLD,
    NEXT_VERSION,
    PRESENT_ROWS,
    TableAggregatePlan,
    with_letters,
)
from interlace.state.buffers import TIME_COLUMN
from interlace.state.table_aggregate import GroupsState
from interlace.state.tables import SEQ_COLUMN

__all__ = ["counts_only", "counts_step"]

# Below 2**53 an int64 sum is exact in float64 too (the average rounds once); the bound is
# itself summed in float64, so it keeps a factor 2 of margin.
_SAFE = float(2**52)


def counts_only(plan: TableAggregatePlan) -> bool:
    """Whether every aggregation is a count or a sum / avg of integers."""
    for a, (kind, _) in zip(plan.spec.aggregations, plan.sum_kinds, strict=True):
        if a.agg == "count":
            continue
        if a.agg in ("sum", "avg") and kind == "int":
            continue
        return False
    return True


def _segmented_cumsum(values: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Cumulative sums restarting at each ``start`` position (``values`` in run order)."""
    if not len(values):
        return values.copy()
    cs = np.cumsum(values)
    first = np.maximum.accumulate(np.where(start, np.arange(len(values)), 0))
    out: np.ndarray = cs - (cs - values)[first]
    return out


def _ints(col: pa.ChunkedArray, part: int | None) -> np.ndarray:
    """An accumulator text column's ``part`` (``n:total:...``; ``None``: the whole) as int64."""
    if part is not None:
        col = pc.list_element(pc.split_pattern(col, ":"), part)
    return np.asarray(pc.cast(col, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def counts_step(plan: TableAggregatePlan, state: GroupsState, deltas: pa.Table,
                letters: list[str]) -> tuple[pa.Table, GroupsState, dict[str, int]] | None:
    """Apply one call's deltas (no dead letters among them) to the groups; emit the changelog.

    Returns ``(output, state, counters)``, or ``None`` where a sum could reach 2**52.
    """
    spec = plan.spec
    aggs = spec.aggregations
    stored = state.groups
    m, n = stored.num_rows, deltas.num_rows
    if not n:
        return None
    ng = len(plan.group_index)
    gnames = [f.name for f in plan.group_fields]
    columns = list(spec.columns)
    ho = np.asarray(deltas.column(HAS_OLD).to_numpy(zero_copy_only=False), dtype=bool)
    hn = np.asarray(deltas.column(HAS_NEW).to_numpy(zero_copy_only=False), dtype=bool)
    # Per aggregated column: the old and new values (0 where NULL), and whether non-NULL.
    vals: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for j, _ in enumerate(columns):
        if not any(a.column == columns[j] for a in aggs):
            continue
        o, w = deltas.column(f"__il_o{j}"), deltas.column(f"__il_n{j}")
        vals[j] = (np.asarray(pc.fill_null(o, 0).to_numpy(zero_copy_only=False), np.int64)
                   if pa.types.is_integer(o.type) else np.zeros(n, np.int64),
                   np.asarray(o.is_valid().to_numpy(zero_copy_only=False), bool) & ho,
                   np.asarray(pc.fill_null(w, 0).to_numpy(zero_copy_only=False), np.int64)
                   if pa.types.is_integer(w.type) else np.zeros(n, np.int64),
                   np.asarray(w.is_valid().to_numpy(zero_copy_only=False), bool) & hn)
    stored_n = np.asarray(stored.column(PRESENT_ROWS).to_numpy(), np.int64) if m else \
        np.zeros(0, np.int64)
    stored_ver = np.asarray(stored.column(NEXT_VERSION).to_numpy(), np.int64) if m else \
        np.zeros(0, np.int64)
    acc_n: dict[int, np.ndarray] = {}
    acc_total: dict[int, np.ndarray] = {}
    for i, a in enumerate(aggs):
        if a.column is None:
            continue
        text = stored.column(f"__il_a{i}") if m else None
        if a.agg == "count":
            acc_n[i] = _ints(text, None) if m else np.zeros(0, np.int64)
        else:
            acc_n[i] = _ints(text, 0) if m else np.zeros(0, np.int64)
            acc_total[i] = _ints(text, 1) if m else np.zeros(0, np.int64)
    # Declines where a sum could reach 2**52 in this call.
    for i, total in acc_total.items():
        j = columns.index(str(aggs[i].column))
        o, _, w, _ = vals[j]
        # In float64: an int64 sum of these could itself wrap around.
        bound = (np.abs(total.astype(np.float64)).max(initial=0.0)
                 + np.abs(o.astype(np.float64)).sum() + np.abs(w.astype(np.float64)).sum())
        if bound >= _SAFE:
            return None
    # SEMANTICS §10 order: event time, then key, then the key's arrival.
    nk = len(plan.key_index)
    order = pc.sort_indices(deltas, sort_keys=[(TIME_COLUMN, "ascending"),
                                               *((f"__il_k{j}", "ascending") for j in range(nk)),
                                               (SEQ_COLUMN, "ascending")]).to_numpy()
    # Each delta's group: a stored row, or a new one (numbered after the stored rows).
    codes = key_codes([pa.chunked_array(stored.column(g).chunks + deltas.column(g).chunks,
                                        type=deltas.column(g).type) for g in gnames],
                      m + n, null_is_value=True) if ng else np.zeros(m + n, np.int64)
    uniq, inverse = np.unique(codes, return_inverse=True)
    slot = np.full(len(uniq), -1, np.int64)
    slot[inverse[:m]] = np.arange(m, dtype=np.int64)
    fresh = np.flatnonzero(slot < 0)
    slot[fresh] = m + np.arange(len(fresh), dtype=np.int64)
    g_of = slot[inverse[m:]]
    total_groups = m + len(fresh)
    # Run order: by group, and within a group in application order.
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    run = np.lexsort((rank, g_of))
    g = g_of[run]
    start = np.ones(n, bool)
    start[1:] = g[1:] != g[:-1]

    def pad(a: np.ndarray) -> np.ndarray:  # per group, stored rows then new ones at 0
        return np.concatenate([a, np.zeros(total_groups - m, np.int64)])

    dn = hn[run].astype(np.int64) - ho[run].astype(np.int64)
    rows_after = pad(stored_n)[g] + _segmented_cumsum(dn, start)
    rows_before = rows_after - dn
    upsert = rows_after > 0
    emitted = upsert | (rows_before > 0)
    version = pad(stored_ver)[g] + _segmented_cumsum(emitted.astype(np.int64), start) - emitted
    results: list[Any] = []
    new_acc: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
    for i, a in enumerate(aggs):
        if a.column is None:
            results.append(rows_after)
            continue
        o, ov, w, wv = (x[run] for x in vals[columns.index(str(a.column))])
        nn = pad(acc_n[i])[g] + _segmented_cumsum(wv.astype(np.int64) - ov.astype(np.int64),
                                                  start)
        if a.agg == "count":
            results.append(nn)
            new_acc[i] = (nn, None)
            continue
        total = pad(acc_total[i])[g] + _segmented_cumsum(np.where(wv, w, 0) - np.where(ov, o, 0),
                                                         start)
        new_acc[i] = (nn, total)
        if a.agg == "sum":
            results.append(pa.array(total, pa.int64(), mask=nn == 0))
        else:
            results.append(pa.array(total / np.maximum(nn, 1), pa.float64(), mask=nn == 0))
    # The changelog rows (every emitted delta), in run order.
    rows = run[emitted]
    picked = deltas.take(pa.array(rows))
    up = upsert[emitted]
    out_cols: list[Any] = [picked.column(gname) for gname in gnames]
    schema = plan.output_schema
    for i, r in enumerate(results):
        arr = r if isinstance(r, pa.Array) else pa.array(r, pa.int64())
        arr = arr.filter(pa.array(emitted))
        out_cols.append(pc.if_else(pa.array(up), arr, pa.nulls(len(arr), arr.type))
                        .cast(schema.field(ng + i).type))
    out_cols += [pa.array(np.where(up, "upsert", "delete"), pa.string()),
                 picked.column(EVENT_TIME_IN), pa.array(version[emitted], pa.int64())]
    if plan.dlq:
        out_cols.append(pa.nulls(len(rows), pa.string()))
    output = with_letters(pa.Table.from_arrays(out_cols, schema=schema), letters)
    counters: dict[str, int] = {}
    add_count(counters, "upserts", int(up.sum()))
    add_count(counters, "deletes", int((~up).sum()))
    # The state: each group's values after its run's last delta (stored groups untouched
    # by the call keep theirs), new groups appended with their group values.
    ends = np.ones(n, bool)
    ends[:-1] = start[1:]
    last_g, last_i = g[ends], np.flatnonzero(ends)

    def settle(before: np.ndarray, after: np.ndarray) -> np.ndarray:
        out = pad(before).copy()
        out[last_g] = after[last_i]
        return out

    fresh_rows = np.empty(len(fresh), np.int64)
    first_of = run[start]
    fresh_rows[g[start][g[start] >= m] - m] = first_of[g[start] >= m]
    group_cols = [pa.concat_arrays([stored.column(gname).combine_chunks(),
                                    deltas.column(gname).take(pa.array(fresh_rows))
                                    .combine_chunks()]) if m else
                  deltas.column(gname).take(pa.array(fresh_rows)).combine_chunks()
                  for gname in gnames]
    text_cols = []
    for i, a in enumerate(aggs):
        if a.column is None:
            text_cols.append(pa.array([""] * total_groups, pa.string()))
            continue
        nn, running = new_acc[i]
        nn_all = settle(acc_n[i], nn)
        if running is None:
            text_cols.append(pc.cast(pa.array(nn_all), pa.string()))
            continue
        tot_all = settle(acc_total[i], running)
        text_cols.append(pc.binary_join_element_wise(
            pc.cast(pa.array(nn_all), pa.string()), pc.cast(pa.array(tot_all), pa.string()),
            "0", "0", "0", ":"))
    groups = pa.Table.from_arrays(
        [*group_cols, pa.array(settle(stored_ver, version + emitted), pa.int64()),
         pa.array(settle(stored_n, rows_after), pa.int64()), *text_cols],
        schema=plan.groups_schema)
    return output, GroupsState(groups, plan.values_schema.empty_table()), counters
