"""``interlace explain``: replay a small event log through an operator and print a table.

The log is JSON, an object with an ``events`` list (docs/explain.md)::

    {"events": [{"side": "left", "ts": 3, "key": "k1", "value": "A"}, ...]}   # join
    {"events": [{"ts": 3, "key": "k1", "value": 5}, ...]}                     # window

``ts`` is seconds after 2026-01-01T00:00:00 UTC, or an ISO-8601 timestamp; a join event has a
``side`` (``"left"`` or ``"right"``; for the stream-table join ``"left"`` is the stream and
``"right"`` the table's changelog, where a null ``value`` is a tombstone; for the table-table
and foreign-key joins both sides are changelogs), a window event has none; any other fields
become columns. Each event is its own micro-batch, in ``ts`` order
(stable; ``arrival="file"`` keeps the file's order, so an event written after later ones
arrives late), then Spark's trailing no-data batch if the watermark moved. The table shows,
per micro-batch, the rows the operator emits in it, computed by the real operator function
(:func:`interlace.testing.local.run_join_locally`, ``run_window_locally``,
``run_stream_table_locally``, ``run_table_join_locally``, ``run_foreign_key_join_locally``),
not by a model; ``tests/cli`` checks each table against the oracles.

An operator plugs in with an entry in :data:`OPERATORS`: whether its events carry a
``side``, the options it takes (and the late-data ones), and a function
``(events, **options) -> str``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlace.explain_cells import (
    BASE,
    EPOCH,
    by_batch,
    cell_writer,
    naive,
    parse_aggregation,
    render,
    schema_of,
    split_list,
    ts_cell,
)

__all__ = [
    "OPERATORS",
    "Operator",
    "explain_foreign_key",
    "explain_join",
    "explain_log",
    "explain_stream_table",
    "explain_table",
    "explain_window",
    "load_events",
    "parse_aggregation",
    "parse_events",
]

_LATE = ("lateness_ms", "late_data", "allowed_lateness_ms", "dlq_horizon_ms")


def load_events(path: str | Path, operator: str = "join", arrival: str = "ts") -> list[dict]:
    """Read and check an explain log (see :func:`parse_events`).

    Args:
        path: The JSON file.
        operator: A key of :data:`OPERATORS`.
        arrival: ``"ts"`` (sorted by event time, stable) or ``"file"`` (as written).

    Returns:
        The events in arrival order, ``ts`` as naive UTC datetimes.
    """
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        msg = f"{path}: not JSON ({exc})"
        raise ValueError(msg) from None
    return parse_events(data, operator, arrival)


def parse_events(data: Any, operator: str = "join", arrival: str = "ts") -> list[dict[str, Any]]:
    """Check a decoded log; a malformed one raises a one-line ``ValueError``.

    Args:
        data: ``{"events": [...]}`` (a bare list of events is accepted too).
        operator: A key of :data:`OPERATORS`; a join event needs ``side``, others refuse it.
        arrival: ``"ts"`` (sorted by event time, stable) or ``"file"`` (as written).

    Returns:
        The events in arrival order, with ``ts`` a naive UTC datetime, ``_label`` the ``ts``
        as written and ``_index`` the position in the file.
    """
    if operator not in OPERATORS:
        msg = f"unknown operator {operator!r}; use one of {', '.join(OPERATORS)}"
        raise ValueError(msg)
    if arrival not in ("ts", "file"):
        msg = f"arrival must be 'ts' or 'file' (got {arrival!r})"
        raise ValueError(msg)
    events = data.get("events") if isinstance(data, dict) else data
    if isinstance(data, dict) and "events" not in data:
        msg = 'log: missing field `events` (expected {"events": [{"ts": ..., ...}, ...]})'
        raise ValueError(msg)
    if not isinstance(events, list):
        msg = f"log: field `events` must be a list of events (got {type(events).__name__})"
        raise ValueError(msg)
    if not events:
        msg = "log: field `events` is empty"
        raise ValueError(msg)
    sided = OPERATORS[operator].sided
    out = []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            msg = f'event {i}: must be an object such as {{"ts": 3, ...}} (got {e!r})'
            raise ValueError(msg)
        if "ts" not in e:
            msg = f"event {i}: missing field `ts` (seconds, or an ISO-8601 timestamp)"
            raise ValueError(msg)
        if sided and e.get("side") not in ("left", "right"):
            got = "missing" if "side" not in e else f"got {e['side']!r}"
            msg = f"event {i}: field `side` must be 'left' or 'right' ({got})"
            raise ValueError(msg)
        if not sided and "side" in e:
            msg = f"event {i}: field `side` is for join logs; a {operator} event has no side"
            raise ValueError(msg)
        out.append({**e, "ts": _parse_ts(i, e["ts"]), "_label": e["ts"], "_index": i})
    return sorted(out, key=lambda e: e["ts"]) if arrival == "ts" else out


def _parse_ts(i: int, ts: Any) -> _dt.datetime:
    try:
        if isinstance(ts, int | float) and not isinstance(ts, bool) and math.isfinite(ts):
            return BASE + _dt.timedelta(seconds=ts)
        if isinstance(ts, str):
            when = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
            if when.tzinfo is not None:
                when = when.astimezone(_dt.timezone.utc).replace(tzinfo=None)
            return when
    except (OverflowError, ValueError):
        pass
    msg = f"event {i}: field `ts` must be seconds or an ISO-8601 timestamp (got {ts!r})"
    raise ValueError(msg)


def explain_log(path: str | Path, operator: str = "join", arrival: str = "ts", **kw: Any) -> str:
    """Load ``path`` and explain it with ``operator`` (what ``interlace explain`` prints).

    Args:
        path: The JSON log.
        operator: A key of :data:`OPERATORS`.
        arrival: ``"ts"`` or ``"file"`` (:func:`load_events`).
        **kw: The operator's options as the CLI gives them: comma-separated strings for
            ``how``, ``group_by`` and ``agg``; the late-data fields for every operator.

    Returns:
        The table.
    """
    events = load_events(path, operator, arrival)
    stray = sorted(set(kw) - set(OPERATORS[operator].options) - set(OPERATORS[operator].late))
    if stray:
        msg = f"--{stray[0].replace('_', '-')} does not apply to --operator {operator}"
        raise ValueError(msg)
    return OPERATORS[operator].explain(events, **kw)


def _null(v: Any) -> str:
    """A cell value: ``null`` for None."""
    return "null" if v is None else str(v)


def _row_cell(r: dict[str, Any], shown: Callable[[dict[str, Any]], str]) -> str:
    """An output row in a cell: ``dead letter: <side>`` for a dead letter, else ``shown(r)``."""
    if r.get("_dead_letter"):
        return "dead letter: " + str(json.loads(r["_dead_letter"])["side"])
    return shown(r)


def _left_right(value: str) -> Callable[[dict[str, Any]], str]:
    """An output row shown as ``left_<value> - right_<value>`` (``null`` for None)."""
    return lambda r: f"{_null(r.get(f'left_{value}'))} - {_null(r.get(f'right_{value}'))}"


def _sorted_cells(rows: Sequence[dict[str, Any]], shown: Callable[[dict[str, Any]], str]) -> str:
    """One micro-batch's output rows as a cell, sorted (:func:`_row_cell` each)."""
    return "  ".join(sorted(_row_cell(r, shown) for r in rows))


