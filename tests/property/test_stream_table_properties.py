"""Properties of the stream-table join (SEMANTICS §7–§8), through the local runner.

* On random logs (late rows, NULL keys, tombstones, equal times, every ``how`` / ``emit`` /
  ``late_data``, retention below, at and above ``lateness_ms``) the operator equals the oracle,
  batch by batch, with the same counters.
* Without late rows, the ``final`` output does not depend on where the arrival order is cut
  into micro-batches nor on the order of arrival across the inputs, and equals a batch as-of
  join of the same data.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import module_constants

from interlace import StreamTableJoin
from interlace.testing.local import run_stream_table_locally
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles.stream_table import oracle_stream_table_join

BASE = dt.datetime(2026, 1, 1)
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("ts", pa.timestamp("ns"))])
COLS = SCHEMA.names
SENTINEL = 10_000


def at(ms: int) -> dt.datetime:
    return BASE + dt.timedelta(milliseconds=ms)


@st.composite
def specs(draw: Any, late_data: str | None = None, emit: str | None = None,
          late_free: bool = False) -> StreamTableJoin:
    lateness = draw(st.sampled_from([1_000, 3_000] if late_free else [0, 1_000, 3_000]))
    return StreamTableJoin(
        left_keys=["id"], right_keys=["id"], event_time_column="ts",
        how=draw(st.sampled_from(["inner", "left"])),
        emit=emit or draw(st.sampled_from(["final", "eager"])),
        lateness_ms=lateness,
        history_retention_ms=draw(st.sampled_from([None, 0, 500, lateness, lateness + 2_000])),
        late_data=late_data or draw(st.sampled_from(["drop", "dlq"])),
        dlq_horizon_ms=draw(st.sampled_from([2_000, 86_400_000])),
        key_groups=draw(st.sampled_from([1, 3])),
    )


@st.composite
def messy_logs(draw: Any, max_batches: int = 6) -> list[JoinBatch]:
    """Late rows, NULL keys, tombstones (NULL values) and equal times (whole seconds)."""
    log, serial = [], 0
    for b in range(draw(st.integers(1, max_batches))):
        sides = []
        for tag in ("L", "R"):
            rows = []
            for _ in range(draw(st.integers(0, 4))):
                key = draw(st.sampled_from([0, 1, 2, None]))
                value = None if tag == "R" and draw(st.integers(0, 4)) == 0 else f"{tag}{serial}"
                sec = 100 + b * 3 + draw(st.integers(-8, 4))
                rows.append({"id": key, "v": value, "ts": at(sec * 1000)})
                serial += 1
            sides.append(tuple(rows))
        log.append(JoinBatch(left=sides[0], right=sides[1]))
    return log


def run_by_batch(spec: StreamTableJoin, log: list[JoinBatch]) -> Any:
    run = run_stream_table_locally(spec, log, SCHEMA, SCHEMA)
    by: dict[int, list[dict[str, Any]]] = {}
    for b, row in run.rows:
        by.setdefault(b, []).append(row)
    return run, by


@given(specs(), messy_logs())
def test_operator_equals_the_oracle_on_random_logs(spec: StreamTableJoin,
                                                   log: list[JoinBatch]) -> None:
    run, got = run_by_batch(spec, log)
    want = oracle_stream_table_join(spec, log, left_columns=COLS, right_columns=COLS)
    assert run.watermarks_ms == want.spark_watermarks_ms
    want_by = want.rows_by_batch()
    for b in sorted(set(got) | set(want_by)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(want_by.get(b, [])), b
    for side in ("left", "right"):
        assert run.counters.get(f"late_dropped_{side}", 0) == want.late_dropped[side]
        assert run.counters.get(f"dead_lettered_{side}", 0) == want.dead_lettered[side]
        assert run.counters.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped[side]


@st.composite
def late_free_arrivals(draw: Any, lateness_ms: int,
                       rows_in: list[tuple[str, dict[str, Any]]] | None = None,
                       ) -> list[tuple[str, dict[str, Any]]]:
    """Rows in an arrival order no more than ``lateness_ms`` out of event-time order.

    Arrival is by ``t + u`` with ``0 <= u < lateness_ms`` (ties by drawing order), so every
    earlier arrival has ``t' <= t + u < t + lateness_ms``: no row is ever behind ``wm``. Given
    ``rows_in`` (side, row), only their arrival order is drawn; two table updates of one key
    at one time never occur then, so the join does not depend on the arrival order.
    """
    if rows_in is None:
        rows_in, seen = [], set()
        for i in range(draw(st.integers(0, 24))):
            side = draw(st.sampled_from(["left", "right"]))
            key = draw(st.sampled_from([0, 1, 2, None]))
            t = draw(st.integers(0, 40)) * 500
            if side == "right":
                if (key, t) in seen:
                    continue
                seen.add((key, t))
            value = None if side == "right" and draw(st.integers(0, 4)) == 0 else f"{side[0]}{i}"
            rows_in.append((side, {"id": key, "v": value, "ts": at(100_000 + t)}))
    rows = []
    for i, (side, row) in enumerate(rows_in):
        t = int((row["ts"] - at(100_000)).total_seconds() * 1000)
        u = draw(st.integers(0, max(lateness_ms - 1, 0)))
        rows.append((t + u, i, side, row))
    rows.sort(key=lambda x: (x[0], x[1]))
    return [(side, row) for _, _, side, row in rows]


def split(arrivals: list[tuple[str, dict[str, Any]]], cuts: set[int]) -> list[JoinBatch]:
    log, left, right = [], [], []
    for i, (side, row) in enumerate(arrivals):
        if i in cuts:
            log.append(JoinBatch(left=tuple(left), right=tuple(right)))
            left, right = [], []
        (left if side == "left" else right).append(row)
    log.append(JoinBatch(left=tuple(left), right=tuple(right)))
    sentinel = {"id": SENTINEL, "v": "S", "ts": at(10_000_000)}
    return [*log, JoinBatch(left=(sentinel,), right=(sentinel,))]


def as_of_join(how: str, arrivals: list[tuple[str, dict[str, Any]]]) -> Counter[Any]:
    """The batch as-of join: per stream row, its key's update with the greatest time <= t."""
    table = [(n, row) for n, (side, row) in enumerate(arrivals) if side == "right"]
    out = []
    for side, s in arrivals:
        if side != "left":
            continue
        found = None
        if s["id"] is not None:
            cands = [(u["ts"], n, u) for n, u in table if u["id"] == s["id"] and u["ts"] <= s["ts"]]
            found = max(cands, key=lambda c: (c[0], c[1]))[2] if cands else None
        present = found is not None and found["v"] is not None
        if present or how == "left":
            out.append({"left_id": s["id"], "left_v": s["v"], "left_ts": s["ts"],
                        "right_v": found["v"] if present else None,
                        "right_valid_from": found["ts"] if present else None})
    return Counter(canonical_rows(out))


