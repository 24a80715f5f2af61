"""The Spark layer both oracles model: what Spark does around the operator (rules 0-4).

These are the rules of ``SEMANTICS.md`` §1 that belong to Spark rather than to an operator,
written once so that every oracle (:mod:`~interlace.testing.oracles.join`,
:mod:`~interlace.testing.oracles.window`) models Spark alike:

* **Rule 0**, processing time: under ``time_mode="processing"`` every row of micro-batch
  ``b`` takes the batch's timestamp as its event time (:func:`processing_time_stamps`).
* **Rule 1**, the watermark ``W`` (ms) Spark's ``WatermarkTracker`` computes after each
  micro-batch, per input and combined by ``spark.sql.streaming.multipleWatermarkPolicy``
  (:class:`SparkWatermarkTracker`, :func:`spark_event_time_ms`); for a chain stage's input,
  from the clock its channel stamps (:func:`watermark_times`).
* **Rule 2**, the pre-filter Spark's stateful operator applies with an event-time timeout:
  rows older than the previous batch's ``W`` never reach the operator
  (:func:`spark_drops_row`).
* **Rule 3**, the trailing no-data micro-batch Spark runs when ``W`` advanced after the
  last data batch (each oracle runs it; the condition is ``W`` after the last batch
  exceeding the ``W`` that batch saw).
* **Rule 4**, the operator watermark ``wm = W + H`` every operator decision uses
  (:func:`operator_wm_us`).

``__all__`` holds the rules users may call; :class:`SparkWatermarkTracker` serves the
oracles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from interlace.testing.log import EPOCH

__all__ = [
    "WATERMARK_POLICIES",
    "idle_heartbeat_stamps",
    "operator_wm_us",
    "processing_time_stamps",
    "spark_drops_row",
    "spark_event_time_ms",
    "watermark_times",
]

WATERMARK_POLICIES = ("min", "max")
"""Values of ``spark.sql.streaming.multipleWatermarkPolicy``."""


# --------------------------------------------------------------------------------------
# Rule 1: Spark's watermark W
# --------------------------------------------------------------------------------------


def spark_event_time_ms(event_time_us: int) -> int:
    """Return the event time as Spark's watermark node records it, in ms.

    ``EventTimeWatermarkExec`` adds ``micros / 1000`` with JVM ``Long`` division, which
    truncates toward zero. It equals ``event_time_us // 1000`` for times since 1970 and
    differs by one for pre-1970 times that are not whole milliseconds.
    """
    quotient = abs(event_time_us) // 1000
    return quotient if event_time_us >= 0 else -quotient


def _combine_input_watermarks(per_input_ms: Mapping[str, int | None], policy: str) -> int:
    """Combine the per-input watermarks into a global candidate by the policy.

    Modelled on Spark 4.x ``WatermarkTracker.updateWatermark``, which registers every
    watermark node up front and combines ``operatorToWatermarkMap.values.map(_.getOrElse(0L))``:
    an input that has not had a row yet counts as **0**, it is not left out. So under
    ``min`` the global ``W`` cannot move before every input has had a row; under ``max``
    it makes no difference. (Negative per-input values are kept, as in Spark; since the
    global ``W`` starts at 0 and never decreases, clamping them to 0 would give the same
    global ``W``.)
    """
    values = [0 if value is None else value for value in per_input_ms.values()]
    return min(values) if policy == "min" else max(values)


class SparkWatermarkTracker:
    """Spark's global event-time watermark ``W`` (ms) across an operator's inputs (rule 1).

    A join has two inputs (``left``, ``right``); a window has one. With one input the
    policy makes no difference: ``W = max(W, max(event ms of every row so far) - delay)``.

    Args:
        delay_ms: The ``withWatermark`` delay the library sets: ``lateness_ms + H``.
        policy: ``spark.sql.streaming.multipleWatermarkPolicy``, ``"min"`` or ``"max"``.
        inputs: The names of the inputs, each with its own watermark node.

    """

    def __init__(self, delay_ms: int, policy: str, inputs: Sequence[str]) -> None:
        self.delay_ms = delay_ms
        self.policy = policy
        self.inputs = tuple(inputs)
        self.per_input_ms: dict[str, int | None] = dict.fromkeys(self.inputs)
        self.global_ms = 0  # Spark reports 0 before it has computed a watermark

    def observe_batch(self, event_times_us: Mapping[str, Sequence[int]]) -> None:
        """Update ``W`` after a micro-batch from every row its watermark nodes saw.

        Args:
            event_times_us: Input -> event times of all rows of the batch, including the
                rows Spark's pre-filter and the operator later drop.

        """
        for side in self.inputs:
            times = event_times_us[side]
            if not times:
                continue  # an input without rows in this batch keeps its watermark
            candidate_ms = max(spark_event_time_ms(t) for t in times) - self.delay_ms
            previous_ms = self.per_input_ms[side]
            if previous_ms is None or candidate_ms > previous_ms:
                self.per_input_ms[side] = candidate_ms
        chosen_ms = _combine_input_watermarks(self.per_input_ms, self.policy)
        # The global watermark never decreases.
        self.global_ms = max(self.global_ms, chosen_ms)


# --------------------------------------------------------------------------------------
# Rule 0: processing time; rule 2: Spark's pre-filter; rule 4: the operator watermark
# --------------------------------------------------------------------------------------


def processing_time_stamps(
    batch_times_ms: Sequence[int] | None, n_batches: int
) -> list[datetime]:
    """Return each micro-batch's processing time as a naive UTC datetime (rule 0).

    Under ``time_mode="processing"`` every row of batch ``b`` takes ``batch_times_ms[b]``,
    the batch's timestamp (Spark's ``batchTimestampMs``), as its event time.

    Raises:
        ValueError: Unless there is exactly one time per log batch.
    """
    if batch_times_ms is None or len(batch_times_ms) != n_batches:
        msg = "`time_mode`='processing' needs `batch_times_ms`, one per log batch"
        raise ValueError(msg)
    return [EPOCH + timedelta(milliseconds=int(ms)) for ms in batch_times_ms]


def spark_drops_row(event_time_us: int, previous_batch_w_ms: int) -> bool:
    """Say whether Spark removes a row before the operator sees it (rule 2).

    Spark's stateful operator (with an event-time timeout) filters input rows with
    ``event_time <= watermark_for_late_events``, where that watermark is the ``W`` the
    previous micro-batch saw, 0 before Spark has one: so rows at or before the epoch
    (1970-01-01T00:00:00 UTC) are removed in every batch, the first one included
    (measured on Spark 4.3: ``tests/replay/test_hostile_spark.py``). Such rows are counted
    by Spark in ``numRowsDroppedByWatermark``; they still count for the watermark (the
    watermark node runs before the filter).

    This is the one place to correct if measurements of Spark disagree.
    """
    return event_time_us <= max(previous_batch_w_ms, 0) * 1000


def watermark_times(
    event_times_us: Sequence[int], clock_us: int | None, heartbeat_us: int | None = None
) -> tuple[list[int], list[int]]:
    """Return what Spark's filter reads per row, and what the watermark node observes.

    An ordinary input: its rows' event times, both. A chain stage's input read from a
    channel (SEMANTICS §11; ``clock_us`` set: the clock its rows carry in this batch) is
    watermarked on the clock: the filter reads the clock for every row, and the watermark
    node observes the clock (also from a tick, a batch with the clock and no rows).
    An idle input's heartbeat (``heartbeat_us``, rule 1b) is observed too, and is no row.
    """
    extra = [] if heartbeat_us is None else [heartbeat_us]
    if clock_us is None:
        return list(event_times_us), [*event_times_us, *extra]
    return [clock_us] * len(event_times_us), [clock_us, *extra]


def idle_heartbeat_stamps(
    now_ms: int,
    timeouts_ms: Mapping[str, int | None],
    last_row_ms: Mapping[str, int],
    max_clock_us: Mapping[str, int | None],
) -> dict[str, int]:
    """Rule 1b (SEMANTICS §1, idle inputs): which inputs are idle at ``now_ms``, and their stamp.

    An input with a timeout whose last row came ``timeout`` or more ms before ``now_ms`` is
    idle. Every idle input is stamped with the least greatest clock (event time) among the
    other, active inputs, so its watermark equals theirs and ``W`` (the minimum) is the active
    inputs' minimum; no stamp when no input is active or an active one has no row yet.

    Args:
        now_ms: Processing time.
        timeouts_ms: Input -> idle timeout (ms) or None (never idle).
        last_row_ms: Input -> processing time of its last row (the start, before any).
        max_clock_us: Input -> greatest clock it delivered (its rows and heartbeats), µs.

    Returns:
        Idle input -> the stamp (µs) its watermark node should see.
    """
    idle = {name for name, timeout in timeouts_ms.items()
            if timeout is not None and now_ms - last_row_ms[name] >= timeout}
    active = [max_clock_us[name] for name in timeouts_ms if name not in idle]
    if not active or None in active:
        return {}
    stamp = min(c for c in active if c is not None)
    return dict.fromkeys(sorted(idle), stamp)


def operator_wm_us(spark_w_ms: int, horizon_ms: int) -> int | None:
    """Return the operator watermark ``wm = W + H`` in µs, or None before Spark has one.

    With ``W <= 0`` there is no watermark: nothing is late and nothing is evicted.
    """
    if spark_w_ms <= 0:
        return None
    return (spark_w_ms + horizon_ms) * 1000