def _same_key_run(
    join: Callable[..., Any],
    run_locally: Callable[..., Any],
    key: str,
    spec_kwargs: dict[str, Any],
    value_columns: list[str] | None = None,
) -> Callable[[str, list[Any], Any], Any]:
    """Return ``run(how, log, schema)`` for a join of two inputs on the same ``key``.

    Args:
        join: The spec class (:class:`~interlace.Join`, :class:`~interlace.StreamTableJoin`,
            :class:`~interlace.TableJoin`).
        run_locally: Its local runner (``run_join_locally`` ...).
        key: The key field (both sides).
        spec_kwargs: The spec's other fields, from the caller.
        value_columns: The spec's ``value_columns``, if it is given one.

    Returns:
        The runner :func:`_batch_rows` calls: one key group, event time ``ts``.
    """
    values = {} if value_columns is None else {"value_columns": value_columns}

    def run(how: str, log: list[Any], schema: Any) -> Any:
        spec = join(
            left_keys=[key],
            right_keys=[key],
            how=how,
            event_time_column="ts",
            key_groups=1,
            **values,
            **spec_kwargs,
        )
        return run_locally(spec, log, schema, schema)

    return run


def _batch_rows(
    events: Sequence[dict[str, Any]],
    fields: Sequence[str],
    hows: Sequence[str],
    run: Callable[[str, list[Any], Any], Any],
    shown: Callable[[dict[str, Any]], str],
    cell: Callable[[str, list[dict[str, Any]]], str],
) -> str:
    """Replay ``events`` once per ``how``; lay out a row per micro-batch and a cell per ``how``.

    Args:
        events: The events, one per micro-batch, on its side.
        fields: The events' fields the operator reads.
        hows: The join types, one column each.
        run: ``run(how, log, schema)`` runs the operator locally (a ``LocalRun``).
        shown: The event as shown under its side (``left`` / ``right``).
        cell: ``cell(how, rows)``: a micro-batch's output rows under ``how`` as a cell.

    Returns:
        The rendered table: ``ts``, ``left``, ``right``, then one column per ``how``, one row
        per micro-batch (the trailing no-data batch included when a run had one).
    """
    from interlace.testing.log import JoinBatch

    schema, row = schema_of(events, fields)
    log = [
        JoinBatch(left=(row(e),)) if e["side"] == "left" else JoinBatch(right=(row(e),))
        for e in events
    ]
    per_how: dict[str, dict[int, list[dict[str, Any]]]] = {}
    n_batches = len(log)
    for how in hows:
        result = run(how, log, schema)
        n_batches = max(n_batches, len(result.watermarks_ms))
        per_how[how] = by_batch(result.rows)
    rows = []
    for b in range(n_batches):
        e = events[b] if b < len(events) else {}
        sides = [shown(e) if e.get("side") == s else "" for s in ("left", "right")]
        rows.append([ts_cell(events, b), *sides, *(cell(h, per_how[h].get(b, [])) for h in hows)])
    return render(["ts", "left", "right", *hows], rows)


