"""What every ``interlace explain`` table shares: the events' schema, its cells and its layout.

:mod:`interlace.explain` (the joins and windows) and :mod:`interlace.explain_aggregate` (the
table aggregation) both build on these; neither imports the other's internals.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["BASE", "EPOCH", "by_batch", "cell_writer", "naive", "parse_aggregation", "render",
           "schema_of", "split_list", "ts_cell"]

#: ``ts`` given as a number is seconds after this instant (UTC).
BASE = _dt.datetime(2026, 1, 1)
EPOCH = _dt.datetime(1970, 1, 1)
#: An event's fields that are not columns of its row.
META = ("side", "ts", "_label", "_index")


def schema_of(events: Sequence[dict], needed: Sequence[str]) -> tuple[Any, Callable[[dict], dict]]:
    """Return the Arrow schema of the events' fields (and ``needed``) and a row builder."""
    import pyarrow as pa

    cols = sorted({k for e in events for k in e if k not in META} | set(needed) - {"ts"})
    types = {}
    for c in cols:
        vals = [e.get(c) for e in events if e.get(c) is not None]
        nums = [v for v in vals if isinstance(v, int | float) and not isinstance(v, bool)]
        if vals and len(nums) == len(vals):
            types[c] = pa.int64() if all(isinstance(v, int) for v in nums) else pa.float64()
        else:
            types[c] = pa.string()
    schema = pa.schema([pa.field(c, types[c]) for c in cols] + [pa.field("ts", pa.timestamp("ns"))])

    def row(e: dict[str, Any]) -> dict[str, Any]:
        r = {c: e.get(c) for c in cols}
        r = {c: str(v) if types[c] == pa.string() and v is not None else v for c, v in r.items()}
        r["ts"] = e["ts"]
        return r

    return schema, row


def cell_writer(events: Sequence[dict[str, Any]]) -> Callable[[Any], str]:
    """Return how a table cell shows a value.

    Times as seconds after ``BASE`` when every event's ``ts`` is a number (else ISO),
    ``null``, lower-case booleans, floats to 6 places.
    """
    numeric = all(isinstance(e["_label"], int | float) for e in events)

    def cell(v: Any) -> str:
        if isinstance(v, _dt.datetime):
            s = (naive(v) - BASE).total_seconds()
            return (str(int(s)) if s.is_integer() else str(s)) if numeric else naive(v).isoformat()
        if isinstance(v, bool) or v is None:
            return "null" if v is None else str(v).lower()
        return str(round(v, 6)) if isinstance(v, float) else str(v)

    return cell


def render(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Lay out a table: header, a rule, then the rows, columns padded to their widths."""
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]
    lines = [" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def ts_cell(events: Sequence[dict[str, Any]], b: int) -> str:
    """The first cell of batch ``b``: the event's ``ts`` as written, or the no-data batch."""
    return str(events[b]["_label"]) if b < len(events) else "(no-data batch)"


def naive(v: _dt.datetime | None) -> _dt.datetime:
    """``v`` as a naive UTC datetime (``BASE`` for None, a dead letter's bounds)."""
    if v is None:
        return BASE
    return v.astimezone(_dt.timezone.utc).replace(tzinfo=None) if v.tzinfo else v


def by_batch(rows: Sequence[tuple[int, dict[str, Any]]]) -> dict[int, list[dict[str, Any]]]:
    """Group ``(batch, row)`` pairs by micro-batch, in order."""
    out: dict[int, list[dict[str, Any]]] = {}
    for b, r in rows:
        out.setdefault(b, []).append(r)
    return out


def parse_aggregation(text: str) -> Any:
    """Parse ``AGG[:COLUMN][=ALIAS]`` (``count``, ``sum:value``, ``avg:value=mean``).

    Args:
        text: The aggregation; the alias defaults to ``AGG`` or ``AGG_COLUMN``.

    Returns:
        An :class:`~interlace.Aggregation`.
    """
    from interlace.operators.window import Aggregation

    spec, _, alias = text.partition("=")
    agg, _, column = (s.strip() for s in spec.partition(":"))
    alias = alias.strip() or (f"{agg}_{column}" if column else agg)
    return Aggregation(agg=agg, column=column or None, as_=alias)  # type: ignore[arg-type]


def split_list(text: str) -> list[str]:
    """A comma-separated CLI option as its stripped, non-empty parts."""
    return [part.strip() for part in text.split(",") if part.strip()]
