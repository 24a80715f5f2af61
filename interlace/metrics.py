"""Operator counters collected from the Python workers with a Spark accumulator.

Every ``step`` call returns per-call counts (matches, unmatched rows emitted, late rows dropped,
null-key rows dropped, rows dead-lettered, rows evicted); the operator function adds them to an
accumulator, so rows that are not emitted are still accounted for on the driver::

    counters = interlace.metrics.counters(spark)
    out = stream_join(left, right, spec, counters=counters)
    ...
    counters.value  # {"matches": 120, "late_dropped_left": 3, ...}

Rows that Spark itself drops behind its watermark before the operator sees them are counted by
Spark, in the query progress (``stateOperators[].numRowsDroppedByWatermark``).

Counters are exact, also when Spark runs an operator task again: each call's counts are keyed
by (operator, key group, micro-batch), the micro-batch being its processing timestamp
(``GroupState.getCurrentProcessingTimeMs()``, the same on every attempt of the batch), and the
driver merges a task's entries by replacement, not addition. A task Spark re-executes (its
shuffle output or a cached block died with an executor) or a ``foreachBatch`` that runs two
actions on the operator's output without caching it (so the operator runs twice) sends the
same entries again, which overwrite the earlier ones; ``.value`` is the sum of the entries.
Failed attempts never count (Spark drops their accumulator updates). The driver keeps the
entries of each operator's last :data:`KEEP_BATCHES` micro-batches and folds older ones into a
running total (a repeat of a folded batch is ignored), so memory stays at
``KEEP_BATCHES x key groups`` entries per operator. One operator instance (one
``stream_join`` / ``window_aggregate`` call) belongs in one running query: two queries
started from the same output DataFrame share its identity, and a batch of one starting in the
same millisecond as a batch of the other would count once.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.accumulators import AccumulatorParam

__all__ = [
    "KEEP_BATCHES",
    "CallCounts",
    "CounterParam",
    "CounterTotals",
    "add_counts",
    "counters",
    "new_operator_id",
    "spark_dropped_rows",
]

KEEP_BATCHES = 16
"""Micro-batches per operator whose entries the driver keeps (older ones are folded)."""

_FOLDED_MEMORY = 1024  # folded batch timestamps remembered per operator, to ignore repeats


def new_operator_id() -> str:
    """A fresh operator identity (taken on the driver when the operator function is built)."""
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class CallCounts:
    """One operator call's counts and what identifies the call across task attempts.

    Attributes:
        op: The operator instance (:func:`new_operator_id`).
        key_group: Spark's grouping key of the call (a tuple: the key group id).
        batch_ms: The micro-batch's processing timestamp (``getCurrentProcessingTimeMs()``).
        counts: Counter name -> count.
    """

    op: str
    key_group: Hashable
    batch_ms: int
    counts: Mapping[str, int]


EntryKey = tuple[str, Hashable, int]


class CounterTotals(dict[str, int]):
    """An accumulator value: the dict name -> total, plus the entries the totals sum.

    The dict items are the totals (what ``.value`` shows). ``entries`` holds the counts of each
    (operator, key group, batch) still kept, ``base`` the folded batches and plain-dict adds.
    """

    def __init__(self, base: Mapping[str, int] | None = None) -> None:
        super().__init__()
        self.entries: dict[EntryKey, dict[str, int]] = {}
        self.base: dict[str, int] = {}
        # Operator -> batch timestamp -> key groups with an entry (insertion order = arrival).
        self.recent: dict[str, dict[int, set[Hashable]]] = {}
        self.folded: dict[str, dict[int, None]] = {}
        if base:
            self.add_plain(base)

    def add_plain(self, counts: Mapping[str, int]) -> None:
        """Add counts that carry no call identity (always additive)."""
        for k, v in counts.items():
            self.base[k] = self.base.get(k, 0) + int(v)
            self[k] = self.get(k, 0) + int(v)

    def add_call(self, call: CallCounts) -> None:
        """Worker side: add one call's counts to its entry (calls within one task add up)."""
        key = (call.op, call.key_group, int(call.batch_ms))
        self._set(key, _summed(self.entries.get(key), call.counts))

    def merge(self, update: CounterTotals) -> None:
        """Driver side: take a task's entries, replacing the same (op, key group, batch)."""
        self.add_plain(update.base)
        for key, counts in update.entries.items():
            op, _, batch_ms = key
            if batch_ms in self.folded.get(op, ()):
                continue  # a repeat of a batch already folded into the base
            self._set(key, counts)
        self._compact()

    def _set(self, key: EntryKey, counts: Mapping[str, int]) -> None:
        old = self.entries.get(key, {})
        for k in set(old) | set(counts):
            self[k] = self.get(k, 0) - old.get(k, 0) + int(counts.get(k, 0))
        self.entries[key] = dict(counts)
        op, kg, batch_ms = key
        self.recent.setdefault(op, {}).setdefault(batch_ms, set()).add(kg)

    def _compact(self) -> None:
        for op, batches in self.recent.items():
            while len(batches) > KEEP_BATCHES:
                batch_ms = next(iter(batches))
                for kg in batches.pop(batch_ms):
                    for k, v in self.entries.pop((op, kg, batch_ms)).items():
                        self.base[k] = self.base.get(k, 0) + v
                folded = self.folded.setdefault(op, {})
                folded[batch_ms] = None
                while len(folded) > _FOLDED_MEMORY:
                    del folded[next(iter(folded))]


