"""Operator counters without Spark: a call Spark repeats counts once.

Reproduces what PySpark does with the counters accumulator: each task's Python worker holds
the accumulator deserialized with the zero value (``CounterParam.zero``), adds every call's
counts to it, and sends the value to the driver when the task succeeds, where it is merged
into the driver's value (``Accumulator.__iadd__`` -> ``CounterParam.addInPlace``). A task
Spark runs again (a re-executed stage, a second action on an uncached output) sends the same
(operator, key group, micro-batch) entries a second time.
"""

from __future__ import annotations

import datetime as dt
import pickle

import numpy as np
import pandas as pd
import pyarrow as pa
from interlace.operators.window import TIME_US_COLUMN, WindowFunction, WindowPlan
from pyspark.accumulators import Accumulator, AccumulatorParam

from interlace import Aggregation, Window
from interlace.metrics import (
    KEEP_BATCHES,
    CallCounts,
    CounterParam,
    CounterTotals,
    PipelineMetrics,
    add_counts,
)
from interlace.testing.local import FakeGroupState

_aid = iter(range(900_000, 1_000_000))


def driver_accumulator(param: AccumulatorParam | None = None) -> Accumulator:
    """The driver's accumulator, as ``interlace.metrics.counters(spark)`` makes it."""
    param = param or CounterParam()
    return Accumulator(next(_aid), param.zero({}), param)


class TaskAccumulator:
    """The accumulator in one task's Python worker: the zero value, then every call's add."""

    def __init__(self, driver: Accumulator) -> None:
        self.accum_param = driver.accum_param
        self._value = self.accum_param.zero(driver._value)

    def add(self, term):
        self._value = self.accum_param.addInPlace(self._value, term)

    def succeed(self, driver: Accumulator) -> None:
        """The task succeeded: its value goes over the wire and is merged on the driver."""
        driver += pickle.loads(pickle.dumps(self._value))  # noqa: S301


class State:
    """GroupState's processing time: the micro-batch's timestamp, the same on every attempt."""

    def __init__(self, batch_ms: int) -> None:
        self.batch_ms = batch_ms

    def getCurrentProcessingTimeMs(self) -> int:  # noqa: N802 - PySpark's name
        return self.batch_ms


def run_task(driver, calls, op="op-a"):
    """One task attempt: ``calls`` are (key group, batch ms, counts)."""
    task = TaskAccumulator(driver)
    for kg, batch_ms, counts in calls:
        add_counts(task, op, (np.int32(kg),), State(batch_ms), counts)
    task.succeed(driver)


def test_a_repeated_call_for_the_same_key_group_and_batch_counts_once():
    acc = driver_accumulator()
    calls = [(0, 1_000, {"matches": 3, "late_dropped_left": 1}), (1, 1_000, {"matches": 2})]
    run_task(acc, calls)
    assert acc.value == {"matches": 5, "late_dropped_left": 1}
    # The same task again (a re-executed stage, or a second action on the output): no change.
    run_task(acc, calls)
    run_task(acc, calls[1:])
    assert acc.value == {"matches": 5, "late_dropped_left": 1}
    # What the additive merge before the fix made of it.
    old = driver_accumulator(AdditiveParam())
    for c in (calls, calls, calls[1:]):
        task = TaskAccumulator(old)
        for _, _, counts in c:
            task.add(counts)
        task.succeed(old)
    assert old.value == {"matches": 12, "late_dropped_left": 2}


class AdditiveParam(AccumulatorParam):
    def zero(self, value):
        return {}

    def addInPlace(self, a, b):  # noqa: N802
        for k, v in b.items():
            a[k] = a.get(k, 0) + v
        return a


def test_other_key_groups_batches_and_operators_add_up_and_calls_within_a_task_add():
    acc = driver_accumulator()
    run_task(acc, [(0, 1_000, {"matches": 1}), (0, 1_000, {"matches": 2})])  # data + timeout call
    run_task(acc, [(1, 1_000, {"matches": 4})])
    run_task(acc, [(0, 2_000, {"matches": 8})])
    run_task(acc, [(0, 1_000, {"matches": 16})], op="op-b")
    assert acc.value == {"matches": 31}
    run_task(acc, [(0, 1_000, {"matches": 1}), (0, 1_000, {"matches": 2})])  # repeated: once
    assert acc.value == {"matches": 31}


