"""The numbers in docs/windows.md are recomputed here, so the page cannot rot.

* Each worked example's table sits between ``<!-- windows-NAME:begin -->`` and
  ``<!-- windows-NAME:end -->`` in docs/windows.md. It is regenerated from the oracle
  (``oracle_window``) and compared with the page, character for character.
* The operator's own ``applyInPandasWithState`` function, driven by ``run_window_locally``,
  must give the same rows in the same micro-batches, the same ``W`` and the same counters.
* The smaller claims (assignment, NULL handling, the dead-letter JSON, the upsert recipe,
  caps, per-slot state sizes) are re-run and asserted too.

Print the tables with ``python tests/unit/test_windows_doc_examples.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from interlace.operators.window import TIME_US_COLUMN, WindowPlan, WindowState, step_window

from interlace import Aggregation, StateCapError, Window
from interlace.testing.local import run_window_locally
from interlace.testing.oracle import canonical_rows
from interlace.testing.window_oracle import WindowBatch, WindowOracleResult, oracle_window

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "windows.md"

T0 = dt.datetime(2026, 1, 1)  # every time on the page is in seconds after T0 (UTC)
T0_MS = 1_767_225_600_000
SCHEMA = pa.schema([("user", pa.string()), ("amount", pa.int64()), ("ts", pa.timestamp("ns"))])
COLUMNS = SCHEMA.names

AGGS = [Aggregation(agg="count", as_="n"), Aggregation(agg="sum", column="amount", as_="total")]
COMMON: dict[str, Any] = {"event_time_column": "ts", "group_by": ["user"],
                          "max_groups_per_window": 1000, "aggregations": AGGS}


def ev(user: str, sec: float, amount: int = 1) -> dict[str, Any]:
    return {"user": user, "amount": amount, "ts": T0 + dt.timedelta(seconds=sec)}


# The worked examples: name -> (spec, micro-batches). Keep in sync with docs/windows.md.
EXAMPLES: dict[str, tuple[Window, list[list[dict[str, Any]]]]] = {
    "tumbling": (
        Window(kind="tumbling", duration_ms=10_000, lateness_ms=2_000, **COMMON),
        [[ev("a", 1, 3), ev("b", 4, 5), ev("a", 8, 2)],
         [ev("a", 12, 1), ev("a", 6, 4)],
         [ev("b", 15, 2), ev("a", 7, 9)],
         [ev("a", 2, 1), ev("b", 23, 1)]],
    ),
    "hopping": (
        Window(kind="hopping", duration_ms=10_000, hop_ms=4_000, **COMMON),
        [[ev("a", 9, 1)], [ev("a", 14, 2)], [ev("a", 11, 4)], [ev("b", 40, 1)]],
    ),
    "hopping-dlq": (
        Window(kind="hopping", duration_ms=10_000, hop_ms=4_000, late_data="dlq",
               dlq_horizon_ms=60_000, **COMMON),
        [[ev("a", 9, 1)], [ev("a", 14, 2)], [ev("a", 11, 4)], [ev("b", 40, 1)]],
    ),
    "session": (
        Window(kind="session", gap_ms=5_000, **COMMON),
        [[ev("a", 0, 1), ev("a", 3, 2)],
         [ev("a", 8, 4), ev("a", 14, 8)],
         [ev("a", 11, 16), ev("a", 19, 32), ev("a", 24, 64)],
         [ev("a", 16, 128)],
         [ev("b", 40, 1)]],
    ),
    "reopen": (
        Window(kind="tumbling", duration_ms=10_000, late_data="reopen",
               allowed_lateness_ms=10_000, **COMMON),
        [[ev("a", 1, 1), ev("a", 4, 2)],
         [ev("a", 12, 1)],
         [ev("b", 13, 1)],
         [ev("a", 7, 4), ev("c", 5, 1)],
         [ev("a", 25, 1)],
         [ev("a", 8, 1)]],
    ),
    "reopen-session": (
        Window(kind="session", gap_ms=5_000, late_data="reopen", allowed_lateness_ms=40_000,
               **COMMON),
        [[ev("a", 0), ev("a", 2)], [ev("a", 10)], [ev("a", 40)], [ev("b", 41)], [ev("a", 8)],
         [ev("a", 6)], [ev("b", 100)]],
    ),
}


def _log(name: str) -> list[WindowBatch]:
    return [WindowBatch(rows=tuple(b)) for b in EXAMPLES[name][1]]


def _oracle(name: str) -> WindowOracleResult:
    return oracle_window(EXAMPLES[name][0], _log(name), columns=COLUMNS)


# ---------------------------------------------------------------------------------------
# Rendering the tables
# ---------------------------------------------------------------------------------------


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


def _sec(value: dt.datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return _num((value - T0).total_seconds())


def _ms(value_ms: int) -> str:
    return _num((value_ms - T0_MS) / 1000)


def _input(row: dict[str, Any]) -> str:
    return f"{row['user']}@{_sec(row['ts'])} ({row['amount']})"


def _output(spec: Window, row: dict[str, Any]) -> str:
    if row.get("_dead_letter"):
        letter = json.loads(row["_dead_letter"])["row"]
        ts = dt.datetime.strptime(letter["ts"], "%Y-%m-%dT%H:%M:%S.%f")
        return f"dead letter: {letter['user']}@{_sec(ts)} ({letter['amount']})"
    cell = (f"[{_sec(row['window_start'])}, {_sec(row['window_end'])}) {row['user']}: "
            f"n={row['n']}, total={row['total']}")
    if spec.late_data == "reopen":
        cell += f", rev {row['revision']}"
        if row["retracted"]:
            cell = "retract " + cell
    return cell


def example_table(name: str) -> str:
    """Return the markdown table (and counters line) of one worked example."""
    spec, batches = EXAMPLES[name]
    result = _oracle(name)
    lines = ["| batch | rows in: `user@t (amount)` | `W` seen | `wm` | output |",
             "|---:|---|---:|---:|---|"]
    for b in range(result.num_batches):
        rows_in = (", ".join(_input(r) for r in batches[b]) if b < len(batches)
                   else "(no-data batch)")
        w_ms = result.spark_watermarks_ms[b]
        w = _ms(w_ms) if w_ms > 0 else "none"
        wm = _ms(w_ms + spec.horizon_ms) if w_ms > 0 else "none"
        out = "; ".join(_output(spec, r) for r in result.rows_for_batch(b))
        lines.append(f"| {b} | {rows_in} | {w} | {wm} | {out} |")
    counts = [f"`late_dropped` = {result.late_dropped}"]
    if spec.late_data == "dlq":
        counts.append(f"`dead_lettered` = {result.dead_lettered}")
    counts.append(f"removed by Spark's pre-filter = {result.spark_dropped}")
    lines += ["", "Counters: " + ", ".join(counts) + "."]
    return "\n".join(lines)


def _between(text: str, marker: str) -> str:
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    assert begin in text and end in text, f"docs/windows.md lost its {marker} markers"
    return text.split(begin, 1)[1].split(end, 1)[0].strip()


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------
# The worked examples
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_table_in_the_doc_is_the_oracles(name: str) -> None:
    assert _between(_doc(), f"windows-{name}") == example_table(name)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_operator_gives_the_documented_rows_batch_by_batch(name: str) -> None:
    spec = EXAMPLES[name][0]
    want = _oracle(name)
    got = run_window_locally(spec, _log(name), SCHEMA)
    assert got.watermarks_ms == want.spark_watermarks_ms
    got_by: dict[int, list[dict[str, Any]]] = {}
    for b, r in got.rows:
        got_by.setdefault(b, []).append(r)
    for b in range(want.num_batches):
        assert canonical_rows(got_by.get(b, [])) == canonical_rows(want.rows_for_batch(b)), b
    assert set(got_by) <= set(range(want.num_batches))
    assert got.counters.get("late_dropped", 0) == want.late_dropped
    assert got.counters.get("dead_lettered", 0) == want.dead_lettered
    assert got.spark_dropped == want.spark_dropped


def test_every_row_of_the_tumbling_example_is_accounted_for_once() -> None:
    # 9 rows: 7 aggregated, a@7 dropped by the operator, a@2 removed by Spark.
    result = _oracle("tumbling")
    assert (result.late_dropped, result.spark_dropped) == (1, 1)
    assert sum(r.row["n"] for r in result.rows) == 6  # b@23's window [20, 30) is still open


def test_dead_letter_json_in_the_doc_is_the_operators() -> None:
    spec = EXAMPLES["hopping-dlq"][0]
    block = _between(_doc(), "windows-dead-letter").strip("`\n").removeprefix("json\n")
    documented = json.loads(block)
    oracle_letters = [json.loads(r.row["_dead_letter"]) for r in _oracle("hopping-dlq").rows
                      if r.row["_dead_letter"]]
    local_letters = [json.loads(r["_dead_letter"])
                     for _, r in run_window_locally(spec, _log("hopping-dlq"), SCHEMA).rows
                     if r["_dead_letter"]]
    assert oracle_letters == local_letters == [documented]
    assert documented["watermark"] == T0_MS + 14_000  # wm, not Spark's W


@pytest.mark.parametrize(("lateness_ms", "w_prev", "spark_dropped", "n"),
                         [(0, "8", 1, 3), (3_000, "5", 0, 4)])
def test_spark_prefilter_removes_a_row_whose_window_is_still_open(
        lateness_ms: int, w_prev: str, spark_dropped: int, n: int) -> None:
    spec = Window(kind="tumbling", duration_ms=10_000, lateness_ms=lateness_ms, **COMMON)
    log = [WindowBatch(rows=(ev("a", s),)) for s in (5, 8, 7, 6, 30)]
    log[-1] = WindowBatch(rows=(ev("b", 30),))
    want = oracle_window(spec, log, columns=COLUMNS)
    assert _ms(want.spark_watermarks_ms[2]) == w_prev  # the W batch 3 filters with
    assert _ms(want.spark_watermarks_ms[3] + spec.horizon_ms) == _ms(T0_MS + 8_000 - lateness_ms)
    assert (want.spark_dropped, want.late_dropped) == (spark_dropped, 0)
    assert [(r.batch, r.row["user"], r.row["n"]) for r in want.rows] == [(5, "a", n)]
    got = run_window_locally(spec, log, SCHEMA)
    assert got.spark_dropped == spark_dropped
    assert [(b, r["n"]) for b, r in got.rows] == [(5, n)]


# ---------------------------------------------------------------------------------------
# Assignment
# ---------------------------------------------------------------------------------------


def test_hopping_row_off_the_hop_grid_gets_every_window_and_seed_001_misses_one() -> None:
    d, hop, t = 10, 4, 9  # seconds
    correct = [k * hop for k in range((t - d) // hop + 1, t // hop + 1)]
    seed = [s for s in range(0, t + 1) if s % hop == 0 and t - d + hop <= s <= t]
    assert correct == [0, 4, 8] and seed == [4, 8]
    first = _oracle("hopping").rows[0].row  # [0, 10) exists and holds a@9
    assert (_sec(first["window_start"]), _sec(first["window_end"]), first["n"]) == ("0", "10", 1)


def test_rows_at_or_before_the_epoch_are_removed_by_spark() -> None:
    # docs/windows.md, "Assignment": Spark's filter `t <= W` runs with W = 0 before Spark has
    # a watermark, so the row at epoch - 1 s never reaches the operator (measured in
    # tests/replay/test_hostile_spark.py); a hopping window may still start before the epoch.
    epoch = dt.datetime(1970, 1, 1)
    spec = Window(kind="tumbling", duration_ms=10_000, **COMMON)
    log = [WindowBatch(rows=({"user": "a", "amount": 1, "ts": epoch - dt.timedelta(seconds=1)},)),
           WindowBatch(rows=({"user": "a", "amount": 1, "ts": epoch + dt.timedelta(seconds=30)},))]
    want = oracle_window(spec, log, columns=COLUMNS)
    assert want.spark_watermarks_ms == [0, 0, 30_000]  # W <= 0 in batch 1: no watermark yet
    assert want.rows == [] and want.spark_dropped == 1
    got = run_window_locally(spec, log, SCHEMA)
    assert got.rows == [] and got.spark_dropped == 1
    hopping = Window(kind="hopping", duration_ms=10_000, hop_ms=5_000, **COMMON)
    log = [WindowBatch(rows=({"user": "a", "amount": 1, "ts": epoch + dt.timedelta(seconds=1)},)),
           WindowBatch(rows=({"user": "a", "amount": 1, "ts": epoch + dt.timedelta(seconds=30)},))]
    want = oracle_window(hopping, log, columns=COLUMNS)
    assert [(r.row["window_start"], r.row["window_end"]) for r in want.rows] == [
        (epoch - dt.timedelta(seconds=5), epoch + dt.timedelta(seconds=5)),
        (epoch, epoch + dt.timedelta(seconds=10))]
    got = run_window_locally(hopping, log, SCHEMA)
    assert canonical_rows(r for _, r in got.rows) == canonical_rows(r.row for r in want.rows)


# ---------------------------------------------------------------------------------------
# Upserting reopen output
# ---------------------------------------------------------------------------------------

Key = tuple[str, str, str]


def _apply_keyed_upsert(rows: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Target keyed on (window_start, window_end, user): keep the highest revision;
    retracted rows delete their key."""
    target: dict[Key, dict[str, Any]] = {}
    for r in rows:
        key = (_sec(r["window_start"]), _sec(r["window_end"]), r["user"])
        if r["retracted"]:
            target.pop(key, None)
        elif key not in target or target[key]["revision"] < r["revision"]:
            target[key] = r
    return target


