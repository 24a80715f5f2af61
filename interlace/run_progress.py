"""What a pipeline run reports: a line per micro-batch, a last line per query, its summary.

:class:`RunSummary` is what :func:`interlace.runner.run_pipeline` returns. ``_Progress``
prints each micro-batch of a query as :mod:`interlace.runner` drains its progress (live on a
terminal, plain log lines otherwise) and ``_report_done`` the query's last line;
``_late_rows`` and ``_dropped_rows`` read the operator's counters so far. Nothing here
touches Spark: a micro-batch's progress arrives as Spark's dict.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

__all__ = ["RunSummary"]


@dataclass
class RunSummary:
    """What a run did.

    ``spark_dropped`` counts input rows Spark's watermark pre-filter removed before the
    operator saw them (``numRowsDroppedByWatermark``); the operator's own late rows are in
    ``counters``. ``malformed`` counts JSON / CSV records with a field Spark could not parse
    (PERMISSIVE mode: the field is NULL, the raw record is kept for dead letters).

    Of a chain: ``batches``, ``input_rows`` (read from sources, not channels), dead letters,
    drops and malformed records summed over its stages, ``output_rows`` of the last stage,
    ``counters`` as ``STAGE.NAME``, and each stage's own summary in ``stages``.

    ``idle``: each join source with ``idle_timeout_ms`` -> since when it is idle (seconds
    since the epoch) at the run's end, or None while active (docs/idle-inputs.md).
    """

    batches: int = 0
    input_rows: int = 0
    output_rows: int = 0
    dead_letters: int = 0
    spark_dropped: int = 0
    malformed: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    stopped_by_user: bool = False
    seconds: float = 0.0
    stages: dict[str, RunSummary] = field(default_factory=dict)
    idle: dict[str, float | None] = field(default_factory=dict)


def _dropped_rows(totals: dict[str, int]) -> int:
    """Rows the operator removed without any output so far (late, NULLs, out of range)."""
    drops = ("late_dropped", "null_event_time_dropped", "null_key_dropped", "out_of_range_dropped")
    return sum(v for k, v in totals.items() if k.startswith(drops))


def _late_rows(totals: dict[str, int]) -> int:
    """Rows the operator judged late so far: dropped plus dead-lettered, every side."""
    return sum(v for k, v in totals.items() if k.startswith(("late_dropped", "dead_lettered")))


class _Progress:
    """Prints one line per micro-batch: live on a terminal, plain log lines otherwise."""

    def __init__(self, out: TextIO, name: str, horizon_ms: int = 0) -> None:
        self.out = out
        self.tty = out.isatty()
        self.name = name
        self.horizon_ms = horizon_ms

    def watermark(self, p: dict[str, Any]) -> str:
        """The operator's watermark ``wm`` (what decides); Spark's ``W`` beside it if different.

        Under ``reopen`` / ``dlq`` Spark's watermark trails ``wm`` by the horizon ``H`` (a day
        by default under ``dlq``), so showing ``W`` alone would look a day behind the data.
        """
        spark_wm = (p.get("eventTime") or {}).get("watermark", "-")
        if self.horizon_ms == 0 or spark_wm == "-":
            return str(spark_wm)
        w = _dt.datetime.strptime(spark_wm, "%Y-%m-%dT%H:%M:%S.%fZ")
        if w <= _dt.datetime(1970, 1, 1):
            return str(spark_wm)  # none yet
        wm = w + _dt.timedelta(milliseconds=self.horizon_ms)
        shown = f"{wm.strftime('%Y-%m-%dT%H:%M:%S.')}{wm.microsecond // 1000:03d}Z"
        return f"{shown} (Spark's {spark_wm})"

    def batch(
        self, p: dict[str, Any], output_rows: int, late: int, dropped: int, malformed: int,
        idle: dict[str, float | None] | None = None,
    ) -> None:
        """Print one micro-batch: ``late`` so far; ``dropped`` and ``malformed`` in this batch.

        ``idle``: each join input with an idle timeout -> since when it is idle (s), or None.
        """
        ops = p.get("stateOperators") or [{}]
        line = (
            f"[{self.name}] batch {p['batchId']}: in {p.get('numInputRows', 0)} rows, "
            f"watermark {self.watermark(p)}, out {output_rows} rows, late {late}, "
            f"dropped {dropped}, malformed {malformed}, "
            f"state {sum(int(o.get('numRowsTotal') or 0) for o in ops)} groups / "
            f"{sum(int(o.get('memoryUsedBytes') or 0) for o in ops)} bytes"
        )
        quiet = {s: t for s, t in (idle or {}).items() if t is not None}
        if quiet:
            line += ", idle " + ", ".join(f"{s} since {_clock(t)}"
                                          for s, t in sorted(quiet.items()))
        if self.tty:
            self.out.write("\r\033[K" + line)
        else:
            self.out.write(line + "\n")
        self.out.flush()

    def done(self) -> None:
        if self.tty:
            self.out.write("\n")
            self.out.flush()


def _clock(seconds: float) -> str:
    """A processing time (seconds since the epoch) as ``HH:MM:SSZ``."""
    return f"{_dt.datetime.fromtimestamp(seconds, _dt.timezone.utc):%H:%M:%S}Z"


def _report_done(progress: TextIO, summary: RunSummary, pipeline: Any, base: Path) -> None:
    """Write a query's last line: what it did, or that it had no new input."""
    st, p = summary, pipeline
    if st.batches == 0 and not st.stopped_by_user:
        progress.write(
            f"[{p.name}] no new input: nothing to do (checkpoint "
            f"{p.checkpoint_folder(base)} is up to date)\n"
        )
    else:
        progress.write(
            f"[{p.name}] done: {st.batches} batches, {st.input_rows} rows "
            f"in, {st.output_rows} rows out, {st.dead_letters} dead letters, "
            f"{st.malformed} malformed, "
            f"counters {json.dumps(st.counters, sort_keys=True)}"
            + "".join(f", idle {src} since {_clock(t)}" if t is not None else
                      f", {src} active" for src, t in sorted(st.idle.items()))
            + "\n"
        )
