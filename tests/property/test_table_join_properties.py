"""Properties of the table-table join (SEMANTICS §7, §9), through the local runner.

* On random logs (late updates, NULL keys, tombstones, equal times, every ``how`` / ``emit`` /
  ``late_data``) the operator equals the oracle, batch by batch, with the same counters.
* Without late updates, the ``final`` changelog does not depend on where the arrival order is
  cut into micro-batches, nor on the order of arrival across (and within) the inputs.
* The changelog, applied to an upserting target (per key the row with the highest
  ``version``; ``delete`` removes the key), equals the batch join of both tables' final
  snapshots, under ``final`` and ``eager``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from interlace import TableJoin
from interlace.testing.local import run_table_join_locally
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles.table import oracle_table_join

BASE = dt.datetime(2026, 1, 1)
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("ts", pa.timestamp("ns"))])
COLS = SCHEMA.names
SENTINEL = 10_000


def at(ms: int) -> dt.datetime:
    return BASE + dt.timedelta(milliseconds=ms)


@st.composite
def specs(draw: Any, late_data: str | None = None, emit: str | None = None,
          late_free: bool = False) -> TableJoin:
    return TableJoin(
        left_keys=["id"], right_keys=["id"], event_time_column="ts",
        how=draw(st.sampled_from(["inner", "left", "full"])),
        emit=emit or draw(st.sampled_from(["final", "eager"])),
        lateness_ms=draw(st.sampled_from([1_000, 3_000] if late_free else [0, 1_000, 3_000])),
        late_data=late_data or draw(st.sampled_from(["drop", "dlq"])),
        dlq_horizon_ms=draw(st.sampled_from([2_000, 86_400_000])),
        key_groups=draw(st.sampled_from([1, 3])),
    )


@st.composite
def messy_logs(draw: Any, max_batches: int = 6) -> list[JoinBatch]:
    """Late updates, NULL keys, tombstones (NULL values) and equal times (whole seconds)."""
    log, serial = [], 0
    for b in range(draw(st.integers(1, max_batches))):
        sides = []
        for tag in ("L", "R"):
            rows = []
            for _ in range(draw(st.integers(0, 4))):
                key = draw(st.sampled_from([0, 1, 2, None]))
                value = None if draw(st.integers(0, 4)) == 0 else f"{tag}{serial}"
                sec = 100 + b * 3 + draw(st.integers(-8, 4))
                rows.append({"id": key, "v": value, "ts": at(sec * 1000)})
                serial += 1
            sides.append(tuple(rows))
        log.append(JoinBatch(left=sides[0], right=sides[1]))
    return log


@given(specs(), messy_logs())
def test_operator_equals_the_oracle_on_random_logs(spec: TableJoin, log: list[JoinBatch]) -> None:
    run = run_table_join_locally(spec, log, SCHEMA, SCHEMA)
    got: dict[int, list[dict[str, Any]]] = {}
    for b, row in run.rows:
        got.setdefault(b, []).append(row)
    want = oracle_table_join(spec, log, left_columns=COLS, right_columns=COLS)
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
                       updates: list[tuple[str, dict[str, Any]]] | None = None,
                       ) -> list[tuple[str, dict[str, Any]]]:
    """Updates arriving no more than ``lateness_ms`` out of event-time order (never behind wm).

    Arrival is by ``t + u`` with ``0 <= u < lateness_ms`` (ties by drawing order). Given
    ``updates`` (side, row), only their arrival order is drawn. Equal (key, side, time) updates
    never occur, so the final snapshot does not depend on the arrival order.
    """
    if updates is None:
        updates, seen = [], set()
        for i in range(draw(st.integers(0, 24))):
            side = draw(st.sampled_from(["left", "right"]))
            key = draw(st.sampled_from([0, 1, 2]))
            t = draw(st.integers(0, 40)) * 500
            if (side, key, t) in seen:
                continue
            seen.add((side, key, t))
            value = None if draw(st.integers(0, 3)) == 0 else f"{side[0]}{i}"
            updates.append((side, {"id": key, "v": value, "ts": at(100_000 + t)}))
    rows = []
    for i, (side, row) in enumerate(updates):
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


def changelog(spec: TableJoin, log: list[JoinBatch]) -> list[dict[str, Any]]:
    run = run_table_join_locally(spec, log, SCHEMA, SCHEMA)
    assert not run.spark_dropped
    return [r for _, r in run.rows if r["id"] != SENTINEL]


@given(st.data())
def test_final_changelog_is_independent_of_the_split(data: Any) -> None:
    spec = data.draw(specs(late_data="drop", emit="final", late_free=True))
    arrivals = data.draw(late_free_arrivals(spec.lateness_ms))
    n = len(arrivals)
    whole = Counter(canonical_rows(changelog(spec, split(arrivals, set()))))
    for cuts in ({*range(1, n)}, data.draw(st.sets(st.integers(1, max(n - 1, 1))))):
        assert Counter(canonical_rows(changelog(spec, split(arrivals, cuts)))) == whole, cuts


@given(st.data())
def test_final_changelog_is_independent_of_the_order_across_inputs(data: Any) -> None:
    spec = data.draw(specs(late_data="drop", emit="final", late_free=True))
    arrivals = data.draw(late_free_arrivals(spec.lateness_ms))
    other = data.draw(late_free_arrivals(spec.lateness_ms, updates=arrivals))
    cuts = data.draw(st.sets(st.integers(1, max(len(arrivals) - 1, 1))))
    assert Counter(canonical_rows(changelog(spec, split(arrivals, cuts)))) == \
        Counter(canonical_rows(changelog(spec, split(other, cuts))))


def snapshot_join(how: str, arrivals: list[tuple[str, dict[str, Any]]]) -> Counter[Any]:
    """The batch join of both tables' final snapshots (latest by time, then arrival)."""
    snap: dict[str, dict[int, tuple[Any, int, Any]]] = {"left": {}, "right": {}}
    for n, (side, row) in enumerate(arrivals):
        old = snap[side].get(row["id"])
        if old is None or (row["ts"], n) >= old[:2]:
            snap[side][row["id"]] = (row["ts"], n, row["v"])
    out = []
    for key in set(snap["left"]) | set(snap["right"]):
        left, right = (snap[s].get(key, (None, None, None))[2] for s in ("left", "right"))
        present = {"inner": left is not None and right is not None,
                   "left": left is not None, "full": left is not None or right is not None}
        if present[how]:
            out.append({"id": key, "left_v": left, "right_v": right})
    return Counter(canonical_rows(out))


def applied(rows: list[dict[str, Any]]) -> Counter[Any]:
    """An upserting target: per key the row with the highest version; deletes remove."""
    latest: dict[Any, dict[str, Any]] = {}
    for row in rows:
        if row["id"] not in latest or row["version"] > latest[row["id"]]["version"]:
            latest[row["id"]] = row
    return Counter(canonical_rows(
        {"id": r["id"], "left_v": r["left_v"], "right_v": r["right_v"]}
        for r in latest.values() if r["op"] == "upsert"))


@given(st.data())
def test_changelog_applied_to_a_target_is_the_join_of_the_final_snapshots(data: Any) -> None:
    spec = data.draw(specs(late_data="drop", late_free=True))
    arrivals = data.draw(late_free_arrivals(spec.lateness_ms))
    cuts = data.draw(st.sets(st.integers(1, max(len(arrivals) - 1, 1))))
    rows = changelog(spec, split(arrivals, cuts))
    assert applied(rows) == snapshot_join(spec.how, arrivals)
    versions: dict[Any, list[int]] = {}
    for row in rows:
        versions.setdefault(row["id"], []).append(row["version"])
    assert all(sorted(v) == list(range(len(v))) for v in versions.values())
