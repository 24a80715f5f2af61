"""Reference model (oracle) of the foreign-key table join (changelog output), as Spark runs it.

The left table (keyed by ``left_keys``, its primary key) carries ``foreign_key_columns``;
the right table is keyed by ``right_keys``; a left row joins the right row whose key
equals its foreign key (``SEMANTICS.md`` §9, last rule: "the same rules with the right
table keyed by a foreign-key column of the left"). The output is a changelog keyed by the
left primary key. The oracle replays a :data:`~interlace.testing.log.JoinLog` one
micro-batch and one update at a time. It is deliberately naive: the latest version per key
of each table in a dict, and a scan of every left key when a right update arrives. It
imports nothing from ``interlace.operators`` or ``interlace.state`` (nor pyspark), so it
can judge them.

The one difference from the table-table rules is Kafka's redundant ``delete``, which §9
allows ("it may emit a redundant delete for a key already absent") and seed 003's
foreign-key table prints (``inner``, ts 3): when an existing left row is updated or
deleted and the join is absent after, the oracle emits ``delete`` even if the join was
already absent before (Kafka's ``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE`` /
``DELETE_KEY_AND_PROPAGATE``). Readings of ``SEMANTICS.md`` that had to be chosen are in
``docs/table-joins-semantics-notes.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interlace.testing.log import JoinLog
from interlace.testing.oracles.changelog import (
    OP_DELETE,
    OP_UPSERT,
    Changelog,
    KeyTuple,
    TableOracleResult,
    TableSpec,
    key_tuple,
)
from interlace.testing.oracles.updates import Latest, Update, UpdateModel

__all__ = ["FOREIGN_KEY_HOWS", "oracle_foreign_key_join"]

FOREIGN_KEY_HOWS = ("inner", "left")
"""Every ``how`` of the foreign-key join (as in Kafka Streams)."""


class _ForeignKeyModel(UpdateModel):
    """The foreign-key join's emission rules, one update at a time (the rest: UpdateModel)."""

    def __init__(
        self, spec: TableSpec, changelogs: dict[str, Changelog], result: TableOracleResult
    ) -> None:
        self.foreign_key_columns = tuple(spec.view.foreign_key_columns)
        left_columns = changelogs["left"].columns
        missing = [name for name in self.foreign_key_columns if name not in left_columns]
        if missing:
            msg = f"`foreign_key_columns` {missing} are not in the left columns {left_columns}"
            raise ValueError(msg)
        super().__init__(spec, changelogs, result)

    # ---- the join's state (§9) ----

    def _left_row(self, key: KeyTuple) -> dict[str, Any] | None:
        latest = self.latest["left"].get(key)
        return None if latest is None else latest.row

    def _partner(self, left_row: dict[str, Any]) -> dict[str, Any] | None:
        """Return the present right row whose key equals the left row's foreign key.

        A NULL in the foreign key matches nothing (NULL never equals).
        """
        foreign_key = key_tuple(left_row, self.foreign_key_columns)
        if foreign_key is None:
            return None
        latest = self.latest["right"].get(foreign_key)
        return None if latest is None else latest.row

    def _present(self, key: KeyTuple) -> bool:
        """§9 state of the join: ``inner``: left present with a partner; ``left``: left present."""
        left_row = self._left_row(key)
        if left_row is None:
            return False
        return self.how == "left" or self._partner(left_row) is not None

    def _values(self, key: KeyTuple) -> dict[str, dict[str, Any] | None]:
        left_row = self._left_row(key)
        right_row = None if left_row is None else self._partner(left_row)
        return {
            "left": None if left_row is None else self.changelogs["left"].values(left_row),
            "right": None if right_row is None else self.changelogs["right"].values(right_row),
        }

    # ---- one update ----

    def _apply(self, batch: int, update: Update) -> None:
        row = dict(update.arrival.row)
        new = self._latest(update)
        event_time = row[self.changelogs[update.side].event_time_column]
        if update.side == "left":
            self._apply_left(batch, update.key, row, new, event_time)
        else:
            self._apply_right(batch, update.key, new, event_time)

    def _apply_left(
        self, batch: int, key: KeyTuple, row: dict[str, Any], new: Latest, event_time: Any
    ) -> None:
        """A left update changes one output key: its own."""
        before = self._present(key)
        left_existed = self._left_row(key) is not None
        self.latest["left"][key] = new
        after = self._present(key)
        # §9 emission, plus Kafka's redundant delete (§9 FK: "may emit a redundant delete
        # for a key already absent"): an existing left row updated or deleted so that the
        # join is absent emits delete even if it was absent before (seed 003, inner, ts 3).
        if after:
            op = OP_UPSERT
        elif before or left_existed:
            op = OP_DELETE
        else:
            return
        self._emit(batch, key, row, op, event_time)

    def _apply_right(self, batch: int, key: KeyTuple, new: Latest, event_time: Any) -> None:
        """A right update changes every output key whose present left row refers to it."""
        affected = [
            left_key
            for left_key, latest in self.latest["left"].items()
            if latest.row is not None
            and key_tuple(latest.row, self.foreign_key_columns) == key
        ]
        # Affected rows are present left rows and stay present: they give the key values.
        left_rows = {left_key: self.latest["left"][left_key].row or {} for left_key in affected}
        before = {left_key: self._present(left_key) for left_key in affected}
        self.latest["right"][key] = new
        for left_key in affected:
            # §9 emission per applied update, for each output key it touches.
            if self._present(left_key):
                self._emit(batch, left_key, left_rows[left_key], OP_UPSERT, event_time)
            elif before[left_key]:
                self._emit(batch, left_key, left_rows[left_key], OP_DELETE, event_time)

    def _emit(
        self, batch: int, key: KeyTuple, key_row: dict[str, Any], op: str, event_time: Any
    ) -> None:
        """Emit one changelog row for ``key``; its key values are read from ``key_row``."""
        key_values = [key_row[name] for name in self.changelogs["left"].keys]
        self.output.emit(batch, key, key_values, op, self._values(key), event_time)


