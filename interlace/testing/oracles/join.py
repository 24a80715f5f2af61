"""Reference model (oracle) of the interlace stream-stream join, as Spark runs it.

The oracle replays a :data:`~interlace.testing.log.JoinLog` one micro-batch at a time and
one row at a time, and says which output rows the join must emit in which micro-batch. It
is deliberately naive: plain loops over buffered rows, no vectorisation, no key groups, no
state blobs. It imports nothing from ``interlace.operators`` or ``interlace.state`` (nor
pyspark), so it can judge them.

It models two layers, each rule a visible, numbered step in :func:`oracle_join`:

* **Spark** (rules 0-3): the global watermark ``W`` (ms) that Spark's ``WatermarkTracker``
  computes after each micro-batch, the rows Spark itself drops before the operator sees
  them, and the trailing no-data micro-batch Spark runs when ``W`` advanced. These rules
  are shared with the window oracle, written once in
  :mod:`interlace.testing.oracles.spark_rules`.
* **The operator** (rules 4-9, ``SEMANTICS.md`` §1, §2, §4): the operator watermark
  ``wm = W + H``, late rows, null keys, matching, eviction, outer/semi/anti emission and
  dead letters.

Comparisons follow ``SEMANTICS.md``: a row is late iff ``wm > close`` and a buffered row is
evicted in the first call where ``wm > close`` (both strict), with
``close(left at t) = t + upper + AL`` and ``close(right at t) = t - lower + AL``. The
match predicate is ``r.t BETWEEN l.t + lower AND l.t + upper`` with every key equal and
non-null. All times are integer microseconds.

Use :func:`~interlace.testing.oracles.rows.canonical_rows` to compare operator output with
oracle output as multisets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from interlace.testing.log import JoinBatch, JoinLog, to_us
from interlace.testing.oracles import resolve, spark_rules
from interlace.testing.oracles.rows import DEAD_LETTER_COLUMN, OracleRow, dead_letter_values

__all__ = ["JOIN_HOWS", "HeldRow", "JoinOracleResult", "oracle_join"]

JOIN_HOWS = ("inner", "left", "right", "full", "left_semi", "left_anti")
"""Every supported ``how``."""

_SIDES = ("left", "right")
_OTHER = {"left": "right", "right": "left"}

# Which input sides a `how` preserves: their rows are emitted even when they never match
# (null-padded, or unprefixed left columns for left_anti).
_PRESERVED_SIDES: dict[str, tuple[str, ...]] = {
    "inner": (),
    "left": ("left",),
    "right": ("right",),
    "full": ("left", "right"),
    "left_semi": (),
    "left_anti": ("left",),
}

# Joins whose output is the left columns only, unprefixed.
_LEFT_ONLY_HOWS = ("left_semi", "left_anti")


# --------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeldRow:
    """A row in a join buffer after a micro-batch, and when the rules release it.

    Attributes:
        side: ``"left"`` or ``"right"``.
        row: The input row.
        event_time_us: Its event time.
        close_us: Its close time: it is evicted in the first batch with ``wm > close_us``.
        matched: Whether it has matched a row of the other side.
    """

    side: str
    row: Mapping[str, Any]
    event_time_us: int
    close_us: int
    matched: bool


@dataclass
class JoinOracleResult:
    """What the join must produce for a replay log.

    Attributes:
        rows: Every output row, in emission order (order across rows is not part of the
            contract; compare with :func:`canonical_rows`).
        spark_watermarks_ms: Spark's global watermark ``W`` (ms) seen by each micro-batch,
            including the trailing no-data batch if there is one; 0 means "none yet".
        num_batches: Number of micro-batches run: ``len(log)``, plus one for the trailing
            no-data batch.
        late_dropped: Side -> rows the operator judged late and discarded
            (``late_data`` ``"drop"`` or ``"reopen"``).
        null_key_dropped: Side -> rows with a null key column that were discarded
            because their side is not preserved.
        spark_dropped: Side -> rows Spark removed before the operator saw them (Spark's
            ``numRowsDroppedByWatermark``).
        dead_lettered: Side -> rows the operator judged late and sent to the dead-letter
            output (``late_data="dlq"``).
        output_columns: The output column names, in order.
        held: Per micro-batch, the rows buffered after it (its eviction done), as
            :class:`HeldRow`: what ``interlace inspect`` must report for that batch.

    """

    rows: list[OracleRow] = field(default_factory=list)
    spark_watermarks_ms: list[int] = field(default_factory=list)
    num_batches: int = 0
    late_dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_SIDES, 0))
    null_key_dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_SIDES, 0))
    spark_dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_SIDES, 0))
    dead_lettered: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_SIDES, 0))
    output_columns: list[str] = field(default_factory=list)
    held: list[list[HeldRow]] = field(default_factory=list)

    def rows_for_batch(self, batch: int) -> list[dict[str, Any]]:
        """Return the output rows emitted by one micro-batch.

        Args:
            batch: The micro-batch index.

        Returns:
            The row dicts of that batch, in emission order.

        """
        return [out.row for out in self.rows if out.batch == batch]

    def rows_by_batch(self) -> dict[int, list[dict[str, Any]]]:
        """Return the output rows grouped by micro-batch.

        Returns:
            Batch index -> row dicts, with an entry (possibly empty) for every batch run.

        """
        grouped: dict[int, list[dict[str, Any]]] = {b: [] for b in range(self.num_batches)}
        for out in self.rows:
            grouped[out.batch].append(out.row)
        return grouped


# --------------------------------------------------------------------------------------
# The spec, resolved
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ResolvedJoin:
    """The spec's fields with every default and derived value filled in (µs where timed)."""

    how: str
    keys: dict[str, tuple[str, ...]]
    columns: dict[str, tuple[str, ...]]
    event_time_column: dict[str, str]
    output_columns_of: dict[str, tuple[str, ...]]
    prefix: dict[str, str]
    lower_us: int
    upper_us: int
    late_data: str
    close_allowance_us: int  # AL in the close time: allowed lateness under reopen, else 0
    horizon_ms: int  # H: wm = W + H
    delay_ms: int  # the withWatermark delay the library sets: lateness_ms + H
    output_columns: tuple[str, ...]

    def close_us(self, side: str, event_time_us: int) -> int:
        """Return the close time of a row: left ``t + upper + AL``, right ``t - lower + AL``."""
        if side == "left":
            return event_time_us + self.upper_us + self.close_allowance_us
        return event_time_us - self.lower_us + self.close_allowance_us


