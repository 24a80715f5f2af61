"""Reference model (oracle) of the stream-table join as of event time, as Spark runs it.

A stream (``left``) joined with a table (``right``, a changelog, ``SEMANTICS.md`` §7): each
stream row at ``t`` takes the table version of its key as of ``t`` (§8). The oracle
replays a :data:`~interlace.testing.log.JoinLog` one micro-batch and one row at a time. It
is deliberately naive: per key, the table's whole version history as a list; a list of
held stream rows; a linear scan for the version as of ``t``. It imports nothing from
``interlace.operators`` or ``interlace.state`` (nor pyspark), so it can judge them.

History retention (§7: keep, per key, every version newer than ``wm - HR`` plus the newest
one at or before it) is modelled beside the full history, and every lookup checks that
the retained versions give the same answer as the full history: the contract's claim
that retention never changes a result, checked on every row the oracle joins.

Readings of ``SEMANTICS.md`` that had to be chosen are in
``docs/table-joins-semantics-notes.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interlace.testing.log import JoinLog
from interlace.testing.oracles.changelog import (
    Arrival,
    Changelog,
    KeyTuple,
    TableOracleResult,
    TableSpec,
    check_output_columns,
    dead_letter_row,
    dlq_extra_horizon_ms,
    key_tuple,
    read_changelog,
    split_due,
)
from interlace.testing.oracles.resolve import prefixes
from interlace.testing.oracles.rows import DEAD_LETTER_COLUMN, OracleRow

__all__ = ["RIGHT_VALID_FROM", "STREAM_TABLE_HOWS", "HeldTableItem", "oracle_stream_table_join"]

STREAM_TABLE_HOWS = ("inner", "left")
"""Every ``how`` of the stream-table join."""

RIGHT_VALID_FROM = "right_valid_from"
"""The output column holding the joined version's event time (NULL when absent), §8."""


@dataclass(frozen=True)
class HeldTableItem:
    """A held stream row or a retained table version after a micro-batch (§7, §8).

    Attributes:
        kind: ``"stream row"``, ``"table version"`` or ``"table tombstone"``.
        key: The key's values.
        event_time_us: The row's or version's event time.
        releases_at_us: A stream row: its event time (joined once ``wm >`` it). A version:
            the next version of its key plus ``HR`` (dropped once ``wm`` reaches it), a
            tombstone with none after it: its own time plus ``HR``; a key's newest present
            version: None (kept until a newer one).
        row: The stream row, or the version's values (None for a tombstone).
    """

    kind: str
    key: tuple[Any, ...] | None
    event_time_us: int
    releases_at_us: int | None
    row: Mapping[str, Any] | None


@dataclass(frozen=True)
class _Version:
    """One table update in a key's history (§7)."""

    event_time_us: int
    seq: int  # arrival order: among equal event times the later arrival wins
    values: dict[str, Any] | None  # None: a tombstone
    valid_from: Any  # the update's event-time value, for `right_valid_from`


def _as_of(history: Sequence[_Version], event_time_us: int) -> _Version | None:
    """Return the version as of ``t``: greatest event time ``<= t``, ties: later arrival (§7)."""
    best: _Version | None = None
    for version in history:
        if version.event_time_us <= event_time_us and (
            best is None or (version.event_time_us, version.seq) > (best.event_time_us, best.seq)
        ):
            best = version
    return best


def _retain(history: Sequence[_Version], boundary_us: int) -> list[_Version]:
    """§7 history retention: the versions newer than ``wm - HR``, plus the newest at or before."""
    newer = [v for v in history if v.event_time_us > boundary_us]
    older = [v for v in history if v.event_time_us <= boundary_us]
    newest_older = _as_of(older, boundary_us)
    return ([newest_older] if newest_older is not None else []) + newer


@dataclass(frozen=True)
class _Resolved:
    """The spec's fields with defaults filled in (µs where timed)."""

    how: str
    emit: str
    late_data: str
    stream_keys: tuple[str, ...]
    stream_columns: tuple[str, ...]
    stream_output_columns: tuple[str, ...]
    table: Changelog
    prefix: dict[str, str]
    retention_us: int  # HR
    output_columns: tuple[str, ...]


