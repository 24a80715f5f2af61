"""Profile the Python side of interlace's join, without Spark's JVM, on benchmark data.

Run (from the repository root)::

    .venv/bin/python bench/run.py profile join --workload join-10k          # phase timings
    .venv/bin/python bench/run.py profile join --workload join-hot --cprofile 25

It replays what one ``applyInPandasWithState`` Python worker does for every key group of every
micro-batch of a join workload of the benchmark harness (bench/harness/joins.py), using
PySpark's own conversion code where the worker would:

1. ``input``: the prepared input rows (the columns ``prepare_join`` builds) as Arrow record
   batches, cut per key group into chunks of ``spark.sql.execution.arrow.maxRecordsPerBatch``
   (10,000) rows, converted with PySpark's ``ArrowBatchTransformer.to_pandas`` and
   ``pd.concat(axis=1)`` as ``worker.py`` does;
2. ``JoinFunction.__call__`` (split into ``frames_to_table``, ``decode``, ``step``, ``encode``,
   ``table_to_pandas``) with a stand-in ``GroupState``;
3. ``output``: PySpark's ``PandasToArrowConversion.convert`` of the yielded frames and the
   pickling of the state value.

It does not emulate PySpark's ``construct_record_batch`` (the all-NA padding ``pd.concat`` and
the framing of output and state into one record batch), nor the worker's Arrow IPC and the
JVM-side pickling of the state, so it understates PySpark's share: in real workers interlace's
``JoinFunction`` is about a fifth to a third of the Python CPU (docs/performance.md).

Key groups are assigned with a 64-bit mix hash, not Spark's xxhash64, so which key lands in
which group differs from Spark; sizes per group are the same in distribution. The Spark
watermark of batch ``i`` is ``min(max left t, max right t) - lateness`` over batches ``< i``,
as Spark computes it with the default ``multipleWatermarkPolicy=min``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pickle
import pstats
import sys
import time
from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from interlace.operators import join as J
from interlace.state.buffers import JoinBuffers, decode_join_state, encode_join_state

from harness import join_variants
from harness.data import T0_US
from harness.registry import Size
from harness.workloads import load

WORKLOADS = {n: w for n, w in load().items() if w.family == "join"}


class State:
    """Minimal GroupState stand-in (the subset JoinFunction uses)."""

    def __init__(self, value: Any, wm_ms: int) -> None:
        self.value = value
        self.wm_ms = wm_ms

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> Any:
        return self.value

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802
        return self.wm_ms

    def update(self, value: Any) -> None:
        self.value = value

    def remove(self) -> None:
        self.value = None

    def setTimeoutTimestamp(self, ts: int) -> None:  # noqa: N802
        self.timeout = ts


def mix_hash(k: np.ndarray, n: int) -> np.ndarray:
    x = k.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(29)
    return (x % np.uint64(n)).astype(np.int32)


def prepared_batch(
    left: tuple[np.ndarray, ...], right: tuple[np.ndarray, ...], kg: int
) -> pa.Table:
    """The rows ``prepare_join`` feeds to the grouped operator, as Spark's Arrow types."""
    ts = pa.timestamp("us", tz="UTC")
    nl, nr = len(left[0]), len(right[0])
    n = nl + nr
    k = np.concatenate([left[0], right[0]])
    t = np.concatenate([left[1], right[1]])
    side = np.concatenate([np.zeros(nl, np.int32), np.ones(nr, np.int32)])
    v = np.concatenate([left[2], right[2]])
    # prepare_join's layout for (k, ts, v) on both sides (JoinPlan.slots): k and v share one
    # column each, ts is read from __il_t.
    arrays = [
        pa.array(side), pa.array(mix_hash(k, kg)), pa.array(t).cast(ts), pa.array(t),
        pa.array(k), pa.array(v),
    ]
    names = [J.SIDE_COLUMN, J.KEY_GROUP_COLUMN, J.EVENT_TIME_COLUMN, J.TIME_COLUMN,
             "__il_s0", "__il_s1"]
    table = pa.Table.from_arrays(arrays, names=names)
    assert table.num_rows == n
    # Spark sorts each partition by the grouping key before the operator.
    order = np.argsort(table.column(J.KEY_GROUP_COLUMN).to_numpy(), kind="stable")
    return table.take(pa.array(order))