def explain_join(
    events: Sequence[dict[str, Any]],
    *,
    key: str = "key",
    value: str = "value",
    hows: Sequence[str] = ("inner", "left", "full"),
    **join_kwargs: Any,
) -> str:
    """Return the seed-003-style table for ``events`` (see the module docstring).

    Args:
        events: From :func:`load_events`.
        key: The join key field (both sides).
        value: The field shown in the table.
        hows: Join types to show, one column each.
        **join_kwargs: :class:`~interlace.Join` fields (bounds, lateness, late_data, ...).

    Returns:
        One row per micro-batch: ``ts``, the event's value under its side, then per ``how``
        the pairs ``left - right`` emitted (``null`` for the missing side; dead letters).
    """
    from interlace.operators.join import Join
    from interlace.testing.local import run_join_locally

    run = _same_key_run(Join, run_join_locally, key, join_kwargs)

    def pair(how: str) -> Callable[[dict[str, Any]], str]:
        if how in ("left_semi", "left_anti"):
            return lambda r: str(r.get(value))
        return _left_right(value)

    return _batch_rows(
        events,
        [key, value],
        hows,
        run,
        lambda e: str(e.get(value)),
        lambda h, rows: _sorted_cells(rows, pair(h)),
    )


def explain_stream_table(
    events: Sequence[dict[str, Any]],
    *,
    key: str = "key",
    value: str = "value",
    hows: Sequence[str] = ("inner", "left"),
    **spec_kwargs: Any,
) -> str:
    """Return seed 003's KStream-KTable table for ``events`` (see the module docstring).

    ``left`` events are the stream, ``right`` events the table's changelog: a ``right`` event
    is a version of its ``key`` valid from its ``ts``, a tombstone when its ``value`` is null
    (or missing), the table's only value column being ``value``.

    Args:
        events: From :func:`load_events` with ``operator="stream_table"``.
        key: The key field (both sides).
        value: The field shown in the table, and the table's value column.
        hows: ``inner`` and / or ``left``, one column each.
        **spec_kwargs: :class:`~interlace.StreamTableJoin` fields (``emit``,
            ``history_retention_ms``, ``lateness_ms``, ``late_data``, ``dlq_horizon_ms``).

    Returns:
        One row per micro-batch: ``ts``, the event's value under its side (``null`` for a
        null value), then per ``how`` the rows emitted, ``stream - table`` (``null`` for an
        absent key; under dlq, ``dead letter: left`` or ``right``).
    """
    from interlace.operators.stream_table import StreamTableJoin
    from interlace.testing.local import run_stream_table_locally

    run = _same_key_run(StreamTableJoin, run_stream_table_locally, key, spec_kwargs, [value])
    shown = _left_right(value)
    return _batch_rows(events, [key, value], hows, run, lambda e: _null(e.get(value)),
                       lambda h, rows: _sorted_cells(rows, shown))


