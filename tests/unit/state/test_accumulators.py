"""Window accumulators vs a naive Python model, plus merge, encoding and HLL accuracy."""

from __future__ import annotations

import math
import warnings
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from typing import Any

import msgpack
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from interlace.state.accumulators import (
    HLL_REGISTERS,
    HLL_SPARSE_MAX_ENTRIES,
    Accumulator,
    DistinctCapError,
    SumOverflowError,
    make_accumulator,
)

# (agg, mode, column) of every accumulator; column None is count(*).
ALL_AGGS = [
    ("count", None, None),
    ("count", None, "x"),
    ("sum", None, "x"),
    ("min", None, "x"),
    ("max", None, "x"),
    ("avg", None, "x"),
    ("first", None, "x"),
    ("last", None, "x"),
    ("count_distinct", "exact", "x"),
    ("count_distinct", "approximate", "x"),
]

Row = tuple[int, Any, int, int]  # (slot, value or None, event_time_us, seq)


def _acc(agg: str, mode: str | None, column: str | None, **kw: Any) -> Accumulator[Any]:
    if mode == "exact":
        kw.setdefault("max_distinct_values_per_group", 10_000)
    return make_accumulator(agg, mode, column=column, **kw)


# ---------------------------------------------------------------------------
# The naive model: one Python loop per slot
# ---------------------------------------------------------------------------


def naive(agg: str, column: str | None, rows: list[Row], n: int) -> list[Any]:
    out: list[Any] = []
    for slot in range(n):
        mine = [r for r in rows if r[0] == slot]
        vals = [r for r in mine if r[1] is not None]
        values = [r[1] for r in vals]
        if agg == "count":
            out.append(len(mine) if column is None else len(vals))
        elif agg == "count_distinct":
            out.append(len(set(values)))
        elif not vals:
            out.append(None)
        elif isinstance(values[0], Decimal) and agg in ("sum", "avg"):
            with localcontext(Context(prec=300)):  # DECIMAL(38,4): exact, mean to 8 places
                total = sum(values, Decimal(0))
                mean = (total / len(values)).quantize(Decimal("1e-8"), rounding=ROUND_HALF_UP)
            out.append(total if agg == "sum" else mean)
        elif agg == "sum":
            out.append(sum(values))
        elif agg == "min":
            out.append(min(values))
        elif agg == "max":
            out.append(max(values))
        elif agg == "avg":
            out.append(sum(float(v) for v in values) / len(values))
        elif agg == "first":
            out.append(min(vals, key=lambda r: (r[2], r[3]))[1])
        elif agg == "last":
            out.append(max(vals, key=lambda r: (r[2], r[3]))[1])
    return out


def as_list(series: pd.Series) -> list[Any]:
    return [None if v is pd.NA or v is None else v for v in series.tolist()]


def assert_close(got: list[Any], want: list[Any], agg: str) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if w is None:
            assert g is None
        elif isinstance(w, Decimal):
            assert isinstance(g, Decimal) and g == w
        elif isinstance(w, float) or agg == "avg":
            assert g == pytest.approx(w, rel=1e-9, abs=1e-9)
        else:
            assert g == w
            assert type(g) is type(w) or {type(g), type(w)} <= {int, float}


def columns_of(rows: list[Row], kind: str) -> tuple[np.ndarray, Any, np.ndarray, np.ndarray]:
    """Build the arrays one update call receives, in the representation `kind`."""
    slots = np.array([r[0] for r in rows], dtype=np.int64)
    raw = [r[1] for r in rows]
    if kind == "int":  # nullable Int64, as a pandas user would hold it
        values: Any = pd.Series(raw, dtype="Int64")
    elif kind == "int_as_float":  # what Spark's Arrow -> pandas gives for a long with NULLs
        values = np.array([np.nan if v is None else float(v) for v in raw], dtype=np.float64)
    elif kind == "float":
        values = np.array([np.nan if v is None else v for v in raw], dtype=np.float64)
    else:
        values = pd.Series(raw, dtype=object)
    t_us = np.array([r[2] for r in rows], dtype=np.int64)
    seq = np.array([r[3] for r in rows], dtype=np.int64)
    return slots, values, t_us, seq


