"""Tumbling, hopping and session window aggregations on ``applyInPandasWithState``.

Windows are ``[start, end)``. Which watermark decides: the operator's ``wm = W + H``
(``max event time - lateness_ms``). A window **closes** (emits) in the first call where
``wm >= end`` (SEMANTICS §3), one row per (window, group): ``window_start``, ``window_end``,
the ``group_by`` columns, the aggregation aliases (then ``revision``, ``retracted`` under
``reopen``; ``_dead_letter`` under ``dlq``).

Within one call: ingest the rows (late-data policy per (row, window): a row is late for a
window that is closed in this call), then emit every closed window that is new or changed,
then evict what the policy no longer keeps (drop / dlq: every closed window; reopen: windows
with ``wm >= end + allowed_lateness_ms``).

State per key group: one slot per (window, group) with its accumulators
(:mod:`interlace.state.accumulators`), in a versioned msgpack blob (kind ``"window"``).
Changing ``kind``, durations, ``group_by`` or the aggregations between restarts invalidates
open windows: the blob's fingerprint makes that a loud error.
Layers (STYLE.md), one module each: :class:`Aggregation` / :class:`Window` (``spec.py``, the
spec) → :class:`WindowPlan` (``plan.py``, resolved against the input schema) →
:func:`step_window` (``step.py``, pure, no Spark; with ``slots.py`` and ``output.py``) →
:class:`WindowFunction` (``shim.py``, the ``applyInPandasWithState`` shim) →
:func:`prepare_window` / :func:`window_aggregate` (``shim.py``, the wrapper). What the window
shares with the other operators is in :mod:`interlace.operators.common`.
"""

from __future__ import annotations

from interlace.operators.common.names import EVENT_TIME_COLUMN, KEY_GROUP_COLUMN, TIME_US_COLUMN
from interlace.operators.window.plan import AggPlan, WindowPlan
from interlace.operators.window.shim import (
    WindowFunction,
    WindowOperator,
    prepare_window,
    window_aggregate,
)
from interlace.operators.window.spec import (
    RETRACTED_COLUMN,
    REVISION_COLUMN,
    AggName,
    Aggregation,
    DistinctMode,
    Window,
    WindowKind,
)
from interlace.operators.window.step import WindowState, WindowStepResult, step_window

__all__ = [
    "EVENT_TIME_COLUMN",
    "KEY_GROUP_COLUMN",
    "RETRACTED_COLUMN",
    "REVISION_COLUMN",
    "TIME_US_COLUMN",
    "AggName",
    "AggPlan",
    "Aggregation",
    "DistinctMode",
    "Window",
    "WindowFunction",
    "WindowKind",
    "WindowOperator",
    "WindowPlan",
    "WindowState",
    "WindowStepResult",
    "prepare_window",
    "step_window",
    "window_aggregate",
]
