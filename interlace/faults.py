"""Crash points for the crash matrix (``interlace.testing.crash``, docs/reliability.md).

A test sets ``INTERLACE_CRASH_AT=<point>:<n>`` in the environment of ``interlace run``; the
``n``-th time (1-based, counted in this process) the run reaches ``<point>``, the process and
its Spark JVM die by ``SIGKILL``: no ``finally``, no shutdown hook, no flush, as when a machine
loses power. Without the variable :func:`crash_point` does nothing (one dict lookup).

Points (where the pipeline runner and the targets call :func:`crash_point`):

* ``batch``: a micro-batch's output has been computed and its state written to the state
  store, nothing of it has reached a target yet (``foreachBatch`` entered).
* ``dead-letters-committed``: the batch's dead letters are committed to their target, its
  rows are not yet written.
* ``target-uncommitted``: a DuckDB target's transaction holds the batch's rows and its commit
  record, not yet committed.
* ``target-committed``: the DuckDB transaction is committed; Spark has not yet recorded the
  batch in its commit log (so a restart replays it).
* ``channel-written``: a chain stage's micro-batch is in its channels (:mod:`interlace.chain`);
  Spark has not yet recorded the batch in its commit log (so a restart replays it).
* ``stage-started``: a chain stage's query is about to be built and started (under
  ``availableNow``, every stage before it has finished: its output is committed, not yet
  read).
"""

from __future__ import annotations

import os
import signal

__all__ = ["CHAIN_POINTS", "CRASH_ENV", "CRASH_POINTS", "crash_point"]

CRASH_ENV = "INTERLACE_CRASH_AT"
CRASH_POINTS = ("batch", "dead-letters-committed", "target-uncommitted", "target-committed",
                "channel-written", "stage-started")
#: The crash points only a chain (``[[stages]]``) reaches.
CHAIN_POINTS = ("channel-written", "stage-started")
_seen: dict[str, int] = {}


def crash_point(point: str) -> None:
    """SIGKILL this process and its Spark JVM if ``INTERLACE_CRASH_AT`` names this visit."""
    wanted = os.environ.get(CRASH_ENV)
    if not wanted:
        return
    name, _, nth = wanted.rpartition(":")
    if name != point:
        return
    _seen[point] = _seen.get(point, 0) + 1
    if _seen[point] != int(nth):
        return
    _kill_everything()


def _kill_everything() -> None:  # pragma: no cover - the process does not survive it
    if os.getpgrp() == os.getpid():  # a session of its own (the crash harness starts one)
        os.killpg(os.getpgrp(), signal.SIGKILL)
    try:  # otherwise the JVM PySpark launched, then this process
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None) if gateway is not None else None
        if proc is not None:
            os.kill(proc.pid, signal.SIGKILL)
    finally:
        os.kill(os.getpid(), signal.SIGKILL)
