"""Experimental variants of interlace's join shim, for measuring proposed changes.

Nothing here is used by interlace itself. ``bench/join_bench.py --variant NAME`` and
``bench/profile_join.py --variant NAME`` run a variant in place of
:class:`interlace.operators.join.JoinFunction` (the benchmark registers this module with
cloudpickle by value, so Spark's Python workers get this code without installing it), so a
proposed change to ``operators/join.py`` can be measured end to end before anyone edits it.

Variants:

* ``baseline``: ``JoinFunction`` unchanged.
* ``fastconv``: ``frames_to_table`` builds each column with ``pa.array(series, type=...,
  from_pandas=True)`` instead of one ``pa.Table.from_pandas`` per input frame (same result:
  NaN and NaT become nulls, float64-with-NaN becomes int64 for nullable longs), and the output
  goes to pandas with ``use_threads=False``.
* ``timed``: ``baseline`` plus per-call CPU timing written to files (see
  :class:`TimedJoinFunction`), to split the Python workers' CPU between interlace and PySpark.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
from interlace.operators.join import JoinFunction, frames_to_table, step, table_to_pandas
from interlace.state.buffers import JoinBuffers, decode_join_state, encode_join_state

__all__ = [
    "VARIANTS",
    "FastConvJoinFunction",
    "TimedJoinFunction",
    "fast_frames_to_table",
    "fast_table_to_pandas",
]


def fast_frames_to_table(schema: pa.Schema, frames: Iterator[pd.DataFrame]) -> pa.Table:
    """Like ``frames_to_table``, one ``pa.array`` per column (no per-frame pandas metadata)."""
    tables = []
    for f in frames:
        if not len(f):
            continue
        arrays = [pa.array(f[name], type=fld.type, from_pandas=True)
                  for name, fld in zip(schema.names, schema, strict=True)]
        tables.append(pa.Table.from_arrays(arrays, schema=schema))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def fast_table_to_pandas(table: pa.Table) -> pd.DataFrame:
    """Like ``table_to_pandas`` without Arrow's thread pool (Spark already uses the cores)."""
    return table.to_pandas(integer_object_nulls=True, date_as_object=True, use_threads=False)


class FastConvJoinFunction(JoinFunction):
    """``JoinFunction.__call__`` with the ``fastconv`` conversions (same logic otherwise)."""

    def __call__(
        self, key: Any, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        plan = self.plan
        spark_wm_ms = int(state.getCurrentWatermarkMs())
        wm_us = (spark_wm_ms + plan.horizon_ms) * 1000 if spark_wm_ms > 0 else None
        if state.exists:
            buffers = decode_join_state(
                state.get[0], plan.fp, plan.left_buffer_schema, plan.right_buffer_schema)
        else:
            buffers = JoinBuffers.empty(plan.left_buffer_schema, plan.right_buffer_schema)
        batch = fast_frames_to_table(plan.input_schema, frames)
        result = step(plan, buffers, batch, wm_us)
        if result.output.num_rows:
            yield fast_table_to_pandas(result.output)
        if self.counters is not None and result.counters:
            self.counters.add(result.counters)
        if result.state.num_rows == 0:
            state.remove()
        else:
            state.update((encode_join_state(result.state, plan.fp),))
            assert result.next_close_us is not None
            timeout_ms = (result.next_close_us - plan.horizon_ms * 1000) // 1000
            state.setTimeoutTimestamp(max(timeout_ms, spark_wm_ms, 1))


class TimedJoinFunction(JoinFunction):
    """``JoinFunction`` unchanged, plus its CPU time per call appended to a file per process.

    Each call appends ``cpu_seconds wall_seconds input_rows output_rows`` to
    ``$INTERLACE_BENCH_TIMING_DIR/<pid>.txt`` (default ``/tmp/interlace-bench-timing``). The
    time covers ``JoinFunction.__call__`` only (the output is materialised before it is
    yielded), so comparing it with the Python workers' total CPU separates interlace's own cost
    from PySpark's worker (Arrow <-> pandas conversion, state (de)serialisation, framing).
    """

    def __call__(
        self, key: Any, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        import os
        import time

        c0 = time.process_time()
        frames = list(frames)  # PySpark converts lazily; charge that conversion to PySpark
        c1, t1 = time.process_time(), time.perf_counter()
        outs = list(super().__call__(key, iter(frames), state))
        c2, t2 = time.process_time(), time.perf_counter()
        folder = os.environ.get("INTERLACE_BENCH_TIMING_DIR", "/tmp/interlace-bench-timing")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{os.getpid()}.txt"), "a") as fh:
            fh.write(f"{c2 - c1:.6f} {t2 - t1:.6f} {sum(len(f) for f in frames)} "
                     f"{sum(len(o) for o in outs)} {c1 - c0:.6f}\n")
        yield from outs


VARIANTS: dict[str, type[JoinFunction]] = {
    "baseline": JoinFunction,
    "fastconv": FastConvJoinFunction,
    "timed": TimedJoinFunction,
}

# Keep the imported originals referenced (they document what the variants replace).
_ORIGINALS = (frames_to_table, table_to_pandas)
