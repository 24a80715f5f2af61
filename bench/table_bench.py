"""Benchmark: interlace's table joins vs Spark's native joins (issue 12, "Performance").

Run (from the repository root)::

    .venv/bin/python bench/table_bench.py           # full run -> bench/results/table-<date>.md
    .venv/bin/python bench/table_bench.py --quick   # smoke run (1-2 min), not numbers

Workloads (docs/performance.md, "Table joins", has the method and why the natives differ):

* ``st10k`` / ``st1m``: a stream of ``--rows`` rows per micro-batch (``k, ts, v``) and a
  changelog table (``k, ts, tv``) of 10k / 1M keys whose full snapshot arrives in micro-batch
  0, then 1 % of the keys are updated per micro-batch. Engines: interlace
  ``stream_table_join(how="left", emit="final")``; Spark's stream-static left join with the
  snapshot read as a (cached) batch DataFrame (no state: the cost floor, wrong once the table
  changes); Spark's left outer stream-stream interval join of the stream with the changelog
  (``t.ts BETWEEN s.ts - INTERVAL I AND s.ts``, watermarks on both); and the *floor*: a no-op
  ``applyInPandasWithState`` function on ``stream_table_join``'s own prepared input (what
  Spark's stateful pandas path costs before interlace does any work).
* ``tt``: two changelogs (``k, ts, v, deleted``) over 10k keys: each side's snapshot (90 % of
  the keys) in micro-batch 0, then 1 % of the keys updated per side per micro-batch, 5 % of
  the updates tombstones. Engines: interlace ``table_join(how="full")``; Spark's full outer
  stream-stream join on ``k`` with ``r.ts BETWEEN l.ts - INTERVAL I AND l.ts + INTERVAL I``.

Same method as bench/join_bench.py (whose helpers it imports): data generated with numpy from a
fixed seed and written up front as one Parquet file per input per micro-batch (mtimes in order,
``maxFilesPerTrigger=1``, ``trigger(availableNow=True)``), one ``local[2]`` session, engines
interleaved, ``--repeat`` runs per cell, fastest reported with every wall time and the CPU
seconds from /proc. After the data micro-batches each input gets one *sentinel* file (one row,
key -1, far ahead in event time) so the watermark passes every data row and interlace's
``emit="final"`` releases all of them; sinks ignore key -1.

Checks (exit status 1 if one fails): interlace's stream-table output has one row per stream
row (count == stream rows, and the same order-independent checksum of the stream columns as the
stream-static join, which has one row per stream row by construction), its matched rows and
``sum(right_tv)`` equal an as-of join computed from the data with numpy; interlace's
table-table changelog applied to a dict target (highest ``version`` per key, ``delete``
removes) equals the full join of both tables' final snapshots computed with pandas, with
versions 0..n-1 per key. The native joins answer different questions: their counts are
reported next to the counts expected from the data for what they compute.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import join_bench  # noqa: E402  (bench/ is not a package)
from join_bench import (  # noqa: E402
    ARROW_SCHEMA,
    HERE,
    LONG_RUN_S,
    T0_US,
    cpu_delta,
    cpu_snapshot,
    fmt_bytes,
    fmt_int,
    versions,
    write_batches,
)

SNAPSHOT_US = T0_US - 1_000_000  # every snapshot version is valid from T0 - 1 s
SENTINEL_KEY = -1
SHIFT = np.int64(1) << np.int64(40)  # (key, time) packed in one int64: times < 2**40 us
BASE_US = T0_US - 3_600_000_000  # relative times are >= 0
TABLE_SCHEMA = pa.schema([
    pa.field("k", pa.int64()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("tv", pa.int64()),
])
TT_SCHEMA = pa.schema([
    pa.field("k", pa.int64()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("v", pa.int64()),
    pa.field("deleted", pa.bool_()),
])
ST_ENGINES = ("interlace", "native-static", "native-interval", "floor")
TT_ENGINES = ("interlace", "native-full")


# ----------------------------------------------------------------------------------------------
# Workloads and data
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workload:
    """One workload. ``kind``: ``"st"`` (stream-table) or ``"tt"`` (table-table).

    Event time advances ``span_s`` per micro-batch. Stream rows are evenly spaced plus uniform
    jitter ``+-jitter_ms``; table updates of micro-batch ``i >= 1`` are uniform over its span
    plus jitter, in time order; snapshots (micro-batch 0) are all at T0 - 1 s, before every
    stream row. ``lateness_ms > 2 * jitter_ms``: no row is late in any engine.
    ``interval_ms``: the native stream-stream joins' interval ``I``.
    """

    name: str
    kind: str
    keys: int
    interval_ms: int
    lateness_ms: int = 2_000
    jitter_ms: int = 500
    span_s: float = 100.0
    update_frac: float = 0.01
    tombstone_frac: float = 0.05  # tt only
    snapshot_frac: float = 0.9  # tt only: share of the keys in each side's snapshot

    @property
    def label(self) -> str:
        what = "stream-table" if self.kind == "st" else "table-table"
        return f"{what}, {self.keys:,} keys"

    @property
    def engines(self) -> tuple[str, ...]:
        return ST_ENGINES if self.kind == "st" else TT_ENGINES


def workloads(quick: bool, interval_ms: int | None, lateness_ms: int) -> dict[str, Workload]:
    sizes = ({"st10k": 1_000, "st1m": 20_000, "tt": 1_000} if quick
             else {"st10k": 10_000, "st1m": 1_000_000, "tt": 10_000})
    i = lateness_ms if interval_ms is None else interval_ms
    return {name: Workload(name, name[:2], keys, i, lateness_ms) for name, keys in sizes.items()}


Cols = tuple[Any, ...]  # numpy columns


@dataclasses.dataclass
class Data:
    """Per input, per data micro-batch, numpy columns (sentinels not included).

    ``st``: ``left`` = stream ``(k, t_us, v)``, ``right`` = table ``(k, t_us, tv)``.
    ``tt``: both ``(k, t_us, v, deleted)``.
    """

    workload: Workload
    left: list[Cols]
    right: list[Cols]

    @property
    def input_rows(self) -> int:
        return sum(len(b[0]) for b in self.left + self.right)

    @property
    def left_rows(self) -> int:
        return sum(len(b[0]) for b in self.left)

    def cat(self, side: str) -> Cols:
        batches = self.left if side == "left" else self.right
        return tuple(np.concatenate(c) for c in zip(*batches, strict=True))


def _update_times(w: Workload, rng: np.random.Generator, i: int, m: int) -> np.ndarray:
    span_us, jit = int(w.span_s * 1_000_000), w.jitter_ms * 1000
    return np.sort(T0_US + i * span_us + rng.integers(0, span_us, m)
                   + rng.integers(-jit, jit + 1, m))


def generate(w: Workload, rows: int, batches: int, seed: int) -> Data:
    rng = np.random.default_rng(seed)
    m = max(1, round(w.keys * w.update_frac))
    if w.kind == "st":
        span_us, jit = int(w.span_s * 1_000_000), w.jitter_ms * 1000
        stream = []
        for i in range(batches):
            base = i * span_us + (np.arange(rows, dtype=np.int64) * span_us) // rows
            stream.append((rng.integers(0, w.keys, rows, dtype=np.int64),
                           T0_US + base + rng.integers(-jit, jit + 1, rows), rng.random(rows)))
        table = [(np.arange(w.keys, dtype=np.int64), np.full(w.keys, SNAPSHOT_US, np.int64),
                  rng.integers(0, 2**31, w.keys, dtype=np.int64))]
        for i in range(1, batches):
            table.append((rng.choice(w.keys, m, replace=False).astype(np.int64),
                          _update_times(w, rng, i, m), rng.integers(0, 2**31, m, dtype=np.int64)))
        return Data(w, stream, table)

    def side() -> list[Cols]:
        n0 = round(w.keys * w.snapshot_frac)
        out = [(np.sort(rng.choice(w.keys, n0, replace=False)).astype(np.int64),
                np.full(n0, SNAPSHOT_US, np.int64), rng.integers(0, 2**31, n0, dtype=np.int64),
                np.zeros(n0, bool))]
        for i in range(1, batches):
            out.append((rng.choice(w.keys, m, replace=False).astype(np.int64),
                        _update_times(w, rng, i, m), rng.integers(0, 2**31, m, dtype=np.int64),
                        rng.random(m) < w.tombstone_frac))
        return out

    return Data(w, side(), side())


def write_inputs(data: Data, root: Path, batches: int) -> None:
    """One Parquet file per input per data micro-batch, then the sentinel file of each input."""
    w = data.workload
    t_end = np.array([T0_US + int((batches + 1) * w.span_s * 1_000_000)], np.int64)
    sk = np.array([SENTINEL_KEY], np.int64)
    ts = pa.timestamp("us", tz="UTC")

    def table(schema: pa.Schema, cols: Cols) -> pa.Table:
        arrays = [pa.array(cols[0]), pa.array(cols[1]).cast(ts)]
        if schema is TT_SCHEMA:  # a tombstone carries its key only
            arrays += [pa.array(cols[2], mask=cols[3]), pa.array(cols[3])]
        else:
            arrays.append(pa.array(cols[2]))
        return pa.Table.from_arrays(arrays, schema=schema)

    sides: tuple[tuple[str, pa.Schema, list[Cols], Cols], ...]
    if w.kind == "st":
        sides = (("stream", ARROW_SCHEMA, data.left, (sk, t_end, np.zeros(1))),
                 ("table", TABLE_SCHEMA, data.right, (sk, t_end, np.zeros(1, np.int64))))
    else:
        sentinel = (sk, t_end, np.zeros(1, np.int64), np.zeros(1, bool))
        sides = (("left", TT_SCHEMA, data.left, sentinel), ("right", TT_SCHEMA, data.right,
                                                             sentinel))
    for name, schema, batch_cols, sentinel_cols in sides:
        write_batches(root / name, [table(schema, c) for c in [*batch_cols, sentinel_cols]])


# ----------------------------------------------------------------------------------------------
# What each engine should output, computed from the data
# ----------------------------------------------------------------------------------------------


def _packed(k: np.ndarray, t: np.ndarray) -> Any:
    return k * SHIFT + (t - BASE_US)


def st_expected(data: Data) -> dict[str, dict[str, int]]:
    """Per engine: output rows, rows with a table value, and ``sum(right_tv)``.

    interlace: as-of join (the version with the greatest time <= the row's; ties: the later
    arrival). native-static: the snapshot's version for every row. native-interval: one row per
    table update of the key in ``[t - I, t]``, or one row with NULLs if there is none.
    """
    sk, st, _ = data.cat("left")
    tk, tt, tv = data.cat("right")
    order = np.argsort(_packed(tk, tt), kind="stable")  # stable: ties keep arrival order
    packed, tv_sorted, tk_sorted = _packed(tk, tt)[order], tv[order], tk[order]
    q = _packed(sk, st)
    idx = np.searchsorted(packed, q, "right") - 1
    ok = (idx >= 0) & (tk_sorted[np.maximum(idx, 0)] == sk)
    asof = {"rows": len(sk), "matched": int(ok.sum()),
            "sum_tv": int(tv_sorted[idx[ok]].sum())}
    snap_k, _, snap_tv = data.right[0]  # keys 0..n-1
    hit = np.isin(sk, snap_k)
    lookup = np.zeros(int(snap_k.max()) + 1, np.int64)
    lookup[snap_k] = snap_tv
    static = {"rows": len(sk), "matched": int(hit.sum()), "sum_tv": int(lookup[sk[hit]].sum())}
    lo = np.searchsorted(packed, q - data.workload.interval_ms * 1000, "left")
    hi = np.searchsorted(packed, q, "right")
    cs = np.concatenate([[0], np.cumsum(tv_sorted)])
    n = hi - lo
    # How far the natives are from the as-of answer: rows whose as-of version is not the
    # snapshot's (stream-static gives them a stale value), and rows whose key has a version
    # but none in [t - I, t] (the interval join gives them NULLs).
    asof["stale_in_snapshot"] = int((order[idx[ok]] >= len(snap_k)).sum())
    asof["no_version_in_interval"] = int((ok & (n == 0)).sum())
    interval = {"rows": int(np.maximum(n, 1).sum()), "matched": int(n.sum()),
                "sum_tv": int((cs[hi] - cs[lo]).sum())}
    floor = {"rows": 0, "matched": 0, "sum_tv": 0}  # the no-op emits nothing
    return {"interlace": asof, "native-static": static, "native-interval": interval,
            "floor": floor}


def final_snapshot(cols: Cols) -> dict[int, int]:
    """A changelog's final table: per key the update with the greatest time (ties: the later
    arrival), tombstones removed."""
    k, t, v, deleted = cols
    f = pd.DataFrame({"k": k, "t": t, "v": v, "d": deleted}).sort_values(["k", "t"],
                                                                        kind="stable")
    last = f.groupby("k", sort=False).tail(1)
    last = last[~last["d"]]
    return dict(zip(last["k"].tolist(), last["v"].tolist(), strict=True))


def tt_expected(data: Data) -> dict[str, Any]:
    """The full join of both final snapshots (pandas), and what the native join emits: pairs
    with equal keys and ``|r.ts - l.ts| <= I``, plus each side's rows without a partner."""
    lf, rf = final_snapshot(data.cat("left")), final_snapshot(data.cat("right"))
    joined = pd.merge(pd.DataFrame({"k": list(lf), "left_v": list(lf.values())}),
                      pd.DataFrame({"k": list(rf), "right_v": list(rf.values())}),
                      on="k", how="outer")
    target = {int(r.k): (_int(r.left_v), _int(r.right_v)) for r in joined.itertuples()}
    i_us = data.workload.interval_ms * 1000
    (lk, lt, *_), (rk, rt, *_) = data.cat("left"), data.cat("right")

    def partners(ak: np.ndarray, at: np.ndarray, bk: np.ndarray, bt: np.ndarray) -> Any:
        b = np.sort(_packed(bk, bt))
        q = _packed(ak, at)
        return np.searchsorted(b, q + i_us, "right") - np.searchsorted(b, q - i_us, "left")

    pl, pr = partners(lk, lt, rk, rt), partners(rk, rt, lk, lt)
    native = {"pairs": int(pl.sum()), "left_only": int((pl == 0).sum()),
              "right_only": int((pr == 0).sum())}
    native["rows"] = native["pairs"] + native["left_only"] + native["right_only"]
    return {"target": target, "native": native}


