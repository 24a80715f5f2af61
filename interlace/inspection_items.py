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

__all__ = ["join_items", "release_of_join_row", "window_items"]

#: Sides whose rows that never matched are emitted at eviction (SEMANTICS §2).
_PRESERVED = {"left": ("left", "full", "left_anti"), "right": ("right", "full")}


def release_of_join_row(how: str, side: str, matched: bool) -> str:
    """What happens to a buffered join row in the first call with ``wm > releases_at``."""
    if not matched and how in _PRESERVED[side]:
        return "emit unmatched" if how != "left_anti" else "emit (never matched)"
    return "evict (matched)" if matched else "evict (no output)"


def join_items(plan: Any, blob: bytes) -> list[dict[str, Any]]:
    """The buffered rows of a stream-stream join's key group, left side first.

    ``releases_at`` is the row's close time (left ``t + upper + AL``, right ``t - lower + AL``):
    the row leaves the buffer in the first micro-batch whose ``wm`` is greater.

    Raises:
        StateDecodeError, StateVersionError: The blob is not a join blob of this plan's spec.
    """
    from interlace.state.buffers import MATCHED_COLUMN, TIME_COLUMN, decode_join_state

    buffers = decode_join_state(blob, plan.fp, plan.left_buffer_schema, plan.right_buffer_schema)
    items: list[dict[str, Any]] = []
    sides = (
        ("left", buffers.left, plan.left_names, plan.left_key_internal,
         plan.upper_us + plan.allowance_us),
        ("right", buffers.right, plan.right_names, plan.right_key_internal,
         -plan.lower_us + plan.allowance_us),
    )
    for side, table, names, key_internal, bound in sides:
        if table.num_rows == 0:
            continue
        payload = [c for c in table.column_names if c not in (TIME_COLUMN, MATCHED_COLUMN)]
        # Internal column __il_l3 / __il_r3 -> the input's fourth column name.
        public = {c: names[int(c[len("__il_l"):])] for c in payload}
        times = table.column(TIME_COLUMN).to_pylist()
        matched = table.column(MATCHED_COLUMN).to_pylist()
        keys = _key_texts(table, key_internal, public)
        rows = _json_rows(table.select(payload).rename_columns([public[c] for c in payload]))
        for t, m, k, r in zip(times, matched, keys, rows, strict=True):
            items.append({"key": k, "item": f"{side} row", "event_time": int(t),
                          "matched": bool(m), "releases_at": int(t) + bound,
                          "rule": "wm > releases_at",
                          "release": release_of_join_row(plan.how, side, bool(m)), "row": r})
    return items


def window_items(plan: Any, blob: bytes) -> list[dict[str, Any]]:
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
        return []
    start = slots.column("start").to_pylist()
    end = slots.column("end").to_pylist()
    emitted = slots.column("emitted").to_pylist()
    revision = slots.column("revision").to_pylist()
    dirty = slots.column("dirty").to_pylist()
    idx = np.arange(n, dtype=np.int64)
    now = np.where(np.asarray(emitted, dtype=bool), np.asarray(revision) + 1, 0)
    frame, _ = output_frame(plan, slots, state.accs, idx, now.astype(np.int64), retracted=False)
    rows = [json.dumps(r, default=_json_default)
            for r in to_pylist(pa.Table.from_pandas(frame, preserve_index=False))]
    groups = [(g, slots.column(g).to_pylist()) for g in plan.group_by]
    what = "session" if plan.kind == "session" else "window"
    reopen = plan.late_data == "reopen"
    items = []
    for i in range(n):
        key = ", ".join(f"{g}={_text(values[i])}" for g, values in groups) or "(all rows)"
        if dirty[i]:
            release = "emit" if not emitted[i] else f"re-emit (revision {revision[i] + 1})"
            release += ", kept for late rows" if reopen else ", then evict"
            at = end[i]
        else:
            release, at = f"evict (emitted, revision {revision[i]})", end[i] + plan.allowance_us
        items.append({"key": key, "item": f"{what} [{_iso(start[i])}, {_iso(end[i])})",
                      "event_time": int(start[i]), "matched": None, "releases_at": int(at),
                      "rule": "wm >= releases_at", "release": release, "row": rows[i]})
    return items


def _iso(micros: int) -> str:
    import datetime as dt

    moment = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(micros))
    return moment.isoformat(timespec="milliseconds") + "Z"


def _key_texts(table: pa.Table, internal: Any, public: dict[str, str]) -> list[str]:
    columns = [(public[c], table.column(c).to_pylist()) for c in internal]
    return [", ".join(f"{name}={_text(values[i])}" for name, values in columns)
            for i in range(table.num_rows)]


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)


def _json_rows(table: pa.Table) -> list[str]:
    """One JSON object per row (timestamps as ISO-8601 text; bytes as hex)."""
    if table.num_columns == 0:
        return ["{}"] * table.num_rows
    return [json.dumps(row, default=_json_default, sort_keys=False)
            for row in to_pylist(table)]


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return str(value)