@given(st.data())
def test_final_output_is_independent_of_the_split_and_is_the_as_of_join(data: Any) -> None:
    spec = data.draw(specs(late_data="drop", emit="final", late_free=True))
    arrivals = data.draw(late_free_arrivals(spec.lateness_ms))
    want = as_of_join(spec.how, arrivals)
    n = len(arrivals)
    for cuts in ({*range(1, n)}, set(), data.draw(st.sets(st.integers(1, max(n - 1, 1))))):
        run, _ = run_by_batch(spec, split(arrivals, cuts))
        got = Counter(canonical_rows([r for _, r in run.rows if r["left_id"] != SENTINEL]))
        assert got == want, cuts
        assert not run.counters.get("late_dropped_left") and not run.spark_dropped


@given(st.data())
def test_final_output_is_independent_of_the_order_across_inputs(data: Any) -> None:
    spec = data.draw(specs(late_data="drop", emit="final", late_free=True))
    arrivals = data.draw(late_free_arrivals(spec.lateness_ms))
    other = data.draw(late_free_arrivals(spec.lateness_ms, rows_in=arrivals))
    cuts = data.draw(st.sets(st.integers(1, max(len(arrivals) - 1, 1))))
    runs = [run_by_batch(spec, split(a, cuts))[0] for a in (arrivals, other)]
    outs = [Counter(canonical_rows([r for _, r in run.rows if r["left_id"] != SENTINEL]))
            for run in runs]
    assert outs[0] == outs[1] == as_of_join(spec.how, arrivals)


@pytest.fixture(autouse=True, scope="module", params=["whole history", "quiet rows split off"])
def history_split(request: Any) -> Any:
    """Run every property twice: each call sorting the whole history, and each call leaving
    the quiet rows alone (``_split_quiet`` forced on at any size; issue 34)."""
    with module_constants("interlace.operators.stream_table.step",
                          request.param == "quiet rows split off",
                          _SPLIT_MIN_ROWS=0, _SPLIT_RATIO=0):
        yield request.param
