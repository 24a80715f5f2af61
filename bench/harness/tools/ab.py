"""A/B of two interlace builds in one run: the benchmark harness, builds alternated.

Used for refactors that must not slow anything down (issue 15): build A is an environment with
the code before the change installed, build B one with the code after it. Each round runs
this tree's ``bench/run.py`` once with each build's interpreter (A and B alternating), so the
harness is the same for both and only the installed interlace differs; every run has Spark's
native operator beside interlace in its own session, so each run carries its own control. The
report gives, per workload, interlace's rows/s under each build (fastest of the rounds), the
interlace / native ratio of each build's runs, and B / A.

    python bench/run.py ab --a-python /work/venv-before/bin/python \
        --b-python .venv/bin/python --rounds 2 --out bench/results/ab-<date>.md

An interpreter's interlace must be installed (not taken from the current directory): the
harness runs as ``python bench/run.py``, so only ``bench/`` is put on ``sys.path``. One Spark
job at a time on the machine: the runs are sequential, and nothing else should run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]  # bench/
HARNESS_ARGS = ["--workloads", "join-100k,join-10k,window-hopping,window-session",
                "--stores", "hdfs", "--repeat", "1"]


def throughput(raw: dict) -> dict[str, tuple[float, float]]:
    """``{workload: (native rows/s, interlace rows/s)}`` from a harness JSON (first store)."""
    out: dict[str, tuple[float, float]] = {}
    for r in raw["ratios"]:
        if r["other"] == "interlace" and r["workload"] not in out:
            out[r["workload"]] = (r["native_rows_per_s"], r["other_rows_per_s"])
    return out


def run(python: str, args: list[str], work: Path, label: str) -> dict[str, tuple[float, float]]:
    """Run the harness with one build's interpreter; return its throughput per workload."""
    stem = f"{dt.date.today().isoformat()}-{label}"
    cmd = [python, str(HERE / "run.py"), "throughput", *args, "--out-dir", str(work),
           "--label", label]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=HERE.parent, check=True, env={**os.environ, "PYSPARK_PYTHON": python})
    return throughput(json.loads((work / f"{stem}.json").read_text()))


def parser() -> argparse.ArgumentParser:
    """``bench/run.py ab --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py ab", description=__doc__.splitlines()[0])
    ap.add_argument("--a-python", required=True)
    ap.add_argument("--b-python", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("harness_args", nargs="*", default=HARNESS_ARGS,
                    help=f"after --: bench/run.py arguments (default {' '.join(HARNESS_ARGS)})")
    return ap


def main(argv: list[str] | None = None) -> None:
    """Run the rounds and write the report."""
    args = parser().parse_args(argv)
    started = time.monotonic()
    builds = {"A": args.a_python, "B": args.b_python}
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for build in ["A", "B"] if rnd % 2 == 0 else ["B", "A"]:
                label = f"ab-{build}-{rnd}"
                for wl, figures in run(builds[build], args.harness_args, Path(tmp),
                                       label).items():
                    runs.setdefault((wl, build), []).append(figures)
    rows = []
    for wl in dict.fromkeys(wl for wl, _ in runs):
        a, b = runs[(wl, "A")], runs[(wl, "B")]
        best_a, best_b = max(x[1] for x in a), max(x[1] for x in b)
        ratio_a = ", ".join(f"{i / n:.2f}x" for n, i in a)
        ratio_b = ", ".join(f"{i / n:.2f}x" for n, i in b)
        rows.append(f"| {wl} | {best_a:,.0f} | {best_b:,.0f} | **{best_b / best_a:.2f}** "
                    f"| {ratio_a} | {ratio_b} |")
    args.out.write_text(
        f"# A/B of two builds — {dt.date.today()}\n\nCommand: `{' '.join(sys.argv)}`\n\n"
        f"- A: {args.a_python}; B: {args.b_python}\n"
        f"- {args.rounds} rounds, builds alternated (A first in even rounds); per run: "
        f"`bench/run.py {' '.join(args.harness_args)}`\n"
        f"- wall time: {time.monotonic() - started:.0f} s\n\n"
        "| workload | A interlace rows/s (best) | B interlace rows/s (best) | B / A "
        "| A: interlace / native per run | B: interlace / native per run |\n"
        "|---|---:|---:|---:|---|---|\n" + "\n".join(rows) + "\n"
    )
    print(args.out.read_text())
