"""Reference model (oracle) of the interlace window aggregation, as Spark runs it.

The oracle replays a window's input log one micro-batch at a time and one row at a
time, and says which output rows the window operator must emit in which micro-batch.
It is deliberately naive: every window keeps the rows it aggregated and recomputes its
aggregates from them with plain Python (``sum``, ``min``, a ``set``); there are no
slots, accumulators, sketches or state blobs. It imports nothing from
``interlace.operators`` or ``interlace.state`` (nor pyspark), so it can judge them; the
Spark layer (watermark, pre-filter, operator watermark:
:mod:`interlace.testing.oracles.spark_rules`) and the dead-letter JSON
(:mod:`interlace.testing.oracles.rows`) are shared with the join oracle
(:mod:`interlace.testing.oracles.join`), so both model Spark alike.

Each rule is a visible, numbered step in :func:`oracle_window`:

* **Spark** (rules 1-3): the watermark ``W`` (ms), the rows Spark drops before the
  operator sees them, and the trailing no-data micro-batch.
* **The operator** (rules 4-6, ``SEMANTICS.md`` §1, §3, §4): the operator watermark
  ``wm = W + H``, window assignment, late rows per (row, window), emission when
  ``wm >= end``, eviction, and the output row layout.

Approximate ``count_distinct`` is modelled by the exact distinct count; compare it with
a tolerance. Windows are ``[start, end)``. All times are integer microseconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from interlace.testing.log import EPOCH, to_us
from interlace.testing.oracles import resolve, spark_rules
from interlace.testing.oracles.rows import DEAD_LETTER_COLUMN, OracleRow, dead_letter_values
from interlace.testing.oracles.window_aggregates import (
    AGGREGATIONS,
    DISTINCT_MODES,
    AggregatedRow,
    Aggregation,
    aggregate,
    is_null,
    resolve_aggregations,
)

__all__ = [
    "AGGREGATIONS",
    "DISTINCT_MODES",
    "WINDOW_KINDS",
    "HeldWindow",
    "WindowBatch",
    "WindowLog",
    "WindowOracleResult",
    "WindowOracleRow",
    "oracle_window",
]

WINDOW_KINDS = ("tumbling", "hopping", "session")
"""Every supported window ``kind``."""

_INPUTS = ("input",)
"""The window's one input, as Spark's watermark tracker and the dead letters name it."""

REVISION_COLUMN = "revision"
RETRACTED_COLUMN = "retracted"

WindowOracleRow = OracleRow
"""One output row and its micro-batch (the join oracle's :class:`OracleRow`, so
:func:`interlace.testing.oracles.rows.canonical_rows` takes window output as it is)."""


@dataclass(frozen=True)
class WindowBatch:
    """One micro-batch of a window's input.

    Attributes:
        rows: The rows Spark reads in this micro-batch, in arrival order; each a dict
            column -> value, event times as naive ``datetime`` meaning UTC.
        clock_us: For a chain stage reading a channel (SEMANTICS §11): the clock the
            batch's rows (or its tick, with no rows) carry, µs; ``W`` then follows it
            (``spark_rules``, rule 1). None: an ordinary input.

    """

    rows: tuple[dict[str, Any], ...] = ()
    clock_us: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(self.rows))


WindowLog = Sequence[WindowBatch]
"""A window's replay log: one :class:`WindowBatch` per micro-batch, in order."""


@dataclass(frozen=True)
class HeldWindow:
    """A (window, group) held after a micro-batch, and when the rules release it.

    Attributes:
        start_us, end_us: The window ``[start, end)``.
        group: The ``group_by`` values by name.
        changed: Whether it aggregated a row since its last emit (or was never emitted).
        revision: The revision of its last emit (-1: never emitted).
        releases_at_us: ``end`` if it changed (emitted at ``wm >= end``), else ``end + AL``
            (evicted then: reopen keeps an emitted window until there).
        aggregates: Each aggregation's value so far, by alias.
    """

    start_us: int
    end_us: int
    group: Mapping[str, Any]
    changed: bool
    revision: int
    releases_at_us: int
    aggregates: Mapping[str, Any]


