"""Plot the state sweep (issue 34): ms per micro-batch against the state, per operator.

    make .venv/.bench  # matplotlib (the `bench` extra), as `make curves` does
    .venv/bin/python bench/run.py state plot bench/results/2026-11-27-state-*.json

Reads ``bench/run.py`` result files of the ``state`` family (``table-st-state``,
``window-session-state``, ``join-state``) and ``bench/run.py state fk-sweep``'s,
takes each timed run's figure (the median ``triggerExecution`` of its data micro-batches
after the first, as the harness does) at its ``--keys`` (right keys), and draws one panel
per workload, one line per (engine, store), log-log. Files whose label or name ends in
``-before``, or whose label ends in ``-interlace`` (A/B and cold-JVM runs), are left out;
where two files give the same point, the later one on the command line wins. Writes
``docs/performance-state.png`` (``--out``) and prints the points.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

TITLES = {"table-st-state": "stream-table join (table keys)",
          "window-session-state": "session windows (open sessions)",
          "join-state": "stream-stream join (rows buffered per side)",
          "fk-state": "foreign-key join (right-table keys)"}


def points(files: list[Path]) -> dict[tuple[str, str, str], dict[int, float]]:
    """``(workload, engine, store) -> {keys: ms per micro-batch}``."""
    out: dict[tuple[str, str, str], dict[int, float]] = {}
    for f in files:
        d = json.loads(f.read_text())
        if "options" not in d:  # bench/run.py state fk-sweep's runs
            for r in d["runs"]:
                key = ("fk-state", f"interlace, {r['key_groups']} key groups", r["store"])
                out.setdefault(key, {})[int(r["right_keys"])] = float(r["median_ms"])
            continue
        if (str(d.get("label", "")).endswith(("-before", "-interlace"))
                or f.stem.endswith("-before")):
            continue
        keys = int(d["options"]["size"]["keys"])
        for r in d["runs"]:
            if r["kind"] == "verify" or r["workload"] not in TITLES:
                continue
            data = [b for b in r["batches"] if int(b.get("numInputRows") or 0) > 0]
            times = [b["durationMs"]["triggerExecution"] for b in data[1:r["data_batches"]]]
            if times:
                key = (r["workload"], r["engine"], r["store"])
                out.setdefault(key, {})[keys] = float(statistics.median(times))
    return out


def plot(pts: dict[tuple[str, str, str], dict[int, float]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = [w for w in TITLES if any(k[0] == w for k in pts)]
    cols = min(len(workloads), 2)
    rows = (len(workloads) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax in axes.flat[len(workloads):]:
        ax.set_visible(False)
    for ax, w in zip(axes.flat, workloads, strict=False):
        for (wl, engine, store), xy in sorted(pts.items()):
            if wl != w:
                continue
            xs = sorted(xy)
            style = "-" if engine.startswith("interlace") else "--"
            ax.plot(xs, [xy[x] for x in xs], style, marker="o",
                    label=f"{engine}, {store}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(TITLES[w], fontsize=10)
        ax.set_xlabel("state (keys); change fixed per micro-batch")
        ax.set_ylabel("ms per micro-batch")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def parser() -> argparse.ArgumentParser:
    """``bench/run.py state plot --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py state plot", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parents[3] / "docs"
                    / "performance-state.png")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    pts = points(args.files)
    for (w, e, s), xy in sorted(pts.items()):
        print(w, e, s, {k: round(v) for k, v in sorted(xy.items())})
    plot(pts, args.out)
    print(f"[written] {args.out}")
    return 0