def _resolve(
    spec: object, left_columns: Sequence[str], right_columns: Sequence[str]
) -> _ResolvedJoin:
    """Read the duck-typed spec and resolve defaults and derived values.

    Only what the oracle needs to run is checked; the operator's spec validation is the
    place for friendly config errors.

    Raises:
        ValueError: If the spec cannot be modelled (unknown mode, missing bounds, ...).

    """
    how = getattr(spec, "how", "inner")
    if how not in JOIN_HOWS:
        msg = f"`how` must be one of {JOIN_HOWS} (got {how!r})"
        raise ValueError(msg)
    late_data = resolve.check_modes(spec, getattr(spec, "late_data", "drop"))

    columns = {"left": tuple(left_columns), "right": tuple(right_columns)}
    keys = {"left": tuple(spec.left_keys), "right": tuple(spec.right_keys)}  # type: ignore[attr-defined]
    if not keys["left"] or len(keys["left"]) != len(keys["right"]):
        msg = f"`left_keys`/`right_keys` must be non-empty and of equal length (got {keys})"
        raise ValueError(msg)

    # Bounds: `time_window_ms = W` is shorthand for lower = -W, upper = W.
    window_ms = getattr(spec, "time_window_ms", None)
    if window_ms is not None:
        lower_ms, upper_ms = -int(window_ms), int(window_ms)
    else:
        lower_raw = getattr(spec, "lower_ms", None)
        upper_raw = getattr(spec, "upper_ms", None)
        if lower_raw is None or upper_raw is None:
            msg = "set `time_window_ms`, or both `lower_ms` and `upper_ms`"
            raise ValueError(msg)
        lower_ms, upper_ms = int(lower_raw), int(upper_raw)
    if lower_ms > upper_ms:
        msg = f"`lower_ms` must be <= `upper_ms` (got {lower_ms} > {upper_ms})"
        raise ValueError(msg)

    # Event-time columns: a per-side override wins over the shared name.
    event_time_column = resolve.event_time_columns(spec)

    # Horizon H and the allowance AL used in close times (SEMANTICS.md §1, §2).
    lateness = resolve.lateness(spec, late_data)

    # Output naming.
    prefix = resolve.prefixes(spec)  # "" is a valid prefix
    output_columns_of: dict[str, tuple[str, ...]] = {}
    for side in _SIDES:
        chosen = getattr(spec, f"output_{side}_columns", None)
        output_columns_of[side] = columns[side] if chosen is None else tuple(chosen)
        needed = (*keys[side], event_time_column[side], *output_columns_of[side])
        missing = [name for name in needed if name not in columns[side]]
        if missing:
            msg = f"{side} columns {missing} are not in `{side}_columns` {columns[side]}"
            raise ValueError(msg)
    if how in _LEFT_ONLY_HOWS:
        output_columns = list(output_columns_of["left"])
    else:
        output_columns = [
            prefix[side] + name for side in _SIDES for name in output_columns_of[side]
        ]

    return _ResolvedJoin(
        how=how,
        keys=keys,
        columns=columns,
        event_time_column=event_time_column,
        output_columns_of=output_columns_of,
        prefix=prefix,
        lower_us=lower_ms * 1000,
        upper_us=upper_ms * 1000,
        late_data=late_data,
        close_allowance_us=lateness.allowance_ms * 1000,
        horizon_ms=lateness.horizon_ms,
        delay_ms=lateness.delay_ms,
        output_columns=resolve.output_columns(output_columns, late_data),
    )



