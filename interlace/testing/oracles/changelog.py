"""What the three table-join oracles share (changelog input and output), written once.

The table-table join (:mod:`~interlace.testing.oracles.table`), the stream-table join
(:mod:`~interlace.testing.oracles.stream_table`) and the foreign-key join
(:mod:`~interlace.testing.oracles.foreign_key`) read their tables as changelogs
(``SEMANTICS.md`` §7) and run under the same Spark layer (readings of ``SEMANTICS.md``
that had to be chosen are in ``docs/table-joins-semantics-notes.md``). This module holds:

* the §7 reading of a changelog row (:class:`Changelog`: keys, value columns, tombstones
  by column or by all-NULL values, NULL keys);
* the result type :class:`TableOracleResult` (the same fields as the stream-stream join
  oracle's result, so replay tests use them alike);
* :func:`replay_spark`, the Spark layer (rules 0-4 of
  :mod:`~interlace.testing.oracles.spark_rules`) around an operator's per-call model;
* reading a duck-typed spec or plain keyword arguments (:class:`SpecView`);
* the §9 changelog output (:class:`ChangelogOutput`).

Applying table updates one at a time (the table-table and foreign-key joins) is in
:mod:`~interlace.testing.oracles.updates`.

It imports nothing from ``interlace.operators`` or ``interlace.state`` (nor pyspark).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from interlace.testing.log import JoinBatch, JoinLog, to_us
from interlace.testing.oracles.resolve import (
    DEFAULT_DLQ_HORIZON_MS,
    SIDES,
    event_time_columns,
    output_columns,
)
from interlace.testing.oracles.rows import (
    DEAD_LETTER_COLUMN,
    OracleRow,
    dead_letter_json_value,
)
from interlace.testing.oracles.spark_rules import (
    WATERMARK_POLICIES,
    SparkWatermarkTracker,
    operator_wm_us,
    processing_time_stamps,
    spark_drops_row,
    watermark_times,
)

__all__ = [
    "EMIT_MODES",
    "TABLE_LATE_DATA_MODES",
    "TableOracleResult",
]

EMIT_MODES = ("final", "eager")
"""``emit``: ``final`` waits for ``wm > t``; ``eager`` acts in the call that receives a row."""

TABLE_LATE_DATA_MODES = ("drop", "dlq")
"""``late_data`` modes of the table joins (``reopen`` is a config error, §8 and §9)."""

OP_UPSERT = "upsert"
OP_DELETE = "delete"
CHANGELOG_COLUMNS = ("op", "event_time", "version")
"""The columns a changelog output ends with (§9), before ``_dead_letter`` under dlq."""


# --------------------------------------------------------------------------------------
# Result type (shared by the three table oracles)
# --------------------------------------------------------------------------------------


def _per_side() -> dict[str, int]:
    return dict.fromkeys(SIDES, 0)


@dataclass
class TableOracleResult:
    """What a table join must produce for a replay log.

    The fields are those of the stream-stream join oracle's result, so replay tests read
    both alike. Sides are ``"left"`` and ``"right"``; in the stream-table join ``left`` is
    the stream and ``right`` the table.

    Attributes:
        rows: Every output row with its micro-batch, in emission order (order across rows
            is not part of the contract; compare with ``canonical_rows``).
        spark_watermarks_ms: Spark's global watermark ``W`` (ms) seen by each micro-batch,
            including the trailing no-data batch if there is one; 0 means "none yet".
        num_batches: Micro-batches run: ``len(log)``, plus one for the trailing no-data
            batch.
        late_dropped: Side -> rows judged late and discarded (``late_data="drop"``).
        null_key_dropped: Side -> rows with a NULL key that were ignored (table updates,
            §7; stream rows of an ``inner`` stream-table join, §8).
        spark_dropped: Side -> rows Spark removed before the operator saw them.
        dead_lettered: Side -> rows judged late and sent to the dead-letter output.
        output_columns: The output column names, in order.
        held: Per micro-batch, what the operator holds after it (the stream-table join:
            :class:`~interlace.testing.oracles.stream_table.HeldTableItem`), what
            ``interlace inspect`` must report for that batch.

    """

    rows: list[OracleRow] = field(default_factory=list)
    spark_watermarks_ms: list[int] = field(default_factory=list)
    num_batches: int = 0
    held: list[list[Any]] = field(default_factory=list)
    late_dropped: dict[str, int] = field(default_factory=_per_side)
    null_key_dropped: dict[str, int] = field(default_factory=_per_side)
    spark_dropped: dict[str, int] = field(default_factory=_per_side)
    dead_lettered: dict[str, int] = field(default_factory=_per_side)
    output_columns: list[str] = field(default_factory=list)

    def rows_for_batch(self, batch: int) -> list[dict[str, Any]]:
        """Return the output rows emitted by one micro-batch, in emission order."""
        return [out.row for out in self.rows if out.batch == batch]

    def rows_by_batch(self) -> dict[int, list[dict[str, Any]]]:
        """Return batch index -> output rows, with an entry for every batch run."""
        grouped: dict[int, list[dict[str, Any]]] = {b: [] for b in range(self.num_batches)}
        for out in self.rows:
            grouped[out.batch].append(out.row)
        return grouped


# --------------------------------------------------------------------------------------
# Reading the spec: a duck-typed object, plain keyword arguments, or both
# --------------------------------------------------------------------------------------


class SpecView:
    """Read spec fields from keyword overrides first, then from a duck-typed spec object.

    ``getattr(view, name, default)`` works as on the spec itself, so the operators' frozen
    spec dataclasses (which the oracles must not import), a ``SimpleNamespace`` or plain
    keyword arguments all serve.
    """

    def __init__(self, spec: object | None, overrides: Mapping[str, Any]) -> None:
        self._spec = spec
        self._overrides = dict(overrides)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._overrides:
            return self._overrides[name]
        if self._spec is None:
            raise AttributeError(name)
        return getattr(self._spec, name)


def read_choice(spec: object, name: str, default: str, allowed: Sequence[str]) -> str:
    """Read a mode field and check it is one of ``allowed``.

    Raises:
        ValueError: Naming the field, the allowed values and the value received.

    """
    value = getattr(spec, name, None)
    value = default if value is None else value
    if value not in allowed:
        msg = f"`{name}` must be one of {tuple(allowed)} (got {value!r})"
        raise ValueError(msg)
    return str(value)


def read_late_data(spec: object) -> str:
    """Read ``late_data``: ``drop`` or ``dlq`` (``reopen`` has no meaning for tables)."""
    late_data = getattr(spec, "late_data", None) or "drop"
    if late_data == "reopen":
        msg = (
            "`late_data`='reopen' is not supported by the table joins (SEMANTICS.md §8, §9); "
            "use 'drop' or 'dlq'"
        )
        raise ValueError(msg)
    return read_choice(spec, "late_data", "drop", TABLE_LATE_DATA_MODES)


def dlq_extra_horizon_ms(spec: object, late_data: str) -> int:
    """Return what ``dlq`` adds to the horizon ``H``: ``dlq_horizon_ms`` (default one day).

    §7 sets ``H`` to ``HR`` (stream-table) or 0 (table-table); under ``dlq`` the oracle
    adds §1's dlq horizon on top, so that late rows reach the operator and become dead
    letters instead of being removed by Spark's pre-filter (notes, "horizon under dlq").
    """
    if late_data != "dlq":
        return 0
    horizon = getattr(spec, "dlq_horizon_ms", None)
    return DEFAULT_DLQ_HORIZON_MS if horizon is None else int(horizon)


def check_output_columns(columns: Sequence[str], late_data: str) -> tuple[str, ...]:
    """A table join's :func:`~interlace.testing.oracles.resolve.output_columns`.

    Raises:
        ValueError: If two output columns have the same name (the message names the fix).

    """
    return output_columns(columns, late_data, fix="change a prefix or `value_columns`")


@dataclass(frozen=True)
class TableSpec:
    """The spec fields every table oracle reads first, in this order (§7-§9).

    Attributes:
        view: The spec (keyword overrides first).
        how: The join's ``how``.
        emit: ``final`` or ``eager``.
        late_data: ``drop`` or ``dlq``.
        time_column: Each side's event-time column.
        keys: Each side's key columns (``left_keys`` / ``right_keys``).

    """

    view: SpecView
    how: str
    emit: str
    late_data: str
    time_column: dict[str, str]
    keys: dict[str, tuple[str, ...]]

    @classmethod
    def read(
        cls, spec: object | None, spec_fields: Mapping[str, Any], hows: Sequence[str]
    ) -> TableSpec:
        """Read a duck-typed ``spec`` with keyword overrides; ``hows``: the allowed ``how``s."""
        view = SpecView(spec, spec_fields)
        return cls(
            view=view,
            how=read_choice(view, "how", "inner", hows),
            emit=read_choice(view, "emit", "final", EMIT_MODES),
            late_data=read_late_data(view),
            time_column=event_time_columns(view),
            keys={side: tuple(getattr(view, f"{side}_keys")) for side in SIDES},
        )

    @property
    def lateness_ms(self) -> int:
        """``lateness_ms`` (default 0)."""
        return int(getattr(self.view, "lateness_ms", 0) or 0)

    def check_key_pairs(self) -> None:
        """Raise ``ValueError`` unless both sides' keys are non-empty and pair up."""
        if not self.keys["left"] or len(self.keys["left"]) != len(self.keys["right"]):
            msg = (
                f"`left_keys`/`right_keys` must be non-empty and of equal length "
                f"(got {self.keys})"
            )
            raise ValueError(msg)

    def stamped(
        self,
        log: JoinLog,
        left_columns: Sequence[str],
        right_columns: Sequence[str],
        batch_times_ms: Sequence[int] | None,
    ) -> tuple[list[JoinBatch], dict[str, tuple[str, ...]]]:
        """The log and each side's columns under rule 0 (:func:`stamp_processing_time`)."""
        columns = {"left": left_columns, "right": right_columns}
        return stamp_processing_time(
            self.view, log, columns, self.time_column, batch_times_ms
        )

    def replay(
        self,
        log: Sequence[JoinBatch],
        horizon_ms: int,
        watermark_policy: str,
        result: TableOracleResult,
        call: CallFn,
    ) -> TableOracleResult:
        """Run :func:`replay_spark` with the delay ``lateness_ms + H``; return ``result``."""
        replay_spark(
            log,
            event_time_column=self.time_column,
            delay_ms=self.lateness_ms + horizon_ms,
            horizon_ms=horizon_ms,
            watermark_policy=watermark_policy,
            result=result,
            call=call,
        )
        return result


