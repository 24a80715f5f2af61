"""Keyed, time-bounded stream-stream join on ``applyInPandasWithState``.

The join predicate, as SQL::

    l.k1 = r.k1 AND ... AND r.t BETWEEN l.t + lower AND l.t + upper   -- NULL never equals NULL

``time_window_ms=W`` is shorthand for ``lower=-W, upper=W``. Per-key, per-side buffers live in
``GroupState`` per **key group** (``pmod(xxhash64(keys), key_groups)``), as Arrow tables inside a
versioned msgpack blob (:mod:`interlace.state.buffers`).

Which watermark decides: the operator's ``wm = W + H`` (``W`` is Spark's watermark, ``H`` the
horizon of the late-data policy), i.e. ``max event time - lateness_ms``. A buffered row closes at
``close = t + upper + AL`` (left) or ``t - lower + AL`` (right), ``AL`` the allowed lateness
under ``reopen`` (0 otherwise). A row is late on arrival iff ``wm > close`` and is evicted in the
first call where ``wm > close`` — strict ``>`` on both. Outer / anti rows that never matched are
emitted at eviction, never earlier (no spurious null rows, as Kafka Streams 3.1+).

Layers (STYLE.md): :class:`Join` (spec) → :func:`step` (pure, no Spark) → :class:`JoinFunction`
(the ``applyInPandasWithState`` shim, the only code touching ``GroupState``) →
:func:`prepare_join` / :func:`stream_join` (the thin wrapper that prepares the input).
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import math
from collections.abc import Hashable, Iterator, Sequence
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
from interlace.operators.errors import ConfigError
from interlace.state import blob
from interlace.state.buffers import (
    MATCHED_COLUMN,
    TIME_COLUMN,
    JoinBuffers,
    buffer_schema,
    decode_join_state,
    encode_join_state,
)
from interlace.state.keygroups import (
    DEFAULT_JOIN_KEY_GROUPS,
    KEY_GROUP_ID_SCHEME,
    key_group_sql,
    validate_key_groups,
)
from numpy.typing import NDArray

from interlace.metrics import add_counts, new_operator_id

__all__ = [
    "Join",
    "JoinFunction",
    "JoinHow",
    "JoinOperator",
    "JoinPlan",
    "StepResult",
    "prepare_join",
    "step",
    "stream_join",
]

JoinHow = Literal["inner", "left", "right", "full", "left_semi", "left_anti"]
"""Which rows a join emits.

* ``"inner"``: one row per matching pair.
* ``"left"``: inner, plus each left row that never matched, null-padded, at its eviction.
* ``"right"``: inner, plus each right row that never matched, null-padded, at its eviction.
* ``"full"``: inner, plus the unmatched rows of both sides at their eviction.
* ``"left_semi"``: each left row once, unprefixed, in the call where it first matches.
* ``"left_anti"``: each left row that never matched, unprefixed, at its eviction.
"""

SIDE_COLUMN = RESERVED_PREFIX + "side"
KEY_GROUP_COLUMN = RESERVED_PREFIX + "kg"
EVENT_TIME_COLUMN = RESERVED_PREFIX + "t"
LEFT_PREFIX_INTERNAL = RESERVED_PREFIX + "l"
RIGHT_PREFIX_INTERNAL = RESERVED_PREFIX + "r"
SLOT_PREFIX_INTERNAL = RESERVED_PREFIX + "s"
LEFT, RIGHT = 0, 1
_SIDE_NAMES = ("left", "right")


# --------------------------------------------------------------------------------------------
# Spec
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Join:
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

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        left_keys = as_name_tuple("left_keys", self.left_keys)
        right_keys = as_name_tuple("right_keys", self.right_keys)
        assert left_keys is not None and right_keys is not None
        if not left_keys or not right_keys:
            msg = (
                f"`left_keys` and `right_keys` must be non-empty (got left_keys={list(left_keys)}, "
                f"right_keys={list(right_keys)}); an unkeyed join is a cross join — give the key "
                "columns to join on"
            )
            raise ConfigError(msg)
        if len(left_keys) != len(right_keys):
            msg = (
                f"`left_keys` and `right_keys` must have equal length (got {list(left_keys)} and "
                f"{list(right_keys)}); they are compared pairwise"
            )
            raise ConfigError(msg)
        setattr_(self, "left_keys", left_keys)
        setattr_(self, "right_keys", right_keys)
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
        check_late_data_fields(
            self.late_data,
            self.lateness_ms,
            self.allowed_lateness_ms,
            self.dlq_horizon_ms,
            self.allowance_ms,
        )
        for side in ("left", "right"):
            col = self.side_event_time_column(side)
            if col is None:
                msg = (
                    f"no event-time column for the {side} input: set `event_time_column` (both "
                    f"inputs) or `{side}_event_time_column`"
                )
                raise ConfigError(msg)
        for fname in ("left_prefix", "right_prefix", "name"):
            if not isinstance(getattr(self, fname), str):
                msg = f"`{fname}` must be a str (got {getattr(self, fname)!r})"
                raise ConfigError(msg)
        try:
            validate_key_groups(self.key_groups)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

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

    @property
    def allowance_ms(self) -> int:
        """``AL``: the allowed lateness under ``reopen`` (0 under drop and dlq)."""
        if self.late_data != "reopen":
            return 0
        return self.lateness_ms if self.allowed_lateness_ms is None else self.allowed_lateness_ms

    @property
    def horizon_ms(self) -> int:
        """``H``: how far the Spark watermark is held behind the operator's ``wm``."""
        if self.late_data == "reopen":
            return self.allowance_ms
        if self.late_data == "dlq":
            return self.dlq_horizon_ms
        return 0

    @property
    def watermark_delay_ms(self) -> int:
        """The delay interlace passes to ``withWatermark``: ``lateness_ms + H``."""
        return self.lateness_ms + self.horizon_ms

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


