"""``bench/run.py curves``: how each engine's cost grows, a plot, and a fitted cost model.

Three sweeps per workload and state store, on data of the workload's own shape
(:class:`~harness.registry.Size` with ``fixed_rate``: a micro-batch of more rows covers more
event time, so the events per second, the state held and the output per input row stay the
workload's; only the number of keys changes them):

* ``rows``: rows per micro-batch (per side), at the workload's keys;
* ``keys``: distinct keys, at the workload's rows per micro-batch;
* ``key_groups``: interlace alone, at small micro-batches, for its cost per key group.

Every point runs each engine ``repeat`` times, engines interleaved (native, interlace, ...),
with the count + checksum sink of :mod:`harness.run`; engines that compute interlace's answer
must give interlace's count and checksum, and repeats must agree (the harness's usual timed
checks). A point's figure is its fastest run: the median ``triggerExecution`` of the data
micro-batches after the first (ms per micro-batch), their output rows, and the state at the
last data micro-batch (``memoryUsedBytes``; RocksDB: its SST files) beside the state rows
the data implies.

The cost model is a least-squares fit per engine over the ``rows`` and ``keys`` points:
``ms per micro-batch = fixed + per_row x input rows + per_out x output rows``; interlace's
``per_group`` is the slope over the ``key_groups`` points.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from harness import report
from harness import spark as hspark
from harness.cli import HERE, Bench, plan_engines, timed_failures
from harness.registry import Size, Workload
from harness.run import RunResult
from harness.workloads import select

ROOT = HERE.parent  # the repository (HERE is bench/)
DEFAULT_WORKLOADS = "join-10k,window-tumbling,window-hopping,window-session,table-st10k"
AXES = ("rows", "keys", "key_groups")


@dataclasses.dataclass
class Point:
    """One engine at one point of one sweep: its fastest run's figures."""

    store: str
    workload: str
    axis: str
    value: int
    engine: str
    role: str
    rows: int  # input rows per data micro-batch (both sides)
    keys: int
    key_groups: int
    batch_ms: float
    out_rows: float  # output rows per timed data micro-batch
    state_bytes: int
    held: int | None
    seconds: float
    cpu_s: float
    runs: int


