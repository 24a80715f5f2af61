"""Window aggregation without Spark: ``step_window``'s hot path and the encoded state per slot.

Run (from the repository root; no JVM, about 30 s)::

    .venv/bin/python bench/run.py profile window            # hot path + state sizes
    .venv/bin/python bench/run.py profile window --profile  # + a cProfile of the hot path
    .venv/bin/python bench/run.py profile window --kinds tumbling,hopping,session  # each kind

On the window workloads' data (bench/harness/windows.py: 4 micro-batches x 100,000 rows,
10,000 keys, 120 s per micro-batch, the six aggregations):

* Hot path: ``step_window`` timed directly (CPU time, best of 5) on the last full micro-batch
  of tumbling 1 min (``--kinds``: also hopping 1 min / 10 s and session, gap 30 s), on the
  state left by the ones before and with Spark's watermark, so the call both ingests the
  rows and emits the windows that close: as one call over all keys, and as ``key_groups``
  calls (what Spark makes), with and without the blob decode/encode that ``WindowFunction``
  adds.
* Encoded state: key group 0's ``WindowState.encode`` after the last full micro-batch, bytes
  per (window, key) slot and per part, for each window workload.

The Spark comparison of the same workloads is ``bench/run.py --workloads 'window-*'``.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness import windows as hw
from harness.registry import Size
from harness.workloads import load


def _plan(kind: hw.Kind, key_groups: int) -> Any:
    from interlace.operators.window import WindowPlan

    plan = WindowPlan.from_schema(hw.spec(kind, key_groups), hw.SCHEMA)
    return dataclasses.replace(plan, columns=("k", "v", "u"))


def _frame(k: np.ndarray, t: np.ndarray, v: np.ndarray, u: np.ndarray) -> pd.DataFrame:
    from interlace.operators.window import TIME_US_COLUMN

    return pd.DataFrame({TIME_US_COLUMN: t, "k": k, "v": v, "u": u})


def _split(frame: pd.DataFrame, key_groups: int) -> dict[int, pd.DataFrame]:
    """Split rows by key group ``k % key_groups`` (Spark uses xxhash64; the sizes are alike)."""
    kg = frame["k"].to_numpy() % key_groups
    return {int(g): frame[kg == g].reset_index(drop=True) for g in np.unique(kg)}


def _clock() -> float:
    """CPU time of this process: robust to other load on the machine, unlike wall time."""
    return time.process_time()


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


def hot_path(data: hw.WindowData, key_groups: int, repeat: int, profile: bool) -> HotPath:
    """Time ``step_window`` on the last full micro-batch, state from the ones before."""
    from interlace.operators.window import WindowState, step_window

    plan = _plan(data.kind, key_groups)
    wms = data.spark_watermarks_ms()
    last = data.data_batches - 1
    frames = [_frame(*data.batches[i]) for i in range(last + 1)]

    def wm_us(i: int) -> int | None:
        return wms[i] * 1000 if wms[i] > 0 else None

    st = WindowState.empty(plan)
    for i in range(last):
        st = step_window(plan, st, frames[i], wm_us(i)).state
    best_one = float("inf")
    for _ in range(repeat):
        t0 = _clock()
        step_window(plan, st, frames[last], wm_us(last))
        best_one = min(best_one, _clock() - t0)
    res = step_window(plan, st, frames[last], wm_us(last))
    parts = [_split(f, key_groups) for f in frames]
    blobs: dict[int, bytes] = {}
    for i in range(last):
        for g, part in parts[i].items():
            prev = WindowState.decode(blobs[g], plan) if g in blobs else WindowState.empty(plan)
            blobs[g] = step_window(plan, prev, part, wm_us(i)).state.encode(plan)
    groups = sorted(parts[last])
    best = {"step": float("inf"), "decode": float("inf"), "encode": float("inf")}
    for _ in range(repeat):
        tot = dict.fromkeys(best, 0.0)
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
        pstats.Stats(pr, stream=buf).sort_stats("cumulative").print_stats(
            r"operators/window/|operators/common/|state/accumulators/|state/blob\.py", 22)
        prof = _trim_profile(buf.getvalue())
    return HotPath(n, key_groups, best_one * 1e9 / n, best["step"] * 1e9 / n,
                   sum(best.values()) * 1e9 / n, best["decode"] * 1e9 / n,
                   best["encode"] * 1e9 / n, len(res.output), res.state.slots.num_rows, prof)


def _trim_profile(text: str) -> str:
    lines = [ln.rstrip() for ln in text.splitlines()]
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("ncalls")), 0)
    head = [ln.strip() for ln in lines[:start] if "function calls" in ln]
    root = str(Path(__file__).resolve().parents[3])
    return "\n".join(head + lines[start:]).replace(str(Path(sys.prefix)), "<venv>").replace(
        root, "<repo>").strip()


@dataclasses.dataclass
class BlobSize:
    slots: int
    blob_bytes: int
    parts: dict[str, int]
    sparse_entries: int
    dense_sketches: int


def blob_size(data: hw.WindowData, key_groups: int) -> BlobSize:
    """Encode key group 0's state after the last full micro-batch; bytes per part."""
    import msgpack
    from interlace.operators.window import WindowState, step_window
    from interlace.state.buffers import table_to_ipc

    plan = _plan(data.kind, key_groups)
    wms = data.spark_watermarks_ms()
    st = WindowState.empty(plan)
    for i in range(data.data_batches):
        part = _split(_frame(*data.batches[i]), key_groups).get(0)
        if part is not None:
            st = step_window(plan, st, part, wms[i] * 1000 if wms[i] > 0 else None).state
    parts = {"slot table (Arrow IPC)": len(table_to_ipc(st.slots))}
    for a, s in zip(plan.aggs, st.accs, strict=True):
        parts[f"{a.agg} ({a.alias})"] = len(msgpack.packb(a.accumulator().to_msgpack(s)))
    hll = st.accs[-1]
    return BlobSize(st.slots.num_rows, len(st.encode(plan)), parts,
                    int(hll.sparse_index.shape[0]), int(hll.dense.shape[0]))