class _StreamTableModel:
    """The operator's state and emission rules, row at a time."""

    def __init__(self, cfg: _Resolved, result: TableOracleResult) -> None:
        self.cfg = cfg
        self.result = result
        self.history: dict[KeyTuple, list[_Version]] = {}  # every version ever received
        self.retained: dict[KeyTuple, list[_Version]] = {}  # what §7 retention keeps
        self.held: list[Arrival] = []  # stream rows waiting for wm > t (emit="final")

    # ---- output ----

    def _emit(self, batch: int, stream_row: Mapping[str, Any], partner: _Version | None) -> None:
        """§8 output: prefixed stream columns, prefixed table values, ``right_valid_from``.

        ``partner`` is the present version joined, or None (``left``: NULL table columns).
        """
        cfg = self.cfg
        values = None if partner is None else partner.values
        row: dict[str, Any] = {
            cfg.prefix["left"] + name: stream_row[name] for name in cfg.stream_output_columns
        }
        for name in cfg.table.value_columns:
            row[cfg.prefix["right"] + name] = None if values is None else values[name]
        row[RIGHT_VALID_FROM] = None if partner is None else partner.valid_from
        if cfg.late_data == "dlq":
            row[DEAD_LETTER_COLUMN] = None
        self.result.rows.append(OracleRow(batch=batch, row=row))

    def _late(self, batch: int, side: str, row: Mapping[str, Any], wm_us: int | None) -> None:
        """§8 late rows: ``drop`` counts, ``dlq`` emits a dead letter (§4)."""
        if self.cfg.late_data == "dlq":
            columns = self.cfg.stream_columns if side == "left" else self.cfg.table.columns
            input_row = {name: row[name] for name in columns}
            values = dead_letter_row(self.cfg.output_columns, side, wm_us, input_row)
            self.result.rows.append(OracleRow(batch=batch, row=values))
            self.result.dead_lettered[side] += 1
        else:
            self.result.late_dropped[side] += 1

    def _is_late(self, event_time_us: int, wm_us: int | None) -> bool:
        """§8: late iff ``t < wm - HR`` on arrival; without a watermark nothing is late."""
        return wm_us is not None and event_time_us < wm_us - self.cfg.retention_us

    # ---- one call ----

    def call(self, batch: int, arrivals: dict[str, list[Arrival]], wm_us: int | None) -> None:
        """§8 order within one call: the table updates first, then the due stream rows."""
        cfg = self.cfg
        for arrival in arrivals["right"]:
            if self._is_late(arrival.event_time_us, wm_us):
                self._late(batch, "right", arrival.row, wm_us)
                continue
            key = cfg.table.key(arrival.row)
            if key is None:
                # §7: an update with a NULL key is ignored and counted.
                self.result.null_key_dropped["right"] += 1
                continue
            # §7 versions: an update in [wm - HR, wm) is not late and enters the history
            # too; stream rows joined before it arrived are not revisited (§8).
            version = _Version(
                event_time_us=arrival.event_time_us,
                seq=arrival.seq,
                values=(
                    None if cfg.table.is_tombstone(arrival.row) else cfg.table.values(arrival.row)
                ),
                valid_from=arrival.row[cfg.table.event_time_column],
            )
            self.history.setdefault(key, []).append(version)
            self.retained.setdefault(key, []).append(version)

        for arrival in arrivals["left"]:
            if self._is_late(arrival.event_time_us, wm_us):
                self._late(batch, "left", arrival.row, wm_us)
                continue
            if cfg.how == "inner" and key_tuple(arrival.row, cfg.stream_keys) is None:
                # §8: NULL never equals; inner can never emit this row: dropped, counted.
                self.result.null_key_dropped["left"] += 1
                continue
            self.held.append(arrival)

        # §8 emission: eager joins every row of this call; final holds a row until the
        # first call where wm > t (strict).
        due, self.held = split_due(self.held, cfg.emit, wm_us, lambda a: a.event_time_us)
        # §8: join the due stream rows in event-time order (ties: arrival order).
        for arrival in sorted(due, key=lambda a: (a.event_time_us, a.seq)):
            self._join(batch, arrival)

        # §7 history retention, after the call's joins (state is written last).
        if wm_us is not None:
            boundary_us = wm_us - cfg.retention_us
            self.retained = {key: _retain(h, boundary_us) for key, h in self.retained.items()}

    def held_items(self) -> list[HeldTableItem]:
        """What the model holds now: the held stream rows and every retained version."""
        cfg = self.cfg
        out = [HeldTableItem("stream row", key_tuple(a.row, cfg.stream_keys), a.event_time_us,
                             a.event_time_us, dict(a.row)) for a in self.held]
        for key, versions in self.retained.items():
            ordered = sorted(versions, key=lambda v: (v.event_time_us, v.seq))
            for i, v in enumerate(ordered):
                if i + 1 < len(ordered):
                    at: int | None = ordered[i + 1].event_time_us + cfg.retention_us
                else:
                    at = v.event_time_us + cfg.retention_us if v.values is None else None
                kind = "table tombstone" if v.values is None else "table version"
                out.append(HeldTableItem(kind, key, v.event_time_us, at, v.values))
        return out

    def _join(self, batch: int, arrival: Arrival) -> None:
        """§8 partner: the version of the row's key as of its event time."""
        key = key_tuple(arrival.row, self.cfg.stream_keys)
        version: _Version | None = None
        if key is not None:
            version = _as_of(self.history.get(key, []), arrival.event_time_us)
            kept = _as_of(self.retained.get(key, []), arrival.event_time_us)
            # §7: retention must never change a lookup (an invariant of the contract, not
            # of the input: a failure here means SEMANTICS.md §7/§8 disagree).
            assert kept == version, (
                f"history retention dropped the version a row at {arrival.event_time_us} µs "
                f"needs: {version} (kept: {kept})"
            )
        present = version is not None and version.values is not None
        if present or self.cfg.how == "left":
            self._emit(batch, arrival.row, version if present else None)


