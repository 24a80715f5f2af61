"""Pipelines with an idle source (docs/idle-inputs.md): where ``idle_timeout_ms`` may go."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlace import ConfigError, Pipeline
from interlace.pipeline import Source
from interlace.idle_run import with_idle_sources

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOML = (EXAMPLES / "quiet_payments.toml").read_text()


def test_the_example_sets_the_payments_source_idle_after_two_seconds() -> None:
    p = Pipeline.from_toml(TOML)
    assert [s.idle_timeout_ms for s in p.sources] == [None, 2_000]
    spec = with_idle_sources(p)
    assert (spec.left_idle_timeout_ms, spec.right_idle_timeout_ms) == (None, 2_000)
    assert Pipeline.from_toml(p.to_toml()) == p


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2s"])
def test_a_source_idle_timeout_is_a_positive_int(value: object) -> None:
    with pytest.raises(ConfigError, match="`idle_timeout_ms` must be a positive int"):
        Source(name="s", format="rate", idle_timeout_ms=value)  # type: ignore[arg-type]


def test_a_source_no_join_reads_cannot_be_idle() -> None:
    text = (EXAMPLES / "clicks_per_minute.toml").read_text().replace(
        'format = "json"', 'format = "json"\nidle_timeout_ms = 1000', 1)
    assert "idle_timeout_ms" in text
    with pytest.raises(ConfigError) as info:
        Pipeline.from_toml(text)
    msg = str(info.value)
    assert "no join reads it" in msg and "idle_timeout_ms" in msg


def test_the_source_and_the_join_must_agree() -> None:
    text = TOML.replace('how = "left"', 'how = "left"\nright_idle_timeout_ms = 5000')
    with pytest.raises(ConfigError, match="disagrees with the join's `right_idle_timeout_ms`"):
        Pipeline.from_toml(text)
    same = TOML.replace('how = "left"', 'how = "left"\nright_idle_timeout_ms = 2000')
    assert with_idle_sources(Pipeline.from_toml(same)).right_idle_timeout_ms == 2_000


def test_the_join_alone_may_set_it() -> None:
    text = TOML.replace("idle_timeout_ms = 2_000", "").replace(
        'how = "left"', 'how = "left"\nleft_idle_timeout_ms = 7000')
    spec = with_idle_sources(Pipeline.from_toml(text))
    assert (spec.left_idle_timeout_ms, spec.right_idle_timeout_ms) == (7_000, None)


def test_inspect_reports_each_input_from_the_idle_tracker(tmp_path: Path) -> None:
    """``interlace inspect``'s per-input lines: the tracker's greatest event time, and idle
    since ``last active + timeout`` once that has passed (payments: 2 s), else active."""
    import json
    import time

    from interlace.idle_run import heartbeat_folder
    from interlace.inspection import InputState, _inputs

    p = Pipeline.from_toml(TOML)
    folder = heartbeat_folder(p, tmp_path)
    folder.mkdir(parents=True)
    now_ms = int(time.time() * 1000)
    (folder / "_idle.json").write_text(json.dumps({
        "left": {"last_active_ms": now_ms - 60_000, "max_clock_us": 7, "stamped_us": None},
        "right": {"last_active_ms": now_ms - 60_000, "max_clock_us": 5, "stamped_us": 9}}))
    left, right = _inputs(p, tmp_path)
    assert left == InputState(p.left_source, "left", 7, now_ms - 60_000, None, None)
    assert right == InputState(p.right_source, "right", 5, now_ms - 60_000, 2_000,
                               now_ms - 58_000)
    (folder / "_idle.json").write_text(json.dumps({
        "right": {"last_active_ms": now_ms + 60_000, "max_clock_us": None, "stamped_us": None}}))
    (only,) = _inputs(p, tmp_path)
    assert only.idle_since_ms is None and only.greatest_event_time_us is None
