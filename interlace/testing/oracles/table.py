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
in :mod:`~interlace.testing.oracles.changelog`; applying updates one at a time, late ones
rejected, which the foreign-key oracle shares, in :mod:`~interlace.testing.oracles.updates`.

The stream-table oracle is :mod:`~interlace.testing.oracles.stream_table`, the foreign-key
oracle :mod:`~interlace.testing.oracles.foreign_key`. Readings of ``SEMANTICS.md`` that had
to be chosen are in ``docs/table-joins-semantics-notes.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interlace.testing.log import JoinLog
from interlace.testing.oracles.changelog import (
    OP_DELETE,
    OP_UPSERT,
    SIDES,
    KeyTuple,
    TableOracleResult,
    TableSpec,
)
from interlace.testing.oracles.updates import Update, UpdateModel

__all__ = [
    "TABLE_HOWS",
    "oracle_table_join",
]

TABLE_HOWS = ("inner", "left", "full")
"""Every ``how`` of the table-table join (seed 003's ``outer`` is ``full``)."""


# --------------------------------------------------------------------------------------
# §9: the table-table join
# --------------------------------------------------------------------------------------


class _TableJoinModel(UpdateModel):
    """The table-table join's emission rules, one update at a time (the rest: UpdateModel)."""

    def _side_values(self, side: str, key: KeyTuple) -> dict[str, Any] | None:
        version = self.latest[side].get(key)
        if version is None or version.row is None:
            return None
        return self.changelogs[side].values(version.row)

    def _present(self, key: KeyTuple) -> bool:
        """§9 state of the join: inner both sides, left the left, full either side."""
        left = self._side_values("left", key) is not None
        right = self._side_values("right", key) is not None
        if self.how == "inner":
            return left and right
        if self.how == "left":
            return left
        return left or right

    def _apply(self, batch: int, update: Update) -> None:
        changelog = self.changelogs[update.side]
        row = update.arrival.row
        before = self._present(update.key)
        self.latest[update.side][update.key] = self._latest(update)
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
    read = TableSpec.read(spec, spec_fields, TABLE_HOWS)
    read.check_key_pairs()
    return _TableJoinModel.replay(
        read, log, left_columns, right_columns, watermark_policy, batch_times_ms
    )
