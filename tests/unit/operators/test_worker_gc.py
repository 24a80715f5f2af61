"""The operators freeze a PySpark worker's garbage collector once, and only there (and speed up
PySpark's output padding there: operators/common/worker.py).

Each case runs in a fresh interpreter (the freeze is once per process). A "worker" is a process
that has imported ``pyspark.worker``, as every PySpark Python worker has; the driver has not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import datetime as dt, gc, json, sys
    import pyarrow as pa
    if sys.argv[1] == "worker":
        import pyspark.worker  # noqa: F401  what a PySpark Python worker has imported
    from interlace import Aggregation, Join, Window
    from interlace.operators.common.worker import prepare_worker as freeze_worker_gc
    from interlace.testing.local import run_join_locally, run_window_locally
    from interlace.testing.log import JoinBatch
    from interlace.testing.window_oracle import WindowBatch

    base = dt.datetime(2026, 1, 1)
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("ts", pa.timestamp("ns"))])
    rows = [{"k": i % 3, "v": i, "ts": base + dt.timedelta(seconds=i)} for i in range(12)]
    if sys.argv[2] == "join":
        spec = Join(left_keys=["k"], right_keys=["k"], how="left", time_window_ms=2_000,
                    event_time_column="ts")
        run = run_join_locally(spec, [JoinBatch(left=rows[:6], right=rows[3:9]),
                                      JoinBatch(left=rows[6:], right=rows[9:])], schema, schema)
    else:
        spec = Window(kind="tumbling", duration_ms=5_000, event_time_column="ts", group_by=["k"],
                      max_groups_per_window=100,
                      aggregations=[Aggregation(agg="count", as_="n"),
                                    Aggregation(agg="sum", column="v", as_="s")])
        run = run_window_locally(spec, [WindowBatch(rows=tuple(rows[:6])),
                                        WindowBatch(rows=tuple(rows[6:]))], schema)
    frozen = gc.get_freeze_count()
    from pandas.core.internals.concat import JoinUnit
    padding = getattr(JoinUnit._is_valid_na_for, "_interlace", False)
    again = freeze_worker_gc()

    class Cycle:
        pass

    c = Cycle()
    c.me = c
    del c
    print(json.dumps({"frozen": frozen, "again": again, "padding": padding,
                      "collected_after": gc.collect(),
                      "rows": sorted(map(repr, run.rows))}))
    """
)


def _run(mode: str, operator: str, **env: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, operator],
        env={**os.environ, **env}, capture_output=True, text=True, check=True, timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("operator", ["join", "window"])
def test_worker_freezes_once_and_still_collects_new_cycles(operator):
    worker = _run("worker", operator)
    assert worker["frozen"] > 10_000  # pandas, pyarrow, pyspark and interlace's objects
    assert worker["again"] is False  # once per process
    assert worker["collected_after"] >= 1  # a cycle made after the freeze is still reclaimed
    driver = _run("driver", operator)
    assert worker["padding"] is True  # pandas' concatenation of PySpark's padding sped up
    assert driver["frozen"] == 0  # the driver, the local runner, tests: untouched
    assert driver["padding"] is False
    assert driver["rows"] == worker["rows"] and worker["rows"]  # same output either way


def test_environment_variable_turns_it_off():
    off = _run("worker", "join", INTERLACE_WORKER_GC_FREEZE="0")
    assert off["frozen"] == 0 and off["padding"] is True
    assert off["rows"] == _run("worker", "join", INTERLACE_WORKER_GC_FREEZE="1")["rows"]


def test_environment_variable_turns_the_padding_fast_path_off():
    off = _run("worker", "window", INTERLACE_WORKER_PADDING_FAST_PATH="0")
    assert off["padding"] is False and off["frozen"] > 10_000
    assert off["rows"] == _run("worker", "window")["rows"]
