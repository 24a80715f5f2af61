"""Benchmark: interlace's stream-stream join vs Spark's native stream-stream interval join.

Run (from the repository root)::

    /work/venv/bin/python bench/join_bench.py            # full run -> bench/results/join-<date>.md
    /work/venv/bin/python bench/join_bench.py --quick    # smoke run (about 1 min), not numbers

What it does (see docs/performance.md for the method and the caveats):

* Generates, with numpy and a fixed seed, ``--batches`` micro-batches of ``--rows`` rows per side
  for each workload, and writes them up front with pyarrow as one Parquet file per side per
  micro-batch (mtimes set in order, so ``maxFilesPerTrigger=1`` reads file ``i`` in batch ``i``).
* Runs every workload through both engines on the same files, in one SparkSession
  (``local_session(master="local[2]", shuffle_partitions=4)``), with
  ``trigger(availableNow=True)``; Spark adds a no-data "flush" batch at the end because the
  watermark moved.
* The sink is ``foreachBatch``, which computes in a single action the row count and an
  order-independent checksum ``sum(xxhash64(left_k, left_ts, left_v, right_k, right_ts, right_v))``
  of the output. The two engines must agree on both, and the count must equal the exact count
  computed from the generated data with numpy (an oracle); the script exits non-zero otherwise.
* Throughput = input rows (both sides) / wall time from ``start()`` to the end of
  ``awaitTermination()``. A small warm-up query per engine runs first (not under --quick).
* State: ``memoryUsedBytes`` / ``numRowsTotal`` of the stateful operator from the progress of the
  last data batch (the peak; the final flush batch has evicted most rows) and of the last
  progress. For interlace ``numRowsTotal`` counts key groups, so buffered rows are computed from the
  data (rows not yet evicted at that batch's watermark) and bytes per buffered row uses those.
* Each cell runs ``--repeat`` times (3), engines interleaved; the fastest run is reported, with
  every wall time and, per run, the CPU seconds of Spark's JVM, the Python workers, the driver
  and of processes outside the benchmark (from /proc), plus input rows per CPU-second of the
  benchmark's own processes, which outside load disturbs far less than wall time.
* ``--sweep`` runs interlace on workload (b) with each ``key_groups``; ``--variant`` /
  ``--compare-variants`` run a proposed shim from bench/join_variants.py; ``--jfr DIR`` records
  a Java Flight Recording per run (see bench/jfr_top.py). Raw results go to a ``.json`` beside
  the report.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
T0 = dt.datetime(2026, 3, 2, 9, 0, 0, tzinfo=dt.timezone.utc)
T0_US = int(T0.timestamp() * 1_000_000)
ARROW_SCHEMA = pa.schema([
    pa.field("k", pa.int64()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("v", pa.float64()),
])
LONG_RUN_S = 180.0  # a cell whose run took longer is not repeated
CHECKSUM_COLUMNS = "left_k, left_ts, left_v, right_k, right_ts, right_v"


# ----------------------------------------------------------------------------------------------
# Workloads and data
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workload:
    """One benchmark workload.

    Event time advances ``span_s`` seconds per micro-batch on both sides (``rows / span_s``
    events per second per side). Left rows are evenly spaced plus uniform jitter ``+-jitter_ms``.
    A fraction ``partner`` of right rows copies the key of a left row at that left row's time
    plus uniform ``+-window_ms/2`` (so it matches it); the rest get a random key. Right rows are
    ordered by that time plus their own jitter. ``lateness_ms > 2 * jitter_ms``, so no row is
    late in either engine (checked: ``numRowsDroppedByWatermark`` and the oracle count).
    """

    name: str
    label: str
    keys: int
    window_ms: int
    lateness_ms: int = 2_000
    jitter_ms: int = 500
    span_s: float = 100.0
    partner: float = 0.9


WORKLOADS = {
    "a": Workload("a", "100k keys", keys=100_000, window_ms=5_000),
    "b": Workload("b", "10k keys", keys=10_000, window_ms=5_000),
    # Hot keys: 10 events/s per key per side, so the window must stay small for the output to stay
    # manageable (~5 matches per left row).
    "c": Workload("c", "100 hot keys", keys=100, window_ms=200, jitter_ms=50),
}


@dataclasses.dataclass
class Data:
    """Generated input: per side, per batch, ``(k, t_us, v)`` numpy arrays."""

    workload: Workload
    left: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    right: list[tuple[np.ndarray, np.ndarray, np.ndarray]]

    @property
    def input_rows(self) -> int:
        return sum(len(b[0]) for b in self.left) + sum(len(b[0]) for b in self.right)


def generate(w: Workload, rows: int, batches: int, seed: int) -> Data:
    rng = np.random.default_rng(seed)
    n = rows * batches
    span_us = int(w.span_s * 1_000_000)
    jit = w.jitter_ms * 1000
    half = w.window_ms * 1000 // 2
    # Left: evenly spaced base times, batch i covering [i*span, (i+1)*span), plus jitter.
    base_l = (np.arange(n, dtype=np.int64) * span_us) // rows
    lk = rng.integers(0, w.keys, n, dtype=np.int64)
    lt = T0_US + base_l + rng.integers(-jit, jit + 1, n)
    # Right: partner of left row i (same key, base time +- window/2) or a random key.
    is_partner = rng.random(n) < w.partner
    rk = np.where(is_partner, lk, rng.integers(0, w.keys, n, dtype=np.int64))
    base_r = base_l + rng.integers(-half, half + 1, n)
    order = np.argsort(base_r, kind="stable")
    rk, base_r = rk[order], base_r[order]
    rt = T0_US + base_r + rng.integers(-jit, jit + 1, n)
    lv = rng.random(n)
    rv = rng.random(n)

    def cut(k: np.ndarray, t: np.ndarray, v: np.ndarray) -> list[tuple[np.ndarray, ...]]:
        return [(k[i * rows:(i + 1) * rows], t[i * rows:(i + 1) * rows], v[i * rows:(i + 1) * rows])
                for i in range(batches)]

    return Data(w, cut(lk, lt, lv), cut(rk, rt, rv))  # type: ignore[arg-type]


def write_inputs(data: Data, root: Path) -> None:
    """One Parquet file per side per batch, mtimes in batch order (as replay.write_parquet_rows)."""
    for side, batches in (("left", data.left), ("right", data.right)):
        write_batches(root / side, [
            pa.Table.from_arrays(
                [pa.array(k), pa.array(t).cast(pa.timestamp("us", tz="UTC")), pa.array(v)],
                schema=ARROW_SCHEMA)
            for k, t, v in batches])


def write_batches(d: Path, tables: list[pa.Table]) -> None:
    """Write ``tables[i]`` to ``d/<i>.parquet`` with mtimes in order, so a file source with
    ``maxFilesPerTrigger=1`` reads file ``i`` in micro-batch ``i`` (also bench/table_bench.py)."""
    base_mtime = 1_700_000_000.0
    d.mkdir(parents=True, exist_ok=True)
    for i, table in enumerate(tables):
        path = d / f"{i:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        os.utime(path, (base_mtime + i, base_mtime + i))


def oracle(data: Data) -> dict[str, int]:
    """Exact inner-join size (|r.t - l.t| <= W, equal keys) and how many left rows match."""
    w_us = data.workload.window_ms * 1000
    lk = np.concatenate([b[0] for b in data.left])
    lt = np.concatenate([b[1] for b in data.left]) - T0_US
    rk = np.concatenate([b[0] for b in data.right])
    rt = np.concatenate([b[1] for b in data.right]) - T0_US
    shift = np.int64(1) << np.int64(40)  # relative times stay far below 2**40 us (12 days)
    rc = np.sort(rk * shift + rt)
    lo = np.searchsorted(rc, lk * shift + lt - w_us, "left")
    hi = np.searchsorted(rc, lk * shift + lt + w_us, "right")
    per_left = hi - lo
    return {"pairs": int(per_left.sum()), "left_matched": int((per_left > 0).sum()),
            "left_rows": len(lk)}


def buffered_rows(data: Data, upto_batch: int, wm_ms: int) -> int:
    """Rows interlace keeps after batch ``upto_batch`` ran with Spark watermark ``wm_ms``.

    Inner join, late_data="drop": a row is evicted when ``wm > t + W`` (both sides, symmetric
    window); with ``wm <= 0`` nothing is evicted.
    """
    w_us = data.workload.window_ms * 1000
    total = 0
    for side in (data.left, data.right):
        t = np.concatenate([b[1] for b in side[:upto_batch + 1]])
        total += len(t) if wm_ms <= 0 else int((wm_ms * 1000 <= t + w_us).sum())
    return total


# ----------------------------------------------------------------------------------------------
# Queries
# ----------------------------------------------------------------------------------------------


def spark_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("k", T.LongType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("v", T.DoubleType()),
    ])


def read_side(spark: Any, root: Path, side: str) -> Any:
    return (spark.readStream.schema(spark_schema()).option("maxFilesPerTrigger", 1)
            .parquet(str(root / side)))


def _variants() -> dict[str, Any]:
    """bench/join_variants.py's ``VARIANTS`` (the module is shipped to the Python workers by
    value, since it is not installed)."""
    from pyspark import cloudpickle

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import join_variants

    cloudpickle.register_pickle_by_value(join_variants)
    return join_variants.VARIANTS


def variant_class(name: str) -> Any:
    """The shim class of variant ``name`` from bench/join_variants.py."""
    return _variants()[name]


def variant_names() -> list[str]:
    """Names of the variants in bench/join_variants.py."""
    return list(_variants())


def build_interlace(left: Any, right: Any, w: Workload, key_groups: int,
                    variant: str = "baseline") -> Any:
    from interlace import Join, prepare_join, stream_join

    spec = Join(left_keys=["k"], right_keys=["k"], how="inner", time_window_ms=w.window_ms,
                event_time_column="ts", lateness_ms=w.lateness_ms, key_groups=key_groups)
    if variant == "baseline":
        return stream_join(left, right, spec)
    # A proposed change to the shim (bench/join_variants.py).
    op = prepare_join(left, right, spec)
    cls = variant_class(variant)
    func = cls(op.plan)
    prepared = cls.prepare(op.prepared, op) if hasattr(cls, "prepare") else op.prepared
    return prepared.groupBy(*op.group_columns).applyInPandasWithState(
        func, op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)


def build_native(left: Any, right: Any, w: Workload) -> Any:
    from pyspark.sql import functions as F

    delay = f"{w.lateness_ms} milliseconds"
    lw = left.withWatermark("ts", delay).alias("l")
    rw = right.withWatermark("ts", delay).alias("r")
    cond = F.expr(
        f"l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL {w.window_ms} MILLISECONDS "
        f"AND l.ts + INTERVAL {w.window_ms} MILLISECONDS")
    return lw.join(rw, cond, "inner").select(
        F.col("l.k").alias("left_k"), F.col("l.ts").alias("left_ts"), F.col("l.v").alias("left_v"),
        F.col("r.k").alias("right_k"), F.col("r.ts").alias("right_ts"),
        F.col("r.v").alias("right_v"))


@dataclasses.dataclass
class RunResult:
    engine: str
    workload: str
    key_groups: int | None
    input_rows: int
    seconds: float
    out_rows: int
    checksum: int
    progress: list[dict[str, Any]]
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)
    all_seconds: list[float] = dataclasses.field(default_factory=list)
    all_own_cpu: list[float] = dataclasses.field(default_factory=list)
    #: Variants ``gcstat`` / ``nofreeze``: (full collections, their CPU-s) in the Python workers.
    gc_full: tuple[int, float] | None = None

    @property
    def rows_per_s(self) -> float:
        return self.input_rows / self.seconds

    @property
    def own_cpu(self) -> float:
        """CPU seconds of the benchmark's processes (JVM, Python workers, driver) in this run."""
        return sum(v for k, v in self.cpu.items() if k != "outside")

    @property
    def rows_per_cpu_s(self) -> float:
        """Input rows per CPU-second of the benchmark's processes (median over repeats)."""
        cpus = sorted(self.all_own_cpu or [self.own_cpu])
        return self.input_rows / max(cpus[len(cpus) // 2], 1e-9)

    def _state(self, p: dict[str, Any]) -> dict[str, Any]:
        ops = p.get("stateOperators") or []
        return {
            "memoryUsedBytes": sum(int(o.get("memoryUsedBytes", 0)) for o in ops),
            "numRowsTotal": sum(int(o.get("numRowsTotal", 0)) for o in ops),
            "numRowsDroppedByWatermark": sum(
                int(o.get("numRowsDroppedByWatermark", 0)) for o in ops),
            "watermark_ms": _wm_ms(p),
            "batchId": int(p["batchId"]),
        }

    @property
    def foreign(self) -> float:
        """Average cores used by processes outside the benchmark during the run."""
        return self.cpu.get("outside", 0.0) / self.seconds

    @property
    def data_batches(self) -> list[dict[str, Any]]:
        return [p for p in self.progress if int(p.get("numInputRows", 0)) > 0]

    @property
    def last_data_state(self) -> dict[str, Any]:
        return self._state(self.data_batches[-1])

    @property
    def last_state(self) -> dict[str, Any]:
        return self._state(self.progress[-1])

    @property
    def dropped_by_watermark(self) -> int:
        return sum(self._state(p)["numRowsDroppedByWatermark"] for p in self.progress)


def _proc_tree_ticks(root: int) -> dict[str, int]:
    """CPU ticks (utime+stime+reaped children's) of ``root``'s process tree, per kind.

    Kinds: ``driver`` (this Python process: py4j, foreachBatch), ``jvm`` (Spark's JVM) and
    ``python_workers`` (PySpark daemons and workers forked by the JVM).
    """
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[str, int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(d.name))
        info[int(d.name)] = (comm, sum(int(x) for x in fields[11:15]))
    out = {"driver": 0, "jvm": 0, "python_workers": 0}
    todo = [(root, "driver")]
    while todo:
        pid, parent_kind = todo.pop()
        comm, ticks = info.get(pid, ("", 0))
        if pid == root:
            kind = "driver"
        elif comm == "java":
            kind = "jvm"
        elif parent_kind in ("jvm", "python_workers"):
            kind = "python_workers"
        else:
            kind = parent_kind
        out[kind] += ticks
        todo.extend((c, kind) for c in children.get(pid, []))
    return out


@dataclasses.dataclass
class CpuSnap:
    machine_busy: int
    tree: dict[str, int]


def cpu_snapshot() -> CpuSnap:
    """Machine busy ticks and this process tree's ticks per kind (see :func:`cpu_delta`)."""
    try:
        vals = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        busy = sum(vals) - vals[3] - (vals[4] if len(vals) > 4 else 0)  # minus idle, iowait
        return CpuSnap(busy, _proc_tree_ticks(os.getpid()))
    except (OSError, ValueError):
        return CpuSnap(0, {})


def cpu_delta(before: CpuSnap, after: CpuSnap) -> dict[str, float]:
    """CPU seconds used between two snapshots: per kind of ours, and ``outside`` (others)."""
    hz = os.sysconf("SC_CLK_TCK")
    ours = {k: max(after.tree.get(k, 0) - before.tree.get(k, 0), 0) / hz for k in after.tree}
    machine = (after.machine_busy - before.machine_busy) / hz
    ours["outside"] = max(machine - sum(ours.values()), 0.0)
    return ours


def _jvm_pid() -> int | None:
    """PID of the Spark JVM launched by this process (local mode)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        if int(fields[1]) == os.getpid() and raw[raw.index("(") + 1:raw.rindex(")")] == "java":
            return int(d.name)
    return None


def _jcmd(pid: int, *command: str) -> None:
    import subprocess

    subprocess.run(["jcmd", str(pid), *command], check=True, capture_output=True)


def _wm_ms(p: dict[str, Any]) -> int:
    raw = (p.get("eventTime") or {}).get("watermark")
    if not raw:
        return 0
    wm = dt.datetime.strptime(raw, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
    return int(wm.timestamp() * 1000)


def run_query(spark: Any, root: Path, w: Workload, engine: str, key_groups: int | None,
              input_rows: int, ckpt_root: Path, variant: str = "baseline",
              jfr_dir: Path | None = None) -> RunResult:
    left, right = read_side(spark, root, "left"), read_side(spark, root, "right")
    # Each engine gets Python workers of its own: Spark keeps one worker pool per environment
    # of a UDF (captured from sc.environment when the query is built), and a variant may change
    # its worker process (gc.freeze, gc callbacks) in ways that must not leak into the others.
    spark.sparkContext.environment["INTERLACE_BENCH_WORKERS"] = engine
    if engine.startswith("interlace"):
        assert key_groups is not None
        if ":" in engine:
            variant = engine.split(":", 1)[1]
        out = build_interlace(left, right, w, key_groups, variant)
    else:
        out = build_native(left, right, w)
    acc = {"n": 0, "s": 0}

    def sink(df: Any, batch_id: int) -> None:
        row = df.selectExpr(
            "count(*) AS n",
            f"sum(CAST(xxhash64({CHECKSUM_COLUMNS}) AS DECIMAL(20, 0))) AS s").collect()[0]
        acc["n"] += int(row["n"])
        acc["s"] += int(row["s"] if row["s"] is not None else Decimal(0))

    ckpt = ckpt_root / f"{engine}-{w.name}-{key_groups}-{time.time_ns()}"
    jvm = _jvm_pid() if jfr_dir else None
    if jfr_dir and jvm:
        _jcmd(jvm, "JFR.start", "name=bench", "settings=profile")
    # Variant "timed" (bench/join_variants.py): the workers append per-call CPU times here. The
    # variable is set before the JVM starts (main), so the Python workers inherit it.
    timing_dir = Path(os.environ.get("INTERLACE_BENCH_TIMING_DIR", "/tmp/interlace-bench-timing"))
    shutil.rmtree(timing_dir, ignore_errors=True)
    # Variants gcstat / nofreeze: the workers log their garbage collections here.
    gc_log = getattr(variant_class(variant), "GC_LOG_DIR", None) if variant != "baseline" else None
    gc_dir = Path(gc_log) if gc_log and engine.startswith("interlace") else None
    if gc_dir is not None:
        shutil.rmtree(gc_dir, ignore_errors=True)
    # A variant's SESSION_CONF (bench/join_variants.py) applies to its query only: a streaming
    # query copies the session's settings when it starts.
    saved = {}
    if engine.startswith("interlace") and variant != "baseline":
        for k, v in getattr(variant_class(variant), "SESSION_CONF", {}).items():
            saved[k] = spark.conf.get(k, None)
            spark.conf.set(k, v)
    gc.collect()
    cpu0 = cpu_snapshot()
    t0 = time.perf_counter()
    query = (out.writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
    for k, v in saved.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    cpu = cpu_delta(cpu0, cpu_snapshot())
    if timing_dir.exists():  # variant "timed": CPU inside JoinFunction.__call__, per call
        calls = [line.split() for f in timing_dir.glob("*.txt")
                 for line in f.read_text().splitlines()]
        timed = {"join_function": sum(float(c[0]) for c in calls),
                 "input_frames": sum(float(c[4]) for c in calls)}
        print(f"[timed] {len(calls)} calls: JoinFunction {timed['join_function']:.2f} CPU-s, "
              f"materialising PySpark's input frames {timed['input_frames']:.2f} CPU-s, "
              f"Python workers in total {cpu.get('python_workers', 0):.2f} CPU-s", flush=True)
    gc_full = None
    if gc_dir is not None and gc_dir.exists():
        full = [line.split() for f in gc_dir.glob("*.txt") for line in f.read_text().splitlines()
                if line.startswith("2 ")]
        gc_full = (len(full), sum(float(c[1]) for c in full))
        print(f"[gc] {variant}: {gc_full[0]} full collections in the Python workers, "
              f"{gc_full[1]:.2f} CPU-s", flush=True)
    if jfr_dir and jvm:
        jfr_dir.mkdir(parents=True, exist_ok=True)
        target = jfr_dir / f"{engine}-{w.name}-kg{key_groups}-{time.time_ns()}.jfr"
        _jcmd(jvm, "JFR.stop", "name=bench", f"filename={target}")
        print(f"[jfr] {target}", flush=True)
    progress = [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in query.recentProgress]
    shutil.rmtree(ckpt, ignore_errors=True)
    return RunResult(engine, w.name, key_groups, input_rows, seconds, acc["n"], acc["s"], progress,
                     cpu, [seconds], gc_full=gc_full)


# ----------------------------------------------------------------------------------------------
# Reporting
# ----------------------------------------------------------------------------------------------


def fmt_int(x: float) -> str:
    return f"{x:,.0f}"


def fmt_bytes(x: float) -> str:
    return f"{x / 2**20:,.1f} MiB"


def pct_checksum(x: int) -> str:
    return f"{x % 2**64:016x}"


def versions() -> dict[str, str]:
    import pandas
    import pyspark

    import interlace

    return {
        "interlace": interlace.__version__,
        "pyspark": pyspark.__version__,
        "pandas": pandas.__version__,
        "pyarrow": pa.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "java": _java_version(),
        "cores": str(os.cpu_count()),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
    }


def _java_version() -> str:
    import subprocess

    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
        return out.stderr.splitlines()[0].strip()
    except OSError:
        return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="tiny smoke run (10k rows), not for numbers")
    ap.add_argument("--rows", type=int, default=None, help="rows per side per micro-batch (100000)")
    ap.add_argument("--batches", type=int, default=None, help="data micro-batches (4)")
    ap.add_argument("--workloads", default="abc", help="subset of a,b,c (default abc)")
    ap.add_argument("--key-groups", type=int, default=None,
                    help="key_groups for the engine comparison (default: interlace's default)")
    ap.add_argument("--sweep", default="8,16,32,64",
                    help="key_groups to sweep on workload b ('' to skip)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="runs per cell, engines interleaved; fastest reported (3; quick: 1)")
    ap.add_argument("--seed", type=int, default=20260302)
    ap.add_argument("--compare-variants", default="",
                    help="comma list of extra shim variants run beside interlace, e.g. timed")
    ap.add_argument("--jfr", default=None,
                    help="folder: record a Java Flight Recording of the JVM per run (jcmd)")
    ap.add_argument("--variant", default="baseline", choices=sorted(variant_names()),
                    help="interlace shim variant (bench/join_variants.py; default: unchanged)")
    ap.add_argument("--out", default=None,
                    help="results file (default bench/results/join-<date>.md)")
    ap.add_argument("--workdir", default=None, help="where inputs and checkpoints go (tmp)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra Spark setting for the session (repeatable; both engines)")
    args = ap.parse_args(argv)

    # PySpark's applyInPandasWithState worker concatenates all-NA padding frames, which makes
    # pandas 2.x print a FutureWarning per call; Python workers inherit this variable.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="interlace-bench-"))
    os.environ["INTERLACE_BENCH_TIMING_DIR"] = str(work / "timing")
    from interlace.state.keygroups import DEFAULT_JOIN_KEY_GROUPS

    from interlace import local_session

    rows = args.rows or (10_000 if args.quick else 100_000)
    batches = args.batches or (1 if args.quick else 4)
    key_groups = args.key_groups or DEFAULT_JOIN_KEY_GROUPS
    args.repeat = args.repeat or (1 if args.quick else 3)
    extra_variants = [v for v in args.compare_variants.split(",") if v.strip()]
    sweep = [int(x) for x in args.sweep.split(",") if x.strip()]
    if args.quick:
        sweep = [key_groups] if sweep else []  # renders the sweep table without extra runs
    today = dt.date.today().isoformat()
    suffix = "" if args.variant == "baseline" else f"-{args.variant}"
    if args.out:
        out_path = Path(args.out)
    elif args.quick:  # smoke runs do not belong in bench/results
        out_path = Path(tempfile.gettempdir()) / f"interlace-join-bench-quick{suffix}.md"
    else:
        out_path = HERE / "results" / f"join-{today}{suffix}.md"
    command = " ".join(["/work/venv/bin/python", "bench/join_bench.py", *(argv or sys.argv[1:])])

    work.mkdir(parents=True, exist_ok=True)
    ckpt_root = work / "checkpoints"
    t_start = time.perf_counter()
    try:
        # Data first (not timed), then Spark.
        datasets: dict[str, Data] = {}
        oracles: dict[str, dict[str, int]] = {}
        wanted = [c for c in args.workloads if c in WORKLOADS]
        if sweep and "b" not in wanted:
            wanted.append("b")
        for name in wanted:
            data = generate(WORKLOADS[name], rows, batches, args.seed + "abc".index(name))
            write_inputs(data, work / "in" / name)
            datasets[name] = data
            oracles[name] = oracle(data)
            o = oracles[name]
            print(f"[data] {name} ({WORKLOADS[name].label}): {data.input_rows:,} input rows, "
                  f"expected output {o['pairs']:,} rows, left rows matched "
                  f"{o['left_matched'] / o['left_rows']:.1%}", flush=True)
        warm = Workload("warm", "warm-up", keys=1_000, window_ms=5_000)
        warm_data = generate(warm, 2_000, 2, args.seed - 1)
        write_inputs(warm_data, work / "in" / "warm")

        spark = local_session("interlace-join-bench", master="local[2]", shuffle_partitions=4,
                              conf=dict(c.split("=", 1) for c in args.conf))
        print("[spark] session up", flush=True)
        for engine in ("native", "interlace") if not args.quick else ():
            r = run_query(spark, work / "in" / "warm", warm, engine, key_groups,
                          warm_data.input_rows, ckpt_root)
            print(f"[warm-up] {engine}: {r.seconds:.1f}s, {r.out_rows} rows", flush=True)

        failures: list[str] = []
        results: dict[tuple[str, str, int | None], RunResult] = {}

        checks: dict[tuple[str, str, int | None], tuple[int, int]] = {}

        def run(name: str, engine: str, kg: int | None) -> RunResult:
            """Run one cell once; keep the fastest run of each cell (best of --repeat)."""
            data = datasets[name]
            key = (name, engine, kg)
            if key in results and results[key].seconds > LONG_RUN_S:
                return results[key]  # minutes-long runs are not repeated
            r = run_query(spark, work / "in" / name, data.workload, engine, kg,
                          data.input_rows, ckpt_root, args.variant,
                          Path(args.jfr) if args.jfr else None)
            st = r.last_data_state
            print(f"[run] {name} {engine:9s} kg={kg}: {r.rows_per_s:,.0f} rows/s "
                  f"({r.seconds:.1f} s, "
                  f"other load {r.foreign:.2f} cores), out={r.out_rows:,} "
                  f"checksum={pct_checksum(r.checksum)} "
                  f"state={st['memoryUsedBytes']:,}B/{st['numRowsTotal']:,} rows, "
                  f"dropped={r.dropped_by_watermark}", flush=True)
            if engine.endswith(":floor"):
                pass  # the no-op floor emits nothing by design
            elif r.out_rows != oracles[name]["pairs"]:
                failures.append(f"{name}/{engine}/kg={kg}: {r.out_rows} output rows, "
                                f"oracle {oracles[name]['pairs']}")
            if key in checks and checks[key] != (r.out_rows, r.checksum):
                failures.append(f"{name}/{engine}/kg={kg}: output differs between repeats")
            checks[key] = (r.out_rows, r.checksum)
            r.all_own_cpu = [r.own_cpu]
            prev = results.get(key)
            if prev is not None:
                r.all_seconds = prev.all_seconds + r.all_seconds
                r.all_own_cpu = prev.all_own_cpu + r.all_own_cpu
                if prev.seconds <= r.seconds:
                    prev.all_seconds, prev.all_own_cpu = r.all_seconds, r.all_own_cpu
                    return prev
            results[key] = r
            return r

        compare = [c for c in args.workloads if c in WORKLOADS]
        for _ in range(args.repeat):
            # Engines interleaved, so outside load hits both alike.
            for name in compare:
                run(name, "native", None)
                run(name, "interlace", key_groups)
                for v in extra_variants:
                    run(name, f"interlace:{v}", key_groups)
            for kg in sweep:
                if "b" not in compare or kg != key_groups:
                    run("b", "interlace", kg)
            if sweep and "b" not in compare:
                run("b", "native", None)
        for name in compare:
            nat, il = results[(name, "native", None)], results[(name, "interlace", key_groups)]
            if (nat.out_rows, nat.checksum) != (il.out_rows, il.checksum):
                failures.append(
                    f"{name}: engines differ: native {nat.out_rows} rows / "
                    f"{pct_checksum(nat.checksum)}, interlace {il.out_rows} rows / "
                    f"{pct_checksum(il.checksum)}")
        for (name, engine, kg), r in results.items():
            ref = results.get((name, "native", None))
            if engine.startswith("interlace") and not engine.endswith(":floor") and ref and (
                    r.out_rows, r.checksum) != (
                    ref.out_rows, ref.checksum):
                msg = f"{name}/{engine} kg={kg}: differs from native"
                if msg not in failures:
                    failures.append(msg)

        report = render(args, results, datasets, oracles, key_groups, sweep, rows, batches,
                        command, failures, time.perf_counter() - t_start)
        print()
        print(report)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(report)
        raw = [{**{k: v for k, v in dataclasses.asdict(r).items() if k != "progress"},
                "last_data_state": r.last_data_state, "last_state": r.last_state,
                "durations": [p.get("durationMs", {}) for p in r.progress]}
               for r in results.values()]
        out_path.with_suffix(".json").write_text(json.dumps(raw, indent=1))
        print(f"[written] {out_path} (+ .json with every run)")
        spark.stop()
        if failures:
            print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
            return 1
        return 0
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


def render(args: Any, results: dict[tuple[str, str, int | None], RunResult],
           datasets: dict[str, Data], oracles: dict[str, dict[str, int]], key_groups: int,
           sweep: list[int], rows: int, batches: int, command: str, failures: list[str],
           total_s: float) -> str:
    v = versions()
    lines = [
        f"# Join benchmark — {dt.date.today().isoformat()}" + (" (--quick: smoke run, not numbers)"
                                                              if args.quick else ""),
        "",
        f"Command: `{command}` (from the repository root)",
        "",
        f"- interlace {v['interlace']}, PySpark {v['pyspark']}, pandas {v['pandas']}, "
        f"pyarrow {v['pyarrow']}, numpy {v['numpy']}, Python {v['python']}, {v['java']}",
        f"- {v['cores']} cores ({v['cpu']}), {v['platform']}; "
        "`local_session(master=\"local[2]\", shuffle_partitions=4)`, default (HDFS-backed) state "
        "store" + "".join(f"; `{c}`" for c in args.conf),
        f"- {rows:,} rows per side per micro-batch, {batches} data micro-batches + Spark's no-data "
        f"flush batch; Parquet file source, maxFilesPerTrigger=1, trigger(availableNow=True); "
        f"foreachBatch sink computing count + sum(xxhash64(...)); runs per cell: {args.repeat} "
        "(engines interleaved; the fastest run is reported, all wall times listed below)",
        "- interlace: `Join(how=\"inner\", time_window_ms=W, lateness_ms=L, "
        f"key_groups={key_groups})`"
        "; native: `withWatermark(ts, L)` on both sides, "
        "`l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL W AND l.ts + INTERVAL W`",
        f"- wall time of the whole script: {total_s:.0f} s",
        *([] if args.variant == "baseline" else [
            f"- **interlace shim variant `{args.variant}`** (bench/join_variants.py: a proposed "
            "change measured before it is made in operators/), not the released JoinFunction"]),
        "",
        "## Throughput (input rows of both sides / query wall time)",
        "",
        "rows/s: fastest run. rows/CPU-s: input rows per CPU-second used by the benchmark's own "
        "processes (JVM + Python workers + driver; median over runs), which other load on the "
        "machine disturbs much less than wall time; on an idle 2-core machine rows/s is at most "
        "2 x rows/CPU-s.",
        "",
        "| workload | W / L (ms) | output rows | left rows matched | native rows/s | "
        "interlace rows/s | interlace / native | native rows/CPU-s | interlace rows/CPU-s | "
        "interlace / native (CPU) | outputs identical |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name in [c for c in args.workloads if c in WORKLOADS]:
        nat, il = results[(name, "native", None)], results[(name, "interlace", key_groups)]
        w, o = datasets[name].workload, oracles[name]
        same = (nat.out_rows, nat.checksum) == (il.out_rows, il.checksum) == (
            o["pairs"], il.checksum)
        lines.append(
            f"| ({name}) {w.label} | {w.window_ms:,} / {w.lateness_ms:,} | {o['pairs']:,} | "
            f"{o['left_matched'] / o['left_rows']:.0%} | {fmt_int(nat.rows_per_s)} | "
            f"{fmt_int(il.rows_per_s)} | **{il.rows_per_s / nat.rows_per_s:.2f}x** | "
            f"{fmt_int(nat.rows_per_cpu_s)} | {fmt_int(il.rows_per_cpu_s)} | "
            f"**{il.rows_per_cpu_s / nat.rows_per_cpu_s:.2f}x** | "
            f"{'yes' if same else '**NO**'} (`{pct_checksum(il.checksum)}`) |")
    variant_keys = [k for k in results if ":" in k[1]]
    if variant_keys:
        lines += [
            "", "### Shim variants (bench/join_variants.py), same run, interleaved", "",
            "| workload | engine | rows/s | vs native | rows/CPU-s | vs native (CPU) | "
            "vs interlace (CPU) | outputs identical |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for name, engine, kg in variant_keys:
            r = results[(name, engine, kg)]
            nat, il = results[(name, "native", None)], results[(name, "interlace", kg)]
            same = (r.out_rows, r.checksum) == (nat.out_rows, nat.checksum)
            verdict = ("n/a (emits nothing)" if engine.endswith(":floor")
                       else "yes" if same else "**NO**")
            lines.append(
                f"| ({name}) | {engine} | {fmt_int(r.rows_per_s)} | "
                f"{r.rows_per_s / nat.rows_per_s:.2f}x | {fmt_int(r.rows_per_cpu_s)} | "
                f"{r.rows_per_cpu_s / nat.rows_per_cpu_s:.2f}x | "
                f"{r.rows_per_cpu_s / il.rows_per_cpu_s:.2f}x | {verdict} |")
    lines += [
        "",
        "\"outputs identical\": same row count and same order-independent checksum in both "
        "engines, and the count equals the exact join size computed from the data with numpy.",
        "",
        "## State (progress of the last data micro-batch = peak; and after the final flush batch)",
        "",
        "| workload | engine | memoryUsedBytes | numRowsTotal | buffered rows (data) | "
        "bytes / buffered row | bytes / state row | after flush: bytes / numRowsTotal | "
        "dropped by watermark |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in [c for c in args.workloads if c in WORKLOADS]:
        for engine, kg in (("native", None), ("interlace", key_groups)):
            r = results[(name, engine, kg)]
            st, last = r.last_data_state, r.last_state
            n_data = len(r.data_batches)
            buffered = buffered_rows(datasets[name], n_data - 1, st["watermark_ms"])
            per_state_row = st["memoryUsedBytes"] / max(st["numRowsTotal"], 1)
            lines.append(
                f"| ({name}) | {engine} | {fmt_bytes(st['memoryUsedBytes'])} | "
                f"{st['numRowsTotal']:,} | {buffered:,} | "
                f"{st['memoryUsedBytes'] / max(buffered, 1):,.0f} | {per_state_row:,.0f} | "
                f"{fmt_bytes(last['memoryUsedBytes'])} / {last['numRowsTotal']:,} | "
                f"{r.dropped_by_watermark} |")
    lines += [
        "",
        "numRowsTotal: native = buffered input rows of both sides (its state stores hold one row "
        "per buffered input row, plus a per-key count store); interlace = key groups holding a "
        "blob. \"buffered rows (data)\" is computed from the generated data: rows of both sides "
        "not yet evicted (t + W >= watermark) after that batch, so \"bytes / buffered row\" is "
        "comparable between engines.",
    ]
    if sweep:
        nat = results.get(("b", "native", None))
        lines += [
            "",
            f"## key_groups sweep (workload (b) {datasets['b'].workload.label})",
            "",
            "| key_groups | interlace rows/s | vs native | interlace rows/CPU-s | "
            "vs native (CPU) | "
            "state bytes (last data batch) | bytes / key group | outputs identical |",
            "|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for kg in sweep:
            r = results[("b", "interlace", kg)]
            st = r.last_data_state
            same = nat is not None and (r.out_rows, r.checksum) == (nat.out_rows, nat.checksum)
            lines.append(
                f"| {kg} | {fmt_int(r.rows_per_s)} | "
                f"{(r.rows_per_s / nat.rows_per_s) if nat else float('nan'):.2f}x | "
                f"{fmt_int(r.rows_per_cpu_s)} | "
                f"{(r.rows_per_cpu_s / nat.rows_per_cpu_s) if nat else float('nan'):.2f}x | "
                f"{fmt_bytes(st['memoryUsedBytes'])} | "
                f"{st['memoryUsedBytes'] / max(st['numRowsTotal'], 1):,.0f} | "
                f"{'yes' if same else '**NO**'} |")
        best = max(sweep, key=lambda kg: results[("b", "interlace", kg)].rows_per_s)
        best_cpu = max(sweep, key=lambda kg: results[("b", "interlace", kg)].rows_per_cpu_s)
        lines += ["", f"Fastest in this run: key_groups={best} (wall), key_groups={best_cpu} "
                  "(CPU)."]
    lines += [
        "", "## All runs", "",
        "Wall times of every run (s); for the fastest run, the CPU seconds used by Spark's JVM, "
        "by PySpark's Python workers (interlace's step runs there), by the driver process "
        "(py4j, foreachBatch) and by processes outside the benchmark (other users of the "
        "machine; from /proc). 2 cores give at most 2 CPU-s per wall second; outside load "
        "makes a run slower than the machine allows.", "",
        "| workload | engine | key_groups | wall times (s) | own CPU-s per run | JVM CPU-s | "
        "Python workers CPU-s | driver CPU-s | outside CPU-s (avg cores) |",
        "|---|---|---:|---|---|---:|---:|---:|---:|",
    ]
    for (name, engine, kg), r in results.items():
        c = r.cpu
        lines.append(f"| ({name}) | {engine} | {'' if kg is None else kg} | "
                     f"{', '.join(f'{x:.1f}' for x in r.all_seconds)} | "
                     f"{', '.join(f'{x:.1f}' for x in r.all_own_cpu)} | {c.get('jvm', 0):.1f} | "
                     f"{c.get('python_workers', 0):.1f} | {c.get('driver', 0):.1f} | "
                     f"{c.get('outside', 0):.1f} ({r.foreign:.2f}) |")
    logged = [(k, r) for k, r in results.items() if r.gc_full is not None]
    if logged:
        lines += ["", "## Garbage collection in the Python workers (fastest run)", "",
                  "Variants that log the workers' collections (bench/join_variants.py: "
                  "`gcstat` = interlace as released, `nofreeze` = without "
                  "the GC freeze of `prepare_worker`).", "",
                  "| workload | engine | full collections | their CPU-s | Python workers CPU-s |",
                  "|---|---|---:|---:|---:|"]
        for (name, engine, _kg), r in logged:
            assert r.gc_full is not None
            lines.append(f"| ({name}) | {engine} | {r.gc_full[0]} | {r.gc_full[1]:.2f} | "
                         f"{r.cpu.get('python_workers', 0):.1f} |")
    lines += ["", "## Per-batch timings of the fastest run "
              "(ms: triggerExecution / addBatch, per progress)", ""]
    for (name, engine, kg), r in results.items():
        parts = []
        for p in r.progress:
            d = p.get("durationMs", {})
            parts.append(f"{d.get('triggerExecution', 0)}/{d.get('addBatch', 0)}"
                         + ("" if int(p.get("numInputRows", 0)) else "(flush)"))
        lines.append(f"- ({name}) {engine}{'' if kg is None else f' kg={kg}'}: " + ", ".join(parts))
    if failures:
        lines += ["", "## FAILURES", ""] + [f"- {f}" for f in failures]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
