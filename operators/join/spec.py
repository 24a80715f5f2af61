"""The join spec: :class:`Join`, the user's vocabulary, validated when it is built.

Neighbours: ``plan.py`` resolves a spec against the input schemas, ``step.py`` runs it,
``shim.py`` hands it to Spark. What the late-data fields mean is shared with the window spec
(:class:`interlace.operators.common.spec.LateDataFields`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from interlace.operators.common.checks import (
    as_name_tuple,
    check_event_time_columns,
    check_idle_timeouts,
    check_int,
    check_key_lists,
    check_literal,
    check_str_fields,
)
from interlace.operators.common.spec import (
    DEFAULT_DLQ_HORIZON_MS,
    LateData,
    LateDataFields,
    TimeMode,
)
from interlace.operators.errors import ConfigError
from interlace.state import blob
from interlace.state.keygroups import DEFAULT_JOIN_KEY_GROUPS, KEY_GROUP_ID_SCHEME

__all__ = ["Join", "JoinHow"]

JoinHow = Literal["inner", "left", "right", "full", "left_semi", "left_anti"]
"""Which rows a join emits.

* ``"inner"``: one row per matching pair.
* ``"left"``: inner, plus each left row that never matched, null-padded, at its eviction.
* ``"right"``: inner, plus each right row that never matched, null-padded, at its eviction.
* ``"full"``: inner, plus the unmatched rows of both sides at their eviction.
* ``"left_semi"``: each left row once, unprefixed, in the call where it first matches.
* ``"left_anti"``: each left row that never matched, unprefixed, at its eviction.
"""


@dataclass(frozen=True, slots=True)
class Join(LateDataFields):
    """A keyed, time-bounded stream-stream join (SEMANTICS §2).

    Example:
        >>> from interlace import Join
        >>> spec = Join(left_keys=["order_id"], right_keys=["order_id"], how="left",
        ...             time_window_ms=300_000, event_time_column="ts")
        >>> (spec.lower, spec.upper)
        (-300000, 300000)

    Args:
        left_keys: Key columns of the left input (non-empty).
        right_keys: Key columns of the right input, same length, compared pairwise.
        how: See :data:`JoinHow`.
        time_window_ms: Symmetric bound ``|r.t - l.t| <= time_window_ms``.
        lower_ms: Asymmetric lower bound of ``r.t - l.t`` (with ``upper_ms``).
        upper_ms: Asymmetric upper bound of ``r.t - l.t`` (with ``lower_ms``).
        event_time_column: Event-time column of both inputs.
        left_event_time_column: Overrides ``event_time_column`` for the left input.
        right_event_time_column: Overrides ``event_time_column`` for the right input.
        time_mode: ``"event"`` or ``"processing"`` (see :data:`TimeMode`).
        lateness_ms: How far behind the maximum event time seen a row may arrive.
        late_data: See :data:`LateData`.
        allowed_lateness_ms: Grace under ``reopen`` (default ``lateness_ms``; must be > 0).
        dlq_horizon_ms: Under ``dlq``: late rows up to this far behind ``wm`` still reach the
            operator and are dead-lettered (older ones are dropped by Spark, counted in its
            ``numRowsDroppedByWatermark``).
        left_prefix: Prefix of left output columns.
        right_prefix: Prefix of right output columns.
        output_left_columns: Left columns to output (default: all, in input order).
        output_right_columns: Right columns to output (default: all, in input order).
        key_groups: Number of key groups (state and Python calls are per key group; default
            4, one per shuffle partition of ``local_session``; see docs/state.md).
        name: A name for metrics and error messages.
        left_idle_timeout_ms: The left input is idle after this long (ms, processing time)
            without a row, and then left out of the watermark's minimum (None: never;
            needs ``heartbeat_location``; docs/idle-inputs.md).
        right_idle_timeout_ms: The same for the right input.
    """

    left_keys: Sequence[str]
    right_keys: Sequence[str]
    how: JoinHow = "inner"
    time_window_ms: int | None = None
    lower_ms: int | None = None
    upper_ms: int | None = None
    event_time_column: str | None = None
    left_event_time_column: str | None = None
    right_event_time_column: str | None = None
    time_mode: TimeMode = "event"
    lateness_ms: int = 0
    late_data: LateData = "drop"
    allowed_lateness_ms: int | None = None
    dlq_horizon_ms: int = DEFAULT_DLQ_HORIZON_MS
    left_prefix: str = "left_"
    right_prefix: str = "right_"
    output_left_columns: Sequence[str] | None = None
    output_right_columns: Sequence[str] | None = None
    key_groups: int = DEFAULT_JOIN_KEY_GROUPS
    name: str = "join"
    left_idle_timeout_ms: int | None = None
    right_idle_timeout_ms: int | None = None

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        check_key_lists(self, "an unkeyed join is a cross join — give the key columns to join on")
        setattr_(
            self,
            "output_left_columns",
            as_name_tuple("output_left_columns", self.output_left_columns, allow_none=True),
        )
        setattr_(
            self,
            "output_right_columns",
            as_name_tuple("output_right_columns", self.output_right_columns, allow_none=True),
        )
        check_literal("how", self.how, JoinHow)
        check_literal("late_data", self.late_data, LateData)
        check_literal("time_mode", self.time_mode, TimeMode)
        if self.time_window_ms is not None:
            check_int("time_window_ms", self.time_window_ms, minimum=0)
            if self.lower_ms is not None or self.upper_ms is not None:
                msg = (
                    "give either `time_window_ms` (symmetric) or `lower_ms` and `upper_ms` "
                    f"(asymmetric), not both (got time_window_ms={self.time_window_ms}, "
                    f"lower_ms={self.lower_ms}, upper_ms={self.upper_ms})"
                )
                raise ConfigError(msg)
        else:
            if self.lower_ms is None or self.upper_ms is None:
                msg = (
                    "the join needs a time bound: set `time_window_ms` (|r.t - l.t| <= W) or both "
                    f"`lower_ms` and `upper_ms` (got lower_ms={self.lower_ms}, "
                    f"upper_ms={self.upper_ms})"
                )
                raise ConfigError(msg)
            check_int("lower_ms", self.lower_ms)
            check_int("upper_ms", self.upper_ms)
            if self.lower_ms > self.upper_ms:
                msg = (
                    f"`lower_ms` must be <= `upper_ms` (got lower_ms={self.lower_ms}, "
                    f"upper_ms={self.upper_ms}); the bound is r.t - l.t in [lower_ms, upper_ms]"
                )
                raise ConfigError(msg)
        self._check_late_data_fields()
        check_event_time_columns(self)
        check_idle_timeouts(self)
        check_str_fields(self, "left_prefix", "right_prefix", "name")
        self._check_key_groups()

    # Derived values --------------------------------------------------------------------------

    @property
    def lower(self) -> int:
        """Lower bound of ``r.t - l.t`` in ms."""
        if self.time_window_ms is not None:
            return -self.time_window_ms
        assert self.lower_ms is not None
        return self.lower_ms

    @property
    def upper(self) -> int:
        """Upper bound of ``r.t - l.t`` in ms."""
        if self.time_window_ms is not None:
            return self.time_window_ms
        assert self.upper_ms is not None
        return self.upper_ms

    # allowance_ms (AL), horizon_ms (H) and watermark_delay_ms: LateDataFields.

    def output_lags_ms(self) -> dict[str, int]:
        """Return the lag of each output time column, in ms (SEMANTICS §11).

        The lag of a column: every row emitted in a micro-batch has a time in that column at
        or after ``wm - lag``, ``wm`` being the operator watermark of the micro-batch before
        it. A chain stage reading this output on that column needs ``lateness_ms >= lag``
        (docs/chains.md derives each value). Output columns not listed have no such bound.

        A left row is buffered (and may be emitted, matched or at eviction) until ``wm``
        passes ``t + upper + AL``, a right row until it passes ``t - lower + AL``: the left
        event-time column lags by ``upper + AL``, the right one by ``AL - lower`` (at least
        0), each where the output holds it (prefixed; semi / anti joins: the left one,
        unprefixed).
        """
        al = self.allowance_ms
        lags = {"left": max(0, self.upper + al), "right": max(0, al - self.lower)}
        out: dict[str, int] = {}
        for side, chosen, prefix in (
            ("left", self.output_left_columns, self.left_prefix),
            ("right", self.output_right_columns, self.right_prefix),
        ):
            et = self.side_event_time_column(side)
            if et is None or (chosen is not None and et not in chosen):
                continue
            if self.how in ("left_semi", "left_anti"):
                if side == "left":
                    out[et] = lags["left"]
                continue
            out[prefix + et] = lags[side]
        return out

    def side_event_time_column(self, side: str) -> str | None:
        """Return the event-time column of ``side`` (``"left"`` or ``"right"``)."""
        override = self.left_event_time_column if side == "left" else self.right_event_time_column
        return override if override is not None else self.event_time_column

    def state_fingerprint(self, left_columns: Sequence[str], right_columns: Sequence[str]) -> str:
        """Fingerprint of the fields that give buffered state its meaning."""
        return blob.fingerprint(
            {
                "left_keys": list(self.left_keys),
                "right_keys": list(self.right_keys),
                "how": self.how,
                "lower": self.lower,
                "upper": self.upper,
                "allowance": self.allowance_ms,
                "key_groups": self.key_groups,
                "key_group_ids": KEY_GROUP_ID_SCHEME,
                "left_columns": list(left_columns),
                "right_columns": list(right_columns),
            }
        )
