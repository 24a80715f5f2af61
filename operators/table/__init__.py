"""Table-table join with a changelog output on ``applyInPandasWithState`` (SEMANTICS §7, §9).

Two changelog tables joined on the same primary key. Updates are applied one at a time in
event-time order; each emits an ``upsert`` of the join's new state, a ``delete`` if the key
left the join, or nothing; the output is itself a changelog with a per-key ``version``. Per
key group, the state holds each key's latest version of both sides and its next output
version, plus, under ``emit="final"``, the updates not yet due
(:mod:`interlace.state.table_join`).

Layers: :class:`TableJoin` (``spec.py``) → :class:`TableJoinPlan` (``plan.py``) →
:func:`step` (``step.py``, pure) → :class:`TableJoinFunction` (``shim.py``) →
:func:`prepare_table_join` / :func:`table_join` (``shim.py``).
"""

from __future__ import annotations

from interlace.operators.table.plan import TableJoinPlan
from interlace.operators.table.shim import (
    TableJoinFunction,
    TableJoinOperator,
    prepare_table_join,
    table_join,
)
from interlace.operators.table.spec import TableHow, TableJoin
from interlace.operators.table.step import TableJoinStepResult, step

__all__ = [
    "TableHow",
    "TableJoin",
    "TableJoinFunction",
    "TableJoinOperator",
    "TableJoinPlan",
    "TableJoinStepResult",
    "prepare_table_join",
    "step",
    "table_join",
]