# --------------------------------------------------------------------------------------------
# Plan: the resolved, picklable runtime description shipped to the Python workers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputColumn:
    """One output column: its name, the side it comes from and the internal column."""

    name: str
    side: int
    internal: str


@dataclass(frozen=True)
class JoinPlan:
    """Everything :func:`step` needs, resolved against the input schemas.

    Built by :func:`prepare_join`; tests build it from Arrow schemas with :meth:`from_schemas`.
    Times are in microseconds (``_us``).
    """

    how: str
    late_data: str
    lower_us: int
    upper_us: int
    allowance_us: int
    horizon_ms: int
    left_payload: pa.Schema
    right_payload: pa.Schema
    left_names: tuple[str, ...]
    right_names: tuple[str, ...]
    left_key_internal: tuple[str, ...]
    right_key_internal: tuple[str, ...]
    key_types: tuple[pa.DataType, ...]
    outputs: tuple[OutputColumn, ...]
    fp: str
    input_schema: pa.Schema = field(default_factory=lambda: pa.schema([]))
    input_sources: tuple[str, ...] = ()

    @property
    def dlq(self) -> bool:
        """Whether late rows are dead-lettered."""
        return self.late_data == "dlq"

    @property
    def left_buffer_schema(self) -> pa.Schema:
        """Arrow schema of the left buffer."""
        return buffer_schema(self.left_payload)

    @property
    def right_buffer_schema(self) -> pa.Schema:
        """Arrow schema of the right buffer."""
        return buffer_schema(self.right_payload)

    @property
    def output_names(self) -> list[str]:
        """Output column names in order (``_dead_letter`` last under dlq)."""
        names = [o.name for o in self.outputs]
        return names + [DEAD_LETTER_COLUMN] if self.dlq else names

    @property
    def slots(self) -> tuple[tuple[str, int | None, int | None], ...]:
        """The shared payload columns of the prepared input, in order.

        Each is ``(name, left index, right index)``: the left and right input columns (by
        position; ``None``: that side has none) that the prepared input carries in that one
        column (see :func:`payload_sources`).
        """
        nl = len(self.left_names)
        lsrc = self.input_sources[2 : 2 + nl]
        rsrc = self.input_sources[2 + nl :]
        names = sorted(
            {n for n in self.input_sources[2:] if n.startswith(SLOT_PREFIX_INTERNAL)},
            key=lambda n: int(n[len(SLOT_PREFIX_INTERNAL) :]),
        )
        return tuple(
            (n, lsrc.index(n) if n in lsrc else None, rsrc.index(n) if n in rsrc else None)
            for n in names
        )

    @classmethod
    def from_schemas(
        cls,
        spec: Join,
        left: pa.Schema,
        right: pa.Schema,
        *,
        left_type_ids: Sequence[Hashable] | None = None,
        right_type_ids: Sequence[Hashable] | None = None,
    ) -> JoinPlan:
        """Resolve ``spec`` against the Arrow schemas of the two inputs (no Spark needed).

        ``left_type_ids`` / ``right_type_ids`` (one per column; default: the Arrow types) decide
        which columns of the two sides may share a column of the prepared input
        (:func:`payload_sources`); :func:`prepare_join` passes Spark's exact data types.
        """
        left_names, right_names = tuple(left.names), tuple(right.names)
        _check_keys_and_outputs(spec, left_names, right_names)
        lpay = pa.schema(
            [pa.field(f"{LEFT_PREFIX_INTERNAL}{i}", f.type) for i, f in enumerate(left)]
        )
        rpay = pa.schema(
            [pa.field(f"{RIGHT_PREFIX_INTERNAL}{i}", f.type) for i, f in enumerate(right)]
        )
        lki = tuple(lpay.names[left_names.index(k)] for k in spec.left_keys)
        rki = tuple(rpay.names[right_names.index(k)] for k in spec.right_keys)
        key_types = tuple(
            _common_key_arrow_type(spec, lk, left.field(lk).type, rk, right.field(rk).type)
            for lk, rk in zip(spec.left_keys, spec.right_keys, strict=True)
        )
        outputs = _output_columns(spec, left_names, right_names)
        input_fields = [pa.field(SIDE_COLUMN, pa.int32()), pa.field(TIME_COLUMN, pa.int64())]
        input_schema = pa.schema(input_fields + list(lpay) + list(rpay))
        let, ret = spec.side_event_time_column("left"), spec.side_event_time_column("right")
        lsrc, rsrc = payload_sources(
            left_type_ids if left_type_ids is not None else [str(f.type) for f in left],
            right_type_ids if right_type_ids is not None else [str(f.type) for f in right],
            left_names.index(let) if let in left_names else None,
            right_names.index(ret) if ret in right_names else None,
        )
        return cls(
            how=spec.how,
            late_data=spec.late_data,
            lower_us=spec.lower * 1000,
            upper_us=spec.upper * 1000,
            allowance_us=spec.allowance_ms * 1000,
            horizon_ms=spec.horizon_ms,
            left_payload=lpay,
            right_payload=rpay,
            left_names=left_names,
            right_names=right_names,
            left_key_internal=lki,
            right_key_internal=rki,
            key_types=key_types,
            outputs=outputs,
            fp=spec.state_fingerprint(left_names, right_names),
            input_schema=input_schema,
            input_sources=(SIDE_COLUMN, TIME_COLUMN, *lsrc, *rsrc),
        )


