"""Reference model (oracle) of the table-table join (changelog output), as Spark runs it.

Two tables (``SEMANTICS.md`` §7: changelogs keyed by their key columns) joined on the same
primary key; the output is itself a changelog (§9). The oracle replays a
:data:`~interlace.testing.log.JoinLog` (``left`` = the left table's updates, ``right`` =
the right table's) one micro-batch and one update at a time. It is deliberately naive:
dicts of the latest version per key, a list of pending updates, plain loops. It imports
nothing from ``interlace.operators`` or ``interlace.state`` (nor pyspark), so it can judge
them.

What the three table oracles share (the §7 reading of a changelog row, the result type
:class:`~interlace.testing.oracles.changelog.TableOracleResult`, the Spark layer
:func:`~interlace.testing.oracles.changelog.replay_spark`, reading a duck-typed spec) is
in :mod:`~interlace.testing.oracles.changelog`.

The stream-table oracle is :mod:`~interlace.testing.oracles.stream_table`, the foreign-key
oracle :mod:`~interlace.testing.oracles.foreign_key`. Readings of ``SEMANTICS.md`` that had
to be chosen are in ``docs/table-joins-semantics-notes.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from interlace.testing.log import JoinLog
from interlace.testing.oracles.changelog import (
    EMIT_MODES,
    OP_DELETE,
    OP_UPSERT,
    SIDES,
    Arrival,
    Changelog,
    ChangelogOutput,
    KeyTuple,
    SpecView,
    TableOracleResult,
    Update,
    dlq_extra_horizon_ms,
    event_time_columns,
    prefixes,
    read_changelog,
    read_choice,
    read_late_data,
    replay_spark,
    split_due,
    stamp_processing_time,
)

__all__ = [
    "TABLE_HOWS",
    "oracle_table_join",
]

TABLE_HOWS = ("inner", "left", "full")
"""Every ``how`` of the table-table join (seed 003's ``outer`` is ``full``)."""


# --------------------------------------------------------------------------------------
# §9: the table-table join
# --------------------------------------------------------------------------------------


@dataclass
class _SideVersion:
    """The latest applied update of one side for one key."""

    event_time_us: int
    values: dict[str, Any] | None  # None: the key is absent (deleted)


class _TableJoinModel:
    """The table-table join's state and emission rules, one update at a time."""

    def __init__(
        self,
        how: str,
        emit: str,
        late_data: str,
        changelogs: dict[str, Changelog],
        output: ChangelogOutput,
        result: TableOracleResult,
    ) -> None:
        self.how = how
        self.emit = emit
        self.late_data = late_data
        self.changelogs = changelogs
        self.output = output
        self.result = result
        self.latest: dict[str, dict[KeyTuple, _SideVersion]] = {side: {} for side in SIDES}
        self.pending: list[Update] = []

    def _side_values(self, side: str, key: KeyTuple) -> dict[str, Any] | None:
        version = self.latest[side].get(key)
        return None if version is None else version.values

    def _present(self, key: KeyTuple) -> bool:
        """§9 state of the join: inner both sides, left the left, full either side."""
        left = self._side_values("left", key) is not None
        right = self._side_values("right", key) is not None
        if self.how == "inner":
            return left and right
        if self.how == "left":
            return left
        return left or right

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
            self._apply(batch, update, wm_us)

    def _apply(self, batch: int, update: Update, wm_us: int | None) -> None:
        changelog = self.changelogs[update.side]
        row = update.arrival.row
        current = self.latest[update.side].get(update.key)
        # §9 late updates: event time below that of an update already applied to its key
        # (in its table), so applying it would break the key's event-time order.
        if current is not None and update.arrival.event_time_us < current.event_time_us:
            if self.late_data == "dlq":
                self.output.dead_letter(batch, changelog, wm_us, row)
            else:
                self.result.late_dropped[update.side] += 1
            return
        before = self._present(update.key)
        values = None if changelog.is_tombstone(row) else changelog.values(row)
        self.latest[update.side][update.key] = _SideVersion(update.arrival.event_time_us, values)
        after = self._present(update.key)
        # §9 emission per applied update: upsert if present after (even unchanged), else
        # delete if present before, else nothing (a tombstone for an absent key).
        if after:
            op = OP_UPSERT
        elif before:
            op = OP_DELETE
        else:
            return
        self.output.emit(
            batch,
            update.key,
            [row[name] for name in changelog.keys],
            op,
            {side: self._side_values(side, update.key) for side in SIDES},
            row[changelog.event_time_column],
        )


def oracle_table_join(
    spec: object | None,
    log: JoinLog,
    *,
    left_columns: Sequence[str],
    right_columns: Sequence[str],
    watermark_policy: str = "min",
    batch_times_ms: Sequence[int] | None = None,
    **spec_fields: Any,
) -> TableOracleResult:
    """Replay a table-table join's input log and return the changelog it must emit.

    The model, step by step (``SEMANTICS.md`` rule numbers in brackets):

    0. Processing time (§1, ``time_mode="processing"``): rows take their batch's timestamp.
    1. Spark's ``W`` with delay ``lateness_ms + H``; ``H`` = 0 (§7), plus
       ``dlq_horizon_ms`` (default one day) under dlq; Spark's pre-filter; the trailing
       no-data batch; ``wm = W + H`` (§1, see :func:`replay_spark`).
    2. NULL keys (§7): an update with a NULL key is ignored, ``null_key_dropped``.
    3. Due updates (§9): ``eager``: those received in this call; ``final`` (default): those
       with ``wm > t``, held until then. Applied one at a time, ordered by event time,
       then left before right, then arrival.
    4. Late updates (§9): event time below the latest applied update of the same key in
       the same table: ``drop`` (``late_dropped``) or ``dlq`` (a dead letter, §4).
    5. Versions (§7): a tombstone (``tombstone_column`` true, or every value column NULL
       without one) makes its side absent for the key; otherwise the side's values are
       the update's value columns.
    6. Emission (§9): present after (``inner``: both sides, ``left``: the left, ``full``:
       either) -> ``upsert``; else present before -> ``delete``; else nothing.
    7. Output (§9): ``left_keys`` (named as on the left), ``left_prefix`` + left value
       columns, ``right_prefix`` + right value columns, ``op``, ``event_time`` (the
       applied update's), ``version`` (per key, from 0); ``_dead_letter`` under dlq.

    Args:
        spec: Duck-typed spec (``None`` to pass every field as a keyword): ``left_keys``,
            ``right_keys``, ``how`` (``inner`` | ``left`` | ``full``), ``event_time_column``
            (or per-side ``left_event_time_column`` / ``right_event_time_column``),
            ``lateness_ms``, ``emit`` (``final`` | ``eager``), ``late_data`` (``drop`` |
            ``dlq``), ``dlq_horizon_ms``, ``value_columns`` / ``tombstone_column`` (both
            tables) or ``left_value_columns`` ... (one table), ``left_prefix``,
            ``right_prefix``, ``time_mode``.
        log: One :class:`~interlace.testing.log.JoinBatch` per micro-batch: ``left`` holds
            the left table's updates, ``right`` the right table's, in arrival order.
        left_columns: Every column of the left input, in order.
        right_columns: Every column of the right input, in order.
        watermark_policy: ``spark.sql.streaming.multipleWatermarkPolicy``.
        batch_times_ms: Each batch's timestamp under ``time_mode="processing"``.
        **spec_fields: Spec fields that override (or replace) ``spec``'s.

    Returns:
        The changelog rows with their batch, Spark's ``W`` per batch, and the counters.

    Raises:
        ValueError: If the spec cannot be modelled or a row's event time is NULL.

    Example:
        >>> from datetime import datetime
        >>> from interlace.testing.log import JoinBatch
        >>> t = lambda s: datetime(2026, 1, 1, 0, 0, s)
        >>> log = [JoinBatch(left=[{"id": 1, "a": "A", "ts": t(1)}]),
        ...        JoinBatch(right=[{"id": 1, "b": "x", "ts": t(2)}]),
        ...        JoinBatch(left=[{"id": 1, "a": None, "ts": t(3)}])]
        >>> result = oracle_table_join(None, log, left_columns=["id", "a", "ts"],
        ...     right_columns=["id", "b", "ts"], left_keys=["id"], right_keys=["id"],
        ...     how="full", event_time_column="ts", emit="eager")
        >>> [(o.batch, o.row["op"], o.row["left_a"], o.row["right_b"], o.row["version"])
        ...  for o in result.rows]
        [(0, 'upsert', 'A', None, 0), (1, 'upsert', 'A', 'x', 1), (2, 'upsert', None, 'x', 2)]

    """
    view = SpecView(spec, spec_fields)
    how = read_choice(view, "how", "inner", TABLE_HOWS)
    emit = read_choice(view, "emit", "final", EMIT_MODES)
    late_data = read_late_data(view)
    time_column = event_time_columns(view)
    keys = {side: tuple(getattr(view, f"{side}_keys")) for side in SIDES}
    if not keys["left"] or len(keys["left"]) != len(keys["right"]):
        msg = f"`left_keys`/`right_keys` must be non-empty and of equal length (got {keys})"
        raise ValueError(msg)
    log, columns = stamp_processing_time(
        view, log, {"left": left_columns, "right": right_columns}, time_column, batch_times_ms
    )
    changelogs = {
        side: read_changelog(view, side, columns[side], keys[side], time_column[side],
                             shared_fields=True)
        for side in SIDES
    }
    # §7: H is 0 for the table-table join (plus the dlq horizon under dlq).
    horizon_ms = dlq_extra_horizon_ms(view, late_data)
    lateness_ms = int(getattr(view, "lateness_ms", 0) or 0)

    result = TableOracleResult()
    output = ChangelogOutput(
        result,
        keys["left"],
        {side: changelogs[side].value_columns for side in SIDES},
        prefixes(view),
        late_data,
    )
    model = _TableJoinModel(how, emit, late_data, changelogs, output, result)
    replay_spark(
        log,
        event_time_column=time_column,
        delay_ms=lateness_ms + horizon_ms,
        horizon_ms=horizon_ms,
        watermark_policy=watermark_policy,
        result=result,
        call=model.call,
    )
    return result
