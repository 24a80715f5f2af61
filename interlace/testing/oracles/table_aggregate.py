"""Reference model (oracle) of the table aggregation (SEMANTICS §7, §10), as Spark runs it.

A changelog table re-grouped by other columns and aggregated. The oracle replays a log of
micro-batches (the table's updates) through the same Spark layer as the table joins
(:func:`~interlace.testing.oracles.changelog.replay_spark`: Spark's watermark, its
pre-filter, the trailing no-data batch) and then, naively: a dict of each key's current
row, the due updates applied one at a time in event-time order (a key's in arrival order,
different keys' at one event time in key order), and after each one the aggregates of the
groups it touched **recomputed from scratch** over every row present in the table. It
shares nothing with ``interlace.operators`` / ``interlace.state`` (no removal, no
accumulators), so it can judge them.

Aggregates, as SEMANTICS §3 / §10 define them: ``count`` (rows), ``count(col)``
(non-NULL values), ``sum`` (integers: exact, an ``OverflowError`` outside int64, as
Spark's ANSI ``sum``; floats: the exact sum rounded once, NaN if any NaN or both
infinities, else the infinity; decimals: exact), ``avg`` (the exact mean rounded once;
decimals: ``scale + 4`` digits, half up), ``min`` / ``max`` (NaN above every number),
exact ``count_distinct``. NULLs skipped; an all-NULL group gives NULL.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Context, Decimal, localcontext
from fractions import Fraction
from typing import Any

from interlace.testing.log import JoinBatch
from interlace.testing.oracles.changelog import Arrival, TableOracleResult, replay_spark, split_due

__all__ = ["HeldGroup", "HeldKeyItem", "TableAggregateResult", "aggregate_rows",
           "oracle_table_aggregate"]


@dataclass(frozen=True)
class HeldKeyItem:
    """What the first query (by key) holds after a micro-batch: a pending update or a key's row.

    Attributes:
        kind: ``"update"`` / ``"delete"`` (waiting for ``wm > t`` under ``emit="final"``), or
            ``"key row"`` / ``"deleted key"`` (the key's latest applied update).
        key: The key's values.
        event_time_us: The update's event time.
        releases_at_us: A pending update: its event time; a key's row: None (kept).
        row: The update's input row.
    """

    kind: str
    key: tuple[Any, ...]
    event_time_us: int
    releases_at_us: int | None
    row: Mapping[str, Any]


@dataclass(frozen=True)
class HeldGroup:
    """What the second query (by group) holds after a micro-batch: one group's last row.

    Attributes:
        group: The group's values.
        row: The last row it emitted, without ``event_time`` (``op``, aggregates, ``version``).
        rows: How many of the table's rows are in the group now.
    """

    group: tuple[Any, ...]
    row: Mapping[str, Any]
    rows: int


@dataclass
class TableAggregateResult:
    """What the oracle produced.

    Attributes:
        rows: ``(batch, row)`` per output row, in emission order (dead letters as rows with
            ``_dead_letter``).
        late: Updates judged late (dropped or dead-lettered).
        spark_dropped: Updates Spark's pre-filter removed.
        null_keys: Updates ignored for a NULL key.
        held_keys: Per micro-batch, what the first query holds after it.
        held_groups: Per micro-batch, what the second query holds after reading its deltas:
            every group that ever emitted a row.
    """

    rows: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    late: int = 0
    spark_dropped: int = 0
    null_keys: int = 0
    held_keys: list[list[HeldKeyItem]] = field(default_factory=list)
    held_groups: list[list[HeldGroup]] = field(default_factory=list)

    def final(self, group_by: Sequence[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
        """Each group's row with the highest version (a target that upserts by group)."""
        out: dict[tuple[Any, ...], dict[str, Any]] = {}
        for _, row in self.rows:
            if row.get("_dead_letter") is not None:
                continue
            key = tuple(_canon(row[g]) for g in group_by)
            if key not in out or row["version"] > out[key]["version"]:
                out[key] = row
        return {k: r for k, r in out.items() if r["op"] == "upsert"}


_NAN = float("nan")


def _canon(v: Any) -> Any:
    return _NAN if isinstance(v, float) and v != v else v


def _float_sum(values: list[float]) -> float:
    if any(v != v for v in values) or (math.inf in values and -math.inf in values):
        return math.nan
    if math.inf in values:
        return math.inf
    if -math.inf in values:
        return -math.inf
    exact = sum((Fraction(v) for v in values), Fraction(0))
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def _one(agg: str, values: list[Any], rows: int, cap: int | None) -> Any:
    if agg == "count":
        return rows
    present = [v for v in values if v is not None]
    if agg == "count_col":
        return len(present)
    if agg == "count_distinct":
        n = len({_canon(v) for v in present})
        if cap is not None and n > cap:
            msg = f"count_distinct cap {cap} passed ({n} distinct values)"
            raise OverflowError(msg)
        return n
    if not present:
        return None
    if agg in ("min", "max"):
        nan = [v for v in present if isinstance(v, float) and v != v]
        rest = [v for v in present if not (isinstance(v, float) and v != v)]
        if agg == "max":
            return _NAN if nan else max(rest)
        return min(rest) if rest else _NAN
    if isinstance(present[0], Decimal):
        with localcontext(Context(prec=200)):  # exact, as Spark's decimal sum
            total = sum(present, Decimal(0))
        if agg == "sum":
            return total
        scale = -min(v.as_tuple().exponent for v in present)
        exact = Fraction(total) / len(present)
        units = exact * 10 ** (scale + 4)
        rounded = math.floor(units + Fraction(1, 2)) if units >= 0 else -math.floor(
            -units + Fraction(1, 2))
        return Decimal(rounded).scaleb(-(scale + 4), context=Context(prec=200))
    if isinstance(present[0], float):
        total = _float_sum(present)
        if agg == "sum" or any(v != v or math.isinf(v) for v in present):
            return total  # an average over NaN or an infinity is that, as the sum is
        return float(sum((Fraction(v) for v in present), Fraction(0)) / len(present))
    total = sum(int(v) for v in present)
    if agg == "sum":
        if not -(2**63) <= total <= 2**63 - 1:
            msg = f"integer sum {total} left the 64-bit range"
            raise OverflowError(msg)
        return total
    return float(Fraction(total, len(present)))


def aggregate_rows(aggregations: Sequence[Any], rows: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The aggregates of ``rows`` (one group's present rows), in ``aggregations`` order."""
    out = []
    for a in aggregations:
        agg = "count_col" if a.agg == "count" and a.column is not None else a.agg
        values = [r[a.column] for r in rows] if a.column is not None else []
        out.append(_one(agg, values, len(rows), a.max_distinct_values_per_group))
    return out


def oracle_table_aggregate(
    spec: Any, log: Sequence[Sequence[Mapping[str, Any]]], *, columns: Sequence[str],
    clocks_us: Sequence[int | None] | None = None,
) -> TableAggregateResult:
    """Replay ``log`` (micro-batches of the table's updates) through the aggregation.

    Args:
        spec: A ``TableAggregate`` (read by attribute: ``keys``, ``group_by``,
            ``aggregations``, ``event_time_column``, ``lateness_ms``, ``emit``,
            ``tombstone_column``, ``value_columns``, ``late_data``, ``dlq_horizon_ms``).
        log: The micro-batches, each a sequence of row dicts (naive UTC datetimes).
        columns: The input table's columns, in order (the default value columns).
        clocks_us: A chain stage's input (SEMANTICS §11): per micro-batch, the clock its
            channel file carries (:func:`interlace.testing.chain.channel_files`); Spark's
            watermark then follows the clocks.
    """
    keys, group_by = list(spec.keys), list(spec.group_by)
    et = spec.event_time_column
    tomb = spec.tombstone_column
    values = list(spec.value_columns) if spec.value_columns is not None else [
        c for c in columns if c not in {*keys, et, tomb}]
    dlq = spec.late_data == "dlq"
    horizon = spec.dlq_horizon_ms if dlq else 0
    out = TableAggregateResult()
    table: dict[tuple[Any, ...], tuple[int, Mapping[str, Any] | None]] = {}
    versions: dict[tuple[Any, ...], int] = {}
    last: dict[tuple[Any, ...], dict[str, Any]] = {}  # each group's last emitted row
    pending: list[tuple[tuple[Any, ...], Arrival]] = []
    result = TableOracleResult()

    def group_of(row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(_canon(row[g]) for g in group_by)

    def members(group: tuple[Any, ...]) -> list[Mapping[str, Any]]:
        return [r for _, r in table.values() if r is not None and group_of(r) == group]

    def is_tombstone(row: Mapping[str, Any]) -> bool:
        if tomb is not None:
            return row[tomb] is True
        return all(row[c] is None for c in values)

    def call(batch: int, arrivals: dict[str, list[Arrival]], wm_us: int | None) -> None:
        for a in arrivals["left"]:
            key = tuple(_canon(a.row[k]) for k in keys)
            if any(k is None for k in key):
                out.null_keys += 1
                continue
            pending.append((key, a))
        due, held = split_due(pending, spec.emit, wm_us, lambda p: p[1].event_time_us)
        pending[:] = held
        for key, a in sorted(due, key=lambda p: (p[1].event_time_us, p[0], p[1].seq)):
            stored = table.get(key)
            if stored is not None and a.event_time_us < stored[0]:
                out.late += 1
                if dlq:
                    out.rows.append((batch, {"_dead_letter": {
                        "reason": "late", "row": dict(a.row)}}))
                continue
            old = stored[1] if stored is not None else None
            new = None if is_tombstone(a.row) else a.row
            touched = [group_of(old)] if old is not None else []
            if new is not None and group_of(new) not in touched:
                touched.append(group_of(new))
            before = {g: bool(members(g)) for g in touched}
            table[key] = (a.event_time_us, new)
            for g in touched:
                now = members(g)
                if now:
                    aggs, op = aggregate_rows(spec.aggregations, now), "upsert"
                elif before[g]:
                    aggs, op = [None] * len(spec.aggregations), "delete"
                else:
                    continue
                version = versions.get(g, 0)
                versions[g] = version + 1
                row = dict(zip(group_by, g, strict=True))
                row.update({x.as_: v for x, v in zip(spec.aggregations, aggs, strict=True)})
                row.update({"op": op, "event_time": a.row[et], "version": version})
                out.rows.append((batch, row))
                last[g] = row
        snapshot()

    def snapshot() -> None:
        keys_held = [HeldKeyItem("delete" if is_tombstone(a.row) else "update", key,
                                 a.event_time_us, a.event_time_us, dict(a.row))
                     for key, a in pending]
        for key, (t, row) in table.items():
            keys_held.append(HeldKeyItem("key row" if row is not None else "deleted key", key,
                                         t, None, dict(row or {})))
        out.held_keys.append(keys_held)
        out.held_groups.append([
            HeldGroup(g, {k: v for k, v in row.items() if k != "event_time"}, len(members(g)))
            for g, row in last.items()])

    clocks = list(clocks_us) if clocks_us is not None else [None] * len(log)
    log_batches = [JoinBatch(left=tuple(b), right=(), left_clock_us=c)
                   for b, c in zip(log, clocks, strict=True)]
    replay_spark(log_batches, event_time_column={"left": et, "right": et},
                 delay_ms=spec.lateness_ms + horizon, horizon_ms=horizon,
                 watermark_policy="max", result=result, call=call)
    out.spark_dropped = result.spark_dropped["left"]
    return out
