"""The floor: a no-op ``applyInPandasWithState`` function in interlace's place.

Run on an interlace operator's own prepared input, key groups, output schema and timeout, it
reads every frame, keeps an 8-byte state and emits nothing: what Spark's stateful pandas path
costs before interlace does any work. ``--floor`` adds it to the workloads that define it.

``floor-out`` (windows, stream-stream and stream-table joins): the same no-op, but it also
emits ``out_ratio`` output rows per input row (the workload's output per input row, from its
oracle), copied from a constant frame of the output schema. PySpark's output path of
``applyInPandasWithState`` costs per output row (the state column is padded to the data's
length and converted, docs/performance.md "The output floor"); the plain floor emits nothing
and does not pay it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any


def _template(schema: Any, rows: int) -> Any:
    """A frame of ``rows`` rows of zero values for a Spark ``StructType``."""
    import numpy as np
    import pandas as pd

    cols: dict[str, Any] = {}
    for f in schema.fields:
        t = f.dataType.typeName()
        if t in ("timestamp", "timestamp_ntz"):
            cols[f.name] = np.zeros(rows, dtype="datetime64[ns]")
        elif t in ("long", "integer", "short", "byte"):
            cols[f.name] = np.zeros(rows, dtype=np.int64)
        elif t in ("double", "float"):
            cols[f.name] = np.zeros(rows, dtype=np.float64)
        elif t == "boolean":
            cols[f.name] = np.zeros(rows, dtype=bool)
        elif t == "string":
            cols[f.name] = np.full(rows, "", dtype=object)
        else:
            msg = f"floor-out: no constant value for column {f.name!r} of type {t}"
            raise TypeError(msg)
    return pd.DataFrame(cols)


class FloorFunction:
    """Read every frame, keep 8 bytes of state with a far timeout; emit nothing, or
    (``out_ratio`` > 0) that many rows of ``schema`` per input row."""

    def __init__(self, out_ratio: float = 0.0, schema: Any = None) -> None:
        self.out_ratio, self.schema = out_ratio, schema
        self._rows: Any = None

    def __call__(self, key: Any, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        n = 0
        for f in frames:
            n += len(f)
        state.update((b"\0" * 8,))
        state.setTimeoutTimestamp(max(int(state.getCurrentWatermarkMs()), 1) + 10**12)
        want = int(round(n * self.out_ratio))
        if want <= 0:
            return iter(())
        if self._rows is None or len(self._rows) < want:
            held = 0 if self._rows is None else len(self._rows)
            self._rows = _template(self.schema, max(want, 2 * held))
        return iter((self._rows.iloc[:want].copy(),))


def floor_on(op: Any, out_ratio: float = 0.0) -> Any:
    """The floor on a prepared interlace operator (``prepare_join(...)`` etc.); with
    ``out_ratio``, the floor that emits that many output rows per input row."""
    from pyspark import cloudpickle

    # Spark's Python workers cannot import bench/: ship this module's code by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    func = FloorFunction(out_ratio, op.output_schema if out_ratio else None)
    return op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
        func, op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)


def floor_engines(prepared: Callable[[Any], Any], output_rows: Callable[[Any], int],
                  columns: tuple[str, ...]) -> list[Any]:
    """A workload's ``floor`` and ``floor-out`` engines: ``prepared(ctx)`` is its prepared
    interlace operator, ``output_rows(data)`` the rows interlace emits from its data."""
    from harness.registry import Engine

    def floor(ctx: Any) -> Any:
        return floor_on(prepared(ctx))

    def floor_out(ctx: Any) -> Any:
        return floor_on(prepared(ctx), output_rows(ctx.data) / max(ctx.data.input_rows, 1))

    return [Engine("floor", "floor", floor, columns),
            Engine("floor-out", "floor", floor_out, columns, floor_emits=True)]