def feed(acc: Accumulator[Any], state: Any, rows: list[Row], kind: str) -> Any:
    slots, values, t_us, seq = columns_of(rows, kind)
    return acc.update(state, slots, None if not acc.needs_values else values, t_us, seq)


VALUE_STRATEGIES = {
    "int": st.integers(-1000, 1000),
    "int_as_float": st.integers(-(2**40), 2**40),
    "float": st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    "str": st.text(alphabet="abcxyz", max_size=3),
    # DECIMAL(38,4) past 64 bits in units: sums and means exact (state/accumulators/decimals.py)
    "decimal": st.integers(-(10**30), 10**30).map(lambda x: Decimal(x).scaleb(-4)),
}
DTYPE_OF_KIND = {"int": "int64", "int_as_float": "int64", "float": "float64", "str": "string",
                 "decimal": "decimal(38,4)"}
# Value kinds each aggregation is drawn with (sum/avg are not defined on strings).
KINDS_FOR = {
    agg: ["int", "float", "decimal"] if agg in ("sum", "avg") else ["int", "float", "str", "decimal"]
    for agg, _, _ in ALL_AGGS
}


@st.composite
def batches(draw: st.DrawFn, kind: str) -> tuple[int, list[list[Row]]]:
    """Rows over a few slots, split into batches; small time range to force ties."""
    n = draw(st.integers(1, 5))
    value = st.one_of(st.none(), VALUE_STRATEGIES[kind])
    cells = draw(st.lists(st.tuples(st.integers(0, n - 1), value, st.integers(-3, 3)), max_size=40))
    rows = [(s, v, t, seq) for seq, (s, v, t) in enumerate(cells)]
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=3)))
    bounds = [0, *cuts, len(rows)]
    return n, [rows[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


# ---------------------------------------------------------------------------
# Every aggregator against the naive model
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(VALUE_STRATEGIES))
@pytest.mark.parametrize(("agg", "mode", "column"), ALL_AGGS)
@given(data=st.data())
def test_accumulator_matches_naive_model(
    agg: str, mode: str | None, column: str | None, kind: str, data: st.DataObject
) -> None:
    if kind == "str" and agg in ("sum", "avg"):
        return  # not defined on strings
    n, parts = data.draw(batches(kind))
    acc = _acc(agg, mode, column, dtype=DTYPE_OF_KIND[kind])
    state = acc.init(n)
    for part in parts:
        state = feed(acc, state, part, kind)
    rows = [r for part in parts for r in part]
    want = naive(agg, column, rows, n)
    got = as_list(acc.result(state))
    if mode == "approximate":
        # Tiny cardinalities: linear counting is exact unless two values share a register.
        assert all(abs(g - w) <= 1 for g, w in zip(got, want, strict=True))
    else:
        assert_close(got, want, agg)


def test_first_last_ties_break_by_arrival_order() -> None:
    # Two rows of slot 0 share the min and the max event time; a null at the min is skipped.
    slots = np.array([0, 0, 0, 0, 0])
    values = pd.Series(["b", "a", None, "d", "c"], dtype=object)
    t_us = np.array([10, 10, 5, 20, 20])
    seq = np.array([1, 2, 3, 4, 5])
    first, last = make_accumulator("first"), make_accumulator("last")
    assert as_list(first.result(first.update(first.init(1), slots, values, t_us, seq))) == ["b"]
    assert as_list(last.result(last.update(last.init(1), slots, values, t_us, seq))) == ["c"]
    # Split over two calls, the later arrival still wins the tie for last only.
    s = last.update(last.init(1), slots[:4], values[:4], t_us[:4], seq[:4])
    s = last.update(s, slots[4:], values.iloc[4:], t_us[4:], seq[4:])
    assert as_list(last.result(s)) == ["c"]


def test_all_null_slot_gives_null_and_counts_give_zero() -> None:
    slots = np.array([0, 0, 1])
    values = np.array([np.nan, np.nan, 1.5])
    t_us, seq = np.array([1, 2, 3]), np.array([1, 2, 3])
    for agg, mode, column in ALL_AGGS:
        acc = _acc(agg, mode, column)
        got = as_list(acc.result(acc.update(acc.init(3), slots, values, t_us, seq)))
        if agg == "count" and column is None:
            assert got == [2, 1, 0]
        elif agg in ("count", "count_distinct"):
            assert got == [0, 1, 0]
        else:
            assert got[0] is None and got[2] is None and got[1] is not None, (agg, got)


def test_sum_types_follow_the_input() -> None:
    slots = np.array([0, 0])
    ints = make_accumulator("sum")
    assert ints.result(ints.update(ints.init(1), slots, np.array([1, 2]))).dtype == "Int64"
    floats = make_accumulator("sum")
    got = floats.result(floats.update(floats.init(1), slots, np.array([1.5, 2.0])))
    assert got.dtype == "Float64" and got.tolist() == [3.5]
    # A long column with NULLs arrives as float64; the configured dtype keeps it int64.
    pinned = make_accumulator("sum", dtype="long")
    got = pinned.result(pinned.update(pinned.init(1), slots, np.array([2.0**53, np.nan])))
    assert got.dtype == "Int64" and got.tolist() == [2**53]
    dec = make_accumulator("sum")
    got = dec.result(dec.update(dec.init(1), slots, pd.Series([Decimal("1.10"), None])))
    assert got.tolist() == [Decimal("1.10")]


def test_decimal_sum_and_avg_have_sparks_types_and_rounding() -> None:
    # DECIMAL(10,0): the sum is DECIMAL(20,0), the mean DECIMAL(14,4) rounded half away from
    # zero (Java's HALF_UP, which Spark's decimal division uses): 1/20000 = 0.00005 -> 0.0001.
    total, mean = make_accumulator("sum", dtype="decimal(10,0)"), make_accumulator(
        "avg", dtype="decimal(10,0)")
    slots = np.repeat([0, 1, 2], [20_000, 20_000, 3])
    values = pd.Series([Decimal(1)] + [Decimal(0)] * 19_999 + [Decimal(-1)] + [Decimal(0)] * 19_999
                       + [Decimal(2), None, Decimal(3)], dtype=object)
    assert as_list(total.result(total.update(total.init(3), slots, values))) == [
        Decimal(1), Decimal(-1), Decimal(5)]
    got = as_list(mean.result(mean.update(mean.init(3), slots, values)))
    assert [str(g) for g in got] == ["0.0001", "-0.0001", "2.5000"]


def test_decimal_sum_past_its_precision_fails_as_spark_does() -> None:
    # DECIMAL(38,2) sums into DECIMAL(38,2) (38 digits at most): the largest value fits,
    # one cent more does not.
    acc = make_accumulator("sum", dtype="decimal(38,2)")
    top = Decimal(f"{10**36 - 1}.99")  # strings: Decimal arithmetic would round to 28 digits
    state = acc.update(acc.init(2), np.array([0, 0, 1]),
                       pd.Series([Decimal(f"{10**36 - 2}.99"), Decimal(1), Decimal(5)]))
    assert as_list(acc.result(state)) == [top, Decimal(5)]
    back = acc.from_msgpack(msgpack.unpackb(encoded(acc, state)))  # units past 64 bits
    assert as_list(acc.result(back)) == [top, Decimal(5)]
    with pytest.raises(SumOverflowError, match=r"past DECIMAL\(38,2\) \(slot 0\)") as err:
        acc.update(state, np.array([1, 0]), pd.Series([Decimal(5), Decimal("0.01")]))
    assert err.value.slot == 0
    named = err.value.named("sum(cost) AS total", "cost", "on window [a, b)")
    assert "sum(cost) AS total is past DECIMAL(38,2) on window [a, b)" in str(named)
    assert "cast `cost` to a decimal of fewer digits" in str(named)
    with pytest.raises(SumOverflowError):  # a merge checks too
        acc.merge(state, state, np.array([0, 1]))
    # avg sums in the sum's type as Spark's does, and fails with it ([ARITHMETIC_OVERFLOW]).
    mean = make_accumulator("avg", dtype="decimal(38,2)")
    with pytest.raises(SumOverflowError, match=r"past DECIMAL\(38,2\) \(the sum it averages\)"):
        mean.update(mean.init(1), np.array([0, 0]), pd.Series([top, Decimal("0.01")]))


I64_MAX, I64_MIN = 2**63 - 1, -(2**63)


@pytest.mark.parametrize(("values", "slot"), [
    ([I64_MAX, 1], 0),
    ([I64_MIN, -1], 0),
    ([2**62, 2**62, 2**62, -(2**62), 5], 0),  # one wrap, the exact sum is 2**63 + 5
])
def test_integer_sum_past_int64_fails_as_spark_does(values: list[int], slot: int) -> None:
    acc = make_accumulator("sum")
    slots = np.array([1] + [0] * len(values))
    with pytest.raises(SumOverflowError, match=r"64-bit integer range \(slot 0\)") as err:
        acc.update(acc.init(2), slots, np.array([7, *values], dtype=np.int64))
    assert err.value.slot == slot


def test_integer_sum_fails_when_a_merge_leaves_int64() -> None:
    acc = make_accumulator("sum")
    a = acc.update(acc.init(2), np.array([0, 1]), np.array([I64_MAX - 1, 3]))
    assert as_list(acc.result(acc.merge(a, acc.take(a, np.array([1])), np.array([1])))) == [
        I64_MAX - 1, 6]
    with pytest.raises(SumOverflowError) as err:
        acc.merge(a, acc.take(a, np.array([1])), np.array([0]))
    assert err.value.slot == 0


def test_integer_sum_at_the_edges_of_int64_is_exact() -> None:
    # Only the exact sum counts: a wrap undone later in the same call is no overflow.
    acc = make_accumulator("sum")
    slots = np.array([0, 0, 1, 1, 2, 2, 2, 3, 3])
    values = np.array([I64_MAX - 1, 1, I64_MIN + 1, -1, I64_MAX, 1, -5, 2**62, 2**62 - 1])
    got = as_list(acc.result(acc.update(acc.init(4), slots, values)))
    assert got == [I64_MAX, I64_MIN, I64_MAX - 4, I64_MAX]
    # Sums far from the range skip the exact check; pinned long input (float64 with NaN).
    pinned = make_accumulator("sum", dtype="long")
    many = np.full(100_000, 2.0**40)
    many[0] = np.nan
    state = pinned.update(pinned.init(1), np.zeros(len(many), dtype=np.int64), many)
    assert as_list(pinned.result(state)) == [99_999 * 2**40]


@pytest.mark.parametrize("agg", ["sum", "avg"])
def test_float_overflow_is_infinity_without_a_warning(agg: str) -> None:
    # Spark's double arithmetic: past the range is +-inf, inf + -inf is NaN; no warning,
    # which in a Spark worker would print a line per call.
    acc = make_accumulator(agg)
    slots = np.array([0, 0, 1, 1, 2, 2, 2])
    big = np.finfo(np.float64).max
    values = np.array([big, big, -big, -big, big, big, -np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        state = acc.update(acc.init(3), slots, values)
        merged = acc.merge(state, state, np.array([0, 1, 2]))
    got = as_list(acc.result(state))
    assert got[0] == math.inf and got[1] == -math.inf and math.isnan(got[2])
    assert as_list(acc.result(merged))[:2] == [math.inf, -math.inf]


def test_timestamps_aggregate_as_int64_microseconds() -> None:
    stamps = pd.Series(
        pd.to_datetime(["1969-12-31 23:59:59.999999", "2026-01-01 00:00:00.000001", None])
    ).dt.tz_localize("UTC")
    slots = np.array([0, 0, 0])
    lo, hi = make_accumulator("min"), make_accumulator("max")
    assert as_list(lo.result(lo.update(lo.init(1), slots, stamps))) == [-1]
    assert as_list(hi.result(hi.update(hi.init(1), slots, stamps))) == [1_767_225_600_000_001]


def test_integral_floats_count_as_the_equal_integer() -> None:
    for mode in ("exact", "approximate"):
        acc = _acc("count_distinct", mode, "x")
        s = acc.update(acc.init(1), np.array([0, 0]), np.array([5, 7]))
        s = acc.update(s, np.array([0, 0, 0]), np.array([5.0, np.nan, 7.5]))
        assert as_list(acc.result(s)) == [3], mode


# ---------------------------------------------------------------------------
# merge: associative, and equal to update on the union
# ---------------------------------------------------------------------------


def encoded(acc: Accumulator[Any], state: Any) -> bytes:
    return msgpack.packb(acc.to_msgpack(state))


def assert_same_state(acc: Accumulator[Any], a: Any, b: Any) -> None:
    """Equal states: equal results; equal bytes unless float sums differ in rounding."""
    ra, rb = as_list(acc.result(a)), as_list(acc.result(b))
    if acc.agg in ("sum", "avg"):
        assert_close(ra, rb, acc.agg)
    else:
        assert ra == rb
        assert encoded(acc, a) == encoded(acc, b)


@pytest.mark.parametrize(("agg", "mode", "column"), ALL_AGGS)
@given(data=st.data())
def test_merge_is_associative(
    agg: str, mode: str | None, column: str | None, data: st.DataObject
) -> None:
    kind = data.draw(st.sampled_from(KINDS_FOR[agg]))
    acc = _acc(agg, mode, column, dtype=DTYPE_OF_KIND[kind])
    n, parts = data.draw(batches(kind))
    a, b, c = (feed(acc, acc.init(n), (parts + [[], [], []])[i], kind) for i in range(3))
    same = np.arange(n)
    left = acc.merge(acc.merge(a, b, same), c, same)
    right = acc.merge(a, acc.merge(b, c, same), same)
    assert_same_state(acc, left, right)


@pytest.mark.parametrize(("agg", "mode", "column"), ALL_AGGS)
@given(data=st.data())
def test_merge_equals_update_on_union(
    agg: str, mode: str | None, column: str | None, data: st.DataObject
) -> None:
    kind = data.draw(st.sampled_from(KINDS_FOR[agg]))
    acc = _acc(agg, mode, column, dtype=DTYPE_OF_KIND[kind])
    n, parts = data.draw(batches(kind))
    rows = [r for part in parts for r in part]
    cut = data.draw(st.integers(0, len(rows)))
    mine, theirs = rows[:cut], rows[cut:]
    # `theirs` lives in another state with its own slot numbering: slot j there is
    # slot mapping[j] here (several may map to one, like merging sessions).
    m = data.draw(st.integers(1, 4))
    mapping = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)))
    theirs = [(s % m, v, t, q) for s, v, t, q in theirs]
    merged = acc.merge(
        feed(acc, acc.init(n), mine, kind), feed(acc, acc.init(m), theirs, kind), mapping
    )
    union = mine + [(int(mapping[s]), v, t, q) for s, v, t, q in theirs]
    assert_same_state(acc, merged, feed(acc, acc.init(n), union, kind))