def _print_hot_path(data: hw.WindowData, kind: str, kgs: list[int], args: Any) -> None:
    for kg in kgs:
        hp = hot_path(data, kg, args.repeat, args.profile and kg == kgs[0])
        print(f"[hot path] {kind}, {hp.rows:,} rows (emits {hp.out_rows:,}, keeps "
              f"{hp.slots_after:,} slots): one call {hp.one_call_ns:,.0f} ns/row; {kg} key-group "
              f"calls {hp.per_group_step_ns:,.0f} ns/row, + decode/encode "
              f"{hp.per_group_full_ns:,.0f} ns/row (decode {hp.decode_ns:,.0f}, encode "
              f"{hp.encode_ns:,.0f})")
        if hp.profile:
            print(hp.profile)


def parser() -> argparse.ArgumentParser:
    """``bench/run.py profile window --help``."""
    from interlace.state.keygroups import DEFAULT_KEY_GROUPS

    ap = argparse.ArgumentParser(
        prog="bench/run.py profile window", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, help="rows per micro-batch (100000)")
    ap.add_argument("--batches", type=int, help="data micro-batches (4)")
    ap.add_argument("--keys", type=int, help="distinct keys (10000)")
    ap.add_argument("--key-groups", default=str(DEFAULT_KEY_GROUPS),
                    help="comma list of key_groups to time (default: the library default)")
    ap.add_argument("--repeat", type=int, default=5, help="timings per figure, best kept")
    ap.add_argument("--profile", action="store_true", help="cProfile the hot path")
    ap.add_argument("--kinds", default="tumbling",
                    help="comma list of window kinds to time: tumbling, hopping, session")
    ap.add_argument("--seed", type=int, default=Size().seed)
    ap.add_argument("--fixed-rate", action="store_true",
                    help="event time per micro-batch grows with --rows (as in bench/run.py "
                         "curves)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    reg = load()
    size = Size(args.rows, args.batches, args.keys, seed=args.seed, fixed_rate=args.fixed_rate)
    kgs = [int(x) for x in args.key_groups.split(",") if x.strip()]
    for kind in [k.strip() for k in args.kinds.split(",") if k.strip()]:
        _print_hot_path(reg[f"window-{kind}"].generate(size), kind, kgs, args)
    for name in ("window-tumbling", "window-hopping", "window-session"):
        b = blob_size(reg[name].generate(size), kgs[0])
        s = max(b.slots, 1)
        print(f"[state] {name}: key group 0 of {kgs[0]} holds {b.slots:,} slots in "
              f"{b.blob_bytes:,} B = {b.blob_bytes / s:,.0f} B/slot; HLL sparse entries/slot "
              f"{b.sparse_entries / s:.1f}, dense sketches {b.dense_sketches}; per slot: "
              + ", ".join(f"{k} {v / s:,.1f}" for k, v in b.parts.items()))
    return 0
