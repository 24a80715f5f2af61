"""Summarise py-spy samples of PySpark's Python workers: where an ``applyInPandasWithState``
micro-batch's Python time went, interlace's step vs PySpark's own input and output paths.

Record (py-spy is on PyPI, not a project dependency; attach to each ``pyspark.daemon``
parent process while a benchmark runs, e.g. ``bench/run.py curves ... --floor``)::

    py-spy record --pid <pyspark.daemon pid> --subprocesses --rate 100 --nonblocking \\
        --format raw -o spy-<pid>.txt

then::

    .venv/bin/python bench/run.py profile pyspy spy-*.txt [--top 15]

Pass the daemons' files only: with ``--subprocesses`` a daemon's file already holds its
forked workers' samples. Each sample (one stack) goes to the first category below that it
matches, so the categories add up to all samples. Imports and the daemon's idle loop are
one-off or idle and listed apart; ``floor`` marks samples inside the no-op floor's function
(bench/harness/floor.py), the rest of the input path is shared by every engine.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from pathlib import Path

#: (category, test on the ';'-joined stack and its leaf frame); the first match wins.
CATEGORIES: list[tuple[str, Callable[[str, str], bool]]] = [
    ("one-off: imports", lambda s, leaf: "_find_and_load" in s),
    ("idle: daemon loop", lambda s, leaf: leaf.startswith("manager (daemon.py")),
    ("pyspark out: pad the state rows + concat",
     lambda s, leaf: "construct_record_batch" in s and "concat" in s),
    ("pyspark out: count column, pandas -> Arrow",
     lambda s, leaf: "construct_record_batch" in s),
    ("pyspark out: state row (pickle)", lambda s, leaf: "construct_state_pdf" in s),
    ("interlace: step", lambda s, leaf: "step_window" in s or "step_join" in s
     or "step_stream_table" in s or "step_table_table" in s or "step_fk" in s),
    ("interlace: state blob (decode / encode)", lambda s, leaf: "state/blob.py" in s),
    ("input: frames to pandas (lazy, inside the function)",
     lambda s, leaf: "to_pandas" in s and ("shim.py" in s or "FloorFunction" in s)),
    ("input: series -> frame concat", lambda s, leaf: "apply_udf_to_group" in s
     and "concat" in s),
    ("interlace: shim (rest)", lambda s, leaf: "operators/" in s or "shim.py" in s),
    ("floor: function (rest)", lambda s, leaf: "FloorFunction" in s),
    ("input: state column to pandas + first chunk", lambda s, leaf: "gen_data_and_state" in s),
    ("input: Arrow read", lambda s, leaf: "load_stream" in s),
    ("pyspark: rest of the task", lambda s, leaf: "dump_stream" in s or "worker.py" in s),
    ("other", lambda s, leaf: True),
]


def read_raw(paths: list[Path]) -> list[tuple[list[str], int]]:
    """``(frames root first, samples)`` of py-spy's ``--format raw`` (collapsed) files."""
    out = []
    for p in paths:
        for line in p.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if stack:
                out.append((stack.split(";"), int(n)))
    return out


def categorise(rows: list[tuple[list[str], int]]) -> Counter[str]:
    """Samples per category (first match of :data:`CATEGORIES`)."""
    c: Counter[str] = Counter()
    for frames, n in rows:
        s = ";".join(frames)
        for name, test in CATEGORIES:
            if test(s, frames[-1]):
                c[name] += n
                break
    return c


def parser() -> argparse.ArgumentParser:
    """``bench/run.py profile pyspy --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py profile pyspy", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=15, help="top self frames to list")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    rows = read_raw(args.files)
    cats = categorise(rows)
    busy = sum(n for k, n in cats.items() if not k.startswith(("one-off", "idle")))
    print(f"{sum(cats.values()):,} samples; {busy:,} outside imports and the idle loop\n")
    print("| category | samples | share of the rest |\n|---|---:|---:|")
    for name, _ in CATEGORIES:
        if cats[name]:
            apart = name.startswith(("one-off", "idle"))
            share = "" if apart else f"{100 * cats[name] / busy:.0f}%"
            print(f"| {name} | {cats[name]:,} | {share} |")
    leaves: Counter[str] = Counter()
    for frames, n in rows:
        if "_find_and_load" not in ";".join(frames):
            leaves[frames[-1]] += n
    print("\n| top self frames | samples |\n|---|---:|")
    for leaf, n in leaves.most_common(args.top):
        print(f"| `{leaf}` | {n:,} |")
    return 0
