"""What one stream-stream join call costs as the key group's buffers grow (no Spark; issue 34).

A key group buffers ``B`` rows per side (a long time bound: one hour, the rows spread over
it, keys drawn from ``B`` keys); one call brings 25,000 new rows per side (a ``join-100k``
micro-batch's share at 4 key groups) whose keys are drawn from the same keys. Per ``B`` it
prints the blob's bytes and the median time of decoding, the step and encoding, with the
step matching each side's new rows against the other side's whole buffer ("whole") and
against the buffer narrowed first to the rows whose keys may match ("narrowed",
``_candidates`` in operators/join/step.py; the default from 10,000 buffered rows).

Run: ``.venv/bin/python bench/run.py state join-calls [B ...]`` (default 25,000 250,000 2,500,000;
prints a Markdown table).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from interlace.operators.join import JoinPlan, step
from interlace.state.buffers import JoinBuffers, decode_join_state, encode_join_state

from interlace import Join

TS = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema([("k", pa.int64()), ("ts", TS), ("v", pa.float64())])
HOUR_US = 3_600_000_000
NEW_ROWS = 25_000
STEP = importlib.import_module("interlace.operators.join.step")


def batch(plan: JoinPlan, rng: np.random.Generator, keys: int, n: int, t0_us: int,
          span_us: int) -> pa.Table:
    """``n`` rows per side, times in ``[t0, t0 + span)``, keys in ``[0, keys)``."""
    side = np.r_[np.zeros(n, np.int32), np.ones(n, np.int32)]
    tus = t0_us + rng.integers(0, span_us, 2 * n)
    ks = rng.integers(0, keys, 2 * n)
    ts = pa.array(tus, pa.int64()).cast(TS)
    vs = pa.array(rng.random(2 * n))
    left, right = pa.array(side == 0), pa.array(side == 1)
    cols = [pa.array(side), pa.array(tus)]
    for mask in (left, right):
        cols += [pc.if_else(mask, c, None) for c in (pa.array(ks), ts, vs)]
    return pa.Table.from_arrays(cols, schema=plan.input_schema)


def measure(buffered: int, repeat: int = 5) -> dict[str, float]:
    rng = np.random.default_rng(1)
    plan = JoinPlan.from_schemas(Join(left_keys=["k"], right_keys=["k"], how="inner",
                                      time_window_ms=HOUR_US // 1000, event_time_column="ts"),
                                 SCHEMA, SCHEMA)
    empty = JoinBuffers(plan.left_buffer_schema.empty_table(),
                        plan.right_buffer_schema.empty_table(), {})
    t0 = 10 * HOUR_US
    state = step(plan, empty, batch(plan, rng, buffered, buffered, t0, HOUR_US), None).state
    data = encode_join_state(state, plan.fp, plan.time_columns)
    schemas = (plan.left_buffer_schema, plan.right_buffer_schema)
    out: dict[str, float] = {"buffered": buffered, "blob_bytes": len(data)}
    parts: dict[str, list[float]] = {p: [] for p in ("decode", "whole", "narrowed", "encode")}
    saved = STEP._NARROW_MIN_ROWS
    for r in range(repeat):
        rows = batch(plan, rng, buffered, NEW_ROWS, t0 + HOUR_US + r * 1_000_000, 1_000_000)
        wm = t0 + r * 1_000_000  # evicts almost nothing: the buffers stay at their size
        a = time.perf_counter()
        st = decode_join_state(data, plan.fp, *schemas)
        parts["decode"].append((time.perf_counter() - a) * 1000)
        pairs = {}
        for name, floor in (("whole", 1 << 62), ("narrowed", saved)):
            STEP._NARROW_MIN_ROWS = floor
            a = time.perf_counter()
            res = step(plan, st, rows, wm)
            parts[name].append((time.perf_counter() - a) * 1000)
            pairs[name] = res.output.num_rows
        STEP._NARROW_MIN_ROWS = saved
        assert pairs["whole"] == pairs["narrowed"], pairs
        a = time.perf_counter()
        encode_join_state(res.state, plan.fp, plan.time_columns)
        parts["encode"].append((time.perf_counter() - a) * 1000)
    out.update({p: statistics.median(v) for p, v in parts.items()})
    return out


def parser() -> argparse.ArgumentParser:
    """The command line: the sizes to measure."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py state join-calls", description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", type=int, nargs="*", default=[25_000, 250_000, 2_500_000],
                    help="buffered rows per side (default 25000 250000 2500000)")
    return ap


def main(argv: list[str] | None = None) -> None:
    sizes = parser().parse_args(argv).sizes
    print("| buffered rows per side | blob bytes | decode ms | step ms, whole buffer | "
          "step ms, narrowed | encode ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    for b in sizes:
        m = measure(b)
        print(f"| {b:,} | {m['blob_bytes']:,.0f} | {m['decode']:.1f} | {m['whole']:.1f} | "
              f"{m['narrowed']:.1f} | {m['encode']:.1f} |")
