"""Benchmark: interlace's window aggregation vs Spark's native windowed aggregation.

Run (from the repository root)::

    /work/venv/bin/python bench/window_bench.py          # -> bench/results/window-<date>.md
    /work/venv/bin/python bench/window_bench.py --quick  # tiny smoke run, not for numbers

What it does (docs/performance-windows.md has the method, the results and the caveats):

* Generates, with numpy and a fixed seed, ``--batches`` micro-batches of ``--rows`` rows over
  ``--keys`` keys (event time advances ``--span-s`` seconds per micro-batch, uniform within it,
  so no row is ever late), plus one "flush" micro-batch: a single row one day ahead, which moves
  the watermark past every window (Spark then runs a no-data batch that closes them all). One
  Parquet file per micro-batch (mtimes in order, so ``maxFilesPerTrigger=1`` reads file ``i`` in
  batch ``i``), the same files for both engines. Columns: ``k`` (long key), ``ts``, ``v`` (double,
  multiples of 1/64 so that every sum is exact in any order), ``u`` (long, for distinct).
* Three workloads, each with ``count(*)``, ``sum(v)``, ``min(v)``, ``max(v)``, ``avg(v)`` and an
  approximate distinct count of ``u``: tumbling 1 min, hopping 1 min / 10 s, session gap 30 s.
  interlace: ``window_aggregate(df, Window(kind=..., group_by=["k"], ...))`` (HyperLogLog p=14).
  native: ``withWatermark("ts", L).groupBy(window(...) | session_window(...), "k").agg(...)`` in
  append mode (``approx_count_distinct(u)``, HLL++ at its default rsd=0.05 unless
  ``--native-rsd``).
* Per cell (workload, engine), the first run is a verification run (not timed): its
  ``foreachBatch`` sink collects the output, which is compared with an exact oracle computed
  from the data with pandas (same rows; identical count/sum/min/max, avg to 1e-9; distinct
  within the HLL error) and with the other engine. Then ``--repeat`` timed runs (engines
  interleaved, the fastest is reported) whose sink computes, in a single action, the row count
  and an order-independent checksum ``sum(xxhash64(window_start, window_end, k, n, s, mn, mx,
  round(a, 6)))``; both engines must give the same count and checksum. The script exits
  non-zero on any disagreement.
* Throughput = input rows / wall time from ``start()`` to the end of ``awaitTermination()``
  (``trigger(availableNow=True)``), in one ``local_session(master="local[2]",
  shuffle_partitions=4)``; also CPU seconds per process kind from /proc (JVM, Python workers,
  driver, other load) and input rows per CPU second of the benchmark's own processes.
* Besides the main comparison (interlace at ``--key-groups``, the library default unless
  given): interlace at the other ``--sweep`` key_groups, and the "floor": a no-op
  ``applyInPandasWithState`` function on interlace's prepared input (``--no-floor`` skips it).
* State: ``memoryUsedBytes`` / ``numRowsTotal`` of the state operator from the progress of the
  last full data batch. Native ``numRowsTotal`` counts (window, key) rows (sessions, for
  session windows); interlace's counts key groups, so interlace's bytes are divided by the
  number of (window, group) slots held, computed from the data. Also: the size of one key
  group's encoded ``WindowState`` (run through ``step_window`` without Spark) per slot.
* Hot path: ``step_window`` timed directly (no Spark) on a steady-state 100k-row tumbling
  batch with the 6 aggregations, as one call and as ``key_groups`` calls (what Spark does),
  with and without the blob decode/encode; ``--profile`` adds a cProfile of it.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import datetime as dt
import gc
import io
import json
import os
import pstats
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
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Generic helpers of the join benchmark (CPU accounting from /proc, versions, formatting).
from join_bench import _wm_ms, cpu_delta, cpu_snapshot, fmt_bytes, fmt_int, versions  # noqa: E402

T0 = dt.datetime(2026, 3, 2, 9, 0, 0, tzinfo=dt.timezone.utc)
T0_US = int(T0.timestamp() * 1_000_000)  # a multiple of 60 s: windows align with batches
ARROW_SCHEMA = pa.schema([
    pa.field("k", pa.int64()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("v", pa.float64()),
    pa.field("u", pa.int64()),
])
LATENESS_MS = 5_000
FLUSH_AHEAD_US = 86_400 * 1_000_000
OUT_COLUMNS = ["window_start", "window_end", "k", "n", "s", "mn", "mx", "a", "d"]
CHECKSUM = ("sum(CAST(xxhash64(window_start, window_end, k, n, s, mn, mx, round(a, 6)) "
            "AS DECIMAL(20, 0)))")
LONG_RUN_S = 180.0  # a cell whose run took longer is not repeated


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    kind: str
    label: str
    duration_ms: int | None = None
    hop_ms: int | None = None
    gap_ms: int | None = None
    target: float = 1.0  # the issue's target for interlace / native
    issue_native: int = 0  # the issue author's native rows/s

    @property
    def window_kw(self) -> dict[str, int]:
        if self.kind == "session":
            return {"gap_ms": int(self.gap_ms or 0)}
        kw = {"duration_ms": int(self.duration_ms or 0)}
        if self.kind == "hopping":
            kw["hop_ms"] = int(self.hop_ms or 0)
        return kw


WORKLOADS = {
    "tumbling": Workload("tumbling", "tumbling", "tumbling 1 min", duration_ms=60_000,
                         target=1.2, issue_native=115_000),
    "hopping": Workload("hopping", "hopping", "hopping 1 min / 10 s", duration_ms=60_000,
                        hop_ms=10_000, target=3.0, issue_native=29_000),
    "session": Workload("session", "session", "session gap 30 s", gap_ms=30_000, target=1.5,
                        issue_native=75_000),
}


# ----------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Data:
    """Generated input: per micro-batch ``(k, t_us, v, u)``; the last one is the flush row."""

    batches: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    keys: int
    span_s: float

    @property
    def input_rows(self) -> int:
        return sum(len(b[0]) for b in self.batches)

    @property
    def data_batches(self) -> int:
        return len(self.batches) - 1

    def concat(self, upto: int | None = None) -> pd.DataFrame:
        bs = self.batches if upto is None else self.batches[:upto + 1]
        return pd.DataFrame({
            "k": np.concatenate([b[0] for b in bs]), "t": np.concatenate([b[1] for b in bs]),
            "v": np.concatenate([b[2] for b in bs]), "u": np.concatenate([b[3] for b in bs])})

    def spark_watermarks_ms(self) -> list[int]:
        """Spark's watermark W during each micro-batch (0 in the first), then after the last."""
        out, mx = [0], None
        for b in self.batches:
            m = int(b[1].max()) // 1000
            mx = m if mx is None else max(mx, m)
            out.append(max(out[-1], mx - LATENESS_MS))
        return out


