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

import copy
from pathlib import Path
from typing import Any

from interlace.operators.common.counters import (
    KEEP_BATCHES,
    CallCounts,
    CounterParam,
    CounterTotals,
    add_counts,
    new_operator_id,
)

__all__ = [
    "KEEP_BATCHES",
    "CallCounts",
    "CounterParam",
    "CounterTotals",
    "add_counts",
    "counters",
    "new_operator_id",
    "rows_read_from",
    "spark_dropped_rows",
]


def spark_dropped_rows(progress: dict[str, Any]) -> int:
    """Rows Spark's watermark pre-filter removed in one micro-batch.

    They never reached the operator; ``progress`` is the batch's progress as a dict, and the
    count is the sum of its ``stateOperators[].numRowsDroppedByWatermark``.
    """
    ops = progress.get("stateOperators") or []
    return sum(int(o.get("numRowsDroppedByWatermark") or 0) for o in ops)


def rows_read_from(progress: dict[str, Any], folders: Any = None) -> int:
    """Rows one micro-batch read from its sources whose description names one of ``folders``.

    ``folders``: paths (resolved here), matched in each source's ``description`` (a file
    source names its folder); None: every source.
    """
    names = None if folders is None else [str(Path(f).resolve()) for f in folders]
    return sum(int(s.get("numInputRows") or 0) for s in progress.get("sources") or []
               if names is None or any(n in str(s.get("description", "")) for n in names))


def counters(spark: Any) -> Any:
    """Return a new counters accumulator (``.value`` is a dict name -> int).

    Exact under task retries and re-executed stages (module docstring): use one per query.

    Raises:
        ConfigError: ``spark`` is a Spark Connect session (no SparkContext, no accumulators).
    """
    from interlace.operators.common.connect import require_classic

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
      pre-filter), ``null_event_time``, ``null_key``, ``out_of_range`` (a timestamp pandas
      cannot hold; docs/reliability.md, "Hostile input").
    * ``interlace_malformed_rows_total`` (counter): JSON / CSV records with a field Spark could
      not parse (kept with the field NULL; the raw record goes with dead letters).
    * ``interlace_source_idle_since_seconds`` (gauge; ``source``): for a join input with
      ``idle_timeout_ms``, when it became idle (seconds since the epoch), 0 while active
      (docs/idle-inputs.md).
    """

    def __init__(self, pipeline: str, kind: str) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.pipeline = pipeline
        self.port: int | None = None  # the port serve() listens on
        self.kind = kind
        self.registry = CollectorRegistry()

        def metric(kind: Any, name: str, doc: str, *labels: str) -> Any:
            return kind(name, doc, ["pipeline", *labels], registry=self.registry)

        self.windows_active = metric(Gauge, "interlace_windows_active", "Windows held in state")
        self.windows_emitted = metric(
            Counter, "interlace_windows_emitted", "Window rows emitted", "kind")
        self.late_dropped = metric(
            Counter, "interlace_late_rows_dropped", "Late rows not aggregated / joined", "policy")
        self.state_groups = metric(
            Gauge, "interlace_state_groups_total", "Key groups holding state")
        self.state_bytes = metric(Gauge, "interlace_state_bytes", "State store memory used")
        self.watermark = metric(
            Gauge, "interlace_watermark_seconds", "Watermark (seconds since epoch)", "source")
        self.buffered = metric(
            Gauge, "interlace_join_buffered_rows", "Rows buffered per join side", "side")
        self.matches = metric(Counter, "interlace_join_matches", "Join pairs emitted")
        self.unmatched = metric(
            Counter, "interlace_join_unmatched_emitted", "Unmatched outer rows emitted", "side")
        self.input_rows = metric(Counter, "interlace_input_rows", "Rows read")
        self.output_rows = metric(Counter, "interlace_output_rows", "Rows written to the target")
        self.batches = metric(Counter, "interlace_batches", "Micro-batches run")
        self.dropped = metric(
            Counter, "interlace_rows_dropped", "Input rows removed without output", "reason")
        self.malformed = metric(
            Counter, "interlace_malformed_rows", "Records with a field Spark could not parse")
        self.idle_since = metric(
            Gauge, "interlace_source_idle_since_seconds",
            "When an idle join input became idle (seconds since epoch; 0 while active)",
            "source")
        self._seen: dict[str, int] = {}

    def stage(self, pipeline: str, kind: str) -> PipelineMetrics:
        """Return the metrics of one stage of a chain: these metrics, labelled ``pipeline``.

        The stage's metrics share this registry (one ``/metrics`` endpoint) and carry the
        stage's own ``pipeline`` label (``CHAIN.STAGE``); ``kind`` is its operator's.
        """
        view = copy.copy(self)
        view.pipeline, view.kind, view._seen = pipeline, kind, {}
        return view

    def serve(self, port: int) -> Any:
        """Expose ``/metrics`` on ``port`` (0 picks a free port, then read ``self.port``).

        Returns the server; ``self.port`` is the port it listens on.
        """
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, registry=self.registry)
        self.port = server.server_port
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
        for reason in ("null_event_time", "null_key", "out_of_range"):
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

    def set_idle(self, source: str, since_seconds: float | None) -> None:
        """Set a join input's idle gauge: since when it is idle, or 0 while active."""
        self.idle_since.labels(self.pipeline, source).set(since_seconds or 0)

    def set_watermark(self, source: str, seconds: float) -> None:
        """Set a watermark gauge (``source="_global"`` for the operator's ``wm``)."""
        self.watermark.labels(self.pipeline, source).set(seconds)
