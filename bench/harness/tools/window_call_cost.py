"""A window call's fixed cost without Spark: the function as Spark calls it, a few rows each.

The window function (``WindowFunction``, as ``applyInPandasWithState`` calls it) is driven by
``interlace.testing.local``: a first micro-batch of ``--keys`` keys over 4 key groups builds
the held windows, then micro-batches of 8 rows (2 per key group) in the same minute, so no
window closes: each call decodes the key group's blob, assigns 2 rows, folds them and encodes.
Prints the median call per window kind and aggregation set; run it with each build's
interpreter to compare builds (docs/performance-windows.md, "A window call's fixed cost"):

    .venv/bin/python bench/run.py micro window-call --keys 1000
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time

import pyarrow as pa

import interlace.testing.local as local
from interlace import Aggregation, Window
from interlace.testing.window_oracle import WindowBatch

T0 = dt.datetime(2026, 1, 1)
TIMES: list[float] = []


class Timed(local.WindowFunction):  # type: ignore[misc, name-defined]
    """The window function, timing each call with held state."""

    def __call__(self, key, frames, state):  # noqa: ANN001, ANN204
        held = state.exists
        t = time.perf_counter()
        out = list(super().__call__(key, frames, state))
        if held:
            TIMES.append(time.perf_counter() - t)
        return iter(out)


local.WindowFunction = Timed


def aggregations(which: str) -> list[Aggregation]:
    out = [Aggregation(agg="count", as_="n")]
    if which in ("fixed", "all"):
        out += [Aggregation(agg="sum", column="v", as_="s"),
                Aggregation(agg="min", column="v", as_="lo"),
                Aggregation(agg="max", column="v", as_="hi"),
                Aggregation(agg="avg", column="v", as_="mean")]
    if which == "all":
        out.append(Aggregation(agg="count_distinct", column="u", as_="d"))
    return out


def parser() -> argparse.ArgumentParser:
    """``bench/run.py micro window-call --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py micro window-call", description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=60, help="micro-batches of 8 rows")
    return ap


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("u", pa.int64()),
                        ("ts", pa.timestamp("ns"))])
    first = [{"k": k, "v": k, "u": k % 97, "ts": T0 + dt.timedelta(seconds=1)}
             for k in range(args.keys)]
    small = [[{"k": k, "v": 1, "u": 1, "ts": T0 + dt.timedelta(seconds=2 + i / 10)}
              for k in range(4 * i, 4 * i + 8)] for i in range(args.calls)]
    log = [WindowBatch(rows=tuple(first))] + [WindowBatch(rows=tuple(s)) for s in small]
    for kind, extra in (("tumbling", {"duration_ms": 60_000}),
                        ("hopping", {"duration_ms": 60_000, "hop_ms": 20_000}),
                        ("session", {"gap_ms": 30_000})):
        for which in ("count", "fixed", "all"):
            spec = Window(kind=kind, event_time_column="ts", lateness_ms=600_000,
                          group_by=["k"], max_groups_per_window=10_000_000,
                          aggregations=aggregations(which), key_groups=4, **extra)
            TIMES.clear()
            local.run_window_locally(spec, log, schema)
            print(f"{kind:8s} {which:5s} keys={args.keys}: median call "
                  f"{statistics.median(TIMES) * 1e3:.2f} ms over {len(TIMES)} calls")