def parser() -> argparse.ArgumentParser:
    """The command line (``bench/run.py curves --help``)."""
    ap = argparse.ArgumentParser(prog="bench/run.py curves", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS)
    ap.add_argument("--stores", default="hdfs", help="comma list of hdfs, rocksdb")
    ap.add_argument("--rows", default="10000,30000,100000,300000,1000000",
                    help="rows per micro-batch (per side) of the rows sweep")
    ap.add_argument("--keys", default="1000,10000,100000,1000000", help="the keys sweep")
    ap.add_argument("--key-groups", default="2,8,32,128", help="interlace's key_groups sweep")
    ap.add_argument("--key-groups-rows", type=int, default=10_000,
                    help="rows per micro-batch of the key_groups sweep")
    ap.add_argument("--batches", type=int, default=3, help="data micro-batches per run")
    ap.add_argument("--repeat", type=int, default=2,
                    help="runs per engine and point (a point whose run took over 20 s: 1)")
    ap.add_argument("--seed", type=int, default=20260302)
    ap.add_argument("--driver-memory", default="8g",
                    help="the local Spark JVM's heap (local_session's 2g ran out of memory on "
                         "native hopping windows at 1M rows per micro-batch: their state is "
                         "~190 MB per 100k rows)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="Spark setting for the session (repeatable; every engine)")
    ap.add_argument("--resume", metavar="JSON",
                    help="a points file of an earlier run (<out>.points.json, written after "
                         "every point): its points are kept, not run again")
    ap.add_argument("--report-only", action="store_true",
                    help="with --resume: write the report and the plot of those points, run "
                         "nothing (e.g. after an interrupted run)")
    ap.add_argument("--floor", action="store_true",
                    help="add the no-op applyInPandasWithState floor (harness/floor.py) to the "
                         "rows and keys sweeps of the workloads that define it")
    ap.add_argument("--jfr", metavar="DIR",
                    help="a Java Flight Recording per run into DIR (read by bench/run.py profile "
                         "jfr)")
    ap.add_argument("--label", default="curves")
    ap.add_argument("--out-dir", help="results folder (default bench/results)")
    ap.add_argument("--plot", default=str(ROOT / "docs" / "performance-curves.png"),
                    help="the PNG to draw ('' for none; needs matplotlib: pip install "
                         "'.[bench]')")
    return ap


def ints(arg: str) -> list[int]:
    """``"1,2"`` -> ``[1, 2]``."""
    return [int(x) for x in arg.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    """Run the sweeps, write the report and the plot; 0 when every check held."""
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    workloads = select([p.strip() for p in args.workloads.split(",") if p.strip()])
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    if args.plot:
        import matplotlib  # noqa: F401 - fail before hours of runs, not after
    out_dir = Path(args.out_dir) if args.out_dir else HERE / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{dt.date.today().isoformat()}-{args.label}"
    saved = stem.with_suffix(".points.json")
    points: list[Point] = []
    failures: list[str] = []
    if args.resume:
        old = json.loads(Path(args.resume).read_text())
        points, failures = [Point(**p) for p in old["points"]], old["failures"]
        print(f"[resume] {len(points)} points from {args.resume}", flush=True)
    if args.report_only:
        return _report(args, argv, points, failures, stem, total_s=None)
    work = Path(tempfile.mkdtemp(prefix="interlace-curves-"))
    t0 = time.perf_counter()
    spark = hspark.open_session({"spark.driver.memory": args.driver_memory,
                                 **hspark.parse_conf(args.conf)})
    bench = Bench(spark, work, {"floor": args.floor, "variants": [], "native_rsd": None},
                  Path(args.jfr) if args.jfr else None)
    bench.failures = failures

    def keep(new: list[Point]) -> None:  # after every point: a crash loses one point at most
        points.extend(new)
        saved.write_text(json.dumps({"points": [dataclasses.asdict(p) for p in points],
                                     "failures": bench.failures}, indent=1))

    try:
        for store in stores:
            hspark.use_store(spark, store)
            for w in workloads:
                sweep(bench, store, w, args, keep, {(p.store, p.workload, p.axis, p.value)
                                                    for p in points})
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return _report(args, argv, points, bench.failures, stem,
                   total_s=round(time.perf_counter() - t0, 1), runs=bench.runs)


def _report(args: Any, argv: list[str], points: list[Point], failures: list[str], stem: Path,
            total_s: float | None, runs: list[RunResult] | None = None) -> int:
    """Write the markdown and JSON reports and the plot; 1 if a check failed."""
    meta = {"date": dt.date.today().isoformat(), "command": " ".join(
        [".venv/bin/python", "bench/run.py", "curves", *argv]), "versions": hspark.versions(),
        "total_s": total_s, "batches": args.batches, "repeat": args.repeat,
        "driver_memory": args.driver_memory}
    models = fit(points)
    md = render(meta, points, models, failures)
    stem.with_suffix(".md").write_text(md)
    stem.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "points": [dataclasses.asdict(p) for p in points], "models": models,
         "failures": failures, "runs": [r.to_json() for r in runs or []]}, indent=1))
    if args.plot:
        draw(points, Path(args.plot))
    print(md)
    print(f"[written] {stem}.md (+ .json){', ' + args.plot if args.plot else ''}")
    return report.exit_status(failures)


def sweep(bench: Bench, store: str, w: Workload, args: Any,
          keep: Callable[[list[Point]], None], done: set[tuple[str, str, str, int]]) -> None:
    """The three sweeps of ``w`` on ``store`` (a warm-up run per engine first); each point's
    figures go to ``keep``; points in ``done`` (store, workload, axis, value) are skipped."""
    kg0 = w.default_key_groups()
    plan: list[tuple[str, int, Size, int]] = [
        ("rows", r, Size(rows=r, batches=args.batches, seed=args.seed, fixed_rate=True), kg0)
        for r in ints(args.rows)]
    plan += [("keys", k, Size(keys=k, batches=args.batches, seed=args.seed, fixed_rate=True),
              kg0) for k in ints(args.keys)]
    plan += [("key_groups", g, Size(rows=args.key_groups_rows, batches=args.batches,
                                    seed=args.seed, fixed_rate=True), g)
             for g in ints(args.key_groups)]
    warm = True
    measured: dict[tuple[int, int, int], list[Point]] = {}
    for axis, value, size, kg in plan:
        if (store, w.name, axis, value) in done:
            continue
        data = w.generate(size)
        same = (data.input_rows, size.keys or _keys(data), kg)
        if same in measured:  # e.g. the keys sweep's default keys = the rows sweep's default
            keep([dataclasses.replace(p, axis=axis, value=value) for p in measured[same]
                  if p.role == "interlace" or axis != "key_groups"])
            continue
        folder = f"{w.name}-{axis}-{value}"
        w.write(data, bench.work / "in" / folder)
        engines = [e for e in plan_engines(w, bench.options, None, [], kg)
                   if e.role == "interlace" or axis != "key_groups"]
        named = dataclasses.replace(w, name=folder)  # inputs and checkpoints per point
        if warm:  # JIT and Python workers, charged to no point
            for e in engines:
                bench.once(store, named, data, kg, e, False)
            warm = False
        timed: dict[str, list[RunResult]] = {}
        for i in range(args.repeat):
            for e in engines:
                runs = timed.setdefault(e.name, [])
                if i and min(r.seconds for r in runs) > 20:
                    continue
                runs.append(bench.once(store, named, data, kg, e, False)[0])
        bench.failures += timed_failures(f"{store}/{folder}", engines, timed, {})
        rows = data.input_rows // max(data.data_batches, 1)
        measured[same] = [point(store, w.name, axis, value, e.name, e.role, rows, same[1], kg,
                                timed[e.name]) for e in engines]
        keep(measured[same])
        del data
        shutil.rmtree(bench.work / "in" / folder, ignore_errors=True)