def _int(x: Any) -> int | None:
    return None if x is None or pd.isna(x) else int(x)


def apply_changelog(frames: list[pd.DataFrame]) -> tuple[dict[int, tuple[Any, Any]], list[str]]:
    """interlace's changelog applied to a dict target: per key the row with the highest
    ``version``; ``delete`` removes the key. Also checks versions are 0..n-1 per key."""
    problems: list[str] = []
    if not frames:
        return {}, ["no changelog rows"]
    f = pd.concat(frames, ignore_index=True)
    per_key = f.groupby("k")["version"].agg(["min", "max", "count", "nunique"])
    bad = per_key[(per_key["min"] != 0) | (per_key["max"] + 1 != per_key["count"])
                  | (per_key["nunique"] != per_key["count"])]
    if len(bad):
        problems.append(f"{len(bad)} keys whose versions are not 0..n-1 (e.g. key "
                        f"{int(bad.index[0])})")
    last = f.sort_values(["k", "version"]).groupby("k").tail(1)
    last = last[last["op"] == "upsert"]
    return {int(r.k): (_int(r.left_v), _int(r.right_v)) for r in last.itertuples()}, problems


# ----------------------------------------------------------------------------------------------
# Queries
# ----------------------------------------------------------------------------------------------


def spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql import types as T

    types = {pa.int64(): T.LongType(), pa.float64(): T.DoubleType(), pa.bool_(): T.BooleanType(),
             pa.timestamp("us", tz="UTC"): T.TimestampType()}
    return T.StructType([T.StructField(f.name, types[f.type]) for f in schema])


