"""Properties of the table aggregation (SEMANTICS §7, §10), through the local runner.

* On random logs (group moves, tombstones, NULL groups, NULL values, NULL keys, late and
  out-of-order updates, equal times, every ``emit`` / ``late_data``) both stages together
  equal the oracle: per group, the same rows in the same order, in the same micro-batch.
* The changelog applied to a target by group (highest ``version``; ``delete`` removes the
  group) equals a batch ``GROUP BY`` of the table's final snapshot, computed here with
  pandas-free plain Python (every update applied, none late).
* Under ``final``, without updates behind the watermark, the changelog does not depend on
  how the updates are cut into micro-batches.
* Sums at the int64 boundary are exact; one past it fails loud (Spark's ANSI ``sum``);
  decimals sum and average exactly.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlace import Aggregation, TableAggregate
from interlace.state.accumulators import SumOverflowError
from interlace.testing.local_table_aggregate import run_table_aggregate_locally
from interlace.testing.oracles.table_aggregate import aggregate_rows, oracle_table_aggregate

BASE = dt.datetime(2026, 1, 1)
SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("tier", pa.string()),
                    ("balance", pa.int64()), ("score", pa.float64()),
                    ("ts", pa.timestamp("us"))])
COLS = SCHEMA.names
AGGS = [Aggregation(agg="count", as_="n"), Aggregation(agg="count", column="balance", as_="nb"),
        Aggregation(agg="sum", column="balance", as_="total"),
        Aggregation(agg="avg", column="score", as_="avg_score"),
        Aggregation(agg="sum", column="score", as_="sum_score"),
        Aggregation(agg="min", column="balance", as_="lo"),
        Aggregation(agg="max", column="tier", as_="hi_tier"),
        Aggregation(agg="count_distinct", column="tier", as_="tiers", mode="exact",
                    max_distinct_values_per_group=1000)]


#: Counts and integer sums only: stage 2's vectorised path (counts.py) applies.
COUNT_AGGS = [Aggregation(agg="count", as_="n"),
              Aggregation(agg="count", column="tier", as_="nt"),
              Aggregation(agg="sum", column="balance", as_="total"),
              Aggregation(agg="avg", column="balance", as_="avg_balance")]


def at(ms: int) -> dt.datetime:
    return BASE + dt.timedelta(milliseconds=ms)


def spec_of(emit: str = "final", late_data: str = "drop", lateness_ms: int = 2_000,
            group_by: tuple[str, ...] = ("region",), key_groups: int = 3,
            aggs: list[Aggregation] | None = None) -> TableAggregate:
    return TableAggregate(keys=["id"], group_by=list(group_by), aggregations=aggs or AGGS,
                          event_time_column="ts", lateness_ms=lateness_ms, emit=emit,
                          late_data=late_data, key_groups=key_groups)


@st.composite
def updates(draw: Any, max_batches: int = 6, late_free: bool = False) -> list[list[dict]]:
    """Micro-batches of updates: moves between groups, tombstones (all values NULL)."""
    log = []
    clock = 0
    for _ in range(draw(st.integers(1, max_batches))):
        rows = []
        for _ in range(draw(st.integers(0, 5))):
            clock += draw(st.sampled_from([0, 500, 1_000, 3_000]))
            back = 0 if late_free else draw(st.sampled_from([0, 0, 0, 1_000, 5_000]))
            key = draw(st.sampled_from([1, 2, 3, 4, None] if not late_free else [1, 2, 3, 4]))
            if draw(st.integers(0, 5)) == 0:
                row = {"id": key, "region": None, "tier": None, "balance": None, "score": None}
            else:
                row = {"id": key,
                       "region": draw(st.sampled_from(["eu", "us", None])),
                       "tier": draw(st.sampled_from(["gold", "silver", None])),
                       "balance": draw(st.sampled_from([0, 5, -3, 100, None])),
                       "score": draw(st.sampled_from([0.1, 0.2, 2.5, -1e16, 1e16, None]))}
            row["ts"] = at(max(clock - back, 1))
            rows.append(row)
        log.append(rows)
    return log


FLUSH = {"id": 99, "region": None, "tier": None, "balance": None, "score": None,
         "ts": at(10**8)}


def by_group(rows: list[tuple[int, dict]], group_by: tuple[str, ...]) -> dict:
    out: dict[tuple, list] = {}
    for b, r in rows:
        key = ("_dead_letter",) if r.get("_dead_letter") else tuple(r[g] for g in group_by)
        out.setdefault(key, []).append((b, r))
    return out


def close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


def same(got: dict, want: dict) -> bool:
    if got.keys() != want.keys():
        return False
    for k in got:
        g, w = got[k], want[k]
        if len(g) != len(w):
            return False
        for (gb, gr), (wb, wr) in zip(g, w, strict=True):
            if gb != wb or gr.keys() != wr.keys():
                return False
            if any(not close(gr[c], wr[c]) for c in gr if c != "_dead_letter"):
                return False
    return True


@settings(max_examples=150, deadline=None)
@given(updates(), st.sampled_from(["final", "eager"]), st.sampled_from([0, 2_000]),
       st.sampled_from([("region",), ("region", "tier"), (), ("id", "region")]),
       st.sampled_from([1, 3]))
def test_both_stages_equal_the_oracle(log: list[list[dict]], emit: str, lateness_ms: int,
                                      group_by: tuple[str, ...], key_groups: int) -> None:
    spec = spec_of(emit, "drop", lateness_ms, group_by, key_groups)
    got = run_table_aggregate_locally(spec, log, SCHEMA)
    want = oracle_table_aggregate(spec, log, columns=COLS)
    assert same(by_group(got.rows, group_by), by_group(want.rows, group_by)), (got.rows,
                                                                              want.rows)


@settings(max_examples=150, deadline=None)
@given(updates(), st.sampled_from(["final", "eager"]), st.sampled_from(["drop", "dlq"]),
       st.sampled_from([("region",), ("region", "tier"), ()]), st.booleans())
def test_the_vectorised_counts_equal_the_oracle_and_the_row_by_row_path(
        log: list[list[dict]], emit: str, late_data: str, group_by: tuple[str, ...],
        vectorised: bool) -> None:
    spec = spec_of(emit, late_data, 2_000, group_by, 3, COUNT_AGGS)
    got = run_table_aggregate_locally(spec, log, SCHEMA, vectorised=vectorised)
    want = oracle_table_aggregate(spec, log, columns=COLS)
    rows = [(b, r) for b, r in got.rows if not r.get("_dead_letter")]
    wanted = [(b, {**r, **({"_dead_letter": None} if late_data == "dlq" else {})})
              for b, r in want.rows if "_dead_letter" not in r]
    assert same(by_group(rows, group_by), by_group(wanted, group_by)), (rows, wanted)
    assert sum(1 for _, r in got.rows if r.get("_dead_letter")) == (
        want.late if late_data == "dlq" else 0)


@settings(max_examples=60, deadline=None)
@given(updates(), st.sampled_from(["final", "eager"]))
def test_late_updates_go_to_dead_letters(log: list[list[dict]], emit: str) -> None:
    spec = spec_of(emit, "dlq", 0)
    got = run_table_aggregate_locally(spec, log, SCHEMA)
    want = oracle_table_aggregate(spec, log, columns=COLS)
    letters = [r["_dead_letter"] for _, r in got.rows if r.get("_dead_letter")]
    assert len(letters) == want.late
    rows = [(b, r) for b, r in got.rows if not r.get("_dead_letter")]
    wanted = [(b, r) for b, r in want.rows if "_dead_letter" not in r]
    assert same(by_group(rows, ("region",)),
                by_group([(b, {**r, "_dead_letter": None}) for b, r in wanted], ("region",)))


def _snapshot_group_by(log: list[list[dict]], group_by: tuple[str, ...]) -> dict:
    """A batch GROUP BY of the table's final snapshot (each key's latest update)."""
    latest: dict[Any, dict] = {}
    for row in sorted((r for b in log for r in b if r["id"] is not None),
                      key=lambda r: r["ts"]):  # stable: equal times keep arrival order
        latest[row["id"]] = row
    present = [r for r in latest.values()
               if not all(r[c] is None for c in ("region", "tier", "balance", "score"))]
    groups: dict[tuple, list] = {}
    for r in present:
        groups.setdefault(tuple(r[g] for g in group_by), []).append(r)
    return {g: aggregate_rows(AGGS, rows) for g, rows in groups.items()}


@settings(max_examples=100, deadline=None)
@given(updates(late_free=True), st.sampled_from(["final", "eager"]),
       st.sampled_from([("region",), ("region", "tier"), ()]))
def test_the_changelog_applied_by_group_is_the_group_by_of_the_snapshot(
        log: list[list[dict]], emit: str, group_by: tuple[str, ...]) -> None:
    # A last update far ahead moves the watermark past every other one (under final): a
    # tombstone of a key never seen, which emits nothing.
    spec = spec_of(emit, "drop", 2_000, group_by)
    got = run_table_aggregate_locally(spec, [*log, [FLUSH]], SCHEMA)
    target: dict[tuple, dict] = {}
    for _, r in got.rows:
        g = tuple(r[c] for c in group_by)
        if g not in target or r["version"] > target[g]["version"]:
            target[g] = r
    final = {g: [r[a.as_] for a in AGGS] for g, r in target.items() if r["op"] == "upsert"}
    want = _snapshot_group_by(log, group_by)
    assert final.keys() == want.keys()
    for g in final:
        assert all(close(a, b) for a, b in zip(final[g], want[g], strict=True)), (g, final[g],
                                                                                   want[g])


@settings(max_examples=60, deadline=None)
@given(updates(late_free=True), st.data())
def test_final_output_does_not_depend_on_the_micro_batch_split(
        log: list[list[dict]], data: Any) -> None:
    rows = [r for b in log for r in b]
    spec = spec_of("final", "drop", 10**9)  # nothing is ever behind the watermark
    flush = [{**FLUSH, "ts": at(10**12)}]
    cuts = sorted(data.draw(st.sets(st.integers(0, len(rows)), max_size=4)))
    split, start = [], 0
    for c in [*cuts, len(rows)]:
        split.append(rows[start:c])
        start = c
    one = run_table_aggregate_locally(spec, [rows, flush, []], SCHEMA)
    many = run_table_aggregate_locally(spec, [*split, flush, []], SCHEMA)
    strip = lambda run: by_group([(0, r) for _, r in run.rows], ("region",))  # noqa: E731
    assert same(strip(one), strip(many))


def test_int64_sums_are_exact_at_the_boundary_and_fail_loud_past_it() -> None:
    schema = pa.schema([("id", pa.int64()), ("g", pa.string()), ("v", pa.int64()),
                        ("ts", pa.timestamp("us"))])
    spec = TableAggregate(keys=["id"], group_by=["g"], event_time_column="ts", emit="eager",
                          aggregations=[Aggregation(agg="sum", column="v", as_="s")])
    top = 2**63 - 1
    log = [[{"id": 1, "g": "a", "v": top, "ts": at(1)}, {"id": 2, "g": "a", "v": 5, "ts": at(2)},
            {"id": 2, "g": "a", "v": 0, "ts": at(3)}]]
    # 2**63 - 1 + 5 leaves the range before the update to 0 brings it back: fail loud.
    with pytest.raises(SumOverflowError, match="left the 64-bit integer range"):
        run_table_aggregate_locally(spec, log, schema)
    log = [[{"id": 1, "g": "a", "v": top, "ts": at(1)}, {"id": 2, "g": "a", "v": -5, "ts": at(2)},
            {"id": 2, "g": "a", "v": 0, "ts": at(3)}, {"id": 1, "g": "b", "v": top, "ts": at(4)}]]
    rows = [r for _, r in run_table_aggregate_locally(spec, log, schema).rows]
    # Key 1 moves to group b: a keeps key 2 (0), b holds the largest int64.
    assert [r["s"] for r in rows if r["g"] == "a"] == [top, top - 5, top, 0]
    assert [r["s"] for r in rows if r["g"] == "b"] == [top]


def test_decimals_sum_and_average_exactly() -> None:
    schema = pa.schema([("id", pa.int64()), ("g", pa.string()), ("v", pa.decimal128(10, 2)),
                        ("ts", pa.timestamp("us"))])
    spec = TableAggregate(keys=["id"], group_by=["g"], event_time_column="ts", emit="eager",
                          aggregations=[Aggregation(agg="sum", column="v", as_="s"),
                                        Aggregation(agg="avg", column="v", as_="a")])
    log = [[{"id": i, "g": "a", "v": Decimal(v), "ts": at(i)}
            for i, v in enumerate(["0.10", "0.20", "0.05", "99999999.99"])],
           [{"id": 3, "g": "a", "v": None, "ts": at(10)}]]
    got = [r for _, r in run_table_aggregate_locally(spec, log, schema).rows]
    want = [r for _, r in oracle_table_aggregate(spec, log, columns=schema.names).rows]
    assert [(r["s"], r["a"]) for r in got] == [(r["s"], r["a"]) for r in want]
    assert got[2]["s"] == Decimal("0.35") and got[2]["a"] == Decimal("0.116667")
    assert got[-1]["s"] == Decimal("0.35")  # the largest value left the group


def test_a_decimal_sum_past_its_type_fails_loud_as_sparks_does() -> None:
    # DECIMAL(38,2) sums into DECIMAL(38,2): the largest value is kept exactly, and an update
    # taking the group past 38 digits fails (Spark: [ARITHMETIC_OVERFLOW]). Its mean is a
    # DECIMAL(38,6), 32 digits before the point: past them avg fails, as Spark's does
    # ([NUMERIC_VALUE_OUT_OF_RANGE]).
    schema = pa.schema([("id", pa.int64()), ("g", pa.string()), ("v", pa.decimal128(38, 2)),
                        ("ts", pa.timestamp("us"))])

    def run(agg: str, *values: str) -> list[Any]:
        spec = TableAggregate(keys=["id"], group_by=["g"], event_time_column="ts", emit="eager",
                              aggregations=[Aggregation(agg=agg, column="v", as_="x")])
        log = [[{"id": i, "g": "a", "v": Decimal(v), "ts": at(i)} for i, v in enumerate(values)]]
        return [r["x"] for _, r in run_table_aggregate_locally(spec, log, schema).rows]

    top = f"{10**36 - 1}.99"
    assert run("sum", top) == [Decimal(top)]
    with pytest.raises(SumOverflowError, match=r"decimal overflow: sum\(v\) AS x is past "
                       r"DECIMAL\(38,2\) on group \['a'\] .*\[ARITHMETIC_OVERFLOW\]"):
        run("sum", top, "0.01")
    mean_top = f"{10**32 - 1}.99"
    assert run("avg", mean_top) == [Decimal(f"{mean_top}0000")]
    with pytest.raises(SumOverflowError, match=r"avg\(v\) AS x is past DECIMAL\(38,6\) on "
                       r"group \['a'\] .*\[NUMERIC_VALUE_OUT_OF_RANGE\]"):
        run("avg", f"{10**32}.00")