def generate(rows: int, batches: int, keys: int, span_s: float, seed: int,
             resolution_us: int = 1) -> Data:
    rng = np.random.default_rng(seed)
    span_us = int(span_s * 1_000_000)
    out = []
    for i in range(batches):
        t = np.sort(T0_US + i * span_us + rng.integers(0, span_us, rows))
        t = t // resolution_us * resolution_us  # coarse grids make boundary ties common
        k = rng.integers(0, keys, rows, dtype=np.int64)
        v = rng.integers(0, 6_400, rows).astype(np.float64) / 64.0  # exact binary fractions
        u = rng.integers(0, 1_000_000, rows, dtype=np.int64)
        out.append((k, t, v, u))
    flush_t = T0_US + batches * span_us + FLUSH_AHEAD_US
    out.append((np.zeros(1, np.int64), np.array([flush_t], np.int64), np.zeros(1),
                np.zeros(1, np.int64)))
    return Data(out, keys, span_s)


def write_inputs(data: Data, root: Path) -> None:
    """One Parquet file per micro-batch; mtimes in batch order (as bench/join_bench.py)."""
    base_mtime = 1_700_000_000.0
    root.mkdir(parents=True, exist_ok=True)
    for i, (k, t, v, u) in enumerate(data.batches):
        table = pa.Table.from_arrays(
            [pa.array(k), pa.array(t).cast(pa.timestamp("us", tz="UTC")), pa.array(v), pa.array(u)],
            schema=ARROW_SCHEMA)
        path = root / f"{i:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        os.utime(path, (base_mtime + i, base_mtime + i))


# ----------------------------------------------------------------------------------------------
# Oracle (exact, pandas)
# ----------------------------------------------------------------------------------------------


def assign(w: Workload, df: pd.DataFrame) -> pd.DataFrame:
    """One row per (input row, window) with ``start``/``end`` (µs) and the session id."""
    t = df["t"].to_numpy()
    if w.kind == "session":
        gap = int(w.gap_ms or 0) * 1000
        df = df.sort_values(["k", "t"], kind="stable").reset_index(drop=True)
        k, t = df["k"].to_numpy(), df["t"].to_numpy()
        new = np.ones(len(df), dtype=bool)
        new[1:] = (k[1:] != k[:-1]) | (t[1:] - t[:-1] > gap)  # chain while gap <= g (touch)
        sid = np.cumsum(new) - 1
        first = t[new][sid]
        last = pd.Series(t).groupby(sid).transform("max").to_numpy()
        return df.assign(start=first, end=last + gap)
    d, hop = int(w.duration_ms or 0) * 1000, int(w.hop_ms or w.duration_ms or 0) * 1000
    k_lo = (t - d) // hop + 1
    k_hi = t // hop
    counts = k_hi - k_lo + 1
    rows = np.repeat(np.arange(len(t)), counts)
    offs = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    start = (np.repeat(k_lo, counts) + offs) * hop
    out = df.iloc[rows].reset_index(drop=True)
    return out.assign(start=start, end=start + d)


def oracle(w: Workload, data: Data) -> pd.DataFrame:
    """Exact output of the whole run: every window closed by the final watermark."""
    a = assign(w, data.concat())
    final_wm_us = data.spark_watermarks_ms()[-1] * 1000
    a = a[a["end"] <= final_wm_us]
    g = a.groupby(["start", "end", "k"], sort=True)
    out = g.agg(n=("v", "size"), s=("v", "sum"), mn=("v", "min"), mx=("v", "max"),
                a=("v", "mean"), d=("u", "nunique")).reset_index()
    return out.rename(columns={"start": "window_start", "end": "window_end"})


def slots_held(w: Workload, data: Data, upto: int) -> int:
    """(window, group) slots both engines hold after micro-batch ``upto`` (no late rows)."""
    wm_during = data.spark_watermarks_ms()[upto] * 1000
    a = assign(w, data.concat(upto))
    a = a[a["end"] > wm_during] if wm_during > 0 else a
    return int(len(a.drop_duplicates(["start", "k"])))


# ----------------------------------------------------------------------------------------------
# Queries
# ----------------------------------------------------------------------------------------------


def spark_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("k", T.LongType()), T.StructField("ts", T.TimestampType()),
        T.StructField("v", T.DoubleType()), T.StructField("u", T.LongType())])


def window_spec(w: Workload, key_groups: int) -> Any:
    from interlace import Aggregation, Window

    aggs = [
        Aggregation(agg="count", as_="n"),
        Aggregation(agg="sum", column="v", as_="s"),
        Aggregation(agg="min", column="v", as_="mn"),
        Aggregation(agg="max", column="v", as_="mx"),
        Aggregation(agg="avg", column="v", as_="a"),
        Aggregation(agg="count_distinct", column="u", mode="approximate", as_="d"),
    ]
    return Window(kind=w.kind, event_time_column="ts", lateness_ms=LATENESS_MS, group_by=["k"],
                  max_groups_per_window=1_000_000, aggregations=aggs, key_groups=key_groups,
                  **w.window_kw)


def build_interlace(src: Any, w: Workload, key_groups: int) -> Any:
    from interlace import window_aggregate

    return window_aggregate(src, window_spec(w, key_groups)).select(*OUT_COLUMNS)


class FloorFunction:
    """A no-op ``applyInPandasWithState`` function: reads every frame, keeps an 8-byte state.

    Run on interlace's prepared input and key groups, it measures what Spark's stateful pandas
    path costs before interlace does any work (the floor under interlace's throughput).
    """

    def __call__(self, key: Any, frames: Any, state: Any) -> Any:
        for _ in frames:
            pass
        state.update((b"\0" * 8,))
        state.setTimeoutTimestamp(max(int(state.getCurrentWatermarkMs()), 1) + 10**12)
        return iter(())


def build_floor(src: Any, w: Workload, key_groups: int) -> Any:
    from interlace import prepare_window

    if __name__ != "__main__":  # workers cannot import bench/: ship this module by value
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    op = prepare_window(src, window_spec(w, key_groups))
    return op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
        FloorFunction(), op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)