def test_merge_may_read_the_state_it_merges_into() -> None:
    # Folding slot 1 into slot 0 of the same state, as a session merge does.
    acc = make_accumulator("count")
    s = acc.update(acc.init(2), np.array([0, 1, 1]))
    merged = acc.merge(s, acc.take(s, np.array([1])), np.array([0]))
    assert as_list(acc.result(acc.take(merged, np.array([0])))) == [3]
    assert as_list(acc.result(s)) == [1, 2]  # the input is untouched


# ---------------------------------------------------------------------------
# take / grow / msgpack
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("agg", "mode", "column"), ALL_AGGS)
@given(data=st.data())
def test_msgpack_round_trip_take_and_grow(
    agg: str, mode: str | None, column: str | None, data: st.DataObject
) -> None:
    kind = data.draw(st.sampled_from(KINDS_FOR[agg]))
    acc = _acc(agg, mode, column, dtype=DTYPE_OF_KIND[kind])
    n, parts = data.draw(batches(kind))
    state = acc.init(n)
    for part in parts:
        state = feed(acc, state, part, kind)
    blob = encoded(acc, state)
    back = acc.from_msgpack(msgpack.unpackb(blob))
    assert encoded(acc, back) == blob
    assert as_list(acc.result(back)) == as_list(acc.result(state))

    idx = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=6)), dtype=np.int64)
    taken = acc.take(state, idx)
    assert acc.size(taken) == len(idx)
    assert as_list(acc.result(taken)) == [as_list(acc.result(state))[i] for i in idx]

    grown = acc.grow(state, 2)
    assert acc.size(grown) == n + 2
    empty = as_list(acc.result(acc.init(2)))
    assert as_list(acc.result(grown)) == as_list(acc.result(state)) + empty
    # New slots work like any other.
    grown = acc.update(grown, np.array([n + 1]), pd.Series([None], dtype=object), [0], [99])
    assert acc.size(grown) == n + 2


