"""``run_with_kills``'s and ``fresh_trials``' bookkeeping (no Spark): which kills are tried,
the finishing run, the kills a fresh trial takes over, the report's record."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from interlace.testing import crash
from interlace.testing.crash import (
    Kill,
    Run,
    append_report,
    earlier,
    fresh_trials,
    run_with_kills,
)


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


def test_a_kill_that_cannot_fire_is_replaced_by_an_earlier_one():
    assert earlier(Kill(seconds=4.27)) == Kill(seconds=2.13)  # round(2.135, 2): float below
    assert earlier(Kill(point="batch", nth=3)) == Kill(point="batch", nth=2)
    with pytest.raises(AssertionError, match="never reached"):
        earlier(Kill(point="batch", nth=1))


def test_fresh_trials_take_over_the_kills_a_finished_run_left(runs):
    """A fresh trial per finished run; the kill that did not fire first in a trial is tried
    again in the next; one that did not fire even first is replaced by an earlier one."""
    folders = []

    def trial(i, kills):
        folders.append(i)
        return run_with_kills("p.toml", ".", kills, stop_when_finished=True)

    trials = fresh_trials([A, LATE, B, Kill(point="batch", nth=10), C], trial)
    # trial 0: A fires, LATE does not (B, nth=10, C unused); trial 1: LATE alone first: never
    # (replaced by batch#8); trial 2: batch#8, B, nth=10, C all fire.
    assert folders == [0, 1, 2]
    assert [k for k in runs if k is not None] == [A, LATE, LATE, Kill(point="batch", nth=8), B,
                                                  Kill(point="batch", nth=10), C]
    assert trials.never == [LATE] and trials.fired == 5 == len(trials.kills)
    assert "trial 2:" in trials.summary()


def test_the_record_appends_one_json_line(tmp_path, runs):
    trials = fresh_trials([A], lambda i, kills: run_with_kills("p.toml", ".", kills,
                                                               stop_when_finished=True))
    path = tmp_path / "report.jsonl"
    append_report(path, trials.record(pipeline="join", store="hdfs", seed=7))
    append_report("", trials.record(pipeline="ignored"))
    (line,) = path.read_text().splitlines()
    record = json.loads(line)
    assert {k: record[k] for k in ("pipeline", "store", "seed", "fired", "never")} == {
        "pipeline": "join", "store": "hdfs", "seed": 7, "fired": 1, "never": []}
    assert record["trials"] == [[{"kill": "batch#1", "killed": True, "seconds": 1.0,
                                  "batches": [1]},
                                 {"kill": None, "killed": False, "seconds": 1.0,
                                  "batches": [2]}]]
