"""Pieces the table joins share in their pure steps (SEMANTICS §4, §7, §9).

The stream-table join (``stream_table/step.py``), the table-table join (``table/step.py``)
and the foreign-key join (``foreign_key/step.py``) read changelog updates from Arrow, tell
tombstones from upserts, count per call and turn rows they cannot use into dead letters; the
two changelog joins also share their output columns, the admission of a call's updates and
the split of pending updates into due and held. Those pieces are written once here.

Rows a step should apply but not count (the foreign-key join's copies of a right update in
key groups other than its home one) are excluded from counts and dead letters by a
``counted`` mask.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import numpy as np
import pyarrow as pa
from interlace.operators.common.arrow import i64
from interlace.operators.common.compat import to_pylist
from interlace.operators.common.deadletters import dead_letter
from interlace.operators.common.keys import has_null_key
from interlace.operators.common.names import (
    DEAD_LETTER_COLUMN,
    EVENT_TIME_OUT,
    OP_COLUMN,
    RESERVED_PREFIX,
    VERSION_COLUMN,
)
from interlace.operators.common.prepare import HOME_COLUMN, SIDE_COLUMN
from interlace.operators.common.tables import (
    TablePlan,
    TableSide,
    TwoTableFields,
    check_output_names,
)
from interlace.state.buffers import TIME_COLUMN
from interlace.state.tables import SEQ_COLUMN
from numpy.typing import NDArray

__all__ = [
    "EVENT_TIME_OUT",
    "KEY_PREFIX",
    "OP_COLUMN",
    "OP_DELETE",
    "OP_UPSERT",
    "SIDE_NAMES",
    "VERSION_COLUMN",
    "ChangelogPlan",
    "add_count",
    "admit_updates",
    "bools",
    "changelog_output_names",
    "changelog_step",
    "dead_letter_rows",
    "earliest_time_us",
    "reject_updates",
    "split_due",
    "split_pending",
    "take_or_null",
    "take_updates",
    "tombstone_mask",
    "with_dead_letters",
]

"""The fixed output columns of a changelog (SEMANTICS §9)."""
OP_UPSERT, OP_DELETE = "upsert", "delete"
SIDE_NAMES = ("left", "right")
KEY_PREFIX = RESERVED_PREFIX + "k"

_Applied = TypeVar("_Applied")


@dataclass(frozen=True)
class ChangelogPlan(TablePlan):
    """What the two changelog joins' plans share (table-table, foreign-key; SEMANTICS §9).

    Both tables resolved against their schemas, the output key's types (the state's key
    columns ``__il_k<i>`` have them) and the event time's; the prepared input (side tag, µs
    time, the home flag under replication, then every column of both tables), the held
    updates and the output derive from them.
    """

    sides: tuple[TableSide, TableSide]
    key_types: tuple[pa.DataType, ...]
    time_type: pa.DataType

    @property
    def key_internal(self) -> tuple[str, ...]:
        """The state's output key columns (``__il_k<i>``, typed :attr:`key_types`)."""
        return tuple(f"{KEY_PREFIX}{i}" for i in range(len(self.key_types)))

    @property
    def input_schema(self) -> pa.Schema:
        """The prepared input's schema: side tag, µs time, home flag, left and right columns.

        The home flag only under replication (:attr:`replicated_side`).
        """
        head = [pa.field(SIDE_COLUMN, pa.int32()), pa.field(TIME_COLUMN, pa.int64())]
        if self.replicated_side is not None:
            head.append(pa.field(HOME_COLUMN, pa.bool_()))
        return pa.schema(head + list(self.sides[0].payload) + list(self.sides[1].payload))

    @property
    def held_schema(self) -> pa.Schema:
        """Schema of the held updates: the prepared input plus the arrival number."""
        return self.input_schema.append(pa.field(SEQ_COLUMN, pa.int64()))

    def value_fields(self, side: int) -> list[pa.Field]:
        """The internal value fields of ``side`` (0 left, 1 right)."""
        s = self.sides[side]
        return [s.payload.field(n) for n in s.value_internal]

    def side_columns(self, side: int) -> tuple[pa.Schema, tuple[str, ...]]:
        """Table ``side``'s internal payload schema and its column names (0 left, 1 right)."""
        return self.sides[side].payload, self.sides[side].names

    @property
    def output_schema(self) -> pa.Schema:
        """Arrow schema of the output rows, in :attr:`output_names` order."""
        types = list(self.key_types)
        types += [f.type for f in self.value_fields(0)] + [f.type for f in self.value_fields(1)]
        return self._output_schema([*types, pa.string(), self.time_type, pa.int64()])

    @classmethod
    def _resolved(
        cls,
        spec: TwoTableFields,
        left: pa.Schema,
        right: pa.Schema,
        sides: tuple[TableSide, TableSide],
        **own: Any,
    ) -> Self:
        """The plan of ``spec`` with both tables ``sides`` and the plan's ``own`` fields.

        Raises:
            ConfigError: Two output columns collide.
        """
        names = changelog_output_names(
            spec.left_keys,
            [spec.left_prefix + v for v in sides[0].value_names],
            [spec.right_prefix + v for v in sides[1].value_names],
            spec.late_data == "dlq",
        )
        make: Callable[..., Self] = cls
        return make(
            how=spec.how,
            emit=spec.emit,
            late_data=spec.late_data,
            horizon_ms=spec.horizon_ms,
            output_names=names,
            fp=spec.state_fingerprint(left.names, right.names),
            sides=sides,
            time_type=left.field(spec.side_event_time_column("left")).type,
            **own,
        )