@dataclass
class WindowOracleResult:
    """What the window operator must produce for a replay log.

    Attributes:
        rows: Every output row with its micro-batch. Within a batch: windows by
            ``(start, end)`` then first appearance of the group, retractions among
            them, then dead letters in arrival order (order is not part of the
            contract; compare with :func:`interlace.testing.oracles.rows.canonical_rows`).
        spark_watermarks_ms: Spark's ``W`` (ms) seen by each micro-batch, the trailing
            no-data batch included; 0 means "none yet".
        num_batches: ``len(log)``, plus one for the trailing no-data batch.
        late_dropped: Rows the operator judged late and did not aggregate into at
            least one of their windows (``drop``; ``reopen`` past the allowance);
            each row counts once.
        spark_dropped: Rows Spark removed before the operator saw them.
        dead_lettered: Rows sent to the dead-letter output (``dlq``); once per row.
        output_columns: The output column names, in order.
        held: Per micro-batch, the windows held after it (its eviction done), as
            :class:`HeldWindow`: what ``interlace inspect`` must report for that batch.

    """

    rows: list[OracleRow] = field(default_factory=list)
    spark_watermarks_ms: list[int] = field(default_factory=list)
    num_batches: int = 0
    held: list[list[HeldWindow]] = field(default_factory=list)
    late_dropped: int = 0
    spark_dropped: int = 0
    dead_lettered: int = 0
    output_columns: list[str] = field(default_factory=list)

    def rows_for_batch(self, batch: int) -> list[dict[str, Any]]:
        """Return the output rows emitted by one micro-batch, in emission order."""
        return [out.row for out in self.rows if out.batch == batch]


# --------------------------------------------------------------------------------------
# The spec, resolved
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ResolvedWindow:
    """The spec's fields with every default and derived value filled in (µs where timed)."""

    kind: str
    duration_us: int  # tumbling / hopping
    hop_us: int  # hopping; equals duration_us for tumbling
    gap_us: int  # session
    event_time_column: str
    group_by: tuple[str, ...]
    aggregations: tuple[Aggregation, ...]
    late_data: str
    allowance_us: int  # AL: reopen keeps closed windows until wm >= end + AL; else 0
    horizon_ms: int  # H: wm = W + H
    delay_ms: int  # the withWatermark delay the library sets: lateness_ms + H
    window_start_column: str
    window_end_column: str
    columns: tuple[str, ...]
    output_columns: tuple[str, ...]


def _resolve(spec: object, columns: Sequence[str]) -> _ResolvedWindow:
    """Read the duck-typed spec and resolve defaults and derived values.

    Only what the oracle needs to run is checked; the operator's spec validation is the
    place for friendly config errors.

    Raises:
        ValueError: If the spec cannot be modelled.

    """
    kind = getattr(spec, "kind", None)
    if kind not in WINDOW_KINDS:
        msg = f"`kind` must be one of {WINDOW_KINDS} (got {kind!r})"
        raise ValueError(msg)
    late_data = resolve.check_modes(spec, getattr(spec, "late_data", None) or "drop")

    duration_us = hop_us = gap_us = 0
    if kind == "session":
        gap_us = int(spec.gap_ms) * 1000  # type: ignore[attr-defined]
        if gap_us <= 0:
            msg = f"`gap_ms` must be > 0 (got {gap_us // 1000})"
            raise ValueError(msg)
    else:
        duration_us = int(spec.duration_ms) * 1000  # type: ignore[attr-defined]
        hop_us = int(spec.hop_ms) * 1000 if kind == "hopping" else duration_us  # type: ignore[attr-defined]
        if not 0 < hop_us <= duration_us:
            msg = (
                f"`hop_ms` must be in (0, `duration_ms`] (got hop_ms={hop_us // 1000}, "
                f"duration_ms={duration_us // 1000})"
            )
            raise ValueError(msg)

    # Horizon H (SEMANTICS.md §1) and the reopen allowance AL (§3).
    lateness = resolve.lateness(spec, late_data)

    aggregations = resolve_aggregations(spec.aggregations)  # type: ignore[attr-defined]

    event_time_column = getattr(spec, "event_time_column", None) or "_event_ts"
    group_by = tuple(getattr(spec, "group_by", None) or ())
    columns = tuple(columns)
    needed = (event_time_column, *group_by, *(a.column for a in aggregations if a.column))
    missing = [name for name in needed if name not in columns]
    if missing:
        msg = f"columns {missing} are not in `columns` {columns}"
        raise ValueError(msg)

    start_column = getattr(spec, "window_start_column", None) or "window_start"
    end_column = getattr(spec, "window_end_column", None) or "window_end"
    output_columns = [start_column, end_column, *group_by, *(a.alias for a in aggregations)]
    if late_data == "reopen":
        output_columns += [REVISION_COLUMN, RETRACTED_COLUMN]

    return _ResolvedWindow(
        kind=kind,
        duration_us=duration_us,
        hop_us=hop_us,
        gap_us=gap_us,
        event_time_column=event_time_column,
        group_by=group_by,
        aggregations=aggregations,
        late_data=late_data,
        allowance_us=lateness.allowance_ms * 1000,
        horizon_ms=lateness.horizon_ms,
        delay_ms=lateness.delay_ms,
        window_start_column=start_column,
        window_end_column=end_column,
        columns=columns,
        output_columns=resolve.output_columns(output_columns, late_data),
    )