def test_msgpack_keeps_decimals_and_bytes() -> None:
    for agg, values in (("max", [Decimal("1.5"), Decimal("2.25")]), ("min", [b"b", b"a"])):
        acc = make_accumulator(agg)
        s = acc.update(acc.init(1), np.array([0, 0]), pd.Series(values, dtype=object))
        back = acc.from_msgpack(msgpack.unpackb(encoded(acc, s)))
        assert as_list(acc.result(back)) == as_list(acc.result(s))


def test_from_msgpack_rejects_another_accumulator() -> None:
    count, total = make_accumulator("count"), make_accumulator("sum")
    with pytest.raises(ValueError, match="not sum"):
        total.from_msgpack(count.to_msgpack(count.init(1)))


# ---------------------------------------------------------------------------
# HyperLogLog
# ---------------------------------------------------------------------------

HLL_STANDARD_ERROR = 1.04 / math.sqrt(HLL_REGISTERS)  # ~0.81%


@pytest.mark.parametrize("cardinality", [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000])
def test_hll_within_three_standard_errors(cardinality: int) -> None:
    acc = make_accumulator("count_distinct")
    # Every value twice, in two calls: duplicates must not count.
    values = np.arange(cardinality, dtype=np.int64) * 7919 - 123_456
    state = acc.init(1)
    for _ in range(2):
        state = acc.update(state, np.zeros(cardinality, dtype=np.int64), values)
    estimate = int(acc.result(state)[0])
    assert abs(estimate - cardinality) <= 3 * HLL_STANDARD_ERROR * cardinality + 0.5