def bools(a: pa.ChunkedArray | pa.Array) -> NDArray[np.bool_]:
    """A boolean Arrow column as a numpy array (NULL must have been filled or not occur)."""
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=bool)


def add_count(counters: dict[str, int], name: str, n: int) -> None:
    """Add ``n`` to ``counters[name]`` (absent names stay absent while ``n`` is 0)."""
    if n:
        counters[name] = counters.get(name, 0) + n


def dead_letter_rows(
    rows: pa.Table,
    payload: pa.Schema,
    names: Sequence[str],
    side: str,
    reason: str,
    wm_us: int | None,
    output_schema: pa.Schema,
) -> pa.Table:
    """One output row per row of ``rows``: NULL columns and a dead letter (SEMANTICS §4).

    Args:
        rows: The rows, holding ``payload``'s internal columns.
        payload: The side's internal payload schema (``__il_l<i>`` / ``__il_r<i>``).
        names: The side's user column names, in payload order.
        side: ``"left"`` or ``"right"``.
        reason: ``"late"`` or ``"null_event_time"``.
        wm_us: The operator watermark, ``None`` before Spark has one.
        output_schema: The operator's output schema; its last column is ``_dead_letter``.
    """
    records = to_pylist(rows.select(payload.names).rename_columns(list(names)))
    # A Python loop, off the hot path: it runs only over rows that are dead-lettered.
    letters = [dead_letter(side, reason, wm_us, r) for r in records]
    cols = [pa.nulls(len(letters), f.type) for f in output_schema][:-1]
    return pa.Table.from_arrays([*cols, pa.array(letters, pa.string())], schema=output_schema)


def tombstone_mask(
    updates: pa.Table, tombstone_column: str | None, value_columns: Sequence[str]
) -> NDArray[np.bool_]:
    """SEMANTICS §7: the tombstone column is true, or (without one) every value is NULL.

    A NULL tombstone flag is not a delete; a table without value columns has no all-NULL
    tombstones (docs/table-joins-semantics-notes.md §5).
    """
    n = updates.num_rows
    if tombstone_column is not None:
        return bools(updates.column(tombstone_column).fill_null(False))
    if not value_columns:
        return np.zeros(n, dtype=bool)
    tomb = np.ones(n, dtype=bool)
    for v in value_columns:
        tomb &= bools(updates.column(v).is_null())
    return tomb


def take_or_null(table: pa.Table, idx: NDArray[np.int64], valid: NDArray[np.bool_]) -> pa.Table:
    """Rows ``idx`` of ``table``, NULL where not ``valid``."""
    return table.take(pa.array(np.where(valid, idx, 0), mask=~valid))


