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
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa

from interlace.operators.join import JoinFunction, frames_to_table, step, table_to_pandas
from interlace.state.buffers import JoinBuffers, decode_join_state, encode_join_state

__all__ = ["VARIANTS", "FastConvJoinFunction", "fast_frames_to_table", "fast_table_to_pandas"]


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


VARIANTS: dict[str, type[JoinFunction]] = {
    "baseline": JoinFunction,
    "fastconv": FastConvJoinFunction,
}

# Keep the imported originals referenced (they document what the variants replace).
_ORIGINALS = (frames_to_table, table_to_pandas)