def read(spark: Any, d: Path, schema: pa.Schema) -> Any:
    return (spark.readStream.schema(spark_schema(schema)).option("maxFilesPerTrigger", 1)
            .parquet(str(d)))


def build(spark: Any, root: Path, w: Workload, engine: str, key_groups: int,
          static: Any = None) -> Any:
    """The output DataFrame of ``engine`` on workload ``w`` (inputs under ``root``)."""
    from pyspark.sql import functions as F

    from interlace import StreamTableJoin, TableJoin, stream_table_join, table_join

    delay, i = f"{w.lateness_ms} milliseconds", w.interval_ms
    if w.kind == "st":
        s, t = read(spark, root / "stream", ARROW_SCHEMA), read(spark, root / "table",
                                                                TABLE_SCHEMA)
        if engine == "interlace":
            return stream_table_join(s, t, StreamTableJoin(
                left_keys=["k"], right_keys=["k"], how="left", event_time_column="ts",
                lateness_ms=w.lateness_ms, emit="final", key_groups=key_groups))
        if engine == "floor":
            return build_floor(s, t, w, key_groups)
        if engine == "native-static":
            joined = s.alias("s").join(static.alias("t"), on="k", how="left")
        else:  # native-interval
            joined = s.withWatermark("ts", delay).alias("s").join(
                t.withWatermark("ts", delay).alias("t"),
                F.expr(f"s.k = t.k AND t.ts BETWEEN s.ts - INTERVAL {i} MILLISECONDS AND s.ts"),
                "left_outer")
        return joined.select(
            F.col("s.k").alias("left_k"), F.col("s.ts").alias("left_ts"),
            F.col("s.v").alias("left_v"), F.col("t.tv").alias("right_tv"),
            F.col("t.ts").alias("right_valid_from"))
    left, right = read(spark, root / "left", TT_SCHEMA), read(spark, root / "right", TT_SCHEMA)
    if engine == "interlace":
        return table_join(left, right, TableJoin(
            left_keys=["k"], right_keys=["k"], how="full", event_time_column="ts",
            lateness_ms=w.lateness_ms, tombstone_column="deleted", emit="final",
            key_groups=key_groups))
    return left.withWatermark("ts", delay).alias("l").join(
        right.withWatermark("ts", delay).alias("r"),
        F.expr(f"l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL {i} MILLISECONDS "
               f"AND l.ts + INTERVAL {i} MILLISECONDS"),
        "full_outer").select(
        F.coalesce(F.col("l.k"), F.col("r.k")).alias("k"), F.col("l.k").alias("left_k"),
        F.col("r.k").alias("right_k"), F.col("l.v").alias("left_v"),
        F.col("r.v").alias("right_v"), F.col("l.ts").alias("left_ts"),
        F.col("r.ts").alias("right_ts"))