def _summed(a: Mapping[str, int] | None, b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a or {})
    for k, v in b.items():
        out[k] = out.get(k, 0) + int(v)
    return out


class CounterParam(AccumulatorParam):  # type: ignore[type-arg]
    """Merges :class:`CounterTotals` by replacement, plain dicts by addition.

    A call's counts add up within a task, and a task's entries replace the same (operator, key
    group, micro-batch) on the driver; plain dicts name -> int add (for code that adds its own
    counts).
    """

    def zero(self, value: Any) -> CounterTotals:
        """Return empty totals."""
        return CounterTotals()

    def addInPlace(self, a: Any, b: Any) -> CounterTotals:  # noqa: N802
        """Merge ``b`` (a :class:`CallCounts`, a task's :class:`CounterTotals` or a dict)."""
        if not isinstance(a, CounterTotals):
            a = CounterTotals(a)  # the value was set to a plain dict on the driver
        if isinstance(b, CallCounts):
            a.add_call(b)
        elif isinstance(b, CounterTotals):
            a.merge(b)
        else:
            a.add_plain(b)
        return a


def add_counts(sink: Any, op: str, key: Any, state: Any, counts: Mapping[str, int]) -> None:
    """Add one operator call's ``counts`` to ``sink`` (an operator's ``counters``).

    An accumulator from :func:`counters` gets them as :class:`CallCounts` keyed by ``op``, the
    call's grouping ``key`` and ``state.getCurrentProcessingTimeMs()``, so that a repeated call
    for the same key group and micro-batch replaces its earlier counts; any other sink with an
    ``add`` (``interlace.testing.local``'s, a user's own accumulator) gets the plain dict.
    """
    if isinstance(getattr(sink, "accum_param", None), CounterParam):
        kg = tuple(k.item() if hasattr(k, "item") else k for k in key)
        sink.add(CallCounts(op, kg, int(state.getCurrentProcessingTimeMs()), dict(counts)))
    else:
        sink.add(counts)


def spark_dropped_rows(progress: dict[str, Any]) -> int:
    """Rows Spark's watermark pre-filter removed in one micro-batch.

    They never reached the operator; ``progress`` is the batch's progress as a dict, and the
    count is the sum of its ``stateOperators[].numRowsDroppedByWatermark``.
    """
    ops = progress.get("stateOperators") or []
    return sum(int(o.get("numRowsDroppedByWatermark") or 0) for o in ops)


def counters(spark: Any) -> Any:
    """Return a new counters accumulator (``.value`` is a dict name -> int).

    Exact under task retries and re-executed stages (module docstring): use one per query.

    Raises:
        ConfigError: ``spark`` is a Spark Connect session (no SparkContext, no accumulators).
    """
    from interlace.operators._common import require_classic

    require_classic(
        spark,
        "interlace.metrics.counters()",
        "Run the operators without `counters` over Spark Connect; the query progress still "
        "counts the rows Spark dropped (spark_dropped_rows)",
    )
    return spark.sparkContext.accumulator({}, CounterParam())