def _apply_containment(batches: dict[int, list[dict[str, Any]]]) -> list[Key]:
    """The recipe of docs/windows.md: per micro-batch, delete every target row of the same
    group whose [start, end) lies inside an output row's [start, end), then insert the
    rows that are not retracted."""
    target: list[dict[str, Any]] = []
    for b in sorted(batches):
        rows = batches[b]
        target = [t for t in target if not any(
            t["user"] == r["user"] and r["window_start"] <= t["window_start"]
            and t["window_end"] <= r["window_end"] for r in rows)]
        target += [r for r in rows if not r["retracted"]]
    return sorted((_sec(t["window_start"]), _sec(t["window_end"]), t["user"]) for t in target)


def test_session_upsert_recipe_converges_and_a_bounds_keyed_upsert_does_not() -> None:
    result = _oracle("reopen-session")
    keyed = _apply_keyed_upsert([r.row for r in result.rows])
    assert sorted(keyed) == [("0", "15", "a"), ("0", "7", "a"), ("10", "15", "a"),
                             ("40", "45", "a"), ("41", "46", "b")]  # [0, 7), [10, 15) stale
    by_batch: dict[int, list[dict[str, Any]]] = {}
    for r in result.rows:
        by_batch.setdefault(r.batch, []).append(r.row)
    assert _apply_containment(by_batch) == [("0", "15", "a"), ("40", "45", "a"), ("41", "46", "b")]
    # Replaying a micro-batch (at-least-once foreachBatch) changes nothing.
    assert _apply_containment({**by_batch, 99: by_batch[5]}) == _apply_containment(by_batch)


