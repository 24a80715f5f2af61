"""Table aggregation with a changelog output (SEMANTICS §7, §10; seed 002's KTable aggregate).

A changelog table re-grouped by other columns and aggregated, exact under updates, group
moves and deletes. It runs in two stages (two ``applyInPandasWithState`` queries joined by
a channel): by key (each key's current row; an update becomes a removal from its old group
and an addition to its new one), then by group (removable accumulators; a changelog per
group with a ``version``).

Layers: :class:`TableAggregate` (``spec.py``) → :class:`TableAggregatePlan` (``plan.py``)
→ :func:`key_step` / :func:`group_step` (``step.py``, pure) → :class:`KeyRowsFunction` /
:class:`GroupsFunction` (``shim.py``) → :func:`prepare_table_aggregate` /
:func:`table_aggregate` (``shim.py``).
"""

from __future__ import annotations

from interlace.operators.table_aggregate.plan import TableAggregatePlan
from interlace.operators.table_aggregate.shim import (
    GroupsFunction,
    KeyRowsFunction,
    TableAggregateOperator,
    prepare_table_aggregate,
    start_table_aggregate,
    table_aggregate,
    table_aggregate_groups,
    table_aggregate_keys,
)
from interlace.operators.table_aggregate.spec import TableAggregate
from interlace.operators.table_aggregate.step import (
    GroupStepResult,
    KeyStepResult,
    group_step,
    key_step,
)

__all__ = [
    "GroupStepResult",
    "GroupsFunction",
    "KeyRowsFunction",
    "KeyStepResult",
    "TableAggregate",
    "TableAggregateOperator",
    "TableAggregatePlan",
    "group_step",
    "key_step",
    "prepare_table_aggregate",
    "start_table_aggregate",
    "table_aggregate",
    "table_aggregate_groups",
    "table_aggregate_keys",
]