def _keys(data: Any) -> int:
    """The data's key count (joins keep it on the shape)."""
    for owner in (data, getattr(data, "shape", None)):
        if owner is not None and isinstance(getattr(owner, "keys", None), int):
            return int(owner.keys)
    return 0


def point(store: str, workload: str, axis: str, value: int, engine: str, role: str,
          rows: int, keys: int, kg: int, runs: list[RunResult]) -> Point:
    """The fastest of ``runs`` as a :class:`Point`."""
    r = min(runs, key=lambda x: x.seconds)
    per = {int(b): n for b, n in r.extra.get("out_per_batch", {}).items()}
    return Point(store, workload, axis, value, engine, role, rows, keys, kg, r.batch_ms,
                 statistics.mean(per.get(b, 0) for b in r.steady_batches), r.state_bytes,
                 r.extra.get("held"),
                 round(r.seconds, 2), round(statistics.median(x.own_cpu for x in runs), 2),
                 len(runs))


def fit(points: list[Point]) -> list[dict[str, Any]]:
    """The cost model per (store, workload, engine); see the module docstring."""
    out = []
    groups: dict[tuple[str, str, str], list[Point]] = {}
    for p in points:
        groups.setdefault((p.store, p.workload, p.engine), []).append(p)
    for (store, workload, engine), ps in groups.items():
        xy = [p for p in ps if p.axis != "key_groups"]
        m: dict[str, Any] = {"store": store, "workload": workload, "engine": engine}
        if len(xy) >= 3:
            y = np.array([p.batch_ms for p in xy])
            full = np.array([[1.0, p.rows, p.out_rows] for p in xy])
            coef, *_ = np.linalg.lstsq(full, y, rcond=None)
            a = full
            scaled = full / np.maximum(np.abs(full).max(axis=0), 1e-12)
            if np.any(coef < 0) or np.linalg.matrix_rank(scaled, tol=1e-3) < 3:
                # Output rows proportional to the input rows (or none): rows alone.
                a = full[:, :2]
                coef, *_ = np.linalg.lstsq(a, y, rcond=None)
            pred = a @ coef
            ss = float(((y - y.mean()) ** 2).sum())
            m.update(fixed_ms=float(coef[0]), us_per_row=float(coef[1] * 1000),
                     r2=1 - float(((y - pred) ** 2).sum()) / ss if ss else float("nan"),
                     worst_miss=float(np.max(np.abs(y - pred) / y)))
            if len(coef) == 3:
                m["us_per_out"] = float(coef[2] * 1000)
        kg = sorted((p.key_groups, p.batch_ms) for p in ps if p.axis == "key_groups")
        if len(kg) >= 2:
            g, t = np.array(kg, dtype=float).T
            m["ms_per_group"] = float(np.polyfit(g, t, 1)[0])
        out.append(m)
    return out


