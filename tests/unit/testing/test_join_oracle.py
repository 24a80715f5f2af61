"""Hand-computed cases for the join oracle (interlace.testing.oracle), one group per rule.

Times are written in seconds after T0 = 2026-01-01 (naive UTC); ``w(s)`` is the Spark
watermark in epoch milliseconds for ``s`` seconds after T0. Unless a test says otherwise the
spec is an inner join on ``k`` with ``time_window_ms=5_000``, ``lateness_ms=0`` and
``late_data="drop"``, so ``close = t + 5 s`` on both sides and ``wm == W``.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import json
import pkgutil
import sys
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

import interlace.testing.log as log_module
import interlace.testing.oracle as oracle_module
import interlace.testing.oracles as oracles_package
import interlace.testing.oracles.join as join_oracle_module
import interlace.testing.oracles.rows as oracle_rows_module
import interlace.testing.window_oracle as window_oracle_module
from interlace.testing.log import JoinBatch, to_us
from interlace.testing.oracle import (
    DEAD_LETTER_COLUMN,
    JoinOracleResult,
    OracleRow,
    canonical_row,
    canonical_rows,
    oracle_join,
)


def _load_seed003() -> ModuleType:
    import interlace.testing.seed003 as seed003

    return seed003


seed003 = _load_seed003()

T0 = datetime(2026, 1, 1)
T0_MS = 1_767_225_600_000
COLUMNS = ("k", "v", "event_time")
HOWS = ("inner", "left", "right", "full", "left_semi", "left_anti")


def at(seconds: float) -> datetime:
    return T0 + timedelta(microseconds=round(seconds * 1_000_000))


def w(seconds: float) -> int:
    """Spark watermark (epoch ms) for `seconds` after T0."""
    return T0_MS + round(seconds * 1000)


def row(k: Any, v: str, seconds: float) -> dict[str, Any]:
    return {"k": k, "v": v, "event_time": at(seconds)}


def make_spec(**overrides: Any) -> SimpleNamespace:
    fields: dict[str, Any] = {
        "left_keys": ("k",),
        "right_keys": ("k",),
        "how": "inner",
        "time_window_ms": 5_000,
        "event_time_column": "event_time",
        "lateness_ms": 0,
        "late_data": "drop",
    }
    fields.update(overrides)
    return SimpleNamespace(**fields)


def run(spec: SimpleNamespace, batches: list[JoinBatch], policy: str = "min") -> JoinOracleResult:
    return oracle_join(
        spec, batches, left_columns=COLUMNS, right_columns=COLUMNS, watermark_policy=policy
    )


def emitted(result: JoinOracleResult, how: str = "inner") -> list[tuple[Any, ...]]:
    """(batch, left v, right v) per output row, or (batch, v) for semi/anti; sorted."""
    if how in ("left_semi", "left_anti"):
        out = [(o.batch, o.row["v"]) for o in result.rows]
    else:
        out = [(o.batch, o.row["left_v"], o.row["right_v"]) for o in result.rows]
    return sorted(out, key=repr)


def sides(left: int = 0, right: int = 0) -> dict[str, int]:
    return {"left": left, "right": right}


# ---------------------------------------------------------------------------------------
# Time conversion
# ---------------------------------------------------------------------------------------


def test_to_us_is_exact_integer_microseconds() -> None:
    assert to_us(datetime(1970, 1, 1)) == 0
    assert to_us(T0) == T0_MS * 1000
    assert to_us(datetime(2026, 1, 1, 0, 0, 0, 1)) == T0_MS * 1000 + 1
    # Beyond 2**53 µs a float round trip would lose the last microsecond.
    assert to_us(datetime(9999, 12, 31, 23, 59, 59, 999_999)) == 253_402_300_799_999_999
    assert to_us(datetime(1969, 12, 31, 23, 59, 59, 999_999)) == -1


def test_to_us_converts_aware_datetimes_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert to_us(datetime(2026, 1, 1, 2, 0, tzinfo=plus_two)) == T0_MS * 1000
    assert to_us(pd.Timestamp("2026-01-01 00:00:00.000001")) == T0_MS * 1000 + 1


def test_to_us_rejects_non_datetimes() -> None:
    with pytest.raises(TypeError):
        to_us(None)  # type: ignore[arg-type]


def test_spark_event_time_truncates_toward_zero_like_the_jvm() -> None:
    # EventTimeWatermarkExec records micros / 1000 with Long division.
    assert oracle_module.spark_event_time_ms(1_999) == 1
    assert oracle_module.spark_event_time_ms(-1_500) == -1


def test_join_batch_accepts_lists() -> None:
    batch = JoinBatch(left=[row(1, "x", 1)])  # type: ignore[arg-type]
    assert isinstance(batch.left, tuple) and batch.right == ()


# ---------------------------------------------------------------------------------------
# Rule 1: Spark's watermark W
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # after b0: left 8, right 8 -> 8; after b1: left 18, right 8; after b2: right 28.
        ("min", [0, w(8), w(8), w(18)]),
        ("max", [0, w(8), w(18), w(28)]),
    ],
)
def test_each_batch_sees_the_watermark_of_earlier_batches_only(
    policy: str, expected: list[int]
) -> None:
    spec = make_spec(lateness_ms=2_000)
    batches = [
        JoinBatch(left=[row(1, "a", 10)], right=[row(1, "b", 10)]),
        JoinBatch(left=[row(1, "c", 20)]),
        JoinBatch(right=[row(1, "d", 30)]),
    ]
    result = run(spec, batches, policy)
    assert result.spark_watermarks_ms == expected
    assert result.num_batches == 4  # W advanced after the last batch: a trailing one runs


@pytest.mark.parametrize(
    ("policy", "expected", "num_batches"),
    [
        # Spark's WatermarkTracker counts an input that has had no row yet as 0, so under
        # `min` W stays 0 (and no trailing batch runs); `max` follows the left input.
        ("min", [0, 0], 2),
        ("max", [0, w(10), w(20)], 3),
    ],
)
def test_an_input_without_rows_holds_the_min_watermark_at_zero(
    policy: str, expected: list[int], num_batches: int
) -> None:
    batches = [JoinBatch(left=[row(1, "x", 10)]), JoinBatch(left=[row(1, "y", 20)])]
    result = run(make_spec(), batches, policy)
    assert result.spark_watermarks_ms == expected
    assert result.num_batches == num_batches


def test_global_watermark_never_decreases() -> None:
    batches = [
        JoinBatch(left=[row(1, "x", 50)], right=[row(1, "y", 50)]),
        # Older rows: W stays at 50. Not filtered by Spark (batch 0 saw W = 0) but late
        # for the operator (close 15 < wm 50).
        JoinBatch(left=[row(1, "p", 10)], right=[row(1, "q", 10)]),
        # Filtered by Spark: 20 s <= the W batch 1 saw.
        JoinBatch(left=[row(1, "z", 20)]),
    ]
    result = run(make_spec(), batches)
    assert result.spark_watermarks_ms == [0, w(50), w(50)]
    assert result.num_batches == 3
    assert result.late_dropped == sides(1, 1)
    assert result.spark_dropped == sides(1, 0)


@pytest.mark.parametrize(
    ("overrides", "delay_ms"),
    [
        ({"late_data": "drop"}, 2_000),
        ({"late_data": "reopen"}, 4_000),  # allowed lateness defaults to lateness_ms
        ({"late_data": "reopen", "allowed_lateness_ms": 3_000}, 5_000),
        ({"late_data": "dlq"}, 2_000 + 86_400_000),  # default horizon: one day
        ({"late_data": "dlq", "dlq_horizon_ms": 4_000}, 6_000),
    ],
)
def test_spark_delay_is_lateness_plus_horizon(overrides: dict[str, Any], delay_ms: int) -> None:
    spec = make_spec(lateness_ms=2_000, **overrides)
    result = run(spec, [JoinBatch(left=[row(1, "x", 10)], right=[row(1, "y", 10)])])
    assert result.spark_watermarks_ms == [0, w(10) - delay_ms]


# ---------------------------------------------------------------------------------------
# Rule 2: Spark's pre-filter
# ---------------------------------------------------------------------------------------


def test_spark_prefilter_drops_rows_at_or_before_the_previous_batch_watermark() -> None:
    # A wide window (100 s) so the operator itself would accept these rows.
    spec = make_spec(time_window_ms=100_000)
    batches = [
        JoinBatch(left=[row(1, "x", 100)], right=[row(1, "y", 100)]),
        # Sees W = w(100) but the filter uses the W batch 0 saw (0): p passes, matches y.
        JoinBatch(left=[row(1, "p", 50)]),
        # Filter at w(100): q (exactly 100 s) and s are removed, r (1 µs later) passes.
        JoinBatch(
            left=[row(1, "q", 100), row(1, "r", 100.000001)], right=[row(1, "s", 99)]
        ),
    ]
    result = run(spec, batches)
    assert result.spark_watermarks_ms == [0, w(100), w(100)]
    assert emitted(result) == [(0, "x", "y"), (1, "p", "y"), (2, "r", "y")]
    assert result.spark_dropped == sides(1, 1)
    assert result.late_dropped == sides(0, 0)


def test_spark_prefilter_without_a_watermark_removes_rows_at_or_before_the_epoch() -> None:
    # Spark filters `t <= W` with W = 0 before it has a watermark (measured on Spark 4.3 in
    # tests/replay/test_hostile_spark.py): after the epoch nothing goes, at or before it all.
    assert oracle_module.spark_drops_row(5_000_000, 0) is False
    assert oracle_module.spark_drops_row(1, 0) is False
    assert oracle_module.spark_drops_row(0, 0) is True
    assert oracle_module.spark_drops_row(-5_000_000, 0) is True
    assert oracle_module.spark_drops_row(1_000, 1) is True
    assert oracle_module.spark_drops_row(1_001, 1) is False


# ---------------------------------------------------------------------------------------
# Rule 3: the trailing no-data batch
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("left", [(1, "z", "w"), (2, "x", None)]),
        ("full", [(1, "z", "w"), (2, "x", None), (2, None, "y")]),
    ],
)
def test_trailing_no_data_batch_evicts_with_the_final_watermark(
    how: str, expected: list[tuple[Any, ...]]
) -> None:
    batches = [
        JoinBatch(left=[row(1, "x", 10)], right=[row(2, "y", 10)]),
        JoinBatch(left=[row(3, "z", 30)], right=[row(3, "w", 30)]),
    ]
    result = run(make_spec(how=how), batches)
    # Batch 1 sees W = 10 (x and y close at 15: kept); the trailing batch 2 sees 30.
    assert result.spark_watermarks_ms == [0, w(10), w(30)]
    assert result.num_batches == 3
    assert emitted(result) == expected


def test_no_trailing_batch_when_the_watermark_did_not_advance() -> None:
    batches = [
        JoinBatch(left=[row(1, "x", 10)], right=[row(1, "y", 10)]),
        # close(p) = 10 s = wm: not late (strict), and it matches y.
        JoinBatch(left=[row(1, "p", 5)]),
    ]
    result = run(make_spec(), batches)
    assert result.spark_watermarks_ms == [0, w(10)]
    assert result.num_batches == 2
    assert emitted(result) == [(0, "x", "y"), (1, "p", "y")]


def test_empty_log_runs_no_batch() -> None:
    result = run(make_spec(), [])
    assert (result.rows, result.spark_watermarks_ms, result.num_batches) == ([], [], 0)
    assert result.output_columns == [
        "left_k", "left_v", "left_event_time", "right_k", "right_v", "right_event_time"
    ]


# ---------------------------------------------------------------------------------------
# Rule 4: no operator watermark while W <= 0
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "watermarks", "expected", "spark_dropped"),
    [
        # min: the right input never has a row, so W stays 0: nothing late, nothing evicted.
        ("min", [0, 0, 0], [], 0),
        # max: batch 2 sees W = 100 and evicts x (close 15); z (5 s <= the W batch 1
        # saw, 10 s) never reaches the operator.
        ("max", [0, w(10), w(100)], [(2, "x", None)], 1),
    ],
)
def test_nothing_is_late_or_evicted_before_spark_has_a_watermark(
    policy: str, watermarks: list[int], expected: list[tuple[Any, ...]], spark_dropped: int
) -> None:
    batches = [
        JoinBatch(left=[row(1, "x", 10)]),
        JoinBatch(left=[row(1, "y", 100)]),
        JoinBatch(left=[row(1, "z", 5)]),
    ]
    result = run(make_spec(how="left"), batches, policy)
    assert result.spark_watermarks_ms == watermarks
    assert emitted(result, "left") == expected
    assert result.late_dropped == sides(0, 0)
    assert result.spark_dropped == sides(spark_dropped, 0)


# ---------------------------------------------------------------------------------------
# Rule 5: late rows (drop / reopen / dlq)
# ---------------------------------------------------------------------------------------


def test_drop_discards_rows_strictly_past_their_close_time() -> None:
    batches = [
        JoinBatch(left=[row(1, "x", 100)], right=[row(1, "y", 100)]),
        # wm = 100 s. p: close 99 (late); q: close 100 (kept, `>` is strict).
        # r: close 99.999 (late); s: close 100 (kept) and matches x and q.
        JoinBatch(
            left=[row(1, "p", 94), row(1, "q", 95)],
            right=[row(1, "r", 94.999), row(1, "s", 95)],
        ),
    ]
    result = run(make_spec(), batches)
    assert emitted(result) == [(0, "x", "y"), (1, "q", "s"), (1, "q", "y"), (1, "x", "s")]
    assert result.late_dropped == sides(1, 1)
    assert result.num_batches == 2


def test_reopen_late_rows_within_the_allowance_still_match() -> None:
    batches = [
        JoinBatch(left=[row(1, "x", 100)], right=[row(1, "y", 100), row(1, "r", 97)]),
        # Under reopen (AL 3 s) W = 97 and wm = W + H = 100 s; close = t + 5 + 3.
        # p@94: close 102, kept, matches r@97. q@91.999: close 99.999, late.
        # s@92.5 (right): close 100.5, kept, matches p@94 (but not x@100: 7.5 s apart).
        JoinBatch(left=[row(1, "p", 94), row(1, "q", 91.999)], right=[row(1, "s", 92.5)]),
    ]
    reopen = run(make_spec(late_data="reopen", allowed_lateness_ms=3_000), batches)
    assert reopen.spark_watermarks_ms == [0, w(97)]
    assert emitted(reopen) == [(0, "x", "r"), (0, "x", "y"), (1, "p", "r"), (1, "p", "s")]
    assert reopen.late_dropped == sides(1, 0)

    # The same log under drop: close = t + 5 and wm = 100, so p, q and s are all late.
    drop = run(make_spec(), batches)
    assert emitted(drop) == [(0, "x", "r"), (0, "x", "y")]
    assert drop.late_dropped == sides(2, 1)


@pytest.mark.parametrize(
    ("late_data", "watermarks", "u_batch"),
    [
        # drop: close(u) = 105; batch 2 sees W = wm = 107.5 > 105.
        ("drop", [0, w(100), w(107.5), w(111)], 2),
        # reopen: close(u) = 108; batch 2 sees W = 104.5, wm = 107.5 (not > 108); the
        # trailing batch 3 sees W = 108, wm = 111.
        ("reopen", [0, w(97), w(104.5), w(108)], 3),
    ],
)
def test_reopen_holds_unmatched_outer_rows_until_the_allowance_passes(
    late_data: str, watermarks: list[int], u_batch: int
) -> None:
    spec = make_spec(how="left", late_data=late_data, allowed_lateness_ms=3_000)
    batches = [
        JoinBatch(left=[row(1, "u", 100)], right=[row(2, "v", 100)]),
        JoinBatch(left=[row(3, "m", 107.5)], right=[row(3, "n", 107.5)]),
        JoinBatch(left=[row(4, "o", 111)], right=[row(4, "w", 111)]),
    ]
    result = run(spec, batches)
    assert result.spark_watermarks_ms == watermarks
    assert emitted(result, "left") == [(1, "m", "n"), (2, "o", "w"), (u_batch, "u", None)]


@pytest.mark.parametrize("horizon_ms", [None, 10_000])
def test_dlq_turns_late_rows_into_dead_letters(horizon_ms: int | None) -> None:
    spec = make_spec(late_data="dlq", dlq_horizon_ms=horizon_ms)
    batches = [
        JoinBatch(left=[row(1, "x", 100)], right=[row(1, "y", 100)]),
        # wm = W + H = 100 s whatever H: p (close 99) and s (close 99.5) are late.
        JoinBatch(left=[row(1, "p", 94)], right=[row(1, "s", 94.5)]),
    ]
    result = run(spec, batches)
    horizon = 86_400_000 if horizon_ms is None else horizon_ms
    assert result.spark_watermarks_ms == [0, w(100) - horizon]
    assert result.output_columns[-1] == DEAD_LETTER_COLUMN
    assert result.dead_lettered == sides(1, 1)
    assert result.late_dropped == sides(0, 0)

    normal, dead_p, dead_s = result.rows
    assert normal.batch == 0 and normal.row[DEAD_LETTER_COLUMN] is None
    assert normal.row["left_v"] == "x" and normal.row["right_v"] == "y"
    assert dead_p.batch == dead_s.batch == 1
    assert dead_p.row == {
        "left_k": None,
        "left_v": None,
        "left_event_time": None,
        "right_k": None,
        "right_v": None,
        "right_event_time": None,
        DEAD_LETTER_COLUMN: (
            '{"side": "left", "reason": "late", "watermark": 1767225700000, '
            '"row": {"k": 1, "v": "p", "event_time": "2026-01-01T00:01:34.000000"}}'
        ),
    }
    assert json.loads(dead_s.row[DEAD_LETTER_COLUMN]) == {
        "side": "right",
        "reason": "late",
        "watermark": w(100),
        "row": {"k": 1, "v": "s", "event_time": "2026-01-01T00:01:34.500000"},
    }


def test_dead_letter_row_holds_every_input_column_as_json() -> None:
    left_columns = ("k", "v", "event_time", "day", "amount", "raw", "nan", "inf", "flag",
                    "nothing", "items", "count")
    late = {
        **row(1, "p", 94.000123),
        "day": date(2026, 1, 2),
        "amount": Decimal("1.50"),
        "raw": b"\x00\xff",
        "nan": float("nan"),
        "inf": float("-inf"),
        "flag": True,
        "nothing": None,
        "items": [1, 2.5, float("nan")],
        "count": np.int64(7),
    }
    on_time = {**late, **row(1, "x", 100)}
    batches = [
        JoinBatch(left=[on_time], right=[row(1, "y", 100)]),
        JoinBatch(left=[late]),
    ]
    result = oracle_join(
        make_spec(late_data="dlq", dlq_horizon_ms=1_000, output_left_columns=("v",)),
        batches,
        left_columns=left_columns,
        right_columns=COLUMNS,
    )
    assert result.output_columns == [
        "left_v", "right_k", "right_v", "right_event_time", DEAD_LETTER_COLUMN
    ]
    (dead,) = [o for o in result.rows if o.row[DEAD_LETTER_COLUMN] is not None]
    assert json.loads(dead.row[DEAD_LETTER_COLUMN])["row"] == {
        "k": 1,
        "v": "p",
        "event_time": "2026-01-01T00:01:34.000123",
        "day": "2026-01-02",
        "amount": "1.50",
        "raw": "AP8=",
        "nan": None,
        "inf": None,
        "flag": True,
        "nothing": None,
        "items": [1, 2.5, None],
        "count": 7,
    }


def test_late_row_with_a_null_key_counts_as_late() -> None:
    batches = [
        JoinBatch(left=[row(1, "x", 100)], right=[row(1, "y", 100)]),
        JoinBatch(left=[row(None, "n", 90)]),
    ]
    result = run(make_spec(how="left"), batches)
    assert emitted(result, "left") == [(0, "x", "y")]
    assert result.late_dropped == sides(1, 0)
    assert result.null_key_dropped == sides(0, 0)


# ---------------------------------------------------------------------------------------
# Rule 6: null keys
# ---------------------------------------------------------------------------------------

NK_COLUMNS = ("k1", "k2", "v", "event_time")


def nk_row(k1: Any, k2: Any, v: str) -> dict[str, Any]:
    return {"k1": k1, "k2": k2, "v": v, "event_time": at(100)}


@pytest.mark.parametrize(
    ("how", "expected", "null_key_dropped"),
    [
        ("inner", [(0, "l", "r")], sides(2, 2)),
        ("left", [(0, "l", "r"), (0, "ln", None), (0, "ln2", None)], sides(0, 2)),
        ("right", [(0, "l", "r"), (0, None, "rn"), (0, None, "rn2")], sides(2, 0)),
        (
            "full",
            [(0, "l", "r"), (0, "ln", None), (0, "ln2", None), (0, None, "rn"),
             (0, None, "rn2")],
            sides(0, 0),
        ),
        ("left_semi", [(0, "l")], sides(2, 2)),
        ("left_anti", [(0, "ln"), (0, "ln2")], sides(0, 2)),
    ],
)
def test_null_keys_never_match_and_preserved_sides_emit_them_at_once(
    how: str, expected: list[tuple[Any, ...]], null_key_dropped: dict[str, int]
) -> None:
    spec = make_spec(how=how, left_keys=("k1", "k2"), right_keys=("k1", "k2"))
    batches = [
        JoinBatch(
            left=[nk_row(1, None, "ln"), nk_row(None, None, "ln2"), nk_row(1, 1, "l")],
            right=[nk_row(None, 1, "rn"), nk_row(None, None, "rn2"), nk_row(1, 1, "r")],
        )
    ]
    result = oracle_join(spec, batches, left_columns=NK_COLUMNS, right_columns=NK_COLUMNS)
    # The trailing batch (W = 100 s, l and r close at 105 s) emits nothing.
    assert result.num_batches == 2
    assert emitted(result, how) == sorted(expected, key=repr)
    assert result.null_key_dropped == null_key_dropped


# ---------------------------------------------------------------------------------------
# Rule 7: matching and ingest order
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lower_ms", "upper_ms", "right_seconds", "matched"),
    [
        # r.t BETWEEN l.t AND l.t + 10 s
        (0, 10_000, [99.999, 100, 110, 110.001], ["r1", "r2"]),
        # r.t BETWEEN l.t - 10 s AND l.t - 2 s
        (-10_000, -2_000, [89.999, 90, 98, 98.001], ["r1", "r2"]),
    ],
)
def test_asymmetric_bounds_are_inclusive(
    lower_ms: int, upper_ms: int, right_seconds: list[float], matched: list[str]
) -> None:
    spec = make_spec(time_window_ms=None, lower_ms=lower_ms, upper_ms=upper_ms)
    rights = [row(1, f"r{i}", s) for i, s in enumerate(right_seconds)]
    result = run(spec, [JoinBatch(left=[row(1, "l", 100)], right=rights)])
    assert emitted(result) == [(0, "l", name) for name in matched]


def test_asymmetric_close_times_left_t_plus_upper_right_t_minus_lower() -> None:
    # lower 0, upper 10 s: close(left) = t + 10 s, close(right) = t.
    spec = make_spec(how="full", time_window_ms=None, lower_ms=0, upper_ms=10_000)
    batches = [
        JoinBatch(left=[row(4, "l4", 100)], right=[row(2, "r", 100), row(3, "r3", 100)]),
        # wm = 100 s. l_ok@90.5: close 100.5, kept, matches r (r.t - l.t = 9.5 s).
        # late_r@99.999: close 99.999 < 100, late. z and zz match each other.
        JoinBatch(
            left=[row(2, "l_ok", 90.5), row(9, "z", 105)],
            right=[row(2, "late_r", 99.999), row(9, "zz", 105)],
        ),
    ]
    result = run(spec, batches)
    # Trailing batch 2 (wm 105): r3 (close 100) is evicted unmatched; l4 (close 110) is
    # still buffered, so it is never emitted.
    assert result.spark_watermarks_ms == [0, w(100), w(105)]
    assert emitted(result) == [(1, "l_ok", "r"), (1, "z", "zz"), (2, None, "r3")]
    assert result.late_dropped == sides(0, 1)


def test_pair_arriving_in_one_batch_is_emitted_once() -> None:
    result = run(make_spec(), [JoinBatch(left=[row(1, "l", 100)], right=[row(1, "r", 100)])])
    assert emitted(result) == [(0, "l", "r")]


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        (
            "inner",
            [(0, "l1", "r1"), (0, "l1", "r2"), (0, "l2", "r1"), (0, "l2", "r2"),
             (1, "l1", "r3"), (1, "l2", "r3")],
        ),
        ("left_semi", [(0, "l1"), (0, "l2")]),  # once each, at the first match
        ("left_anti", []),
    ],
)
def test_duplicate_timestamps_each_pair_once(how: str, expected: list[tuple[Any, ...]]) -> None:
    batches = [
        JoinBatch(
            left=[row(1, "l1", 100), row(1, "l2", 100)],
            right=[row(1, "r1", 100), row(1, "r2", 100)],
        ),
        JoinBatch(right=[row(1, "r3", 100)]),
    ]
    assert emitted(run(make_spec(how=how), batches), how) == expected


def test_identical_rows_are_distinct_buffer_entries() -> None:
    same = row(1, "l", 100)
    result = run(make_spec(), [JoinBatch(left=[same, dict(same)], right=[row(1, "r", 100)])])
    canonical = canonical_rows(result.rows)
    assert len(canonical) == 2 and canonical[0] == canonical[1]


# ---------------------------------------------------------------------------------------
# Rule 8: eviction, and unmatched rows only at eviction
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("inner", [(1, "x", "y"), (3, "m", "n")]),
        ("left", [(1, "x", "y"), (3, "m", "n"), (4, "u", None)]),
        ("right", [(1, "x", "y"), (3, "m", "n"), (4, None, "w")]),
        ("full", [(1, "x", "y"), (3, "m", "n"), (4, "u", None), (4, None, "w")]),
        ("left_semi", [(1, "x"), (3, "m")]),
        ("left_anti", [(4, "u")]),
    ],
)
def test_unmatched_rows_are_emitted_only_at_eviction(
    how: str, expected: list[tuple[Any, ...]]
) -> None:
    batches = [
        JoinBatch(left=[row(1, "x", 100), row(2, "u", 100)], right=[row(3, "w", 100)]),
        JoinBatch(right=[row(1, "y", 104)]),  # x matches late in its window: no x-null
        JoinBatch(left=[row(4, "m", 110)]),
        JoinBatch(right=[row(4, "n", 110)]),
    ]
    result = run(make_spec(how=how), batches)
    # W stays at or below 104 s through batch 3 (u and w close at 105 s); the trailing
    # batch 4 sees 110 s and evicts them.
    assert result.spark_watermarks_ms == [0, w(100), w(100), w(104), w(110)]
    assert emitted(result, how) == sorted(expected, key=repr)


# ---------------------------------------------------------------------------------------
# Rule 9: output columns
# ---------------------------------------------------------------------------------------


def test_output_columns_use_prefixes_and_the_chosen_columns_in_order() -> None:
    spec = make_spec(
        left_prefix="l.", right_prefix="r.", output_left_columns=("v", "k"),
        output_right_columns=("v",),
    )
    result = run(spec, [JoinBatch(left=[row(1, "x", 100)], right=[row(1, "y", 100)])])
    assert result.output_columns == ["l.v", "l.k", "r.v"]
    (only,) = result.rows
    assert list(only.row.items()) == [("l.v", "x"), ("l.k", 1), ("r.v", "y")]


@pytest.mark.parametrize("how", ["left_semi", "left_anti"])
@pytest.mark.parametrize("late_data", ["drop", "dlq"])
def test_semi_and_anti_output_the_left_columns_unprefixed(how: str, late_data: str) -> None:
    result = run(make_spec(how=how, late_data=late_data), [])
    expected = list(COLUMNS) + ([DEAD_LETTER_COLUMN] if late_data == "dlq" else [])
    assert result.output_columns == expected


def test_per_side_event_time_columns() -> None:
    spec = make_spec(
        event_time_column=None, left_event_time_column="lt", right_event_time_column="rt"
    )
    batches = [
        JoinBatch(
            left=[{"k": 1, "v": "x", "lt": at(100)}],
            right=[{"k": 1, "v": "y", "rt": at(104)}],
        )
    ]
    result = oracle_join(spec, batches, left_columns=("k", "v", "lt"),
                         right_columns=("k", "v", "rt"))
    assert [(o.row["left_v"], o.row["right_v"]) for o in result.rows] == [("x", "y")]
    assert result.spark_watermarks_ms == [0, w(100)]


def test_explicit_none_attributes_take_the_defaults() -> None:
    full = make_spec(
        lower_ms=None, upper_ms=None, left_event_time_column=None,
        right_event_time_column=None, allowed_lateness_ms=None, dlq_horizon_ms=None,
        left_prefix=None, right_prefix=None, output_left_columns=None,
        output_right_columns=None,
    )
    batches = [JoinBatch(left=[row(1, "x", 100)], right=[row(1, "y", 100)])]
    assert run(full, batches) == run(make_spec(), batches)


@pytest.mark.parametrize(
    ("overrides", "policy"),
    [
        ({"how": "cross"}, "min"),
        ({"late_data": "retry"}, "min"),
        ({"time_window_ms": None, "lower_ms": 5, "upper_ms": 1}, "min"),
        ({"time_window_ms": None}, "min"),
        ({"late_data": "reopen"}, "min"),  # allowance defaults to lateness_ms = 0
        ({"left_prefix": "", "right_prefix": ""}, "min"),  # colliding output columns
        ({"right_keys": ()}, "min"),
        ({"event_time_column": None}, "min"),
        ({"time_mode": "processing"}, "min"),
        ({}, "avg"),
    ],
)
def test_unmodellable_specs_are_rejected(overrides: dict[str, Any], policy: str) -> None:
    with pytest.raises(ValueError):
        run(make_spec(**overrides), [], policy)


def test_null_event_time_is_rejected() -> None:
    bad = {"k": 1, "v": "x", "event_time": None}
    with pytest.raises(ValueError, match="null event time"):
        run(make_spec(), [JoinBatch(left=[bad])])


# ---------------------------------------------------------------------------------------
# canonical_rows
# ---------------------------------------------------------------------------------------


def test_canonical_rows_normalise_pandas_and_numpy_values() -> None:
    plain = [
        {"a": 1, "b": None, "t": datetime(2026, 1, 1, 0, 0, 0, 5), "f": 0.0},
        {"a": 2, "b": 1.5, "t": None, "f": 2.0},
    ]
    flavoured = [
        {"f": np.float64(2.0), "t": pd.NaT, "b": np.float64(1.5), "a": np.int64(2)},
        {
            "a": 1,
            "b": float("nan"),
            "t": pd.Timestamp("2026-01-01 01:00:00.000005", tz="Europe/Paris"),
            "f": -0.0,
        },
    ]
    assert canonical_rows(flavoured) == canonical_rows(plain)
    assert canonical_row({"t": np.datetime64("2026-01-01T00:00:00.000005000")}) == (
        ("t", datetime(2026, 1, 1, 0, 0, 0, 5)),
    )


def test_canonical_rows_compare_multisets() -> None:
    assert canonical_rows([{"a": 1}, {"a": 1}]) != canonical_rows([{"a": 1}])
    assert canonical_rows([{"a": None}, {"a": "x"}, {"a": 3}]) == canonical_rows(
        [{"a": 3}, {"a": "x"}, {"a": None}]
    )


def test_canonical_rows_parse_dead_letters() -> None:
    ours = {"v": None, DEAD_LETTER_COLUMN: json.dumps({"side": "left", "row": {"a": 1, "b": 2}})}
    theirs = {DEAD_LETTER_COLUMN: '{"row":{"b":2,"a":1},"side":"left"}', "v": None}
    assert canonical_rows([ours]) == canonical_rows([theirs])
    assert canonical_rows([ours]) != canonical_rows([{**theirs, DEAD_LETTER_COLUMN: "{}"}])


def test_canonical_rows_accept_oracle_rows_and_spark_like_rows() -> None:
    class FakeSparkRow:
        def asDict(self, recursive: bool = False) -> dict[str, Any]:  # noqa: N802
            return {"a": 1, "b": [1, 2]}

    expected = canonical_rows([{"a": 1, "b": (1, 2)}])
    assert canonical_rows([FakeSparkRow()]) == expected  # type: ignore[list-item]
    assert canonical_rows([OracleRow(batch=0, row={"b": [1, 2], "a": 1})]) == expected
    assert all(hash(r) is not None for r in expected)


def test_canonical_rows_of_an_oracle_result_per_batch() -> None:
    batches = [JoinBatch(left=[row(1, "x", 100)], right=[row(1, "y", 100)])]
    result = run(make_spec(how="left"), batches)
    by_batch = result.rows_by_batch()
    assert set(by_batch) == {0, 1}
    assert canonical_rows(by_batch[0]) == canonical_rows(result.rows_for_batch(0))
    assert by_batch[1] == []


# ---------------------------------------------------------------------------------------
# The docstring examples run
# ---------------------------------------------------------------------------------------


# The join oracle's examples moved with its code into interlace.testing.oracles (join.py,
# rows.py); the public path interlace.testing.oracle keeps an example of its own.
@pytest.mark.parametrize(
    "module", [log_module, oracle_module, join_oracle_module, oracle_rows_module]
)
def test_docstring_examples(module: ModuleType) -> None:
    failures, tried = doctest.testmod(module)
    assert tried > 0 and failures == 0


# Every module of the oracles package (the table-join oracles too, once they land) and the
# public paths that re-export it.
ORACLE_MODULES = [
    log_module,
    oracle_module,
    window_oracle_module,
    oracles_package,
    *(
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(
            oracles_package.__path__, prefix=oracles_package.__name__ + "."
        )
    ),
]


def test_every_oracle_module_is_checked() -> None:
    names = {module.__name__ for module in ORACLE_MODULES}
    for suffix in ("join", "window", "window_aggregates", "spark_rules", "rows", "resolve"):
        assert f"interlace.testing.oracles.{suffix}" in names


@pytest.mark.parametrize("module", ORACLE_MODULES, ids=lambda module: module.__name__)
def test_oracle_imports_only_the_standard_library_and_itself(module: ModuleType) -> None:
    tree = ast.parse(Path(module.__file__ or "").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    for name in imported:
        top = name.split(".")[0]
        assert name == "interlace.testing.log" or top in sys.stdlib_module_names or (
            top == "__future__"
        ) or name.split(".")[:3] == ["interlace", "testing", "oracles"], name


# ---------------------------------------------------------------------------------------
# Seed 003: Kafka Streams' improved left/outer stream-stream join (window 15, grace 5)
# ---------------------------------------------------------------------------------------
#
# Log: one micro-batch per table record (batch 0 = A@3 ... batch 11 = G@100), then the
# sentinel batch 12 (SL, SR on another key at 1000 s), then the trailing no-data batch 13.
# Spark delay = lateness 0 + H 5 s; wm = W + 5 s; close = t + 15 + 5 on both sides.
#
# Hand computation, times in seconds after T0 (per-input watermark = max seen - 5):
#
#   batch  record  W seen (min)  wm (min)   W seen (max)  wm (max)
#   0      A@3     0 (none)      none       0 (none)      none
#   1      a@4     0 (*)         none       -2            3
#   2      B@5     -2            3          -1            4
#   3      b@6     -1            4          0             5
#   4      C@9     0             5          1             6
#   5      c@10    1             6          4             9
#   6      d@14    4             9          5             10
#   7      D@15    4             9          9             14
#   8      E@40    9             14         10            15
#   9      F@60    9             14         35            40
#   10     f@80    9             14         55            60
#   11     G@100   55            60         75            80
#   12     SL, SR  75            80         95            100
#   13     (none)  995           1000       995           1000
#
#   (*) under min, the right input has had no row after batch 0 and counts as 0, so W
#   stays 0. "-2" etc. are relative to T0, i.e. positive epoch values: a watermark.
#
# Inner pairs: every wm before batch 11 is <= 14 s while every table row closes at >= 23 s,
# so nothing is late or evicted early and each pair is emitted when its second row
# arrives: exactly the table's batches.
#
# Null-padded rows: closes are E 60, F 80, f 100, G 120 (s); a row goes in the first batch
# with wm > close (strict):
#
#   row      Kafka table   oracle (min)   oracle (max)
#   E-null   9  (F@60)     12             11
#   F-null   10 (f@80)     13             12
#   null-f   11 (G@100)    13             13
#   G-null   -             13             13
#
# The brief expected "exactly one micro-batch later than Kafka". That holds for neither
# policy; SEMANTICS.md wins and the difference decomposes as:
#   +1  Spark's W only reflects earlier micro-batches (Kafka's stream time includes the
#       current record);
#   +1  the table emits at stream time == t + after + grace (E@40 at ts 60), but
#       SEMANTICS.md §2 evicts only when wm > close, strictly. (Kafka's code agrees with
#       the strict rule: KStreamKStreamJoin.emitNonJoinedOuterRecords skips records while
#       `timestamp + joinAfterMs + joinGraceMs >= streamTime`; the wiki table is off by
#       one there.) So under `max`, which like Kafka's stream time follows the furthest
#       input, every row comes exactly 2 batches after the table;
#   +0/+1 more under `min` (Spark's default): W follows the slower input, here the right
#       one (no right record between d@14 and f@80), so E-null and F-null come 3 batches
#       after the table, null-f 2.
# The sentinels SL and SR match each other in batch 12 and close at 1020 s > 1000 s, so they
# are never evicted.

SEED_BATCHES = len(seed003.KAFKA_TABLE) + 2  # + sentinel batch + trailing no-data batch
SENTINEL_PAIR = ("SL", "SR")
NULL_PADDED = {
    "min": {("E", None): 12, ("F", None): 13, (None, "f"): 13, ("G", None): 13},
    "max": {("E", None): 11, ("F", None): 12, (None, "f"): 13, ("G", None): 13},
}
SEED_WATERMARKS_S = {
    "min": [None, None, -2, -1, 0, 1, 4, 4, 9, 9, 9, 55, 75, 995],
    "max": [None, -2, -1, 0, 1, 4, 5, 9, 10, 35, 55, 75, 95, 995],
}


def run_seed003(how: str, policy: str) -> JoinOracleResult:
    spec = SimpleNamespace(how=how, **seed003.JOIN_KWARGS)
    return oracle_join(
        spec,
        seed003.build_log(),
        left_columns=seed003.COLUMNS,
        right_columns=seed003.COLUMNS,
        watermark_policy=policy,
    )


def seed_pairs(result: JoinOracleResult) -> dict[tuple[Any, Any], int]:
    pairs: dict[tuple[Any, Any], int] = {}
    for out in result.rows:
        pair = (out.row["left_v"], out.row["right_v"])
        assert pair not in pairs, f"{pair} emitted twice"
        pairs[pair] = out.batch
    return pairs


def test_seed003_log_shape() -> None:
    log = seed003.build_log()
    assert len(log) == 13 and seed003.SENTINEL_BATCH == 12
    assert [len(b.left) + len(b.right) for b in log] == [1] * 12 + [2]
    assert log[0].left[0] == {"k": "k1", "v": "A", "event_time": datetime(2026, 1, 1, 0, 0, 3)}


@pytest.mark.parametrize("policy", ["min", "max"])
def test_seed003_watermarks(policy: str) -> None:
    result = run_seed003("inner", policy)
    expected = [0 if s is None else w(s) for s in SEED_WATERMARKS_S[policy]]
    assert result.spark_watermarks_ms == expected
    assert result.num_batches == SEED_BATCHES


@pytest.mark.parametrize("policy", ["min", "max"])
def test_seed003_inner_join_matches_the_table_batch_for_batch(policy: str) -> None:
    pairs = seed_pairs(run_seed003("inner", policy))
    table = seed003.kafka_emit_batches("inner")
    assert len(table) == 16
    assert pairs == {**table, SENTINEL_PAIR: seed003.SENTINEL_BATCH}


@pytest.mark.parametrize("policy", ["min", "max"])
@pytest.mark.parametrize(("how", "table_column"), [("left", "left"), ("full", "outer")])
def test_seed003_left_and_outer_joins(how: str, table_column: str, policy: str) -> None:
    pairs = seed_pairs(run_seed003(how, policy))
    table = seed003.kafka_emit_batches(table_column)
    inner = seed003.kafka_emit_batches("inner")

    # Inner pairs: exactly where Kafka emits them.
    assert {p: b for p, b in pairs.items() if None not in p} == {
        **inner, SENTINEL_PAIR: seed003.SENTINEL_BATCH
    }

    # Null-padded pairs: the table's (plus G-null, after the table ends), in the batches
    # computed by hand above; none is emitted before its row is evicted.
    null_padded = {p: b for p, b in pairs.items() if None in p}
    expected = {
        p: b for p, b in NULL_PADDED[policy].items() if how == "full" or p[0] is not None
    }
    assert null_padded == expected
    table_null_padded = {p: b for p, b in table.items() if None in p}
    assert set(table_null_padded) == set(expected) - {("G", None)}
    delays = {p: null_padded[p] - b for p, b in table_null_padded.items()}
    if policy == "max":
        assert set(delays.values()) == {2}
    else:
        assert delays == {
            p: d for p, d in {("E", None): 3, ("F", None): 3, (None, "f"): 2}.items() if p in delays
        }


@pytest.mark.parametrize("policy", ["min", "max"])
def test_seed003_right_join(policy: str) -> None:
    pairs = seed_pairs(run_seed003("right", policy))
    assert pairs == {
        **seed003.kafka_emit_batches("inner"),
        SENTINEL_PAIR: seed003.SENTINEL_BATCH,
        (None, "f"): 13,
    }


@pytest.mark.parametrize("policy", ["min", "max"])
def test_seed003_left_semi_emits_each_left_row_once_at_its_first_match(policy: str) -> None:
    result = run_seed003("left_semi", policy)
    assert [(o.batch, o.row["v"]) for o in result.rows] == [
        (1, "A"), (2, "B"), (4, "C"), (7, "D"), (12, "SL")
    ]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("min", [(12, "E"), (13, "F"), (13, "G")]),
        ("max", [(11, "E"), (12, "F"), (13, "G")]),
    ],
)
def test_seed003_left_anti_emits_unmatched_left_rows_at_eviction(
    policy: str, expected: list[tuple[int, str]]
) -> None:
    result = run_seed003("left_anti", policy)
    assert [(o.batch, o.row["v"]) for o in result.rows] == expected


@pytest.mark.parametrize("policy", ["min", "max"])
def test_seed003_nothing_is_dropped(policy: str) -> None:
    result = run_seed003("full", policy)
    for counter in (result.late_dropped, result.null_key_dropped, result.spark_dropped,
                    result.dead_lettered):
        assert counter == sides(0, 0)
