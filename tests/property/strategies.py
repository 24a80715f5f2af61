"""Hypothesis strategies for join logs and specs (shared by the property tests)."""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
from collections.abc import Iterator

import pyarrow as pa
from hypothesis import strategies as st

from interlace import Join
from interlace.testing.log import JoinBatch

BASE = dt.datetime(2026, 1, 1)
COLS = ["id", "v", "ts"]
ARROW = pa.schema([("id", pa.int64()), ("v", pa.string()), ("ts", pa.timestamp("ns"))])
HOWS = ["inner", "left", "right", "full", "left_semi", "left_anti"]
SENTINEL = 10_000


@contextlib.contextmanager
def module_constants(module: str, forced: bool, **values: int) -> Iterator[None]:
    """Set ``module``'s constants to ``values`` inside the block if ``forced`` (else leave
    them), then restore them: the properties run a size threshold's both paths (issue 34)."""
    mod = importlib.import_module(module)
    saved = {name: getattr(mod, name) for name in values}
    if forced:
        for name, value in values.items():
            setattr(mod, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(mod, name, value)


def at(sec: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=sec)


@st.composite
def join_specs(draw, late_data=None, how=None):
    how = how or draw(st.sampled_from(HOWS))
    late_data = late_data or draw(st.sampled_from(["drop", "reopen", "dlq"]))
    lower = draw(st.integers(-6, 3)) * 1000
    upper = lower + draw(st.integers(0, 8)) * 1000
    kw = dict(left_keys=["id"], right_keys=["id"], how=how, event_time_column="ts",
              lateness_ms=draw(st.sampled_from([0, 1000, 3000])), late_data=late_data, key_groups=3)
    if draw(st.booleans()) and lower == -upper:
        kw["time_window_ms"] = upper
    else:
        kw.update(lower_ms=lower, upper_ms=upper)
    if late_data == "reopen":
        kw["allowed_lateness_ms"] = draw(st.sampled_from([1000, 4000]))
    if late_data == "dlq":
        kw["dlq_horizon_ms"] = draw(st.sampled_from([5000, 86_400_000]))
    return Join(**kw)


@st.composite
def messy_logs(draw, max_batches=6):
    """Logs with late rows, null keys and duplicate timestamps (whole seconds)."""
    n = draw(st.integers(1, max_batches))
    log, serial = [], 0
    for b in range(n):
        sides = []
        for tag in ("L", "R"):
            rows = []
            for _ in range(draw(st.integers(0, 4))):
                key = draw(st.sampled_from([0, 1, 2, None]))
                sec = b * 5 + draw(st.integers(-12, 6))
                rows.append({"id": key, "v": f"{tag}{serial}", "ts": at(100 + sec)})
                serial += 1
            sides.append(tuple(rows))
        log.append(JoinBatch(left=sides[0], right=sides[1]))
    return log


@st.composite
def in_order_rows(draw, max_rows=30):
    """Rows of both sides with increasing-ish times, to be split into micro-batches in order."""
    n = draw(st.integers(0, max_rows))
    rows = []
    for i in range(n):
        side = draw(st.sampled_from(["L", "R"]))
        rows.append((side, {"id": draw(st.integers(0, 3)), "v": f"{side}{i}",
                            "ts": at(100 + draw(st.integers(0, 60)) / 2)}))
    rows.sort(key=lambda r: r[1]["ts"])
    return rows


def split_in_order(draw_cuts, rows):
    """Split time-ordered rows into batches at the given cut points; then a sentinel batch."""
    cuts = sorted(set(c for c in draw_cuts if 0 < c < len(rows)))
    bounds = [0, *cuts, len(rows)]
    log = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        chunk = rows[a:b]
        log.append(JoinBatch(left=tuple(r for s, r in chunk if s == "L"),
                             right=tuple(r for s, r in chunk if s == "R")))
    log.append(JoinBatch(left=({"id": SENTINEL, "v": "SL", "ts": at(5000)},),
                         right=({"id": SENTINEL, "v": "SR", "ts": at(5000)},)))
    return log
