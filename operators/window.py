"""Tumbling, hopping and session window aggregations on ``applyInPandasWithState``.

Windows are ``[start, end)``. Which watermark decides: the operator's ``wm = W + H``
(``max event time - lateness_ms``). A window **closes** (emits) in the first call where
``wm >= end`` (SEMANTICS §3), one row per (window, group): ``window_start``, ``window_end``,
the ``group_by`` columns, the aggregation aliases (then ``revision``, ``retracted`` under
``reopen``; ``_dead_letter`` under ``dlq``).

Within one call: ingest the rows (late-data policy per (row, window): a row is late for a
window that is closed in this call), then emit every closed window that is new or changed,
then evict what the policy no longer keeps (drop / dlq: every closed window; reopen: windows
with ``wm >= end + allowed_lateness_ms``).

State per key group: one slot per (window, group) with its accumulators
(:mod:`interlace.state.accumulators`), in a versioned msgpack blob (kind ``"window"``).
Changing ``kind``, durations, ``group_by`` or the aggregations between restarts invalidates
open windows: the blob's fingerprint makes that a loud error.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from interlace.operators._common import (
    DEAD_LETTER_COLUMN,
    DEFAULT_DLQ_HORIZON_MS,
    RESERVED_PREFIX,
    LateData,
    TimeMode,
    arrow_schema_for,
    as_name_tuple,
    check_counters,
    check_event_time,
    check_int,
    check_late_data_fields,
    check_literal,
    freeze_worker_gc,
    guard_source_checkout,
    quiet_worker_warnings,
    reject_reserved,
    require_columns,
    require_streaming,
)
from interlace.operators.errors import ConfigError, StateCapError
from interlace.operators.join import _json_value
from interlace.state import blob
from interlace.state.accumulators import Accumulator, make_accumulator
from interlace.state.buffers import ipc_to_table, table_to_ipc
from interlace.state.keygroups import (
    DEFAULT_KEY_GROUPS,
    KEY_GROUP_ID_SCHEME,
    key_group_sql,
    validate_key_groups,
)
from numpy.typing import NDArray

from interlace.metrics import add_counts, new_operator_id

__all__ = [
    "Aggregation",
    "Window",
    "WindowFunction",
    "WindowKind",
    "WindowOperator",
    "WindowPlan",
    "WindowState",
    "prepare_window",
    "step_window",
    "window_aggregate",
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

KEY_GROUP_COLUMN = RESERVED_PREFIX + "kg"
EVENT_TIME_COLUMN = RESERVED_PREFIX + "t"
TIME_US_COLUMN = RESERVED_PREFIX + "tus"
REVISION_COLUMN = "revision"
RETRACTED_COLUMN = "retracted"


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
class Window:
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
        check_late_data_fields(
            self.late_data,
            self.lateness_ms,
            self.allowed_lateness_ms,
            self.dlq_horizon_ms,
            self.allowance_ms,
        )
        names = [
            self.window_start_column,
            self.window_end_column,
            *self.group_by,
            *(a.as_ for a in aggs),
        ]
        if self.late_data == "reopen":
            names += [REVISION_COLUMN, RETRACTED_COLUMN]
        if self.late_data == "dlq":
            names.append(DEAD_LETTER_COLUMN)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            msg = (
                f"output column(s) {dupes} collide (aggregation aliases `as_`, `group_by`, "
                "window column names and revision/retracted/_dead_letter must be distinct); "
                "rename the alias"
            )
            raise ConfigError(msg)
        try:
            validate_key_groups(self.key_groups)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    @property
    def allowance_ms(self) -> int:
        """``AL``: how long reopen keeps a closed window (0 otherwise)."""
        if self.late_data != "reopen":
            return 0
        return self.lateness_ms if self.allowed_lateness_ms is None else self.allowed_lateness_ms

    @property
    def horizon_ms(self) -> int:
        """``H``: how far Spark's watermark is held behind ``wm``."""
        if self.late_data == "reopen":
            return self.allowance_ms
        return self.dlq_horizon_ms if self.late_data == "dlq" else 0

    @property
    def watermark_delay_ms(self) -> int:
        """The ``withWatermark`` delay: ``lateness_ms + H``."""
        return self.lateness_ms + self.horizon_ms

    @property
    def output_columns(self) -> list[str]:
        """Output column names in order."""
        names = [
            self.window_start_column,
            self.window_end_column,
            *self.group_by,
            *(a.as_ for a in self.aggregations),
        ]
        if self.late_data == "reopen":
            names += [REVISION_COLUMN, RETRACTED_COLUMN]
        if self.late_data == "dlq":
            names.append(DEAD_LETTER_COLUMN)
        return names


# --------------------------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AggPlan:
    """One aggregation, resolved: input column, accumulator dtype, output kind."""

    agg: str
    mode: str | None
    column: str | None
    alias: str
    dtype: str | None
    out_timestamp: bool
    cap: int | None
    result_type: pa.DataType = pa.int64()

    def accumulator(self) -> Accumulator[Any]:
        """Return this aggregation's accumulator (one shared instance per configuration)."""
        return _accumulator(self.agg, self.mode, self.column, self.dtype, self.cap)


@functools.lru_cache(maxsize=256)
def _accumulator(
    agg: str, mode: str | None, column: str | None, dtype: str | None, cap: int | None
) -> Accumulator[Any]:
    """Build an accumulator once per configuration.

    :func:`step_window` asks for each aggregation's accumulator several times per call, and
    :func:`make_accumulator` validates its arguments each time. An accumulator holds only its
    configuration and no method changes it, so one instance serves every caller. A process
    runs a handful of plans: 256 entries bound the cache without ever evicting in practice.
    """
    return make_accumulator(
        agg, mode, column=column, dtype=dtype, max_distinct_values_per_group=cap
    )


