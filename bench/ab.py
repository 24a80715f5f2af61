"""A/B of two interlace builds in one run: the join and window benchmarks, builds alternated.

Used for refactors that must not slow anything down (issue 15): build A is an install of the
code before the change, build B an install of the code after it. Each round runs
``bench/join_bench.py`` and ``bench/window_bench.py`` once per build, A and B alternating, every
run with Spark's native operator beside interlace in its own session, so each run carries its
own control. The report gives, per workload, interlace's rows/s under each build (fastest of the
rounds), the interlace / native ratio of each build's runs, and B / A.

    python bench/ab.py --a-python /work/venv-before/bin/python --a-tree /work/before \
        --b-python .venv/bin/python --b-tree . --rounds 2 --out bench/results/ab-<date>.md

One Spark job at a time on the machine: the runs are sequential, and nothing else should run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOIN_ARGS = ["--workloads", "ab", "--repeat", "1", "--sweep", ""]
WINDOW_ARGS = ["--workloads", "hopping,session", "--repeat", "1", "--sweep", "", "--no-floor"]


def throughput(md: str) -> dict[str, tuple[float, float]]:
    """Return ``{workload: (native rows/s, interlace rows/s)}`` from a results file's table."""
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and "native rows/s" in line and "interlace rows/s" in line:
            head = [c.strip() for c in line.strip("|").split("|")]
            n_col, i_col = head.index("native rows/s"), head.index("interlace rows/s")
            out: dict[str, tuple[float, float]] = {}
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip("|").split("|")]
                num = [float(re.sub(r"[^0-9.]", "", cells[c])) for c in (n_col, i_col)]
                out[cells[0]] = (num[0], num[1])
            return out
    msg = "no throughput table in the results file"
    raise ValueError(msg)


def run(python: str, tree: Path, script: str, args: list[str], work: Path) -> dict[str, tuple[float, float]]:
    """Run one benchmark script of one build; return its throughput table."""
    out = work / f"{script}-{time.monotonic_ns()}.md"
    cmd = [python, str(tree / "bench" / script), *args, "--out", str(out)]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=tree, check=True, env={**os.environ, "PYSPARK_PYTHON": python})
    return throughput(out.read_text())


def main() -> None:
    """Run the rounds and write the report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a-python", required=True)
    ap.add_argument("--a-tree", required=True, type=Path)
    ap.add_argument("--b-python", required=True)
    ap.add_argument("--b-tree", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    started = time.monotonic()
    builds = {"A": (args.a_python, args.a_tree.resolve()), "B": (args.b_python, args.b_tree.resolve())}
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            order = ["A", "B"] if rnd % 2 == 0 else ["B", "A"]
            for script, extra in (("join_bench.py", JOIN_ARGS), ("window_bench.py", WINDOW_ARGS)):
                for build in order:
                    python, tree = builds[build]
                    for wl, figures in run(python, tree, script, extra, Path(tmp)).items():
                        runs.setdefault((wl, build), []).append(figures)
    workloads = list(dict.fromkeys(wl for wl, _ in runs))
    rows = []
    for wl in workloads:
        a, b = runs[(wl, "A")], runs[(wl, "B")]
        best_a, best_b = max(x[1] for x in a), max(x[1] for x in b)
        ratio_a = ", ".join(f"{i / n:.2f}x" for n, i in a)
        ratio_b = ", ".join(f"{i / n:.2f}x" for n, i in b)
        rows.append(f"| {wl} | {best_a:,.0f} | {best_b:,.0f} | **{best_b / best_a:.2f}** "
                    f"| {ratio_a} | {ratio_b} |")
    cmd = " ".join(sys.argv)
    args.out.write_text(
        f"# A/B of two builds — {dt.date.today()}\n\nCommand: `{cmd}`\n\n"
        f"- A: `{args.a_tree}` ({args.a_python}); B: `{args.b_tree}` ({args.b_python})\n"
        f"- {args.rounds} rounds, builds alternated (A first in even rounds); per run: "
        f"join_bench {' '.join(JOIN_ARGS)!r}, window_bench {' '.join(WINDOW_ARGS)!r}\n"
        f"- wall time: {time.monotonic() - started:.0f} s\n\n"
        "| workload | A interlace rows/s (best) | B interlace rows/s (best) | B / A "
        "| A: interlace / native per run | B: interlace / native per run |\n"
        "|---|---:|---:|---:|---|---|\n" + "\n".join(rows) + "\n"
    )
    print(args.out.read_text())


if __name__ == "__main__":
    main()