@pytest.mark.parametrize("cardinality", [10, 1_000, 100_000])
def test_hll_strings_within_three_standard_errors(cardinality: int) -> None:
    acc = make_accumulator("count_distinct")
    values = pd.Series([f"user-{i}" for i in range(cardinality)], dtype=object)
    state = acc.update(acc.init(1), np.zeros(cardinality, dtype=np.int64), values)
    estimate = int(acc.result(state)[0])
    assert abs(estimate - cardinality) <= 3 * HLL_STANDARD_ERROR * cardinality + 0.5


def test_hll_sparse_sketch_is_small_until_it_would_outgrow_dense() -> None:
    acc = make_accumulator("count_distinct")
    small = acc.update(acc.init(1), np.zeros(10, dtype=np.int64), np.arange(10))
    assert len(encoded(acc, small)) < 200
    assert small.dense.shape[0] == 0
    # Many small sketches stay small: 1000 slots of ~5 values each.
    many = acc.update(acc.init(1000), np.arange(5000) % 1000, np.arange(5000))
    assert len(encoded(acc, many)) < 30 * 1000
    big = acc.update(acc.init(1), np.zeros(100_000, dtype=np.int64), np.arange(100_000))
    assert big.dense.shape[0] == 1
    assert HLL_REGISTERS <= len(encoded(acc, big)) < HLL_REGISTERS + 300
    # The switch happens when the sparse form passes the dense size.
    n_entries = np.diff(small.sparse_offsets)[0]
    assert n_entries <= HLL_SPARSE_MAX_ENTRIES and 3 * HLL_SPARSE_MAX_ENTRIES <= HLL_REGISTERS