def build_floor(s: Any, t: Any, w: Workload, key_groups: int) -> Any:
    """The no-op floor on ``stream_table_join``'s prepared input (same spec, same shuffle).

    ``window_bench.FloorFunction`` reads every frame, keeps an 8-byte state and emits nothing:
    what Spark's stateful pandas path costs per micro-batch before interlace does any work.
    """
    from interlace import StreamTableJoin, prepare_stream_table_join

    from pyspark import cloudpickle
    from window_bench import FloorFunction  # the no-op the window benchmark's floor runs

    # Workers cannot import bench/: ship window_bench's function by value.
    cloudpickle.register_pickle_by_value(sys.modules["window_bench"])
    op = prepare_stream_table_join(s, t, StreamTableJoin(
        left_keys=["k"], right_keys=["k"], how="left", event_time_column="ts",
        lateness_ms=w.lateness_ms, emit="final", key_groups=key_groups))
    return op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
        FloorFunction(), op.output_schema, op.state_schema, op.output_mode, op.timeout_conf
    )


@dataclasses.dataclass
class TableRun(join_bench.RunResult):
    """A run; ``sink``: what the sink computed (per kind, see :func:`run_query`)."""

    sink: dict[str, int] = dataclasses.field(default_factory=dict)
    check: list[str] = dataclasses.field(default_factory=list)

    def state_of(self, batch_id: int) -> dict[str, Any]:
        for p in self.progress:
            if int(p["batchId"]) == batch_id:
                return self._state(p)
        return self._state({"batchId": batch_id})

    @property
    def peak_state_bytes(self) -> int:
        return max((self._state(p)["memoryUsedBytes"] for p in self.progress), default=0)

    def batch_ms(self, batch_id: int) -> int | None:
        for p in self.progress:
            if int(p["batchId"]) == batch_id:
                return int(p.get("durationMs", {}).get("triggerExecution", 0))
        return None

    def steady_ms(self, batches: int) -> float:
        """Median triggerExecution of the data micro-batches after the snapshot's (1..n-1)."""
        ms = [m for b in range(1, batches) if (m := self.batch_ms(b)) is not None]
        return float(np.median(ms)) if ms else float("nan")


