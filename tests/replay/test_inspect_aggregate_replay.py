"""``interlace inspect`` of a table aggregation on real Spark: both of its queries, at every
micro-batch, report what the oracle holds, on both state stores; and a pipeline whose
aggregation runs before the stage asked for builds without starting a query.

The first query (by key) holds pending updates and each key's current row; the second (by
group) each group's last row. One session-scoped SparkSession (tests/conftest.py).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from interlace import Aggregation, TableAggregate
from interlace.inspection import inspect_operator
from interlace.operators.table_aggregate import prepare_table_aggregate
from interlace.testing.oracles.table_aggregate import oracle_table_aggregate

pytestmark = pytest.mark.spark

BASE = dt.datetime(2026, 1, 1, 10)
DDL = "account_id STRING, region STRING, balance BIGINT, deleted BOOLEAN, ts TIMESTAMP"
COLUMNS = [c.split()[0] for c in DDL.split(", ")]
AGGS = [Aggregation(agg="count", as_="accounts"),
        Aggregation(agg="sum", column="balance", as_="total"),
        Aggregation(agg="max", column="balance", as_="largest"),
        Aggregation(agg="count_distinct", column="balance", mode="exact",
                    max_distinct_values_per_group=10, as_="balances")]


# Two examples per store, each a Spark replay, not shrunk (test_inspect_replay.py says why).
REPLAYS = settings(max_examples=2, deadline=None, derandomize=False, phases=[Phase.generate],
                   suppress_health_check=[HealthCheck.function_scoped_fixture,
                                          HealthCheck.too_slow])


def digest(root: Path) -> str:
    """One hash of every file under ``root``, names and bytes."""
    h = hashlib.sha256()
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            path = Path(folder) / name
            h.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return h.hexdigest()


def random_updates(seed: int, n_batches: int = 5) -> list[list[dict]]:
    """Updates of six accounts, 0-40 s apart per batch, out of order (some late), moves
    between regions, NULL regions and balances, deletes."""
    rnd = random.Random(seed)
    log = []
    for b in range(n_batches):
        log.append([
            {"account_id": f"a{rnd.randrange(6)}",
             "region": rnd.choice(["eu", "us", "apac", None]),
             "balance": None if rnd.random() < 0.1 else rnd.randrange(5),
             "deleted": rnd.random() < 0.15,
             "ts": BASE + dt.timedelta(seconds=max(0.0, b * 10 + rnd.uniform(-15, 10)))}
            for _ in range(rnd.randrange(2, 7))])
    return log


def write_files(folder: Path, log: list[list[dict]]) -> None:
    """One JSON file per micro-batch, with increasing modification times."""
    folder.mkdir(parents=True)
    for i, rows in enumerate(log):
        path = folder / f"{i:03d}.json"
        path.write_text("".join(json.dumps({**r, "ts": r["ts"].isoformat()}) + "\n"
                                for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def run(spark, workdir: Path, spec: TableAggregate, log: list[list[dict]]):
    """Both queries to the end of the log; return the bound operator."""
    from interlace.operators.table_aggregate import start_table_aggregate

    write_files(workdir / "in", log)
    src = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).json(str(workdir / "in"))
    _, out = start_table_aggregate(src, spec, checkpoint_location=str(workdir / "agg"),
                                   trigger={"availableNow": True})
    query = (out.writeStream.foreachBatch(lambda b, i: b.collect())
             .option("checkpointLocation", str(workdir / "out"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return prepare_table_aggregate(src, spec)


def committed(checkpoint: Path) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def first_query_batch_read(checkpoint: Path, batch: int) -> int | None:
    """The first query's micro-batch whose channel file the second query's ``batch`` read
    last (the channel names each file by it; the file source logs one file per batch)."""
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    offset = json.loads(lines[2])["logOffset"] if len(lines) > 2 else -1
    if offset < 0:
        return None
    log = checkpoint / "sources" / "0"
    entry = log / str(offset) if (log / str(offset)).exists() else log / f"{offset}.compact"
    names = [json.loads(x)["path"].rsplit("/", 1)[-1] for x in entry.read_text().splitlines()[1:]]
    return max(int(n.split("-")[1].split(".")[0]) for n in names)


def key_text(key: tuple) -> str:
    return f"account_id={key[0]}"


@REPLAYS
@given(seed=st.integers(0, 10_000), emit=st.sampled_from(["final", "eager"]),
       lateness_ms=st.sampled_from([0, 5_000, 20_000]))
def test_inspect_reports_what_the_aggregation_oracle_holds_at_every_batch(
        spark, one_run_store, tmp_path_factory, seed, emit, lateness_ms):
    spec = TableAggregate(keys=["account_id"], group_by=["region"], aggregations=AGGS,
                          event_time_column="ts", lateness_ms=lateness_ms, emit=emit,
                          tombstone_column="deleted", key_groups=3)
    log = random_updates(seed)
    workdir = tmp_path_factory.mktemp("agg")
    op = run(spark, workdir, spec, log)
    want = oracle_table_aggregate(spec, log, columns=COLUMNS)
    keys_cp, groups_cp = workdir / "agg" / "keys", workdir / "out"
    before = digest(workdir / "agg"), digest(groups_cp)

    # The first query: pending updates (releases_at = t) and each key's row (kept).
    ids = committed(keys_cp)
    assert len(want.held_keys) == len(ids), (len(want.held_keys), ids)
    pending = 0
    for batch in ids:
        found = inspect_operator(spark, keys_cp, op.keys, batch_id=batch)
        assert found.operator == "aggregate_keys"
        got = Counter((i["item"], i["key"], i["event_time"], i["releases_at"],
                       json.loads(i["row"]).get("region"), json.loads(i["row"]).get("balance"))
                      for i in found.items)
        held = Counter((h.kind, key_text(h.key), h.event_time_us, h.releases_at_us,
                        h.row.get("region"), h.row.get("balance"))
                       for h in want.held_keys[batch])
        assert got == held, f"first query, batch {batch}"
        pending += sum(1 for i in found.items if i["releases_at"] is not None)
    if emit == "eager":
        assert pending == 0

    # The second query: each group's last row, after the deltas of the batches it read.
    groups_seen = 0
    for batch in committed(groups_cp):
        found = inspect_operator(spark, groups_cp, op, batch_id=batch)
        assert found.operator == "aggregate_groups"
        upto = first_query_batch_read(groups_cp, batch)
        oracle = [] if upto is None else want.held_groups[upto]
        got = {i["key"]: (i["item"], json.loads(i["row"])) for i in found.items}
        assert all(i["event_time"] is None and i["releases_at"] is None for i in found.items)
        held = {f"region={'null' if h.group[0] is None else h.group[0]}":
                ("group" if h.rows else "empty group", {**h.row, "rows": h.rows})
                for h in oracle}
        assert got == held, f"second query, batch {batch} (first query's batch {upto})"
        groups_seen += len(got)
    assert groups_seen > 0
    assert (digest(workdir / "agg"), digest(groups_cp)) == before, "inspect wrote"