def build_native(src: Any, w: Workload, rsd: float | None) -> Any:
    from pyspark.sql import functions as F

    if w.kind == "session":
        win = F.session_window("ts", f"{w.gap_ms} milliseconds")
    elif w.kind == "hopping":
        win = F.window("ts", f"{w.duration_ms} milliseconds", f"{w.hop_ms} milliseconds")
    else:
        win = F.window("ts", f"{w.duration_ms} milliseconds")
    distinct = F.approx_count_distinct("u") if rsd is None else F.approx_count_distinct("u", rsd)
    agg = (src.withWatermark("ts", f"{LATENESS_MS} milliseconds").groupBy(win.alias("w"), "k")
           .agg(F.count(F.lit(1)).alias("n"), F.sum("v").alias("s"), F.min("v").alias("mn"),
                F.max("v").alias("mx"), F.avg("v").alias("a"), distinct.alias("d")))
    return agg.select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                      *OUT_COLUMNS[2:])


@dataclasses.dataclass
class RunResult:
    engine: str
    workload: str
    input_rows: int
    seconds: float
    out_rows: int
    checksum: int
    progress: list[dict[str, Any]]
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)
    all_seconds: list[float] = dataclasses.field(default_factory=list)
    frame: pd.DataFrame | None = None

    @property
    def rows_per_s(self) -> float:
        return self.input_rows / self.seconds

    @property
    def foreign(self) -> float:
        return self.cpu.get("outside", 0.0) / self.seconds

    @property
    def own_cpu(self) -> float:
        """CPU seconds of this benchmark's processes (JVM, Python workers, driver)."""
        return sum(v for k, v in self.cpu.items() if k != "outside")

    @property
    def rows_per_cpu_s(self) -> float:
        return self.input_rows / max(self.own_cpu, 1e-9)

    def state_at(self, p: dict[str, Any]) -> dict[str, int]:
        ops = p.get("stateOperators") or []
        return {
            "memoryUsedBytes": sum(int(o.get("memoryUsedBytes", 0)) for o in ops),
            "numRowsTotal": sum(int(o.get("numRowsTotal", 0)) for o in ops),
            "dropped": sum(int(o.get("numRowsDroppedByWatermark", 0)) for o in ops),
            "batchId": int(p["batchId"]),
            "watermark_ms": _wm_ms(p),
        }

    def last_full_batch(self, rows: int) -> tuple[int, dict[str, int]]:
        """Index (among data batches) and state of the last micro-batch with ``rows`` rows."""
        data = [p for p in self.progress if int(p.get("numInputRows", 0)) > 0]
        idx = max(i for i, p in enumerate(data) if int(p["numInputRows"]) == rows)
        return idx, self.state_at(data[idx])

    @property
    def dropped(self) -> int:
        return sum(self.state_at(p)["dropped"] for p in self.progress)


