"""What PySpark's ``applyInPandasWithState`` output path costs per output row, without Spark.

Run (from the repository root; any interpreter with pandas, e.g. to compare pandas lines)::

    .venv/bin/python bench/run.py micro output-path [--rows 100000] [--states 4] [--repeat 5]
    .venv/bin/python bench/run.py micro output-path --fast-padding  # as interlace's workers run it
    .venv/bin/python bench/run.py micro output-path --array-cells 8  # output packed into arrays

PySpark 4.3's worker (``pyspark/worker.py``, ``construct_record_batch`` inside ``read_udfs``
for ``SQL_GROUPED_MAP_PANDAS_UDF_WITH_STATE``) sends the rows a function yields and one
state row per key group in one Arrow batch. Arrow needs equal column lengths, so before
converting it:

* builds a count frame from two Python lists of ``max(rows, states)`` ints;
* pads the state frame (``states`` one-row frames) with an empty frame of ``rows - states``
  rows (four ``object`` columns, all NaN) and ``pd.concat``-s them.

This script repeats those statements (same calls, same arguments) for a batch of ``--rows``
output rows and prints the CPU microseconds per output row of each. They do not depend on
what the function computed, so every ``applyInPandasWithState`` operator pays them for each
row it emits, and a no-op function that emits nothing (the floor) does not. docs/performance.md
("The output floor") quotes its figures. ``--fast-padding`` first installs the exact fast path
interlace's operators install in every PySpark worker
(``interlace.operators.common.worker.install_padding_fast_path``). ``--array-cells N`` also
times PySpark's conversion of a ``bigint`` column and of an ``array<bigint>`` column holding the
same values in ``N`` cells (what packing a call's output into one row of arrays would cost).
"""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd


def _state_row() -> pd.DataFrame:
    """One key group's state row as ``construct_state_pdf`` builds it."""
    return pd.DataFrame.from_dict({
        "properties": [b'{"timeoutMs": -1}'], "keyRowAsUnsafe": [b"\0" * 16],
        "object": [b"\0" * 64], "oldTimeoutTimestamp": [-1]})


def count_frame(rows: int, states: int) -> pd.DataFrame:
    """``count_pdf``: the data and state counts, repeated on every row."""
    n = max(1, max(rows, states))
    return pd.DataFrame.from_dict({"dataCount": [rows] * n, "stateCount": [states] * n})


def padded_state(rows: int, states: list[pd.DataFrame]) -> pd.DataFrame:
    """``merged_state_pdf``: the state rows padded with empty rows to the data's length."""
    n = max(1, max(rows, len(states)))
    empty = pd.DataFrame(columns=["properties", "keyRowAsUnsafe", "object",
                                  "oldTimeoutTimestamp"],
                         index=[x for x in range(0, n - len(states))])
    return pd.concat([*states, empty], ignore_index=True)


def array_column_cost(rows: int, cells: int, repeat: int) -> tuple[float, float]:
    """CPU-µs per value: PySpark's pandas -> Arrow for a flat ``bigint`` column, and for an
    ``array<bigint>`` column of ``cells`` numpy cells with the same values."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.pandas.types import _create_converter_from_pandas
    from pyspark.sql.types import ArrayType, LongType

    flat = pd.Series(np.arange(rows, dtype=np.int64))
    packed = pd.Series(list(np.array_split(flat.to_numpy(), cells)), dtype=object)
    to_flat = _create_converter_from_pandas(LongType(), timezone="UTC")
    to_packed = _create_converter_from_pandas(ArrayType(LongType()), timezone="UTC")
    return (
        _cpu_us_per_row(lambda: pa.Array.from_pandas(to_flat(flat), type=pa.int64()),
                        rows, repeat),
        _cpu_us_per_row(lambda: pa.Array.from_pandas(to_packed(packed),
                                                     type=pa.list_(pa.int64())), rows, repeat),
    )


def _cpu_us_per_row(fn: object, rows: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()  # type: ignore[operator]
        best = min(best, time.process_time() - t)
    return best / rows * 1e6


def parser() -> argparse.ArgumentParser:
    """``bench/run.py micro output-path --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py micro output-path", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000, help="output rows in the Arrow batch")
    ap.add_argument("--states", type=int, default=4, help="key groups (state rows) in it")
    ap.add_argument("--repeat", type=int, default=5, help="timings, best kept")
    ap.add_argument("--fast-padding", action="store_true",
                    help="install interlace's padding fast path first (what its workers run)")
    ap.add_argument("--array-cells", type=int, default=0,
                    help="also time a bigint column against array<bigint> in this many cells")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.fast_padding:
        from interlace.operators.common.worker import install_padding_fast_path

        install_padding_fast_path()
    states = [_state_row() for _ in range(args.states)]
    pad = _cpu_us_per_row(lambda: padded_state(args.rows, list(states)), args.rows, args.repeat)
    cnt = _cpu_us_per_row(lambda: count_frame(args.rows, args.states), args.rows, args.repeat)
    print(f"pandas {pd.__version__}, python {sys.version.split()[0]}: {args.rows:,} output rows, "
          f"{args.states} state rows per Arrow batch"
          + (", interlace's padding fast path" if args.fast_padding else ""))
    print(f"  state padding + concat: {pad:.2f} CPU-us per output row")
    print(f"  count frame:            {cnt:.2f} CPU-us per output row")
    print(f"  together:               {pad + cnt:.2f} CPU-us per output row")
    if args.array_cells:
        flat_us, packed_us = array_column_cost(args.rows, args.array_cells, args.repeat)
        print(f"  bigint column:          {flat_us:.3f} CPU-us per value")
        print(f"  array<bigint>, {args.array_cells} cells: {packed_us:.3f} CPU-us per value")
    return 0
