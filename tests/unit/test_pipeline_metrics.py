"""Prometheus metrics count every row removed without output, by reason (issue 11)."""

from __future__ import annotations

from interlace.metrics import PipelineMetrics


def sample(m, name, **labels):
    return m.registry.get_sample_value(name, {"pipeline": "p", **labels}) or 0


def test_every_drop_is_counted_by_reason_and_malformed_records_too():
    m = PipelineMetrics("p", "join")
    m.update_counters({"late_dropped_left": 2, "null_event_time_dropped_right": 1,
                       "null_key_dropped_left": 3}, "drop")
    m.update_progress({"numInputRows": 9, "stateOperators": [
        {"numRowsTotal": 1, "memoryUsedBytes": 10, "numRowsDroppedByWatermark": 4}]}, 0)
    m.add_malformed(5)
    # cumulative counters: a second report of the same totals adds nothing
    m.update_counters({"late_dropped_left": 2, "null_event_time_dropped_right": 1,
                       "null_key_dropped_left": 4}, "drop")
    assert sample(m, "interlace_rows_dropped_total", reason="late") == 2
    assert sample(m, "interlace_rows_dropped_total", reason="null_event_time") == 1
    assert sample(m, "interlace_rows_dropped_total", reason="null_key") == 4
    assert sample(m, "interlace_rows_dropped_total", reason="spark_watermark") == 4
    assert sample(m, "interlace_malformed_rows_total") == 5
