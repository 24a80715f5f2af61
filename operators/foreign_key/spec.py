"""The foreign-key join spec: :class:`ForeignKeyJoin`, validated when it is built.

Neighbours: ``plan.py`` resolves a spec against the input schemas, ``step.py`` runs it,
``shim.py`` hands it to Spark. The fields it shares with the table-table join (event time,
value and tombstone columns with per-side overrides, late data, prefixes) and their checks are
in :class:`~interlace.operators.common.tables.TwoTableFields`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from interlace.operators.common.checks import as_name_tuple, check_literal
from interlace.operators.common.docs import fill_doc
from interlace.operators.common.tables import TWO_TABLE_ARGS, TwoTableFields
from interlace.operators.errors import ConfigError

__all__ = ["ForeignKeyHow", "ForeignKeyJoin"]

ForeignKeyHow = Literal["inner", "left"]
"""When a left key of a foreign-key join is present (SEMANTICS §9, Kafka's FK join).

* ``"inner"``: the left row is present and the right table has its foreign key.
* ``"left"``: the left row is present (right columns NULL without a partner).
"""


@dataclass(frozen=True)
class _ForeignKeyColumns:
    """Puts ``foreign_key_columns`` right after ``left_keys`` among the fields.

    A dataclass takes its bases' fields last base first: as the last base of
    :class:`ForeignKeyJoin`, this one's ``left_keys, foreign_key_columns`` come before
    :class:`~interlace.operators.common.tables.TwoTableFields`' ``right_keys, how, ...``.
    """

    __slots__ = ()

    left_keys: Sequence[str]
    foreign_key_columns: Sequence[str]


@fill_doc(two_table_args=TWO_TABLE_ARGS)
@dataclass(frozen=True, slots=True)
class ForeignKeyJoin(TwoTableFields, _ForeignKeyColumns):
    """A changelog table joined with another by a foreign key; the output is a changelog.

    The left table (primary key ``left_keys``) carries ``foreign_key_columns``; a present
    left row joins the present right row (keyed by ``right_keys``) whose key equals its
    foreign key (a NULL in it joins nothing). Updates of both tables are applied one at a time
    in event-time order (ties: left before right, then arrival), under ``emit="final"`` once
    ``wm > t`` (strict), under ``"eager"`` in the call that receives them. A left update emits
    for its own key; a right update for every key whose present left row refers to it:
    ``upsert`` if the join is present after, else ``delete`` if it was present before; a
    left update of an existing left row after which the join is absent emits ``delete`` even
    if it was absent before (Kafka's redundant delete, SEMANTICS §9). Output: ``left_keys``,
    ``left_prefix`` + the left value columns (the foreign key included by default),
    ``right_prefix`` + the right ones, ``op``, ``event_time`` (the applied update's),
    ``version`` (per left key, from 0). An update older than the latest applied one of its
    key in its own table is late.

    Example:
        >>> from interlace import ForeignKeyJoin
        >>> spec = ForeignKeyJoin(left_keys=["order_id"], foreign_key_columns=["product_id"],
        ...                       right_keys=["product_id"], how="left",
        ...                       event_time_column="ts", lateness_ms=60_000)
        >>> (spec.horizon_ms, spec.watermark_delay_ms)
        (0, 60000)

    Args:
        left_keys: Primary key columns of the left table (non-empty): the output's key.
        foreign_key_columns: Columns of the left table that refer to the right table's key.
        right_keys: Key columns of the right table, as many as ``foreign_key_columns``,
            compared pairwise with them.
        how: See :data:`ForeignKeyHow`.
        {two_table_args}
        key_groups: Number of key groups of the left primary key; every key group holds the
            whole right table (each right update is replicated into all of them).
        left_idle_timeout_ms: The left input is idle after this long (ms, processing time)
            without a row, and then left out of the watermark's minimum (None: never;
            needs ``heartbeat_location``; docs/idle-inputs.md).
        right_idle_timeout_ms: The same for the right input.
    """

    OPERATOR = "foreign_key"

    # The fields are _ForeignKeyColumns' then TwoTableFields' (the Args above, in that
    # order); `how` narrowed here.
    how: ForeignKeyHow = "inner"

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        for field in ("left_keys", "foreign_key_columns", "right_keys"):
            names = as_name_tuple(field, getattr(self, field))
            assert names is not None
            if not names:
                msg = (
                    f"`{field}` must be non-empty (got {field}=[]); give the left table's "
                    "primary key, the left columns holding the foreign key and the right "
                    "table's key"
                )
                raise ConfigError(msg)
            setattr_(self, field, names)
        if len(self.foreign_key_columns) != len(self.right_keys):
            msg = (
                f"`foreign_key_columns` and `right_keys` must have equal length (got "
                f"{list(self.foreign_key_columns)} and {list(self.right_keys)}); they are "
                "compared pairwise"
            )
            raise ConfigError(msg)
        check_literal("how", self.how, ForeignKeyHow)
        self._check_table_fields("the foreign-key join")
        et = self.side_event_time_column("left")
        tombstone = self.side_tombstone_column("left")
        clash = [c for c in self.foreign_key_columns if c in (et, tombstone)]
        if clash:
            msg = (
                f"`foreign_key_columns` {clash} name the left table's event-time or tombstone "
                f"column (got foreign_key_columns={list(self.foreign_key_columns)}); name the "
                "columns holding the right table's key"
            )
            raise ConfigError(msg)

    def _own_fingerprint_fields(self) -> dict[str, object]:
        return {"foreign_key_columns": list(self.foreign_key_columns)}