def oracle_foreign_key_join(
    spec: object | None,
    log: JoinLog,
    *,
    left_columns: Sequence[str],
    right_columns: Sequence[str],
    watermark_policy: str = "min",
    batch_times_ms: Sequence[int] | None = None,
    **spec_fields: Any,
) -> TableOracleResult:
    """Replay a foreign-key join's input log and return the changelog it must emit.

    The model, step by step (``SEMANTICS.md`` rule numbers in brackets); steps 0-5 are
    the table-table join's (:func:`~interlace.testing.oracles.table.oracle_table_join`):

    0. Processing time (§1); 1. Spark's ``W`` (``H`` = 0, plus ``dlq_horizon_ms`` under
       dlq), pre-filter, trailing batch, ``wm = W + H`` (§1, §7).
    2. NULL primary keys (left) or right keys are ignored and counted (§7).
    3. Due updates (§9): ``eager`` now, ``final`` once ``wm > t``; applied one at a time
       by event time, then left before right, then arrival.
    4. Late updates (§9): below the latest applied update of the same key in its table:
       ``drop`` or ``dlq``.
    5. Versions (§7): tombstones by ``tombstone_column`` or by all-NULL value columns.
    6. Join state (§9 FK): a present left row joins the present right row whose key
       equals its ``foreign_key_columns`` (a NULL foreign key joins nothing). ``inner``:
       present iff the left row has a partner; ``left``: iff the left row is present.
    7. Emission (§9): a left update touches its own key; a right update every key whose
       present left row refers to it (in first-seen order). Present after -> ``upsert``;
       else present before -> ``delete``; else, for a left update of an existing left
       row, a redundant ``delete`` (Kafka's, allowed by §9); else nothing.
    8. Output (§9): ``left_keys``, ``left_prefix`` + left value columns (the foreign key
       included), ``right_prefix`` + right value columns, ``op``, ``event_time`` (the
       applied update's, a right one's for every key it touches), ``version`` (per key,
       from 0); ``_dead_letter`` under dlq.

    Args:
        spec: Duck-typed spec (``None`` to pass every field as a keyword): ``left_keys``,
            ``foreign_key_columns``, ``right_keys``, ``how`` (``inner`` | ``left``),
            ``event_time_column`` (or per side), ``lateness_ms``, ``emit``,
            ``late_data`` (``drop`` | ``dlq``), ``dlq_horizon_ms``, ``value_columns`` /
            ``tombstone_column`` (both tables) or per side, ``left_prefix``,
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
        >>> log = [JoinBatch(right=[{"pid": 1, "name": "pen", "ts": t(0)}]),
        ...        JoinBatch(left=[{"oid": "o1", "pid": 1, "ts": t(1)}]),
        ...        JoinBatch(right=[{"pid": 1, "name": "ink pen", "ts": t(2)}])]
        >>> result = oracle_foreign_key_join(None, log, left_columns=["oid", "pid", "ts"],
        ...     right_columns=["pid", "name", "ts"], left_keys=["oid"],
        ...     foreign_key_columns=["pid"], right_keys=["pid"], how="inner",
        ...     event_time_column="ts", emit="eager")
        >>> [(o.batch, o.row["oid"], o.row["left_pid"], o.row["right_name"], o.row["version"])
        ...  for o in result.rows]
        [(1, 'o1', 1, 'pen', 0), (2, 'o1', 1, 'ink pen', 1)]

    """
    read = TableSpec.read(spec, spec_fields, FOREIGN_KEY_HOWS)
    foreign_key_columns = tuple(read.view.foreign_key_columns)
    if not foreign_key_columns or len(foreign_key_columns) != len(read.keys["right"]):
        msg = (
            f"`foreign_key_columns` and `right_keys` must be non-empty and of equal length "
            f"(got {foreign_key_columns} and {read.keys['right']})"
        )
        raise ValueError(msg)
    return _ForeignKeyModel.replay(
        read, log, left_columns, right_columns, watermark_policy, batch_times_ms
    )
