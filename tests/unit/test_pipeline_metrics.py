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


def test_each_stage_of_a_chain_has_its_own_pipeline_label_on_one_registry():
    chain = PipelineMetrics("chain", "window")
    join, window = chain.stage("chain.paid", "join"), chain.stage("chain.sessions", "window")
    join.update_counters({"matches": 3, "late_dropped_right": 1}, "drop")
    window.update_counters({"windows_emitted": 2, "late_dropped": 4}, "drop")
    join.update_progress({"numInputRows": 9}, 5)
    window.update_progress({"numInputRows": 5}, 2)
    reg = chain.registry  # one registry: one /metrics endpoint for every stage

    def value(name, pipeline, **labels):
        return reg.get_sample_value(name, {"pipeline": pipeline, **labels}) or 0

    assert value("interlace_join_matches_total", "chain.paid") == 3
    assert value("interlace_windows_emitted_total", "chain.sessions", kind="window") == 2
    assert value("interlace_rows_dropped_total", "chain.paid", reason="late") == 1
    assert value("interlace_rows_dropped_total", "chain.sessions", reason="late") == 4
    assert value("interlace_input_rows_total", "chain.paid") == 9
    assert value("interlace_output_rows_total", "chain.sessions") == 2
    # Each stage counts its own deltas: a repeated report of the same totals adds nothing.
    join.update_counters({"matches": 3, "late_dropped_right": 1}, "drop")
    assert value("interlace_join_matches_total", "chain.paid") == 3