def run_query(spark: Any, root: Path, w: Workload, engine: str, key_groups: int,
              rsd: float | None, input_rows: int, ckpt_root: Path, collect: bool) -> RunResult:
    src = spark.readStream.schema(spark_schema()).option("maxFilesPerTrigger", 1).parquet(str(root))
    # Each engine gets Python workers of its own (Spark keeps one worker pool per UDF
    # environment): interlace freezes its workers' garbage collector (prepare_worker), which
    # must not speed up the no-op floor run in the same workers.
    spark.sparkContext.environment["INTERLACE_BENCH_WORKERS"] = engine
    if engine == "interlace":
        out = build_interlace(src, w, key_groups)
    elif engine == "floor":
        out = build_floor(src, w, key_groups)
    else:
        out = build_native(src, w, rsd)
    acc: dict[str, Any] = {"n": 0, "s": 0, "frames": []}

    def sink(df: Any, batch_id: int) -> None:
        if collect:
            pdf = df.toPandas()
            acc["frames"].append(pdf)
            acc["n"] += len(pdf)
            return
        row = df.selectExpr("count(*) AS n", f"{CHECKSUM} AS s").collect()[0]
        acc["n"] += int(row["n"])
        acc["s"] += int(row["s"] if row["s"] is not None else Decimal(0))

    ckpt = ckpt_root / f"{engine}-{w.name}-{time.time_ns()}"
    gc.collect()
    cpu0 = cpu_snapshot()
    t0 = time.perf_counter()
    query = (out.writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    cpu = cpu_delta(cpu0, cpu_snapshot())
    progress = [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in query.recentProgress]
    shutil.rmtree(ckpt, ignore_errors=True)
    frame = None
    if collect:
        frames = [f for f in acc["frames"] if len(f)]
        frame = (pd.concat(frames, ignore_index=True) if frames
                 else pd.DataFrame(columns=OUT_COLUMNS))
    return RunResult(engine, w.name, input_rows, seconds, acc["n"], acc["s"], progress, cpu,
                     [seconds], frame)


# ----------------------------------------------------------------------------------------------
# Verification
# ----------------------------------------------------------------------------------------------


def _us(col: pd.Series) -> np.ndarray:
    """Timestamps (tz-aware or not; the oracle's are already int64 µs) to int64 µs."""
    if pd.api.types.is_integer_dtype(col):
        return col.to_numpy(dtype=np.int64)
    s = pd.to_datetime(col, utc=True)
    return s.dt.tz_localize(None).to_numpy().astype("datetime64[us]").view(np.int64)


def normalize_output(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame[OUT_COLUMNS].copy()
    out["window_start"], out["window_end"] = _us(out["window_start"]), _us(out["window_end"])
    for c in ("k", "n", "d"):
        out[c] = out[c].astype(np.int64)
    for c in ("s", "mn", "mx", "a"):
        out[c] = out[c].astype(np.float64)
    out = out.sort_values(["window_start", "window_end", "k"], kind="stable")
    return out.reset_index(drop=True)


@dataclasses.dataclass
class Agreement:
    rows: int
    exact_ok: bool
    distinct_mean_rel_err: float
    distinct_max_abs_err: int
    distinct_ok: bool
    problems: list[str]


def compare(got: pd.DataFrame, want: pd.DataFrame, tol_rel: float, what: str) -> Agreement:
    """Same (window, key) rows; equal count/sum/min/max, avg to 1e-9; distinct within tolerance.

    ``tol_rel``: allowed |error| of one distinct count, relative, plus 2 (small counts: HLL++ at
    Spark's default p=9 has 512 registers, so a hash collision among 10 values is common); the
    mean relative error must stay below a third of ``tol_rel``.
    """
    problems: list[str] = []
    g, wnt = normalize_output(got), normalize_output(want)
    keys = ["window_start", "window_end", "k"]
    if len(g) != len(wnt) or not (g[keys].to_numpy() == wnt[keys].to_numpy()).all():
        m = g[keys].merge(wnt[keys], how="outer", indicator=True)
        problems.append(f"{what}: {len(g)} rows vs {len(wnt)}; only left "
                        f"{int((m['_merge'] == 'left_only').sum())}, only right "
                        f"{int((m['_merge'] == 'right_only').sum())}")
        return Agreement(len(g), False, float("nan"), -1, False, problems)
    exact_ok = True
    for c in ("n", "s", "mn", "mx"):
        bad = int((g[c].to_numpy() != wnt[c].to_numpy()).sum())
        if bad:
            exact_ok = False
            problems.append(f"{what}: column {c} differs on {bad} rows")
    bad = int((~np.isclose(g["a"].to_numpy(), wnt["a"].to_numpy(), rtol=1e-9, atol=1e-9)).sum())
    if bad:
        exact_ok = False
        problems.append(f"{what}: avg differs on {bad} rows")
    dg, dw = g["d"].to_numpy(), wnt["d"].to_numpy()
    err = np.abs(dg - dw)
    rel = err / np.maximum(dw, 1)
    mean_rel = float(rel.mean()) if len(rel) else 0.0
    distinct_ok = bool((err <= tol_rel * dw + 2).all()) and mean_rel <= tol_rel / 3
    if not distinct_ok:
        problems.append(f"{what}: distinct outside tolerance (mean rel err {mean_rel:.4f}, "
                        f"max abs err {int(err.max())}, tolerance {tol_rel:.3f} relative + 2)")
    return Agreement(len(g), exact_ok, mean_rel, int(err.max()) if len(err) else 0, distinct_ok,
                     problems)


def native_hll_tolerance(rsd: float | None) -> float:
    """Tolerance for one native distinct count: 4 standard errors of its HLL++."""
    return 4 * (rsd if rsd is not None else 0.05)


INTERLACE_HLL_TOL = 4 * 0.0081


# ----------------------------------------------------------------------------------------------
# Without Spark: hot path and encoded state
# ----------------------------------------------------------------------------------------------


def _plan(w: Workload, key_groups: int) -> Any:
    from interlace.operators.window import WindowPlan

    plan = WindowPlan.from_schema(window_spec(w, key_groups), ARROW_SCHEMA)
    return dataclasses.replace(plan, columns=("k", "v", "u"))


def _frame(k: np.ndarray, t: np.ndarray, v: np.ndarray, u: np.ndarray) -> pd.DataFrame:
    from interlace.operators.window import TIME_US_COLUMN

    return pd.DataFrame({TIME_US_COLUMN: t, "k": k, "v": v, "u": u})


def _split(frame: pd.DataFrame, key_groups: int) -> dict[int, pd.DataFrame]:
    """Split rows by key group ``k % key_groups`` (Spark uses xxhash64; the sizes are alike)."""
    kg = frame["k"].to_numpy() % key_groups
    return {int(g): frame[kg == g].reset_index(drop=True) for g in np.unique(kg)}


@dataclasses.dataclass
class HotPath:
    rows: int
    key_groups: int
    one_call_ns: float
    per_group_step_ns: float
    per_group_full_ns: float
    decode_ns: float
    encode_ns: float
    out_rows: int
    slots_after: int
    profile: str = ""


def hot_path(data: Data, key_groups: int, repeat: int, profile: bool) -> HotPath:
    """Time ``step_window`` on the last full micro-batch of tumbling, state from the ones before.

    * one call: the whole batch as one key group (every key's windows in one state);
    * per group: ``key_groups`` calls, each with its key group's rows and state, as Spark makes
      them; ``full`` adds the blob decode and encode that ``WindowFunction`` does per call.
    The watermark is Spark's for each batch, so the timed call closes and emits windows.
    """
    from interlace.operators.window import WindowState, step_window

    w = WORKLOADS["tumbling"]
    plan = _plan(w, key_groups)
    wms = data.spark_watermarks_ms()
    last = data.data_batches - 1
    frames = [_frame(*data.batches[i]) for i in range(last + 1)]

    def wm_us(i: int) -> int | None:
        return wms[i] * 1000 if wms[i] > 0 else None

    # One call per batch over all keys.
    st = WindowState.empty(plan)
    for i in range(last):
        st = step_window(plan, st, frames[i], wm_us(i)).state
    best_one = min(_timed(lambda: step_window(plan, st, frames[last], wm_us(last)))
                   for _ in range(repeat))
    res = step_window(plan, st, frames[last], wm_us(last))
    # Per key group, with blobs.
    parts = [_split(f, key_groups) for f in frames]
    blobs: dict[int, bytes] = {}
    for i in range(last):
        for g, part in parts[i].items():
            prev = WindowState.decode(blobs[g], plan) if g in blobs else WindowState.empty(plan)
            blobs[g] = step_window(plan, prev, part, wm_us(i)).state.encode(plan)
    groups = sorted(parts[last])
    best = {"step": float("inf"), "decode": float("inf"), "encode": float("inf")}
    for _ in range(repeat):
        tot = {"step": 0.0, "decode": 0.0, "encode": 0.0}
        for g in groups:
            t0 = _clock()
            prev = WindowState.decode(blobs[g], plan) if g in blobs else WindowState.empty(plan)
            t1 = _clock()
            r = step_window(plan, prev, parts[last][g], wm_us(last))
            t2 = _clock()
            r.state.encode(plan)
            t3 = _clock()
            tot["step"] += t2 - t1
            tot["decode"] += t1 - t0
            tot["encode"] += t3 - t2
        best = {k: min(best[k], tot[k]) for k in best}
    n = len(frames[last])
    prof = ""
    if profile:
        pr = cProfile.Profile(_clock)
        states = {g: WindowState.decode(blobs[g], plan) for g in groups if g in blobs}
        pr.enable()
        for g in groups:
            step_window(plan, states.get(g) or WindowState.empty(plan), parts[last][g], wm_us(last))
        pr.disable()
        buf = io.StringIO()
        # interlace's own functions by cumulative time: where a call's time goes
        pstats.Stats(pr, stream=buf).sort_stats("cumulative").print_stats(
            r"operators/window/|operators/common/|state/accumulators/|state/blob\.py", 22)
        prof = _trim_profile(buf.getvalue())
    return HotPath(n, key_groups, best_one * 1e9 / n, best["step"] * 1e9 / n,
                   sum(best.values()) * 1e9 / n, best["decode"] * 1e9 / n,
                   best["encode"] * 1e9 / n, len(res.output), res.state.slots.num_rows, prof)


def _timed(fn: Any) -> float:
    t0 = _clock()
    fn()
    return _clock() - t0


def _clock() -> float:
    """CPU time of this process: robust to other load on the machine, unlike wall time."""
    return time.process_time()


def _trim_profile(text: str) -> str:
    lines = [ln.rstrip() for ln in text.splitlines()]
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("ncalls")), 0)
    head = [ln.strip() for ln in lines[:start] if "function calls" in ln]
    return "\n".join(head + lines[start:]).replace(str(Path(sys.prefix)), "<venv>").replace(
        str(HERE.parent), "<repo>").strip()


