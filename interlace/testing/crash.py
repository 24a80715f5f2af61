"""The crash harness: run a pipeline with ``interlace run``, SIGKILL it, restart, until done.

:func:`run_with_kills` runs ``interlace run <pipeline>`` in a subprocess (a session of its own:
the Python driver and its Spark JVM), kills it once per :class:`Kill`, restarts it from the
checkpoint after each kill, then lets a last run finish the sources (another ``interlace run``,
or a function of the caller's). The caller compares the
targets with an uninterrupted run and with the oracle (``tests/cli/test_crash_matrix.py``):
nothing may be lost or written twice.

A kill is either

* at a **crash point** (:data:`interlace.faults.CRASH_POINTS`): the run's ``nth`` visit of
  that point, through ``INTERLACE_CRASH_AT`` (after the batch's state is written, after its
  dead letters are committed, inside the target's transaction, after its commit and before
  Spark's commit log), or
* **timed**: ``seconds`` after the run printed its first progress line, wherever it is (inside
  a micro-batch, in the state store commit, between two batches, ...).

:func:`seeded_kills` draws both kinds from a seed, so a failing matrix can be rerun exactly.
:func:`fresh_trials` runs a case's kills over as many fresh trials (a new checkpoint and
target each) as it takes for every kill to find a run to interrupt, and
:func:`append_report` appends its record to ``INTERLACE_CRASH_REPORT``'s file.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlace.faults import CRASH_ENV, CRASH_POINTS

__all__ = ["CrashReport", "Kill", "Run", "Trials", "append_report", "earlier", "fresh_trials",
           "run_with_kills", "seeded_kills"]


@dataclass(frozen=True)
class Kill:
    """One kill: at a crash point's ``nth`` visit, or ``seconds`` after the first progress."""

    point: str | None = None
    nth: int = 1
    seconds: float | None = None

    def __post_init__(self) -> None:
        if (self.point is None) == (self.seconds is None):
            msg = "a Kill needs exactly one of point= (with nth=) or seconds="
            raise ValueError(msg)
        if self.point is not None and self.point not in CRASH_POINTS:
            msg = f"Kill(point={self.point!r}): choose one of {', '.join(CRASH_POINTS)}"
            raise ValueError(msg)

    def __str__(self) -> str:
        if self.point is not None:
            return f"{self.point}#{self.nth}"
        return f"+{self.seconds:.2f}s"


@dataclass
class Run:
    """One ``interlace run``: the kill it was given, how it ended, the batches it reported."""

    kill: Kill | None
    returncode: int
    seconds: float
    batches: list[int] = field(default_factory=list)
    stderr_tail: str = ""

    @property
    def killed(self) -> bool:
        """Whether the run died by ``SIGKILL`` (the kill fired before the sources ran out)."""
        return self.returncode == -signal.SIGKILL


@dataclass
class CrashReport:
    """Every run of :func:`run_with_kills`, the finishing run last."""

    runs: list[Run]
    #: Kills never tried: with ``stop_when_finished``, those after a run that finished.
    unused: list[Kill] = field(default_factory=list)

    @property
    def kills(self) -> int:
        """How many runs died by ``SIGKILL``."""
        return sum(r.killed for r in self.runs)

    def summary(self) -> str:
        """One line per run: the kill, how it ended, the batches it reported."""
        lines = []
        for i, r in enumerate(self.runs):
            end = "killed" if r.killed else f"exit {r.returncode}"
            lines.append(f"run {i}: kill {r.kill or '-'}: {end} after {r.seconds:.1f} s, "
                         f"batches {r.batches}")
        return "\n".join(lines)


def seeded_kills(seed: int, n: int, *, points: tuple[str, ...] = CRASH_POINTS,
                 max_nth: int = 3, max_seconds: float = 6.0) -> list[Kill]:
    """``n`` kills drawn from ``seed``: alternately at a crash point and timed.

    Crash points are drawn from ``points`` with ``nth`` in ``1..max_nth``; timed kills at
    ``0..max_seconds`` seconds after the run's first progress line.
    """
    rng = random.Random(seed)
    kills = []
    for i in range(n):
        if i % 2 == 0 and points:
            kills.append(Kill(point=rng.choice(points), nth=rng.randint(1, max_nth)))
        else:
            kills.append(Kill(seconds=round(rng.uniform(0.0, max_seconds), 2)))
    return kills