def payload_sources(
    left_type_ids: Sequence[Hashable],
    right_type_ids: Sequence[Hashable],
    left_event_time: int | None,
    right_event_time: int | None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Decide which column of the prepared input carries each input column.

    Every prepared row belongs to one side, so a left and a right column of the same type can
    share one column of the prepared input (a *slot*, ``__il_s<n>``): left rows fill it with
    the left column, right rows with the right one. Each side's event-time column is not
    carried at all: it is a copy of ``__il_t``, which the prepared input has anyway. Fewer,
    fuller columns mean less to shuffle, to write to Arrow in the JVM and to convert to pandas
    in the Python worker (docs/performance.md).

    Args:
        left_type_ids: One hashable per left column; equal ids may share a slot.
        right_type_ids: Likewise for the right columns.
        left_event_time: Index of the left event-time column, or ``None``.
        right_event_time: Index of the right event-time column, or ``None``.

    Returns:
        Per left column and per right column, the prepared column it is read from:
        ``__il_t`` or a slot. Slots are numbered in order of first use: the left columns, then
        the right columns that found no free left slot of their type.
    """
    left: list[str] = []
    free: dict[Hashable, list[str]] = {}
    n = 0
    for i, t in enumerate(left_type_ids):
        if i == left_event_time:
            left.append(EVENT_TIME_COLUMN)
            continue
        name = f"{SLOT_PREFIX_INTERNAL}{n}"
        n += 1
        left.append(name)
        free.setdefault(t, []).append(name)
    right: list[str] = []
    for j, t in enumerate(right_type_ids):
        if j == right_event_time:
            right.append(EVENT_TIME_COLUMN)
            continue
        shared = free.get(t)
        if shared:
            right.append(shared.pop(0))
            continue
        right.append(f"{SLOT_PREFIX_INTERNAL}{n}")
        n += 1
    return tuple(left), tuple(right)


def _check_keys_and_outputs(spec: Join, left: Sequence[str], right: Sequence[str]) -> None:
    for field_name, names, have, what in (
        ("left_keys", spec.left_keys, left, "the left input"),
        ("right_keys", spec.right_keys, right, "the right input"),
        ("output_left_columns", spec.output_left_columns or (), left, "the left input"),
        ("output_right_columns", spec.output_right_columns or (), right, "the right input"),
    ):
        missing = [n for n in names if n not in have]
        if missing:
            msg = (
                f"`{field_name}` names column(s) {missing} absent from {what} (its columns: "
                f"{list(have)}); fix the name or select the column first"
            )
            raise ConfigError(msg)


def _output_columns(
    spec: Join, left: Sequence[str], right: Sequence[str]
) -> tuple[OutputColumn, ...]:
    lsel = spec.output_left_columns if spec.output_left_columns is not None else tuple(left)
    rsel = spec.output_right_columns if spec.output_right_columns is not None else tuple(right)
    if spec.how in ("left_semi", "left_anti"):
        outs = [OutputColumn(c, LEFT, f"{LEFT_PREFIX_INTERNAL}{left.index(c)}") for c in lsel]
    else:
        outs = [
            OutputColumn(spec.left_prefix + c, LEFT, f"{LEFT_PREFIX_INTERNAL}{left.index(c)}")
            for c in lsel
        ]
        outs += [
            OutputColumn(spec.right_prefix + c, RIGHT, f"{RIGHT_PREFIX_INTERNAL}{right.index(c)}")
            for c in rsel
        ]
    names = [o.name for o in outs] + ([DEAD_LETTER_COLUMN] if spec.late_data == "dlq" else [])
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        msg = (
            f"output columns {dupes} appear twice (from `left_prefix`={spec.left_prefix!r}, "
            f"`right_prefix`={spec.right_prefix!r}, `output_left_columns`, "
            "`output_right_columns`); choose distinct prefixes or select fewer columns"
        )
        raise ConfigError(msg)
    bad = [n for n in names if n.startswith(RESERVED_PREFIX)]
    if bad:
        msg = f"output columns {bad} use the reserved prefix {RESERVED_PREFIX!r}; change the prefix"
        raise ConfigError(msg)
    return tuple(outs)


def _decimal_of_arrow(t: pa.DataType) -> tuple[int, int]:
    return (t.precision, t.scale) if pa.types.is_decimal(t) else (20, 0)


def _widen_decimal(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Spark's decimal widening for comparisons: enough integer and fraction digits (max 38)."""
    scale = max(a[1], b[1])
    whole = max(a[0] - a[1], b[0] - b[1])
    return min(whole + scale, 38), min(scale, 38)


def _common_key_arrow_type(
    spec: Join, lname: str, ltype: pa.DataType, rname: str, rtype: pa.DataType
) -> pa.DataType:
    if ltype.equals(rtype):
        return ltype
    if pa.types.is_integer(ltype) and pa.types.is_integer(rtype):
        return pa.int64()
    exact = (pa.types.is_integer, pa.types.is_decimal)
    if all(any(p(t) for p in exact) for t in (ltype, rtype)):
        p_, s_ = _widen_decimal(_decimal_of_arrow(ltype), _decimal_of_arrow(rtype))
        return pa.decimal128(p_, s_)
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)
    if any(p(ltype) for p in numeric) and any(p(rtype) for p in numeric):
        return pa.float64()
    if (
        pa.types.is_string(ltype)
        and pa.types.is_large_string(rtype)
        or (pa.types.is_large_string(ltype) and pa.types.is_string(rtype))
    ):
        return pa.large_string()
    msg = (
        f"key columns `left_keys` {lname!r} ({ltype}) and `right_keys` {rname!r} ({rtype}) have "
        "incompatible types; cast one side so both keys have the same type"
    )
    raise ConfigError(msg)


# --------------------------------------------------------------------------------------------
# Step: pure and vectorised. No Spark, no I/O, no clock.
# --------------------------------------------------------------------------------------------


@dataclass
class StepResult:
    """What one call of :func:`step` produced.

    Attributes:
        output: Output rows (``plan.output_names`` columns) as an Arrow table.
        state: The key group's buffers after the call.
        next_close_us: The earliest close time among buffered rows, or ``None`` if empty.
        counters: Per-call counts: ``matches``, ``unmatched_left``, ``unmatched_right``,
            ``semi``, ``late_dropped_left/right``, ``null_key_dropped_left/right``,
            ``dead_lettered_left/right``, ``inserted_left/right`` (rows added to a buffer),
            ``evicted_left/right`` (rows removed from a buffer).
    """

    output: pa.Table
    state: JoinBuffers
    next_close_us: int | None
    counters: dict[str, int]