def test_tumbling_reopen_output_converges_with_a_bounds_keyed_upsert() -> None:
    keyed = _apply_keyed_upsert([r.row for r in _oracle("reopen").rows])
    assert {k: (v["n"], v["total"], v["revision"]) for k, v in keyed.items()} == {
        ("0", "10", "a"): (3, 7, 1), ("0", "10", "c"): (1, 1, 0),
        ("10", "20", "a"): (1, 1, 0), ("10", "20", "b"): (1, 1, 0)}


# ---------------------------------------------------------------------------------------
# Aggregators and NULLs
# ---------------------------------------------------------------------------------------

NULL_SCHEMA = pa.schema([("g", pa.float64()), ("x", pa.float64()), ("p", pa.string()),
                         ("ts", pa.timestamp("ns"))])
NULL_AGGS = [Aggregation(agg="count", as_="n"),
             Aggregation(agg="count", column="x", as_="nx"),
             Aggregation(agg="sum", column="x", as_="sx"),
             Aggregation(agg="avg", column="x", as_="ax"),
             Aggregation(agg="min", column="x", as_="mn"),
             Aggregation(agg="first", column="p", as_="fp"),
             Aggregation(agg="last", column="p", as_="lp"),
             Aggregation(agg="count_distinct", column="p", as_="dp")]


