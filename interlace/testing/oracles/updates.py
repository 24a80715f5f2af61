"""What the table-table and foreign-key oracles share: table updates applied one at a time.

Both joins (:mod:`~interlace.testing.oracles.table`,
:mod:`~interlace.testing.oracles.foreign_key`) keep the latest applied update of each key of
each table, hold updates until they are due and apply them one at a time in event-time
order, rejecting late ones (``SEMANTICS.md`` §7, §9); :class:`UpdateModel` does that once, a
subclass says what an applied update emits. The changelog reading, the output and the
Spark layer are in :mod:`~interlace.testing.oracles.changelog`. It imports nothing from
``interlace.operators`` or ``interlace.state`` (nor pyspark).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interlace.testing.log import JoinLog
from interlace.testing.oracles.changelog import (
    SIDES,
    Arrival,
    Changelog,
    ChangelogOutput,
    KeyTuple,
    TableOracleResult,
    TableSpec,
    dlq_extra_horizon_ms,
    read_changelog,
    split_due,
)
from interlace.testing.oracles.resolve import prefixes

# --------------------------------------------------------------------------------------
# A table update waiting to be applied (§9; the table-table and foreign-key joins)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Update:
    """A table update waiting to be applied (§9)."""

    side: str
    key: KeyTuple
    arrival: Arrival

    def event_time_us(self) -> int:
        """Return the update's event time in µs."""
        return self.arrival.event_time_us

    def order(self) -> tuple[int, int, int]:
        """Return the application order: event time, then left before right, then arrival."""
        return (self.arrival.event_time_us, SIDES.index(self.side), self.arrival.seq)


# --------------------------------------------------------------------------------------
# §9: applying table updates one at a time (the table-table and foreign-key joins)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeldUpdateItem:
    """A pending update or a key's latest version of one table, after a micro-batch (§9).

    Attributes:
        kind: ``"left update"`` / ``"right update"`` (waiting for ``wm > t`` under
            ``emit="final"``), or ``"left version"`` / ``"left tombstone"`` (and right).
        key: The key's values in its table.
        event_time_us: The update's event time.
        releases_at_us: A pending update: its event time; a version: None (kept: the key's
            latest, which later updates are judged late against).
        row: The update's input row.
    """

    kind: str
    key: KeyTuple
    event_time_us: int
    releases_at_us: int | None
    row: Mapping[str, Any]


@dataclass
class Latest:
    """The latest applied update of one table for one key."""

    event_time_us: int
    row: dict[str, Any] | None  # the update's input row; None: the key is absent (deleted)


class UpdateModel:
    """The state and per-call rules the table-table and foreign-key oracles share (§7, §9).

    Per call: an update with a NULL key is ignored and counted, the others wait; the due ones
    (``eager``: all; ``final``: ``wm > t``) are applied one at a time by event time, then
    left before right, then arrival. An update below the latest applied one of its key in
    its own table is late (``dlq``: a dead letter; ``drop``: counted). A subclass applies an
    update that is not late (:meth:`_apply`) and emits through :attr:`output`.
    """

    def __init__(
        self, spec: TableSpec, changelogs: dict[str, Changelog], result: TableOracleResult
    ) -> None:
        self.how = spec.how
        self.emit = spec.emit
        self.late_data = spec.late_data
        self.changelogs = changelogs
        self.result = result
        self.output = ChangelogOutput(
            result,
            spec.keys["left"],
            {side: changelogs[side].value_columns for side in SIDES},
            prefixes(spec.view),
            spec.late_data,
        )
        # Insertion-ordered: the foreign-key join's right update visits left keys in
        # first-seen order.
        self.latest: dict[str, dict[KeyTuple, Latest]] = {side: {} for side in SIDES}
        self.pending: list[Update] = []

    @classmethod
    def replay(
        cls,
        spec: TableSpec,
        log: JoinLog,
        left_columns: Sequence[str],
        right_columns: Sequence[str],
        watermark_policy: str,
        batch_times_ms: Sequence[int] | None,
    ) -> TableOracleResult:
        """Replay ``log`` through the Spark layer and this model; return what it emits."""
        log, columns = spec.stamped(log, left_columns, right_columns, batch_times_ms)
        changelogs = {
            side: read_changelog(spec.view, side, columns[side], spec.keys[side],
                                 spec.time_column[side], shared_fields=True)
            for side in SIDES
        }
        result = TableOracleResult()
        model = cls(spec, changelogs, result)
        # §7: H is 0 for the table-table and foreign-key joins (plus the dlq horizon under dlq).
        horizon_ms = dlq_extra_horizon_ms(spec.view, spec.late_data)

        def call(batch: int, arrivals: dict[str, list[Arrival]], wm_us: int | None) -> None:
            model.call(batch, arrivals, wm_us)
            result.held.append(model.held_items())

        return spec.replay(log, horizon_ms, watermark_policy, result, call)

    def held_items(self) -> list[HeldUpdateItem]:
        """The pending updates and every key's latest version of each table."""
        out = [HeldUpdateItem(f"{u.side} update", u.key, u.event_time_us(), u.event_time_us(),
                              dict(u.arrival.row)) for u in self.pending]
        for side in SIDES:
            for key, latest in self.latest[side].items():
                kind = f"{side} version" if latest.row is not None else f"{side} tombstone"
                out.append(HeldUpdateItem(kind, key, latest.event_time_us, None,
                                          dict(latest.row or {})))
        return out

    def call(self, batch: int, arrivals: dict[str, list[Arrival]], wm_us: int | None) -> None:
        """Take one call's updates, then apply the due ones in order."""
        for side in SIDES:
            for arrival in arrivals[side]:
                key = self.changelogs[side].key(arrival.row)
                if key is None:
                    # §7: an update with a NULL key is ignored and counted.
                    self.result.null_key_dropped[side] += 1
                    continue
                self.pending.append(Update(side=side, key=key, arrival=arrival))
        # §9: eager applies in the call that receives an update; final in the first call
        # where wm > t (strict).
        due, self.pending = split_due(self.pending, self.emit, wm_us, Update.event_time_us)
        # §9: one at a time in event-time order; ties: left before right, then arrival.
        for update in sorted(due, key=Update.order):
            if not self._late(batch, update, wm_us):
                self._apply(batch, update)

    def _late(self, batch: int, update: Update, wm_us: int | None) -> bool:
        """§9: whether ``update`` is late; a late one is dead-lettered or counted here.

        Late: its event time is below that of an update already applied to its key in its
        table, so applying it would break the key's event-time order.
        """
        current = self.latest[update.side].get(update.key)
        if current is None or update.arrival.event_time_us >= current.event_time_us:
            return False
        if self.late_data == "dlq":
            changelog = self.changelogs[update.side]
            self.output.dead_letter(batch, changelog, wm_us, update.arrival.row)
        else:
            self.result.late_dropped[update.side] += 1
        return True

    def _latest(self, update: Update) -> Latest:
        """The update as its key's latest version of its table (§7: a tombstone deletes)."""
        row = dict(update.arrival.row)
        deleted = self.changelogs[update.side].is_tombstone(row)
        return Latest(update.arrival.event_time_us, None if deleted else row)

    def _apply(self, batch: int, update: Update) -> None:
        """Apply an update that is not late and emit what it changes."""
        raise NotImplementedError