def _changelog_cells(
    rows: Sequence[dict[str, Any]], key: str, upsert: Callable[[dict[str, Any]], str]
) -> str:
    """One micro-batch's changelog rows as a cell, in the order they apply (key, version)."""

    def change(r: dict[str, Any]) -> str:
        return upsert(r) if r["op"] == "upsert" else f"delete {_null(r[key])}"

    def order(r: dict[str, Any]) -> tuple[bool, str, int]:
        return (bool(r.get("_dead_letter")), _null(r.get(key)), r.get("version") or 0)

    return "  ".join(_row_cell(r, change) for r in sorted(rows, key=order))


def explain_table(
    events: Sequence[dict[str, Any]],
    *,
    key: str = "key",
    value: str = "value",
    hows: Sequence[str] = ("inner", "left", "full"),
    **spec_kwargs: Any,
) -> str:
    """Return seed 003's KTable-KTable table for ``events`` (see the module docstring).

    Both sides are changelogs: an event is a version of its ``key`` in its side's table,
    valid from its ``ts``, a tombstone when its ``value`` is null (or missing), each table's
    only value column being ``value``.

    Args:
        events: From :func:`load_events` with ``operator="table"``.
        key: The key field (both tables).
        value: The field shown in the table, and both tables' value column.
        hows: ``inner``, ``left`` and / or ``full`` (seed 003's outer join), one column each.
        **spec_kwargs: :class:`~interlace.TableJoin` fields (``emit``, ``lateness_ms``,
            ``late_data``, ``dlq_horizon_ms``).

    Returns:
        One row per micro-batch: ``ts``, the event's value under its side (``null`` for a
        tombstone), then per ``how`` the changelog rows emitted, in the order they apply:
        an upsert as ``left - right`` (``null`` for an absent side), a delete as
        ``delete KEY`` (under dlq, ``dead letter: left`` or ``right``).
    """
    from interlace.operators.table import TableJoin
    from interlace.testing.local import run_table_join_locally

    run = _same_key_run(TableJoin, run_table_join_locally, key, spec_kwargs, [value])
    upsert = _left_right(value)
    return _batch_rows(events, [key, value], hows, run, lambda e: _null(e.get(value)),
                       lambda h, rows: _changelog_cells(rows, key, upsert))


def explain_foreign_key(
    events: Sequence[dict[str, Any]],
    *,
    key: str = "key",
    fk: str = "fk",
    value: str = "value",
    hows: Sequence[str] = ("inner", "left"),
    **spec_kwargs: Any,
) -> str:
    """Return seed 003's foreign-key table for ``events`` (see the module docstring).

    Both sides are changelogs. A ``left`` event is a version of the left row ``key``, whose
    foreign key is its ``fk`` (null: a tombstone, the left row is deleted); a ``right``
    event is a version of the right row whose key is its ``fk``, with the value ``value``
    (null: a tombstone).

    Args:
        events: From :func:`load_events` with ``operator="foreign_key"``.
        key: The left table's primary key field.
        fk: The foreign key field of left events, and the key field of right events.
        value: The right table's value field.
        hows: ``inner`` and / or ``left``, one column each.
        **spec_kwargs: :class:`~interlace.ForeignKeyJoin` fields (``emit``,
            ``lateness_ms``, ``late_data``, ``dlq_horizon_ms``).

    Returns:
        One row per micro-batch: ``ts``, the event under its side (``(key,fk)`` on the left,
        ``(fk,value)`` on the right), then per ``how`` the changelog rows emitted, in the
        order they apply: an upsert as ``(key,fk,value)``, a delete as ``delete KEY`` (under
        dlq, ``dead letter: left`` or ``right``).
    """
    from interlace.operators.foreign_key import ForeignKeyJoin
    from interlace.testing.local import run_foreign_key_join_locally

    if len({key, fk, value}) != 3:
        msg = f"--key, --fk and --value must name three different fields (got {key}, {fk}, {value})"
        raise ValueError(msg)

    def run(how: str, log: list[Any], schema: Any) -> Any:
        spec = ForeignKeyJoin(
            left_keys=[key],
            foreign_key_columns=[fk],
            right_keys=[fk],
            how=how,  # type: ignore[arg-type]
            event_time_column="ts",
            left_value_columns=[fk],
            right_value_columns=[value],
            key_groups=1,
            **spec_kwargs,
        )
        return run_foreign_key_join_locally(spec, log, schema, schema)

    def upsert(r: dict[str, Any]) -> str:
        return f"({_null(r[key])},{_null(r[f'left_{fk}'])},{_null(r[f'right_{value}'])})"

    def shown(e: dict[str, Any]) -> str:
        if e.get("side") == "left":
            return f"({_null(e.get(key))},{_null(e.get(fk))})"
        return f"({_null(e.get(fk))},{_null(e.get(value))})"

    return _batch_rows(
        events,
        [key, fk, value],
        hows,
        run,
        shown,
        lambda h, rows: _changelog_cells(rows, key, upsert),
    )