# --------------------------------------------------------------------------------------
# Values: groups and times (NULLs and aggregates: window_aggregates.py)
# --------------------------------------------------------------------------------------


def _group_key(cfg: _ResolvedWindow, row: Mapping[str, Any]) -> tuple[Any, ...]:
    """Return the row's group: NULLs (and NaN) form one group, as in SQL GROUP BY."""
    return tuple(None if is_null(row.get(name)) else row.get(name) for name in cfg.group_by)


def _datetime(us: int) -> datetime:
    """Return µs since the epoch as a naive UTC datetime (exact, no floats)."""
    return EPOCH + timedelta(microseconds=us)


# --------------------------------------------------------------------------------------
# The operator
# --------------------------------------------------------------------------------------


@dataclass
class _Window:
    """One (window, group) pair the operator holds, ``[start_us, end_us)``."""

    start_us: int
    end_us: int
    group: tuple[Any, ...]
    rows: list[AggregatedRow] = field(default_factory=list)
    changed: bool = True  # aggregated a row since its last emit (or never emitted)
    revision: int = -1  # revision of its last emit; -1: never emitted
    last_output: dict[str, Any] | None = None  # what it last emitted, for a retraction


class _WindowModel:
    """The operator's state and emission rules, row at a time."""

    def __init__(self, cfg: _ResolvedWindow, result: WindowOracleResult) -> None:
        self.cfg = cfg
        self.result = result
        # Tumbling / hopping: (start_us, group) -> window. Sessions: group -> sessions.
        self.windows: dict[tuple[int, tuple[Any, ...]], _Window] = {}
        self.sessions: dict[tuple[Any, ...], list[_Window]] = {}
        self.group_order: dict[tuple[Any, ...], int] = {}  # first appearance, for output order
        self.retractions: list[_Window] = []  # absorbed sessions to retract this batch
        self.dead_letters: list[dict[str, Any]] = []

    # ---- rule 5a: assignment ----

    def window_starts(self, event_time_us: int) -> list[int]:
        """Return the starts of the fixed windows ``[start, start + d)`` holding ``t``.

        Tumbling: ``floor(t / d) * d`` (floor, also for negative ``t``). Hopping: every
        ``k * hop`` with ``start <= t < start + d``, i.e. ``k`` from
        ``floor((t - d) / hop) + 1`` to ``floor(t / hop)``; that is the correct rule,
        seed 001's ``[t - d + hop, t]`` misses a window when ``t`` is off the hop grid.
        """
        d, hop = self.cfg.duration_us, self.cfg.hop_us
        first_k = (event_time_us - d) // hop + 1
        last_k = event_time_us // hop
        return [k * hop for k in range(first_k, last_k + 1)]

    def is_closed(self, end_us: int, wm_us: int | None) -> bool:
        """Say whether a window is closed: ``wm >= end``; without a watermark never."""
        return wm_us is not None and wm_us >= end_us

    def is_kept(self, end_us: int, wm_us: int | None) -> bool:
        """Say whether a closed window is still kept: reopen only, while ``wm < end + AL``.

        A kept window takes late rows and re-emits. (Without a watermark nothing is
        closed, so this is only asked with one.)
        """
        return self.cfg.late_data == "reopen" and (
            wm_us is None or wm_us < end_us + self.cfg.allowance_us
        )

    # ---- rule 5b: ingest, late-data policy per (row, window) ----

    def ingest(
        self, row: Mapping[str, Any], event_time_us: int, seq: tuple[int, int], wm_us: int | None
    ) -> None:
        """Take one input row that survived Spark's pre-filter."""
        group = _group_key(self.cfg, row)
        self.group_order.setdefault(group, len(self.group_order))
        this = AggregatedRow(values=row, event_time_us=event_time_us, seq=seq)
        if self.cfg.kind == "session":
            late, dropped = self._ingest_session(group, this, wm_us)
        else:
            late, dropped = self._ingest_fixed(group, this, wm_us)
        # One count (or one dead letter) per row, however many of its windows it missed.
        if late and self.cfg.late_data == "dlq":
            assert wm_us is not None  # only a watermark makes a row late
            self._dead_letter(row, wm_us)
        elif dropped:
            self.result.late_dropped += 1

    def _ingest_fixed(
        self, group: tuple[Any, ...], row: AggregatedRow, wm_us: int | None
    ) -> tuple[bool, bool]:
        """Aggregate a row into each of its tumbling / hopping windows that takes it.

        Late for a window iff that window is closed (``wm >= end``), judged per window:
        a hopping row may be late for some windows only and still aggregates into the
        open ones (under every policy). For a closed window: drop and dlq skip it;
        reopen aggregates while the window is kept (``wm < end + AL``, creating it if
        it had no row yet) and skips it after.

        Returns:
            (late for at least one window, not aggregated into at least one window).

        """
        late = dropped = False
        for start_us in self.window_starts(row.event_time_us):
            end_us = start_us + self.cfg.duration_us
            if self.is_closed(end_us, wm_us):
                late = True
                if not self.is_kept(end_us, wm_us):
                    dropped = True
                    continue
            window = self.windows.get((start_us, group))
            if window is None:
                window = _Window(start_us, end_us, group)
                self.windows[(start_us, group)] = window
            window.rows.append(row)
            window.changed = True
        return late, dropped

    def _ingest_session(
        self, group: tuple[Any, ...], row: AggregatedRow, wm_us: int | None
    ) -> tuple[bool, bool]:
        """Aggregate a row into its group's sessions (Spark ``session_window``).

        The row's own window is ``[t, t + gap)``, as Spark's per-row session window
        before merging. It is late iff that window is closed (``wm >= t + gap``), which
        keeps the decision independent of the other rows of the batch. A late row is
        skipped (drop, dlq), or under reopen taken while ``wm < t + gap + AL``.

        A taken row joins every session of its group it overlaps or touches, i.e. whose
        rows chain with it by gaps ``<= gap``: ``start <= t + gap`` and ``t <= end`` (Spark's
        ``session_window`` merges while ``start <= current end``; rows exactly ``gap``
        apart are one session). Held sessions count alike, emitted or not: under reopen a
        row touching a kept, emitted session merges into it. They merge into one session
        ``[min start, max end)``. The survivor (the session that keeps its
        identity and revision) is the earliest-starting one among those already emitted,
        else the earliest-starting one; every other emitted session it absorbs is
        retracted once (reopen: ``retracted=true``, its last aggregates, ``revision +
        1``). Merging sessions that were never emitted needs no output.

        Returns:
            (late, not aggregated).

        """
        g = self.cfg.gap_us
        t = row.event_time_us
        late = self.is_closed(t + g, wm_us)
        if late and not self.is_kept(t + g, wm_us):
            return True, True
        sessions = self.sessions.setdefault(group, [])
        # Overlapping or touching (end == t or start == t + gap) sessions merge.
        touching = [s for s in sessions if s.start_us <= t + g and t <= s.end_us]
        if not touching:
            session = _Window(t, t + g, group)
            sessions.append(session)
        else:
            emitted = [s for s in touching if s.revision >= 0]
            session = min(emitted or touching, key=lambda s: s.start_us)
            for other in touching:
                if other is session:
                    continue
                session.rows.extend(other.rows)
                session.start_us = min(session.start_us, other.start_us)
                session.end_us = max(session.end_us, other.end_us)
                sessions.remove(other)
                if other.revision >= 0:
                    self.retractions.append(other)
            session.start_us = min(session.start_us, t)
            session.end_us = max(session.end_us, t + g)
        session.rows.append(row)
        session.changed = True
        sessions.sort(key=lambda s: s.start_us)
        return late, False

    def _dead_letter(self, row: Mapping[str, Any], wm_us: int) -> None:
        """Queue a dead-letter row (SEMANTICS.md §4): all columns None but ``_dead_letter``."""
        input_row = {name: row.get(name) for name in self.cfg.columns}
        self.dead_letters.append(
            dead_letter_values(self.cfg.output_columns, _INPUTS[0], wm_us, input_row)
        )
        self.result.dead_lettered += 1

    # ---- rule 5e: integer sums stay in int64 ----

    def check_sums(self, batch: int) -> None:
        """Fail as the query does when a window's integer ``sum`` leaves the int64 range.

        Spark's ``sum`` of an integer column fails with ``[ARITHMETIC_OVERFLOW]`` (ANSI
        mode, its default). A window fails in this batch if the exact sum of its rows is
        out of range, either of all its rows or of those from earlier batches: a session
        that merged held sessions sums their rows first, then the batch's.

        Raises:
            OverflowError: Naming the batch, the aggregation and the window.
        """
        for window in self.all_windows():
            for agg in self.cfg.aggregations:
                if agg.agg != "sum":
                    continue
                held = [r for r in window.rows if r.seq[0] < batch]
                for total in (aggregate(agg, held) if held else 0, aggregate(agg, window.rows)):
                    if isinstance(total, int) and not -(2**63) <= total < 2**63:
                        msg = (f"batch {batch}: sum({agg.column}) AS {agg.alias} is {total} on "
                               f"window [{_datetime(window.start_us)}, "
                               f"{_datetime(window.end_us)}) group {window.group}, outside "
                               "the 64-bit integer range")
                        raise OverflowError(msg)

    # ---- rule 5c: emit ----

    def all_windows(self) -> list[_Window]:
        """Every held window, by ``(start, end)`` then first appearance of its group."""
        held = list(self.windows.values())
        for sessions in self.sessions.values():
            held.extend(sessions)
        return sorted(held, key=lambda w: (w.start_us, w.end_us, self.group_order[w.group]))

    def _output(self, window: _Window, revision: int, retracted: bool) -> dict[str, Any]:
        """Build an output row (rule 6)."""
        cfg = self.cfg
        values: dict[str, Any] = {
            cfg.window_start_column: _datetime(window.start_us),
            cfg.window_end_column: _datetime(window.end_us),
        }
        values.update(zip(cfg.group_by, window.group, strict=True))
        for agg in cfg.aggregations:
            values[agg.alias] = aggregate(agg, window.rows)
        if cfg.late_data == "reopen":
            values[REVISION_COLUMN] = revision
            values[RETRACTED_COLUMN] = retracted
        if cfg.late_data == "dlq":
            values[DEAD_LETTER_COLUMN] = None
        return values

    def emit(self, batch: int, wm_us: int | None) -> None:
        """Emit this batch's output: closed windows that are new or changed, retractions.

        Then the dead letters of this batch, in arrival order.
        """
        out: list[tuple[tuple[int, int, int], dict[str, Any]]] = []
        for window in self.retractions:
            assert window.last_output is not None
            values = dict(window.last_output)
            values[REVISION_COLUMN] = window.revision + 1
            values[RETRACTED_COLUMN] = True
            out.append(((window.start_us, window.end_us, self.group_order[window.group]), values))
        self.retractions = []
        for window in self.all_windows():
            if self.is_closed(window.end_us, wm_us) and window.changed:
                window.revision += 1
                window.changed = False
                window.last_output = self._output(window, window.revision, retracted=False)
                out.append(
                    (
                        (window.start_us, window.end_us, self.group_order[window.group]),
                        window.last_output,
                    )
                )
        for _, values in sorted(out, key=lambda item: item[0]):
            self.result.rows.append(OracleRow(batch=batch, row=values))
        for values in self.dead_letters:
            self.result.rows.append(OracleRow(batch=batch, row=values))
        self.dead_letters = []

    def held(self) -> list[HeldWindow]:
        """Every window held now, with when the rules release it."""
        cfg = self.cfg
        return [HeldWindow(w.start_us, w.end_us, dict(zip(cfg.group_by, w.group, strict=True)),
                           w.changed, w.revision,
                           w.end_us if w.changed else w.end_us + cfg.allowance_us,
                           {a.alias: aggregate(a, w.rows) for a in cfg.aggregations})
                for w in self.all_windows()]

    # ---- rule 5d: evict ----

    def evict(self, wm_us: int | None) -> None:
        """Drop what the policy no longer keeps.

        drop / dlq: every closed window (it was just emitted); reopen: every window with
        ``wm >= end + AL``.
        """
        if wm_us is None:
            return

        def gone(window: _Window) -> bool:
            if self.cfg.late_data == "reopen":
                return wm_us >= window.end_us + self.cfg.allowance_us
            return wm_us >= window.end_us

        self.windows = {key: w for key, w in self.windows.items() if not gone(w)}
        for group, sessions in list(self.sessions.items()):
            kept = [s for s in sessions if not gone(s)]
            if kept:
                self.sessions[group] = kept
            else:
                del self.sessions[group]


