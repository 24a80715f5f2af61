"""Grid property tests (no Spark): operator against oracle with event times on a coarse
whole-second grid, so that boundaries are hit exactly and often.

The other property tests draw times that rarely coincide. Here every event time is a whole
second in 0..40 s after the base time and every duration, gap, bound and allowance is whole
seconds, so rows fall exactly one gap apart, exactly on a window's start or end, exactly at
the watermark or at a close time, and right rows sit exactly at ``l.t + lower`` or
``l.t + upper``. Windows: every kind x every late-data policy. Joins: every ``how`` x every
late-data policy. The specs come from the existing strategies; only the logs are new.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import ARROW, COLS, HOWS, at, join_specs
from test_window_properties import COLS as WINDOW_COLS
from test_window_properties import SCHEMA as WINDOW_SCHEMA
from test_window_properties import window_specs

from interlace.testing.local import run_join_locally, run_window_locally
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.window_oracle import WindowBatch, oracle_window

GRID_S = 40
"""Event times are whole seconds in ``0..GRID_S`` after the base time."""

POLICIES = ["drop", "reopen", "dlq"]

# Each parametrized case gets a share of the profile's examples (ci: 150, dev: 40): 12 window
# cases x 37 and 18 join cases x 30 under ci, about 35 s for the whole file.
_EXAMPLES = settings.default.max_examples
few = settings(max_examples=max(10, _EXAMPLES // 4))


def _grid_second(draw, batch: int) -> int:
    """A whole second near the batch's position in the log (mostly in order, some late)."""
    lo, hi = max(0, batch * 6 - 10), min(GRID_S, batch * 6 + 8)
    return draw(st.integers(lo, hi))