# --------------------------------------------------------------------------------------
# §7: a changelog input
# --------------------------------------------------------------------------------------

KeyTuple = tuple[Any, ...]


def _key_part(value: Any) -> Any:
    """Normalise one key value for dict lookup as Spark compares join keys.

    NaN equals NaN in Spark's join keys (and -0.0 equals 0.0, as in Python already), but
    two Python NaN objects are different dict keys; map every NaN to one marker.
    """
    if isinstance(value, float) and math.isnan(value):
        return ("<NaN>",)
    return value


def key_tuple(row: Mapping[str, Any], columns: Sequence[str]) -> KeyTuple | None:
    """Return the row's key as a hashable tuple, or None if any key column is NULL.

    NULL never equals anything (§2, §8), so a NULL key has no tuple to look up.
    """
    values = [row[name] for name in columns]
    if any(value is None for value in values):
        return None
    return tuple(_key_part(value) for value in values)


@dataclass(frozen=True)
class Changelog:
    """How one table input's rows are read (§7).

    Attributes:
        side: ``"left"`` or ``"right"``.
        columns: Every input column, in order.
        keys: The key columns (the join's ``left_keys`` / ``right_keys``).
        event_time_column: The update's valid-from time.
        value_columns: The table's value columns.
        tombstone_column: Optional boolean column; true = delete.

    """

    side: str
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    event_time_column: str
    value_columns: tuple[str, ...]
    tombstone_column: str | None

    def key(self, row: Mapping[str, Any]) -> KeyTuple | None:
        """Return the update's key, or None for a NULL key (§7: ignored and counted)."""
        return key_tuple(row, self.keys)

    def is_tombstone(self, row: Mapping[str, Any]) -> bool:
        """Say whether an update deletes its key (§7).

        With ``tombstone_column``: iff that column is true (NULL and false are upserts,
        even with every value NULL). Without it: iff every value column is NULL (Kafka's
        null value). A table without value columns has no all-NULL tombstones: its
        updates only say that the key exists (notes, "tombstones").
        """
        if self.tombstone_column is not None:
            flag = row[self.tombstone_column]
            return flag is not None and bool(flag)
        if not self.value_columns:
            return False
        return all(row[name] is None for name in self.value_columns)

    def values(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """Return the update's value columns, in order."""
        return {name: row[name] for name in self.value_columns}

    def input_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """Return every input column of the row, in order (for dead letters)."""
        return {name: row[name] for name in self.columns}


def read_changelog(
    spec: object,
    side: str,
    columns: Sequence[str],
    keys: Sequence[str],
    event_time_column: str,
    *,
    shared_fields: bool,
) -> Changelog:
    """Read one table input's §7 fields from the spec.

    ``{side}_value_columns`` / ``{side}_tombstone_column`` win; with ``shared_fields`` the
    spec's ``value_columns`` / ``tombstone_column`` apply too (the stream-table join has one
    table, so its shared fields are the table's; table-table and foreign-key joins apply
    them to both tables).

    Raises:
        ValueError: For a missing column, value columns overlapping the keys, the event
            time or the tombstone column.

    """
    columns = tuple(columns)
    keys = tuple(keys)
    tombstone = getattr(spec, f"{side}_tombstone_column", None)
    if tombstone is None and shared_fields:
        tombstone = getattr(spec, "tombstone_column", None)
    chosen_values = getattr(spec, f"{side}_value_columns", None)
    if chosen_values is None and shared_fields:
        chosen_values = getattr(spec, "value_columns", None)
    # §7: default value columns are every column but the keys, the event time and the
    # tombstone column.
    excluded = {*keys, event_time_column, *([tombstone] if tombstone else [])}
    if chosen_values is None:
        value_columns = tuple(name for name in columns if name not in excluded)
    else:
        value_columns = tuple(chosen_values)
        overlap = [name for name in value_columns if name in excluded]
        if overlap:
            msg = (
                f"{side} `value_columns` {overlap} overlap the keys, the event time or the "
                f"tombstone column; leave them out"
            )
            raise ValueError(msg)
    needed = [*keys, event_time_column, *value_columns, *([tombstone] if tombstone else [])]
    missing = [name for name in needed if name not in columns]
    if missing:
        msg = f"{side} columns {missing} are not in the {side} input's columns {columns}"
        raise ValueError(msg)
    if not keys:
        msg = f"the {side} key columns must not be empty"
        raise ValueError(msg)
    return Changelog(
        side=side,
        columns=columns,
        keys=keys,
        event_time_column=event_time_column,
        value_columns=value_columns,
        tombstone_column=None if tombstone is None else str(tombstone),
    )


# --------------------------------------------------------------------------------------
# Dead letters (§4), with "no watermark yet" allowed
# --------------------------------------------------------------------------------------


def dead_letter_row(
    output_columns: Sequence[str], side: str, wm_us: int | None, row: Mapping[str, Any]
) -> dict[str, Any]:
    """Build a dead-letter output row: every output column NULL except ``_dead_letter``.

    Its JSON is ``{"side", "reason": "late", "watermark", "row"}`` (§4). ``watermark`` is
    ``wm`` in ms, or null when the table-table join rejects an out-of-order update before
    any watermark exists (§9 lateness does not need one).
    """
    payload = {
        "side": side,
        "reason": "late",
        "watermark": None if wm_us is None else wm_us // 1000,
        "row": {name: dead_letter_json_value(value) for name, value in row.items()},
    }
    values: dict[str, Any] = dict.fromkeys(output_columns)
    values[DEAD_LETTER_COLUMN] = json.dumps(payload)
    return values


# --------------------------------------------------------------------------------------
# The Spark layer around a table oracle's per-call model (rules 0-4)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arrival:
    """One input row that survived Spark's pre-filter.

    Attributes:
        row: The input row.
        event_time_us: Its event time in µs.
        seq: Its arrival number across the whole log (left rows of a batch before its
            right rows), for "ties: arrival order".

    """

    row: Mapping[str, Any]
    event_time_us: int
    seq: int


CallFn = Callable[[int, dict[str, list[Arrival]], "int | None"], None]
"""A model's per-call step: ``(batch index, side -> arrivals, wm in µs or None)``."""


DueItem = TypeVar("DueItem")


def split_due(
    items: Sequence[DueItem], emit: str, wm_us: int | None, event_time_us: Callable[[DueItem], int]
) -> tuple[list[DueItem], list[DueItem]]:
    """Split held items into (due now, still held) under ``emit`` (§8, §9).

    ``eager``: everything is due in the call that receives it. ``final``: an item is due in
    the first call where ``wm > t`` (strict); with no watermark yet nothing is due.
    """
    if emit == "eager":
        return list(items), []
    due: list[DueItem] = []
    held: list[DueItem] = []
    for item in items:
        is_due = wm_us is not None and wm_us > event_time_us(item)
        (due if is_due else held).append(item)
    return due, held


def stamp_processing_time(
    spec: object,
    log: JoinLog,
    columns: dict[str, Sequence[str]],
    event_time_column: dict[str, str],
    batch_times_ms: Sequence[int] | None,
) -> tuple[list[JoinBatch], dict[str, tuple[str, ...]]]:
    """Apply rule 0 when ``time_mode="processing"``: every row takes its batch's timestamp.

    Returns:
        The log (rewritten under processing time) and each side's columns (with the
        event-time column added if the input lacked it).

    """
    if (getattr(spec, "time_mode", None) or "event") != "processing":
        return list(log), {side: tuple(columns[side]) for side in SIDES}
    stamps = processing_time_stamps(batch_times_ms, len(log))
    rewritten = [
        JoinBatch(
            left=tuple({**row, event_time_column["left"]: stamp} for row in batch.left),
            right=tuple({**row, event_time_column["right"]: stamp} for row in batch.right),
        )
        for batch, stamp in zip(log, stamps, strict=True)
    ]
    with_time = {
        side: tuple(columns[side])
        + (() if event_time_column[side] in columns[side] else (event_time_column[side],))
        for side in SIDES
    }
    return rewritten, with_time


def replay_spark(
    log: Sequence[JoinBatch],
    *,
    event_time_column: dict[str, str],
    delay_ms: int,
    horizon_ms: int,
    watermark_policy: str,
    result: TableOracleResult,
    call: CallFn,
) -> None:
    """Run the Spark layer over the log and hand each call's surviving rows to ``call``.

    1. Batch ``b`` sees Spark's ``W`` computed after batches ``0..b-1`` (per input
       ``max(event ms) - delay``, combined by the policy, an input without rows counting
       as 0, never decreasing; 0 = none).
    2. Spark's pre-filter removes rows with ``t <= W_prev`` (``spark_dropped``).
    3. After the last batch, one trailing no-data batch runs if ``W`` advanced.
    4. Every decision of a call uses ``wm = (W + H) * 1000`` µs, None while ``W <= 0``.

    Raises:
        ValueError: For an unknown policy or a NULL event time.

    """
    if watermark_policy not in WATERMARK_POLICIES:
        msg = f"`watermark_policy` must be one of {WATERMARK_POLICIES} (got {watermark_policy!r})"
        raise ValueError(msg)
    tracker = SparkWatermarkTracker(delay_ms, watermark_policy, SIDES)
    previous_batch_w_ms = 0
    seq = 0
    for batch_index, batch in enumerate(log):
        # Rule 1: this batch sees the W computed after batches 0..b-1.
        spark_w_ms = tracker.global_ms
        result.spark_watermarks_ms.append(spark_w_ms)
        rows_by_side = {"left": batch.left, "right": batch.right}
        times_us = {
            side: [_event_time_us(side, row, event_time_column[side]) for row in rows_by_side[side]]
            for side in SIDES
        }
        clocks = {"left": batch.left_clock_us, "right": batch.right_clock_us}
        beats = {"left": batch.left_heartbeat_us, "right": batch.right_heartbeat_us}
        seen_by = {side: watermark_times(times_us[side], clocks[side], beats[side])
                   for side in SIDES}
        # Rule 2: Spark's pre-filter against the W the previous batch saw (a chain stage's
        # input: its clock).
        arrivals: dict[str, list[Arrival]] = {side: [] for side in SIDES}
        for side in SIDES:
            side_rows = zip(rows_by_side[side], times_us[side], seen_by[side][0], strict=True)
            for row, time_us, filter_us in side_rows:
                if spark_drops_row(filter_us, previous_batch_w_ms):
                    result.spark_dropped[side] += 1
                    continue
                arrivals[side].append(Arrival(row=row, event_time_us=time_us, seq=seq))
                seq += 1
        # Rule 4: one wm for every decision of the call.
        call(batch_index, arrivals, operator_wm_us(spark_w_ms, horizon_ms))
        # Rule 1 (continued): W after this batch, from all its rows (filtered ones too).
        tracker.observe_batch({side: seen_by[side][1] for side in SIDES})
        previous_batch_w_ms = spark_w_ms
    result.num_batches = len(log)
    # Rule 3: the trailing no-data batch.
    if log and tracker.global_ms > result.spark_watermarks_ms[-1]:
        result.spark_watermarks_ms.append(tracker.global_ms)
        call(len(log), {side: [] for side in SIDES}, operator_wm_us(tracker.global_ms, horizon_ms))
        result.num_batches += 1


def _event_time_us(side: str, row: Mapping[str, Any], column: str) -> int:
    value = row[column]
    if value is None:
        msg = (
            f"{side} row has a NULL event time in `{column}`; the table oracles do not "
            f"model NULL event times: {dict(row)!r}"
        )
        raise ValueError(msg)
    return to_us(value)


# --------------------------------------------------------------------------------------
# Changelog output rows (§9)
# --------------------------------------------------------------------------------------


class ChangelogOutput:
    """Emit §9 changelog rows: key columns, prefixed values, ``op``, ``event_time``, ``version``.

    ``version`` is per output key, from 0, +1 per emitted row.
    """

    def __init__(
        self,
        result: TableOracleResult,
        key_columns: Sequence[str],
        value_columns: dict[str, tuple[str, ...]],
        prefix: dict[str, str],
        late_data: str,
    ) -> None:
        self.result = result
        self.key_columns = tuple(key_columns)
        self.value_columns = value_columns
        self.prefix = prefix
        self.late_data = late_data
        self.next_version: dict[KeyTuple, int] = {}
        columns = [
            *self.key_columns,
            *(prefix[side] + name for side in SIDES for name in value_columns[side]),
            *CHANGELOG_COLUMNS,
        ]
        self.output_columns = check_output_columns(columns, late_data)
        result.output_columns = list(self.output_columns)

    def emit(
        self,
        batch: int,
        key: KeyTuple,
        key_values: Sequence[Any],
        op: str,
        values: dict[str, dict[str, Any] | None],
        event_time: Any,
    ) -> None:
        """Emit one changelog row; ``values[side]`` None means that side is NULL."""
        row: dict[str, Any] = dict(zip(self.key_columns, key_values, strict=True))
        for side in SIDES:
            side_values = values[side] if op == OP_UPSERT else None
            for name in self.value_columns[side]:
                row[self.prefix[side] + name] = None if side_values is None else side_values[name]
        version = self.next_version.get(key, 0)
        self.next_version[key] = version + 1
        row["op"] = op
        row["event_time"] = event_time
        row["version"] = version
        if self.late_data == "dlq":
            row[DEAD_LETTER_COLUMN] = None
        self.result.rows.append(OracleRow(batch=batch, row=row))

    def dead_letter(
        self, batch: int, changelog: Changelog, wm_us: int | None, row: Mapping[str, Any]
    ) -> None:
        """Emit a dead-letter row for a late update and count it."""
        input_row = changelog.input_row(row)
        values = dead_letter_row(self.output_columns, changelog.side, wm_us, input_row)
        self.result.rows.append(OracleRow(batch=batch, row=values))
        self.result.dead_lettered[changelog.side] += 1