# --------------------------------------------------------------------------------------
# The operator layer (rules 4-9)
# --------------------------------------------------------------------------------------


def _is_null(value: Any) -> bool:
    """Return True for SQL NULL (``None``); NaN is a value, not NULL, as in Spark."""
    return value is None


def _key_values_equal(left_value: Any, right_value: Any) -> bool:
    """Compare one key column as a Spark equi-join does.

    NULL never equals anything, NULL included. NaN equals NaN (Spark SQL's ``=`` and its
    join keys treat NaN as equal to itself, unlike IEEE and Python).
    """
    if _is_null(left_value) or _is_null(right_value):
        return False
    if (
        isinstance(left_value, float)
        and isinstance(right_value, float)
        and math.isnan(left_value)
        and math.isnan(right_value)
    ):
        return True
    return bool(left_value == right_value)


@dataclass
class _BufferedRow:
    """A row held in its side's join buffer."""

    row: Mapping[str, Any]
    event_time_us: int
    matched: bool = False  # ever matched a row of the other side


class _JoinModel:
    """The operator's state and emission rules, row at a time."""

    def __init__(self, cfg: _ResolvedJoin, result: JoinOracleResult) -> None:
        self.cfg = cfg
        self.result = result
        self.buffers: dict[str, list[_BufferedRow]] = {side: [] for side in _SIDES}
        self.preserved = _PRESERVED_SIDES[cfg.how]

    # ---- output rows (rule 9) ----

    def _emit(self, batch: int, values: dict[str, Any]) -> None:
        if self.cfg.late_data == "dlq":
            values[DEAD_LETTER_COLUMN] = None
        self.result.rows.append(OracleRow(batch=batch, row=values))

    def _emit_pair(
        self, batch: int, left: Mapping[str, Any] | None, right: Mapping[str, Any] | None
    ) -> None:
        """Emit ``left_prefix + column ...`` then ``right_prefix + column ...``.

        A missing side (None) is null-padded.
        """
        values: dict[str, Any] = {}
        for side, row in (("left", left), ("right", right)):
            for name in self.cfg.output_columns_of[side]:
                values[self.cfg.prefix[side] + name] = None if row is None else row[name]
        self._emit(batch, values)

    def _emit_left_only(self, batch: int, left: Mapping[str, Any]) -> None:
        """Emit the left output columns, unprefixed (left_semi / left_anti)."""
        self._emit(batch, {name: left[name] for name in self.cfg.output_columns_of["left"]})

    def _emit_unmatched(self, batch: int, side: str, row: Mapping[str, Any]) -> None:
        """Emit a preserved row that has no partner: null-padded, or unprefixed for anti."""
        if self.cfg.how == "left_anti":
            self._emit_left_only(batch, row)
        elif side == "left":
            self._emit_pair(batch, row, None)
        else:
            self._emit_pair(batch, None, row)

    def _emit_dead_letter(self, batch: int, side: str, row: Mapping[str, Any], wm_us: int) -> None:
        """Emit a dead-letter row: every output column None except ``_dead_letter``."""
        input_row = {name: row[name] for name in self.cfg.columns[side]}
        values = dead_letter_values(self.cfg.output_columns, side, wm_us, input_row)
        self.result.rows.append(OracleRow(batch=batch, row=values))

    # ---- matching ----

    def _matches(self, left: _BufferedRow, right: _BufferedRow) -> bool:
        """Apply the join predicate to one left and one right row.

        Every key equal and non-null, and ``r.t BETWEEN l.t + lower AND l.t + upper``
        (inclusive).
        """
        for left_key, right_key in zip(self.cfg.keys["left"], self.cfg.keys["right"], strict=True):
            if not _key_values_equal(left.row[left_key], right.row[right_key]):
                return False
        delta_us = right.event_time_us - left.event_time_us
        return self.cfg.lower_us <= delta_us <= self.cfg.upper_us

    def _emit_match(self, batch: int, left: _BufferedRow, right: _BufferedRow) -> None:
        """Emit what one matching pair produces under ``how``, then mark both matched."""
        if self.cfg.how in ("inner", "left", "right", "full"):
            self._emit_pair(batch, left.row, right.row)
        elif self.cfg.how == "left_semi" and not left.matched:
            # left_semi: a left row is emitted once, at its first match.
            self._emit_left_only(batch, left.row)
        # left_anti emits nothing for a match; the flag below keeps the row from being
        # emitted at eviction.
        left.matched = True
        right.matched = True

    # ---- per row (rules 5-7) ----

    def ingest(
        self,
        batch: int,
        side: str,
        row: Mapping[str, Any],
        event_time_us: int,
        wm_us: int | None,
    ) -> None:
        """Take one input row that survived Spark's pre-filter."""
        cfg = self.cfg
        # Rule 5: late iff wm > close(row) (strict). Without a watermark nothing is late.
        if wm_us is not None and wm_us > cfg.close_us(side, event_time_us):
            if cfg.late_data == "dlq":
                self._emit_dead_letter(batch, side, row, wm_us)
                self.result.dead_lettered[side] += 1
            else:  # drop, and reopen past its allowance
                self.result.late_dropped[side] += 1
            return

        # Rule 6: a null key never matches. A preserved side emits the row at once,
        # unmatched; otherwise it is dropped and counted. It is never buffered.
        if any(_is_null(row[name]) for name in cfg.keys[side]):
            if side in self.preserved:
                self._emit_unmatched(batch, side, row)
            else:
                self.result.null_key_dropped[side] += 1
            return

        # Rule 7: match against the other side's buffer, then insert into this side's.
        this = _BufferedRow(row=row, event_time_us=event_time_us)
        for other in self.buffers[_OTHER[side]]:
            left, right = (this, other) if side == "left" else (other, this)
            if self._matches(left, right):
                self._emit_match(batch, left, right)
        self.buffers[side].append(this)

    # ---- per batch (rule 8) ----

    def held(self) -> list[HeldRow]:
        """Every buffered row now, with its close time."""
        return [HeldRow(side, dict(b.row), b.event_time_us,
                        self.cfg.close_us(side, b.event_time_us), b.matched)
                for side in _SIDES for b in self.buffers[side]]

    def evict(self, batch: int, wm_us: int | None) -> None:
        """Evict every buffered row with ``wm > close``; emit the preserved unmatched ones."""
        if wm_us is None:
            return  # no watermark yet: nothing closes
        for side in _SIDES:
            kept: list[_BufferedRow] = []
            for buffered in self.buffers[side]:
                if wm_us > self.cfg.close_us(side, buffered.event_time_us):
                    if not buffered.matched and side in self.preserved:
                        self._emit_unmatched(batch, side, buffered.row)
                else:
                    kept.append(buffered)
            self.buffers[side] = kept


