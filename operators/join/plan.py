"""The join plan: a :class:`~.spec.Join` resolved against the input schemas.

:class:`JoinPlan` is the picklable runtime description shipped to the Python workers (times in
µs); it fixes the internal column names, the output columns, the key types both sides are
compared in (Spark's type widening) and the shared slots of the prepared input
(:func:`payload_sources`). Neighbours: ``spec.py`` (the user's spec), ``step.py`` (runs a plan),
``shim.py`` (builds one from Spark schemas).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from interlace.operators.common.checks import require_names
from interlace.operators.common.keytypes import common_key_arrow_type, spark_common_key_type
from interlace.operators.common.names import (
    DEAD_LETTER_COLUMN,
    EVENT_TIME_COLUMN,
    RESERVED_PREFIX,
)
from interlace.operators.errors import ConfigError
from interlace.operators.join.spec import Join
from interlace.state.buffers import TIME_COLUMN, buffer_schema

__all__ = [
    "LEFT", "LEFT_PREFIX_INTERNAL", "RIGHT", "RIGHT_PREFIX_INTERNAL", "SIDE_COLUMN", "SIDE_NAMES",
    "SLOT_PREFIX_INTERNAL", "JoinPlan", "OutputColumn", "payload_sources", "spark_common_key_type",
]

SIDE_COLUMN = RESERVED_PREFIX + "side"
LEFT_PREFIX_INTERNAL = RESERVED_PREFIX + "l"
RIGHT_PREFIX_INTERNAL = RESERVED_PREFIX + "r"
SLOT_PREFIX_INTERNAL = RESERVED_PREFIX + "s"
LEFT, RIGHT = 0, 1
SIDE_NAMES = ("left", "right")


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
    def time_columns(self) -> tuple[str | None, str | None]:
        """Each side's event-time column among its payload columns (``None``: not known).

        The prepared input carries no event-time column of its own (:func:`payload_sources`:
        it is read from ``__il_t``), so it is the payload column ``input_sources`` maps to
        ``__il_t``. The join blob leaves ``__il_tus`` out and recomputes it from this column
        (:func:`interlace.state.buffers.encode_join_state`).
        """
        nl = len(self.left_names)
        found: list[str | None] = []
        for sources, payload in (
            (self.input_sources[2 : 2 + nl], self.left_payload),
            (self.input_sources[2 + nl :], self.right_payload),
        ):
            idx = list(sources).index(EVENT_TIME_COLUMN) if EVENT_TIME_COLUMN in sources else None
            found.append(None if idx is None else payload.names[idx])
        return found[0], found[1]

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
            common_key_arrow_type(lk, left.field(lk).type, rk, right.field(rk).type)
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
        require_names(have, names, field_name, what)


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
