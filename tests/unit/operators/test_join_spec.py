"""Config errors (SEMANTICS §6) raised when a Join is built, naming the field and the fix."""

from __future__ import annotations

import pyarrow as pa
import pytest
from interlace.operators.join import JoinPlan

from interlace import ConfigError, Join

LEFT = pa.schema([("id", pa.int64()), ("v", pa.string()), ("ts", pa.timestamp("ns"))])
RIGHT = pa.schema([("id", pa.int64()), ("v", pa.string()), ("ts", pa.timestamp("ns"))])
OK = dict(left_keys=["id"], right_keys=["id"], time_window_ms=1000, event_time_column="ts")


def make(**kw):
    args = dict(OK)
    args.update(kw)
    return Join(**{k: v for k, v in args.items() if v is not ...})


@pytest.mark.parametrize(
    ("kw", "pattern"),
    [
        (dict(left_keys=[], right_keys=[]), r"`left_keys` and `right_keys` must be non-empty"),
        (dict(right_keys=["id", "x"]), r"equal length"),
        (dict(left_keys="id"), r"`left_keys` must be a list"),
        (dict(time_window_ms=None, lower_ms=10, upper_ms=5), r"`lower_ms` must be <= `upper_ms`"),
        (dict(time_window_ms=None), r"needs a time bound"),
        (dict(lower_ms=0, upper_ms=5), r"either `time_window_ms`"),
        (dict(time_window_ms=-1), r"`time_window_ms` must be >= 0"),
        (dict(how="outer"), r"`how` must be one of 'inner', 'left', 'right', 'full'"),
        (dict(late_data="retry"), r"`late_data` must be one of"),
        (dict(late_data="reopen"), r"`allowed_lateness_ms` must be > 0 under late_data='reopen'"),
        (dict(late_data="reopen", allowed_lateness_ms=0, lateness_ms=5), r"must be > 0"),
        (dict(allowed_lateness_ms=5), r"only applies to late_data='reopen'"),
        (dict(event_time_column=None), r"no event-time column for the left input"),
        (dict(event_time_column=None, left_event_time_column="ts"), r"for the right input"),
        (dict(lateness_ms=1.5), r"`lateness_ms` must be an int"),
        (dict(key_groups=0), r"`key_groups` must be in"),
        (dict(time_mode="wall"), r"`time_mode` must be one of"),
    ],
)
def test_bad_spec_is_rejected_with_field_and_fix(kw, pattern):
    with pytest.raises(ConfigError, match=pattern):
        make(**kw)


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError):
        make(how="sideways")


def test_reopen_allowance_defaults_to_lateness():
    j = make(late_data="reopen", lateness_ms=7000)
    assert (j.allowance_ms, j.horizon_ms, j.watermark_delay_ms) == (7000, 7000, 14000)
    d = make(late_data="dlq", lateness_ms=10)
    assert (d.allowance_ms, d.horizon_ms, d.watermark_delay_ms) == (0, 86_400_000, 86_400_010)
    assert make(lateness_ms=10).watermark_delay_ms == 10


@pytest.mark.parametrize(
    ("kw", "pattern"),
    [
        (dict(left_keys=["nope"]), r"`left_keys` names column\(s\) \['nope'\] absent from the left"),
        (dict(output_right_columns=["zz"]), r"`output_right_columns` names column"),
        (dict(left_prefix="", right_prefix=""), r"output columns \['id', 'ts', 'v'\] appear twice"),
        (dict(left_prefix="x_", right_prefix="x_"), r"appear twice"),
        (dict(left_prefix="__il_"), r"reserved prefix"),
    ],
)
def test_bad_columns_are_rejected_before_any_query(kw, pattern):
    with pytest.raises(ConfigError, match=pattern):
        JoinPlan.from_schemas(make(**kw), LEFT, RIGHT)


def test_incompatible_key_types_are_rejected():
    right = pa.schema([("id", pa.string()), ("ts", pa.timestamp("ns"))])
    with pytest.raises(ConfigError, match=r"incompatible types; cast one side"):
        JoinPlan.from_schemas(make(), LEFT, right)


def test_output_columns_follow_prefixes_and_selection():
    plan = JoinPlan.from_schemas(
        make(output_left_columns=["v"], output_right_columns=["ts", "id"], late_data="dlq"), LEFT, RIGHT)
    assert plan.output_names == ["left_v", "right_ts", "right_id", "_dead_letter"]
    semi = JoinPlan.from_schemas(make(how="left_semi"), LEFT, RIGHT)
    assert semi.output_names == ["id", "v", "ts"]