# --------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------


def oracle_join(
    spec: object,
    log: JoinLog,
    *,
    left_columns: Sequence[str],
    right_columns: Sequence[str],
    watermark_policy: str = "min",
    batch_times_ms: Sequence[int] | None = None,
) -> JoinOracleResult:
    """Replay a join's input log and return what the join must emit, batch by batch.

    The model, step by step (each rule is marked in the code):

    0. **Processing time** (``time_mode="processing"`` only): every row of micro-batch
       ``b``, on both sides, gets the event time ``batch_times_ms[b]``, the batch's
       timestamp (Spark's ``batchTimestampMs`` in the checkpoint's offset log, which
       ``current_timestamp()`` takes in that batch), in its side's event-time column;
       then the event-time rules below apply unchanged.
    1. **Spark watermark** ``W`` (ms): per input, ``max(event ms seen so far) - delay``
       where ``delay = lateness_ms + H`` (``H``: ``allowed_lateness_ms`` under reopen,
       ``dlq_horizon_ms`` under dlq, 0 under drop); combined by ``watermark_policy``
       with an input that has had no row yet counting as 0 (Spark's
       ``WatermarkTracker``); never decreasing; 0 before any. Batch ``b`` sees the ``W``
       computed after batches ``0..b-1``.
    2. **Spark pre-filter**: rows with ``t <= W_prev`` (``W_prev``: the ``W`` batch
       ``b - 1`` saw, 0 before any: rows at or before the epoch too) never reach the
       operator (``spark_dropped``). They still count for ``W``.
    3. **Trailing no-data batch**: if ``W`` advanced after the last data batch, one more
       batch without rows runs and sees it.
    4. **Operator watermark** ``wm = (W + H) * 1000`` µs; none while ``W <= 0``.
    5. **Late rows**: ``wm > close(t)``; ``close`` is ``t + upper + AL`` (left) or
       ``t - lower + AL`` (right), ``AL`` the allowed lateness under reopen, else 0.
       drop / reopen: counted in ``late_dropped``; dlq: a dead-letter row.
    6. **Null keys** never match: a preserved side (left for left/full/left_anti, right
       for right/full) emits the row at once, unmatched; otherwise ``null_key_dropped``.
    7. **Ingest** left rows first, then right rows; each row is matched against the
       other buffer, then buffered. A pair matches iff keys are equal and non-null and
       ``r.t BETWEEN l.t + lower AND l.t + upper``; it emits once, in the batch where its
       second row arrives. left_semi emits a left row once, at its first match.
    8. **Evict** every buffered row with ``wm > close``; a preserved row that never
       matched is emitted then (null-padded; left_anti: left columns) and never earlier.
    9. **Output**: ``left_prefix + output_left_columns`` then
       ``right_prefix + output_right_columns`` (semi/anti: left columns, unprefixed),
       plus ``_dead_letter`` under dlq.

    Args:
        spec: The join spec, read by attribute (duck-typed): ``left_keys``,
            ``right_keys``, ``how``, ``time_window_ms`` or ``lower_ms``/``upper_ms``,
            ``event_time_column`` (or ``left_event_time_column`` /
            ``right_event_time_column``), ``lateness_ms``, ``late_data``,
            ``allowed_lateness_ms``, ``dlq_horizon_ms``, ``left_prefix``,
            ``right_prefix``, ``output_left_columns``, ``output_right_columns``. Missing
            optional attributes take their defaults.
        log: One :class:`~interlace.testing.log.JoinBatch` per micro-batch, in order.
        left_columns: Every column of the left input, in order.
        right_columns: Every column of the right input, in order.
        watermark_policy: ``spark.sql.streaming.multipleWatermarkPolicy``: ``"min"``
            (Spark's default) or ``"max"``.
        batch_times_ms: Under ``time_mode="processing"``, each log batch's timestamp in ms
            since the epoch (required then, one per batch; ignored otherwise).

    Returns:
        The output rows with their batch, Spark's ``W`` per batch, and the counters.

    Raises:
        ValueError: If the spec cannot be modelled, the policy is unknown, or a row's
            event time is null.

    Example:
        >>> from datetime import datetime
        >>> from types import SimpleNamespace
        >>> spec = SimpleNamespace(left_keys=["k"], right_keys=["k"], how="inner",
        ...                        time_window_ms=1_000, event_time_column="event_time")
        >>> t0 = datetime(2026, 1, 1)
        >>> log = [JoinBatch(left=[{"k": 1, "event_time": t0}]),
        ...        JoinBatch(right=[{"k": 1, "event_time": t0}])]
        >>> result = oracle_join(spec, log, left_columns=["k", "event_time"],
        ...                      right_columns=["k", "event_time"])
        >>> [(out.batch, out.row["left_k"], out.row["right_k"]) for out in result.rows]
        [(1, 1, 1)]
        >>> result.spark_watermarks_ms  # min policy: W waits for the right input's first row
        [0, 0, 1767225600000]
        >>> result.num_batches  # the last one is the trailing no-data batch
        3

    """
    policies = spark_rules.WATERMARK_POLICIES
    if watermark_policy not in policies:
        msg = f"`watermark_policy` must be one of {policies} (got {watermark_policy!r})"
        raise ValueError(msg)
    if (getattr(spec, "time_mode", None) or "event") == "processing":
        # Rule 0: processing time is the micro-batch's timestamp.
        stamps = spark_rules.processing_time_stamps(batch_times_ms, len(log))
        shared = getattr(spec, "event_time_column", None)
        et = {side: getattr(spec, f"{side}_event_time_column", None) or shared for side in _SIDES}
        if None in et.values():
            msg = "`time_mode`='processing' needs an event-time column name for both sides"
            raise ValueError(msg)
        log = [
            JoinBatch(
                left=[{**row, et["left"]: at} for row in b.left],
                right=[{**row, et["right"]: at} for row in b.right],
            )
            for b, at in zip(log, stamps, strict=True)
        ]
        left_columns = [*left_columns] + ([et["left"]] if et["left"] not in left_columns else [])
        right_columns = [*right_columns] + (
            [et["right"]] if et["right"] not in right_columns else []
        )
    cfg = _resolve(spec, left_columns, right_columns)
    result = JoinOracleResult(output_columns=list(cfg.output_columns))
    model = _JoinModel(cfg, result)
    tracker = spark_rules.SparkWatermarkTracker(cfg.delay_ms, watermark_policy, _SIDES)
    previous_batch_w_ms = 0  # the W batch b - 1 saw; 0 before batch 0

    for batch_index, batch in enumerate(log):
        # Rule 1: this batch sees the W computed after batches 0..b-1.
        spark_w_ms = tracker.global_ms
        result.spark_watermarks_ms.append(spark_w_ms)

        rows_by_side = {"left": batch.left, "right": batch.right}
        event_times_us = {
            side: [_row_event_time_us(cfg, side, row) for row in rows_by_side[side]]
            for side in _SIDES
        }

        clocks = {"left": batch.left_clock_us, "right": batch.right_clock_us}
        beats = {"left": batch.left_heartbeat_us, "right": batch.right_heartbeat_us}
        seen_by = {side: spark_rules.watermark_times(event_times_us[side], clocks[side],
                                                     beats[side])
                   for side in _SIDES}
        # Rule 2: Spark's pre-filter, against the W the previous batch saw.
        survivors: dict[str, list[tuple[Mapping[str, Any], int]]] = {}
        for side in _SIDES:
            survivors[side] = []
            side_rows = zip(rows_by_side[side], event_times_us[side], seen_by[side][0],
                            strict=True)
            for input_row, event_time_us, filter_us in side_rows:
                if spark_rules.spark_drops_row(filter_us, previous_batch_w_ms):
                    result.spark_dropped[side] += 1
                else:
                    survivors[side].append((input_row, event_time_us))

        # Rule 4: the operator watermark for every decision in this batch.
        wm_us = spark_rules.operator_wm_us(spark_w_ms, cfg.horizon_ms)

        # Rules 5-7: left rows first, then right rows, each row in arrival order.
        for side in _SIDES:
            for survivor, event_time_us in survivors[side]:
                model.ingest(batch_index, side, survivor, event_time_us, wm_us)

        # Rule 8: evict after ingest.
        model.evict(batch_index, wm_us)
        result.held.append(model.held())

        # Rule 1 (continued): W after this batch, from all its rows (filtered ones too).
        tracker.observe_batch({side: seen_by[side][1] for side in _SIDES})
        previous_batch_w_ms = spark_w_ms

    result.num_batches = len(log)

    # Rule 3: one trailing no-data batch if W advanced after the last data batch.
    if log and tracker.global_ms > result.spark_watermarks_ms[-1]:
        trailing_index = len(log)
        result.spark_watermarks_ms.append(tracker.global_ms)
        model.evict(trailing_index, spark_rules.operator_wm_us(tracker.global_ms, cfg.horizon_ms))
        result.held.append(model.held())
        result.num_batches += 1

    return result


def _row_event_time_us(cfg: _ResolvedJoin, side: str, row: Mapping[str, Any]) -> int:
    """Return a row's event time in µs; a null event time is not modelled."""
    value = row[cfg.event_time_column[side]]
    if value is None:
        msg = (
            f"{side} row has a null event time in `{cfg.event_time_column[side]}`; "
            f"the join oracle does not model null event times: {dict(row)!r}"
        )
        raise ValueError(msg)
    return to_us(value)