def _resolve(spec: TableSpec, columns: dict[str, tuple[str, ...]]) -> _Resolved:
    """Read the rest of the duck-typed spec; only what the oracle needs to run is checked."""
    spec.check_key_pairs()
    view, keys, time_column = spec.view, spec.keys, spec.time_column
    missing = [n for n in (*keys["left"], time_column["left"]) if n not in columns["left"]]
    if missing:
        msg = f"stream columns {missing} are not in the stream's columns {columns['left']}"
        raise ValueError(msg)
    table = read_changelog(
        view, "right", columns["right"], keys["right"], time_column["right"], shared_fields=True
    )
    chosen = getattr(view, "output_left_columns", None)
    stream_output_columns = columns["left"] if chosen is None else tuple(chosen)
    # §7: HR >= 0, default lateness_ms.
    retention = getattr(view, "history_retention_ms", None)
    retention_ms = spec.lateness_ms if retention is None else int(retention)
    if retention_ms < 0:
        msg = f"`history_retention_ms` must be >= 0 (got {retention_ms})"
        raise ValueError(msg)
    prefix = prefixes(view)
    output_columns = check_output_columns(
        [
            *(prefix["left"] + name for name in stream_output_columns),
            *(prefix["right"] + name for name in table.value_columns),
            RIGHT_VALID_FROM,
        ],
        spec.late_data,
    )
    return _Resolved(
        how=spec.how,
        emit=spec.emit,
        late_data=spec.late_data,
        stream_keys=keys["left"],
        stream_columns=columns["left"],
        stream_output_columns=stream_output_columns,
        table=table,
        prefix=prefix,
        retention_us=retention_ms * 1000,
        output_columns=output_columns,
    )