def changelog_output_names(
    keys: Sequence[str], left_values: Sequence[str], right_values: Sequence[str], dlq: bool
) -> tuple[str, ...]:
    """The output columns of a changelog join (SEMANTICS §9), checked for collisions.

    Args:
        keys: The output key columns (named as the left table's primary key).
        left_values: The left value columns, prefixed.
        right_values: The right value columns, prefixed.
        dlq: Whether ``_dead_letter`` is added.

    Raises:
        ConfigError: Two output columns share a name, or one uses the reserved prefix.
    """
    names = [*keys, *left_values, *right_values, OP_COLUMN, EVENT_TIME_OUT, VERSION_COLUMN]
    if dlq:
        names.append(DEAD_LETTER_COLUMN)
    return check_output_names(
        names,
        "the keys, `left_prefix` / `right_prefix` + value columns, and the fixed "
        f"{OP_COLUMN!r}, {EVENT_TIME_OUT!r}, {VERSION_COLUMN!r}",
        "choose other prefixes or value columns",
    )


def reject_updates(
    plan: TablePlan,
    side: int,
    rows: pa.Table,
    wm_us: int | None,
    reason: str,
    counters: dict[str, int],
    letters: list[pa.Table],
) -> None:
    """Dead-letter ``rows`` of ``side`` under dlq, else count them as dropped.

    ``reason``: ``"late"`` (counted as ``late_dropped_<side>``) or ``"null_event_time"``.
    """
    name = SIDE_NAMES[side]
    if plan.dlq:
        payload, names = plan.side_columns(side)
        letters.append(
            dead_letter_rows(rows, payload, names, name, reason, wm_us, plan.output_schema)
        )
        add_count(counters, f"dead_lettered_{name}", rows.num_rows)
    else:
        dropped = "late_dropped" if reason == "late" else "null_event_time_dropped"
        add_count(counters, f"{dropped}_{name}", rows.num_rows)


def admit_updates(
    plan: ChangelogPlan,
    rows: pa.Table,
    wm_us: int | None,
    counters: dict[str, int],
    letters: list[pa.Table],
    counted: NDArray[np.bool_] | None = None,
) -> pa.Table:
    """Set aside updates without an event time (dlq or counted) and with a NULL key (counted).

    SEMANTICS §7: an update with a NULL key is ignored and counted. Rows outside ``counted``
    (default: every row) are set aside silently.
    """
    side = np.asarray(rows.column(SIDE_COLUMN).to_numpy(), dtype=np.int32)
    count = np.ones(rows.num_rows, dtype=bool) if counted is None else counted
    drop = np.zeros(rows.num_rows, dtype=bool)
    null_t = bools(rows.column(TIME_COLUMN).is_null())
    for s, name in enumerate(SIDE_NAMES):
        mine = side == s
        bad_t = mine & null_t
        if (bad_t & count).any():
            reject_updates(plan, s, rows.filter(pa.array(bad_t & count)), wm_us,
                           "null_event_time", counters, letters)
        null_key = mine & ~bad_t & has_null_key(rows, plan.sides[s].key_internal)
        add_count(counters, f"null_key_dropped_{name}", int((null_key & count).sum()))
        drop |= bad_t | null_key
    return rows.filter(pa.array(~drop)) if drop.any() else rows


def split_pending(
    emit: str, held: pa.Table, arrived: pa.Table, wm_us: int | None
) -> tuple[pa.Table, pa.Table, NDArray[np.bool_]]:
    """Split the held and newly arrived rows into (due now, still held) (SEMANTICS §8, §9).

    ``eager``: every row is due in the call that receives it. ``final``: a row is due in the
    first call where ``wm > t``; with no watermark yet nothing is due.

    Returns:
        The due rows, the rows still held, and which arrived rows stay held.
    """
    pending = pa.concat_tables([held, arrived]) if arrived.num_rows else held
    if emit == "eager":
        due_mask = np.ones(pending.num_rows, dtype=bool)
    elif wm_us is None:
        due_mask = np.zeros(pending.num_rows, dtype=bool)
    else:
        due_mask = wm_us > i64(pending.column(TIME_COLUMN))
    still = pending.filter(pa.array(~due_mask)) if not due_mask.all() else pending.slice(0, 0)
    due = pending.filter(pa.array(due_mask)) if not due_mask.all() else pending
    return due, still, ~due_mask[held.num_rows :]