def explain_window(
    events: Sequence[dict[str, Any]],
    *,
    kind: str | None = None,
    group_by: Sequence[str] = ("key",),
    aggregations: Sequence[Any] = ("count",),
    **window_kwargs: Any,
) -> str:
    """Return the window table for ``events``: per micro-batch, the window rows it emits.

    Args:
        events: From :func:`load_events` with ``operator="window"``.
        kind: ``"tumbling"``, ``"hopping"`` or ``"session"``.
        group_by: Group-by fields (none: one group).
        aggregations: :class:`~interlace.Aggregation` objects or :func:`parse_aggregation`
            strings.
        **window_kwargs: :class:`~interlace.Window` fields (``duration_ms``, ``hop_ms``,
            ``gap_ms``, lateness, late_data, ...).

    Returns:
        One line per emitted row (or per micro-batch without output): ``ts``, the event's
        group and aggregated fields, the operator watermark ``wm`` the batch runs with, then
        the window ``[start, end)``, group, aggregates (and revision, retracted under reopen;
        a dead letter under dlq). Times are seconds after 2026-01-01 when every ``ts`` is.
    """
    from interlace.operators.window import Window
    from interlace.testing.local import run_window_locally
    from interlace.testing.window_oracle import WindowBatch

    if kind is None:
        msg = "--operator window needs --kind (tumbling, hopping or session)"
        raise ValueError(msg)
    aggs = [parse_aggregation(a) if isinstance(a, str) else a for a in aggregations]
    group_by = tuple(group_by)
    inputs = list(dict.fromkeys([*group_by, *(a.column for a in aggs if a.column)]))
    for c in inputs:
        if c != "ts" and not any(c in e for e in events):
            msg = f"field `{c}` (--group-by / --agg) is in no event"
            raise ValueError(msg)
    for a in aggs:
        for e in events if a.agg in ("sum", "avg") else ():
            v = e.get(a.column)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                msg = f"event {e['_index']}: field `{a.column}` must be a number for {a.agg}"
                raise ValueError(msg)
    schema, row = schema_of(events, inputs)
    spec = Window(
        kind=kind,  # type: ignore[arg-type]
        aggregations=aggs,
        group_by=group_by,
        event_time_column="ts",
        max_groups_per_window=1_000_000,
        key_groups=1,
        **window_kwargs,
    )
    run = run_window_locally(spec, [WindowBatch(rows=(row(e),)) for e in events], schema)
    cell = cell_writer(events)

    reopen = spec.late_data == "reopen"
    out_cols = [*group_by, *(a.as_ for a in aggs)] + (["revision", "retracted"] if reopen else [])

    def emitted(r: dict[str, Any]) -> list[str]:
        if r.get("_dead_letter"):
            reason = json.loads(r["_dead_letter"])["reason"]
            return [f"dead letter: {reason}", *([""] * len(out_cols))]
        bounds = f"[{cell(r[spec.window_start_column])}, {cell(r[spec.window_end_column])})"
        return [bounds, *(cell(r.get(c)) for c in out_cols)]

    def order(r: dict[str, Any]) -> tuple[Any, ...]:
        bounds = [naive(r[spec.window_start_column]), naive(r[spec.window_end_column])]
        groups = [str(r.get(c)) for c in group_by]
        return (bool(r.get("_dead_letter")), bounds, groups, r.get("revision") or 0)

    per_batch = by_batch(run.rows)
    rows = []
    for b in range(max(len(events), len(run.watermarks_ms))):
        w = run.watermarks_ms[b] if b < len(run.watermarks_ms) else 0
        wm = cell(EPOCH + _dt.timedelta(milliseconds=w + spec.horizon_ms)) if w > 0 else "-"
        e = events[b] if b < len(events) else {}
        event = " ".join(f"{c}={cell(e.get(c))}" for c in inputs if c != "ts") if e else ""
        lines = [emitted(r) for r in sorted(per_batch.get(b, []), key=order)]
        for j, line in enumerate(lines or [[""] * (1 + len(out_cols))]):
            rows.append(([ts_cell(events, b), event, wm] if j == 0 else ["", "", ""]) + line)
    return render(["ts", "event", "wm", "window", *out_cols], rows)