def test_value_is_the_dict_of_totals_and_survives_pickling():
    acc = driver_accumulator()
    run_task(acc, [(3, 7, {"windows_emitted": 2, "windows_created": 5})])
    value = acc.value
    assert isinstance(value, dict) and dict(value) == {"windows_emitted": 2, "windows_created": 5}
    assert value.get("late_dropped", 0) == 0 and value["windows_created"] == 5
    back = pickle.loads(pickle.dumps(value))  # noqa: S301
    assert back == value and back.entries == value.entries


def test_plain_dict_adds_still_add_and_a_reset_value_keeps_working():
    acc = driver_accumulator()
    acc.add({"x": 1})
    acc.add({"x": 1})
    assert acc.value == {"x": 2}
    acc.value = {}  # reset on the driver with a plain dict
    run_task(acc, [(0, 1, {"x": 5})])
    run_task(acc, [(0, 1, {"x": 5})])
    assert acc.value == {"x": 5}


def test_old_batches_are_folded_into_the_total_and_repeats_of_them_ignored():
    acc = driver_accumulator()
    n = KEEP_BATCHES + 10
    for b in range(n):
        run_task(acc, [(kg, 1_000 + b, {"m": 1}) for kg in range(4)])
    assert acc.value == {"m": 4 * n}
    totals: CounterTotals = acc.value
    assert len(totals.entries) == 4 * KEEP_BATCHES  # memory is bounded
    run_task(acc, [(0, 1_000, {"m": 1})])  # a repeat of a folded batch
    run_task(acc, [(0, 1_000 + n - 1, {"m": 1})])  # a repeat of a kept batch
    assert acc.value == {"m": 4 * n}


def test_window_function_repeated_for_the_same_batch_counts_once():
    """The operator's own function, called twice on the same input and state (as a task that
    Spark runs again is), feeds the counters once; the next batch adds."""
    schema = pa.schema([("user", pa.string()), ("ts", pa.timestamp("ns"))])
    spec = Window(kind="tumbling", duration_ms=10_000, event_time_column="ts",
                  group_by=["user"], max_groups_per_window=10, key_groups=2,
                  aggregations=[Aggregation(agg="count", as_="n")])
    plan = WindowPlan.from_schema(spec, schema)
    t0 = dt.datetime(2026, 1, 1)
    times = [t0, t0 + dt.timedelta(seconds=1), t0 + dt.timedelta(seconds=12)]
    us = [(t - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1) for t in times]
    frame = pd.DataFrame({"user": ["a", "a", "a"], "ts": times})
    frame.insert(0, TIME_US_COLUMN, np.array(us, np.int64))

    class ProcessingState(FakeGroupState):
        def getCurrentProcessingTimeMs(self) -> int:  # noqa: N802
            return 1_700_000_000_000

    acc = driver_accumulator()
    func = WindowFunction(plan, None)
    for _attempt in range(2):
        task = TaskAccumulator(acc)
        func.counters = task
        list(func((0,), iter([frame]), ProcessingState()))
        task.succeed(acc)
    assert acc.value["windows_created"] == 2
    assert acc.value.get("windows_emitted", 0) == 0


def test_prometheus_counters_follow_the_exact_totals():
    acc = driver_accumulator()
    metrics = PipelineMetrics("p", "join")
    calls = [(0, 1_000, {"matches": 3, "dead_lettered_right": 1})]
    run_task(acc, calls)
    metrics.update_counters(dict(acc.value), "drop")
    run_task(acc, calls)  # re-executed
    metrics.update_counters(dict(acc.value), "drop")
    reg = metrics.registry
    assert reg.get_sample_value("interlace_join_matches_total", {"pipeline": "p"}) == 3
    assert reg.get_sample_value("interlace_late_rows_dropped_total",
                                {"pipeline": "p", "policy": "dlq"}) == 1


def test_a_call_counts_entry_names_its_operator_key_group_and_batch():
    task = TaskAccumulator(driver_accumulator())
    add_counts(task, "op", (np.int64(5),), State(42), {"m": 1})
    assert task._value.entries == {("op", (5,), 42): {"m": 1}}
    assert CallCounts("op", (5,), 42, {"m": 1}).batch_ms == 42
