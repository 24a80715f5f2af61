"""Replay tests on real Spark: the table aggregation against its oracle (SEMANTICS §7, §10).

``table_aggregate`` runs its two queries (by key into a channel, by group from it) over a
file source with one file per micro-batch (and all files at once), under ``final`` and
``eager``, with moves between groups, a NULL group, tombstones, a late update (dropped, or
dead-lettered under ``dlq``) and a decimal column. Per group, Spark's changelog equals the
oracle's on the same micro-batches; applied by group it is the ``GROUP BY`` of the final
snapshot. One session-scoped SparkSession (tests/conftest.py).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from decimal import Decimal
from pathlib import Path

import pytest

from interlace import Aggregation, ConfigError, TableAggregate, table_aggregate
from interlace.testing.oracles.table_aggregate import oracle_table_aggregate

pytestmark = pytest.mark.spark

BASE = dt.datetime(2026, 1, 1, 10)
DDL = ("account_id STRING, region STRING, balance BIGINT, fee DECIMAL(10,2), "
       "deleted BOOLEAN, ts TIMESTAMP")
COLUMNS = [c.split()[0] for c in DDL.split(", ")]


def at(minutes: float) -> dt.datetime:
    return BASE + dt.timedelta(minutes=minutes)


def row(acc: str, region: str | None, balance: int | None, minutes: float,
        deleted: bool = False, fee: str | None = "1.10") -> dict:
    return {"account_id": acc, "region": region, "balance": balance,
            "fee": None if fee is None else Decimal(fee), "deleted": deleted, "ts": at(minutes)}


# One micro-batch per list: a row moving between groups, a NULL group, a delete emptying a
# group, two updates of one key in one batch, a late update (behind its key's applied one).
LOG = [
    [row("a1", "eu", 100, 0), row("a2", "eu", 50, 1), row("a3", "us", 70, 2, fee="2.25")],
    [row("a1", "us", 120, 5), row("a4", None, 10, 6), row("a2", "eu", 55, 7),
     row("a2", "eu", 60, 7)],
    [row("a3", None, None, 12, deleted=True), row("a5", "apac", 5, 13, fee="0.01")],
    [row("a1", "eu", 1, 3)],  # late: a1 has an applied update at 10:05
    [row("a4", "eu", 11, 20), row("a2", None, None, 21, deleted=True)],
    [row("zz", "eu", 0, 90, deleted=True)],  # moves the watermark past everything
]
AGGS = [Aggregation(agg="count", as_="accounts"),
        Aggregation(agg="sum", column="balance", as_="total"),
        Aggregation(agg="max", column="balance", as_="largest"),
        Aggregation(agg="sum", column="fee", as_="fees"),
        Aggregation(agg="avg", column="fee", as_="avg_fee")]


def write_files(folder: Path, log: list[list[dict]]) -> None:
    folder.mkdir(parents=True)
    for i, rows in enumerate(log):
        path = folder / f"{i:03d}.json"
        path.write_text("".join(json.dumps({**r, "ts": r["ts"].isoformat(),
                                            "fee": None if r["fee"] is None else str(r["fee"])})
                                + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def run(spark, tmp_path: Path, spec: TableAggregate, log: list[list[dict]],
        per_file: bool) -> list[dict]:
    write_files(tmp_path / "in", log)
    src = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1 if per_file else 1000)
           .json(str(tmp_path / "in")))
    out = table_aggregate(src, spec, checkpoint_location=str(tmp_path / "agg"),
                          trigger={"availableNow": True})
    got: list[dict] = []
    query = (out.writeStream.foreachBatch(
        lambda b, i: got.extend({**r.asDict(), "_batch": i} for r in b.collect()))
        .option("checkpointLocation", str(tmp_path / "out")).trigger(availableNow=True).start())
    query.awaitTermination()
    return got


def per_group(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        if r.get("_dead_letter"):
            out.setdefault("dead letters", []).append(json.loads(r["_dead_letter"])["reason"])
            continue
        out.setdefault(r["region"], []).append(
            {k: v for k, v in r.items() if k not in ("_batch", "_dead_letter")})
    for g in out.values():
        if isinstance(g[0], dict):
            g.sort(key=lambda r: r["version"])
    return out


# ("final", True) runs in the compatibility tier (.ci/compat) on every PySpark line.
@pytest.mark.parametrize(("emit", "per_file"), [pytest.param("final", True, marks=pytest.mark.compat),
                                                ("eager", True),
                                                ("final", False)])
def test_spark_equals_the_oracle(spark, tmp_path, emit, per_file):
    spec = TableAggregate(keys=["account_id"], group_by=["region"], aggregations=AGGS,
                          event_time_column="ts", lateness_ms=60_000, emit=emit,
                          tombstone_column="deleted", key_groups=3)
    got = run(spark, tmp_path, spec, LOG, per_file)
    oracle_log = LOG if per_file else [[r for b in LOG for r in b]]
    want = oracle_table_aggregate(spec, oracle_log, columns=COLUMNS)
    assert len(got) >= 8 and per_group(got) == per_group([r for _, r in want.rows])
    final = {r["region"]: r for r in got if r["op"] == "upsert" and r["version"] == max(
        x["version"] for x in got if x["region"] == r["region"])}
    if per_file:
        # a1 moved to us, a3 deleted, a2 deleted, a4 moved from NULL to eu, a5 in apac.
        assert {g: (r["accounts"], r["total"], r["largest"]) for g, r in final.items()} == {
            "us": (1, 120, 120), "eu": (1, 11, 11), "apac": (1, 5, 5)}
        assert final["us"]["fees"] == Decimal("1.10")
        assert {r["region"] for r in got if r["op"] == "delete"} == {None}


def test_late_updates_are_dead_lettered(spark, tmp_path):
    spec = TableAggregate(keys=["account_id"], group_by=["region"], aggregations=AGGS,
                          event_time_column="ts", lateness_ms=60_000, late_data="dlq",
                          tombstone_column="deleted")
    got = run(spark, tmp_path, spec, LOG, True)
    want = oracle_table_aggregate(spec, LOG, columns=COLUMNS)
    assert want.late == 1
    groups = per_group(got)
    assert groups.pop("dead letters") == ["late"]
    assert groups == per_group([r for _, r in want.rows if "_dead_letter" not in r])


def test_input_errors_before_any_query(spark, tmp_path):
    (tmp_path / "in").mkdir()
    src = spark.readStream.schema(DDL).json(str(tmp_path / "in"))
    spec = TableAggregate(keys=["account_id"], group_by=["country"], aggregations=AGGS,
                          event_time_column="ts")
    with pytest.raises(ConfigError, match=r"`group_by`.*country"):
        table_aggregate(src, spec, checkpoint_location=str(tmp_path / "agg"))
    spec = TableAggregate(keys=["account_id"], group_by=["region"], event_time_column="ts",
                          aggregations=[Aggregation(agg="sum", column="region", as_="s")])
    with pytest.raises(ConfigError, match="sum needs a numeric column"):
        table_aggregate(src, spec, checkpoint_location=str(tmp_path / "agg"))
    spec = TableAggregate(keys=["account_id"], group_by=["region"], aggregations=AGGS,
                          event_time_column="ts")
    with pytest.raises(ConfigError, match="checkpoint_location"):
        table_aggregate(src, spec)


def _random_log(seed: int) -> list[list[dict]]:
    """Random updates of 12 keys over 4 groups and NULL: moves, deletes, NULL fees;
    key 'big' holds 2**63 - 11 in its own group, where other keys add up to 2**63 - 1."""
    import random

    rng = random.Random(seed)
    log, minute = [], 0.0
    for _ in range(6):
        rows = []
        for _ in range(rng.randint(1, 6)):
            minute += rng.choice([0, 0.5, 1, 2])
            key = f"k{rng.randint(0, 11)}"
            if rng.random() < 0.2:  # a delete (its balance not NULL: see below)
                rows.append(row(key, None, 0, minute, deleted=True, fee=None))
            else:
                # No NULL balance: PySpark hands a BIGINT column holding NULL to pandas as
                # float64, where 2**63 - 11 cannot be held (docs/table-aggregate.md, Limits).
                rows.append(row(key, rng.choice(["eu", "us", "apac", "sa", None]),
                                rng.choice([1, 2, 10]), minute,
                                fee=rng.choice(["0.01", "99999999.99", "1.50", None])))
        log.append(rows)
    log[0].append(row("big", "max", 2**63 - 11, 0.1))
    log[-1].append(row("big2", "max", 10, minute))
    log.append([row("zz", "eu", 0, minute + 120, deleted=True)])  # moves the watermark
    return log


@pytest.mark.parametrize("seed", [1])
def test_the_changelog_by_group_is_the_group_by_of_the_final_snapshot(spark, tmp_path, seed):
    """Applied by group (highest version), the changelog equals a batch GROUP BY of the
    table's last rows: NULL groups, emptied groups, an int64 sum at its boundary, decimals."""
    log = _random_log(seed)
    spec = TableAggregate(keys=["account_id"], group_by=["region"], aggregations=AGGS,
                          event_time_column="ts", lateness_ms=0, emit="eager",
                          tombstone_column="deleted", key_groups=2)
    got = run(spark, tmp_path, spec, log, True)
    target: dict = {}
    for r in got:
        g = r["region"]
        if g not in target or r["version"] > target[g]["version"]:
            target[g] = r
    final = {g: (r["accounts"], r["total"], r["largest"], r["fees"])
             for g, r in target.items() if r["op"] == "upsert"}
    latest: dict = {}
    for r in sorted((r for b in log[:-1] for r in b), key=lambda r: r["ts"]):
        latest[r["account_id"]] = r
    groups: dict = {}
    for r in latest.values():
        if not r["deleted"]:
            groups.setdefault(r["region"], []).append(r)

    def agg(rows: list[dict]) -> tuple:
        balances = [r["balance"] for r in rows if r["balance"] is not None]
        fees = [r["fee"] for r in rows if r["fee"] is not None]
        return (len(rows), sum(balances) if balances else None,
                max(balances) if balances else None, sum(fees) if fees else None)

    assert final == {g: agg(rows) for g, rows in groups.items()}
    assert final["max"][1] == 2**63 - 1  # the int64 boundary, exact


