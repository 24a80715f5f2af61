"""The stream-table join spec: :class:`StreamTableJoin`, validated when it is built.

Neighbours: ``plan.py`` resolves a spec against the input schemas, ``step.py`` runs it,
``shim.py`` hands it to Spark. The table vocabulary (``emit``, ``late_data`` without
``reopen``, value and tombstone columns) is shared in :mod:`interlace.operators.common.tables`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from interlace.operators.common.checks import (
    check_event_time_columns,
    check_idle_timeouts,
    check_int,
    check_key_lists,
    check_literal,
)
from interlace.operators.common.spec import DEFAULT_DLQ_HORIZON_MS
from interlace.operators.common.tables import (
    Emit,
    TableJoinFields,
    TableLateData,
    check_value_columns,
)
from interlace.state.keygroups import DEFAULT_JOIN_KEY_GROUPS

__all__ = ["StreamTableHow", "StreamTableJoin"]

StreamTableHow = Literal["inner", "left"]
"""Which stream rows a stream-table join emits.

* ``"inner"``: each stream row whose key is present in the table as of its event time.
* ``"left"``: every stream row, with NULL table columns when its key is absent.
"""


@dataclass(frozen=True, slots=True)
class StreamTableJoin(TableJoinFields):
    """A stream joined with a changelog table as of event time (SEMANTICS §7–§8).

    Each stream row ``s`` at ``t`` joins the table version of its key as of ``t``: the update
    with the greatest event time ``<= t`` (ties: the later arrival); the key is absent if there
    is none or it is a tombstone. One output row per stream row at most; nothing is retracted.
    Under ``emit="final"`` a row is held until the first call where ``wm > t`` (strict), so the
    output does not depend on the micro-batch split when no row arrives behind ``wm``; under
    ``"eager"`` it joins the versions received so far, in the call that receives it. A row or
    update is late iff ``t < wm - HR`` on arrival (``HR`` = ``history_retention_ms``).

    Example:
        >>> from interlace import StreamTableJoin
        >>> spec = StreamTableJoin(left_keys=["customer_id"], right_keys=["customer_id"],
        ...                        how="left", event_time_column="ts", lateness_ms=60_000)
        >>> (spec.retention_ms, spec.horizon_ms, spec.watermark_delay_ms)
        (60000, 60000, 120000)

    Args:
        left_keys: Key columns of the stream (non-empty).
        right_keys: Key columns of the table, same length, compared pairwise.
        how: See :data:`StreamTableHow`.
        event_time_column: Event-time column of both inputs (the table's: valid-from time).
        left_event_time_column: Overrides ``event_time_column`` for the stream.
        right_event_time_column: Overrides ``event_time_column`` for the table.
        lateness_ms: How far behind the maximum event time seen a row may arrive.
        history_retention_ms: ``HR``: per key, the table versions newer than ``wm - HR`` are
            kept, plus the newest at or before it (default ``lateness_ms``; >= 0).
        emit: See :data:`~interlace.operators.common.tables.Emit`.
        tombstone_column: Optional boolean table column; true = delete (NULL is not a
            delete). Without it, an update whose value columns are all NULL is a tombstone.
        value_columns: The table's value columns to output (default: every table column but
            the keys, the event time and ``tombstone_column``).
        late_data: ``"drop"`` (counted) or ``"dlq"`` (dead letters); ``"reopen"`` is an error.
        dlq_horizon_ms: Under ``dlq``: late rows up to this far behind ``wm - HR`` still reach
            the operator and are dead-lettered (older ones are dropped by Spark).
        left_prefix: Prefix of the stream's output columns.
        right_prefix: Prefix of the table's value columns in the output.
        key_groups: Number of key groups (state and Python calls are per key group).
        left_idle_timeout_ms: The left input is idle after this long (ms, processing time)
            without a row, and then left out of the watermark's minimum (None: never;
            needs ``heartbeat_location``; docs/idle-inputs.md).
        right_idle_timeout_ms: The same for the right input.
    """

    left_keys: Sequence[str]
    right_keys: Sequence[str]
    how: StreamTableHow = "inner"
    event_time_column: str | None = None
    left_event_time_column: str | None = None
    right_event_time_column: str | None = None
    lateness_ms: int = 0
    history_retention_ms: int | None = None
    emit: Emit = "final"
    tombstone_column: str | None = None
    value_columns: Sequence[str] | None = None
    late_data: TableLateData = "drop"
    dlq_horizon_ms: int = DEFAULT_DLQ_HORIZON_MS
    left_prefix: str = "left_"
    right_prefix: str = "right_"
    key_groups: int = DEFAULT_JOIN_KEY_GROUPS
    left_idle_timeout_ms: int | None = None
    right_idle_timeout_ms: int | None = None

    OPERATOR = "stream_table"

    def __post_init__(self) -> None:
        check_key_lists(self, "give the key columns the stream looks the table up by")
        check_literal("how", self.how, StreamTableHow)
        self._check_table_vocabulary("the stream-table join")
        check_int("history_retention_ms", self.history_retention_ms, minimum=0, allow_none=True)
        check_event_time_columns(self)
        check_idle_timeouts(self)
        value_columns = check_value_columns(
            "value_columns",
            self.value_columns,
            self.right_keys,
            self.side_event_time_column("right"),
            self.tombstone_column,
        )
        object.__setattr__(self, "value_columns", value_columns)
        self._check_prefixes_and_key_groups()

    # Derived values --------------------------------------------------------------------------

    @property
    def retention_ms(self) -> int:
        """``HR``: ``history_retention_ms``, default ``lateness_ms`` (SEMANTICS §7)."""
        hr = self.history_retention_ms
        return self.lateness_ms if hr is None else hr

    @property
    def horizon_ms(self) -> int:
        """``H``: ``HR``, plus ``dlq_horizon_ms`` under dlq (table-joins-semantics-notes §1).

        Spark's ``W`` trails the operator's ``wm`` by ``H``; ``wm = W + H`` is
        ``max event time - lateness_ms`` whatever ``H`` is.
        """
        return self.retention_ms + (self.dlq_horizon_ms if self.late_data == "dlq" else 0)

    def output_lags_ms(self) -> dict[str, int]:
        """Return the lag of each output time column, in ms (SEMANTICS §11).

        The lag of a column: every row emitted in a micro-batch has a time in that column at
        or after ``wm - lag``, ``wm`` being the operator watermark of the micro-batch before
        it. A chain stage reading this output on that column needs ``lateness_ms >= lag``
        (docs/chains.md derives each value). Output columns not listed have no such bound.

        A stream row is joined once ``wm`` passes its time (``final``) or on arrival
        (``eager``), and is late only below ``wm - HR``: the stream's event-time column lags by
        ``HR``. ``right_valid_from`` has no bound (a version may be old).
        """
        et = self.side_event_time_column("left")
        return {} if et is None else {self.left_prefix + et: self.retention_ms}

    # watermark_delay_ms (lateness_ms + H): LateDataFields; side_event_time_column:
    # TableJoinFields.

    def state_fingerprint(self, left_columns: Sequence[str], right_columns: Sequence[str]) -> str:
        """Fingerprint of the fields that give the stored history and held rows their meaning.

        ``history_retention_ms`` and ``lateness_ms`` are not in it: changing them keeps every
        stored version meaningful (a longer retention just keeps more from then on).
        """
        return self._fingerprint(
            left_columns,
            right_columns,
            tombstone_column=self.tombstone_column,
            value_columns=None if self.value_columns is None else list(self.value_columns),
        )