def _batch_of(line: str) -> int | None:
    """The batch id of a progress line (``... batch 3: ...``), if it is one."""
    head, sep, _ = line.partition(":")
    words = head.split()
    if sep and len(words) >= 2 and words[-2] == "batch" and words[-1].isdigit():
        return int(words[-1])
    return None


def _run_once(pipeline: str, cwd: Path, kill: Kill | None, timeout: float) -> Run:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop(CRASH_ENV, None)
    if kill is not None and kill.point is not None:
        env[CRASH_ENV] = f"{kill.point}:{kill.nth}"
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlace.cli", "run", pipeline], cwd=cwd, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    assert proc.stderr is not None
    lines: list[str] = []
    first_progress = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if _batch_of(line) is not None:
                first_progress.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if kill is not None and kill.seconds is not None:
            while proc.poll() is None and not first_progress.wait(0.05):
                if time.monotonic() - start > timeout:
                    break
            deadline = time.monotonic() + kill.seconds
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=max(1.0, timeout - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        msg = f"interlace run {pipeline} did not finish within {timeout:.0f} s"
        raise AssertionError(msg + "\n" + "".join(lines[-30:])) from None
    finally:
        try:  # whatever the kill spared of the session (Spark's Python workers)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    reader.join(timeout=10)
    batches = [b for b in map(_batch_of, lines) if b is not None]
    return Run(kill, proc.returncode, time.monotonic() - start, batches,
               "".join(lines[-30:]))


def run_with_kills(pipeline: str | Path, cwd: str | Path, kills: list[Kill], *,
                   timeout: float = 600.0,
                   finish: Callable[[], str] | None = None,
                   stop_when_finished: bool = False) -> CrashReport:
    """Run ``interlace run pipeline`` in ``cwd`` once per kill, then once to completion.

    Args:
        pipeline: The pipeline file (relative to ``cwd`` or absolute).
        cwd: The folder the runs start in (relative paths in the pipeline resolve against it).
        kills: One kill per interrupted run, in order. A kill whose moment never comes (the
            sources ran out first) leaves its run finished, not killed; the report says so.
        timeout: Seconds any one run may take.
        finish: The finishing run. By default one more ``interlace run`` subprocess; given, a
            function that continues the pipeline from its checkpoint and returns its progress
            output (the lines ``interlace run`` prints, which name the batches it ran), e.g.
            :func:`interlace.runner.run_pipeline` on a session the caller already has (a
            test's: no JVM to start). The kills still hit whole ``interlace run`` processes.
        stop_when_finished: Stop trying kills after a run that finished (its kill never
            came: the sources ran out, so later kills would find nothing to interrupt); the
            kills not tried are in :attr:`CrashReport.unused`.

    Returns:
        The report of every run.

    Raises:
        AssertionError: A run failed (exit status other than 0 or a ``SIGKILL``), or the
            finishing run did not finish.
    """
    runs: list[Run] = []
    unused: list[Kill] = []
    for i, kill in enumerate(kills):
        if stop_when_finished and runs and not runs[-1].killed:
            unused = kills[i:]
            break
        runs.append(_run_checked(str(pipeline), Path(cwd), kill, timeout, len(runs)))
    if finish is None:
        runs.append(_run_checked(str(pipeline), Path(cwd), None, timeout, len(runs)))
    else:
        start = time.monotonic()
        lines = finish().splitlines()
        batches = [b for b in map(_batch_of, lines) if b is not None]
        runs.append(Run(None, 0, time.monotonic() - start, batches))
    if runs[-1].returncode != 0:
        raise AssertionError("the finishing run did not finish:\n" + runs[-1].stderr_tail)
    return CrashReport(runs, unused=unused)


def _run_checked(pipeline: str, cwd: Path, kill: Kill | None, timeout: float, n: int) -> Run:
    """:func:`_run_once`, raising if the run failed (neither exit 0 nor a ``SIGKILL``)."""
    run = _run_once(pipeline, cwd, kill, timeout)
    if run.returncode != 0 and not run.killed:
        msg = f"run {n} (kill {kill}) exited {run.returncode}:\n"
        raise AssertionError(msg + run.stderr_tail)
    return run


def earlier(kill: Kill) -> Kill:
    """The kill that replaces ``kill`` when a fresh run finished before it.

    Half its seconds, or the crash point's previous visit (the first visit of a point the
    run never reached has no earlier one).
    """
    if kill.seconds is not None:
        return Kill(seconds=round(kill.seconds / 2, 2))
    assert kill.nth > 1, f"{kill}: a fresh run never reached this crash point"
    return Kill(point=kill.point, nth=kill.nth - 1)


@dataclass
class Trials:
    """The fresh trials of one case (:func:`fresh_trials`): each trial's report, in order."""

    kills: list[Kill]
    reports: list[CrashReport] = field(default_factory=list)
    #: Kills that did not fire even as a fresh trial's first kill (an earlier one replaced each).
    never: list[Kill] = field(default_factory=list)
    #: Wall time of all the trials (their checks included), seconds.
    seconds: float = 0.0

    @property
    def fired(self) -> int:
        """How many runs of all the trials died by ``SIGKILL``."""
        return sum(r.kills for r in self.reports)

    def summary(self) -> str:
        """Each trial's :meth:`CrashReport.summary`."""
        return "\n".join(f"trial {i}:\n{r.summary()}" for i, r in enumerate(self.reports))

    def record(self, **case: Any) -> dict[str, Any]:
        """The case's record for the report file (one JSON object).

        ``case`` (its pipeline, store, seed, ...), the kills fired, those that never fired,
        the wall time and every trial's runs (kill, whether it fired, seconds, batches).
        """
        return {**case, "fired": self.fired, "never": [str(k) for k in self.never],
                "seconds": round(self.seconds, 1),
                "trials": [[{"kill": str(r.kill) if r.kill else None, "killed": r.killed,
                             "seconds": round(r.seconds, 1), "batches": r.batches}
                            for r in rep.runs] for rep in self.reports]}


def fresh_trials(kills: list[Kill],
                 trial: Callable[[int, list[Kill]], CrashReport]) -> Trials:
    """Run ``kills`` over fresh trials until each has found a run to interrupt.

    A short pipeline's input is done after a few restarts, and a later kill would find
    nothing to interrupt. ``trial(i, kills)`` runs trial ``i`` in a fresh folder, checkpoint
    and target: :func:`run_with_kills` with ``stop_when_finished=True``, its output then
    checked against the uninterrupted run's, and returns the report. The kills it left (the
    one that did not fire first, then the unused ones) go to the next trial. A kill that does
    not fire even as a fresh trial's first kill never can (the run finished first): it is
    recorded in :attr:`Trials.never` and :func:`earlier` takes its place, so every kill
    fires: ``fired == len(kills)`` unless a trial's runs were killed otherwise.
    """
    start = time.monotonic()
    out = Trials(list(kills))
    remaining = list(kills)
    while remaining:
        report = trial(len(out.reports), remaining)
        out.reports.append(report)
        tried = [r for r in report.runs if r.kill is not None]
        retry: list[Kill] = []
        last = tried[-1]
        if not last.killed and last.kill is not None:
            if len(tried) == 1:
                out.never.append(last.kill)
                retry = [earlier(last.kill)]
            else:
                retry = [last.kill]
        remaining = retry + report.unused
    out.seconds = time.monotonic() - start
    return out


def append_report(path: str | Path | None, record: dict[str, Any]) -> None:
    """Append ``record`` (:meth:`Trials.record`) as one JSON line to ``path``.

    ``path`` is the ``INTERLACE_CRASH_REPORT`` file; nothing is written when it is empty or
    None.
    """
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(record) + "\n")