def _i64(a: pa.ChunkedArray | pa.Array) -> NDArray[np.int64]:
    return np.asarray(a.to_numpy(), dtype=np.int64)


def _key_codes(
    plan: JoinPlan,
    probe: pa.Table,
    probe_keys: Sequence[str],
    build: pa.Table,
    build_keys: Sequence[str],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Encode the key tuples of ``probe`` and ``build`` as shared ints; -1 where a key is null."""
    n_p = probe.num_rows
    codes: NDArray[np.int64] | None = None
    for pk, bk, typ in zip(probe_keys, build_keys, plan.key_types, strict=True):
        both = pa.chunked_array(
            probe.column(pk).cast(typ).chunks + build.column(bk).cast(typ).chunks, type=typ
        )
        if pa.types.is_floating(typ):
            both = pc.add(both, pa.scalar(0.0, typ))  # -0.0 + 0.0 == 0.0: equal keys, as in SQL
        enc = pc.dictionary_encode(both).combine_chunks()
        col = np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        n_uniq = len(enc.dictionary)
        if codes is None:
            codes = col
        else:
            null = (codes < 0) | (col < 0)
            combined = codes * max(n_uniq, 1) + col
            _, dense = np.unique(np.where(null, -1, combined), return_inverse=True)
            codes = np.where(null, -1, dense.astype(np.int64))
    assert codes is not None
    return codes[:n_p], codes[n_p:]


def _interval_pairs(
    p_code: NDArray[np.int64],
    p_lo: NDArray[np.int64],
    p_hi: NDArray[np.int64],
    b_code: NDArray[np.int64],
    b_t: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Return every (probe i, build j) with equal non-negative codes and lo_i <= t_j <= hi_i.

    Vectorised: build rows are sorted by (code, rank of t) packed into one int64 (ranks are
    dense over the build's distinct times, so the packing cannot overflow), and each probe
    row's range is found with two ``searchsorted`` calls; the ranges are then expanded with
    ``repeat``/``arange`` — no Python loop over rows.
    """
    empty = np.zeros(0, dtype=np.int64)
    b_idx = np.flatnonzero(b_code >= 0)
    if len(p_code) == 0 or len(b_idx) == 0:
        return empty, empty
    bt, bc = b_t[b_idx], b_code[b_idx]
    uniq_t = np.unique(bt)
    k = np.int64(len(uniq_t) + 1)
    comp = bc * k + np.searchsorted(uniq_t, bt, "left")
    order = np.argsort(comp, kind="stable")
    comp_sorted = comp[order]
    pc_ = np.where(p_code >= 0, p_code, 0)
    lo = np.searchsorted(comp_sorted, pc_ * k + np.searchsorted(uniq_t, p_lo, "left"), "left")
    hi = np.searchsorted(comp_sorted, pc_ * k + np.searchsorted(uniq_t, p_hi, "right"), "left")
    counts = np.where(p_code >= 0, np.maximum(hi - lo, 0), 0).astype(np.int64)
    total = int(counts.sum())
    if total == 0:
        return empty, empty
    pi = np.repeat(np.arange(len(p_code), dtype=np.int64), counts)
    run_start = np.repeat(np.cumsum(counts) - counts, counts)
    pos = np.repeat(lo, counts) + (np.arange(total, dtype=np.int64) - run_start)
    return pi, b_idx[order[pos]]


class _Out:
    """Collects output parts and assembles them into one Arrow table at the end."""

    def __init__(self, plan: JoinPlan, wm_us: int | None) -> None:
        self.plan = plan
        self.wm_us = wm_us
        self.parts: list[pa.Table] = []
        self.types = {
            o.name: (plan.left_payload if o.side == LEFT else plan.right_payload)
            .field(o.internal)
            .type
            for o in plan.outputs
        }

    def add(
        self,
        left: pa.Table | None,
        left_idx: NDArray[np.int64] | None,
        right: pa.Table | None,
        right_idx: NDArray[np.int64] | None,
        n: int,
    ) -> None:
        """Add ``n`` rows gathered from ``left``/``right`` (``None`` side: nulls)."""
        if n == 0:
            return
        cols: list[pa.Array | pa.ChunkedArray] = []
        for o in self.plan.outputs:
            src, idx = (left, left_idx) if o.side == LEFT else (right, right_idx)
            if src is None:
                cols.append(pa.nulls(n, self.types[o.name]))
            else:
                col = src.column(o.internal)
                cols.append(col.take(pa.array(idx)) if idx is not None else col)
        if self.plan.dlq:
            cols.append(pa.nulls(n, pa.string()))
        self.parts.append(pa.Table.from_arrays(cols, names=self.plan.output_names))

    def dead_letters(self, side: int, rows: pa.Table, reason: str = "late") -> None:
        """Add one dead-letter row per row of ``rows`` (a side's payload columns)."""
        n = rows.num_rows
        if n == 0:
            return
        names = self.plan.left_names if side == LEFT else self.plan.right_names
        payload = self.plan.left_payload if side == LEFT else self.plan.right_payload
        records = rows.select(payload.names).rename_columns(list(names)).to_pylist()
        # A Python loop, off the hot path: it runs only over late rows under dlq.
        wm_ms = None if self.wm_us is None else self.wm_us // 1000
        letters = [
            json.dumps(
                {
                    "side": _SIDE_NAMES[side],
                    "reason": reason,
                    "watermark": wm_ms,
                    "row": {k: _json_value(v) for k, v in r.items()},
                }
            )
            for r in records
        ]
        cols = [pa.nulls(n, self.types[o.name]) for o in self.plan.outputs]
        cols.append(pa.array(letters, pa.string()))
        self.parts.append(pa.Table.from_arrays(cols, names=self.plan.output_names))

    def table(self) -> pa.Table:
        """Return every part concatenated (an empty table with the output schema if none)."""
        if not self.parts:
            fields = [pa.field(name, typ) for name, typ in self.types.items()]
            if self.plan.dlq:
                fields.append(pa.field(DEAD_LETTER_COLUMN, pa.string()))
            return pa.schema(fields).empty_table()
        return pa.concat_tables(self.parts)


def _json_value(v: Any) -> Any:
    """Encode one input value for a dead letter's ``row`` object (SEMANTICS §4)."""
    if isinstance(v, _dt.datetime):
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(v, _dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes | bytearray):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    return v


def _has_null_key(table: pa.Table, keys: Sequence[str]) -> NDArray[np.bool_]:
    mask = np.zeros(table.num_rows, dtype=bool)
    for k in keys:
        mask |= np.asarray(table.column(k).is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return mask


def step(plan: JoinPlan, state: JoinBuffers, batch: pa.Table, wm_us: int | None) -> StepResult:
    """Advance one key group by one call: ingest ``batch``, match, evict.

    Order (SEMANTICS §2): late rows are set aside (dropped / dead-lettered); null-key rows
    are emitted unmatched (preserved side) or dropped; left rows are matched against the right
    buffer and inserted; right rows are matched against the left buffer (which now holds this
    call's left rows); then every buffered row with ``wm_us > close`` is evicted, emitting the
    never-matched rows of a preserved side. Outputs are computed before any row is evicted.

    Args:
        plan: The resolved join.
        state: The key group's buffers before the call.
        batch: Input rows with ``plan.input_schema`` columns (both sides, tagged by side).
        wm_us: The operator watermark ``(W + H) * 1000``, or ``None`` if Spark has none yet
            (then nothing is late and nothing is evicted).

    Returns:
        The output rows, the new buffers, the earliest remaining close time and counters.
    """
    how = plan.how
    counters: dict[str, int] = {}
    out = _Out(plan, wm_us)
    keep_left_outer = how in ("left", "full", "left_anti")
    keep_right_outer = how in ("right", "full")
    side = np.asarray(batch.column(SIDE_COLUMN).to_numpy(), dtype=np.int32)
    bounds = {LEFT: plan.upper_us + plan.allowance_us, RIGHT: -plan.lower_us + plan.allowance_us}
    incoming: dict[int, pa.Table] = {}
    for s, payload, keys, keep in (
        (LEFT, plan.left_payload, plan.left_key_internal, keep_left_outer),
        (RIGHT, plan.right_payload, plan.right_key_internal, keep_right_outer),
    ):
        rows = batch.filter(pa.array(side == s)).select([TIME_COLUMN, *payload.names])
        name = _SIDE_NAMES[s]
        # A row without an event time can be neither judged nor matched: dead-letter it under
        # dlq (reason "null_event_time"), else count it.
        null_t = np.asarray(
            rows.column(TIME_COLUMN).is_null().to_numpy(zero_copy_only=False), dtype=bool
        )
        if null_t.any():
            if plan.dlq:
                out.dead_letters(s, rows.filter(pa.array(null_t)), reason="null_event_time")
                counters[f"dead_lettered_{name}"] = int(null_t.sum())
            else:
                counters[f"null_event_time_dropped_{name}"] = int(null_t.sum())
            rows = rows.filter(pa.array(~null_t))
        if wm_us is not None and rows.num_rows:
            late = wm_us > _i64(rows.column(TIME_COLUMN)) + bounds[s]
            if late.any():
                n_late = int(late.sum())
                if plan.dlq:
                    out.dead_letters(s, rows.filter(pa.array(late)))
                    counters[f"dead_lettered_{name}"] = (
                        counters.get(f"dead_lettered_{name}", 0) + n_late
                    )
                else:
                    counters[f"late_dropped_{name}"] = n_late
                rows = rows.filter(pa.array(~late))
        null_key = _has_null_key(rows, keys)
        if null_key.any():
            nulls = rows.filter(pa.array(null_key))
            if keep:
                if s == LEFT:
                    out.add(nulls, None, None, None, nulls.num_rows)
                else:
                    out.add(None, None, nulls, None, nulls.num_rows)
                counters[f"unmatched_{name}"] = (
                    counters.get(f"unmatched_{name}", 0) + nulls.num_rows
                )
            else:
                counters[f"null_key_dropped_{name}"] = nulls.num_rows
            rows = rows.filter(pa.array(~null_key))
        incoming[s] = rows

    new_left, new_right = incoming[LEFT], incoming[RIGHT]
    left_buf, right_buf = state.left, state.right
    right_m = np.asarray(
        right_buf.column(MATCHED_COLUMN).to_numpy(zero_copy_only=False), dtype=bool
    )
    old_left_m = np.asarray(
        left_buf.column(MATCHED_COLUMN).to_numpy(zero_copy_only=False), dtype=bool
    )
    n_matches = 0

    # Phase 1: this call's left rows against the right buffer (r.t in [l.t+lower, l.t+upper]).
    new_left_m = np.zeros(new_left.num_rows, dtype=bool)
    if new_left.num_rows and right_buf.num_rows:
        pcode, bcode = _key_codes(
            plan, new_left, plan.left_key_internal, right_buf, plan.right_key_internal
        )
        lt = _i64(new_left.column(TIME_COLUMN))
        pi, bi = _interval_pairs(
            pcode,
            lt + plan.lower_us,
            lt + plan.upper_us,
            bcode,
            _i64(right_buf.column(TIME_COLUMN)),
        )
        new_left_m[pi] = True
        right_m[bi] = True
        if how not in ("left_semi", "left_anti"):
            out.add(new_left, pi, right_buf, bi, len(pi))
        n_matches += len(pi)

    # Insert this call's left rows; phase 2 then sees them.
    new_left_buf = new_left.append_column(MATCHED_COLUMN, pa.array(new_left_m)).select(
        plan.left_buffer_schema.names
    )
    left_all = (
        pa.concat_tables([left_buf, new_left_buf]).combine_chunks()
        if new_left.num_rows
        else left_buf
    )
    left_m = np.concatenate([old_left_m, new_left_m])

    # Phase 2: this call's right rows against the left buffer (l.t in [r.t-upper, r.t-lower]).
    new_right_m = np.zeros(new_right.num_rows, dtype=bool)
    if new_right.num_rows and left_all.num_rows:
        pcode, bcode = _key_codes(
            plan, new_right, plan.right_key_internal, left_all, plan.left_key_internal
        )
        rt = _i64(new_right.column(TIME_COLUMN))
        pi, bi = _interval_pairs(
            pcode, rt - plan.upper_us, rt - plan.lower_us, bcode, _i64(left_all.column(TIME_COLUMN))
        )
        new_right_m[pi] = True
        left_m[bi] = True
        if how not in ("left_semi", "left_anti"):
            out.add(left_all, bi, new_right, pi, len(pi))
        n_matches += len(pi)
    counters["matches"] = n_matches

    if how == "left_semi":
        # Each left row once, in the call where it first matches.
        was = np.concatenate([old_left_m, np.zeros(new_left.num_rows, dtype=bool)])
        first = left_m & ~was
        idx = np.flatnonzero(first)
        out.add(left_all, idx, None, None, len(idx))
        counters["semi"] = len(idx)

    new_right_buf = new_right.append_column(MATCHED_COLUMN, pa.array(new_right_m)).select(
        plan.right_buffer_schema.names
    )
    right_buf = right_buf.set_column(
        right_buf.schema.get_field_index(MATCHED_COLUMN), MATCHED_COLUMN, pa.array(right_m)
    )
    right_all = (
        pa.concat_tables([right_buf, new_right_buf]).combine_chunks()
        if new_right.num_rows
        else right_buf
    )
    left_all = left_all.set_column(
        left_all.schema.get_field_index(MATCHED_COLUMN), MATCHED_COLUMN, pa.array(left_m)
    )
    right_m = np.concatenate([right_m, new_right_m])

    # Eviction: wm > close. Semi/anti also drop matched left rows at once: they can never be
    # emitted again, and right rows only exist to mark left rows.
    lclose = _i64(left_all.column(TIME_COLUMN)) + bounds[LEFT]
    rclose = _i64(right_all.column(TIME_COLUMN)) + bounds[RIGHT]
    if wm_us is not None:
        l_evict = wm_us > lclose
        r_evict = wm_us > rclose
    else:
        l_evict = np.zeros(left_all.num_rows, dtype=bool)
        r_evict = np.zeros(right_all.num_rows, dtype=bool)
    if keep_left_outer:
        idx = np.flatnonzero(l_evict & ~left_m)
        out.add(left_all, idx, None, None, len(idx))
        counters["unmatched_left"] = counters.get("unmatched_left", 0) + len(idx)
    if keep_right_outer:
        idx = np.flatnonzero(r_evict & ~right_m)
        out.add(None, None, right_all, idx, len(idx))
        counters["unmatched_right"] = counters.get("unmatched_right", 0) + len(idx)
    l_drop = l_evict | (left_m if how in ("left_semi", "left_anti") else False)
    counters["inserted_left"] = new_left.num_rows
    counters["inserted_right"] = new_right.num_rows
    counters["evicted_left"] = int(np.sum(l_drop))
    counters["evicted_right"] = int(r_evict.sum())
    if l_drop.any():
        left_all = left_all.filter(pa.array(~l_drop))
        lclose = lclose[~l_drop]
    if r_evict.any():
        right_all = right_all.filter(pa.array(~r_evict))
        rclose = rclose[~r_evict]
    closes = [int(c.min()) for c in (lclose, rclose) if len(c)]
    return StepResult(
        output=out.table(),
        state=JoinBuffers(left_all, right_all, state.extra),
        next_close_us=min(closes) if closes else None,
        counters={k: v for k, v in counters.items() if v},
    )


# --------------------------------------------------------------------------------------------
# Shim: the function handed to applyInPandasWithState. The only code touching GroupState.
# --------------------------------------------------------------------------------------------


class JoinFunction:
    """The ``applyInPandasWithState`` function of a join (picklable; holds only the plan).

    Per call it decodes the key group's blob, concatenates the input frames, runs :func:`step`
    with ``wm_us = (W + H) * 1000`` (``None`` while Spark's ``W <= 0``), yields the output,
    writes the state last, and sets one event-time timeout at the earliest close time converted
    to Spark's domain: Spark fires when ``W > timeout``, and ``wm > close`` ⇔
    ``W * 1000 > close - H * 1000`` ⇔ ``W > (close - H * 1000) // 1000``.
    """

    def __init__(self, plan: JoinPlan, counters: Any | None = None) -> None:
        self.plan = plan
        self.counters = counters
        self.op_id = new_operator_id()  # keys its counters (interlace.metrics)

    def __call__(
        self, key: Any, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        """Process one key group (Spark calls this; see the class docstring)."""
        freeze_worker_gc()
        quiet_worker_warnings()
        plan = self.plan
        spark_wm_ms = int(state.getCurrentWatermarkMs())
        wm_us = (spark_wm_ms + plan.horizon_ms) * 1000 if spark_wm_ms > 0 else None
        if state.exists:
            buffers = decode_join_state(
                state.get[0], plan.fp, plan.left_buffer_schema, plan.right_buffer_schema
            )
        else:
            buffers = JoinBuffers.empty(plan.left_buffer_schema, plan.right_buffer_schema)
        batch = frames_to_table(plan.input_schema, frames, plan.input_sources)
        result = step(plan, buffers, batch, wm_us)
        if result.output.num_rows:
            yield table_to_pandas(result.output)
        if self.counters is not None and result.counters:
            add_counts(self.counters, self.op_id, key, state, result.counters)
        # State last: outputs exist before anything is evicted from the stored buffers.
        if result.state.num_rows == 0:
            state.remove()
        else:
            state.update((encode_join_state(result.state, plan.fp),))
            assert result.next_close_us is not None
            timeout_ms = (result.next_close_us - plan.horizon_ms * 1000) // 1000
            state.setTimeoutTimestamp(max(timeout_ms, spark_wm_ms, 1))


def frames_to_table(
    schema: pa.Schema, frames: Iterator[pd.DataFrame], sources: Sequence[str] = ()
) -> pa.Table:
    """Concatenate Spark's input frames into one Arrow table with ``schema``'s columns.

    Column ``i`` of the table is read from frame column ``sources[i]`` (default: the same
    name); a frame column named by several columns, such as a slot shared by both sides
    (:func:`payload_sources`), is converted once. One ``pa.array(..., from_pandas=True)`` per
    column (NaN/NaT become nulls, float64-with-NaN becomes a nullable int64): measured faster
    than ``pa.Table.from_pandas`` per frame (bench/join_variants.py ``fastconv``: 1.29x on the
    10k-key workload, same output).
    """
    names = tuple(sources) or tuple(schema.names)
    tables = []
    for f in frames:
        if not len(f):
            continue
        done: dict[tuple[str, pa.DataType], pa.Array] = {}
        arrays = []
        for name, fld in zip(names, schema, strict=True):
            arr = done.get((name, fld.type))
            if arr is None:
                arr = done[(name, fld.type)] = pa.array(f[name], type=fld.type, from_pandas=True)
            arrays.append(arr)
        tables.append(pa.Table.from_arrays(arrays, schema=schema))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def prepared_layout(plan: JoinPlan, batch: pa.Table) -> pa.Table:
    """Lay ``batch`` out as :func:`prepare_join`'s prepared input (inverse of frames_to_table).

    ``batch`` has ``plan.input_schema``; the result has the side tag, µs time, ``__il_t`` and
    the shared slots (no key group). For driving :class:`JoinFunction` without Spark.
    """
    is_left = pc.equal(batch.column(SIDE_COLUMN), LEFT)
    nl = len(plan.left_names)
    sources = plan.input_sources
    columns: dict[str, pa.ChunkedArray] = {}
    for name in dict.fromkeys(sources):
        lcols = [i for i in range(2, 2 + nl) if sources[i] == name]
        rcols = [i for i in range(2 + nl, len(sources)) if sources[i] == name]
        if not lcols and not rcols:  # side tag, µs time
            columns[name] = batch.column(sources.index(name))
            continue
        lval = batch.column(lcols[0]) if lcols else None
        rval = batch.column(rcols[0]) if rcols else None
        typ = (lval if lval is not None else rval).type  # type: ignore[union-attr]
        columns[name] = pc.if_else(
            is_left,
            lval if lval is not None else pa.nulls(batch.num_rows, typ),
            rval if rval is not None else pa.nulls(batch.num_rows, typ),
        )
    return pa.table(columns)


def table_to_pandas(table: pa.Table) -> pd.DataFrame:
    """Convert output rows to pandas without losing int64 precision to float NaN.

    Without Arrow's thread pool: Spark already keeps the cores busy.
    """
    return table.to_pandas(integer_object_nulls=True, date_as_object=True, use_threads=False)


# --------------------------------------------------------------------------------------------
# Wrapper: prepare the input in Spark
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JoinOperator:
    """A join bound to its inputs, ready for ``groupBy().applyInPandasWithState``.

    The low-level usage the Spark docs teach gives the same rows as :func:`stream_join`::

        op = prepare_join(left_df, right_df, spec)
        out = op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
            op.func, op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)

    Attributes:
        spec: The join spec.
        plan: The resolved plan shipped to the workers.
        prepared: The unioned, side-tagged, key-grouped, watermarked input.
        group_columns: Columns to group by (the key group).
        func: The function for ``applyInPandasWithState``.
        output_schema: The output schema (Spark ``StructType``).
        state_schema: The state schema (one binary blob column).
        output_mode: ``"append"``.
        timeout_conf: ``GroupStateTimeout.EventTimeTimeout``.
    """

    spec: Join
    plan: JoinPlan
    prepared: Any
    group_columns: tuple[str, ...]
    func: JoinFunction
    output_schema: Any
    state_schema: Any
    output_mode: str = "append"
    timeout_conf: str = "EventTimeTimeout"

    def apply(self) -> Any:
        """Run ``groupBy().applyInPandasWithState`` and return the output DataFrame."""
        return self.prepared.groupBy(*self.group_columns).applyInPandasWithState(
            self.func, self.output_schema, self.state_schema, self.output_mode, self.timeout_conf
        )


def _spark_common_key_type(lt: Any, rt: Any) -> Any:
    from pyspark.sql import types as T

    if lt == rt:
        return lt
    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    numeric = (*integral, T.FloatType, T.DoubleType, T.DecimalType)
    if isinstance(lt, integral) and isinstance(rt, integral):
        return T.LongType()
    exact = (*integral, T.DecimalType)
    if isinstance(lt, exact) and isinstance(rt, exact):

        def dec(t: Any) -> tuple[int, int]:
            return (t.precision, t.scale) if isinstance(t, T.DecimalType) else (20, 0)

        p_, s_ = _widen_decimal(dec(lt), dec(rt))
        return T.DecimalType(p_, s_)
    if isinstance(lt, numeric) and isinstance(rt, numeric):
        return T.DoubleType()
    return None


def prepare_join(left: Any, right: Any, spec: Join, *, counters: Any | None = None) -> JoinOperator:
    """Validate ``spec`` against the inputs and prepare them for the join.

    The prepared input holds, per row: its side, key group, a watermarked copy of the event
    time, the event time in µs, and every column of its side (the other side's columns null).
    Each input gets ``withWatermark(event_time, lateness_ms + H)`` before the union, so Spark
    combines the two watermarks by ``spark.sql.streaming.multipleWatermarkPolicy``.

    Args:
        left: The left streaming DataFrame.
        right: The right streaming DataFrame.
        spec: The join.
        counters: Optional Spark accumulator (see :mod:`interlace.metrics`) fed per call.

    Returns:
        A :class:`JoinOperator`.

    Raises:
        ConfigError: Any problem with the inputs (SEMANTICS §6), before a query starts.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout

    guard_source_checkout(left.sparkSession)
    check_counters(left, counters)
    sides = {}
    for name, df in (("left", left), ("right", right)):
        what = f"the {name} input"
        require_streaming(df, what)
        reject_reserved(df, what)
        et = spec.side_event_time_column(name)
        assert et is not None
        field_name = (
            f"{name}_event_time_column"
            if (getattr(spec, f"{name}_event_time_column") is not None)
            else "event_time_column"
        )
        if spec.time_mode == "processing":
            if et in df.columns:
                msg = (
                    f"`time_mode`='processing' synthesizes the event-time column {et!r}, but "
                    f"{what} already has a column named {et!r}; rename it or set "
                    f"`{field_name}` to another name"
                )
                raise ConfigError(msg)
            df = df.withColumn(et, F.current_timestamp())
        check_event_time(df, et, field_name, what)
        keys = spec.left_keys if name == "left" else spec.right_keys
        require_columns(df, keys, f"{name}_keys", what)
        sides[name] = (df, et)

    (ldf, let), (rdf, ret) = sides["left"], sides["right"]
    plan = JoinPlan.from_schemas(
        spec,
        arrow_schema_for(ldf.schema),
        arrow_schema_for(rdf.schema),
        left_type_ids=[f.dataType.json() for f in ldf.schema.fields],
        right_type_ids=[f.dataType.json() for f in rdf.schema.fields],
    )
    key_types = []
    for lk, rk in zip(spec.left_keys, spec.right_keys, strict=True):
        common = _spark_common_key_type(ldf.schema[lk].dataType, rdf.schema[rk].dataType)
        if common is None:
            msg = (
                f"key columns `left_keys` {lk!r} ({ldf.schema[lk].dataType.simpleString()}) and "
                f"`right_keys` {rk!r} ({rdf.schema[rk].dataType.simpleString()}) have "
                "incompatible types; cast one side so both keys have the same type"
            )
            raise ConfigError(msg)
        key_types.append(common)

    def side_frame(df: Any, et: str, side: int, keys: Sequence[str]) -> Any:
        own = df.columns
        base = df.select(F.col(f"`{et}`").alias(EVENT_TIME_COLUMN), *[F.col(f"`{c}`") for c in own])
        base = base.withWatermark(EVENT_TIME_COLUMN, f"{spec.watermark_delay_ms} milliseconds")
        kg_inputs = [
            f"CAST(`{k}` AS {t.simpleString()})" for k, t in zip(keys, key_types, strict=True)
        ]
        cols = [
            F.lit(side).cast("int").alias(SIDE_COLUMN),
            F.expr(key_group_sql(kg_inputs, spec.key_groups)).cast("int").alias(KEY_GROUP_COLUMN),
            F.col(EVENT_TIME_COLUMN),
            F.unix_micros(F.col(EVENT_TIME_COLUMN)).alias(TIME_COLUMN),
        ]
        # Both sides' columns share slots (payload_sources); the event-time columns are __il_t.
        for slot, li, ri in plan.slots:
            idx = li if side == LEFT else ri
            if idx is not None:
                cols.append(F.col(f"`{df.columns[idx]}`").alias(slot))
            else:
                typ = (ldf if li is not None else rdf).schema.fields[li if li is not None else ri]
                cols.append(F.lit(None).cast(typ.dataType).alias(slot))
        return base.select(*cols)

    prepared = side_frame(ldf, let, LEFT, spec.left_keys).unionByName(
        side_frame(rdf, ret, RIGHT, spec.right_keys)
    )
    out_fields = []
    for o in plan.outputs:
        src = ldf if o.side == LEFT else rdf
        idx = int(o.internal[len(LEFT_PREFIX_INTERNAL) :])
        out_fields.append(T.StructField(o.name, src.schema.fields[idx].dataType, True))
    if plan.dlq:
        out_fields.append(T.StructField(DEAD_LETTER_COLUMN, T.StringType(), True))
    return JoinOperator(
        spec=spec,
        plan=plan,
        prepared=prepared,
        group_columns=(KEY_GROUP_COLUMN,),
        func=JoinFunction(plan, counters),
        output_schema=T.StructType(out_fields),
        state_schema=T.StructType([T.StructField("blob", T.BinaryType(), False)]),
        output_mode="append",
        timeout_conf=GroupStateTimeout.EventTimeTimeout,
    )


def stream_join(left: Any, right: Any, spec: Join, *, counters: Any | None = None) -> Any:
    """Join two streaming DataFrames per ``spec`` and return the streaming result.

    interlace owns the watermark: each input gets ``withWatermark`` with delay
    ``lateness_ms + H`` (SEMANTICS §1); do not set one yourself. Output columns: the left
    columns prefixed ``left_prefix``, then the right columns prefixed ``right_prefix`` (semi /
    anti: the left columns unprefixed), then ``_dead_letter`` under ``late_data="dlq"``.

    Example (the same call runs on Spark in ``tests/replay/test_join_replay.py``)::

        out = stream_join(orders, payments, Join(
            left_keys=["order_id"], right_keys=["order_id"], how="left",
            time_window_ms=600_000, event_time_column="ts"))

    Args:
        left: The left streaming DataFrame.
        right: The right streaming DataFrame.
        spec: The join.
        counters: Optional accumulator from :func:`interlace.metrics.counters`; receives
            matches, unmatched rows emitted, late / null-key rows dropped, dead letters.

    Raises:
        ConfigError: Invalid spec or inputs, before any query starts.
    """
    return prepare_join(left, right, spec, counters=counters).apply()
