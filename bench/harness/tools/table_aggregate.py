"""Table aggregation vs the nearest native query: a signed-delta ``groupBy().agg()``.

    .venv/bin/python bench/run.py table-aggregate                        # 100k updates/batch
    .venv/bin/python bench/run.py table-aggregate --rows 20000 --keys 100000 --runs 1 --stores hdfs

Workload (issue 31): ``batches`` micro-batches of ``rows`` updates of a table of ``keys``
keys (each update: a random key, a random group of ``groups``, an integer amount; every
update moves its key to a group drawn anew), then a flush micro-batch one day ahead.
Aggregates per group: ``count(*)`` and ``sum(amount)``.

* **native**: Spark has no table aggregation. The nearest a Spark user writes, given a CDC
  feed with before-images, is its streaming ``groupBy(group).agg(sum(sign),
  sum(sign * amount))`` in update mode over the updates encoded as signed deltas (the old
  row with -1, the new one with +1; computed here in numpy from the same updates, so the
  native query reads about twice as many rows). It cannot do min / max under removal.
* **interlace**: ``table_aggregate`` (``emit="final"``, ``lateness_ms`` 0): its first query
  by key into a channel, then its second by group, one after the other (``availableNow``).

Throughput is updates per second (the same updates for both), best of ``--runs``, engines
alternated; a verification run collects both outputs and checks each group's final
(count, sum) equal. State: the stateful operators' ``memoryUsedBytes`` and rows at the end
(interlace: both queries), per key and per group. Results go to
``bench/results/<date>-table-aggregate.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from harness import data as hdata
from harness import spark as hspark

UPDATES = pa.schema([("key", pa.int64()), ("grp", pa.int64()), ("amount", pa.int64()),
                     ("ts", hdata.TS)])
DELTAS = pa.schema([("grp", pa.int64()), ("sign", pa.int64()), ("amount", pa.int64()),
                    ("ts", hdata.TS)])
SPAN_US = 60 * 1_000_000

BENCH = Path(__file__).resolve().parents[2]  # bench/


def make_data(rows: int, batches: int, keys: int, groups: int,
              seed: int) -> tuple[list[pa.Table], list[pa.Table]]:
    """Per micro-batch: the updates, and the same updates as signed deltas."""
    rng = np.random.default_rng(seed)
    current_group = np.full(keys, -1, dtype=np.int64)
    current_amount = np.zeros(keys, dtype=np.int64)
    updates, deltas = [], []
    for b in range(batches):
        key = rng.integers(0, keys, rows)
        grp = rng.integers(0, groups, rows)
        amount = rng.integers(1, 1000, rows)
        t = np.sort(hdata.T0_US + b * SPAN_US + rng.integers(0, SPAN_US, rows))
        updates.append(hdata.table(UPDATES, [key, grp, amount, t]))
        # Signed deltas in update order: a key updated twice in a batch removes its own
        # previous update (a Python loop only over repeated keys).
        old_g, old_a = current_group[key].copy(), current_amount[key].copy()
        _, first = np.unique(key, return_index=True)
        repeated = np.ones(rows, dtype=bool)
        repeated[first] = False
        for i in np.flatnonzero(repeated):
            prev = np.flatnonzero(key[:i] == key[i])[-1]
            old_g[i], old_a[i] = grp[prev], amount[prev]
        current_group[key], current_amount[key] = grp, amount  # the last write per key wins
        had = old_g >= 0
        dg = np.concatenate([old_g[had], grp])
        sign = np.concatenate([-np.ones(int(had.sum()), np.int64), np.ones(rows, np.int64)])
        da = np.concatenate([-old_a[had], amount])
        dt_ = np.concatenate([t[had], t])
        deltas.append(hdata.table(DELTAS, [dg, sign, da, dt_]))
    flush = hdata.T0_US + (batches + 1) * SPAN_US + 86_400 * 1_000_000
    # The flush: a tombstone of a key never seen (moves the watermark, changes nothing).
    updates.append(pa.table({"key": pa.array([-1], pa.int64()), "grp": pa.nulls(1, pa.int64()),
                             "amount": pa.nulls(1, pa.int64()),
                             "ts": pa.array([flush], hdata.TS)}, schema=UPDATES))
    deltas.append(hdata.table(DELTAS, [np.zeros(0, np.int64)] * 3 + [np.zeros(0, np.int64)]))
    return updates, deltas


def _state(progress: list) -> tuple[int, int]:
    """The last progress's state operators: (memory bytes, rows), summed."""
    for p in reversed(progress):
        ops = p.get("stateOperators") or []
        if ops:
            return (sum(int(o.get("memoryUsedBytes") or 0) for o in ops),
                    sum(int(o.get("numRowsTotal") or 0) for o in ops))
    return 0, 0


