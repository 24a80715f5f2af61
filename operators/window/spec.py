"""The window spec: :class:`Aggregation` and :class:`Window`, the user's vocabulary.

Validated when built (SEMANTICS §6). Neighbours: ``plan.py`` resolves a spec against the input
schema, ``step.py`` runs it, ``shim.py`` hands it to Spark. What the late-data fields mean is
shared with the join spec (:class:`interlace.operators.common.spec.LateDataFields`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from interlace.operators.common.checks import as_name_tuple, check_int, check_literal
from interlace.operators.common.names import DEAD_LETTER_COLUMN
from interlace.operators.common.spec import (
    DEFAULT_DLQ_HORIZON_MS,
    LateData,
    LateDataFields,
    TimeMode,
)
from interlace.operators.errors import ConfigError
from interlace.state.keygroups import DEFAULT_KEY_GROUPS

__all__ = [
    "RETRACTED_COLUMN",
    "REVISION_COLUMN",
    "AggName",
    "Aggregation",
    "DistinctMode",
    "Window",
    "WindowKind",
    "output_names",
]

WindowKind = Literal["tumbling", "hopping", "session"]
"""Window kinds.

* ``"tumbling"``: ``start = floor(t / duration) * duration``, one window per row.
* ``"hopping"``: every ``start = k * hop`` with ``start <= t < start + duration``.
* ``"session"``: per group, rows chaining with gaps ``<= gap_ms`` form ``[first t, last t + gap)``:
  sessions that overlap or touch merge (Spark's ``session_window``).
"""

AggName = Literal["count", "sum", "min", "max", "avg", "first", "last", "count_distinct"]
"""Aggregations: ``count`` (all rows, or non-null values of ``column``), ``sum``, ``min``,
``max``, ``avg``, ``first`` / ``last`` (value at min / max event time, ties by arrival order),
``count_distinct`` (``mode="approximate"``: HyperLogLog p=14; ``"exact"``: a capped set)."""

DistinctMode = Literal["approximate", "exact"]
"""``count_distinct`` modes: ``"approximate"`` (HyperLogLog, ~0.81% error), ``"exact"``."""

REVISION_COLUMN = "revision"
RETRACTED_COLUMN = "retracted"


def output_names(
    start: str, end: str, group_by: Sequence[str], aliases: Sequence[str], late_data: str
) -> list[str]:
    """Return the output column names in order.

    The window bounds, the groups, the aggregation aliases, then ``revision``, ``retracted``
    under reopen and ``_dead_letter`` under dlq.
    """
    names = [start, end, *group_by, *aliases]
    if late_data == "reopen":
        names += [REVISION_COLUMN, RETRACTED_COLUMN]
    if late_data == "dlq":
        names.append(DEAD_LETTER_COLUMN)
    return names


@dataclass(frozen=True, slots=True)
class Aggregation:
    """One aggregation of a window (seed 001's table).

    Example:
        >>> Aggregation(agg="sum", column="amount", as_="amount_sum").agg
        'sum'

    Args:
        agg: See :data:`AggName`.
        as_: Output column name (required, no auto-derivation).
        column: Input column (``None`` only for ``count``, meaning ``count(*)``).
        mode: ``count_distinct`` only: ``"approximate"`` (default) or ``"exact"``.
        max_distinct_values_per_group: Required for exact ``count_distinct``; the query fails
            loudly when one (window, group) passes it.
    """

    agg: AggName
    as_: str
    column: str | None = None
    mode: DistinctMode | None = None
    max_distinct_values_per_group: int | None = None

    def __post_init__(self) -> None:
        check_literal("agg", self.agg, AggName)
        if not isinstance(self.as_, str) or not self.as_:
            msg = (
                f"`as_` must name the output column of aggregation {self.agg!r} (got {self.as_!r})"
            )
            raise ConfigError(msg)
        if self.column is None and self.agg != "count":
            msg = (
                f"aggregation `{self.as_}`: agg={self.agg!r} needs a `column`; "
                "only count may omit it"
            )
            raise ConfigError(msg)
        if self.agg == "count_distinct":
            if self.mode is not None:
                check_literal("mode", self.mode, DistinctMode)
            if self.mode == "exact":
                check_int(
                    "max_distinct_values_per_group",
                    self.max_distinct_values_per_group,
                    minimum=1,
                    allow_none=True,
                )
                if self.max_distinct_values_per_group is None:
                    msg = (
                        f"aggregation `{self.as_}`: exact count_distinct requires "
                        "`max_distinct_values_per_group` (e.g. 100_000); or use "
                        "mode='approximate'"
                    )
                    raise ConfigError(msg)
        elif self.mode is not None:
            msg = (
                f"`mode` only applies to count_distinct (got agg={self.agg!r}, mode={self.mode!r})"
            )
            raise ConfigError(msg)


@dataclass(frozen=True, slots=True)
class Window(LateDataFields):
    """A time-windowed aggregation (SEMANTICS §3, seed 001).

    Example:
        >>> w = Window(kind="tumbling", duration_ms=60_000, event_time_column="ts",
        ...            group_by=["user_id"], max_groups_per_window=1_000_000,
        ...            aggregations=[Aggregation(agg="count", as_="clicks")])
        >>> w.horizon_ms, w.watermark_delay_ms
        (0, 0)

    Args:
        kind: See :data:`WindowKind`.
        duration_ms: Window length (tumbling, hopping).
        hop_ms: Hop (hopping): ``0 < hop_ms <= duration_ms``.
        gap_ms: Session gap (session).
        event_time_column: A ``TimestampType`` column.
        time_mode: ``"event"`` or ``"processing"``.
        lateness_ms: How far behind the maximum event time a row may arrive.
        group_by: Group-by columns (NULLs form one group).
        late_data: ``"drop"``, ``"reopen"`` or ``"dlq"``.
        allowed_lateness_ms: Under reopen: how long closed windows are kept (default
            ``lateness_ms``; must be > 0).
        dlq_horizon_ms: Under dlq: how far behind ``wm`` late rows still reach the operator.
        max_groups_per_window: Required fail-loud cap on groups per window (per key group;
            see docs/windows.md).
        window_start_column: Output name of the window start.
        window_end_column: Output name of the window end.
        name: Pipeline name, used in the cap error.
        aggregations: The aggregations, in output order.
        key_groups: Number of key groups.
    """

    kind: WindowKind
    aggregations: Sequence[Aggregation]
    max_groups_per_window: int | None = None
    duration_ms: int | None = None
    hop_ms: int | None = None
    gap_ms: int | None = None
    event_time_column: str = "ts"
    time_mode: TimeMode = "event"
    lateness_ms: int = 0
    group_by: Sequence[str] = ()
    late_data: LateData = "drop"
    allowed_lateness_ms: int | None = None
    dlq_horizon_ms: int = DEFAULT_DLQ_HORIZON_MS
    window_start_column: str = "window_start"
    window_end_column: str = "window_end"
    name: str = "window"
    key_groups: int = DEFAULT_KEY_GROUPS

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        check_literal("kind", self.kind, WindowKind)
        check_literal("late_data", self.late_data, LateData)
        check_literal("time_mode", self.time_mode, TimeMode)
        group_by = as_name_tuple("group_by", self.group_by)
        assert group_by is not None
        setattr_(self, "group_by", group_by)
        aggs = tuple(self.aggregations)
        if not aggs or not all(isinstance(a, Aggregation) for a in aggs):
            msg = "`aggregations` must be a non-empty list of Aggregation(...)"
            raise ConfigError(msg)
        setattr_(self, "aggregations", aggs)
        if self.max_groups_per_window is None:
            msg = (
                "`max_groups_per_window` is required (a fail-loud state cap), e.g. "
                "max_groups_per_window=1_000_000"
            )
            raise ConfigError(msg)
        check_int("max_groups_per_window", self.max_groups_per_window, minimum=1)
        if self.kind == "session":
            check_int("gap_ms", self.gap_ms, minimum=1)
            if self.duration_ms is not None or self.hop_ms is not None:
                msg = "kind='session' takes `gap_ms` only; remove `duration_ms`/`hop_ms`"
                raise ConfigError(msg)
        else:
            if self.duration_ms is None:
                msg = f"kind={self.kind!r} requires `duration_ms` (e.g. duration_ms=60_000)"
                raise ConfigError(msg)
            check_int("duration_ms", self.duration_ms, minimum=1)
            if self.gap_ms is not None:
                msg = f"`gap_ms` only applies to kind='session' (got kind={self.kind!r})"
                raise ConfigError(msg)
            if self.kind == "hopping":
                if self.hop_ms is None:
                    msg = "kind='hopping' requires `hop_ms` in (0, `duration_ms`]"
                    raise ConfigError(msg)
                check_int("hop_ms", self.hop_ms)
                if not 0 < self.hop_ms <= self.duration_ms:
                    msg = (
                        f"`hop_ms` must be in (0, `duration_ms`] (got hop_ms={self.hop_ms}, "
                        f"duration_ms={self.duration_ms}); lower hop_ms or use kind='tumbling'"
                    )
                    raise ConfigError(msg)
            elif self.hop_ms is not None:
                msg = "`hop_ms` only applies to kind='hopping'; remove it or use kind='hopping'"
                raise ConfigError(msg)
        self._check_late_data_fields()
        names = self.output_columns
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            msg = (
                f"output column(s) {dupes} collide (aggregation aliases `as_`, `group_by`, "
                "window column names and revision/retracted/_dead_letter must be distinct); "
                "rename the alias"
            )
            raise ConfigError(msg)
        self._check_key_groups()

    # allowance_ms (AL: how long reopen keeps a closed window), horizon_ms (H) and
    # watermark_delay_ms: LateDataFields.

    def output_lags_ms(self) -> dict[str, int]:
        """Return the lag of each output time column, in ms (SEMANTICS §11).

        The lag of a column: every row emitted in a micro-batch has a time in that column at
        or after ``wm - lag``, ``wm`` being the operator watermark of the micro-batch before
        it. A chain stage reading this output on that column needs ``lateness_ms >= lag``
        (docs/chains.md derives each value). Output columns not listed have no such bound.

        A window is emitted in the first micro-batch whose ``wm`` reaches its end, so its end
        is past the previous ``wm`` (lag 0); under ``reopen`` a kept window re-emits while
        ``wm < end + AL``, so its end is past ``wm - AL``. A tumbling or hopping window's ends
        and ``wm`` are whole milliseconds, so "past" is by 1 ms at least: lag ``AL - 1``
        (``AL > 0`` under reopen), and its start, ``duration_ms`` before its end, lags by
        ``duration_ms - 1`` more. A session's end can be any microsecond (lag ``AL``), and
        its start has no bound (a session lasts while rows come).
        """
        al = self.allowance_ms
        if self.kind == "session":
            return {self.window_end_column: al}
        assert self.duration_ms is not None
        end = al - 1 if al > 0 else 0  # under drop / dlq the end is past wm itself
        start = self.duration_ms + al - 1
        return {self.window_start_column: start, self.window_end_column: end}

    @property
    def output_columns(self) -> list[str]:
        """Output column names in order."""
        bounds = (self.window_start_column, self.window_end_column)
        aliases = [a.as_ for a in self.aggregations]
        return output_names(*bounds, self.group_by, aliases, self.late_data)