def test_hll_merge_of_sparse_and_dense_equals_update_on_union() -> None:
    acc = make_accumulator("count_distinct")
    values = np.arange(60_000)
    dense = acc.update(acc.init(2), np.zeros(50_000, dtype=np.int64), values[:50_000])
    sparse = acc.update(acc.init(1), np.zeros(10_000, dtype=np.int64), values[50_000:])
    merged = acc.merge(dense, sparse, np.array([1]))  # into the empty slot 1
    merged = acc.merge(merged, acc.take(merged, np.array([1])), np.array([0]))
    union = acc.update(acc.init(1), np.zeros(60_000, dtype=np.int64), values)
    assert encoded(acc, acc.take(merged, np.array([0]))) == encoded(acc, union)


def test_hll_hash_is_stable() -> None:
    # Stored sketches stay valid only while these register (index, rank) pairs do: they
    # pin the hash key and pandas' hash_array (SipHash-2-4 for text, splitmix64 for ints).
    acc = make_accumulator("count_distinct")
    cases = [
        (pd.Series(["a", "b", "c", None, "a"]), "0218ee22f326", "030201"),
        (np.array([1, -5, 2**40]), "2a00fd11a415", "010201"),
        (np.array([0.5, 3.0]), "94079d26", "0101"),  # 3.0 hashes as the int 3
    ]
    for values, index_hex, rank_hex in cases:
        state = acc.update(acc.init(1), np.zeros(len(values), dtype=np.int64), values)
        body = acc.to_msgpack(state)
        assert (body["sparse_index"][1].hex(), body["sparse_rank"][1].hex()) == (
            index_hex,
            rank_hex,
        )