@dataclasses.dataclass
class BlobSize:
    slots: int
    blob_bytes: int
    parts: dict[str, int]
    sparse_entries: int
    dense_sketches: int


def blob_size(w: Workload, data: Data, key_groups: int) -> BlobSize:
    """Encode key group 0's state after the last full micro-batch; bytes per part."""
    import msgpack
    from interlace.operators.window import WindowState, step_window
    from interlace.state.buffers import table_to_ipc

    plan = _plan(w, key_groups)
    wms = data.spark_watermarks_ms()
    st = WindowState.empty(plan)
    for i in range(data.data_batches):
        part = _split(_frame(*data.batches[i]), key_groups).get(0)
        if part is None:
            continue
        st = step_window(plan, st, part, wms[i] * 1000 if wms[i] > 0 else None).state
    blob = st.encode(plan)
    parts = {"slot table (Arrow IPC)": len(table_to_ipc(st.slots))}
    for a, s in zip(plan.aggs, st.accs, strict=True):
        parts[f"{a.agg} ({a.alias})"] = len(msgpack.packb(a.accumulator().to_msgpack(s)))
    hll = st.accs[-1]
    return BlobSize(st.slots.num_rows, len(blob), parts, int(hll.sparse_index.shape[0]),
                    int(hll.dense.shape[0]))


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------


def paired_ratios(native: RunResult, other: RunResult) -> list[float]:
    """Native time / other time per round of timed runs (runs of a round are adjacent)."""
    pairs = zip(native.all_seconds, other.all_seconds, strict=False)
    return [a / b for a, b in pairs if b > 0] or [native.seconds / other.seconds]


Cell = tuple[str, str, "int | None"]  # (workload, engine, key_groups; None for native)


