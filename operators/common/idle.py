"""Idle inputs (SEMANTICS §1, seed 001): heartbeats leave a quiet input out of the minimum.

Spark combines a two-input operator's watermarks by ``min``: an input that stops delivering
rows holds ``W`` back, and nothing closes until it moves again. With ``left_idle_timeout_ms``
/ ``right_idle_timeout_ms`` set, an input that has delivered no row for that long in
processing time is **idle**, and while idle it is left out of the minimum (as Flink's
``withIdleness``):

* **Heartbeats.** Each watched input is unioned with a file source of its own (a folder
  under ``heartbeat_location``). A heartbeat is a clock-only row of that input
  (:data:`~.names.TICK_COLUMN` true, :data:`~.names.CLOCK_COLUMN` the stamp, every other
  column NULL, as a chain's tick): Spark's watermark node of that input sees it, and
  :func:`~.prepare.watermarked` removes it right after, so no operator rule ever sees it
  (never joined, counted or dead-lettered). Heartbeats are part of the input: the file
  source's offset log records which files each micro-batch read, so a restarted query reads
  the same ones.
* **The stamp.** Both inputs of an operator share one watermark delay, so an input's
  watermark is its greatest clock minus that delay. An idle input is stamped with the
  least greatest clock among the active inputs: its watermark then equals theirs, and the
  minimum is the active inputs' minimum. A heartbeat is written only when it moves the idle
  input's clock; when every input is idle (or an active one has had no row yet), none is.
* **Deciding** (:class:`IdleTracker`, pure): per input, the processing time of the last
  micro-batch that delivered a row (the start, before any) and the greatest clock it
  delivered, from ``observe`` metrics on the input itself (heartbeats not counted).
* **Running** (:class:`Heartbeats`): a ``StreamingQueryListener`` feeds the tracker after
  every micro-batch and checks it whenever the query waits for data (``onQueryIdle``, every
  ``spark.sql.streaming.noDataProgressEventInterval``), and once when the query is
  prepared. The tracker's state is kept in ``_idle.json`` in the heartbeat folder, so a
  restarted query or the next ``availableNow`` run knows since when each input is quiet.
* **Restarts.** Spark keeps no per-input watermark across a restart (only the combined
  ``W``; an input counts as 0 until it delivers a row), so at each start every input gets a
  *restore* heartbeat with its own greatest clock. This needs no timeout: with a
  ``heartbeat_location`` every input has its heartbeat source (``interlace run`` gives one
  to every join of a new checkpoint). A writer that sees a micro-batch before Spark commits
  it (``interlace run``'s ``foreachBatch``) feeds its observed metrics to
  :meth:`Heartbeats.observe` there, so ``_idle.json`` holds the batch's clocks once it is
  committed; the listener, after the commit, may come too late for a crash in between.

Rows of an input that becomes active again are judged against ``W`` as it then stands: some
may be late, and are counted and dead-lettered as any late row.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from interlace.operators.common.compat import observed_fields
from interlace.operators.common.names import CLOCK_COLUMN, TICK_COLUMN
from interlace.operators.errors import ConfigError

__all__ = ["Heartbeats", "IdleTracker", "InputClock", "batch_metrics", "heartbeats_at",
           "restore_held", "saved_clocks", "unlisten", "with_heartbeats"]

_STATE = "_idle.json"


def saved_clocks(location: str | os.PathLike[str]) -> dict[str, InputClock] | None:
    """What the tracker at heartbeat folder ``location`` last saved, per input; None if none."""
    path = Path(location) / _STATE
    if not path.exists():
        return None
    return {name: InputClock(**clock) for name, clock in json.loads(path.read_text()).items()}


def _now_ms() -> int:
    """Processing time, ms since the epoch (a test may replace it)."""
    return int(time.time() * 1000)


@dataclass
class InputClock:
    """What the tracker knows of one input (kept in ``_idle.json``).

    Attributes:
        last_active_ms: Processing time (ms since the epoch) of the last micro-batch in which
            the input delivered a row; the start, before any.
        max_clock_us: The greatest clock (event time, or a chain's clock) it delivered, µs.
        stamped_us: The greatest heartbeat stamp written for it, µs.
    """

    last_active_ms: int
    max_clock_us: int | None = None
    stamped_us: int | None = None

    @property
    def clock_us(self) -> int | None:
        """The greatest clock of the input: its rows' and its heartbeats'."""
        return _greatest(self.max_clock_us, self.stamped_us)


def _greatest(*values: int | None) -> int | None:
    seen = [v for v in values if v is not None]
    return max(seen) if seen else None


class IdleTracker:
    """Which inputs are idle, and which heartbeat each needs (pure: no Spark, no I/O).

    Args:
        timeouts_ms: Input -> its idle timeout (ms), or None for an input never idle.
        clocks: Input -> what is known of it (:class:`InputClock`).
    """

    def __init__(self, timeouts_ms: Mapping[str, int | None],
                 clocks: Mapping[str, InputClock]) -> None:
        self.timeouts_ms = dict(timeouts_ms)
        self.clocks = dict(clocks)
        # What Spark's watermark node of each input has seen in this run: Spark keeps no
        # per-input watermark across a restart (only the combined W), so an idle input needs
        # a heartbeat again in every run, even one stamped as before.
        self.run_clock_us: dict[str, int | None] = dict.fromkeys(self.clocks)

    @classmethod
    def started(cls, timeouts_ms: Mapping[str, int | None], now_ms: int) -> IdleTracker:
        """A tracker for a query that starts at ``now_ms`` with nothing known."""
        return cls(timeouts_ms, {name: InputClock(now_ms) for name in timeouts_ms})

    def observe(self, now_ms: int, rows: Mapping[str, int],
                max_clock_us: Mapping[str, int | None]) -> None:
        """Record one micro-batch: each input's rows (heartbeats not counted) and max clock."""
        for name, clock in self.clocks.items():
            if rows.get(name, 0) > 0:
                clock.last_active_ms = max(clock.last_active_ms, now_ms)
            seen = max_clock_us.get(name)
            clock.max_clock_us = _greatest(clock.max_clock_us, seen)
            self.run_clock_us[name] = _greatest(self.run_clock_us[name], seen)

    def idle_since_ms(self, now_ms: int) -> dict[str, int | None]:
        """Input -> when it became idle (processing time, ms), or None while active."""
        out: dict[str, int | None] = {}
        for name, clock in self.clocks.items():
            timeout = self.timeouts_ms.get(name)
            since = None if timeout is None else clock.last_active_ms + timeout
            out[name] = since if since is not None and now_ms >= since else None
        return out

    def due(self, now_ms: int) -> dict[str, int]:
        """Input -> the stamp (µs) of the heartbeat it needs now; empty if none does.

        Each input's watermark node should have seen the input's greatest clock, and an idle
        one also the least greatest clock among the active inputs (none while every input is
        idle or an active one has had no row: Spark then holds ``W`` at 0 anyway). A heartbeat
        is due where that is past what the node has seen in this run (:attr:`run_clock_us`):
        for an idle input as the active ones move, and for every input after a restart,
        which Spark's per-input watermarks do not survive (its own greatest clock: the
        *restore* heartbeat, so ``W`` moves again without waiting for every input's next row).
        """
        idle = self.idle_since_ms(now_ms)
        active = [self.clocks[n].clock_us for n, since in idle.items() if since is None]
        target = (min(c for c in active if c is not None)
                  if active and all(c is not None for c in active) else None)
        due = {}
        for name, since in idle.items():
            want = self.clocks[name].clock_us
            if since is not None and target is not None:
                want = _greatest(want, target)
            seen = self.run_clock_us[name]
            if want is not None and (seen is None or want > seen):
                due[name] = want
        return due

    def stamped(self, name: str, stamp_us: int) -> None:
        """Record that a heartbeat stamped ``stamp_us`` was written for ``name``."""
        clock = self.clocks[name]
        clock.stamped_us = _greatest(clock.stamped_us, stamp_us)
        self.run_clock_us[name] = _greatest(self.run_clock_us[name], stamp_us)


class Heartbeats:
    """One operator's watched inputs: their heartbeat folders, tracker and listener.

    Args:
        location: The heartbeat folder (one sub-folder per input, and ``_idle.json``).
        timeouts_ms: Input name (``"left"``, ``"right"``) -> idle timeout (ms) or None.
        clock: Processing time in ms (a test may pass its own).
    """

    def __init__(self, location: str | os.PathLike[str], timeouts_ms: Mapping[str, int | None],
                 clock: Callable[[], int] | None = None) -> None:
        self.location = Path(location)
        self.clock = clock or (lambda: _now_ms())
        self.metric_prefix = f"interlace_idle_{uuid.uuid4().hex[:12]}_"
        self.query_id: str | None = None
        #: Heartbeats written since :meth:`arm` (after the query's start): an ``availableNow``
        #: run has listed its files by then and reads them only in the next run.
        self.written_since_start = 0
        self._armed = False
        self._lock = threading.Lock()
        self.location.mkdir(parents=True, exist_ok=True)
        for name in timeouts_ms:
            (self.location / name).mkdir(exist_ok=True)
        self.tracker = self._load(timeouts_ms)
        key = str(self.location.resolve())
        if key in _RESTORE_HELD:  # restore_held: as if each input's clock were restored
            self.tracker.run_clock_us = {n: c.clock_us for n, c in self.tracker.clocks.items()}
        _BY_LOCATION[key] = self

    def folder(self, name: str) -> Path:
        """The folder of ``name``'s heartbeat files."""
        return self.location / name

    def metric(self, name: str) -> str:
        """The ``observe`` name of input ``name``'s metrics."""
        return self.metric_prefix + name

    def _load(self, timeouts_ms: Mapping[str, int | None]) -> IdleTracker:
        now = self.clock()
        saved = saved_clocks(self.location)
        if saved is None:
            return IdleTracker.started(timeouts_ms, now)
        clocks = {name: saved.get(name, InputClock(now)) for name in timeouts_ms}
        # A query restarted in this process: its previous run's listener may not have saved
        # its last micro-batch yet, but it holds it.
        previous = _BY_LOCATION.get(str(self.location.resolve()))
        if previous is not None:
            with previous._lock:
                for name, clock in clocks.items():
                    old = previous.tracker.clocks.get(name)
                    if old is not None:
                        clock.last_active_ms = max(clock.last_active_ms, old.last_active_ms)
                        clock.max_clock_us = _greatest(clock.max_clock_us, old.max_clock_us)
                        clock.stamped_us = _greatest(clock.stamped_us, old.stamped_us)
        return IdleTracker(timeouts_ms, clocks)

    def _save(self) -> None:
        tmp = self.location / f".{_STATE}.tmp"
        tmp.write_text(json.dumps({n: asdict(c) for n, c in self.tracker.clocks.items()}))
        os.replace(tmp, self.location / _STATE)

    def observe(self, observed: Mapping[str, Any]) -> None:
        """Feed one micro-batch's observed metrics (name -> row of ``rows``, ``max_clock``)."""
        rows: dict[str, int] = {}
        clocks: dict[str, int | None] = {}
        for name in self.tracker.clocks:
            metric = observed.get(self.metric(name))
            if metric is None:
                continue
            count, clock = _metric(metric, "rows"), _metric(metric, "max_clock")
            rows[name] = int(count or 0)
            clocks[name] = None if clock is None else int(clock)
        with self._lock:
            self.tracker.observe(self.clock(), rows, clocks)
        self.check()

    def check(self) -> dict[str, int]:
        """Write the heartbeats that are due; return them (input -> stamp, µs)."""
        with self._lock:
            due = self.tracker.due(self.clock())
            for name, stamp in due.items():
                _write_heartbeat(self.folder(name), stamp)
                self.tracker.stamped(name, stamp)
                self.written_since_start += self._armed
            self._save()
        return due

    def arm(self) -> None:
        """Count the heartbeats written from now on (:attr:`written_since_start`)."""
        self._armed = True

    def idle_since_ms(self) -> dict[str, int | None]:
        """Input -> since when it is idle (processing time, ms), or None while active."""
        with self._lock:
            return self.tracker.idle_since_ms(self.clock())

    def listen(self, spark: Any) -> None:
        """Have the session's listener feed and check these heartbeats (:func:`_listener`)."""
        _listener(spark).beats.append(self)


def batch_metrics(query: Any) -> dict[str, dict[str, Any]]:
    """The observed metrics of ``query``'s micro-batch in progress, read in its sink.

    Called from a ``foreachBatch`` function after it has run the batch's plan (Spark's
    accumulators then hold the batch's metrics; it commits the batch only once the function
    returns). Empty where Spark's query object is out of reach (Spark Connect).
    """
    try:
        metrics = query._jsq.streamingQuery().lastExecution().observedMetrics()
    except Exception:  # noqa: BLE001 (Spark Connect, or a Spark without this internal)
        return {}
    out: dict[str, dict[str, Any]] = {}
    entries = metrics.iterator()
    while entries.hasNext():
        entry = entries.next()
        row = entry._2()
        out[entry._1()] = {n: row.get(i) for i, n in enumerate(row.schema().fieldNames())}
    return out


def _metric(row: Any, name: str) -> Any:
    """One observed value of a progress's ``observedMetrics`` entry (any form it comes in)."""
    return observed_fields(row).get(name)


def _write_heartbeat(folder: Path, stamp_us: int) -> None:
    """Write one heartbeat file (a clock-only row) with a later mtime than the folder's last."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        CLOCK_COLUMN: pa.array([stamp_us], pa.timestamp("us", tz="UTC")),
        TICK_COLUMN: pa.array([True], pa.bool_()),
    })
    name = f"heartbeat-{stamp_us:020d}-{uuid.uuid4().hex[:8]}.parquet"  # never a name seen
    tmp = folder / f".{name}.tmp"
    pq.write_table(table, tmp)
    latest = max((p.stat().st_mtime_ns for p in folder.glob("heartbeat-*")), default=0)
    now = time.time_ns()
    mtime = max(now, latest + 1_000_000)
    os.utime(tmp, ns=(mtime, mtime))
    os.replace(tmp, folder / name)


_BY_LOCATION: dict[str, Heartbeats] = {}
_RESTORE_HELD: set[str] = set()


@contextlib.contextmanager
def restore_held(location: str | os.PathLike[str]) -> Iterator[None]:
    """While inside, a :class:`Heartbeats` prepared at ``location`` writes no restore heartbeat.

    For an ``availableNow`` run that has nothing new to read: a restore heartbeat would be
    new input of its own, and Spark would run a micro-batch for it alone. Idle heartbeats
    are still written when due. The hold ends with the block, used or not (a query whose
    build failed leaves none behind for the next).
    """
    key = str(Path(location).resolve())
    _RESTORE_HELD.add(key)
    try:
        yield
    finally:
        _RESTORE_HELD.discard(key)


def heartbeats_at(location: str | os.PathLike[str]) -> Heartbeats | None:
    """The :class:`Heartbeats` last prepared with ``location`` in this process, if any."""
    return _BY_LOCATION.get(str(Path(location).resolve()))


_LISTENERS_LOCK = threading.Lock()


def _listener(spark: Any) -> Any:
    """The one listener of ``spark`` that feeds every :class:`Heartbeats` of its queries.

    Each is fed the progress of the query whose observed metrics carry its names; once that
    query terminates it is dropped. While the query waits for data, each is checked.
    """
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class _IdleListener(StreamingQueryListener):
        def __init__(self) -> None:
            self.beats: list[Heartbeats] = []

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's name)
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            observed = event.progress.observedMetrics or {}
            for beats in list(self.beats):
                if any(k.startswith(beats.metric_prefix) for k in observed):
                    beats.query_id = str(event.progress.id)
                    beats.observe(observed)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            for beats in list(self.beats):
                if beats.query_id in (None, str(event.id)):
                    beats.check()

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            self.beats = [b for b in self.beats if b.query_id != str(event.id)]

    with _LISTENERS_LOCK:  # kept on the session: a new session gets a listener of its own
        listener = getattr(spark, "_interlace_idle_listener", None)
        if listener is None:
            listener = _IdleListener()
            spark.streams.addListener(listener)
            spark._interlace_idle_listener = listener
        return listener


def unlisten(spark: Any) -> None:
    """Remove the session's heartbeat listener, if it has one (before stopping a session).

    Spark Connect's ``SparkSession.stop`` warns when it cannot remove a listener once the
    session is gone; a classic session needs no call.
    """
    with _LISTENERS_LOCK:
        listener = getattr(spark, "_interlace_idle_listener", None)
        if listener is not None:
            spark.streams.removeListener(listener)
            spark._interlace_idle_listener = None


def with_heartbeats(sides: Sequence[tuple[Any, str]], timeouts_ms: Sequence[int | None],
                    location: str | os.PathLike[str] | None,
                    names: Sequence[str] = ("left", "right"),
                    ) -> tuple[list[tuple[Any, str]], Heartbeats | None]:
    """Union each input with its heartbeats when ``location`` is given (module docstring).

    With a ``location``, every input gets its restore heartbeat at each start (its own
    greatest clock: Spark keeps no per-input watermark across a restart), and an input with
    an idle timeout its idle heartbeats too; without one, the inputs are returned as they
    are (no timeout may be set then).

    Args:
        sides: Each input (event time ready) with its event-time column.
        timeouts_ms: Each input's idle timeout (ms), or None.
        location: The heartbeat folder; required when any timeout is set.
        names: The inputs' names (sub-folders, metrics, progress).

    Returns:
        The inputs (each with a clock, the tick column and its heartbeats; every one
        ``observe``-d), and the :class:`Heartbeats` (None without a ``location``).

    Raises:
        ConfigError: A timeout is set without ``location``.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    # Every input gets heartbeats (an active one only its restore heartbeat after a restart).
    if location is None:
        if all(t is None for t in timeouts_ms):
            return list(sides), None
        watched = [n for n, t in zip(names, timeouts_ms, strict=True) if t is not None]
        msg = (f"`{watched[0]}_idle_timeout_ms` is set but there is no folder for its "
               f"heartbeats: pass heartbeat_location='/path/to/folder' (a folder the query "
               f"owns, e.g. next to its checkpoint; it must survive restarts)")
        raise ConfigError(msg)
    beats = Heartbeats(location, dict(zip(names, timeouts_ms, strict=True)))
    out = []
    for (df, et), name in zip(sides, names, strict=True):
        clocked = df if CLOCK_COLUMN in df.columns else df.withColumn(CLOCK_COLUMN,
                                                                       F.col(f"`{et}`"))
        if TICK_COLUMN not in clocked.columns:
            clocked = clocked.withColumn(TICK_COLUMN, F.lit(None).cast(T.BooleanType()))
        tick = F.coalesce(F.col(TICK_COLUMN), F.lit(False))
        observed = clocked.observe(
            beats.metric(name),
            F.sum(F.when(~tick, 1).otherwise(0)).alias("rows"),
            F.max(F.unix_micros(F.col(CLOCK_COLUMN))).alias("max_clock"),
        )
        heartbeats = (df.sparkSession.readStream.schema(clocked.schema)
                      .option("cleanSource", "delete")
                      .parquet(str(beats.folder(name))))
        out.append((observed.unionByName(heartbeats), et))
    beats.check()
    beats.arm()
    beats.listen(sides[0][0].sparkSession)
    return out, beats