# --------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------


def oracle_window(
    spec: object,
    log: WindowLog,
    *,
    columns: Sequence[str],
    batch_times_ms: Sequence[int] | None = None,
) -> WindowOracleResult:
    """Replay a window's input log and return what the operator must emit, batch by batch.

    The model, step by step (each rule is marked in the code):

    0. **Processing time** (``time_mode="processing"`` only): every row of micro-batch
       ``b`` gets the event time ``batch_times_ms[b]``, the batch's timestamp (Spark's
       ``batchTimestampMs`` in the checkpoint's offset log, which ``current_timestamp()``
       takes in that batch), in ``event_time_column``; then the event-time rules below
       apply unchanged.
    1. **Spark watermark** ``W`` (ms), Spark's ``WatermarkTracker`` for one input: after
       each batch that had rows, ``W = max(W, max(event ms of every row so far) -
       delay)``, ``delay = lateness_ms + H`` (``H``: ``allowed_lateness_ms``, default
       ``lateness_ms``, under reopen; ``dlq_horizon_ms``, default one day, under dlq; 0
       under drop). Batch ``b`` sees the ``W`` computed after batches ``0..b-1``
       (batch 0 sees 0). Event ms are ``micros / 1000`` truncated toward zero (JVM
       ``Long`` division), as the join oracle has it.
       A chain stage's input (batches with ``clock_us``, SEMANTICS §11) has its watermark
       on the clock instead: ``W = max(W, max clock ms - delay)``.
    2. **Spark pre-filter**: in batch ``b``, rows with ``t <= W_prev`` (``W_prev``: the
       ``W`` batch ``b - 1`` saw, 0 before any: rows at or before the epoch too) never
       reach the operator (``spark_dropped``). They still count for ``W``. With a clock,
       the filter reads the clock, which removes no row (it is the upstream's ``wm`` plus
       999 µs).
    3. **Trailing no-data batch**: if ``W`` after the last batch exceeds the ``W`` the
       last batch saw, one more batch without rows runs and sees it.
    4. **Operator watermark** ``wm = (W + H) * 1000`` µs; none while ``W <= 0`` (nothing
       is late, nothing closes).
    5. **SEMANTICS.md §3**, in this order within a batch:

       a. *Assign*: tumbling ``floor(t / d) * d``; hopping every ``k * hop`` with
          ``start <= t < start + d``; session: per group, rows chaining with gaps
          ``<= gap`` form ``[first t, last t + gap)``: sessions that overlap or touch
          merge, a row inside or bridging sessions merges them.
       b. *Ingest* each row in arrival order, late-data policy per (row, window); a
          window is closed iff ``wm >= end``. drop: a closed window does not take the
          row (``late_dropped``, once per row). reopen: a closed window takes it while
          ``wm < end + AL`` and re-emits; past that, dropped. dlq: one dead letter per
          late row (however many of its windows are closed), and the row still
          aggregates into its open windows. Sessions judge a row by its own window
          ``[t, t + gap)``.
       c. *Emit* every closed window that is new or changed since its last emit (reopen:
          ``revision`` 0, then +1 per re-emit; an emitted session absorbed by a merge
          is emitted once more with ``retracted=true``, its last aggregates and
          ``revision + 1``).
       d. *Evict*: drop / dlq every closed window; reopen every window with
          ``wm >= end + AL``.
       e. *Integer sums* (checked after ingest, before emit): if a window's ``sum`` of
          integers is outside ``[-2**63, 2**63)``, of all its rows or of its rows from
          earlier batches (a merged session's held rows, summed before the batch's), the
          query fails in this batch (``OverflowError``), as Spark's ``sum`` does under
          ANSI mode.

       Aggregates: ``count`` (all rows; with a column, non-null values), ``sum`` (int
       stays int, float is float), ``min``, ``max``, ``avg`` (float), ``first`` /
       ``last`` (value at the min / max event time, skipping NULLs, ties by arrival
       order), ``count_distinct`` (exact, also for ``mode="approximate"``). NULLs (and
       NaN, see :func:`~interlace.testing.oracles.window_aggregates.is_null`) are
       skipped; no value gives NULL. Group-by NULLs form one group.
    6. **Output row**: ``window_start``, ``window_end`` (naive UTC datetimes), the
       ``group_by`` columns in order, the aggregation aliases in order, then
       ``revision``, ``retracted`` under reopen, then ``_dead_letter`` under dlq (a
       dead-letter row has every other column None; its JSON is ``{"side": "input",
       "reason": "late", "watermark": wm_ms, "row": {...}}``).

    Args:
        spec: The window spec, read by attribute (duck-typed): ``kind``, ``duration_ms``,
            ``hop_ms``, ``gap_ms``, ``event_time_column``, ``lateness_ms``,
            ``group_by``, ``late_data``, ``allowed_lateness_ms``, ``dlq_horizon_ms``,
            ``window_start_column``, ``window_end_column``, ``aggregations`` (each with
            ``agg``, ``column``, ``as_``, ``mode``). Missing optional attributes take
            their defaults.
        log: One :class:`WindowBatch` per micro-batch, in order.
        columns: Every input column, in order (the dead letters' ``row``).
        batch_times_ms: Under ``time_mode="processing"``, each log batch's timestamp in ms
            since the epoch (required then, one per batch; ignored otherwise).

    Returns:
        The output rows with their batch, Spark's ``W`` per batch, and the counters.

    Raises:
        ValueError: If the spec cannot be modelled or a row's event time is null.
        OverflowError: Where the query fails: an integer ``sum`` out of int64 (rule 5e).

    Example:
        >>> from datetime import datetime
        >>> from types import SimpleNamespace as NS
        >>> spec = NS(kind="tumbling", duration_ms=60_000, lateness_ms=0,
        ...           event_time_column="t", group_by=["user"],
        ...           aggregations=[NS(agg="count", column=None, as_="clicks", mode=None)])
        >>> log = [WindowBatch(rows=[{"user": "a", "t": datetime(2026, 1, 1, 0, 0, 5)},
        ...                          {"user": "a", "t": datetime(2026, 1, 1, 0, 0, 7)}]),
        ...        WindowBatch(rows=[{"user": "b", "t": datetime(2026, 1, 1, 0, 1, 0)}])]
        >>> result = oracle_window(spec, log, columns=["user", "t"])
        >>> [(out.batch, out.row["window_start"].isoformat(), out.row["user"],
        ...   out.row["clicks"]) for out in result.rows]
        [(2, '2026-01-01T00:00:00', 'a', 2)]
        >>> result.spark_watermarks_ms  # W moves after each batch; batch 2 is the no-data one
        [0, 1767225607000, 1767225660000]

        Window ``[00:00, 00:01)`` closes when ``wm`` reaches 00:01, which only the trailing
        no-data batch 2 sees; user b's window ``[00:01, 00:02)`` stays open.


    """
    if (getattr(spec, "time_mode", None) or "event") == "processing":
        # Rule 0: processing time is the micro-batch's timestamp.
        stamps = spark_rules.processing_time_stamps(batch_times_ms, len(log))
        et = str(getattr(spec, "event_time_column", None) or "_event_ts")
        log = [
            WindowBatch(rows=tuple({**row, et: at} for row in batch.rows))
            for batch, at in zip(log, stamps, strict=True)
        ]
        columns = [*columns, et] if et not in columns else list(columns)
    cfg = _resolve(spec, columns)
    result = WindowOracleResult(output_columns=list(cfg.output_columns))
    model = _WindowModel(cfg, result)
    # Rule 1: Spark's WatermarkTracker with one input (so the policy makes no difference).
    tracker = spark_rules.SparkWatermarkTracker(cfg.delay_ms, "min", _INPUTS)
    previous_batch_w_ms = 0  # the W batch b - 1 saw; 0 before batch 0

    for batch_index, batch in enumerate(log):
        # Rule 1: this batch sees the W computed after batches 0..b-1.
        seen_w_ms = tracker.global_ms
        result.spark_watermarks_ms.append(seen_w_ms)
        event_times_us = [_row_event_time_us(cfg, row) for row in batch.rows]

        # Rule 4: the operator watermark for every decision in this batch.
        wm_us = spark_rules.operator_wm_us(seen_w_ms, cfg.horizon_ms)

        filter_us, observed_us = spark_rules.watermark_times(event_times_us, batch.clock_us)
        # Rules 2 and 5b: Spark's pre-filter, then ingest each survivor in arrival order.
        for index, (row, event_time_us) in enumerate(zip(batch.rows, event_times_us, strict=True)):
            if spark_rules.spark_drops_row(filter_us[index], previous_batch_w_ms):
                result.spark_dropped += 1
                continue
            model.ingest(row, event_time_us, (batch_index, index), wm_us)

        # Rules 5e, 5c, 5d: a sum out of int64 fails the batch; else emit, then evict.
        model.check_sums(batch_index)
        model.emit(batch_index, wm_us)
        model.evict(wm_us)
        result.held.append(model.held())

        # Rule 1 (continued): W after this batch, from all its rows (filtered ones too).
        tracker.observe_batch({_INPUTS[0]: observed_us})
        previous_batch_w_ms = seen_w_ms

    result.num_batches = len(log)

    # Rule 3: one trailing no-data batch if W advanced after the last data batch.
    spark_w_ms = tracker.global_ms
    if log and spark_w_ms > result.spark_watermarks_ms[-1]:
        trailing_index = len(log)
        result.spark_watermarks_ms.append(spark_w_ms)
        wm_us = spark_rules.operator_wm_us(spark_w_ms, cfg.horizon_ms)
        model.emit(trailing_index, wm_us)
        model.evict(wm_us)
        result.held.append(model.held())
        result.num_batches += 1

    return result


def _row_event_time_us(cfg: _ResolvedWindow, row: Mapping[str, Any]) -> int:
    """Return a row's event time in µs; a null event time is not modelled."""
    value = row.get(cfg.event_time_column)
    if value is None:
        msg = (
            f"row has a null event time in `{cfg.event_time_column}`; the window oracle "
            f"does not model null event times: {dict(row)!r}"
        )
        raise ValueError(msg)
    return to_us(value)