def test_null_nan_and_first_last_ties_as_documented() -> None:
    def r(g: float | None, x: float | None, p: str | None, sec: float) -> dict[str, Any]:
        return {"g": g, "x": x, "p": p, "ts": T0 + dt.timedelta(seconds=sec)}

    spec = Window(kind="tumbling", duration_ms=10_000, event_time_column="ts", group_by=["g"],
                  max_groups_per_window=10, aggregations=NULL_AGGS, key_groups=1)
    log = [WindowBatch(rows=(r(None, 1.0, "A", 2), r(math.nan, math.nan, "B", 2),
                             r(None, None, None, 1), r(None, 3.0, "C", 5), r(None, 2.0, "D", 5))),
           WindowBatch(rows=(r(None, 1.0, "Z", 30),))]
    want = {"g": None, "n": 5, "nx": 3, "sx": 6.0, "ax": 2.0, "mn": 1.0,
            "fp": "A", "lp": "D", "dp": 4}
    oracle_rows = oracle_window(spec, log, columns=NULL_SCHEMA.names).rows
    local_rows = run_window_locally(spec, log, NULL_SCHEMA).rows
    assert len(oracle_rows) == len(local_rows) == 1
    for row in (oracle_rows[0].row, local_rows[0][1]):
        assert {k: row[k] for k in want} == want


