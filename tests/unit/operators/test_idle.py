"""Idle inputs (SEMANTICS §1): the tracker that decides heartbeats, against the oracle's rule 1b.

The tracker (``operators/common/idle.py``) and the oracle's ``idle_heartbeat_stamps`` are
written apart; here random histories of micro-batches must give the same idle inputs and the
same stamps, and the tracker writes a heartbeat exactly when it moves what the input's
watermark node has seen in this run.
"""

from __future__ import annotations

import json
import random

import pyarrow.parquet as pq
import pytest

from interlace import ConfigError, ForeignKeyJoin, Join, StreamTableJoin, TableJoin
from interlace.operators.common.idle import Heartbeats, IdleTracker, InputClock
from interlace.testing.oracles.spark_rules import idle_heartbeat_stamps

S = 1_000_000  # µs per second


def test_an_idle_input_is_stamped_with_the_active_inputs_clock() -> None:
    tracker = IdleTracker.started({"left": None, "right": 1_000}, now_ms=0)
    tracker.observe(0, {"left": 1, "right": 1}, {"left": 10 * S, "right": 10 * S})
    tracker.observe(500, {"left": 1, "right": 0}, {"left": 60 * S, "right": None})
    assert tracker.idle_since_ms(999) == {"left": None, "right": None}
    assert tracker.due(999) == {}
    assert tracker.idle_since_ms(1_000) == {"left": None, "right": 1_000}
    assert tracker.due(1_000) == {"right": 60 * S}
    tracker.stamped("right", 60 * S)
    assert tracker.due(2_000) == {}  # nothing new to move
    tracker.observe(2_000, {"left": 1, "right": 0}, {"left": 70 * S, "right": None})
    assert tracker.due(2_000) == {"right": 70 * S}


def test_a_row_makes_an_input_active_again() -> None:
    tracker = IdleTracker.started({"left": None, "right": 1_000}, now_ms=0)
    tracker.observe(0, {"left": 1, "right": 1}, {"left": 10 * S, "right": 10 * S})
    tracker.observe(5_000, {"left": 1, "right": 1}, {"left": 60 * S, "right": 20 * S})
    assert tracker.idle_since_ms(5_500) == {"left": None, "right": None}
    assert tracker.due(5_500) == {}


def test_nothing_advances_when_every_input_is_idle() -> None:
    tracker = IdleTracker.started({"left": 1_000, "right": 1_000}, now_ms=0)
    tracker.observe(0, {"left": 1, "right": 1}, {"left": 10 * S, "right": 50 * S})
    assert tracker.idle_since_ms(3_000) == {"left": 1_000, "right": 1_000}
    assert tracker.due(3_000) == {}


def test_no_stamp_while_an_active_input_has_had_no_row() -> None:
    tracker = IdleTracker.started({"left": None, "right": 1_000}, now_ms=0)
    assert tracker.due(5_000) == {}  # left active, no clock yet: Spark holds W at 0 anyway


def test_a_restart_stamps_an_idle_input_again(tmp_path) -> None:  # noqa: ANN001
    """Spark keeps no per-input watermark across a restart: the heartbeat is written again."""
    now = [0]
    beats = Heartbeats(tmp_path, {"left": None, "right": 1_000}, clock=lambda: now[0])
    beats.observe({beats.metric("left"): {"rows": 1, "max_clock": 10 * S},
                   beats.metric("right"): {"rows": 1, "max_clock": 10 * S}})
    beats.observe({beats.metric("left"): {"rows": 1, "max_clock": 60 * S},
                   beats.metric("right"): {"rows": 0, "max_clock": None}})
    now[0] = 2_000
    assert beats.check() == {"right": 60 * S}
    assert beats.check() == {}
    files = sorted((tmp_path / "right").glob("heartbeat-*.parquet"))
    assert len(files) == 1
    table = pq.read_table(files[0]).to_pylist()
    assert table[0]["__il_tick"] is True
    assert int(table[0]["__il_clock"].timestamp() * S) == 60 * S
    saved = json.loads((tmp_path / "_idle.json").read_text())
    assert saved["right"]["stamped_us"] == 60 * S
    restarted = Heartbeats(tmp_path, {"left": None, "right": 1_000}, clock=lambda: now[0])
    assert restarted.idle_since_ms() == {"left": None, "right": 1_000}
    # Both: the idle right again, and the active left its own clock (restored).
    assert restarted.check() == {"left": 60 * S, "right": 60 * S}
    assert restarted.check() == {}
    assert len(list((tmp_path / "right").glob("heartbeat-*.parquet"))) == 2
    # Names never repeat: Spark's file source would skip a path it has seen.
    assert len({p.name for p in (tmp_path / "right").glob("heartbeat-*")}) == 2


