"""The table-table join spec: :class:`TableJoin`, validated when it is built.

Neighbours: ``plan.py`` resolves a spec against the input schemas, ``step.py`` runs it,
``shim.py`` hands it to Spark. The fields both table joins share (event time, value and
tombstone columns with per-side overrides, late data, prefixes) and their checks are in
:class:`~interlace.operators.common.tables.TwoTableFields`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from interlace.operators.common.checks import check_key_lists, check_literal
from interlace.operators.common.docs import fill_doc
from interlace.operators.common.tables import TWO_TABLE_ARGS, TwoTableFields

__all__ = ["TableHow", "TableJoin"]

TableHow = Literal["inner", "left", "full"]
"""When a key of a table-table join is present (SEMANTICS §9).

* ``"inner"``: both tables have the key.
* ``"left"``: the left table has it (right columns NULL when the right has not).
* ``"full"``: either table has it (seed 003's ``outer``).
"""


@fill_doc(two_table_args=TWO_TABLE_ARGS)
@dataclass(frozen=True, slots=True)
class TableJoin(TwoTableFields):
    """Two changelog tables joined on their primary key; the output is a changelog (§7, §9).

    Updates are applied one at a time in event-time order (ties: left before right, then
    arrival), under ``emit="final"`` once ``wm > t`` (strict), under ``"eager"`` in the call
    that receives them. Each applied update emits ``upsert`` if the join is present after it,
    else ``delete`` if it was present before, else nothing. Output: the key columns (named as
    ``left_keys``), ``left_prefix`` + the left value columns, ``right_prefix`` + the right ones,
    ``op``, ``event_time`` (the applied update's) and ``version`` (per key, from 0, +1 per
    row). An update older than the latest applied one of its key in its own table is late.

    Example:
        >>> from interlace import TableJoin
        >>> spec = TableJoin(left_keys=["id"], right_keys=["id"], how="full",
        ...                  event_time_column="ts", lateness_ms=60_000)
        >>> (spec.horizon_ms, spec.watermark_delay_ms)
        (0, 60000)

    Args:
        left_keys: Primary key columns of the left table (non-empty).
        right_keys: Primary key columns of the right table, same length, compared pairwise.
        how: See :data:`TableHow`.
        {two_table_args}
        key_groups: Number of key groups (state and Python calls are per key group).
        left_idle_timeout_ms: The left input is idle after this long (ms, processing time)
            without a row, and then left out of the watermark's minimum (None: never;
            needs ``heartbeat_location``; docs/idle-inputs.md).
        right_idle_timeout_ms: The same for the right input.
    """

    OPERATOR = "table"

    # The fields are TwoTableFields' (the Args above, in that order); `how` narrowed here.
    how: TableHow = "inner"

    def __post_init__(self) -> None:
        check_key_lists(self, "give the primary key columns of both tables")
        check_literal("how", self.how, TableHow)
        self._check_table_fields("the table-table join")
