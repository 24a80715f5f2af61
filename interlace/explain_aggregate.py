"""``interlace explain --operator aggregate``: a table aggregation's changelog, per event.

Each event is an update of a table keyed by ``key`` (default field ``key``), in its own
micro-batch; an event whose other fields are all null is a tombstone (SEMANTICS §7). The
table shows, per micro-batch, the rows the real two stages emit (through
:func:`interlace.testing.local_table_aggregate.run_table_aggregate_locally`, not a model):
the group, its aggregates, ``op`` and ``version`` (SEMANTICS §10). Registered in
:data:`interlace.explain.OPERATORS`; docs/explain.md shows an example.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from typing import Any

from interlace.explain_cells import (
    EPOCH,
    by_batch,
    cell_writer,
    parse_aggregation,
    render,
    schema_of,
    split_list,
    ts_cell,
)

__all__ = ["explain_aggregate"]


def explain_aggregate(
    events: Sequence[dict[str, Any]],
    *,
    key: str = "key",
    group_by: Sequence[str] = ("group",),
    aggregations: Sequence[Any] = ("count",),
    **spec_kwargs: Any,
) -> str:
    """Return the table aggregation's table for ``events`` (one micro-batch per event).

    Args:
        events: From :func:`interlace.explain.load_events` with ``operator="aggregate"``.
        key: The table's key field.
        group_by: The group fields (none: one group).
        aggregations: :class:`~interlace.Aggregation` objects or ``AGG[:FIELD][=ALIAS]``
            strings; ``count_distinct`` is exact here.
        **spec_kwargs: :class:`~interlace.TableAggregate` fields (``emit``, lateness, ...).
    """
    from interlace import Aggregation, TableAggregate
    from interlace.testing.local_table_aggregate import run_table_aggregate_locally

    aggs = []
    for a in aggregations:
        a = parse_aggregation(a) if isinstance(a, str) else a
        if a.agg == "count_distinct" and a.mode is None:
            a = Aggregation(agg="count_distinct", column=a.column, as_=a.as_, mode="exact",
                            max_distinct_values_per_group=1_000_000)
        aggs.append(a)
    group_by = tuple(group_by)
    inputs = list(dict.fromkeys([key, *group_by, *(a.column for a in aggs if a.column)]))
    for c in inputs:
        if not any(c in e for e in events):
            msg = f"field `{c}` (--key / --group-by / --agg) is in no event"
            raise ValueError(msg)
    schema, row = schema_of(events, inputs)
    spec = TableAggregate(keys=[key], group_by=group_by, aggregations=aggs,
                          event_time_column="ts", key_groups=1, **spec_kwargs)
    run = run_table_aggregate_locally(spec, [[row(e)] for e in events], schema)
    cell = cell_writer(events)

    out_cols = [*group_by, *(a.as_ for a in aggs), "op", "version"]

    def emitted(r: dict[str, Any]) -> list[str]:
        if r.get("_dead_letter"):
            reason = json.loads(r["_dead_letter"])["reason"]
            return [f"dead letter: {reason}", *([""] * (len(out_cols) - 1))]
        return [cell(r.get(c)) for c in out_cols]

    per_batch = by_batch(run.rows)
    shown = [c for c in inputs if c != "ts"]
    rows = []
    for b in range(max(len(events), len(run.watermarks_ms))):
        w = run.watermarks_ms[b] if b < len(run.watermarks_ms) else 0
        wm = cell(EPOCH + _dt.timedelta(milliseconds=w + spec.horizon_ms)) if w > 0 else "-"
        e = events[b] if b < len(events) else {}
        event = " ".join(f"{c}={cell(e.get(c))}" for c in shown) if e else ""
        lines = [emitted(r) for r in per_batch.get(b, [])]
        for j, line in enumerate(lines or [[""] * len(out_cols)]):
            rows.append(([ts_cell(events, b), event, wm] if j == 0 else ["", "", ""]) + line)
    return render(["ts", "event", "wm", *out_cols], rows)


def aggregate_cli(events: Sequence[dict[str, Any]], *, key: str = "key",
                  group_by: str = "group", agg: str = "count", **kwargs: Any) -> str:
    """:func:`explain_aggregate` with the CLI's options (``group_by``, ``agg`` comma-separated)."""
    return explain_aggregate(events, key=key, group_by=split_list(group_by),
                             aggregations=split_list(agg), **kwargs)