class PipelineMetrics:
    """Prometheus metrics of one pipeline, fed from query progress and operator counters.

    Seed 001's window metrics plus join counterparts (names prefixed ``interlace_``):

    * ``interlace_windows_active`` (gauge): windows held in state (created - emitted-and-evicted
      - absorbed sessions).
    * ``interlace_windows_emitted_total`` (counter; ``kind``): window rows emitted.
    * ``interlace_late_rows_dropped_total`` (counter; ``policy``): late rows dropped by the
      operator (``drop``, ``reopen`` past the allowance) — rows dead-lettered count under
      ``policy="dlq"``; rows Spark dropped before the operator under ``policy="spark"``.
    * ``interlace_state_groups_total`` (gauge): key groups holding state (Spark's
      ``numRowsTotal`` of the state operator).
    * ``interlace_state_bytes`` (gauge): Spark's ``memoryUsedBytes`` of the state operator.
    * ``interlace_watermark_seconds`` (gauge; ``source``): per source ``max event time -
      lateness_ms``; ``source="_global"`` is the operator watermark ``wm``.
    * ``interlace_join_buffered_rows`` (gauge; ``side``), ``interlace_join_matches_total``,
      ``interlace_join_unmatched_emitted_total`` (counter; ``side``).
    * ``interlace_input_rows_total``, ``interlace_output_rows_total``, ``interlace_batches_total``.
    * ``interlace_rows_dropped_total`` (counter; ``reason``): every input row removed without
      any output: ``late`` (the operator's late drops), ``spark_watermark`` (Spark's
      pre-filter), ``null_event_time``, ``null_key``.
    * ``interlace_malformed_rows_total`` (counter): JSON / CSV records with a field Spark could
      not parse (kept with the field NULL; the raw record goes with dead letters).
    """

    def __init__(self, pipeline: str, kind: str) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.pipeline = pipeline
        self.kind = kind
        self.registry = CollectorRegistry()
        r = self.registry
        lp = ["pipeline"]
        self.windows_active = Gauge(
            "interlace_windows_active", "Windows held in state", lp, registry=r
        )
        self.windows_emitted = Counter(
            "interlace_windows_emitted", "Window rows emitted", [*lp, "kind"], registry=r
        )
        self.late_dropped = Counter(
            "interlace_late_rows_dropped",
            "Late rows not aggregated / joined",
            [*lp, "policy"],
            registry=r,
        )
        self.state_groups = Gauge(
            "interlace_state_groups_total", "Key groups holding state", lp, registry=r
        )
        self.state_bytes = Gauge("interlace_state_bytes", "State store memory used", lp, registry=r)
        self.watermark = Gauge(
            "interlace_watermark_seconds",
            "Watermark (seconds since epoch)",
            [*lp, "source"],
            registry=r,
        )
        self.buffered = Gauge(
            "interlace_join_buffered_rows", "Rows buffered per join side", [*lp, "side"], registry=r
        )
        self.matches = Counter("interlace_join_matches", "Join pairs emitted", lp, registry=r)
        self.unmatched = Counter(
            "interlace_join_unmatched_emitted",
            "Unmatched outer rows emitted",
            [*lp, "side"],
            registry=r,
        )
        self.input_rows = Counter("interlace_input_rows", "Rows read", lp, registry=r)
        self.output_rows = Counter(
            "interlace_output_rows", "Rows written to the target", lp, registry=r
        )
        self.batches = Counter("interlace_batches", "Micro-batches run", lp, registry=r)
        self.dropped = Counter(
            "interlace_rows_dropped", "Input rows removed without output", [*lp, "reason"],
            registry=r,
        )
        self.malformed = Counter(
            "interlace_malformed_rows", "Records with a field Spark could not parse", lp,
            registry=r,
        )
        self._seen: dict[str, int] = {}

    def serve(self, port: int) -> Any:
        """Expose ``/metrics`` on ``port`` (0 picks a free port); returns the server."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, registry=self.registry)
        return server

    def update_counters(self, totals: dict[str, int], late_policy: str) -> None:
        """Feed cumulative operator counters (the accumulator's value)."""

        def delta(name: str) -> int:
            d = totals.get(name, 0) - self._seen.get(name, 0)
            self._seen[name] = totals.get(name, 0)
            return max(d, 0)

        p = self.pipeline
        late = sum(delta(n) for n in ("late_dropped", "late_dropped_left", "late_dropped_right"))
        if late:
            self.late_dropped.labels(p, late_policy).inc(late)
            self.dropped.labels(p, "late").inc(late)
        for reason in ("null_event_time", "null_key"):
            n = sum(delta(f"{reason}_dropped{s}") for s in ("", "_left", "_right"))
            if n:
                self.dropped.labels(p, reason).inc(n)
        dead = sum(delta(n) for n in ("dead_lettered", "dead_lettered_left", "dead_lettered_right"))
        if dead:
            self.late_dropped.labels(p, "dlq").inc(dead)
        if self.kind == "window":
            emitted = delta("windows_emitted")
            if emitted:
                self.windows_emitted.labels(p, "window").inc(emitted)
            self.windows_active.labels(p).set(
                totals.get("windows_created", 0)
                - totals.get("windows_evicted", 0)
                - totals.get("windows_absorbed", 0)
            )
        else:
            m = delta("matches")
            if m:
                self.matches.labels(p).inc(m)
            for side in ("left", "right"):
                u = delta(f"unmatched_{side}")
                if u:
                    self.unmatched.labels(p, side).inc(u)
                self.buffered.labels(p, side).set(
                    totals.get(f"inserted_{side}", 0) - totals.get(f"evicted_{side}", 0)
                )

    def update_progress(self, progress: dict[str, Any], output_rows: int) -> None:
        """Feed one micro-batch's ``StreamingQueryProgress`` (as a dict)."""
        p = self.pipeline
        self.batches.labels(p).inc()
        self.input_rows.labels(p).inc(int(progress.get("numInputRows") or 0))
        self.output_rows.labels(p).inc(output_rows)
        ops = progress.get("stateOperators") or []
        if ops:
            self.state_groups.labels(p).set(sum(int(o.get("numRowsTotal") or 0) for o in ops))
            self.state_bytes.labels(p).set(sum(int(o.get("memoryUsedBytes") or 0) for o in ops))
            spark_dropped = spark_dropped_rows(progress)
            if spark_dropped:
                self.late_dropped.labels(p, "spark").inc(spark_dropped)
                self.dropped.labels(p, "spark_watermark").inc(spark_dropped)

    def add_malformed(self, rows: int) -> None:
        """Count one micro-batch's malformed records (observed at the sources)."""
        if rows:
            self.malformed.labels(self.pipeline).inc(rows)

    def set_watermark(self, source: str, seconds: float) -> None:
        """Set a watermark gauge (``source="_global"`` for the operator's ``wm``)."""
        self.watermark.labels(self.pipeline, source).set(seconds)