def pct_checksum(x: int) -> str:
    return f"{x % 2**64:016x}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny smoke run, not for numbers")
    ap.add_argument("--rows", type=int, default=None, help="rows per micro-batch (100000)")
    ap.add_argument("--keys", type=int, default=None, help="distinct keys (10000)")
    ap.add_argument("--batches", type=int, default=None, help="data micro-batches (4)")
    ap.add_argument("--span-s", type=float, default=120.0,
                    help="event-time seconds per micro-batch (120)")
    ap.add_argument("--workloads", default="tumbling,hopping,session")
    ap.add_argument("--key-groups", type=int, default=None, help="interlace key_groups (default)")
    ap.add_argument("--native-rsd", type=float, default=None,
                    help="rsd of native approx_count_distinct (default: Spark's 0.05)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="timed runs per cell after the verification run (3; quick: 0, "
                         "the verification run is timed instead)")
    ap.add_argument("--sweep", default="8,32",
                    help="more interlace key_groups to time (comma-separated; '' for none; the "
                         "main comparison's --key-groups is skipped)")
    ap.add_argument("--no-floor", dest="floor", action="store_false",
                    help="skip the no-op applyInPandasWithState runs (the floor)")
    ap.add_argument("--profile", action="store_true", help="cProfile the hot path")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra Spark setting for the session (repeatable; both engines)")
    ap.add_argument("--no-spark", action="store_true", help="only the Spark-free measurements")
    ap.add_argument("--seed", type=int, default=20260302)
    ap.add_argument("--resolution-us", type=int, default=1,
                    help="round event times down to this many µs (1_000_000: whole seconds, so "
                         "rows exactly one session gap apart and on window bounds are common)")
    ap.add_argument("--out", default=None,
                    help="results file (default bench/results/window-<date>.md)")
    ap.add_argument("--workdir", default=None, help="where inputs and checkpoints go (tmp)")
    args = ap.parse_args(argv)

    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    from interlace.state.keygroups import DEFAULT_KEY_GROUPS

    rows = args.rows or (5_000 if args.quick else 100_000)
    keys = args.keys or (500 if args.quick else 10_000)
    batches = args.batches or (1 if args.quick else 4)
    key_groups = args.key_groups or DEFAULT_KEY_GROUPS
    repeat = args.repeat if args.repeat is not None else (0 if args.quick else 3)
    sweep = [int(x) for x in args.sweep.split(",") if x.strip() and int(x) != key_groups]
    if args.quick:
        sweep, args.floor = [], False
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workloads {unknown}; choose from {list(WORKLOADS)}")
    today = dt.date.today().isoformat()
    out_path = Path(args.out) if args.out else (
        HERE / "results" / ("window-" + today + ("-quick" if args.quick else "") + ".md"))
    command = " ".join(["/work/venv/bin/python", "bench/window_bench.py", *(argv or sys.argv[1:])])
    work = (Path(args.workdir) if args.workdir
            else Path(tempfile.mkdtemp(prefix="interlace-wbench-")))
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    failures: list[str] = []
    try:
        data = generate(rows, batches, keys, args.span_s, args.seed, args.resolution_us)
        write_inputs(data, work / "in")
        print(f"[data] {data.input_rows:,} input rows ({batches} x {rows:,} + 1 flush row), "
              f"{keys:,} keys, {args.span_s:g} s of event time per micro-batch", flush=True)
        oracles = {n: oracle(WORKLOADS[n], data) for n in names}
        held = {n: slots_held(WORKLOADS[n], data, data.data_batches - 1) for n in names}
        for n in names:
            print(f"[oracle] {n}: {len(oracles[n]):,} output rows; (window, key) slots held after "
                  f"the last full batch: {held[n]:,}", flush=True)

        # Spark-free measurements first (no JVM competing for the cores).
        hps = [hot_path(data, kg, 1 if args.quick else 5, args.profile and kg == key_groups)
               for kg in dict.fromkeys([key_groups, *sweep])]
        for hp in hps:
            print(f"[hot path] step_window tumbling, {hp.rows:,} rows: one call "
                  f"{hp.one_call_ns:,.0f} ns/row; {hp.key_groups} key-group calls "
                  f"{hp.per_group_step_ns:,.0f} ns/row (+ decode/encode: "
                  f"{hp.per_group_full_ns:,.0f} ns/row)", flush=True)
            if hp.profile:
                print(hp.profile, flush=True)
        blobs = {n: blob_size(WORKLOADS[n], data, key_groups) for n in names}
        for n, b in blobs.items():
            print(f"[blob] {n}: key group 0 holds {b.slots:,} slots in {b.blob_bytes:,} B "
                  f"= {b.blob_bytes / max(b.slots, 1):,.0f} B/slot", flush=True)

        results: dict[Cell, RunResult] = {}
        agreements: dict[tuple[str, str], Agreement] = {}
        if not args.no_spark:
            from interlace import local_session

            spark = local_session("interlace-window-bench", master="local[2]",
                                  shuffle_partitions=4,
                                  conf=dict(c.split("=", 1) for c in args.conf))
            print("[spark] session up", flush=True)
            ckpt_root = work / "checkpoints"
            verify: dict[tuple[str, str], RunResult] = {}
            for n in names:  # verification runs (first run of each cell; also a warm-up)
                w = WORKLOADS[n]
                for engine in ("native", "interlace"):
                    r = run_query(spark, work / "in", w, engine, key_groups, args.native_rsd,
                                  data.input_rows, ckpt_root, collect=True)
                    verify[(n, engine)] = r
                    assert r.frame is not None
                    tol = INTERLACE_HLL_TOL if engine == "interlace" else native_hll_tolerance(
                        args.native_rsd)
                    ag = compare(r.frame, oracles[n], tol, f"{n}/{engine} vs exact oracle")
                    agreements[(n, engine)] = ag
                    failures += ag.problems
                    if r.dropped:
                        failures.append(f"{n}/{engine}: {r.dropped} rows dropped by watermark")
                    print(f"[verify] {n} {engine:9s}: {r.seconds:.1f} s, {ag.rows:,} rows, exact "
                          f"columns {'equal' if ag.exact_ok else 'DIFFER'}, distinct mean rel err "
                          f"{ag.distinct_mean_rel_err:.4%} max abs {ag.distinct_max_abs_err}"
                          + ("" if not ag.problems else " PROBLEMS: " + "; ".join(ag.problems)),
                          flush=True)
                fn, fi = verify[(n, "native")].frame, verify[(n, "interlace")].frame
                assert fn is not None and fi is not None
                if len(fn) != len(fi):  # issue 17: the engines must emit exactly as many rows
                    failures.append(f"{n}: output row counts differ: native {len(fn):,}, "
                                    f"interlace {len(fi):,}")
                    print(f"[verify] {n}: ROW COUNTS DIFFER: native {len(fn):,}, interlace "
                          f"{len(fi):,}", file=sys.stderr, flush=True)
                ag = compare(fi, fn, INTERLACE_HLL_TOL + native_hll_tolerance(args.native_rsd),
                             f"{n}: interlace vs native")
                agreements[(n, "both")] = ag
                failures += ag.problems
            checks: dict[Cell, tuple[int, int]] = {}
            cells: list[tuple[str, int | None]] = [("native", None), ("interlace", key_groups)]
            cells += [("interlace", kg) for kg in sweep if kg != key_groups]
            if args.floor:
                cells += [("floor", kg) for kg in dict.fromkeys([key_groups, *sweep])]
            for _ in range(repeat):
                for n in names:
                    for engine, kg in cells:  # engines interleaved: outside load hits all alike
                        key = (n, engine, kg)
                        if key in results and results[key].seconds > LONG_RUN_S:
                            continue
                        r = run_query(spark, work / "in", WORKLOADS[n], engine, kg or key_groups,
                                      args.native_rsd, data.input_rows, ckpt_root, collect=False)
                        print(f"[run] {n} {engine:9s} kg={kg}: {r.rows_per_s:,.0f} rows/s "
                              f"({r.seconds:.1f} s, other load {r.foreign:.2f} cores), "
                              f"out={r.out_rows:,} checksum={pct_checksum(r.checksum)}", flush=True)
                        want = 0 if engine == "floor" else len(oracles[n])
                        if r.out_rows != want:
                            failures.append(f"{n}/{engine}/kg={kg}: {r.out_rows} rows, expected "
                                            f"{want}")
                        if key in checks and checks[key] != (r.out_rows, r.checksum):
                            failures.append(f"{n}/{engine}/kg={kg}: output differs between repeats")
                        checks[key] = (r.out_rows, r.checksum)
                        prev = results.get(key)
                        if prev is not None:
                            r.all_seconds = prev.all_seconds + r.all_seconds
                            if prev.seconds <= r.seconds:
                                prev.all_seconds = r.all_seconds
                                continue
                        results[key] = r
            for n in names:
                if repeat == 0:
                    results[(n, "native", None)] = verify[(n, "native")]
                    results[(n, "interlace", key_groups)] = verify[(n, "interlace")]
                    continue
                for engine, kg in cells:
                    if engine == "interlace" and checks[(n, engine, kg)] != checks[
                            (n, "native", None)]:
                        failures.append(f"{n}: timed runs differ: native "
                                        f"{checks[(n, 'native', None)]}, interlace kg={kg} "
                                        f"{checks[(n, engine, kg)]}")
            spark.stop()

        report = render(args, command, names, data, rows, keys, batches, key_groups, sweep, repeat,
                        results, agreements, oracles, held, hps, blobs, failures,
                        time.perf_counter() - t_start)
        print()
        print(report)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(report)
        print(f"[written] {out_path}")
        if failures:
            print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
            return 1
        return 0
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


def render(args: Any, command: str, names: list[str], data: Data, rows: int, keys: int,
           batches: int, key_groups: int, sweep: list[int], repeat: int,
           results: dict[Cell, RunResult], agreements: dict[tuple[str, str], Agreement],
           oracles: dict[str, pd.DataFrame], held: dict[str, int], hps: list[HotPath],
           blobs: dict[str, BlobSize], failures: list[str], total_s: float) -> str:
    v = versions()
    rsd = "0.05 (default)" if args.native_rsd is None else f"{args.native_rsd:g}"
    lines = [
        f"# Window aggregation benchmark — {dt.date.today().isoformat()}"
        + (" (--quick: smoke run, not numbers)" if args.quick else ""),
        "",
        f"Command: `{command}` (from the repository root)",
        "",
        f"- interlace {v['interlace']}, PySpark {v['pyspark']}, pandas {v['pandas']}, "
        f"pyarrow {v['pyarrow']}, numpy {v['numpy']}, Python {v['python']}, {v['java']}",
        f"- {v['cores']} cores ({v['cpu']}), {v['platform']}; "
        "`local_session(master=\"local[2]\", shuffle_partitions=4)`, default (HDFS-backed) state "
        "store" + "".join(f"; `{c}`" for c in args.conf),
        f"- {batches} micro-batches x {rows:,} rows, {keys:,} keys (uniform), {args.span_s:g} s of "
        "event time per micro-batch (uniform, sorted; no late rows), then a 1-row flush "
        "micro-batch one day ahead and Spark's no-data batch; Parquet file source, "
        "maxFilesPerTrigger=1, trigger(availableNow=True), foreachBatch sink computing "
        "count + sum(xxhash64(...)) in one action",
        "- aggregations: count(*), sum(v), min(v), max(v), avg(v), approximate distinct(u); "
        f"`lateness_ms`={LATENESS_MS:,} (native `withWatermark(ts, '{LATENESS_MS} milliseconds')`)",
        f"- interlace: `window_aggregate(df, Window(kind=..., group_by=[\"k\"], "
        f"key_groups={key_groups}, max_groups_per_window=1_000_000, aggregations=[...]))`, "
        "distinct = HyperLogLog p=14; native: "
        "`groupBy(window(...)|session_window(...), k).agg(...)` in append mode, "
        f"`approx_count_distinct(u)` rsd={rsd}",
        f"- runs per cell: 1 verification run (output collected, not timed) + {repeat} timed "
        "(all cells of a workload interleaved, the fastest run reported, all listed below)"
        + (" — --quick: the verification run is the timed one" if repeat == 0 else ""),
        f"- wall time of the whole script: {total_s:.0f} s",
        "",
    ]
    if results:
        lines += [
            f"## Throughput (input rows / query wall time), key_groups={key_groups}", "",
            "| workload | output rows | native rows/s | interlace rows/s | interlace / native | "
            "target | same-round ratios (median) | issue author's native rows/s | "
            "rows / CPU-s: native, interlace (ratio) | other load (cores) | outputs agree |",
            "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|",
        ]
        for n in names:
            w = WORKLOADS[n]
            nat, il = results[(n, "native", None)], results[(n, "interlace", key_groups)]
            ratio = il.rows_per_s / nat.rows_per_s
            ok = all(not agreements[(n, e)].problems for e in ("native", "interlace", "both"))
            ok = ok and nat.out_rows == il.out_rows == len(oracles[n]) and (
                repeat == 0 or nat.checksum == il.checksum)
            paired = paired_ratios(nat, il)
            lines.append(
                f"| {w.label} | {len(oracles[n]):,} | {fmt_int(nat.rows_per_s)} | "
                f"{fmt_int(il.rows_per_s)} | **{ratio:.2f}x** | {w.target:g}x "
                f"({'met' if ratio >= w.target else 'not met'}) | "
                f"{', '.join(f'{x:.2f}' for x in paired)} ({np.median(paired):.2f}x) | "
                f"{w.issue_native:,} | "
                f"{fmt_int(nat.rows_per_cpu_s)}, {fmt_int(il.rows_per_cpu_s)} "
                f"({il.rows_per_cpu_s / nat.rows_per_cpu_s:.2f}x) | "
                f"{nat.foreign:.2f}, {il.foreign:.2f} | {'yes' if ok else '**NO**'} |")
        lines += [
            "",
            "\"interlace / native\": fastest run over fastest run. \"same-round ratios\": "
            "native time / interlace time within each round of the interleaved timed runs, "
            "which ran under similar outside load; their median is the steadier figure on a "
            "shared machine.",
            "",
            "\"outputs agree\": in the verification run each engine's collected output has "
            "exactly the oracle's (window, key) rows with identical count, sum, min, max and avg "
            "(to 1e-9), and its distinct counts lie within 4 standard errors of the exact ones; "
            "in every timed run both engines give the oracle's row count and the same checksum "
            "(xxhash64 over window, key, count, sum, min, max, round(avg, 6)).",
            "",
            "rows / CPU-s: input rows per CPU second used by the benchmark's own processes "
            "(Spark's JVM, the Python workers, the driver), from /proc: less sensitive than wall "
            "time to other load on the machine (\"other load\": average cores used by other "
            "processes during the native and the interlace run).",
        ]
        extra = [k for k in results if k[1] != "native" and k != (k[0], "interlace", key_groups)]
        if extra:
            lines += [
                "", "## Other key_groups, and the applyInPandasWithState floor", "",
                "\"floor\": a no-op function (reads every frame, keeps an 8-byte state, emits "
                "nothing) on interlace's prepared input and key groups: what Spark's stateful "
                "pandas path costs before interlace does any work.", "",
                "| workload | engine | key_groups | rows/s | vs native | same-round median | "
                "rows / CPU-s | vs native | JVM CPU-s | Python workers CPU-s | "
                "other load (cores) |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for n in names:
                nat = results[(n, "native", None)]
                for key in [(n, "native", None), (n, "interlace", key_groups)] + [
                        k for k in extra if k[0] == n]:
                    r = results[key]
                    lines.append(
                        f"| {WORKLOADS[n].label} | {key[1]} | {'' if key[2] is None else key[2]} | "
                        f"{fmt_int(r.rows_per_s)} | {r.rows_per_s / nat.rows_per_s:.2f}x | "
                        f"{np.median(paired_ratios(nat, r)):.2f}x | {fmt_int(r.rows_per_cpu_s)} | "
                        f"{r.rows_per_cpu_s / nat.rows_per_cpu_s:.2f}x | "
                        f"{r.cpu.get('jvm', 0):.1f} | {r.cpu.get('python_workers', 0):.1f} | "
                        f"{r.foreign:.2f} |")
        lines += [
            "", "## Correctness detail (verification runs)", "",
            "| workload | comparison | rows | count/sum/min/max/avg | distinct: mean rel. error | "
            "distinct: max abs. error |",
            "|---|---|---:|---|---:|---:|",
        ]
        for n in names:
            for e, label in (("native", "native vs exact"), ("interlace", "interlace vs exact"),
                             ("both", "interlace vs native")):
                ag = agreements[(n, e)]
                lines.append(f"| {WORKLOADS[n].label} | {label} | {ag.rows:,} | "
                             f"{'identical' if ag.exact_ok else '**differ**'} | "
                             f"{ag.distinct_mean_rel_err:.3%} | {ag.distinct_max_abs_err} |")
        lines += [
            "", "## State (progress of the last full data micro-batch)", "",
            "| workload | engine | memoryUsedBytes | numRowsTotal | (window, group) slots held "
            "(data) | bytes / slot |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for n in names:
            for engine, kg in (("native", None), ("interlace", key_groups)):
                _, st = results[(n, engine, kg)].last_full_batch(rows)
                lines.append(f"| {WORKLOADS[n].label} | {engine} | "
                             f"{fmt_bytes(st['memoryUsedBytes'])} | {st['numRowsTotal']:,} | "
                             f"{held[n]:,} | {st['memoryUsedBytes'] / max(held[n], 1):,.0f} |")
        lines += [
            "",
            "numRowsTotal: native = state rows, one per (window, key) (session windows: one per "
            "session); interlace = key groups holding a blob. Slots held are computed from the "
            "data (windows with rows so far and `end` > the watermark of that micro-batch), the "
            "same for both engines. memoryUsedBytes is Spark's estimate of the state store's "
            "in-memory map (the HDFS-backed provider keeps the maps of recent versions too).",
        ]
    parts = next(iter(blobs.values())).parts
    lines += [
        "", "## Encoded state per slot (one key group, without Spark)", "",
        f"Key group 0 of {key_groups} (keys with `k % {key_groups} == 0`) run through "
        "`step_window` with Spark's watermarks; its `WindowState.encode` after the last full "
        "micro-batch. Per-part columns: bytes per slot of each part's msgpack encoding.", "",
        "| workload | slots | blob bytes | bytes / slot | HLL sparse entries / slot | "
        "dense HLL sketches | " + " | ".join(parts) + " |",
        "|---|---:|---:|---:|---:|---:|" + "---:|" * len(parts),
    ]
    for n, b in blobs.items():
        s = max(b.slots, 1)
        lines.append(f"| {WORKLOADS[n].label} | {b.slots:,} | {b.blob_bytes:,} | "
                     f"{b.blob_bytes / s:,.0f} | {b.sparse_entries / s:.1f} | {b.dense_sketches} | "
                     + " | ".join(f"{x / s:,.1f}" for x in b.parts.values()) + " |")
    hp0 = hps[0]
    lines += [
        "", "## Hot path: `step_window` without Spark", "",
        f"Tumbling 1 min, 6 aggregations, micro-batch {data.data_batches} ({hp0.rows:,} rows, "
        f"{keys:,} keys) on the state left by the micro-batches before it, with Spark's "
        f"watermark (the call emits {hp0.out_rows:,} windows and keeps {hp0.slots_after:,} "
        "slots); CPU time (`time.process_time`, so other load on the machine matters little), "
        "best of 5. For comparison, seed 001's Rust hot path: ~80 ns/row.", "",
        "| how | ns / row |", "|---|---:|",
        f"| one call, all {keys:,} keys in one state | {hp0.one_call_ns:,.0f} |",
    ]
    for hp in hps:
        lines += [
            f"| {hp.key_groups} calls (one per key group, as Spark makes them): step_window | "
            f"{hp.per_group_step_ns:,.0f} |",
            f"| {hp.key_groups} calls: blob decode + encode | {hp.decode_ns + hp.encode_ns:,.0f} |",
            f"| {hp.key_groups} calls: decode + step_window + encode | "
            f"{hp.per_group_full_ns:,.0f} |",
        ]
    if hp0.profile:
        lines += ["", f"cProfile (CPU time) of the {hp0.key_groups} step_window calls: interlace's "
                  "own functions by cumulative time (the profiler's overhead inflates "
                  "call-heavy pandas code):", "", "```", hp0.profile, "```"]
    if results:
        lines += [
            "", "## All runs", "",
            "Wall times of every timed run (s); for the fastest run, CPU seconds of Spark's JVM, "
            "of PySpark's Python workers (interlace's step runs there), of the driver and of "
            "processes outside the benchmark (from /proc; 2 cores give at most 2 CPU-s per "
            "wall second).", "",
            "| workload | engine | key_groups | wall times (s) | JVM CPU-s | "
            "Python workers CPU-s | driver CPU-s | outside CPU-s (avg cores) | "
            "dropped by watermark |",
            "|---|---|---:|---|---:|---:|---:|---:|---:|",
        ]
        for (n, engine, kg), r in results.items():
            c = r.cpu
            walls = ", ".join(f"{x:.1f}" for x in r.all_seconds)
            lines.append(f"| {WORKLOADS[n].label} | {engine} | {'' if kg is None else kg} | "
                         f"{walls} | {c.get('jvm', 0):.1f} | "
                         f"{c.get('python_workers', 0):.1f} | {c.get('driver', 0):.1f} | "
                         f"{c.get('outside', 0):.1f} ({r.foreign:.2f}) | {r.dropped} |")
        lines += ["", "Per-batch timings of the fastest run (ms: triggerExecution / addBatch):", ""]
        for (n, engine, kg), r in results.items():
            cells = []
            for p in r.progress:
                d = p.get("durationMs", {})
                cells.append(f"{d.get('triggerExecution', 0)}/{d.get('addBatch', 0)}"
                             + ("" if int(p.get("numInputRows", 0)) else "(no data)"))
            lines.append(f"- {WORKLOADS[n].label} {engine}{'' if kg is None else f' kg={kg}'}: "
                         + ", ".join(cells))
    if failures:
        lines += ["", "## FAILURES", ""] + [f"- {f}" for f in failures]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