def render(meta: dict[str, Any], points: list[Point], models: list[dict[str, Any]],
           failures: list[str]) -> str:
    """The markdown report."""
    lines = [f"# Cost curves, {meta['date']}", "", f"Command: `{meta['command']}`", "",
             (f"Total {meta['total_s']:.0f} s; " if meta.get("total_s") else "")
             + f"{meta['batches']} data micro-batches per run; "
             f"fastest of up to {meta['repeat']} runs per point (ms per micro-batch: median "
             "`triggerExecution` of the data micro-batches after the first). Versions: "
             + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()), "",
             "Checks (interlace's count and checksum = native's, repeats agree): "
             + ("**all held**" if not failures else "**FAILED**: " + "; ".join(failures)), ""]
    for axis in AXES:
        lines += [f"## Sweep: {axis}", "",
                  "| store | workload | " + axis + " | engine | ms / micro-batch | native / "
                  "engine | output rows / micro-batch | state bytes | state rows | CPU-s |",
                  "|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
        for p in points:
            if p.axis != axis:
                continue
            nat = [q for q in points if q.role == "native" and (q.store, q.workload, q.axis,
                                                                 q.value) ==
                   (p.store, p.workload, p.axis, p.value)]
            ratio = f"{nat[0].batch_ms / p.batch_ms:.2f}x" if nat and p.role != "native" else ""
            lines.append(f"| {p.store} | {p.workload} | {p.value:,} | {p.engine} | "
                         f"{p.batch_ms:,.0f} | {ratio} | {p.out_rows:,.0f} | "
                         f"{p.state_bytes:,} | {'' if p.held is None else f'{p.held:,}'} | "
                         f"{p.cpu_s:.1f} |")
        lines.append("")
    lines += ["## Cost model", "",
              "`ms per micro-batch = fixed + per_row x input rows + per_out x output rows`, "
              "least squares over the rows and keys sweeps (without the output term where "
              "it would come out negative: output proportional to the input, or none in "
              "the timed micro-batches); per key group: slope over the key_groups sweep.", "",
              "| store | workload | engine | fixed ms | µs / input row | µs / output row | "
              "ms / key group | R² | worst miss |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for m in models:
        def f(k: str, fmt: str, m: dict[str, Any] = m) -> str:
            return format(m[k], fmt) if k in m else ""
        lines.append(f"| {m['store']} | {m['workload']} | {m['engine']} | "
                     f"{f('fixed_ms', ',.0f')} | {f('us_per_row', '.2f')} | "
                     f"{f('us_per_out', '.2f')} | {f('ms_per_group', '.2f')} | "
                     f"{f('r2', '.3f')} | {f('worst_miss', '.0%')} |")
    return "\n".join(lines) + "\n"


def main_engines(points: list[Point], workload: str) -> tuple[str, str]:
    """interlace and the workload's first native engine (the one ratios are taken to)."""
    native = next((p.engine for p in points if p.workload == workload and p.role == "native"),
                  "native")
    return "interlace", native


def draw(points: list[Point], path: Path) -> None:
    """ms per micro-batch against rows and keys, and state bytes against state rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    names = list(dict.fromkeys(p.workload for p in points))
    colours = {n: plt.get_cmap("tab10")(i) for i, n in enumerate(names)}
    stores = list(dict.fromkeys(p.store for p in points))
    for ax, axis, xlabel in ((axes[0], "rows", "input rows per micro-batch"),
                             (axes[1], "keys", "distinct keys")):
        for (store, name, role) in sorted({(p.store, p.workload, p.role) for p in points}):
            ps = sorted((p for p in points if (p.store, p.workload, p.role, p.axis) ==
                         (store, name, role, axis) and p.engine in main_engines(points, name)),
                        key=lambda p: p.value)
            if not ps:
                continue
            ax.plot([p.rows if axis == "rows" else p.value for p in ps],
                    [p.batch_ms for p in ps], color=colours[name],
                    ls="-" if role == "interlace" else "--",
                    marker="o" if stores.index(store) == 0 else "s",
                    label=f"{name} {role}" + (f" ({store})" if len(stores) > 1 else ""))
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="ms per micro-batch",
               title=f"time per micro-batch vs {axis}")
        ax.grid(True, which="both", alpha=0.3)
        if not any(p.axis == axis for p in points):
            ax.text(0.5, 0.5, f"no {axis} sweep in these points", ha="center",
                    transform=ax.transAxes)
    ax = axes[2]
    for (store, name, role) in {(p.store, p.workload, p.role) for p in points}:
        ps = sorted((p for p in points if (p.store, p.workload, p.role) == (store, name, role)
                     and p.engine in main_engines(points, name) and p.held and p.state_bytes
                     and p.axis != "key_groups"),
                    key=lambda p: p.held or 0)
        if ps:
            ax.plot([p.held for p in ps], [p.state_bytes for p in ps], color=colours[name],
                    ls="none", marker="o" if role == "interlace" else "x")
    ax.set(xscale="log", yscale="log", xlabel="state rows the data implies",
           ylabel="state bytes (last data micro-batch)",
           title="state size (o interlace, x native)")
    ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("interlace (solid) vs Spark native (dashed), local[2], 2 cores")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


__all__ = ["fit", "main", "point", "render"]