# ---------------------------------------------------------------------------------------
# Caps
# ---------------------------------------------------------------------------------------

INT_SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("ns"))])


def _cap_spec(kind: str = "tumbling", key_groups: int = 1) -> Window:
    extra = {"duration_ms": 10_000} if kind == "tumbling" else {"gap_ms": 10_000}
    return Window(kind=kind, event_time_column="ts", group_by=["k"], max_groups_per_window=2,
                  aggregations=[Aggregation(agg="count", as_="n")], key_groups=key_groups,
                  name="clicks", **extra)


def _k(k: int, sec: float) -> dict[str, Any]:
    return {"k": k, "ts": T0 + dt.timedelta(seconds=sec)}


def test_cap_error_text() -> None:
    log = [WindowBatch(rows=(_k(0, 1), _k(1, 2), _k(2, 3)))]
    with pytest.raises(StateCapError, match=r"^window state cap hit: max_groups_per_window=2 "
                       r"reached on window \[2026-01-01T00:00:00Z, 2026-01-01T00:00:10Z\) "
                       r"for pipeline clicks$"):
        run_window_locally(_cap_spec(), log, INT_SCHEMA)


def test_cap_is_enforced_per_key_group() -> None:
    # Three groups in one window, cap 2: one key group fails, key groups that split them don't.
    kg = 2
    assert len({hash((k,)) % kg for k in (0, 1, 2)}) == 2  # run_window_locally's grouping
    log = [WindowBatch(rows=(_k(0, 1), _k(1, 2), _k(2, 3))), WindowBatch(rows=(_k(0, 30),))]
    rows = run_window_locally(_cap_spec(key_groups=kg), log, INT_SCHEMA).rows
    assert sorted(r["k"] for _, r in rows) == [0, 1, 2]


def test_session_cap_counts_sessions_of_the_key_group() -> None:
    log = [WindowBatch(rows=(_k(0, 1), _k(0, 100), _k(0, 200)))]  # one group, three sessions
    with pytest.raises(StateCapError, match=r"reached on window \[2026-01-01T00:00:01Z, "):
        run_window_locally(_cap_spec("session"), log, INT_SCHEMA)


# ---------------------------------------------------------------------------------------
# State sizing (bytes per slot of the uncompressed blob; docs/windows.md#state-sizing)
# ---------------------------------------------------------------------------------------

SIZE_SCHEMA = pa.schema([("user", pa.int64()), ("page", pa.int64()), ("amount", pa.int64()),
                         ("ts", pa.timestamp("ns"))])
HLL = Aggregation(agg="count_distinct", column="page", as_="pages")
EXACT = Aggregation(agg="count_distinct", column="page", mode="exact",
                    max_distinct_values_per_group=10**6, as_="pages")


def bytes_per_slot(aggs: list[Aggregation], groups: int, distinct_per_group: int) -> float:
    """Encoded blob bytes per (window, group) slot: one window, ``groups`` int64 groups."""
    spec = Window(kind="tumbling", duration_ms=60_000, event_time_column="ts", group_by=["user"],
                  max_groups_per_window=10**9, aggregations=aggs, key_groups=1)
    plan = WindowPlan.from_schema(spec, SIZE_SCHEMA)
    users = np.repeat(np.arange(groups), distinct_per_group)
    pages = np.tile(np.arange(distinct_per_group), groups) + users * 10_000_000
    batch = pd.DataFrame({TIME_US_COLUMN: np.full(len(users), T0_MS * 1000 + 1_000_000, np.int64),
                          "user": users, "page": pages, "amount": np.ones(len(users), np.int64)})
    state = step_window(plan, WindowState.empty(plan), batch, None).state
    assert state.slots.num_rows == groups
    empty = len(WindowState.empty(plan).encode(plan, compress=False))
    plain = state.encode(plan, compress=False)
    # What Spark stores is the compressed form: never larger, and it decodes to the same state.
    stored = state.encode(plan)
    assert len(stored) <= len(plain)
    again = WindowState.decode(stored, plan)
    assert again.slots.equals(state.slots) and again.seq == state.seq
    return (len(plain) - empty) / groups