@dataclass(frozen=True)
class WindowPlan:
    """Everything :func:`step_window` needs (times in µs)."""

    kind: str
    duration_us: int
    hop_us: int
    gap_us: int
    late_data: str
    allowance_us: int
    horizon_ms: int
    group_by: tuple[str, ...]
    group_schema: pa.Schema
    aggs: tuple[AggPlan, ...]
    columns: tuple[str, ...]
    max_groups: int
    name: str
    start_column: str
    end_column: str
    fp: str

    @property
    def output_names(self) -> list[str]:
        """Output column names in order."""
        names = [self.start_column, self.end_column, *self.group_by, *(a.alias for a in self.aggs)]
        if self.late_data == "reopen":
            names += [REVISION_COLUMN, RETRACTED_COLUMN]
        if self.late_data == "dlq":
            names.append(DEAD_LETTER_COLUMN)
        return names

    @property
    def keeps_last_output(self) -> bool:
        """Sessions under reopen keep what each slot last emitted, to retract it exactly."""
        return self.kind == "session" and self.late_data == "reopen"

    @property
    def slot_schema(self) -> pa.Schema:
        """Arrow schema of the slot table (one row per (window, group)).

        ``emitted``: emitted at least once; ``revision``: of the last emit (-1: never);
        ``dirty``: changed since its last emit (new windows are dirty), so it emits when it
        closes. Sessions under reopen also keep their last emitted bounds and aggregates
        (``__last_*``): a session absorbed by a merge is retracted with exactly those.
        """
        base = [
            pa.field("start", pa.int64()),
            pa.field("end", pa.int64()),
            pa.field("emitted", pa.bool_()),
            pa.field("revision", pa.int64()),
            pa.field("dirty", pa.bool_()),
        ]
        last: list[pa.Field] = []
        if self.keeps_last_output:
            last = [pa.field("__last_start", pa.int64()), pa.field("__last_end", pa.int64())]
            last += [pa.field(f"__last_{i}", a.result_type) for i, a in enumerate(self.aggs)]
        return pa.schema(base + list(self.group_schema) + last)

    def new_slots(
        self,
        starts: NDArray[np.int64],
        ends: NDArray[np.int64],
        groups: pa.Table,
        src: NDArray[np.int64],
    ) -> pa.Table:
        """Slots for new windows ``[starts, ends)`` with the groups of rows ``src``."""
        n = len(starts)
        cols: dict[str, Any] = {
            "start": pa.array(starts, pa.int64()),
            "end": pa.array(ends, pa.int64()),
            "emitted": pa.array(np.zeros(n, dtype=bool)),
            "revision": pa.array(np.full(n, -1, dtype=np.int64)),
            "dirty": pa.array(np.ones(n, dtype=bool)),
            **{name: groups.column(name).take(pa.array(src)) for name in self.group_by},
        }
        for f in self.slot_schema:
            if f.name.startswith("__last_"):
                cols[f.name] = pa.nulls(n, f.type)
        return pa.table(cols, schema=self.slot_schema)

    @classmethod
    def from_schema(cls, spec: Window, schema: pa.Schema) -> WindowPlan:
        """Resolve ``spec`` against the input's Arrow schema (no Spark needed)."""
        names = tuple(schema.names)
        needed = [*spec.group_by, *(a.column for a in spec.aggregations if a.column)]
        missing = [n for n in needed if n not in names]
        if missing:
            msg = (
                f"`group_by`/`aggregations` name column(s) {missing} absent from the input "
                f"(its columns: {list(names)}); fix the name or select the column first"
            )
            raise ConfigError(msg)
        aggs = []
        for a in spec.aggregations:
            typ = schema.field(a.column).type if a.column else None
            dtype, out_ts = _acc_dtype(a, typ)
            aggs.append(
                AggPlan(
                    a.agg,
                    a.mode if a.agg == "count_distinct" else None,
                    a.column,
                    a.as_,
                    dtype,
                    out_ts,
                    a.max_distinct_values_per_group,
                    _result_arrow_type(a.agg, dtype, typ),
                )
            )
        d = (spec.duration_ms or 0) * 1000
        return cls(
            kind=spec.kind,
            duration_us=d,
            hop_us=(spec.hop_ms or 0) * 1000 if spec.kind == "hopping" else d,
            gap_us=(spec.gap_ms or 0) * 1000,
            late_data=spec.late_data,
            allowance_us=spec.allowance_ms * 1000,
            horizon_ms=spec.horizon_ms,
            group_by=tuple(spec.group_by),
            group_schema=pa.schema([schema.field(g) for g in spec.group_by]),
            aggs=tuple(aggs),
            columns=names,
            max_groups=int(spec.max_groups_per_window or 0),
            name=spec.name,
            start_column=spec.window_start_column,
            end_column=spec.window_end_column,
            fp=blob.fingerprint(
                {
                    "kind": spec.kind,
                    "d": spec.duration_ms,
                    "hop": spec.hop_ms,
                    "gap": spec.gap_ms,
                    "group_by": list(spec.group_by),
                    "al": spec.allowance_ms,
                    "late": spec.late_data,
                    "key_groups": spec.key_groups,
                    "key_group_ids": KEY_GROUP_ID_SCHEME,
                    "aggs": [[a.agg, a.column, a.as_, a.mode] for a in spec.aggregations],
                    "types": [str(schema.field(c).type) for c in needed],
                }
            ),
        )


def _result_arrow_type(agg: str, dtype: str | None, typ: pa.DataType | None) -> pa.DataType:
    """Arrow type of an aggregation's raw result (timestamps as int64 µs)."""
    if agg in ("count", "count_distinct"):
        return pa.int64()
    if agg == "avg" or dtype == "float64":
        return pa.float64()
    if dtype == "int64":
        return pa.int64()
    if dtype == "bool":
        return pa.bool_()
    assert typ is not None
    return typ


