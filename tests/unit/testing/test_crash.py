"""``run_with_kills``'s bookkeeping (no Spark): which kills are tried, the finishing run."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from interlace.testing import crash
from interlace.testing.crash import Kill, Run, run_with_kills


@pytest.fixture
def runs(monkeypatch):
    """Fake ``interlace run``: a kill fires unless its ``nth`` is 9 (the input ran out)."""
    seen: list[Kill | None] = []

    def run_once(pipeline: str, cwd: Path, kill: Kill | None, timeout: float) -> Run:
        seen.append(kill)
        fired = kill is not None and kill.nth != 9
        return Run(kill, -signal.SIGKILL if fired else 0, 1.0, [len(seen)])

    monkeypatch.setattr(crash, "_run_once", run_once)
    return seen


A, B, LATE, C = (Kill(point="batch", nth=1), Kill(point="batch", nth=2),
                 Kill(point="batch", nth=9), Kill(seconds=1.0))


def test_every_kill_is_tried_then_a_finishing_run(runs):
    report = run_with_kills("p.toml", ".", [A, LATE, C])
    assert runs == [A, LATE, C, None]
    assert report.kills == 2 and report.unused == [] and report.runs[-1].kill is None


def test_stop_when_finished_leaves_the_kills_after_a_finished_run_unused(runs):
    report = run_with_kills("p.toml", ".", [A, LATE, B, C], stop_when_finished=True)
    assert runs == [A, LATE, None]
    assert report.kills == 1 and report.unused == [B, C]


def test_finish_replaces_the_last_subprocess_and_reports_its_batches(runs):
    report = run_with_kills("p.toml", ".", [A], finish=lambda: "[p] batch 3: in 2\nother\n"
                            "[p] batch 4: in 0\n")
    assert runs == [A]
    assert report.runs[-1].batches == [3, 4] and report.runs[-1].returncode == 0


def test_a_failed_run_raises(monkeypatch):
    monkeypatch.setattr(crash, "_run_once",
                        lambda pipeline, cwd, kill, timeout: Run(kill, 1, 1.0, [], "boom"))
    with pytest.raises(AssertionError, match=r"run 0 \(kill batch#1\) exited 1:\nboom"):
        run_with_kills("p.toml", ".", [A])
