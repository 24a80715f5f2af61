"""The floor: a no-op ``applyInPandasWithState`` function in interlace's place.

Run on an interlace operator's own prepared input, key groups, output schema and timeout, it
reads every frame, keeps an 8-byte state and emits nothing: what Spark's stateful pandas path
costs before interlace does any work. ``--floor`` adds it to the workloads that define it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any


class FloorFunction:
    """Read every frame, keep 8 bytes of state with a far timeout, emit nothing."""

    def __call__(self, key: Any, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        for _ in frames:
            pass
        state.update((b"\0" * 8,))
        state.setTimeoutTimestamp(max(int(state.getCurrentWatermarkMs()), 1) + 10**12)
        return iter(())


def floor_on(op: Any) -> Any:
    """The floor on a prepared interlace operator (``prepare_join(...)`` etc.)."""
    from pyspark import cloudpickle

    # Spark's Python workers cannot import bench/: ship this module's code by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
        FloorFunction(), op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)