# ---------------------------------------------------------------------------
# Exact count_distinct cap and factory errors
# ---------------------------------------------------------------------------


def test_exact_distinct_cap_fails_loudly() -> None:
    acc = make_accumulator("count_distinct", "exact", max_distinct_values_per_group=3)
    s = acc.update(acc.init(2), np.array([0, 0, 0, 0, 1]), np.array([1, 2, 3, 3, 9]))
    assert as_list(acc.result(s)) == [3, 1]
    with pytest.raises(DistinctCapError) as info:
        acc.update(s, np.array([0]), np.array([4]))
    message = str(info.value)
    assert "max_distinct_values_per_group=3" in message
    assert "mode='approximate'" in message and "raise" in message
    assert (info.value.cap, info.value.slot, info.value.count) == (3, 0, 4)
    assert isinstance(info.value, RuntimeError)
    # Merging past the cap fails too.
    with pytest.raises(DistinctCapError):
        acc.merge(s, acc.update(acc.init(1), np.array([0]), np.array([7])), np.array([0]))


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("median",), {}, "`agg` must be one of"),
        (("sum", "exact"), {}, "`mode` only applies"),
        (("count_distinct", "fuzzy"), {}, "`mode` must be one of"),
        (("count_distinct", "exact"), {}, "max_distinct_values_per_group"),
        (("count_distinct", "exact"), {"max_distinct_values_per_group": 0}, "positive"),
        (("min",), {"dtype": "complex"}, "`dtype` must be one of"),
    ],
)
def test_make_accumulator_rejects_bad_config(
    args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        make_accumulator(*args, **kwargs)


def test_update_rejects_out_of_range_slots_and_missing_times() -> None:
    acc = make_accumulator("first")
    with pytest.raises(IndexError):
        acc.update(acc.init(1), np.array([1]), np.array([1]), np.array([0]), np.array([0]))
    with pytest.raises(ValueError, match="event_time_us"):
        acc.update(acc.init(1), np.array([0]), np.array([1]))


def test_hll_agrees_with_the_reference_hyperloglog_package():
    """Cross-check with the `hyperloglog` package at the same precision (p=14)."""
    import hyperloglog
    from interlace.state.accumulators import make_accumulator

    acc = make_accumulator("count_distinct", "approximate")
    for n in (50, 5_000, 20_000):
        values = np.array([f"user-{i}" for i in range(n)], dtype=object)
        ours = int(acc.result(acc.update(acc.init(1), np.zeros(n, dtype=np.int64), values))[0])
        ref = hyperloglog.HyperLogLog(0.01)  # the package's p=14 (its error 1.04/sqrt(2**14))
        assert ref.p == 14
        for v in values:
            ref.add(v)
        tolerance = 3 * 0.0081 * n + 1
        assert abs(ours - n) <= tolerance
        assert abs(len(ref) - n) <= tolerance
        assert abs(ours - len(ref)) <= 2 * tolerance