def grid_log(seed: int, batches: int = 5) -> list[list[dict]]:
    """Updates on whole minutes (lateness is one minute): updates exactly at ``W``, two
    updates of one key at one time, exactly at the key's applied one, moves, deletes."""
    import random

    rnd = random.Random(seed)
    log = []
    for b in range(batches):
        rows = []
        for _ in range(5):
            acc = f"a{rnd.randrange(4)}"
            minute = b * 2 + rnd.randrange(-2, 3)
            if rnd.random() < 0.2:
                rows.append(row(acc, None, None, minute, deleted=True))
            else:
                rows.append(row(acc, rnd.choice(["eu", "us", None]), rnd.randrange(0, 9),
                                minute, fee=f"{rnd.randrange(100)}.{rnd.randrange(10)}5"))
        log.append(rows)
    return [*log, [row("zz", "eu", 0, 600, deleted=True)]]


@pytest.mark.parametrize(("emit", "seed"), [("final", 1), ("eager", 2)])
def test_updates_on_a_grid_of_whole_minutes_equal_the_oracle(spark, tmp_path, emit, seed):
    """SEMANTICS §7/§10 turn on equalities: an update exactly at ``W`` (held under ``final``
    until ``W`` passes it), one exactly at its key's applied event time (not late; the later
    arrival wins), one a minute below (late: dropped and counted). The grid puts them in
    the log (seed 1: 2 updates exactly at ``W``, 4 pairs of one key at one time in one
    micro-batch; seed 2: 3 and 5); per group, Spark's changelog equals the oracle's."""
    log = grid_log(seed)
    spec = TableAggregate(keys=["account_id"], group_by=["region"], aggregations=AGGS,
                          event_time_column="ts", lateness_ms=60_000, emit=emit,
                          tombstone_column="deleted", key_groups=2)
    got = run(spark, tmp_path, spec, log, per_file=True)
    want = oracle_table_aggregate(spec, log, columns=COLUMNS)
    assert per_group(got) == per_group([r for _, r in want.rows])
    assert len(got) >= 6
