"""The held items of one key group's blob, with their release rules (pure: no Spark).

:mod:`interlace.inspection` reads the blobs through Spark's state data source and calls these with
the operator's plan. Each item is a dict of :data:`interlace.inspection.ITEM_COLUMNS` without the
columns the caller fills (stage, operator, key group, wm, wait): ``key`` (``COLUMN=VALUE, ...``,
the key columns under the input's names), ``item``, ``event_time`` and ``releases_at`` (µs since
the epoch), ``matched``, ``release`` (what happens at ``releases_at``) and ``row`` (the held
row as JSON, under the input's column names).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from interlace.operators.common.compat import to_pylist
from interlace.operators.window.slots import iso_utc

__all__ = [
    "aggregate_group_items",
    "aggregate_key_items",
    "foreign_key_items",
    "join_items",
    "release_of_join_row",
    "stream_table_items",
    "table_join_items",
    "window_items",
]

#: Sides whose rows that never matched are emitted at eviction (SEMANTICS §2).
_PRESERVED = {"left": ("left", "full", "left_anti"), "right": ("right", "full")}
#: What a decoder returns, one list per column (the caller adds stage, operator, key group).
_COLUMNS = ("key", "item", "event_time", "matched", "releases_at", "rule", "release", "row")


def release_of_join_row(how: str, side: str, matched: bool) -> str:
    """What happens to a buffered join row in the first call with ``wm > releases_at``."""
    if not matched and how in _PRESERVED[side]:
        return "emit unmatched" if how != "left_anti" else "emit (never matched)"
    return "evict (matched)" if matched else "evict (no output)"


def join_items(plan: Any, blob: bytes) -> dict[str, list[Any]]:
    """The buffered rows of a stream-stream join's key group, left side first, as columns.

    ``releases_at`` is the row's close time (left ``t + upper + AL``, right ``t - lower + AL``):
    the row leaves the buffer in the first micro-batch whose ``wm`` is greater.

    Raises:
        StateDecodeError, StateVersionError: The blob is not a join blob of this plan's spec.
    """
    import numpy as np

    from interlace.state.buffers import MATCHED_COLUMN, TIME_COLUMN, decode_join_state

    buffers = decode_join_state(blob, plan.fp, plan.left_buffer_schema, plan.right_buffer_schema)
    out: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    sides = (
        ("left", buffers.left, plan.left_payload, plan.left_names, plan.left_key_internal,
         plan.upper_us + plan.allowance_us),
        ("right", buffers.right, plan.right_payload, plan.right_names, plan.right_key_internal,
         -plan.lower_us + plan.allowance_us),
    )
    for side, table, payload, names, key_internal, bound in sides:
        if table.num_rows == 0:
            continue
        public = dict(zip(payload.names, names, strict=True))  # __il_l3 -> the input's name
        times = np.asarray(table.column(TIME_COLUMN).to_numpy(), dtype=np.int64)
        matched = table.column(MATCHED_COLUMN).to_pylist()
        release = {m: release_of_join_row(plan.how, side, m) for m in (False, True)}
        _extend(out, _key_texts(table, key_internal, public), f"{side} row", times.tolist(),
                matched, (times + bound).tolist(), "wm > releases_at",
                [release[m] for m in matched], _json_rows(_public(table, public)))
    return out


def window_items(plan: Any, blob: bytes) -> dict[str, list[Any]]:
    """The open windows (or sessions) of a window aggregation's key group, one per group.

    A window that changed since its last emit (or was never emitted) is emitted in the first
    micro-batch with ``wm >= end`` (``releases_at = end``); under ``drop`` / ``dlq`` it leaves
    the state then. Under ``reopen`` an emitted window stays until ``wm >= end + AL`` to take
    late rows, and an emitted window that has not changed since is released (evicted) there.
    ``event_time`` is the window's start; ``row`` holds the output row it would emit now
    (the aggregates so far, its bounds, its group).
    """
    import numpy as np

    from interlace.operators.window.output import output_frame
    from interlace.operators.window.step import WindowState

    state = WindowState.decode(blob, plan)
    slots = state.slots
    n = slots.num_rows
    if n == 0:
        return {c: [] for c in _COLUMNS}
    start = slots.column("start").to_pylist()
    end = slots.column("end").to_pylist()
    emitted = slots.column("emitted").to_pylist()
    revision = slots.column("revision").to_pylist()
    dirty = slots.column("dirty").to_pylist()
    idx = np.arange(n, dtype=np.int64)
    now = np.where(np.asarray(emitted, dtype=bool), np.asarray(revision) + 1, 0)
    frame, _ = output_frame(plan, slots, state.accs, idx, now.astype(np.int64), retracted=False)
    rows = _json_rows(pa.Table.from_pandas(frame, preserve_index=False))
    groups = [(g, _texts(slots.column(g))) for g in plan.group_by]
    what = "session" if plan.kind == "session" else "window"
    reopen = plan.late_data == "reopen"
    out: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    for i in range(n):
        key = ", ".join(f"{g}={values[i]}" for g, values in groups) or "(all rows)"
        if dirty[i]:
            release = "emit" if not emitted[i] else f"re-emit (revision {revision[i] + 1})"
            release += ", kept for late rows" if reopen else ", then evict"
            at = end[i]
        else:
            release, at = f"evict (emitted, revision {revision[i]})", end[i] + plan.allowance_us
        bounds = f"[{iso_utc(start[i])}, {iso_utc(end[i])})"
        for column, value in (("key", key), ("item", f"{what} {bounds}"),
                              ("event_time", int(start[i])), ("matched", None),
                              ("releases_at", int(at)), ("rule", "wm >= releases_at"),
                              ("release", release), ("row", rows[i])):
            out[column].append(value)
    return out


def _public(table: pa.Table, public: dict[str, str]) -> pa.Table:
    """The table's payload columns (those ``public`` names), under the input's names."""
    payload = [c for c in table.column_names if c in public]
    return table.select(payload).rename_columns([public[c] for c in payload])


def _key_texts(table: pa.Table, internal: Any, public: dict[str, str]) -> list[str]:
    columns = [(public[c], _texts(table.column(c))) for c in internal]
    if len(columns) == 1:
        name, values = columns[0]
        return [f"{name}={v}" for v in values]
    return [", ".join(f"{name}={values[i]}" for name, values in columns)
            for i in range(table.num_rows)]


def _texts(column: pa.ChunkedArray) -> list[str]:
    """Each value as text: numbers and strings cast by Arrow, others by Python; NULL "null"."""
    import pyarrow.compute as pc

    t = column.type
    if pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or (
            pa.types.is_boolean(t)):
        return pc.fill_null(pc.cast(column, pa.string()), "null").to_pylist()
    return [_text(v) for v in column.to_pylist()]


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)


def _json_rows(table: pa.Table) -> list[str]:
    """One JSON object per row, in one vectorised pass.

    Timestamps as ISO-8601 text (µs), floats to 15 significant digits (pandas' ``to_json``);
    a table pandas cannot write goes row by row through :func:`json.dumps`.
    """
    if table.num_columns == 0:
        return ["{}"] * table.num_rows
    if table.num_rows == 0:
        return []
    try:
        frame = _with_timestamp_texts(table).to_pandas(integer_object_nulls=True,
                                                       date_as_object=True)
        text = frame.to_json(orient="records", lines=True, date_format="iso", date_unit="us",
                             double_precision=15,
                             default_handler=str)
        rows = text.rstrip("\n").split("\n")
        if len(rows) == table.num_rows:
            return rows
    except (TypeError, ValueError, OverflowError):  # a type pandas cannot write: row by row
        pass
    return [json.dumps(row, default=_json_default, sort_keys=False)
            for row in to_pylist(table)]


def _with_timestamp_texts(table: pa.Table) -> pa.Table:
    """Timestamp columns as ISO-8601 text, by Arrow (pandas writes tz-aware ones 40x slower)."""
    import pyarrow.compute as pc

    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type):
            text = pc.cast(table.column(i).cast(pa.timestamp(f.type.unit)), pa.string())
            text = pc.replace_substring(text, " ", "T", max_replacements=1)
            if f.type.tz is not None:  # stored in UTC
                text = pc.binary_join_element_wise(text, "Z", "")
            table = table.set_column(i, f.name, text)
    return table


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return str(value)


def stream_table_items(plan: Any, blob: bytes) -> dict[str, list[Any]]:
    """A stream-table join's key group: its held stream rows and its table versions.

    * a held stream row (``emit="final"``) is joined against its key's version as of ``t`` in
      the first micro-batch with ``wm > t`` (``releases_at = t``), and emitted;
    * a table version is dropped by history retention (§7) once the next version of its key
      is at or before ``wm - HR`` (``releases_at`` = the next version's time ``+ HR``, rule
      ``wm >= releases_at``); a tombstone once it is itself there. A key's newest version that
      is not a tombstone is kept until a newer one arrives: no ``releases_at``.
    """
    import numpy as np

    from interlace.operators.common.keys import key_codes
    from interlace.state.buffers import TIME_COLUMN
    from interlace.state.tables import (
        SEQ_COLUMN,
        TOMBSTONE_FLAG_COLUMN,
        decode_stream_table_state,
    )

    state = decode_stream_table_state(blob, plan.fp, plan.history_schema, plan.held_schema)
    out: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    held = state.held
    if held.num_rows:
        public = dict(zip(plan.stream_payload.names, plan.stream_names, strict=True))
        times = held.column(TIME_COLUMN).to_pylist()
        release = ("join as of t, emit" if plan.how == "left"
                   else "join as of t, emit if its key is present")
        _extend(out, _key_texts(held, plan.stream_key_internal, public), "stream row", times,
                None, times, "wm > releases_at", [release] * held.num_rows,
                _json_rows(_public(held, public)))
    history = state.history
    n = history.num_rows
    if n:
        public = dict(zip(plan.table_payload.names, plan.table_names, strict=True))
        t = np.asarray(history.column(TIME_COLUMN).to_numpy(), dtype=np.int64)
        seq = np.asarray(history.column(SEQ_COLUMN).to_numpy(), dtype=np.int64)
        tomb = np.asarray(history.column(TOMBSTONE_FLAG_COLUMN).to_numpy(zero_copy_only=False),
                          dtype=bool)
        codes = key_codes([history.column(k) for k in plan.table_key_internal], n,
                          null_is_value=True)
        order = np.lexsort((seq, t, codes))
        following = np.full(n, -1, dtype=np.int64)  # the next version of the same key
        same = codes[order][1:] == codes[order][:-1]
        following[order[:-1][same]] = order[1:][same]
        hr = plan.retention_us
        releases: list[int | None] = []
        what: list[str] = []
        for i in range(n):
            if following[i] >= 0:
                releases.append(int(t[following[i]]) + hr)
                what.append("drop (a newer version reaches wm - HR)")
            elif tomb[i]:
                releases.append(int(t[i]) + hr)
                what.append("drop (the tombstone reaches wm - HR)")
            else:
                releases.append(None)
                what.append("keep (the key's newest version)")
        _extend(out, _key_texts(history, plan.table_key_internal, public),
                ["table tombstone" if x else "table version" for x in tomb.tolist()],
                t.tolist(), None, releases, "wm >= releases_at", what,
                _json_rows(_public(history, public)))
    return out


def _extend(out: dict[str, list[Any]], keys: list[str], item: Any, times: list[int],
            matched: Any, releases: list[Any], rule: str, release: list[str],
            rows: list[str]) -> None:
    """Append ``len(keys)`` items; ``item`` and ``matched`` may be one value for all."""
    n = len(keys)
    out["key"].extend(keys)
    out["item"].extend(item if isinstance(item, list) else [item] * n)
    out["event_time"].extend(times)
    out["matched"].extend(matched if isinstance(matched, list) else [matched] * n)
    out["releases_at"].extend(releases)
    out["rule"].extend([rule] * n)
    out["release"].extend(release)
    out["row"].extend(rows)


def table_join_items(plan: Any, blob: bytes) -> dict[str, list[Any]]:
    """A table-table join's key group: its pending updates and each key's latest versions.

    * a pending update (``emit="final"``) is applied in the first micro-batch with
      ``wm > t`` (``releases_at = t``) and emits an upsert or a delete (§9);
    * each key keeps the latest applied version of each table (a tombstone too): later
      updates are judged late against its time, and the join's value is read from it. It
      is released by no watermark (``releases_at`` None), only replaced by a newer update.
    """
    from interlace.operators.table.plan import NEXT_VERSION, SIDE_DELETED, SIDE_TIME
    from interlace.state.table_join import decode_table_join_state

    state = decode_table_join_state(blob, plan.fp, *plan.state_schemas)
    out: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    _pending_updates(out, plan, state.held)
    keys = state.keys
    if keys.num_rows:
        left = plan.sides[0]
        key_names = {k: left.names[left.payload.names.index(c)]
                     for k, c in zip(plan.key_internal, left.key_internal, strict=True)}
        key_text = _key_texts(keys, plan.key_internal, key_names)
        version = keys.column(NEXT_VERSION).to_pylist()
        for side, name in ((0, "left"), (1, "right")):
            s = plan.sides[side]
            times = keys.column(SIDE_TIME[side]).to_pylist()
            deleted = keys.column(SIDE_DELETED[side]).to_pylist()
            values = keys.select(list(s.value_internal)).rename_columns(
                [s.names[s.payload.names.index(c)] for c in s.value_internal])
            rows = _json_rows(values)
            for i, t in enumerate(times):
                if t is None:
                    continue
                row = rows[i] if not deleted[i] else "{}"
                _extend(out, [key_text[i]], f"{name} {'tombstone' if deleted[i] else 'version'}",
                        [int(t)], None, [None], "none",
                        [f"keep (the key's latest {name} version; next output version "
                         f"{version[i]})"], [row])
    return out


def _pending_updates(out: dict[str, list[Any]], plan: Any, held: pa.Table) -> None:
    """The updates waiting for ``wm > t`` (``emit="final"``), each under its table's names."""
    from interlace.operators.common.prepare import SIDE_COLUMN
    from interlace.state.buffers import TIME_COLUMN

    if not held.num_rows:
        return
    sides = held.column(SIDE_COLUMN).to_pylist()
    times = held.column(TIME_COLUMN).to_pylist()
    for side, name in ((0, "left"), (1, "right")):
        idx = [i for i, x in enumerate(sides) if x == side]
        if not idx:
            continue
        s = plan.sides[side]
        rows = held.take(pa.array(idx, pa.int64()))
        public = dict(zip(s.payload.names, s.names, strict=True))
        _extend(out, _key_texts(rows, s.key_internal, public), f"{name} update",
                [int(times[i]) for i in idx], None, [int(times[i]) for i in idx],
                "wm > releases_at", ["apply, emit upsert or delete"] * len(idx),
                _json_rows(_public(rows, public)))


def foreign_key_items(plan: Any, blob: bytes) -> dict[str, list[Any]]:
    """A foreign-key join's key group: pending updates, left versions, the right table.

    The right table is replicated: every key group holds all of it (each right update
    reaches every key group), so a right version or a pending right update appears once per
    key group. Pending updates (``emit="final"``) are applied at ``wm > t``; versions are
    kept (released by no watermark), as in the table-table join (§9).
    """
    from interlace.operators.common.prepare import HOME_COLUMN
    from interlace.operators.foreign_key.plan import (
        LEFT_DELETED,
        LEFT_TIME,
        NEXT_VERSION,
        RIGHT_DELETED,
        RIGHT_TIME,
    )
    from interlace.state.foreign_key import decode_foreign_key_state

    state = decode_foreign_key_state(blob, plan.fp, *plan.state_schemas)
    out: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    held = state.held
    if held.num_rows and HOME_COLUMN in held.column_names:
        held = held.drop_columns([HOME_COLUMN])
    _pending_updates(out, plan, held)
    left_side, right_side = plan.sides
    left_fk = [left_side.names[left_side.payload.names.index(c)] for c in plan.fk_internal]
    right_key = [right_side.names[right_side.payload.names.index(c)]
                 for c in right_side.key_internal]
    for table, side, key_cols, key_names, time_col, deleted_col, extra in (
        (state.left, left_side, plan.key_internal,
         [left_side.names[left_side.payload.names.index(c)] for c in left_side.key_internal],
         LEFT_TIME, LEFT_DELETED, NEXT_VERSION),
        (state.right, right_side, plan.fk_state, right_key, RIGHT_TIME, RIGHT_DELETED, None),
    ):
        if not table.num_rows:
            continue
        name = "left" if side is left_side else "right"
        public = dict(zip(key_cols, key_names, strict=True))
        values = table.select(list(side.value_internal)).rename_columns(
            [side.names[side.payload.names.index(c)] for c in side.value_internal])
        if side is left_side:  # the left version's foreign key, under the left's names
            for c, n in zip(plan.fk_state, left_fk, strict=True):
                if n not in values.column_names:
                    values = values.append_column(n, table.column(c))
        rows = _json_rows(values)
        deleted = table.column(deleted_col).to_pylist()
        versions = table.column(extra).to_pylist() if extra else [None] * table.num_rows
        release = [f"keep (the key's latest {name} version"
                   + (f"; next output version {v})" if v is not None else ")") for v in versions]
        _extend(out, _key_texts(table, key_cols, public),
                [f"{name} {'tombstone' if d else 'version'}" for d in deleted],
                [int(t) for t in table.column(time_col).to_pylist()], None,
                [None] * table.num_rows, "none", release,
                [r if not d else "{}" for r, d in zip(rows, deleted, strict=True)])
    return out


def aggregate_key_items(plan: Any, blob: bytes) -> dict[str, list[Any]]:
    """A table aggregation's first query (by key): its pending updates and each key's row.

    * a pending update (``emit="final"``) is applied in the first micro-batch with
      ``wm > t`` (``releases_at = t``): it takes its key's current row out of its group and
      puts the new one in, and each group it touches emits a new row (§10);
    * each key keeps its current row (a deleted key its deletion): later updates are judged
      late against its time, and a change takes the row out of its group again. It is
      released by no watermark (``releases_at`` None), only replaced by a newer update.
    """
    from interlace.operators.table_aggregate.plan import TOMB_COLUMN
    from interlace.state.buffers import TIME_COLUMN
    from interlace.state.table_aggregate import KeyRowsState
    from interlace.state.tables import TOMBSTONE_FLAG_COLUMN

    state = KeyRowsState.decode(blob, plan.fp, *plan.state_schemas)
    out: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    held = state.held
    if held.num_rows:
        public = {plan.column(i): n for i, n in enumerate(plan.names)}
        times = [int(t) for t in held.column(TIME_COLUMN).to_pylist()]
        _extend(out, _key_texts(held, [plan.column(i) for i in plan.key_index], public),
                ["delete" if d else "update" for d in held.column(TOMB_COLUMN).to_pylist()],
                times, None, times, "wm > releases_at",
                ["apply, emit its groups' new rows"] * held.num_rows,
                _json_rows(_public(held, public)))
    keys = state.keys
    if keys.num_rows:
        key_fields, group_fields = plan.key_fields, plan.group_fields
        public = {f.name: plan.names[i] for f, i in zip(key_fields, plan.key_index, strict=True)}
        carried = [*zip(group_fields, plan.group_index, strict=True),
                   *zip(plan.value_fields, plan.value_index, strict=True)]
        names: dict[str, str] = {}  # a column both grouped by and aggregated: shown once
        for f, i in carried:
            names.setdefault(plan.names[i], f.name)
        values = keys.select(list(names.values())).rename_columns(list(names))
        deleted = keys.column(TOMBSTONE_FLAG_COLUMN).to_pylist()
        rows = _json_rows(values)
        _extend(out, _key_texts(keys, [f.name for f in key_fields], public),
                ["deleted key" if d else "key row" for d in deleted],
                [int(t) for t in keys.column(TIME_COLUMN).to_pylist()], None,
                [None] * keys.num_rows, "none",
                [f"keep (the key's {'deletion' if d else 'current row'}; later updates are "
                 "judged against its time)" for d in deleted],
                [r if not d else "{}" for r, d in zip(rows, deleted, strict=True)])
    return out


def aggregate_group_items(plan: Any, blob: bytes) -> dict[str, list[Any]]:
    """A table aggregation's second query (by group): each group's aggregates.

    One item per group that holds rows or emitted a row once (its ``version`` goes on, §10):
    ``row`` is the row it last emitted (``op``, the aggregates, ``version``; the rows present
    as ``rows``). A group holds no event time (``event_time`` None) and is released by no
    watermark: it changes when an update of one of its rows arrives from the first query.
    """
    from interlace.operators.table_aggregate.step import group_rows
    from interlace.state.table_aggregate import GroupsState

    state = GroupsState.decode(blob, plan.fp, *plan.group_state_schemas)
    out: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    found = group_rows(plan, state)
    if not found:
        return out
    schema = plan.output_schema
    group_names = [plan.names[i] for i in plan.group_index]
    columns: dict[str, list[Any]] = {n: [g[j] for g, *_ in found]
                                     for j, n in enumerate(group_names)}
    for j, a in enumerate(plan.spec.aggregations):
        columns[a.as_] = [aggs[j] for *_, aggs in found]
    columns["op"] = ["upsert" if n else "delete" for _, _, n, _ in found]
    columns["version"] = [v - 1 for _, v, _, _ in found]
    columns["rows"] = [n for _, _, n, _ in found]
    types = {f.name: f.type for f in schema}
    types["rows"] = pa.int64()
    table = pa.table({c: pa.array(v, types[c]) for c, v in columns.items()})
    key_text = _key_texts(table, group_names, {n: n for n in group_names}) if group_names else (
        ["(all rows)"] * len(found))
    _extend(out, key_text, ["group" if n else "empty group" for _, _, n, _ in found],
            [None] * len(found), None, [None] * len(found), "none",
            [f"keep (next output version {v}; {n} row{'' if n == 1 else 's'})"
             for _, v, n, _ in found],
            _json_rows(table))
    return out