def _acc_dtype(a: Aggregation, typ: pa.DataType | None) -> tuple[str | None, bool]:
    """Accumulator dtype and whether the output is a timestamp, for one aggregation."""
    if typ is None or a.agg in ("count", "count_distinct"):
        if a.agg == "count_distinct" and typ is not None and pa.types.is_timestamp(typ):
            return "int64", False
        return None, False
    if pa.types.is_timestamp(typ):
        if a.agg in ("sum", "avg"):
            msg = f"aggregation `{a.as_}`: {a.agg} of timestamp column {a.column!r} is not defined"
            raise ConfigError(msg)
        return "int64", True
    if pa.types.is_integer(typ):
        return "int64", False
    if pa.types.is_floating(typ):
        return "float64", False
    if pa.types.is_boolean(typ):
        if a.agg in ("sum", "avg"):
            msg = f"aggregation `{a.as_}`: {a.agg} of boolean column {a.column!r}; cast it to int"
            raise ConfigError(msg)
        return "bool", False
    if a.agg in ("sum", "avg"):
        msg = (
            f"aggregation `{a.as_}`: {a.agg} needs a numeric column ({a.column!r} is {typ}); "
            "cast it to double or bigint first"
        )
        raise ConfigError(msg)
    return "object", False


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------


@dataclass
class WindowState:
    """A key group's windows: one slot per (window, group) plus each aggregation's state."""

    slots: pa.Table
    accs: list[Any]
    seq: int = 0

    @classmethod
    def empty(cls, plan: WindowPlan) -> WindowState:
        """No windows."""
        return cls(plan.slot_schema.empty_table(), [a.accumulator().init(0) for a in plan.aggs], 0)

    def encode(self, plan: WindowPlan) -> bytes:
        """Encode as a version-1 ``window`` blob."""
        body = {
            "slots": table_to_ipc(self.slots),
            "accs": [
                a.accumulator().to_msgpack(s) for a, s in zip(plan.aggs, self.accs, strict=True)
            ],
            "seq": int(self.seq),
        }
        return blob.encode("window", plan.fp, body)

    @classmethod
    def decode(cls, data: bytes, plan: WindowPlan) -> WindowState:
        """Decode a ``window`` blob (running the migration chain)."""
        body = blob.decode(data, kind="window", fp=plan.fp)
        accs = [
            a.accumulator().from_msgpack(o) for a, o in zip(plan.aggs, body["accs"], strict=True)
        ]
        return cls(ipc_to_table(body["slots"]), accs, int(body["seq"]))


# --------------------------------------------------------------------------------------------
# Step
# --------------------------------------------------------------------------------------------


@dataclass
class WindowStepResult:
    """Output, new state, the earliest pending deadline (µs, ``wm >=`` rule) and counters."""

    output: pd.DataFrame
    state: WindowState
    next_deadline_us: int | None
    counters: dict[str, int] = field(default_factory=dict)