def split_due(
    emit: str,
    held: pa.Table,
    arrived: pa.Table,
    wm_us: int | None,
    counters: dict[str, int],
    counted: NDArray[np.bool_] | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Split the held and newly arrived updates into (due now, still held) (:func:`split_pending`).

    Counts the arrived updates that stay held (``held_left/right``; only those in ``counted``).
    """
    due, still, new_held = split_pending(emit, held, arrived, wm_us)
    if counted is not None:
        new_held &= counted
    new_side = np.asarray(arrived.column(SIDE_COLUMN).to_numpy(), dtype=np.int32)
    for s, name in enumerate(SIDE_NAMES):
        add_count(counters, f"held_{name}", int((new_held & (new_side == s)).sum()))
    return due, still


def take_updates(
    plan: ChangelogPlan,
    held: pa.Table,
    seq: int,
    batch: pa.Table,
    wm_us: int | None,
    counters: dict[str, int],
    letters: list[pa.Table],
) -> tuple[pa.Table, pa.Table]:
    """Take a call's updates: the due ones and those still held (SEMANTICS §7, §9).

    Numbers the ``batch`` from the next arrival number ``seq`` (:data:`SEQ_COLUMN`), sets
    aside updates without an event time or with a NULL key (:func:`admit_updates`) and splits
    the ``held`` and admitted updates (:func:`split_due`). Under replication only the home
    copies (:data:`HOME_COLUMN`) are counted.
    """
    numbers = pa.array(seq + np.arange(batch.num_rows, dtype=np.int64))
    rows = batch.append_column(SEQ_COLUMN, numbers)
    replicated = plan.replicated_side is not None
    counted = _home(rows) if replicated else None
    arrived = admit_updates(plan, rows, wm_us, counters, letters, counted)
    counted = _home(arrived) if replicated else None
    return split_due(plan.emit, held, arrived, wm_us, counters, counted)


def _home(rows: pa.Table) -> NDArray[np.bool_]:
    """The home flag of replicated rows (:data:`HOME_COLUMN`; NULL counts as home)."""
    return bools(rows.column(HOME_COLUMN).fill_null(True))


def earliest_time_us(rows: pa.Table) -> int | None:
    """The earliest µs event time of ``rows`` (held ones: due when ``wm >`` it), or ``None``."""
    times = i64(rows.column(TIME_COLUMN))
    return int(times.min()) if len(times) else None


def with_dead_letters(output: pa.Table, letters: list[pa.Table]) -> pa.Table:
    """The call's output rows, then its dead letters."""
    return pa.concat_tables([output, *letters]) if letters else output


def changelog_step(
    plan: ChangelogPlan,
    held: pa.Table,
    seq: int,
    batch: pa.Table,
    wm_us: int | None,
    apply: Callable[[pa.Table, dict[str, int], list[pa.Table]], tuple[_Applied, pa.Table]],
) -> tuple[pa.Table, _Applied, pa.Table, int | None, dict[str, int]]:
    """Run one call of a changelog join's step: take its updates, apply the due ones.

    Order (SEMANTICS §7, §9): updates without an event time are set aside (dead letters under
    dlq, else counted), updates with a NULL key are ignored and counted; the due updates
    (``eager``: all received; ``final``: held and new ones with ``wm > t``) go to ``apply``,
    which applies them one at a time by (event time, left before right, arrival). An update
    older than the latest applied one of its key in its own table is late (dropped and
    counted, or a dead letter).

    Args:
        plan: The resolved join.
        held: The key group's held updates before the call.
        seq: The key group's next arrival number.
        batch: Input rows with ``plan.input_schema`` columns (both tables, tagged by side), in
            arrival order.
        wm_us: The operator watermark ``(W + H) * 1000``, or ``None`` if Spark has none yet
            (then nothing is due under ``final``).
        apply: Applies the due updates, counting in the call's counters and adding its dead
            letters; returns the key group's new tables and the changelog.

    Returns:
        The output (the changelog, then the dead letters), what ``apply`` returned for the
        new tables, the updates still held, the earliest event time among them (``None`` if
        none) and the counters.
    """
    counters: dict[str, int] = {}
    letters: list[pa.Table] = []
    due, still = take_updates(plan, held, seq, batch, wm_us, counters, letters)
    applied, output = apply(due, counters, letters)
    output = with_dead_letters(output, letters)
    return output, applied, still.combine_chunks(), earliest_time_us(still), counters