def parser() -> argparse.ArgumentParser:
    """``bench/run.py profile join --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py profile join", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="join-10k", choices=sorted(WORKLOADS))
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--key-groups", type=int, default=32)
    ap.add_argument("--chunk", type=int, default=10_000, help="arrow.maxRecordsPerBatch")
    ap.add_argument("--cprofile", type=int, default=0, help="print the top N functions (cumtime)")
    ap.add_argument("--seed", type=int, default=20260302)
    ap.add_argument("--variant", default="baseline", choices=sorted(join_variants.VARIANTS),
                    help="see bench/harness/join_variants.py")
    ap.add_argument("--arrow-threads", type=int, default=0, help="pa.set_cpu_count (0: default)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    from pyspark.serializers import CPickleSerializer
    from pyspark.sql import types as T
    from pyspark.sql.conversion import ArrowBatchTransformer, PandasToArrowConversion

    w = WORKLOADS[args.workload]
    data = w.generate(Size(args.rows, args.batches, seed=args.seed))
    shape = data.shape
    spec = J.Join(left_keys=["k"], right_keys=["k"], how="inner", time_window_ms=shape.window_ms,
                  event_time_column="ts", lateness_ms=shape.lateness_ms,
                  key_groups=args.key_groups)
    side_schema = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("ns")), ("v", pa.float64())])
    plan = J.JoinPlan.from_schemas(spec, side_schema, side_schema)
    assert plan.slots == (("__il_s0", 0, 0), ("__il_s1", 2, 2)), plan.slots  # prepared_batch
    func = join_variants.VARIANTS[args.variant](plan)
    if args.arrow_threads:
        pa.set_cpu_count(args.arrow_threads)
        pa.set_io_thread_count(args.arrow_threads)
    out_type = T.StructType([
        T.StructField(n, t) for n, t in zip(
            plan.output_names,
            [T.LongType(), T.TimestampType(), T.DoubleType()] * 2, strict=True)])
    pickle_ser = CPickleSerializer()

    states: dict[int, Any] = {}
    phase: dict[str, float] = defaultdict(float)
    phase_cpu: dict[str, float] = defaultdict(float)
    calls = 0
    out_rows = 0
    blob_bytes: list[int] = []

    # Wrap the JoinFunction pieces to time them (module globals of operators/join/shim.py,
    # where JoinFunction lives, are looked up at call time).
    mod: Any = sys.modules[J.JoinFunction.__module__]
    names = {"frames_to_table": "frames_to_table", "decode_join_state": "decode_join_state",
             "step": "step", "encode_join_state": "encode_join_state",
             "table_to_pandas": "table_to_pandas"}
    orig = {n: getattr(mod, n) for n in names.values()}
    label = {v: k for k, v in names.items()}

    def timed(name: str) -> Any:
        fn = orig[name]

        def wrapper(*a: Any, **k: Any) -> Any:
            t, c = time.perf_counter(), time.process_time()
            try:
                return fn(*a, **k)
            finally:
                phase[label[name]] += time.perf_counter() - t
                phase_cpu[label[name]] += time.process_time() - c
        return wrapper

    for name in orig:
        setattr(mod, name, timed(name))

    prof = cProfile.Profile() if args.cprofile else None
    max_l = max_r = None
    per_batch: list[float] = []
    per_batch_cpu: list[float] = []
    for b in range(args.batches):
        wm_ms = 0 if max_l is None else max(0, (min(max_l, max_r) // 1000) - shape.lateness_ms)
        table = prepared_batch(data.left[b], data.right[b], args.key_groups)
        max_l = max(max_l or 0, int(data.left[b][1].max()))
        max_r = max(max_r or 0, int(data.right[b][1].max()))
        kgs = table.column(J.KEY_GROUP_COLUMN).to_numpy()
        bounds = np.flatnonzero(np.diff(kgs)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [len(kgs)]])
        # Groups with state but no input in this batch get a timeout call only if their timeout
        # passed; with these workloads every group has input in every batch.
        t_batch, c_batch = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        for s, e in zip(starts, ends, strict=True):
            g = int(kgs[s])
            t, c0 = time.perf_counter(), time.process_time()
            frames = []
            for c in range(s, e, args.chunk):
                rb = table.slice(c, min(args.chunk, e - c)).combine_chunks().to_batches()[0]
                series = ArrowBatchTransformer.to_pandas(
                    rb, timezone="UTC", struct_in_pandas="dict", ndarray_as_list=False,
                    prefer_int_ext_dtype=False, df_for_struct=False)
                frames.append(pd.concat(series, axis=1))
            phase["input (PySpark arrow->pandas)"] += time.perf_counter() - t
            phase_cpu["input (PySpark arrow->pandas)"] += time.process_time() - c0
            st = State(pickle.loads(states[g]) if g in states else None, wm_ms)
            outs = list(func((g,), iter(frames), st))
            calls += 1
            t, c0 = time.perf_counter(), time.process_time()
            for pdf in outs:
                out_rows += len(pdf)
                PandasToArrowConversion.convert(pdf, out_type, timezone="UTC", safecheck=True,
                                                arrow_cast=True, assign_cols_by_name=False)
            if st.value is not None:
                states[g] = pickle_ser.dumps(st.value)
                blob_bytes.append(len(st.value[0]))
            else:
                states.pop(g, None)
            phase["output (PySpark pandas->arrow + state pickle)"] += time.perf_counter() - t
            phase_cpu["output (PySpark pandas->arrow + state pickle)"] += time.process_time() - c0
        if prof:
            prof.disable()
        per_batch.append(time.perf_counter() - t_batch)
        per_batch_cpu.append(time.process_time() - c_batch)

    for name, fn in orig.items():
        setattr(mod, name, fn)
    total, total_cpu = sum(per_batch), sum(per_batch_cpu)
    inner = sum(v for k, v in phase.items() if not k.startswith(("input", "output")))
    inner_cpu = sum(v for k, v in phase_cpu.items() if not k.startswith(("input", "output")))
    print(f"workload {w.name} ({w.label}): {args.batches} batches x {args.rows:,} rows/side, "
          f"key_groups={args.key_groups}, variant={args.variant}, {calls} calls, "
          f"{out_rows:,} output rows")
    print(f"Python wall time per batch (s): {', '.join(f'{x:.2f}' for x in per_batch)}; total "
          f"{total:.2f} s wall, {total_cpu:.2f} s CPU = {data.input_rows / total_cpu:,.0f} "
          "input rows per CPU-second")
    print(f"last blob sizes: mean {np.mean(blob_bytes[-args.key_groups:]) / 1024:,.0f} KiB")
    print("\n| phase | wall s | CPU s | share of CPU |\n|---|---:|---:|---:|")
    for name, v in sorted(phase_cpu.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {phase[name]:.2f} | {v:.2f} | {v / total_cpu:.0%} |")
    print(f"| (JoinFunction total) | {inner:.2f} | {inner_cpu:.2f} | {inner_cpu / total_cpu:.0%} |")
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(args.cprofile)
        print(s.getvalue())
    # Unused-name guard for linters: these are the phases' functions.
    _ = (JoinBuffers, decode_join_state, encode_join_state, T0_US)
    return 0
