"""Hostile input through the table-table and the foreign-key joins (issue 13), no Spark.

The companions of ``test_hostile_input.py`` (join, stream-table join) and
``test_hostile_window.py``: Hypothesis draws batches of hostile table updates (:mod:`hostile`:
NULL keys and event times, NaN / ±inf / -0.0 float keys, unicode, binary and decimal(38,18)
keys, nested payloads, duplicate times, times at 0001-01-01, before 1970 and at 9999-12-31)
and runs them through the operators' own ``applyInPandasWithState`` functions
(``interlace.testing.local``) and their oracles. Each test checks that the changelog equals the
oracle's, batch by batch, with the same counters, and that every update is accounted for:
applied to its table (``applied_*``), a dead letter, removed by Spark's watermark filter, or
counted by a documented counter.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from hostile import (
    COLUMNS,
    HOSTILE,
    KEY_KINDS,
    SCHEMA,
    assert_accounted,
    dead_letters,
    end_row,
    hostile_join_logs,
    oracle_rows,
    spark_dropped_ids,
)
from hypothesis import given
from hypothesis import strategies as st

from interlace import ForeignKeyJoin, TableJoin
from interlace.testing.local import run_foreign_key_join_locally, run_table_join_locally
from interlace.testing.log import JoinBatch
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles.foreign_key import oracle_foreign_key_join
from interlace.testing.oracles.table import oracle_table_join

SIDES = ("left", "right")
VALUES = ["f", "u", "d", "st", "arr", "m"]
#: Counters of updates that never reach a table, per side (docs/reliability.md).
DROPS = ("late_dropped", "null_key_dropped", "null_event_time_dropped", "out_of_range_dropped")
END_IDS = {-1, -2}


def common(draw: Any) -> dict[str, Any]:
    late_data = draw(st.sampled_from(["dlq", "drop"]))
    kw: dict[str, Any] = dict(
        event_time_column="ts", emit=draw(st.sampled_from(["final", "eager"])),
        lateness_ms=draw(st.sampled_from([0, 1000])), late_data=late_data,
        value_columns=VALUES, key_groups=draw(st.integers(1, 3)))
    if late_data == "dlq":
        kw["dlq_horizon_ms"] = draw(st.sampled_from([3000, 86_400_000]))
    return kw


@st.composite
def table_specs(draw: Any) -> TableJoin:
    keys = draw(st.lists(st.sampled_from(sorted(KEY_KINDS)), min_size=1, max_size=2,
                         unique=True))
    return TableJoin(left_keys=keys, right_keys=keys,
                     how=draw(st.sampled_from(["inner", "left", "full"])), **common(draw))


@st.composite
def foreign_key_specs(draw: Any) -> ForeignKeyJoin:
    """Left rows keyed by ``id`` refer to the right table by a hostile key column."""
    fk = draw(st.sampled_from(sorted(KEY_KINDS)))
    return ForeignKeyJoin(left_keys=["id"], foreign_key_columns=[fk], right_keys=[fk],
                          how=draw(st.sampled_from(["inner", "left"])), **common(draw))


def oracle_log(log: list[JoinBatch]) -> list[JoinBatch]:
    return [JoinBatch(left=oracle_rows(b.left), right=oracle_rows(b.right)) for b in log]


def check(spec: Any, log: list[JoinBatch], policy: str, run_locally: Any, oracle: Any) -> None:
    """``run_locally`` (the operator, no Spark) gives the changelog and counters of ``oracle``;
    every update is accounted for."""
    run = run_locally(spec, log, SCHEMA, SCHEMA, watermark_policy=policy)
    want = oracle(spec, oracle_log(log), left_columns=COLUMNS, right_columns=COLUMNS,
                  watermark_policy=policy)
    assert run.watermarks_ms == want.spark_watermarks_ms
    got: dict[int, list[dict[str, Any]]] = {}
    for b, row in run.rows:
        if '"reason": "null_event_time"' not in (row.get("_dead_letter") or ""):
            got.setdefault(b, []).append(row)
    exp = want.rows_by_batch()
    for b in sorted(set(got) | set(exp)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(exp.get(b, [])), f"batch {b}"
    c = run.counters
    letters = dead_letters(r for _, r in run.rows)
    # END's update (not one of the accounted ids) is applied under eager; under final it is
    # still held, due once a later watermark passes it.
    end_applied = 1 if spec.emit == "eager" else 0
    for i, side in enumerate(SIDES):
        assert c.get(f"late_dropped_{side}", 0) == want.late_dropped[side]
        assert c.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped[side]
        batches = [b.left if i == 0 else b.right for b in log]
        assert_accounted(
            {r["id"] for rows in batches for r in rows} - END_IDS, output=set(),
            dead={d["row"]["id"] for d in letters if d["side"] == side},
            spark=spark_dropped_ids(batches, run.watermarks_ms) - END_IDS,
            counted={f"applied_{side}": c.get(f"applied_{side}", 0) - end_applied,
                     **{f"{n}_{side}": c.get(f"{n}_{side}", 0) for n in DROPS}})


@HOSTILE
@given(spec=table_specs(), log=hostile_join_logs(), policy=st.sampled_from(["min", "max"]))
def test_table_join_on_hostile_input_equals_the_oracle_and_accounts_for_every_update(
        spec, log, policy):
    check(spec, log, policy, run_table_join_locally, oracle_table_join)


@HOSTILE
@given(spec=foreign_key_specs(), log=hostile_join_logs(), policy=st.sampled_from(["min", "max"]))
def test_foreign_key_join_on_hostile_input_equals_the_oracle_and_accounts_for_every_update(
        spec, log, policy):
    check(spec, log, policy, run_foreign_key_join_locally, oracle_foreign_key_join)


def row(row_id: int, key: float, second: int) -> dict[str, Any]:
    """A plain update with float key ``key`` (``kf``) at BASE + ``second``."""
    return {**end_row(row_id), "kf": key, "f": float(row_id),
            "ts": dt.datetime(2026, 1, 1) + dt.timedelta(seconds=second)}


def test_negative_zero_and_zero_are_one_key_in_both_table_joins():
    """``-0.0`` and ``0.0`` are one key (SQL equality), in each table and across them."""
    log = [JoinBatch(left=[row(1, 0.0, 1), row(2, -0.0, 2)], right=[row(3, -0.0, 1)]),
           JoinBatch(left=[end_row()], right=[end_row(-2)])]
    table = run_table_join_locally(
        TableJoin(left_keys=["kf"], right_keys=["kf"], event_time_column="ts", how="full",
                  value_columns=["f"]), log, SCHEMA, SCHEMA)
    zero = [r for _, r in table.rows if r["kf"] == 0.0]
    # One key: its versions 0, 1, 2 (left 1; right 3 joins it; left 2 replaces left 1).
    assert [(r["version"], r["left_f"], r["right_f"]) for r in zero] == \
        [(0, 1.0, None), (1, 1.0, 3.0), (2, 2.0, 3.0)]
    fk = run_foreign_key_join_locally(
        ForeignKeyJoin(left_keys=["id"], foreign_key_columns=["kf"], right_keys=["kf"],
                       event_time_column="ts", how="inner", value_columns=["f"]),
        log, SCHEMA, SCHEMA)
    # Both left rows (foreign keys 0.0 and -0.0) find right row 3 (key -0.0).
    assert sorted((r["id"], r["right_f"]) for _, r in fk.rows if r["id"] in (1, 2)) == \
        [(1, 3.0), (2, 3.0)]
