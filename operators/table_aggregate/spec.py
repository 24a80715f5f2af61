"""The table aggregation spec: :class:`TableAggregate`, validated when it is built.

Neighbours: ``plan.py`` resolves a spec against the input schema, ``step.py`` runs its two
stages, ``shim.py`` hands them to Spark. SEMANTICS §10 is the contract; docs/table-aggregate.md
the user's guide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from interlace.operators.common.checks import (
    as_name_tuple,
    check_int,
    check_late_data_fields,
    check_literal,
)
from interlace.operators.common.names import EVENT_TIME_OUT, OP_COLUMN, VERSION_COLUMN
from interlace.operators.common.spec import DEFAULT_DLQ_HORIZON_MS
from interlace.operators.common.tables import (
    Emit,
    TableLateData,
    check_table_late_data,
    check_value_columns,
)
from interlace.operators.errors import ConfigError
from interlace.operators.window.spec import Aggregation
from interlace.state import blob
from interlace.state.keygroups import (
    DEFAULT_JOIN_KEY_GROUPS,
    KEY_GROUP_ID_SCHEME,
    validate_key_groups,
)

__all__ = ["REMOVABLE_AGGS", "TableAggregate"]

#: The aggregators exact under removal (SEMANTICS §10); ``count_distinct`` only exact.
REMOVABLE_AGGS = ("count", "sum", "min", "max", "avg", "count_distinct")


def _check_aggregation(a: object) -> Aggregation:
    """One aggregation, refused with the alternative when it cannot be removed from."""
    if not isinstance(a, Aggregation):
        msg = (
            f"`aggregations` must hold Aggregation(...) values (got {a!r}); e.g. "
            'Aggregation(agg="sum", column="balance", as_="total")'
        )
        raise ConfigError(msg)
    if a.agg in ("first", "last"):
        msg = (
            f"aggregation `{a.as_}`: agg={a.agg!r} cannot be removed from (a table "
            "aggregation takes an updated or deleted row out of its group, SEMANTICS §10); "
            "use min / max of the column, or count_distinct mode='exact'"
        )
        raise ConfigError(msg)
    if a.agg == "count_distinct" and a.mode != "exact":
        msg = (
            f"aggregation `{a.as_}`: approximate count_distinct (HyperLogLog) cannot be "
            "removed from (SEMANTICS §10); use count_distinct mode='exact' with "
            "max_distinct_values_per_group (e.g. 100_000)"
        )
        raise ConfigError(msg)
    return a


@dataclass(frozen=True, slots=True)
class TableAggregate:
    """A changelog table re-grouped by other columns and aggregated (SEMANTICS §7, §10).

    Updates are applied one at a time in event-time order (ties: per key the later arrival
    wins; between keys, key order), under ``emit="final"`` once ``wm > t`` (strict), under
    ``"eager"`` in the call that receives them. Applying an update of a key takes the key's
    previous row out of its old group and puts the new row (unless a tombstone) into its new
    group; each group it changed emits ``upsert`` with its aggregates, or ``delete`` once it
    holds no row. Output: the ``group_by`` columns, the aggregation aliases, ``op``,
    ``event_time`` (the applied update's) and ``version`` (per group, from 0, +1 per row).
    An update older than the latest applied one of its key is late.

    Example:
        >>> from interlace import Aggregation, TableAggregate
        >>> spec = TableAggregate(keys=["account_id"], group_by=["region"],
        ...     aggregations=[Aggregation(agg="count", as_="accounts")],
        ...     event_time_column="ts", lateness_ms=60_000)
        >>> spec.output_names(["region"])
        ('region', 'accounts', 'op', 'event_time', 'version')

    Args:
        keys: The input table's primary key columns (non-empty).
        group_by: The columns to group by: any of the table's columns but the event time
            (keys allowed); ``[]`` aggregates the whole table into one group.
        aggregations: ``count``, ``count(col)``, ``sum``, ``avg``, ``min``, ``max`` and exact
            ``count_distinct`` (with its cap); ``first``, ``last`` and approximate
            ``count_distinct`` cannot be removed from (a config error).
        event_time_column: The updates' event-time (valid-from) column.
        lateness_ms: How far behind the maximum event time seen an update may arrive.
        emit: ``"final"`` (default) or ``"eager"`` (see the table joins).
        tombstone_column: Optional boolean column; true = delete. Without it, an update whose
            value columns are all NULL is a tombstone.
        value_columns: The table's value columns (default: every column but the keys, the
            event time and the tombstone column), for the all-NULL tombstone rule.
        late_data: ``"drop"`` (counted) or ``"dlq"`` (dead letters); ``"reopen"`` is an error.
        dlq_horizon_ms: Under ``dlq``: how far behind ``wm`` a late update may be and still
            reach the operator to be dead-lettered.
        key_groups: Number of key groups of each of the two stages (by key, by group).
    """

    OPERATOR = "table_aggregate"

    keys: Sequence[str]
    group_by: Sequence[str]
    aggregations: Sequence[Aggregation]
    event_time_column: str | None = None
    lateness_ms: int = 0
    emit: Emit = "final"
    tombstone_column: str | None = None
    value_columns: Sequence[str] | None = None
    late_data: TableLateData = "drop"
    dlq_horizon_ms: int = DEFAULT_DLQ_HORIZON_MS
    key_groups: int = DEFAULT_JOIN_KEY_GROUPS

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        keys = as_name_tuple("keys", self.keys)
        assert keys is not None
        if not keys:
            msg = "`keys` must name the input table's primary key columns (got keys=[])"
            raise ConfigError(msg)
        setattr_(self, "keys", keys)
        group_by = as_name_tuple("group_by", self.group_by)
        assert group_by is not None
        setattr_(self, "group_by", group_by)
        if isinstance(self.aggregations, str | Aggregation) or not self.aggregations:
            msg = (
                "`aggregations` must be a non-empty list of Aggregation(...) (got "
                f"aggregations={self.aggregations!r}); e.g. [Aggregation(agg='count', "
                "as_='rows')]"
            )
            raise ConfigError(msg)
        aggs = tuple(_check_aggregation(a) for a in self.aggregations)
        setattr_(self, "aggregations", aggs)
        if not isinstance(self.event_time_column, str) or not self.event_time_column:
            msg = (
                "`event_time_column` must name the updates' event-time column (got "
                f"event_time_column={self.event_time_column!r})"
            )
            raise ConfigError(msg)
        check_literal("emit", self.emit, Emit)
        if self.late_data == "reopen":  # type: ignore[comparison-overlap]  # a user's value
            msg = (
                "`late_data`='reopen' is not supported by the table aggregation (SEMANTICS "
                "§10: an update older than its key's applied one is never re-applied); use "
                "late_data='drop' (counted) or 'dlq' (dead letters), and raise `lateness_ms` "
                "to accept later updates"
            )
            raise ConfigError(msg)
        check_table_late_data(self.late_data, "the table aggregation")
        check_int("lateness_ms", self.lateness_ms, minimum=0)
        check_late_data_fields(self.late_data, self.lateness_ms, None, self.dlq_horizon_ms, 0)
        setattr_(self, "value_columns", check_value_columns(
            "value_columns", self.value_columns, keys, self.event_time_column,
            self.tombstone_column))
        if self.event_time_column in group_by:
            msg = (
                f"`group_by` holds the event-time column {self.event_time_column!r}: the "
                "event time is the update's valid-from time, not an attribute to group by "
                "(SEMANTICS §10); group by a column computed from it upstream"
            )
            raise ConfigError(msg)
        fixed_cols = [g for g in group_by if g in (OP_COLUMN, EVENT_TIME_OUT, VERSION_COLUMN)]
        if fixed_cols:
            msg = (
                f"`group_by` names {fixed_cols}, which are output columns of every changelog "
                "(op, event_time, version): the output would have two columns of that name; "
                "rename the column upstream (e.g. in the source's `sql`)"
            )
            raise ConfigError(msg)
        dupes = sorted({g for g in group_by if group_by.count(g) > 1})
        if dupes:
            msg = f"`group_by` names {dupes} more than once; list each column once"
            raise ConfigError(msg)
        aliases = [a.as_ for a in aggs]
        clash = [a for a in aliases if a in group_by]
        if clash:
            msg = (
                f"aggregation alias(es) {clash} collide with `group_by` columns; rename the "
                "alias"
            )
            raise ConfigError(msg)
        fixed = [a for a in aliases if a in (OP_COLUMN, EVENT_TIME_OUT, VERSION_COLUMN)]
        twice = sorted({a for a in aliases if aliases.count(a) > 1})
        if fixed or twice:
            msg = (
                f"aggregation alias(es) {fixed or twice} "
                + ("are output columns of every changelog (op, event_time, version)"
                   if fixed else "are used more than once")
                + "; rename the alias"
            )
            raise ConfigError(msg)
        try:
            validate_key_groups(self.key_groups)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    @property
    def horizon_ms(self) -> int:
        """``H``: 0, plus ``dlq_horizon_ms`` under dlq (as the table-table join)."""
        return self.dlq_horizon_ms if self.late_data == "dlq" else 0

    @property
    def watermark_delay_ms(self) -> int:
        """The delay interlace passes to ``withWatermark``: ``lateness_ms + H``."""
        return self.lateness_ms + self.horizon_ms

    @property
    def columns(self) -> tuple[str, ...]:
        """The input columns the aggregations read, each once, in first-use order."""
        return tuple(dict.fromkeys(a.column for a in self.aggregations if a.column))

    def output_names(self, group_by: Sequence[str] | None = None) -> tuple[str, ...]:
        """The output columns: group columns, aliases, op, event_time, version (, dead letter)."""
        names = [*(self.group_by if group_by is None else group_by),
                 *(a.as_ for a in self.aggregations), OP_COLUMN, EVENT_TIME_OUT, VERSION_COLUMN]
        if self.late_data == "dlq":
            names.append("_dead_letter")
        return tuple(names)

    def output_lags_ms(self) -> dict[str, int]:
        """The lag of each output time column, in ms (SEMANTICS §11): ``event_time`` lags H.

        As the table joins: an update is applied once ``wm`` passes it (``final``) or on
        arrival (``eager``), after Spark's filter removed every update behind ``W = wm - H``.
        """
        return {EVENT_TIME_OUT: self.horizon_ms}

    def state_fingerprint(self, columns: Sequence[str]) -> str:
        """Fingerprint of what gives the stored rows and groups their meaning.

        ``lateness_ms`` is not in it: changing it keeps the state valid. ``late_data`` is:
        it decides which input columns the held updates carry (every one under ``dlq``, for
        the dead letters), and they are stored by position.
        """
        return blob.fingerprint({
            "operator": self.OPERATOR,
            "keys": list(self.keys),
            "group_by": list(self.group_by),
            "aggregations": [[a.agg, a.column, a.as_, a.max_distinct_values_per_group]
                             for a in self.aggregations],
            "emit": self.emit,
            "late_data": self.late_data,
            "tombstone": self.tombstone_column,
            "values": None if self.value_columns is None else list(self.value_columns),
            "key_groups": self.key_groups,
            "key_group_ids": KEY_GROUP_ID_SCHEME,
            "columns": list(columns),
        })
