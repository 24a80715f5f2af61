"""Stream-table join as of event time on ``applyInPandasWithState`` (SEMANTICS §7–§8).

A stream (left) is joined with a changelog table (right): each stream row at ``t`` takes the
table version of its key as of ``t`` (the update with the greatest event time ``<= t``; ties:
the later arrival), absent if none or a tombstone. Per key group, the state holds each key's
version history (Arrow, trimmed by ``history_retention_ms``) and, under ``emit="final"``, the
held stream rows (:mod:`interlace.state.tables`).

Layers: :class:`StreamTableJoin` (``spec.py``) → :class:`StreamTablePlan` (``plan.py``) →
:func:`step` (``step.py``, pure) → :class:`StreamTableJoinFunction` (``shim.py``) →
:func:`prepare_stream_table_join` / :func:`stream_table_join` (``shim.py``).
"""

from __future__ import annotations

from interlace.operators.stream_table.plan import RIGHT_VALID_FROM, StreamTablePlan
from interlace.operators.stream_table.shim import (
    StreamTableJoinFunction,
    StreamTableOperator,
    prepare_stream_table_join,
    stream_table_join,
)
from interlace.operators.stream_table.spec import StreamTableHow, StreamTableJoin
from interlace.operators.stream_table.step import StreamTableStepResult, step

__all__ = [
    "RIGHT_VALID_FROM",
    "StreamTableHow",
    "StreamTableJoin",
    "StreamTableJoinFunction",
    "StreamTableOperator",
    "StreamTablePlan",
    "StreamTableStepResult",
    "prepare_stream_table_join",
    "step",
    "stream_table_join",
]