def _batch_ms(progress: list) -> float:
    times = [p["durationMs"]["triggerExecution"] for p in progress
             if int(p.get("numInputRows") or 0) > 0]
    return float(statistics.median(times)) if times else 0.0


def _sink(collect: bool, out: list, cols: tuple[str, str, str]) -> Any:
    g, n, s = cols

    def sink(df: Any, batch_id: int) -> None:
        if collect:
            out.extend({**r.asDict(), "_batch": batch_id} for r in df.collect())
        else:
            out.append(df.selectExpr("count(*) AS c", f"sum({s}) AS s").first()[0])

    return sink


def run_native(spark: Any, root: Path, work: Path, collect: bool) -> dict:
    from pyspark.sql import functions as F

    deltas = hdata.read_stream(spark, root / "deltas", DELTAS)
    out = deltas.groupBy("grp").agg(F.sum("sign").alias("n"), F.sum("amount").alias("total"))
    rows: list = []
    start = time.monotonic()
    q = (out.writeStream.outputMode("update").foreachBatch(_sink(collect, rows,
                                                                 ("grp", "n", "total")))
         .option("checkpointLocation", str(work / "native")).trigger(availableNow=True).start())
    q.awaitTermination()
    seconds = time.monotonic() - start
    mem, n = _state(q.recentProgress)
    final: dict = {}
    for r in rows if collect else []:
        final[r["grp"]] = (r["n"], r["total"])
    return {"seconds": seconds, "final": {g: v for g, v in final.items() if v[0] > 0},
            "state_bytes": mem, "state_rows": n, "batch_ms": _batch_ms(q.recentProgress)}


def _spec() -> Any:
    from interlace import Aggregation, TableAggregate

    return TableAggregate(keys=["key"], group_by=["grp"], event_time_column="ts",
                          aggregations=[Aggregation(agg="count", as_="n"),
                                        Aggregation(agg="sum", column="amount", as_="total")])


def run_interlace(spark: Any, root: Path, work: Path, collect: bool) -> dict:
    from interlace.operators.table_aggregate import start_table_aggregate

    updates = hdata.read_stream(spark, root / "updates", UPDATES)
    spec = _spec()
    rows: list = []
    start = time.monotonic()
    q1, out = start_table_aggregate(updates, spec, checkpoint_location=work / "agg",
                                    trigger={"availableNow": True})
    mid = time.monotonic()
    q2 = (out.writeStream.foreachBatch(_sink(collect, rows, ("grp", "n", "total")))
          .option("checkpointLocation", str(work / "groups")).trigger(availableNow=True).start())
    q2.awaitTermination()
    end = time.monotonic()
    m1, n1 = _state(q1.recentProgress)
    m2, n2 = _state(q2.recentProgress)
    final: dict = {}
    for r in sorted(rows, key=lambda r: r["version"]) if collect else []:
        final[r["grp"]] = (r["n"], r["total"]) if r["op"] == "upsert" else None
    return {"seconds": end - start, "final": {g: v for g, v in final.items() if v},
            "state_bytes": m1 + m2, "state_rows": n1 + n2, "keys_state_bytes": m1,
            "groups_state_bytes": m2, "stage_seconds": [mid - start, end - mid],
            "batch_ms": [_batch_ms(q1.recentProgress), _batch_ms(q2.recentProgress)]}