def run_query(spark: Any, root: Path, data: Data, engine: str, key_groups: int,
              ckpt_root: Path) -> TableRun:
    """Run one engine on one workload once, timed from ``start()`` to ``awaitTermination()``.

    Sinks (``foreachBatch``, one action per micro-batch, rows with key -1 ignored):
    stream-table: ``count(*)``, ``count(right_tv)``, ``sum(right_tv)`` and
    ``sum(xxhash64(left_k, left_ts, left_v))``; table-table: the rows collected to the driver
    (both engines), interlace's kept to be applied to a dict target.
    """
    w = data.workload
    # Python workers of their own per engine (Spark keeps a worker pool per UDF environment).
    spark.sparkContext.environment["INTERLACE_BENCH_WORKERS"] = f"table-{engine}"
    static = None
    if engine == "native-static":  # the snapshot, cached before the clock starts
        static = (spark.read.schema(spark_schema(TABLE_SCHEMA))
                  .parquet(str(root / "table" / "000000.parquet")).cache())
        static.count()
    out = build(spark, root, w, engine, key_groups, static)
    acc: dict[str, int] = {"n": 0, "matched": 0, "sum_tv": 0, "s_left": 0}
    frames: list[pd.DataFrame] = []

    def st_sink(df: Any, _batch_id: int) -> None:
        row = df.where(f"left_k <> {SENTINEL_KEY}").selectExpr(
            "count(*) AS n", "count(right_tv) AS matched", "sum(right_tv) AS sum_tv",
            "sum(CAST(xxhash64(left_k, left_ts, left_v) AS DECIMAL(20, 0))) AS s_left",
        ).collect()[0]
        for name in acc:
            acc[name] += int(row[name] if row[name] is not None else Decimal(0))

    def tt_sink(df: Any, _batch_id: int) -> None:
        f = df.where(f"k <> {SENTINEL_KEY}").toPandas()
        acc["n"] += len(f)
        if engine == "interlace":  # applied to a dict target after the run
            frames.append(f[["k", "left_v", "right_v", "op", "version"]])
        else:
            acc["matched"] += int((f["left_k"].notna() & f["right_k"].notna()).sum())

    ckpt = ckpt_root / f"{engine}-{w.name}-{time.time_ns()}"
    gc.collect()
    cpu0 = cpu_snapshot()
    t0 = time.perf_counter()
    query = (out.writeStream.foreachBatch(st_sink if w.kind == "st" else tt_sink)
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    cpu = cpu_delta(cpu0, cpu_snapshot())
    progress = [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in query.recentProgress]
    if static is not None:
        static.unpersist()
    shutil.rmtree(ckpt, ignore_errors=True)
    r = TableRun(engine, w.name, key_groups if engine == "interlace" else None, data.input_rows,
                 seconds, acc["n"], acc["s_left"], progress, cpu, [seconds],
                 sink={k: v for k, v in acc.items()
                       if w.kind == "st" or k == "n" or (k == "matched" and engine != "interlace")})
    if w.kind == "tt" and engine == "interlace":
        got, problems = apply_changelog(frames)
        r.check = problems
        r.sink["target_keys"] = len(got)
        r.sink["target_ok"] = int(not problems and got == EXPECTED[w.name]["target"])
    return r


EXPECTED: dict[str, Any] = {}  # per workload, filled in main


# ----------------------------------------------------------------------------------------------
# Checks and the report
# ----------------------------------------------------------------------------------------------


def check_run(r: TableRun, data: Data, results: dict[tuple[str, str], TableRun]) -> list[str]:
    """Failures of interlace's checks (and of the harness's own invariants) for one run."""
    w, name, failures = data.workload, f"{r.workload}/{r.engine}", []
    if w.kind == "st":
        exp = EXPECTED[w.name][r.engine]
        if r.engine in ("interlace", "native-static") and r.out_rows != data.left_rows:
            failures.append(f"{name}: {r.out_rows:,} output rows, not one per stream row "
                            f"({data.left_rows:,})")
        if r.engine == "interlace":
            got = (r.sink["matched"], r.sink["sum_tv"])
            if got != (exp["matched"], exp["sum_tv"]):
                failures.append(f"{name}: matched rows / sum(right_tv) {got}, as-of join "
                                f"computed from the data {(exp['matched'], exp['sum_tv'])}")
            static = results.get((w.name, "native-static"))
            if static is not None and static.checksum != r.checksum:
                failures.append(f"{name}: the stream columns' checksum differs from the "
                                "stream-static join's (each stream row once in both)")
    elif r.engine == "interlace":
        failures += [f"{name}: {p}" for p in r.check]
        if not r.sink.get("target_ok"):
            failures.append(f"{name}: the changelog applied to a dict target differs from the "
                            "full join of both final snapshots (pandas)")
    if r.engine == "interlace" and r.dropped_by_watermark:
        failures.append(f"{name}: {r.dropped_by_watermark} rows dropped by the watermark")
    return failures


def native_note(r: TableRun, data: Data) -> str:
    """How a native run's counts compare with what it computes (not a failure)."""
    w = data.workload
    if w.kind == "st":
        exp = EXPECTED[w.name][r.engine]
        got: tuple[int, ...] = (r.out_rows, r.sink["matched"], r.sink["sum_tv"])
        want: tuple[int, ...] = (exp["rows"], exp["matched"], exp["sum_tv"])
    else:
        exp = EXPECTED[w.name]["native"]
        got, want = (r.out_rows, r.sink["matched"]), (exp["rows"], exp["pairs"])
    return "as expected" if got == want else f"**expected {want}, got {got}**"


def _ratio(a: float, b: float) -> str:
    return f"**{a / b:.2f}x**" if b else "n/a"


def render(args: Any, results: dict[tuple[str, str], TableRun], datasets: dict[str, Data],
           rows: int, batches: int, key_groups: int, command: str, failures: list[str],
           notes: list[str], total_s: float) -> str:
    v = versions()
    names = [n for n in args.workloads if n in datasets]
    any_w = datasets[names[0]].workload
    lines = [
        f"# Table-join benchmark — {dt.date.today().isoformat()}"
        + (" (--quick: smoke run, not numbers)" if args.quick else ""),
        "",
        f"Command: `{command}` (from the repository root)",
        "",
        f"- interlace {v['interlace']}, PySpark {v['pyspark']}, pandas {v['pandas']}, "
        f"pyarrow {v['pyarrow']}, numpy {v['numpy']}, Python {v['python']}, {v['java']}",
        f"- {v['cores']} cores ({v['cpu']}), {v['platform']}; "
        "`local_session(master=\"local[2]\", shuffle_partitions=4)`, default (HDFS-backed) state "
        "store" + "".join(f"; `{c}`" for c in args.conf),
        f"- {batches} data micro-batches (0: the table snapshots; 1..{batches - 1}: "
        f"{any_w.update_frac:.0%} of the keys updated per table), {rows:,} stream rows per "
        f"micro-batch (stream-table), {any_w.span_s:.0f} s of event time per micro-batch; then "
        "one sentinel micro-batch (key -1, far ahead) and Spark's no-data flush batch. Parquet "
        "file source, maxFilesPerTrigger=1, trigger(availableNow=True); runs per cell: "
        f"{args.repeat} (engines interleaved; fastest reported, all wall times below)",
        f"- lateness L = {any_w.lateness_ms:,} ms (jitter +-{any_w.jitter_ms} ms: no late rows); "
        f"native interval I = {any_w.interval_ms:,} ms; interlace key_groups={key_groups}",
        "- interlace: `stream_table_join(how=\"left\", emit=\"final\")`, `table_join(how=\"full\", "
        "emit=\"final\", tombstone_column=\"deleted\")`; native-static: `stream.join(snapshot, "
        "on=\"k\", how=\"left\")` (snapshot = micro-batch 0's table file, read as a batch "
        "DataFrame, cached before the clock starts); native-interval: left outer, "
        "`t.ts BETWEEN s.ts - I AND s.ts`; native-full: full outer, "
        "`r.ts BETWEEN l.ts - I AND l.ts + I`; watermarks L on both sides of the natives",
        f"- wall time of the whole script: {total_s:.0f} s",
        "",
    ]
    st_names = [n for n in names if datasets[n].workload.kind == "st"]
    if st_names:
        lines += [
            "## Stream-table: throughput and time per micro-batch",
            "",
            "rows/s: input rows of both inputs (stream + changelog incl. snapshot) / query wall "
            "time, fastest run. ms/batch: median `triggerExecution` of micro-batches "
            f"1..{batches - 1} (after the snapshot); batch 0 (snapshot) separately. "
            "rows/CPU-s: input rows per CPU-second of the benchmark's own processes (median "
            "over runs).",
            "",
            "| workload | engine | rows/s | stream rows/s | interlace / engine (rows/s) | "
            "rows/CPU-s | "
            "interlace / engine (CPU) | ms/batch | interlace / engine (ms/batch) | "
            "batch 0 ms | output rows | rows with a table value | sum(right_tv) | "
            "vs the data |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for n in st_names:
            il = results.get((n, "interlace"))
            for e in ST_ENGINES:
                r = results.get((n, e))
                if r is None:
                    continue
                exp = EXPECTED[n][e]
                verdict = native_note(r, datasets[n]) if e != "interlace" else (
                    "as-of join: **yes**" if (r.out_rows, r.sink["matched"], r.sink["sum_tv"])
                    == (exp["rows"], exp["matched"], exp["sum_tv"]) else "**NO**")
                vs = ["", "", ""]
                if il is not None and e != "interlace":
                    vs = [_ratio(il.rows_per_s, r.rows_per_s),
                          _ratio(il.rows_per_cpu_s, r.rows_per_cpu_s),
                          _ratio(il.steady_ms(batches), r.steady_ms(batches))]
                lines.append(
                    f"| {n} ({datasets[n].workload.keys:,} keys) | {e} | {fmt_int(r.rows_per_s)} | "
                    f"{fmt_int(datasets[n].left_rows / r.seconds)} | {vs[0]} | "
                    f"{fmt_int(r.rows_per_cpu_s)} | {vs[1]} | "
                    f"{r.steady_ms(batches):,.0f} | {vs[2]} | "
                    f"{r.batch_ms(0) or 0:,} | {r.out_rows:,} | {r.sink['matched']:,} | "
                    f"{r.sink['sum_tv']:,} | {verdict} |")
        lines += [
            "",
            "Targets (issue 12): interlace rows/s >= native-interval's; interlace ms/batch "
            "<= 2x native-static's. \"vs the data\": interlace is checked against an as-of join "
            "computed with numpy (failure otherwise); each native against what *it* computes "
            "(stream-static: the snapshot's value for every row; interval: every version of "
            "the key in `[t - I, t]`, or one NULL row), which explains their different answers. "
            "floor: a no-op `applyInPandasWithState` function (reads every frame, keeps 8 bytes "
            "of state, emits nothing) on `stream_table_join`'s own prepared input, key groups "
            "and timeout: what Spark's stateful pandas path costs before interlace does any "
            "work; interlace / floor is interlace's own share.",
            "",
        ]
        for n in st_names:
            a = EXPECTED[n]["interlace"]
            lines.append(
                f"- {n}: of {a['rows']:,} stream rows, {a['stale_in_snapshot']:,} have an as-of "
                "version newer than the snapshot (native-static gives them the snapshot's stale "
                f"value), and {a['no_version_in_interval']:,} have no version in `[t - I, t]` "
                "although their key is in the table (native-interval gives them NULLs; it gives "
                "several rows to a stream row whose key changed more than once in the interval).")
        lines.append("")
    tt_names = [n for n in names if datasets[n].workload.kind == "tt"]
    if tt_names:
        lines += [
            "## Table-table: throughput and outputs",
            "",
            "| workload | engine | rows/s | interlace / native (rows/s) | rows/CPU-s | "
            "interlace / native (CPU) | ms/batch | batch 0 ms | output rows | what they are | "
            "check |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for n in tt_names:
            il, nat = results.get((n, "interlace")), results.get((n, "native-full"))
            ex = EXPECTED[n]
            for e, r in (("interlace", il), ("native-full", nat)):
                if r is None:
                    continue
                if e == "interlace":
                    what = (f"changelog; applied: {r.sink.get('target_keys', 0):,} keys "
                            f"(final-snapshot join: {len(ex['target']):,})")
                    check = "equals the pandas join: **yes**" if r.sink.get(
                        "target_ok") else "**NO**"
                    ratio, cpu_ratio = (_ratio(il.rows_per_s, nat.rows_per_s),
                                        _ratio(il.rows_per_cpu_s, nat.rows_per_cpu_s)) if (
                        il and nat) else ("", "")
                else:
                    what = (f"{r.sink['matched']:,} pairs + "
                            f"{r.out_rows - r.sink['matched']:,} unmatched rows")
                    check = native_note(r, datasets[n])
                    ratio = cpu_ratio = ""
                lines.append(
                    f"| {n} ({datasets[n].workload.keys:,} keys) | {e} | "
                    f"{fmt_int(r.rows_per_s)} | {ratio} | {fmt_int(r.rows_per_cpu_s)} | "
                    f"{cpu_ratio} | {r.steady_ms(batches):,.0f} | {r.batch_ms(0) or 0:,} | "
                    f"{r.out_rows:,} | {what} | {check} |")
            nx = ex["native"]
            lines += [
                "",
                f"Expected from the data for native-full: {nx['pairs']:,} pairs, "
                f"{nx['left_only']:,} left and {nx['right_only']:,} right rows without a "
                f"partner within +-I ({nx['rows']:,} rows). Target (issue 12): interlace rows/s "
                ">= native's.",
                "",
            ]
    lines += [
        "## State (progress of the last data micro-batch, and the peak over all micro-batches)",
        "",
        "Bytes per key = memoryUsedBytes / the table's keys (stream-table) or the keys of both "
        "tables (table-table). interlace: its `applyInPandasWithState` operator (numRowsTotal ="
        " key groups holding a blob); stream-table: every key's latest version(s) plus, under "
        "`emit=\"final\"`, the stream rows held until the watermark passes them (about one "
        "micro-batch here), table-table: per key both sides' latest versions and the key's "
        "next version number. Native joins: the sum of their state stores (numRowsTotal = "
        "buffered rows: the rows of the last I + L of event time on each side, not one per "
        "key, so their bytes / key fall as keys grow; the 1M-row snapshot shows in the peak); "
        "native-static has no state.",
        "",
        "| workload | engine | memoryUsedBytes (last data batch) | numRowsTotal | bytes / key | "
        "peak memoryUsedBytes | peak bytes / key | dropped by watermark |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (n, e), r in results.items():
        if e == "native-static":
            continue
        keys = datasets[n].workload.keys
        st = r.state_of(batches - 1)
        lines.append(
            f"| {n} | {e} | {fmt_bytes(st['memoryUsedBytes'])} | {st['numRowsTotal']:,} | "
            f"{st['memoryUsedBytes'] / keys:,.0f} | {fmt_bytes(r.peak_state_bytes)} | "
            f"{r.peak_state_bytes / keys:,.0f} | {r.dropped_by_watermark} |")
    lines += [
        "", "## All runs", "",
        "Wall times of every run (s); for the fastest run, the CPU seconds of Spark's JVM, the "
        "Python workers, the driver (py4j, foreachBatch) and of processes outside the "
        "benchmark (/proc). 2 cores give at most 2 CPU-s per wall second.", "",
        "| workload | engine | wall times (s) | own CPU-s per run | JVM CPU-s | "
        "Python workers CPU-s | driver CPU-s | outside CPU-s (avg cores) |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for (n, e), r in results.items():
        c = r.cpu
        lines.append(f"| {n} | {e} | {', '.join(f'{x:.1f}' for x in r.all_seconds)} | "
                     f"{', '.join(f'{x:.1f}' for x in r.all_own_cpu)} | {c.get('jvm', 0):.1f} | "
                     f"{c.get('python_workers', 0):.1f} | {c.get('driver', 0):.1f} | "
                     f"{c.get('outside', 0):.1f} ({r.foreign:.2f}) |")
    lines += ["", "## Per-batch timings of the fastest run "
              "(ms: triggerExecution / addBatch, per progress)", ""]
    for (n, e), r in results.items():
        parts = []
        for p in r.progress:
            d = p.get("durationMs", {})
            tag = "(flush)" if not int(p.get("numInputRows", 0)) else (
                "(sentinel)" if int(p["batchId"]) == batches else "")
            parts.append(f"{d.get('triggerExecution', 0)}/{d.get('addBatch', 0)}{tag}")
        lines.append(f"- {n} {e}: " + ", ".join(parts))
    if notes:
        lines += ["", "## Notes", ""] + [f"- {x}" for x in notes]
    if failures:
        lines += ["", "## FAILURES", ""] + [f"- {x}" for x in failures]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 10k rows, 3 micro-batches, 1k/20k/1k keys, one run per cell")
    ap.add_argument("--rows", type=int, default=None,
                    help="stream rows per micro-batch (100000; quick: 10000)")
    ap.add_argument("--batches", type=int, default=None,
                    help="data micro-batches incl. the snapshot's (5; quick: 3)")
    ap.add_argument("--workloads", default="st10k,st1m,tt",
                    help="comma list of st10k, st1m, tt (default: all)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="runs per cell, engines interleaved; fastest reported (3; quick: 1)")
    ap.add_argument("--key-groups", type=int, default=None,
                    help="interlace key_groups (default: interlace's default for joins)")
    ap.add_argument("--lateness-ms", type=int, default=2_000)
    ap.add_argument("--interval-ms", type=int, default=None,
                    help="the native stream-stream joins' interval I (default: lateness)")
    ap.add_argument("--seed", type=int, default=20260312)
    ap.add_argument("--out", default=None,
                    help="results file (default bench/results/table-<date>.md)")
    ap.add_argument("--workdir", default=None, help="where inputs and checkpoints go (tmp)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra Spark setting for the session (repeatable; all engines)")
    args = ap.parse_args(argv)

    # PySpark's applyInPandasWithState worker makes pandas 2.x print a FutureWarning per call.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    from interlace.state.keygroups import DEFAULT_JOIN_KEY_GROUPS

    from interlace import local_session

    rows = args.rows or (10_000 if args.quick else 100_000)
    batches = args.batches or (3 if args.quick else 5)
    if batches < 2:
        ap.error("--batches must be >= 2 (the snapshot, then updates)")
    args.repeat = args.repeat or (1 if args.quick else 3)
    key_groups = args.key_groups or DEFAULT_JOIN_KEY_GROUPS
    all_w = workloads(args.quick, args.interval_ms, args.lateness_ms)
    args.workloads = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in args.workloads if n not in all_w]
    if unknown or not args.workloads:
        ap.error(f"--workloads: unknown {unknown}; choose from {', '.join(all_w)}")
    if args.out:
        out_path = Path(args.out)
    elif args.quick:  # smoke runs do not belong in bench/results
        out_path = Path(tempfile.gettempdir()) / "interlace-table-bench-quick.md"
    else:
        out_path = HERE / "results" / f"table-{dt.date.today().isoformat()}.md"
    exe = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) else (
        sys.executable)
    command = " ".join([exe, "bench/table_bench.py", *(argv if argv is not None
                                                        else sys.argv[1:])])
    work = (Path(args.workdir) if args.workdir
            else Path(tempfile.mkdtemp(prefix="interlace-tbench-")))
    work.mkdir(parents=True, exist_ok=True)
    ckpt_root = work / "checkpoints"
    t_start = time.perf_counter()
    try:
        datasets: dict[str, Data] = {}
        for idx, name in enumerate(all_w):
            if name not in args.workloads:
                continue
            w = all_w[name]
            data = generate(w, rows, batches, args.seed + idx)
            write_inputs(data, work / "in" / name, batches)
            datasets[name] = data
            EXPECTED[name] = st_expected(data) if w.kind == "st" else tt_expected(data)
            print(f"[data] {name} ({w.label}): {data.input_rows:,} input rows "
                  f"({data.left_rows:,} {'stream' if w.kind == 'st' else 'left'})", flush=True)
        spark = local_session("interlace-table-bench", master="local[2]", shuffle_partitions=4,
                              conf=dict(c.split("=", 1) for c in args.conf))
        print("[spark] session up", flush=True)
        if not args.quick:  # JIT and Python worker start-up charged to no engine
            for kind in ("st", "tt"):
                ww = Workload(f"warm-{kind}", kind, 1_000, all_w["tt"].interval_ms,
                              args.lateness_ms)
                wd = generate(ww, 2_000, 2, args.seed - 1)
                write_inputs(wd, work / "in" / ww.name, 2)
                EXPECTED[ww.name] = st_expected(wd) if kind == "st" else tt_expected(wd)
                for e in ww.engines:
                    r = run_query(spark, work / "in" / ww.name, wd, e, key_groups, ckpt_root)
                    print(f"[warm-up] {ww.name} {e}: {r.seconds:.1f} s", flush=True)

        failures: list[str] = []
        results: dict[tuple[str, str], TableRun] = {}
        seen: dict[tuple[str, str], dict[str, int]] = {}

        def run(name: str, engine: str) -> None:
            key = (name, engine)
            if key in results and results[key].seconds > LONG_RUN_S:
                return  # minutes-long runs are not repeated
            data = datasets[name]
            r = run_query(spark, work / "in" / name, data, engine, key_groups, ckpt_root)
            st = r.state_of(batches - 1)
            print(f"[run] {name} {engine:15s}: {r.rows_per_s:,.0f} rows/s ({r.seconds:.1f} s, "
                  f"other load {r.foreign:.2f} cores), {r.steady_ms(batches):,.0f} ms/batch, "
                  f"out={r.out_rows:,} sink={r.sink} "
                  f"state={st['memoryUsedBytes']:,}B/{st['numRowsTotal']:,} rows, "
                  f"dropped={r.dropped_by_watermark}", flush=True)
            results_now = {**results, key: r}
            for f in check_run(r, data, results_now):
                if f not in failures:
                    failures.append(f)
            if key in seen and seen[key] != r.sink:
                failures.append(f"{name}/{engine}: output differs between repeats")
            seen[key] = r.sink
            r.all_own_cpu = [r.own_cpu]
            prev = results.get(key)
            if prev is not None:
                r.all_seconds = prev.all_seconds + r.all_seconds
                r.all_own_cpu = prev.all_own_cpu + r.all_own_cpu
                if prev.seconds <= r.seconds:
                    prev.all_seconds, prev.all_own_cpu = r.all_seconds, r.all_own_cpu
                    return
            results[key] = r

        for _ in range(args.repeat):
            for name in args.workloads:
                for engine in datasets[name].workload.engines:
                    run(name, engine)
        # interlace's stream checksum vs the stream-static join's, whichever ran first.
        for name in args.workloads:
            il = results.get((name, "interlace"))
            if il is not None:
                for f in check_run(il, datasets[name], results):
                    if f not in failures:
                        failures.append(f)
        notes = [f"{n}/{e}: {native_note(r, datasets[n])}" for (n, e), r in results.items()
                 if e != "interlace" and native_note(r, datasets[n]) != "as expected"]
        report = render(args, results, datasets, rows, batches, key_groups, command, failures,
                        notes, time.perf_counter() - t_start)
        print()
        print(report)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(report)
        raw = [{**{k: v for k, v in dataclasses.asdict(r).items() if k != "progress"},
                "keys": datasets[r.workload].workload.keys,
                "steady_ms": r.steady_ms(batches),
                "state_last_data_batch": r.state_of(batches - 1),
                "peak_state_bytes": r.peak_state_bytes,
                "durations": [p.get("durationMs", {}) for p in r.progress]}
               for r in results.values()]
        out_path.with_suffix(".json").write_text(json.dumps(
            {"command": command, "rows": rows, "batches": batches, "key_groups": key_groups,
             "expected": {n: (v if datasets[n].workload.kind == "st"
                              else {"native": v["native"], "target_keys": len(v["target"])})
                          for n, v in EXPECTED.items() if n in datasets},
             "runs": raw}, indent=1))
        print(f"[written] {out_path} (+ .json with every run)")
        spark.stop()
        if failures:
            print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
            return 1
        return 0
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