@pytest.mark.parametrize(
    ("aggs", "groups", "distinct", "documented"),
    [
        (AGGS, 2_000, 1, 56),
        ([*AGGS, HLL], 2_000, 1, 61),
        ([*AGGS, HLL], 500, 100, 358),
        ([*AGGS, HLL], 100, 1_000, 2_969),
        ([*AGGS, HLL], 10, 20_000, 16_454),
        ([*AGGS, EXACT], 500, 100, 865),
    ],
)
def test_documented_bytes_per_slot(aggs: list[Aggregation], groups: int, distinct: int,
                                   documented: int) -> None:
    assert bytes_per_slot(aggs, groups, distinct) == pytest.approx(documented, rel=0.1)


# ---------------------------------------------------------------------------------------
# Fixed: an emitted session that grows past wm re-emits when it closes (was a known gap)
# ---------------------------------------------------------------------------------------


def test_reopen_session_extended_after_its_emit_is_re_emitted_when_it_closes() -> None:
    spec = Window(kind="session", gap_ms=5_000, late_data="reopen", allowed_lateness_ms=40_000,
                  event_time_column="ts", group_by=["user"], max_groups_per_window=10,
                  aggregations=[Aggregation(agg="count", as_="n")], key_groups=1)
    log = [WindowBatch(rows=tuple(b)) for b in
           [[ev("a", 0)], [ev("b", 5)], [ev("b", 5)], [ev("a", 3)], [ev("b", 100)]]]
    want = oracle_window(spec, log, columns=COLUMNS)
    assert [(r.batch, _sec(r.row["window_end"]), r.row["n"], r.row["revision"])
            for r in want.rows if r.row["user"] == "a"] == [(2, "5", 1, 0), (5, "8", 2, 1)]
    got = run_window_locally(spec, log, SCHEMA).rows
    assert canonical_rows([r for _, r in got]) == canonical_rows([r.row for r in want.rows])


if __name__ == "__main__":
    for example in EXAMPLES:
        print(f"<!-- windows-{example}:begin -->")
        print(example_table(example))
        print(f"<!-- windows-{example}:end -->\n")


def test_dlq_session_row_chaining_with_an_evicted_session_starts_an_overlapping_one() -> None:
    # docs/windows.md#known-gaps: a@3 is on time by its own window [3, 8) (wm = 5), but [0, 5)
    # was emitted and evicted in batch 2; under dlq Spark's pre-filter (W_prev = 5 - 60 s)
    # lets a@3 through, so it opens [3, 8). Under drop Spark removes it (W_prev = 5).
    def run(late_data: str) -> tuple[list[tuple[int, str, str, int]], int]:
        extra = {"dlq_horizon_ms": 60_000} if late_data == "dlq" else {}
        spec = Window(kind="session", gap_ms=5_000, late_data=late_data, event_time_column="ts",
                      group_by=["user"], max_groups_per_window=10,
                      aggregations=[Aggregation(agg="count", as_="n")], key_groups=1, **extra)
        log = [WindowBatch(rows=tuple(b)) for b in
               [[ev("a", 0)], [ev("b", 5)], [ev("b", 5)], [ev("a", 3)], [ev("b", 100)]]]
        want = oracle_window(spec, log, columns=COLUMNS)
        got = run_window_locally(spec, log, SCHEMA)
        assert canonical_rows([r for _, r in got.rows]) == canonical_rows(
            [r.row for r in want.rows])
        rows = [(r.batch, _sec(r.row["window_start"]), _sec(r.row["window_end"]), r.row["n"])
                for r in want.rows if r.row["user"] == "a"]
        return rows, want.spark_dropped

    assert run("dlq") == ([(2, "0", "5", 1), (5, "3", "8", 1)], 0)
    assert run("drop") == ([(2, "0", "5", 1)], 1)
