"""What one stream-table call costs as the key group's table grows (no Spark; issue 34).

A key group holds ``H`` table keys (one version each, the shape of ``table-st-state``'s
snapshot); one call brings the key group's share of a ``table-st-state`` micro-batch at 4 key
groups: 2,500 table updates and 25,000 stream rows (``emit="final"``, so the stream rows are
held once and joined by the next call's watermark). Per ``H`` it prints the blob's bytes and
the median time of each part of the call the shim runs: the state value's base64 decoding, the
blob's decoding, the step, the blob's encoding, the base64 encoding.

Run: ``.venv/bin/python bench/run.py state stream-table-calls [H ...]`` (default 25,000 250,000
2,500,000; prints a Markdown table).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from interlace.operators.stream_table import StreamTablePlan, step
from interlace.state.blob import from_state_value, to_state_value
from interlace.state.tables import StreamTableState, decode_stream_table_state

from interlace import StreamTableJoin

TS = pa.timestamp("us", tz="UTC")
STREAM = pa.schema([("k", pa.int64()), ("ts", TS), ("v", pa.float64())])
TABLE = pa.schema([("k", pa.int64()), ("ts", TS), ("tv", pa.int64())])
UPDATES, STREAM_ROWS = 2_500, 25_000


def batch(plan: StreamTablePlan, rng: np.random.Generator, keys: int, t_us: int,
          n_stream: int, n_table: int) -> pa.Table:
    """Input rows of one call: ``n_stream`` stream rows then ``n_table`` table updates."""
    n = n_stream + n_table
    side = np.r_[np.zeros(n_stream, np.int32), np.ones(n_table, np.int32)]
    tus = t_us + np.sort(rng.integers(0, 1_000_000, n))
    ks = rng.integers(0, keys, n)
    ts = pa.array(tus, pa.int64()).cast(TS)

    is_s, is_t = side == 0, side == 1
    cols = [pa.array(side), pa.array(tus),
            pa.array(ks),
            ts, pa.array(rng.random(n)),
            pa.array(ks), ts, pa.array(rng.integers(0, 1 << 40, n))]
    table = pa.Table.from_arrays(cols, schema=plan.input_schema)
    # each side's columns NULL on the other side's rows, as the prepared input has them
    mask_s, mask_t = pa.array(is_s), pa.array(is_t)
    for i, name in enumerate(plan.input_schema.names):
        if name.startswith("__il_l"):
            table = table.set_column(i, name, pc.if_else(mask_s, table.column(i), None))
        elif name.startswith("__il_r"):
            table = table.set_column(i, name, pc.if_else(mask_t, table.column(i), None))
    return table


def measure(keys: int, repeat: int = 5) -> dict[str, float]:
    """Blob bytes and per-part median ms of a call on a key group holding ``keys`` keys."""
    rng = np.random.default_rng(1)
    spec = StreamTableJoin(left_keys=["k"], right_keys=["k"], how="left",
                           event_time_column="ts", lateness_ms=2_000, emit="final",
                           key_groups=4)
    plan = StreamTablePlan.from_schemas(spec, STREAM, TABLE)
    state = StreamTableState.empty(plan.history_schema, plan.held_schema)
    ks = np.arange(keys, dtype=np.int64)
    n = keys
    snap_cols = []
    for name, f in zip(plan.input_schema.names, plan.input_schema, strict=True):
        if name == "__il_side":
            snap_cols.append(pa.array(np.ones(n, np.int32)))
        elif name == "__il_tus":
            snap_cols.append(pa.array(np.zeros(n, np.int64)))
        elif name == "__il_r0":
            snap_cols.append(pa.array(ks))
        elif name == "__il_r1":
            snap_cols.append(pa.array(np.zeros(n, np.int64)).cast(TS))
        elif name == "__il_r2":
            snap_cols.append(pa.array(rng.integers(0, 1 << 40, n)))
        else:
            snap_cols.append(pa.nulls(n, f.type))
    snap = pa.Table.from_arrays(snap_cols, schema=plan.input_schema)
    state = step(plan, state, snap, None).state
    t = 10_000_000
    value = to_state_value(state.encode(plan.fp), "base64")
    parts: dict[str, list[float]] = {p: [] for p in
                                     ("b64 decode", "decode", "step", "encode", "b64 encode")}
    blob_bytes = 0
    for r in range(repeat + 1):
        rows = batch(plan, rng, keys, t, STREAM_ROWS, UPDATES)
        marks = [time.perf_counter()]
        blob = from_state_value(value)
        marks.append(time.perf_counter())
        st = decode_stream_table_state(blob, plan.fp, plan.history_schema, plan.held_schema)
        marks.append(time.perf_counter())
        res = step(plan, st, rows, t)  # wm = t: the previous call's held rows are due
        marks.append(time.perf_counter())
        new = res.state.encode(plan.fp)
        marks.append(time.perf_counter())
        value = to_state_value(new, "base64")
        marks.append(time.perf_counter())
        blob_bytes = len(new)
        t += 1_000_000
        if r:  # the first call holds no rows yet: not timed
            for name, a, b in zip(parts, marks, marks[1:], strict=False):
                parts[name].append((b - a) * 1000)
    out = {"keys": keys, "blob_bytes": blob_bytes}
    out.update({p: statistics.median(v) for p, v in parts.items()})
    return out


def parser() -> argparse.ArgumentParser:
    """The command line: the sizes to measure."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py state stream-table-calls", description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", type=int, nargs="*", default=[25_000, 250_000, 2_500_000],
                    help="table keys in the key group (default 25000 250000 2500000)")
    return ap


def main(argv: list[str] | None = None) -> None:
    sizes = parser().parse_args(argv).sizes
    print("| table keys in the key group | blob bytes | bytes / key | b64 decode ms | "
          "decode ms | step ms | encode ms | b64 encode ms | call ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for keys in sizes:
        m = measure(keys)
        total = sum(m[p] for p in ("b64 decode", "decode", "step", "encode", "b64 encode"))
        print(f"| {keys:,} | {m['blob_bytes']:,} | {m['blob_bytes'] / keys:.1f} | "
              f"{m['b64 decode']:.1f} | {m['decode']:.1f} | {m['step']:.1f} | "
              f"{m['encode']:.1f} | {m['b64 encode']:.1f} | {total:.1f} |")