def oracle_stream_table_join(
    spec: object | None,
    log: JoinLog,
    *,
    left_columns: Sequence[str],
    right_columns: Sequence[str],
    watermark_policy: str = "min",
    batch_times_ms: Sequence[int] | None = None,
    **spec_fields: Any,
) -> TableOracleResult:
    """Replay a stream-table join's input log and return what it must emit, batch by batch.

    The model, step by step (``SEMANTICS.md`` rule numbers in brackets):

    0. Processing time (§1, ``time_mode="processing"``): rows take their batch's timestamp.
    1. Spark's ``W`` with delay ``lateness_ms + H``, ``H = HR`` (§7), plus
       ``dlq_horizon_ms`` (default one day) under dlq; Spark's pre-filter; the trailing
       no-data batch; ``wm = W + H``, i.e. ``max event time - lateness_ms`` (§1).
    2. Table updates first (§8): late iff ``t < wm - HR`` (``drop``: ``late_dropped``;
       ``dlq``: a dead letter, §4); a NULL key is ignored and counted (§7); otherwise the
       update enters its key's history (a tombstone: ``tombstone_column`` true, or every
       value column NULL without one).
    3. Then stream rows (§8): late iff ``t < wm - HR``, as above; a NULL key never
       matches: ``inner`` drops the row (``null_key_dropped``), ``left`` keeps it.
    4. Emission (§8): ``eager`` joins the call's rows now; ``final`` (default) holds a row
       until the first call where ``wm > t``. Due rows join in event-time order.
    5. Partner (§7, §8): the update of the row's key with the greatest event time ``<= t``
       (ties: the later arrival); absent if none or a tombstone. ``inner`` emits the row
       only with a partner, ``left`` always; at most one output row per stream row.
    6. History retention (§7): after the call, per key, keep every version newer than
       ``wm - HR`` and the newest at or before it (checked to change no lookup).
    7. Output (§8): ``left_prefix`` + stream columns (``output_left_columns``, default all),
       ``right_prefix`` + table value columns, ``right_valid_from`` (the version's event
       time, NULL when absent); ``_dead_letter`` under dlq.

    Args:
        spec: Duck-typed spec (``None`` to pass every field as a keyword): ``left_keys``,
            ``right_keys``, ``how`` (``inner`` | ``left``), ``event_time_column`` (or
            per-side ``left_event_time_column`` / ``right_event_time_column``),
            ``lateness_ms``, ``history_retention_ms`` (default ``lateness_ms``), ``emit``
            (``final`` | ``eager``), ``tombstone_column``, ``value_columns`` (the table's),
            ``late_data`` (``drop`` | ``dlq``), ``dlq_horizon_ms``, ``left_prefix``,
            ``right_prefix``, ``output_left_columns``, ``time_mode``.
        log: One :class:`~interlace.testing.log.JoinBatch` per micro-batch: ``left`` holds
            the stream's rows, ``right`` the table's updates, in arrival order.
        left_columns: Every column of the stream, in order.
        right_columns: Every column of the table input, in order.
        watermark_policy: ``spark.sql.streaming.multipleWatermarkPolicy``.
        batch_times_ms: Each batch's timestamp under ``time_mode="processing"``.
        **spec_fields: Spec fields that override (or replace) ``spec``'s.

    Returns:
        The output rows with their batch, Spark's ``W`` per batch, and the counters.

    Raises:
        ValueError: If the spec cannot be modelled or a row's event time is NULL.

    Example:
        >>> from datetime import datetime
        >>> from interlace.testing.log import JoinBatch
        >>> t = lambda s: datetime(2026, 1, 1, 0, 0, s)
        >>> log = [JoinBatch(right=[{"c": 7, "tier": "gold", "ts": t(1)}],
        ...                  left=[{"c": 7, "order": "o1", "ts": t(2)}]),
        ...        JoinBatch(right=[{"c": 7, "tier": "silver", "ts": t(3)}],
        ...                  left=[{"c": 7, "order": "o2", "ts": t(4)}])]
        >>> kw = dict(left_columns=["c", "order", "ts"], right_columns=["c", "tier", "ts"],
        ...           left_keys=["c"], right_keys=["c"], how="left", event_time_column="ts")
        >>> def out(result):
        ...     return [(o.batch, o.row["left_order"], o.row["right_tier"],
        ...              o.row["right_valid_from"].second) for o in result.rows]
        >>> out(oracle_stream_table_join(None, log, emit="eager", **kw))
        [(0, 'o1', 'gold', 1), (1, 'o2', 'silver', 3)]

        Under ``final`` (the default) ``o1`` waits for ``wm > 2 s``: the trailing no-data
        batch 2 sees ``W = min(4 s, 3 s) - 0``; ``o2`` (4 s) is still held at the end.

        >>> final = oracle_stream_table_join(None, log, **kw)
        >>> out(final), final.num_batches
        ([(2, 'o1', 'gold', 1)], 3)

    """
    read = TableSpec.read(spec, spec_fields, STREAM_TABLE_HOWS)
    log, columns = read.stamped(log, left_columns, right_columns, batch_times_ms)
    cfg = _resolve(read, columns)
    # §7: H = HR for the stream-table join (plus the dlq horizon under dlq).
    horizon_ms = cfg.retention_us // 1000 + dlq_extra_horizon_ms(read.view, cfg.late_data)
    result = TableOracleResult(output_columns=list(cfg.output_columns))
    model = _StreamTableModel(cfg, result)

    def call(batch: int, arrivals: dict[str, list[Arrival]], wm_us: int | None) -> None:
        model.call(batch, arrivals, wm_us)
        result.held.append(model.held_items())

    return read.replay(log, horizon_ms, watermark_policy, result, call)