def run_floor(spark: Any, root: Path, work: Path, collect: bool) -> dict:
    """The floor of two stages: the no-op ``applyInPandasWithState`` (harness/floor.py: reads
    every frame, keeps 8 bytes, emits nothing) on stage 1's prepared input, then on stage
    2's input rows (the signed deltas, as many rows as stage 1 emits) in as many key groups
    as stage 2 has, ``pmod(xxhash64(grp), key_groups)`` (stage 2 places its key groups on
    distinct shuffle partitions with ``key_group_sql``; this floor does not, so two key
    groups may share a task). No channel and no output."""
    from interlace.operators.table_aggregate import prepare_table_aggregate
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout

    from harness.floor import FloorFunction, floor_on

    updates = hdata.read_stream(spark, root / "updates", UPDATES)
    op = prepare_table_aggregate(updates, _spec())
    seen: list = []

    def sink(df: Any, batch_id: int) -> None:
        seen.append(df.count())

    start = time.monotonic()
    q1 = (floor_on(op.keys).writeStream.foreachBatch(sink)
          .option("checkpointLocation", str(work / "keys")).trigger(availableNow=True).start())
    q1.awaitTermination()
    mid = time.monotonic()
    deltas = hdata.read_stream(spark, root / "deltas", DELTAS)
    kg = F.expr(f"pmod(xxhash64(grp), {op.spec.key_groups})").cast("int").alias("kg")
    state = T.StructType([T.StructField("blob", T.BinaryType(), False)])
    out = deltas.select(kg, "grp", "sign", "amount").groupBy("kg").applyInPandasWithState(
        FloorFunction(timeout=False), deltas.select("grp").schema, state, "append",
        GroupStateTimeout.NoTimeout)
    q2 = (out.writeStream.foreachBatch(sink)
          .option("checkpointLocation", str(work / "groups")).trigger(availableNow=True).start())
    q2.awaitTermination()
    end = time.monotonic()
    if any(seen):
        raise AssertionError("the floor emitted rows")
    return {"seconds": end - start, "final": {}, "stage_seconds": [mid - start, end - mid],
            "batch_ms": [_batch_ms(q1.recentProgress), _batch_ms(q2.recentProgress)]}


ENGINES = {"native": run_native, "interlace": run_interlace, "floor": run_floor}