@st.composite
def grid_window_logs(draw, spec, max_batches: int = 6):
    """Window logs on the whole-second grid; few groups, so rows of a group meet often.

    A row may echo an earlier row of the log: at a distance of exactly the spec's gap,
    duration or hop, or one second less or more, before or after it.
    """
    steps = sorted({(x or 0) // 1000 for x in (spec.gap_ms, spec.duration_ms, spec.hop_ms)} - {0})
    log, times = [], []
    for b in range(draw(st.integers(1, max_batches))):
        rows = []
        for _ in range(draw(st.integers(0, 6))):
            if times and draw(st.booleans()):
                step = draw(st.sampled_from(steps)) + draw(st.sampled_from([0, 0, -1, 1]))
                sec = draw(st.sampled_from(times)) + step * draw(st.sampled_from([1, -1]))
                sec = min(max(sec, 0), GRID_S)
            else:
                sec = _grid_second(draw, b)
            times.append(sec)
            rows.append({
                "user": draw(st.sampled_from([0, 1, None])),
                "amount": draw(st.one_of(st.none(), st.integers(-5, 50))),
                "price": draw(st.one_of(st.none(), st.integers(0, 40).map(lambda x: x / 4))),
                "page": draw(st.sampled_from(["/a", "/b", None])),
                "ts": at(sec),
            })
        log.append(WindowBatch(rows=tuple(rows)))
    return log


def assert_window_matches_oracle(spec, log) -> None:
    run = run_window_locally(spec, log, WINDOW_SCHEMA)
    want = oracle_window(spec, log, columns=WINDOW_COLS)
    assert run.watermarks_ms == want.spark_watermarks_ms
    got_by: dict[int, list] = {}
    want_by: dict[int, list] = {}
    for b, r in run.rows:
        got_by.setdefault(b, []).append(r)
    for o in want.rows:
        want_by.setdefault(o.batch, []).append(o.row)
    for b in sorted(set(got_by) | set(want_by)):
        assert canonical_rows(got_by.get(b, [])) == canonical_rows(want_by.get(b, [])), f"batch {b}"
    assert run.counters.get("late_dropped", 0) == want.late_dropped
    assert run.counters.get("dead_lettered", 0) == want.dead_lettered


@pytest.mark.parametrize("late_data", POLICIES)
@pytest.mark.parametrize("kind", ["tumbling", "hopping", "session"])
@few
@given(data=st.data())
def test_window_operator_equals_oracle_on_the_grid(kind, late_data, data):
    spec = data.draw(window_specs(kind=kind, late_data=late_data), label="spec")
    log = data.draw(grid_window_logs(spec), label="log")
    assert_window_matches_oracle(spec, log)


@st.composite
def session_chains(draw):
    """Sessions on the grid: one group, rows whose distances are exactly the gap, or one
    second less or more, in one or several micro-batches."""
    gap_s = draw(st.sampled_from([1, 2, 3, 5]))
    sec, secs = draw(st.integers(0, 5)), []
    for _ in range(draw(st.integers(2, 8))):
        secs.append(sec)
        sec += gap_s + draw(st.sampled_from([-1, 0, 0, 0, 1]))
    secs = [min(s, GRID_S) for s in draw(st.permutations(secs))]
    cuts = sorted(set(draw(st.lists(st.integers(1, len(secs) - 1), max_size=3))))
    bounds = [0, *cuts, len(secs)]
    log = [WindowBatch(rows=tuple({"user": 0, "amount": 1, "price": None, "page": "/a",
                                   "ts": at(s)} for s in secs[a:z]))
           for a, z in zip(bounds, bounds[1:], strict=False)]
    log.append(WindowBatch(rows=({"user": 1, "amount": 0, "price": None, "page": "/z",
                                  "ts": at(10 * GRID_S)},)))
    return gap_s, log


@pytest.mark.parametrize("late_data", POLICIES)
@few
@given(data=st.data())
def test_session_chains_exactly_one_gap_apart_equal_oracle(late_data, data):
    gap_s, log = data.draw(session_chains(), label="chain")
    spec = data.draw(window_specs(kind="session", late_data=late_data), label="spec")
    spec = dataclasses.replace(spec, gap_ms=gap_s * 1000)
    assert_window_matches_oracle(spec, log)


@st.composite
def grid_join_logs(draw, spec, max_batches: int = 5):
    """Join logs on the whole-second grid. A right row is either free or placed at a left
    row's ``t + lower`` or ``t + upper`` (sometimes one second off), so the bounds are hit
    exactly."""
    lower_s, upper_s = spec.lower // 1000, spec.upper // 1000
    log, lefts, serial = [], [], 0
    for b in range(draw(st.integers(1, max_batches))):
        left, right = [], []
        for _ in range(draw(st.integers(0, 3))):
            sec = _grid_second(draw, b)
            key = draw(st.sampled_from([0, 1, None]))
            left.append({"id": key, "v": f"L{serial}", "ts": at(sec)})
            lefts.append((key, sec))
            serial += 1
        for _ in range(draw(st.integers(0, 3))):
            if lefts and draw(st.booleans()):
                key, lsec = draw(st.sampled_from(lefts))
                sec = lsec + draw(st.sampled_from([lower_s, upper_s]))
                sec += draw(st.sampled_from([0, 0, 0, -1, 1]))
                sec = min(max(sec, 0), GRID_S)
            else:
                key, sec = draw(st.sampled_from([0, 1, None])), _grid_second(draw, b)
            right.append({"id": key, "v": f"R{serial}", "ts": at(sec)})
            serial += 1
        log.append(JoinBatch(left=tuple(left), right=tuple(right)))
    return log


@pytest.mark.parametrize("late_data", POLICIES)
@pytest.mark.parametrize("how", HOWS)
@settings(max_examples=max(10, _EXAMPLES // 5))
@given(data=st.data())
def test_join_operator_equals_oracle_on_the_grid(how, late_data, data):
    spec = data.draw(join_specs(late_data=late_data, how=how), label="spec")
    log = data.draw(grid_join_logs(spec), label="log")
    policy = data.draw(st.sampled_from(["min", "max"]), label="policy")
    run = run_join_locally(spec, log, ARROW, ARROW, watermark_policy=policy)
    want = oracle_join(spec, log, left_columns=COLS, right_columns=COLS, watermark_policy=policy)
    assert run.watermarks_ms == want.spark_watermarks_ms
    assert run.spark_dropped == sum(want.spark_dropped.values())
    got: dict[int, list] = {}
    for b, r in run.rows:
        got.setdefault(b, []).append(r)
    exp = want.rows_by_batch()
    for b in sorted(set(got) | set(exp)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(exp.get(b, [])), f"batch {b}"
    c = run.counters
    for side in ("left", "right"):
        assert c.get(f"late_dropped_{side}", 0) == want.late_dropped.get(side, 0)
        assert c.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped.get(side, 0)
        assert c.get(f"dead_lettered_{side}", 0) == want.dead_lettered.get(side, 0)
