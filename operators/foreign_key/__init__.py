"""Foreign-key table join with a changelog output on ``applyInPandasWithState`` (SEMANTICS §9).

A changelog table (the left: orders) joined with another (the right: products) by a foreign
key of the left's rows: each left row joins the right row whose key equals its
``foreign_key_columns``. Updates of both tables are applied one at a time in event-time
order; each emits the new state of every left key it changes (``upsert``), a ``delete``, or
nothing; the output is a changelog keyed by the left primary key with a per-key ``version``.
Key groups partition the left table; every key group holds the whole right table (each right
update is replicated into every key group), so the join is local to a key group
(:mod:`interlace.state.foreign_key`; the cost is in docs/foreign-key-join.md).

Layers: :class:`ForeignKeyJoin` (``spec.py``) → :class:`ForeignKeyJoinPlan` (``plan.py``) →
:func:`step` (``step.py``, pure) → :class:`ForeignKeyJoinFunction` (``shim.py``) →
:func:`prepare_foreign_key_join` / :func:`foreign_key_join` (``shim.py``).
"""

from __future__ import annotations

from interlace.operators.foreign_key.plan import ForeignKeyJoinPlan
from interlace.operators.foreign_key.shim import (
    ForeignKeyJoinFunction,
    ForeignKeyJoinOperator,
    foreign_key_join,
    prepare_foreign_key_join,
)
from interlace.operators.foreign_key.spec import ForeignKeyHow, ForeignKeyJoin
from interlace.operators.foreign_key.step import ForeignKeyStepResult, step

__all__ = [
    "ForeignKeyHow",
    "ForeignKeyJoin",
    "ForeignKeyJoinFunction",
    "ForeignKeyJoinOperator",
    "ForeignKeyJoinPlan",
    "ForeignKeyStepResult",
    "foreign_key_join",
    "prepare_foreign_key_join",
    "step",
]