def _group_codes(
    slot_groups: pa.Table, n_old: int, new_groups: pa.Table, n_new: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Shared integer codes for group tuples (NULL is a value: SQL GROUP BY).

    Row counts are passed explicitly: with no ``group_by`` the tables have no columns.
    """
    codes = np.zeros(n_old + n_new, dtype=np.int64)
    for i, name in enumerate(new_groups.column_names):
        both = pa.chunked_array(
            slot_groups.column(name).chunks + new_groups.column(name).chunks,
            type=new_groups.schema.field(name).type,
        )
        enc = pc.dictionary_encode(both, null_encoding="encode").combine_chunks()
        col = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        codes = codes * max(len(enc.dictionary), 1) + col
        if i:
            # Renumber the combined codes densely so that the next product cannot overflow. The
            # first column's dictionary indices are dense codes already: one column needs no pass.
            _, codes = np.unique(codes, return_inverse=True)
            codes = codes.astype(np.int64)
    return codes[:n_old], codes[n_old:]


_NS_RANGE_US = (2**63 - 1) // 1000
"""Times within ``±_NS_RANGE_US`` µs convert to ``datetime64[ns]`` exactly (and not to NaT)."""


def _ts_series(us: NDArray[np.int64]) -> pd.Series:
    """Turn int64 µs into a ``datetime64[ns, UTC]`` Series (what ``pd.to_datetime`` gives).

    numpy's unit cast skips the per-value checks of ``pd.to_datetime`` (several times faster)
    but wraps silently outside the nanosecond range, so times out there still go through
    ``pd.to_datetime``, which raises ``OutOfBoundsDatetime``.
    """
    if len(us) and (us.min() < -_NS_RANGE_US or us.max() > _NS_RANGE_US):
        return pd.Series(pd.to_datetime(us, unit="us", utc=True))
    return pd.Series(pd.DatetimeIndex(us.view("M8[us]").astype("M8[ns]")).tz_localize("UTC"))


def _raw_results(plan: WindowPlan, accs: list[Any], idx: NDArray[np.int64]) -> list[pd.Series]:
    """Each aggregation's result for slots ``idx`` (timestamps still int64 µs).

    ``result`` gives a Series with a fresh ``RangeIndex``, ready to go into the output frame.
    """
    out = []
    for a, s in zip(plan.aggs, accs, strict=True):
        acc = a.accumulator()
        out.append(acc.result(acc.take(s, idx)))
    return out


def _present(a: AggPlan, raw: pd.Series) -> pd.Series:
    """Turn a raw result into its output form (int64 µs -> UTC timestamps)."""
    if a.out_timestamp:
        return pd.to_datetime(raw.astype("Int64"), unit="us", utc=True)
    return raw


def step_window(
    plan: WindowPlan, state: WindowState, batch: pd.DataFrame, wm_us: int | None
) -> WindowStepResult:
    """Advance one key group by one call (see the module docstring for the order).

    Args:
        plan: The resolved window.
        state: The key group's windows before the call.
        batch: Input rows: ``__il_tus`` (int64 µs) and the input columns by name.
        wm_us: ``(W + H) * 1000``, or ``None`` while Spark has no watermark.

    Returns:
        Output frame (``plan.output_names``), new state, next deadline and counters.

    Raises:
        StateCapError: A window of this key group passed ``max_groups_per_window``.
    """
    counters: dict[str, int] = {}
    slots, accs, seq = state.slots, list(state.accs), state.seq
    null_letters: list[str] = []
    if len(batch) and batch[TIME_US_COLUMN].isna().any():
        # A row without an event time belongs to no window: dead-letter it under dlq (reason
        # "null_event_time"), else count it.
        null_t = batch[TIME_US_COLUMN].isna().to_numpy()
        if plan.late_data == "dlq":
            null_letters = _dead_letters(plan, batch[null_t], wm_us, reason="null_event_time")
            counters["dead_lettered"] = len(null_letters)
        else:
            counters["null_event_time_dropped"] = int(null_t.sum())
        batch = batch[~null_t].reset_index(drop=True)
    n = len(batch)
    t = np.asarray(batch[TIME_US_COLUMN].to_numpy(), dtype=np.int64) if n else np.zeros(0, np.int64)
    row_seq = seq + np.arange(n, dtype=np.int64)
    seq += n
    retract_parts: list[pd.DataFrame] = []
    changed = np.zeros(slots.num_rows, dtype=bool)
    al = plan.allowance_us

    if plan.kind != "session":
        # Assign: every k * hop with start <= t < start + d (tumbling: hop == d).
        k_lo = (t - plan.duration_us) // plan.hop_us + 1
        k_hi = t // plan.hop_us
        counts = np.maximum(k_hi - k_lo + 1, 0)
        rows = np.repeat(np.arange(n, dtype=np.int64), counts)
        offs = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(
            np.cumsum(counts) - counts, counts
        )
        starts = (np.repeat(k_lo, counts) + offs) * plan.hop_us
        ends = starts + plan.duration_us
        closed = (wm_us >= ends) if wm_us is not None else np.zeros(len(rows), dtype=bool)
        keep = ~closed | (
            (wm_us < ends + al)
            if (wm_us is not None and plan.late_data == "reopen")
            else np.zeros(len(rows), dtype=bool)
        )
        late_row = np.zeros(n, dtype=bool)
        late_row[rows[closed]] = True
        dropped_row = np.zeros(n, dtype=bool)
        dropped_row[rows[~keep]] = True
        rows, starts, ends = rows[keep], starts[keep], ends[keep]
    else:
        ends_own = t + plan.gap_us
        closed_row = (wm_us >= ends_own) if wm_us is not None else np.zeros(n, dtype=bool)
        keep_row = ~closed_row | (
            (wm_us < ends_own + al)
            if (wm_us is not None and plan.late_data == "reopen")
            else np.zeros(n, dtype=bool)
        )
        late_row, dropped_row = closed_row, ~keep_row
        rows = np.flatnonzero(keep_row).astype(np.int64)
        starts, ends = t[rows], ends_own[rows]

    letters = null_letters
    if plan.late_data == "dlq":
        if late_row.any():
            letters = letters + _dead_letters(plan, batch.iloc[np.flatnonzero(late_row)], wm_us)
            counters["dead_lettered"] = len(letters)
    elif dropped_row.any():
        counters["late_dropped"] = int(dropped_row.sum())

    group_tbl = pa.Table.from_pandas(
        batch.iloc[rows][list(plan.group_by)]
        if plan.group_by
        else pd.DataFrame(index=range(len(rows))),
        schema=plan.group_schema,
        preserve_index=False,
    )
    old_codes, new_codes = _group_codes(
        slots.select(list(plan.group_by)), slots.num_rows, group_tbl, len(rows)
    )
    slot_start = np.asarray(slots.column("start").to_numpy(), dtype=np.int64)
    slot_end = np.asarray(slots.column("end").to_numpy(), dtype=np.int64)
    emitted = np.asarray(slots.column("emitted").to_numpy(zero_copy_only=False), dtype=bool)
    revision = np.asarray(slots.column("revision").to_numpy(), dtype=np.int64)

    if plan.kind != "session":
        n_before = slots.num_rows
        target, slots, accs, changed = _fixed_slots(
            plan, slots, accs, old_codes, slot_start, new_codes, starts, ends, group_tbl
        )
        n_created, n_absorbed = slots.num_rows - n_before, 0
    else:
        target, slots, accs, changed, retract_parts, n_created, n_absorbed = _session_slots(
            plan,
            slots,
            accs,
            old_codes,
            slot_start,
            slot_end,
            emitted,
            revision,
            new_codes,
            starts,
            ends,
            group_tbl,
        )

    # Aggregate the taken (row, window) assignments. Each input column is gathered once, however
    # many aggregations read it (accumulators never modify their inputs).
    if len(rows):
        t_rows, seq_rows = t[rows], row_seq[rows]
        values = {
            c: batch[c].to_numpy()[rows] for c in dict.fromkeys(a.column for a in plan.aggs) if c
        }
        for i, a in enumerate(plan.aggs):
            column = values[a.column] if a.column else None
            accs[i] = a.accumulator().update(accs[i], target, column, t_rows, seq_rows)
        changed[target] = True

    if n_created:
        counters["windows_created"] = n_created
    if n_absorbed:
        counters["windows_absorbed"] = n_absorbed
    slot_start = np.array(slots.column("start").to_numpy(), dtype=np.int64)
    slot_end = np.array(slots.column("end").to_numpy(), dtype=np.int64)
    emitted = np.array(slots.column("emitted").to_numpy(zero_copy_only=False), dtype=bool)
    revision = np.array(slots.column("revision").to_numpy(), dtype=np.int64)
    dirty = np.array(slots.column("dirty").to_numpy(zero_copy_only=False), dtype=bool) | changed
    _check_cap(plan, slot_start, slot_end)

    # Emit every closed window that is new or changed.
    closed = (wm_us >= slot_end) if wm_us is not None else np.zeros(len(slot_end), dtype=bool)
    emit = np.flatnonzero(closed & dirty)
    parts = list(retract_parts)
    if len(emit):
        new_rev = np.where(emitted[emit], revision[emit] + 1, 0)
        frame, raw = _output_frame(plan, slots, accs, emit, new_rev, retracted=False)
        parts.append(frame)
        revision[emit] = new_rev
        emitted[emit] = True
        dirty[emit] = False
        counters["windows_emitted"] = len(emit)
        if plan.keeps_last_output:
            slots = _remember_output(plan, slots, emit, raw)
    if letters:
        dl = pd.DataFrame({c: [None] * len(letters) for c in plan.output_names})
        dl[DEAD_LETTER_COLUMN] = letters
        parts.append(dl)

    # Evict: drop / dlq every closed window; reopen windows with wm >= end + AL.
    if wm_us is None:
        evict = np.zeros(len(slot_end), dtype=bool)
    elif plan.late_data == "reopen":
        evict = wm_us >= slot_end + al
    else:
        evict = closed
    slots = (
        slots.set_column(2, "emitted", pa.array(emitted))
        .set_column(3, "revision", pa.array(revision))
        .set_column(4, "dirty", pa.array(dirty))
    )
    if evict.any():
        keep_idx = np.flatnonzero(~evict)
        slots = slots.take(pa.array(keep_idx))
        accs = [a.accumulator().take(s, keep_idx) for a, s in zip(plan.aggs, accs, strict=True)]
        counters["windows_evicted"] = int(evict.sum())
        slot_end, dirty = slot_end[keep_idx], dirty[keep_idx]
    # Next deadline: a dirty window emits at wm >= end; a clean kept (reopen) one is evicted
    # at wm >= end + AL.
    deadlines = np.where(dirty, slot_end, slot_end + al)
    with warnings.catch_warnings():
        # All-null dead-letter columns next to typed ones: the result dtype is what we want.
        warnings.simplefilter("ignore", FutureWarning)
        out = (
            pd.concat(parts, ignore_index=True) if len(parts) > 1 else (parts[0] if parts else None)
        )
    out = out if out is not None else pd.DataFrame({c: [] for c in plan.output_names})
    return WindowStepResult(
        out[plan.output_names] if len(out.columns) else out,
        WindowState(slots, accs, seq),
        int(deadlines.min()) if len(deadlines) else None,
        counters,
    )


def _fixed_slots(
    plan: WindowPlan,
    slots: pa.Table,
    accs: list[Any],
    old_codes: NDArray[np.int64],
    slot_start: NDArray[np.int64],
    new_codes: NDArray[np.int64],
    starts: NDArray[np.int64],
    ends: NDArray[np.int64],
    group_tbl: pa.Table,
) -> tuple[NDArray[np.int64], pa.Table, list[Any], NDArray[np.bool_]]:
    """Find or create the slot of each (window start, group) assignment.

    Held slots are distinct (window start, group) pairs, so a hash lookup finds each
    assignment's slot; new slots are appended in ascending (start, group) order.
    """
    all_starts = np.concatenate([slot_start, starts])
    s_codes, _ = pd.factorize(all_starts, sort=True)
    g_count = int(max(old_codes.max(initial=-1), new_codes.max(initial=-1))) + 1
    comb = s_codes.astype(np.int64) * max(g_count, 1) + np.concatenate([old_codes, new_codes])
    old_comb, new_comb = comb[: len(slot_start)], comb[len(slot_start) :]
    target = np.asarray(pd.Index(old_comb).get_indexer(new_comb), dtype=np.int64)
    found = target >= 0
    n_old = slots.num_rows
    if (~found).any():
        fresh, first_idx, inv = np.unique(new_comb[~found], return_index=True, return_inverse=True)
        src = np.flatnonzero(~found)[first_idx]
        target[~found] = n_old + inv
        add = plan.new_slots(starts[src], ends[src], group_tbl, src)
        slots = pa.concat_tables([slots, add]).combine_chunks()
        accs = [a.accumulator().grow(s, len(fresh)) for a, s in zip(plan.aggs, accs, strict=True)]
    return target, slots, accs, np.zeros(slots.num_rows, dtype=bool)


def _session_slots(
    plan: WindowPlan,
    slots: pa.Table,
    accs: list[Any],
    old_codes: NDArray[np.int64],
    slot_start: NDArray[np.int64],
    slot_end: NDArray[np.int64],
    emitted: NDArray[np.bool_],
    revision: NDArray[np.int64],
    new_codes: NDArray[np.int64],
    starts: NDArray[np.int64],
    ends: NDArray[np.int64],
    group_tbl: pa.Table,
) -> tuple[NDArray[np.int64], pa.Table, list[Any], NDArray[np.bool_], list[pd.DataFrame], int, int]:
    """Merge new rows' windows ``[t, t + gap)`` with the held sessions of their groups.

    Intervals of one group that overlap or touch (``start <= other end`` and ``other start <=
    end``, i.e. rows at most ``gap`` apart) chain into one cluster: sort by (group, start), keep
    the running max of end per group, and start a new cluster only where a start is strictly
    after the running end (Spark's ``session_window`` merges while ``start <= current end``).
    Held sessions take part alike, emitted or not, so a row touching a session kept under
    reopen merges into it. Per cluster with new rows, the survivor is the earliest-starting
    emitted session, else the earliest held one, else a new slot; every other held session of
    the cluster is merged into it, and an absorbed session that had been emitted is retracted
    (its last output, ``revision + 1``, ``retracted=true``). Vectorised with pandas groupby; no
    loop over rows.
    """
    n_old, n_new = slots.num_rows, len(starts)
    if n_new == 0:
        return np.zeros(0, dtype=np.int64), slots, accs, np.zeros(n_old, dtype=bool), [], 0, 0
    items = pd.DataFrame(
        {
            "g": np.concatenate([old_codes, new_codes]),
            "s": np.concatenate([slot_start, starts]),
            "e": np.concatenate([slot_end, ends]),
            "old": np.concatenate([np.ones(n_old, dtype=bool), np.zeros(n_new, dtype=bool)]),
            "idx": np.concatenate([np.arange(n_old), np.arange(n_new)]).astype(np.int64),
            "emitted": np.concatenate([emitted, np.zeros(n_new, dtype=bool)]),
        }
    )
    items = items.sort_values(["g", "s", "old"], kind="stable").reset_index(drop=True)
    run_max = items.groupby("g")["e"].cummax()
    prev_max = run_max.groupby(items["g"]).shift(1)
    # Touching merges: a new cluster only where the start is strictly after the running end.
    new_cluster = prev_max.isna() | (items["s"] > prev_max)
    items["c"] = np.cumsum(new_cluster.to_numpy()) - 1
    has_new = (~items["old"]).groupby(items["c"]).transform("any")
    items = items[has_new.to_numpy()]
    olds = items[items["old"]]
    # Survivor per cluster: earliest emitted held session, else earliest held session.
    olds_sorted = olds.sort_values(["c", "s"], kind="stable")
    surv_em = olds_sorted[olds_sorted["emitted"]].groupby("c")["idx"].first()
    surv_any = olds_sorted.groupby("c")["idx"].first()
    survivor = surv_em.combine_first(surv_any)
    clusters = np.unique(items["c"].to_numpy())
    need_new = np.setdiff1d(clusters, survivor.index.to_numpy())
    bounds = items.groupby("c").agg(s=("s", "min"), e=("e", "max"))
    slot_of = dict(
        zip(
            survivor.index.to_numpy().tolist(),
            survivor.to_numpy().astype(np.int64).tolist(),
            strict=True,
        )
    )
    # New slots for clusters made only of new rows.
    if len(need_new):
        first_new = items[~items["old"]].groupby("c")["idx"].first().loc[need_new].to_numpy()
        add = plan.new_slots(
            bounds.loc[need_new, "s"].to_numpy(),
            bounds.loc[need_new, "e"].to_numpy(),
            group_tbl,
            first_new,
        )
        for j, c in enumerate(need_new.tolist()):
            slot_of[c] = n_old + j
        slots = pa.concat_tables([slots, add]).combine_chunks()
        accs = [
            a.accumulator().grow(s, len(need_new)) for a, s in zip(plan.aggs, accs, strict=True)
        ]
    # Absorbed held sessions: merge into the survivor, retract if emitted.
    absorbed = olds[olds["idx"].to_numpy() != olds["c"].map(slot_of).to_numpy()]
    retracts: list[pd.DataFrame] = []
    if len(absorbed):
        a_idx = absorbed["idx"].to_numpy().astype(np.int64)
        a_to = absorbed["c"].map(slot_of).to_numpy().astype(np.int64)
        em = a_idx[emitted[a_idx]]
        if len(em) and plan.keeps_last_output:
            retracts.append(_last_output_frame(plan, slots, em, revision[em] + 1))
        accs = [
            a.accumulator().merge(s, a.accumulator().take(s, a_idx), a_to)
            for a, s in zip(plan.aggs, accs, strict=True)
        ]
    # Survivors take the cluster's bounds.
    all_start = np.asarray(slots.column("start").to_numpy(), dtype=np.int64).copy()
    all_end = np.asarray(slots.column("end").to_numpy(), dtype=np.int64).copy()
    cl = np.array(list(slot_of.keys()), dtype=np.int64)
    sl = np.array([slot_of[c] for c in cl.tolist()], dtype=np.int64)
    all_start[sl] = np.minimum(all_start[sl], bounds.loc[cl, "s"].to_numpy())
    all_end[sl] = np.maximum(all_end[sl], bounds.loc[cl, "e"].to_numpy())
    slots = slots.set_column(0, "start", pa.array(all_start)).set_column(
        1, "end", pa.array(all_end)
    )
    news = items[~items["old"]]
    target = np.empty(n_new, dtype=np.int64)
    target[news["idx"].to_numpy()] = news["c"].map(slot_of).to_numpy()
    changed = np.zeros(slots.num_rows, dtype=bool)
    if len(absorbed):
        drop = absorbed["idx"].to_numpy().astype(np.int64)
        keep = np.setdiff1d(np.arange(slots.num_rows), drop)
        remap = np.full(slots.num_rows, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        slots = slots.take(pa.array(keep))
        accs = [a.accumulator().take(s, keep) for a, s in zip(plan.aggs, accs, strict=True)]
        target = remap[target]
        changed = np.zeros(slots.num_rows, dtype=bool)
    return target, slots, accs, changed, retracts, len(need_new), len(absorbed)


def _output_frame(
    plan: WindowPlan,
    slots: pa.Table,
    accs: list[Any],
    idx: NDArray[np.int64],
    revision: NDArray[np.int64],
    *,
    retracted: bool,
) -> tuple[pd.DataFrame, list[pd.Series]]:
    """Output rows of slots ``idx``, and the raw results they were made from."""
    start = np.asarray(slots.column("start").to_numpy(), dtype=np.int64)
    end = np.asarray(slots.column("end").to_numpy(), dtype=np.int64)
    data: dict[str, Any] = {
        plan.start_column: _ts_series(start[idx]),
        plan.end_column: _ts_series(end[idx]),
        **_group_series(plan, slots, idx),
    }
    raw = _raw_results(plan, accs, idx)
    for a, series in zip(plan.aggs, raw, strict=True):
        data[a.alias] = _present(a, series)
    return _finish_frame(plan, data, revision, retracted), raw


def _group_series(
    plan: WindowPlan, slots: pa.Table, idx: NDArray[np.int64]
) -> dict[str, pd.Series]:
    """The ``group_by`` values of slots ``idx``: each column taken alone, not the whole table."""
    take = pa.array(idx)
    return {
        g: slots.column(g).take(take).to_pandas(integer_object_nulls=True, date_as_object=True)
        for g in plan.group_by
    }


def _finish_frame(
    plan: WindowPlan, data: dict[str, Any], revision: NDArray[np.int64], retracted: bool
) -> pd.DataFrame:
    n = len(revision)
    if plan.late_data == "reopen":
        data[REVISION_COLUMN] = pd.Series(revision, dtype=np.int64)
        data[RETRACTED_COLUMN] = pd.Series(np.full(n, retracted))
    if plan.late_data == "dlq":
        data[DEAD_LETTER_COLUMN] = pd.Series([None] * n, dtype=object)
    return pd.DataFrame(data)


def _remember_output(
    plan: WindowPlan, slots: pa.Table, idx: NDArray[np.int64], raw: list[pd.Series]
) -> pa.Table:
    """Store what slots ``idx`` just emitted in their ``__last_*`` columns (vectorised)."""
    is_emit = np.zeros(slots.num_rows, dtype=bool)
    is_emit[idx] = True
    pos = np.zeros(slots.num_rows, dtype=np.int64)
    pos[idx] = np.arange(len(idx))
    mask = pa.array(is_emit)
    updates: dict[str, pa.Array] = {
        "__last_start": slots.column("start").combine_chunks(),
        "__last_end": slots.column("end").combine_chunks(),
    }
    for i, (a, series) in enumerate(zip(plan.aggs, raw, strict=True)):
        new = pa.array(series, type=a.result_type, from_pandas=True)
        updates[f"__last_{i}"] = new.take(pa.array(pos))
    for name, new_values in updates.items():
        old = slots.column(name).combine_chunks()
        j = slots.schema.get_field_index(name)
        slots = slots.set_column(j, name, pc.if_else(mask, new_values, old))
    return slots


def _last_output_frame(
    plan: WindowPlan, slots: pa.Table, idx: NDArray[np.int64], revision: NDArray[np.int64]
) -> pd.DataFrame:
    """Retraction rows: what slots ``idx`` last emitted, ``retracted=true``."""
    sel = slots.take(pa.array(idx))
    data: dict[str, Any] = {
        plan.start_column: _ts_series(
            np.asarray(sel.column("__last_start").to_numpy(), dtype=np.int64)
        ),
        plan.end_column: _ts_series(
            np.asarray(sel.column("__last_end").to_numpy(), dtype=np.int64)
        ),
    }
    data.update(_group_series(plan, slots, idx))
    for i, a in enumerate(plan.aggs):
        raw = sel.column(f"__last_{i}").to_pandas(integer_object_nulls=True)
        data[a.alias] = _present(a, raw.reset_index(drop=True))
    return _finish_frame(plan, data, revision, retracted=True)


def _dead_letters(
    plan: WindowPlan, rows: pd.DataFrame, wm_us: int | None, reason: str = "late"
) -> list[str]:
    """One JSON dead letter per late row (a loop over late rows only, off the hot path)."""
    wm_ms = None if wm_us is None else wm_us // 1000
    out = []
    for rec in rows[list(plan.columns)].to_dict("records"):
        row = {}
        for k, v in rec.items():
            if isinstance(v, pd.Timestamp):
                v = v.to_pydatetime()
            elif v is pd.NaT or (isinstance(v, float) and np.isnan(v)):
                v = None
            elif isinstance(v, np.generic):
                v = v.item()
            row[k] = _json_value(v)
        out.append(json.dumps({"side": "input", "reason": reason, "watermark": wm_ms, "row": row}))
    return out


def _check_cap(plan: WindowPlan, start: NDArray[np.int64], end: NDArray[np.int64]) -> None:
    if not len(start):
        return
    key = start if plan.kind != "session" else np.zeros(len(start), dtype=np.int64)
    uniq, counts = np.unique(key, return_counts=True)
    over = np.flatnonzero(counts > plan.max_groups)
    if len(over):
        w = uniq[over[0]]
        i = int(np.flatnonzero(key == w)[0])
        s_us, e_us = int(start[i]), int(end[i])
        msg = (
            f"window state cap hit: max_groups_per_window={plan.max_groups} reached on "
            f"window [{_iso(s_us)}, {_iso(e_us)}) for pipeline {plan.name}"
        )
        raise StateCapError(msg)


def _iso(us: int) -> str:
    dt = _dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=us)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ") if dt.microsecond == 0 else dt.isoformat() + "Z"


# --------------------------------------------------------------------------------------------
# Shim
# --------------------------------------------------------------------------------------------


class WindowFunction:
    """The ``applyInPandasWithState`` function of a window aggregation.

    Timer: one event-time timeout per key group at the earliest pending deadline ``D``
    (``wm >= D`` rule), in Spark's domain: Spark fires when ``W > timeout`` and
    ``(W + H) * 1000 >= D`` ⇔ ``W > ceil((D - H * 1000) / 1000) - 1``.
    """

    def __init__(self, plan: WindowPlan, counters: Any | None = None) -> None:
        self.plan = plan
        self.counters = counters
        self.op_id = new_operator_id()  # keys its counters (interlace.metrics)

    def __call__(
        self, key: Any, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        """Process one key group."""
        freeze_worker_gc()
        quiet_worker_warnings()
        plan = self.plan
        spark_wm_ms = int(state.getCurrentWatermarkMs())
        wm_us = (spark_wm_ms + plan.horizon_ms) * 1000 if spark_wm_ms > 0 else None
        ws = WindowState.decode(state.get[0], plan) if state.exists else WindowState.empty(plan)
        parts = [f for f in frames if len(f)]
        batch = (
            pd.concat(parts, ignore_index=True)
            if len(parts) > 1
            else (
                parts[0].reset_index(drop=True)
                if parts
                else pd.DataFrame(
                    {TIME_US_COLUMN: np.zeros(0, np.int64), **{c: [] for c in plan.columns}}
                )
            )
        )
        result = step_window(plan, ws, batch, wm_us)
        if len(result.output):
            yield result.output
        if self.counters is not None and result.counters:
            add_counts(self.counters, self.op_id, key, state, result.counters)
        if result.state.slots.num_rows == 0:
            state.remove()
        else:
            state.update((result.state.encode(plan),))
            assert result.next_deadline_us is not None
            c = result.next_deadline_us - plan.horizon_ms * 1000
            timeout_ms = -((-c) // 1000) - 1
            state.setTimeoutTimestamp(max(timeout_ms, spark_wm_ms, 1))


# --------------------------------------------------------------------------------------------
# Wrapper
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowOperator:
    """A window aggregation bound to its input, for ``groupBy().applyInPandasWithState``.

    ``op.prepared.groupBy(*op.group_columns).applyInPandasWithState(op.func, op.output_schema,
    op.state_schema, "append", GroupStateTimeout.EventTimeTimeout)`` equals
    :func:`window_aggregate`.
    """

    spec: Window
    plan: WindowPlan
    prepared: Any
    group_columns: tuple[str, ...]
    func: WindowFunction
    output_schema: Any
    state_schema: Any
    output_mode: str = "append"
    timeout_conf: str = "EventTimeTimeout"

    def apply(self) -> Any:
        """Run ``groupBy().applyInPandasWithState``."""
        return self.prepared.groupBy(*self.group_columns).applyInPandasWithState(
            self.func, self.output_schema, self.state_schema, self.output_mode, self.timeout_conf
        )


def prepare_window(df: Any, spec: Window, *, counters: Any | None = None) -> WindowOperator:
    """Validate ``spec`` against ``df`` and prepare the input (watermark, key group, µs time).

    Raises:
        ConfigError: Any problem with the spec or the input (SEMANTICS §6).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout

    check_counters(df, counters)
    what = "the input"
    require_streaming(df, what)
    reject_reserved(df, what)
    guard_source_checkout(df.sparkSession)
    et = spec.event_time_column
    if spec.time_mode == "processing":
        if et in df.columns:
            msg = (
                f"`time_mode`='processing' synthesizes the event-time column {et!r}, but the "
                f"input already has a column named {et!r}; rename it or set "
                "`event_time_column` to another name"
            )
            raise ConfigError(msg)
        df = df.withColumn(et, F.current_timestamp())
    check_event_time(df, et, "event_time_column", what)
    require_columns(df, list(spec.group_by), "group_by", what)
    require_columns(df, [a.column for a in spec.aggregations if a.column], "aggregations", what)
    clash = [g for g in spec.group_by if g in {a.as_ for a in spec.aggregations}]
    if clash:
        msg = f"aggregation alias(es) {clash} collide with `group_by` columns; rename the alias"
        raise ConfigError(msg)
    plan = WindowPlan.from_schema(spec, arrow_schema_for(df.schema))
    needed = (
        list(df.columns)
        if spec.late_data == "dlq"
        else list(
            dict.fromkeys([*spec.group_by, *(a.column for a in spec.aggregations if a.column)])
        )
    )
    base = df.select(F.col(f"`{et}`").alias(EVENT_TIME_COLUMN), *[F.col(f"`{c}`") for c in needed])
    base = base.withWatermark(EVENT_TIME_COLUMN, f"{spec.watermark_delay_ms} milliseconds")
    kg = (
        F.expr(key_group_sql([f"`{g}`" for g in spec.group_by], spec.key_groups)).cast("int")
        if spec.group_by
        else F.lit(0)
    )
    prepared = base.select(
        kg.alias(KEY_GROUP_COLUMN),
        F.col(EVENT_TIME_COLUMN),
        F.unix_micros(F.col(EVENT_TIME_COLUMN)).alias(TIME_US_COLUMN),
        *[F.col(f"`{c}`") for c in needed],
    )
    plan = WindowPlan(**{**plan.__dict__, "columns": tuple(needed)})
    fields = [
        T.StructField(spec.window_start_column, T.TimestampType(), True),
        T.StructField(spec.window_end_column, T.TimestampType(), True),
    ]
    fields += [T.StructField(g, df.schema[g].dataType, True) for g in spec.group_by]
    for a in spec.aggregations:
        src = df.schema[a.column].dataType if a.column else None
        if a.agg in ("count", "count_distinct"):
            typ: Any = T.LongType()
        elif a.agg == "avg":
            typ = T.DoubleType()
        elif a.agg == "sum":
            typ = (
                T.LongType()
                if isinstance(src, T.ByteType | T.ShortType | T.IntegerType | T.LongType)
                else T.DoubleType()
            )
        else:
            typ = src
        fields.append(T.StructField(a.as_, typ, True))
    if spec.late_data == "reopen":
        fields += [
            T.StructField(REVISION_COLUMN, T.LongType(), True),
            T.StructField(RETRACTED_COLUMN, T.BooleanType(), True),
        ]
    if spec.late_data == "dlq":
        fields.append(T.StructField(DEAD_LETTER_COLUMN, T.StringType(), True))
    return WindowOperator(
        spec=spec,
        plan=plan,
        prepared=prepared,
        group_columns=(KEY_GROUP_COLUMN,),
        func=WindowFunction(plan, counters),
        output_schema=T.StructType(fields),
        state_schema=T.StructType([T.StructField("blob", T.BinaryType(), False)]),
        output_mode="append",
        timeout_conf=GroupStateTimeout.EventTimeTimeout,
    )


def window_aggregate(df: Any, spec: Window, *, counters: Any | None = None) -> Any:
    """Aggregate a streaming DataFrame per window and group (SEMANTICS §3).

    interlace owns the watermark (delay ``lateness_ms + H``). Output columns:
    ``window_start``, ``window_end`` (timestamps, ``[start, end)``), the ``group_by`` columns,
    the aggregation aliases; ``revision``, ``retracted`` under reopen; ``_dead_letter`` under
    dlq.

    Raises:
        ConfigError: Invalid spec or input, before any query starts.
    """
    return prepare_window(df, spec, counters=counters).apply()
