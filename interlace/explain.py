"""``interlace explain``: replay a small event log through a join and print a seed-003 table.

The log is JSON: ``{"events": [{"side": "left", "ts": 3, "key": "k1", "value": "A"}, ...]}``
(``ts`` in seconds, or an ISO-8601 timestamp; any other fields become columns). Each event is
its own micro-batch, in ``ts`` order, then Spark's trailing no-data batch; the table shows,
per event, the rows each ``how`` emits in that micro-batch — computed by the real operator
function (:func:`interlace.testing.local.run_join_locally`), not by a model.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["explain_join", "load_events"]

BASE = _dt.datetime(2026, 1, 1)


def load_events(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate an explain log; returns events sorted by time (stable)."""
    data = json.loads(Path(path).read_text())
    events = data["events"] if isinstance(data, dict) else data
    out = []
    for i, e in enumerate(events):
        if e.get("side") not in ("left", "right"):
            msg = f"event {i}: `side` must be 'left' or 'right' (got {e.get('side')!r})"
            raise ValueError(msg)
        ts = e.get("ts")
        if isinstance(ts, int | float):
            when = BASE + _dt.timedelta(seconds=ts)
        elif isinstance(ts, str):
            when = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
            if when.tzinfo is not None:
                when = when.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        else:
            msg = f"event {i}: `ts` must be seconds or an ISO timestamp (got {ts!r})"
            raise ValueError(msg)
        out.append({**e, "ts": when, "_label": ts})
    return sorted(out, key=lambda e: e["ts"])


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
    """
    import pyarrow as pa

    from interlace.operators.join import Join
    from interlace.testing.local import run_join_locally
    from interlace.testing.log import JoinBatch

    cols = sorted(
        {k for e in events for k in e if k not in ("side", "ts", "_label")} | {key, value}
    )
    types = {}
    for c in cols:
        vals = [e.get(c) for e in events if e.get(c) is not None]
        types[c] = pa.int64() if vals and all(isinstance(v, int) for v in vals) else pa.string()
    schema = pa.schema([pa.field(c, types[c]) for c in cols] + [pa.field("ts", pa.timestamp("ns"))])

    def row(e: dict[str, Any]) -> dict[str, Any]:
        r = {c: e.get(c) for c in cols}
        r.update(
            {c: (str(v) if types[c] == pa.string() and v is not None else v) for c, v in r.items()}
        )
        r["ts"] = e["ts"]
        return r

    log = [
        JoinBatch(left=(row(e),)) if e["side"] == "left" else JoinBatch(right=(row(e),))
        for e in events
    ]
    per_how: dict[str, dict[int, list[str]]] = {}
    n_batches = len(log)
    for how in hows:
        spec = Join(
            left_keys=[key],
            right_keys=[key],
            how=how,
            event_time_column="ts",
            key_groups=1,
            **join_kwargs,
        )
        run = run_join_locally(spec, log, schema, schema)
        n_batches = max(n_batches, len(run.watermarks_ms))
        cells: dict[int, list[str]] = {}
        for b, r in run.rows:
            if how in ("left_semi", "left_anti"):
                text = str(r.get(value))
            else:
                lv, rv = r.get(f"left_{value}"), r.get(f"right_{value}")
                text = f"{'null' if lv is None else lv} - {'null' if rv is None else rv}"
            if r.get("_dead_letter"):
                text = "dead letter: " + json.loads(r["_dead_letter"])["side"]
            cells.setdefault(b, []).append(text)
        per_how[how] = cells
    header = ["ts", "left", "right", *hows]
    rows = []
    for b in range(n_batches):
        if b < len(events):
            e = events[b]
            base = [
                str(e["_label"]),
                str(e.get(value)) if e["side"] == "left" else "",
                str(e.get(value)) if e["side"] == "right" else "",
            ]
        else:
            base = ["(no-data batch)", "", ""]
        rows.append(base + ["  ".join(sorted(per_how[h].get(b, []))) for h in hows])
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]
    lines = [" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)
