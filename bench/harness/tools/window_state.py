"""One session-window call at a large state, without Spark: decode, step, encode (issue 34).

    .venv/bin/python bench/run.py state window-calls              # 25k, 250k, 1.25M sessions
    .venv/bin/python bench/run.py state window-calls --sessions 1250000 --rows 12500

One key group of the ``window-session-state`` workload (bench/harness/windows.py: gap 1 h,
the six aggregations): a first call opens ``--sessions`` sessions (one per key), then each
timed call brings ``--rows`` rows at random keys (each extends an open session). Per call:
``WindowState.decode`` of the blob, ``step_window`` and ``WindowState.encode`` (CPU time,
best of ``--repeat``), with the held slots narrowed to the call's groups first (the default,
``group_codes``) and without (every held group encoded). Results go to
``bench/results/<date>-window-state-calls.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness import windows as hw

SPAN_US = 120_000_000

BENCH = Path(__file__).resolve().parents[2]  # bench/


def _frame(rng: np.random.Generator, k: np.ndarray, t: np.ndarray) -> pd.DataFrame:
    from interlace.operators.window import TIME_US_COLUMN

    return pd.DataFrame({TIME_US_COLUMN: t, "k": k, "v": rng.integers(0, 6_400, len(k)) / 64.0,
                         "u": rng.integers(0, 1_000_000, len(k))})


def measure(sessions: int, rows: int, repeat: int, narrowed: bool) -> dict[str, Any]:
    from interlace.operators.window import WindowPlan
    from interlace.operators.window import slots as window_slots
    from interlace.operators.window.step import WindowState, step_window

    kind = hw.Kind("session", gap_ms=3_600_000)
    plan = dataclasses.replace(WindowPlan.from_schema(hw.spec(kind, 8, sessions), hw.SCHEMA),
                               columns=("k", "v", "u"))
    rng = np.random.default_rng(20261127)
    t0 = hw.hdata.T0_US
    first = _frame(rng, rng.permutation(sessions).astype(np.int64),
                   np.sort(t0 + rng.integers(0, SPAN_US, sessions)))
    blob = step_window(plan, WindowState.empty(plan), first, None).state.encode(plan)
    wm = t0 + SPAN_US - 5_000_000
    saved = window_slots.NARROW_MIN_SLOTS
    window_slots.NARROW_MIN_SLOTS = saved if narrowed else 1 << 62
    best: dict[str, float] = {}
    try:
        for i in range(repeat):
            batch = _frame(rng, rng.integers(0, sessions, rows).astype(np.int64),
                           np.sort(t0 + SPAN_US * (i + 1) + rng.integers(0, SPAN_US, rows)))
            a = time.process_time()
            state = WindowState.decode(blob, plan)
            b = time.process_time()
            result = step_window(plan, state, batch, wm)
            c = time.process_time()
            result.state.encode(plan)
            d = time.process_time()
            for part, sec in (("decode", b - a), ("step", c - b), ("encode", d - c)):
                best[part] = min(best.get(part, sec), sec)
    finally:
        window_slots.NARROW_MIN_SLOTS = saved
    return {"sessions": sessions, "rows": rows, "narrowed": narrowed, "blob_mb": len(blob) / 1e6,
            **{f"{p}_ms": 1000 * s for p, s in best.items()}}


def parser() -> argparse.ArgumentParser:
    """``bench/run.py state window-calls --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py state window-calls", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[25_000, 250_000, 1_250_000])
    ap.add_argument("--rows", type=int, default=12_500, help="rows per timed call")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    lines = [f"# One session-window call at a large state ({dt.date.today()})", "",
             f"`{' '.join(sys.argv)}`: one key group, {args.rows:,} "
             f"rows per call at random keys, CPU ms (best of {args.repeat}).", "",
             "| held sessions | blob MB | step, every group encoded | step, narrowed | "
             "decode | encode |", "|---:|---:|---:|---:|---:|---:|"]
    for n in args.sessions:
        whole = measure(n, args.rows, args.repeat, narrowed=False)
        narrow = measure(n, args.rows, args.repeat, narrowed=True)
        print(whole, narrow, flush=True)
        lines.append(f"| {n:,} | {narrow['blob_mb']:.1f} | {whole['step_ms']:,.0f} | "
                     f"{narrow['step_ms']:,.0f} | {narrow['decode_ms']:,.0f} | "
                     f"{narrow['encode_ms']:,.0f} |")
    report = "\n".join(lines) + "\n"
    out = args.out or (BENCH / "results"
                       / f"{dt.date.today()}-window-state-calls.md")
    out.write_text(report)
    print(report)
    return 0