def parser() -> argparse.ArgumentParser:
    """``bench/run.py table-aggregate --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py table-aggregate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000, help="updates per micro-batch")
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, nargs="+", default=[1_000, 100_000])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--stores", nargs="+", default=list(hspark.STORES))
    ap.add_argument("--engines", nargs="+", default=list(ENGINES), choices=list(ENGINES),
                    help="native and interlace always run (their outputs are checked equal); "
                         "floor: the no-op of both stages")
    ap.add_argument("--out", type=Path, default=None)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.engines = ["native", "interlace", *(e for e in args.engines
                                             if e not in ("native", "interlace"))]
    spark = hspark.open_session({})
    tmp = Path(tempfile.mkdtemp(prefix="interlace-tagg-"))
    results: list[dict] = []
    try:
        for groups in args.groups:
            updates, deltas = make_data(args.rows, args.batches, args.keys, groups, 20261127)
            data = tmp / f"data-{groups}"
            hdata.write_batches(data / "updates", updates)
            hdata.write_batches(data / "deltas", deltas)
            n_updates = args.rows * args.batches
            for store in args.stores:
                hspark.use_store(spark, store)
                finals = {}
                for engine in ("native", "interlace"):
                    fn = ENGINES[engine]
                    work = tmp / f"{store}-{groups}-{engine}-verify"
                    finals[engine] = fn(spark, data, work, True)["final"]
                    shutil.rmtree(work, ignore_errors=True)
                assert finals["native"] == finals["interlace"], f"{store}/{groups}: outputs differ"
                for run in range(args.runs):
                    for engine in args.engines:
                        fn = ENGINES[engine]
                        work = tmp / f"{store}-{groups}-{engine}-{run}"
                        r = fn(spark, data, work, False)
                        shutil.rmtree(work, ignore_errors=True)
                        r.pop("final")
                        results.append({"store": store, "groups": groups, "engine": engine,
                                        "run": run, "updates_per_s": n_updates / r["seconds"],
                                        **r})
                        print(json.dumps(results[-1]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report = _report(results, args)
    out = args.out or BENCH / "results" / f"{dt.date.today()}-table-aggregate.md"
    out.write_text(report)
    out.with_suffix(".json").write_text(json.dumps(
        {"args": {k: str(v) for k, v in vars(args).items()}, "versions": hspark.versions(),
         "runs": results}, indent=1))
    print(report)
    return 0


def _best(results: list[dict], store: str, groups: int, engine: str) -> dict:
    """The fastest timed run of ``engine`` at ``store`` and ``groups``."""
    return max((r for r in results if r["store"] == store and r["groups"] == groups
                and r["engine"] == engine), key=lambda r: r["updates_per_s"])


def _report(results: list[dict], args: Any) -> str:
    lines = [f"# Table aggregation vs native signed deltas ({dt.date.today()})", "",
             f"`{' '.join(sys.argv)}`: {args.rows} updates "
             f"per micro-batch, {args.batches} micro-batches + a flush, {args.keys} keys; "
             f"best of {args.runs} timed runs per engine, engines alternated; each group's "
             "final (count, sum) equal in both engines (verification run).", "",
             "| store | groups | native updates/s | interlace updates/s | interlace / native | "
             "stage 1 s | stage 2 s | native ms/batch | stage 1 ms/batch | stage 2 ms/batch | "
             "native state bytes/group | interlace state bytes/key (stage 1) | "
             "bytes/group (stage 2) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for groups in args.groups:
        for store in args.stores:
            n, i = (_best(results, store, groups, e) for e in ("native", "interlace"))
            lines.append(
                f"| {store} | {groups:,} | {n['updates_per_s']:,.0f} | "
                f"{i['updates_per_s']:,.0f} | {i['updates_per_s'] / n['updates_per_s']:.2f}x | "
                f"{i['stage_seconds'][0]:.1f} | {i['stage_seconds'][1]:.1f} | "
                f"{n['batch_ms']:,.0f} | {i['batch_ms'][0]:,.0f} | {i['batch_ms'][1]:,.0f} | "
                f"{n['state_bytes'] / max(groups, 1):,.0f} | "
                f"{i['keys_state_bytes'] / args.keys:,.1f} | "
                f"{i['groups_state_bytes'] / max(groups, 1):,.0f} |")
    if "floor" in args.engines:
        lines += ["", "The floor of two stages (the no-op `applyInPandasWithState` on stage 1's "
                  "input, then on as many rows as stage 2 reads, in as many key groups as "
                  "stage 2 has, `pmod(xxhash64(grp), key_groups)`; no channel, no output):",
                  "",
                  "| store | groups | floor updates/s | floor / native | floor stage 1 s | "
                  "floor stage 2 s | floor stage 1 ms/batch | floor stage 2 ms/batch |",
                  "|---|---|---|---|---|---|---|---|"]
        for groups in args.groups:
            for store in args.stores:
                n, f = (_best(results, store, groups, e) for e in ("native", "floor"))
                lines.append(
                    f"| {store} | {groups:,} | {f['updates_per_s']:,.0f} | "
                    f"{f['updates_per_s'] / n['updates_per_s']:.2f}x | "
                    f"{f['stage_seconds'][0]:.1f} | {f['stage_seconds'][1]:.1f} | "
                    f"{f['batch_ms'][0]:,.0f} | {f['batch_ms'][1]:,.0f} |")
    lines += ["", "State bytes: the state store's `memoryUsedBytes` at the end (the HDFS-backed "
              "store holds every key group's blob in memory; RocksDB reports its memory "
              "use), over all keys (stage 1) or groups."]
    return "\n".join(lines) + "\n"