def _join_cli(events: Sequence[dict[str, Any]], *, how: str = "", **kwargs: Any) -> str:
    """:func:`explain_join` with the CLI's options (``how`` comma-separated)."""
    return explain_join(events, **({"hows": split_list(how)} if how else {}), **kwargs)


def _stream_table_cli(events: Sequence[dict[str, Any]], *, how: str = "", **kwargs: Any) -> str:
    """:func:`explain_stream_table` with the CLI's options (``how`` comma-separated)."""
    return explain_stream_table(events, **({"hows": split_list(how)} if how else {}), **kwargs)


def _table_cli(events: Sequence[dict[str, Any]], *, how: str = "", **kwargs: Any) -> str:
    """:func:`explain_table` with the CLI's options (``how`` comma-separated)."""
    return explain_table(events, **({"hows": split_list(how)} if how else {}), **kwargs)


def _foreign_key_cli(events: Sequence[dict[str, Any]], *, how: str = "", **kwargs: Any) -> str:
    """:func:`explain_foreign_key` with the CLI's options (``how`` comma-separated)."""
    return explain_foreign_key(events, **({"hows": split_list(how)} if how else {}), **kwargs)


def _window_cli(
    events: Sequence[dict[str, Any]], *, group_by: str = "key", agg: str = "count", **kwargs: Any
) -> str:
    """:func:`explain_window` with the CLI's options (``group_by``, ``agg`` comma-separated)."""
    return explain_window(events, group_by=split_list(group_by), aggregations=split_list(agg),
                          **kwargs)


def _aggregate_cli(events: Sequence[dict[str, Any]], **kwargs: Any) -> str:
    """:func:`interlace.explain_aggregate.explain_aggregate` with the CLI's options."""
    from interlace.explain_aggregate import aggregate_cli

    return aggregate_cli(events, **kwargs)


@dataclass(frozen=True)
class Operator:
    """An operator explain replays logs through: whether events carry ``side``, its options.

    Attributes:
        sided: Whether each event names its input with ``side`` (``"left"`` / ``"right"``).
        options: CLI options (argparse ``dest``) it takes besides the late-data ones.
        explain: ``(events, **options) -> table``.
        late: The late-data options it takes.
    """

    sided: bool
    options: tuple[str, ...]
    explain: Callable[..., str]
    late: tuple[str, ...] = _LATE


OPERATORS: dict[str, Operator] = {
    "join": Operator(
        True, ("key", "value", "how", "time_window_ms", "lower_ms", "upper_ms"), _join_cli
    ),
    "window": Operator(
        False, ("kind", "duration_ms", "hop_ms", "gap_ms", "group_by", "agg"), _window_cli
    ),
    "stream_table": Operator(
        True,
        ("key", "value", "how", "emit", "history_retention_ms"),
        _stream_table_cli,
        late=("lateness_ms", "late_data", "dlq_horizon_ms"),  # no reopen, no allowance
    ),
    "table": Operator(
        True,
        ("key", "value", "how", "emit"),
        _table_cli,
        late=("lateness_ms", "late_data", "dlq_horizon_ms"),
    ),
    "foreign_key": Operator(
        True,
        ("key", "fk", "value", "how", "emit"),
        _foreign_key_cli,
        late=("lateness_ms", "late_data", "dlq_horizon_ms"),
    ),
    "aggregate": Operator(
        False,
        ("key", "group_by", "agg", "emit"),
        _aggregate_cli,
        late=("lateness_ms", "late_data", "dlq_horizon_ms"),
    ),
}
"""The operators ``interlace explain --operator`` knows, by name."""