@pytest.mark.parametrize("seed", range(40))
def test_random_histories_match_the_oracle_rule(seed: int) -> None:
    rng = random.Random(seed)
    names = ["left", "right"]
    timeouts = {n: rng.choice([None, 500, 2_000]) for n in names}
    tracker = IdleTracker.started(timeouts, now_ms=0)
    last_row = dict.fromkeys(names, 0)
    max_clock: dict[str, int | None] = dict.fromkeys(names)
    run_clock: dict[str, int | None] = dict.fromkeys(names)
    now = 0
    for _ in range(30):
        now += rng.choice([0, 100, 400, 1_500])
        if rng.random() < 0.1:  # a restart: the watermark nodes have seen nothing
            tracker = IdleTracker(timeouts, {n: InputClock(**vars(tracker.clocks[n]))
                                             for n in names})
            run_clock = dict.fromkeys(names)
        rows = {n: rng.choice([0, 0, 1, 3]) for n in names}
        clocks = {n: (rng.randrange(100) * S if rows[n] else None) for n in names}
        tracker.observe(now, rows, clocks)
        for n in names:
            if rows[n]:
                last_row[n] = now
                max_clock[n] = max(c for c in (max_clock[n], clocks[n]) if c is not None)
                run_clock[n] = max(c for c in (run_clock[n], clocks[n]) if c is not None)
        expected = idle_heartbeat_stamps(now, timeouts, last_row, max_clock)
        idle = {n for n, since in tracker.idle_since_ms(now).items() if since is not None}
        assert idle == {n for n in names if timeouts[n] is not None
                        and now - last_row[n] >= timeouts[n]}
        due = tracker.due(now)
        # Each node should have seen its input's greatest clock, an idle one also the
        # oracle's stamp: written exactly where that is past what it has seen this run.
        want = {n: max([c for c in (max_clock[n], expected.get(n)) if c is not None],
                       default=None) for n in names}
        assert due == {n: w for n, w in want.items() if w is not None
                       and (run_clock[n] is None or w > run_clock[n])}
        for n, stamp in due.items():
            tracker.stamped(n, stamp)
            max_clock[n] = max(c for c in (max_clock[n], stamp) if c is not None)
            run_clock[n] = stamp if run_clock[n] is None else max(run_clock[n], stamp)


@pytest.mark.parametrize("spec_type,kwargs", [
    (Join, {"time_window_ms": 1_000}),
    (StreamTableJoin, {}),
    (TableJoin, {}),
    (ForeignKeyJoin, {"foreign_key_columns": ["fk"]}),
])
@pytest.mark.parametrize("value", [0, -5, 1.5, True, "60s"])
def test_every_two_input_spec_checks_its_idle_timeouts(spec_type, kwargs, value) -> None:  # noqa: ANN001
    base = {"left_keys": ["id"], "right_keys": ["id"], "event_time_column": "ts", **kwargs}
    assert spec_type(**base, right_idle_timeout_ms=60_000).right_idle_timeout_ms == 60_000
    with pytest.raises(ConfigError, match="`left_idle_timeout_ms` must be a positive int"):
        spec_type(**base, left_idle_timeout_ms=value)


def test_observed_metrics_are_read_in_every_form_spark_gives_them(tmp_path) -> None:  # noqa: ANN001
    """A dict, a classic Row, and Spark Connect's ``Row(values=..., schema=...)``."""
    from pyspark.sql import Row

    schema = {"type": "struct", "fields": [{"name": "rows", "type": "long"},
                                           {"name": "max_clock", "type": "long"}]}
    beats = Heartbeats(tmp_path, {"left": None, "right": 1_000}, clock=lambda: 0)
    beats.observe({beats.metric("left"): {"rows": 2, "max_clock": 10 * S},
                   beats.metric("right"): Row(rows=1, max_clock=20 * S)})
    assert beats.tracker.clocks["left"].max_clock_us == 10 * S
    assert beats.tracker.clocks["right"].max_clock_us == 20 * S
    beats.observe({beats.metric("left"): Row(values=[1, 30 * S], schema=schema),
                   beats.metric("right"): Row(values=[0, None], schema=schema)})
    assert beats.tracker.clocks["left"].max_clock_us == 30 * S
    assert beats.tracker.clocks["right"].max_clock_us == 20 * S


