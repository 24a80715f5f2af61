"""Keyed, time-bounded stream-stream join on ``applyInPandasWithState``.

The join predicate, as SQL::

    l.k1 = r.k1 AND ... AND r.t BETWEEN l.t + lower AND l.t + upper   -- NULL never equals NULL

``time_window_ms=W`` is shorthand for ``lower=-W, upper=W``. Per-key, per-side buffers live in
``GroupState`` per **key group** (``pmod(xxhash64(keys), key_groups)``), as Arrow tables inside a
versioned msgpack blob (:mod:`interlace.state.buffers`).

Which watermark decides: the operator's ``wm = W + H`` (``W`` is Spark's watermark, ``H`` the
horizon of the late-data policy), i.e. ``max event time - lateness_ms``. A buffered row closes at
``close = t + upper + AL`` (left) or ``t - lower + AL`` (right), ``AL`` the allowed lateness
under ``reopen`` (0 otherwise). A row is late on arrival iff ``wm > close`` and is evicted in the
first call where ``wm > close`` — strict ``>`` on both. Outer / anti rows that never matched are
emitted at eviction, never earlier (no spurious null rows, as Kafka Streams 3.1+).

Example (orders, and payments made 0 to 10 minutes after the order):
    >>> from interlace.operators.join import Join
    >>> spec = Join(left_keys=["order_id"], right_keys=["order_id"], how="left",
    ...             lower_ms=0, upper_ms=600_000, event_time_column="ts", lateness_ms=120_000)
    >>> (spec.lower, spec.upper, spec.watermark_delay_ms)
    (0, 600000, 120000)

Layers (STYLE.md), one module each: :class:`Join` (``spec.py``, the spec) → :class:`JoinPlan`
(``plan.py``, the spec resolved against the input schemas) → :func:`step` (``step.py``, pure,
no Spark) → :class:`JoinFunction` (``shim.py``, the ``applyInPandasWithState`` shim, the only
code touching ``GroupState``) → :func:`prepare_join` / :func:`stream_join` (``shim.py``, the
thin wrapper that prepares the input). What the join shares with the other operators is in
:mod:`interlace.operators.common`.
"""

from __future__ import annotations

from interlace.operators.common.arrow import frames_to_table, table_to_pandas
from interlace.operators.common.names import EVENT_TIME_COLUMN, KEY_GROUP_COLUMN
from interlace.operators.join.plan import (
    LEFT,
    LEFT_PREFIX_INTERNAL,
    RIGHT,
    RIGHT_PREFIX_INTERNAL,
    SIDE_COLUMN,
    SLOT_PREFIX_INTERNAL,
    JoinPlan,
    OutputColumn,
    payload_sources,
)
from interlace.operators.join.shim import (
    JoinFunction,
    JoinOperator,
    prepare_join,
    prepared_layout,
    stream_join,
)
from interlace.operators.join.spec import Join, JoinHow
from interlace.operators.join.step import StepResult, step
from interlace.state.buffers import TIME_COLUMN

__all__ = [
    "EVENT_TIME_COLUMN",
    "KEY_GROUP_COLUMN",
    "LEFT",
    "LEFT_PREFIX_INTERNAL",
    "RIGHT",
    "RIGHT_PREFIX_INTERNAL",
    "SIDE_COLUMN",
    "SLOT_PREFIX_INTERNAL",
    "TIME_COLUMN",
    "Join",
    "JoinFunction",
    "JoinHow",
    "JoinOperator",
    "JoinPlan",
    "OutputColumn",
    "StepResult",
    "frames_to_table",
    "payload_sources",
    "prepare_join",
    "prepared_layout",
    "step",
    "stream_join",
    "table_to_pandas",
]