def _restarted(tmp_path, timeouts, now):  # noqa: ANN001, ANN202
    """A Heartbeats as a new process builds it: only ``_idle.json`` known."""
    from interlace.operators.common import idle

    idle._BY_LOCATION.clear()
    return Heartbeats(tmp_path, timeouts, clock=lambda: now)


def test_restore_heartbeats_need_no_timeout(tmp_path) -> None:  # noqa: ANN001
    """With a heartbeat folder and no timeout, each input still gets its own greatest clock
    at a restart (Spark restores no per-input watermark), and nothing else."""
    timeouts = {"left": None, "right": None}
    beats = Heartbeats(tmp_path, timeouts, clock=lambda: 0)
    assert beats.check() == {}  # nothing known yet
    beats.observe({beats.metric("left"): {"rows": 2, "max_clock": 10 * S},
                   beats.metric("right"): {"rows": 1, "max_clock": 40 * S}})
    assert beats.check() == {}  # this run's watermark nodes have seen both
    restarted = _restarted(tmp_path, timeouts, 5_000_000)
    assert restarted.check() == {"left": 10 * S, "right": 40 * S}
    assert restarted.check() == {}
    assert restarted.idle_since_ms() == {"left": None, "right": None}


def test_a_held_restore_writes_no_restore_heartbeat_but_still_an_idle_stamp(tmp_path) -> None:  # noqa: ANN001
    """``restore_held`` (an availableNow run with nothing new to read): no heartbeat that only
    restores an input's own clock; an idle input's stamp past it is still written."""
    from interlace.operators.common.idle import restore_held

    timeouts = {"left": None, "right": 1_000}
    beats = Heartbeats(tmp_path, timeouts, clock=lambda: 0)
    beats.observe({beats.metric("left"): {"rows": 1, "max_clock": 60 * S},
                   beats.metric("right"): {"rows": 1, "max_clock": 10 * S}})
    assert beats.check() == {}  # right not idle yet
    with restore_held(tmp_path):
        held = _restarted(tmp_path, timeouts, 2_000)  # right idle since 1_000
    assert held.check() == {"right": 60 * S}
    assert not list((tmp_path / "left").glob("heartbeat-*"))
    unheld = _restarted(tmp_path, timeouts, 2_000)  # the hold ends with its block
    assert unheld.check() == {"left": 60 * S, "right": 60 * S}


def _unread(tmp_path, read: list[str], files: list[str], glob: bool = False) -> bool:  # noqa: ANN001
    from pathlib import Path

    from interlace.idle_run import unread_input
    from interlace.pipeline import Pipeline

    toml = (Path(__file__).resolve().parents[3] / "examples" / "orders_payments.toml").read_text()
    p = Pipeline.from_toml(toml.replace('"data/orders"', '"data/orders/*.parquet"') if glob
                           else toml)
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x")
    if read:
        log = p.checkpoint_folder(tmp_path) / "sources" / "0" / "0"
        log.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps({"path": (tmp_path / f).resolve().as_uri(), "timestamp": 0,
                             "batchId": 0}) for f in read]
        log.write_text("\n".join(["v1", *lines]) + "\n")
    return unread_input(p, tmp_path)


def test_unread_input_is_a_file_no_source_log_lists(tmp_path) -> None:  # noqa: ANN001
    both = ["data/orders/0.parquet", "data/payments/0.parquet"]
    assert not _unread(tmp_path / "a", both, both)
    # Spark's hidden files are no input; a new file in either folder is.
    assert not _unread(tmp_path / "b", both, [*both, "data/orders/_SUCCESS",
                                               "data/payments/.0.parquet.crc"])
    assert _unread(tmp_path / "c", both, [*both, "data/payments/1.parquet"])
    assert _unread(tmp_path / "d", both, [*both, "data/orders/day=2/1.parquet"])
    # An idle heartbeat the last run wrote for the next one is new input too.
    beat = "out/checkpoints/orders-payments/heartbeats/right/heartbeat-1.parquet"
    assert _unread(tmp_path / "h", both, [*both, beat])
    assert not _unread(tmp_path / "i", [*both, beat], [*both, beat])
    # Unsure: no log yet, a folder missing, a path that is no folder (a glob).
    assert _unread(tmp_path / "e", [], both)
    assert _unread(tmp_path / "f", both[:1], both[:1])
    assert _unread(tmp_path / "g", both, both, glob=True)
