"""``bench/run.py throughput``: run the registry's workloads on each state store, write the report.

For every state store and workload: one verification run per engine collects the whole
output, which the workload checks against its oracle and the other engines (extras: the
floor emits nothing, other key_groups and shim variants exactly interlace's rows); then
``--repeat`` timed runs, engines interleaved (native, interlace, native, ...), each with a
count + checksum sink that must agree between repeats and, where the engines compute the
same thing, between engines. Under RocksDB a native stream-stream join runs once per join
state format. The fastest run of each cell is reported. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import report
from harness import run as hrun
from harness import spark as hspark
from harness.compare import Check, auto_normalize, same_rows
from harness.registry import REGISTRY, Context, Engine, Size, Workload
from harness.workloads import load, select

HERE = Path(__file__).resolve().parent.parent
#: A cell whose run took longer is not repeated; a verification run that long is the cell's
#: only run (native on 100 hot keys under RocksDB join state formats 2 and 3: 13-15 minutes
#: on 2 cores, 2026-11-26).
LONG_RUN_S = 180.0
DEPRECATED_JOIN_FORMATS = (1,)


#: The command (``bench/run.py`` with no subcommand runs it too).
PROG = "bench/run.py throughput"


def parser(prog: str = PROG, default_workloads: str = "*") -> argparse.ArgumentParser:
    """The command line (``bench/run.py throughput --help``; ``state sweep`` with its default
    ``workloads``)."""
    ap = argparse.ArgumentParser(
        prog=prog, description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="workloads: " + ", ".join(load()))
    ap.add_argument("--workloads", default=default_workloads,
                    help="comma list of names, globs or families (join, window, table); "
                         "default: all")
    ap.add_argument("--stores", default="hdfs,rocksdb", help="comma list of hdfs, rocksdb")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: each workload's tiny size, one timed run; not numbers")
    ap.add_argument("--rows", type=int, help="rows per micro-batch (per side) for every workload")
    ap.add_argument("--batches", type=int, help="data micro-batches for every workload")
    ap.add_argument("--keys", type=int, help="distinct keys for every workload")
    ap.add_argument("--repeat", type=int, help="timed runs per cell (3; --quick: 1)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="Spark setting for the session (repeatable; every engine)")
    ap.add_argument("--join-formats", default="auto",
                    help="join state formats the natives run with under RocksDB: 'auto' (each "
                         "one a tiny probe query accepts, but deprecated 1) or a comma list")
    ap.add_argument("--key-groups", type=int, help="interlace key_groups (default: per family)")
    ap.add_argument("--sweep", default="", help="more interlace key_groups to time, e.g. 8,32")
    ap.add_argument("--floor", action="store_true",
                    help="add the no-op applyInPandasWithState floor where a workload has one")
    ap.add_argument("--engines", default="",
                    help="comma list: run only these engines (e.g. 'interlace' for an A/B/A of "
                         "a setting whose native run takes minutes); default all")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME",
                    help="join shim variant from bench/harness/join_variants.py beside interlace")
    ap.add_argument("--native-rsd", type=float, help="native approx_count_distinct rsd (0.05)")
    ap.add_argument("--resolution-us", type=int, default=1,
                    help="window data: round event times down to this grid (µs)")
    ap.add_argument("--seed", type=int, default=20260302)
    ap.add_argument("--label", help="results file label (default: full, quick, or the families "
                                    "and store run, e.g. window-hdfs)")
    ap.add_argument("--out-dir", help="results folder (default bench/results; --quick: temp)")
    ap.add_argument("--workdir", help="inputs and checkpoints (default: a temporary folder)")
    ap.add_argument("--jfr", metavar="DIR", help="a Java Flight Recording per run into DIR")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="run nothing: write one report of these results files, parts of one "
                         "benchmark split by --workloads or --stores (e.g. the full run over "
                         "two sittings); label: full when together they cover everything")
    return ap


def default_label(workloads: list[Workload], stores: list[str], quick: bool) -> str:
    """``quick``, ``full`` (every workload on every store), else the families and the store."""
    if quick:
        return "quick"
    full = {n for n, w in load().items() if w.in_full}
    if full <= {w.name for w in workloads} and len(stores) == len(hspark.STORES):
        return "full"
    parts = list(dict.fromkeys(w.family for w in workloads))
    return "-".join(parts + (stores if len(stores) < len(hspark.STORES) else []))


def plan_engines(w: Workload, options: dict[str, Any], formats: list[int] | None,
                 sweep: list[int], key_groups: int) -> list[Engine]:
    """The workload's engines on one store: stream-join natives once per join state format
    in ``formats`` (``None``: the default, unnamed), interlace at each ``sweep`` key_groups;
    only those named in ``options["engines"]`` when it is given. Every engine gets a
    verification run (which also starts its Python workers)."""
    out: list[Engine] = []
    for e in w.engines(options):
        if e.role == "native" and e.stream_join and formats:
            out += [dataclasses.replace(e, name=f"{e.name}@f{f}",
                                        conf={**e.conf, hspark.JOIN_FORMAT_KEY: str(f)})
                    for f in formats]
        else:
            out.append(e)
        if e.name == "interlace":
            out += [dataclasses.replace(e, name=f"interlace@kg{k}", key_groups=k)
                    for k in sweep if k != key_groups]
    only = options.get("engines")
    return [e for e in out if e.name.partition("@")[0] in only] if only else out


def join_formats(spark: Any, arg: str, stores: list[str], work: Path,
                 probe: bool) -> tuple[dict[str, dict[int, str]], list[int]]:
    """The probe's answer per store and format, and the formats RocksDB's natives run with."""
    found: dict[str, dict[int, str]] = {}
    if probe:
        for store in stores:
            found[store] = hspark.probe_join_formats(spark, store, work)
            print(f"[formats] {store}: " + "; ".join(f"{f}: {a}" for f, a in
                                                      found[store].items()), flush=True)
    if arg != "auto":
        return found, [int(x) for x in arg.split(",") if x.strip()]
    ok = found.get("rocksdb", {})
    return found, [f for f, a in ok.items() if a == "ok" and f not in DEPRECATED_JOIN_FORMATS]


def main(argv: list[str] | None = None, prog: str = PROG, default_workloads: str = "*") -> int:
    """Run the benchmark; 0 when every check held."""
    argv = sys.argv[1:] if argv is None else argv
    ap = parser(prog, default_workloads)
    args = ap.parse_args(argv)
    if args.list:
        for w in load().values():
            print(f"{w.name:18s} {w.family:7s} {w.description}")
        return 0
    if args.merge:
        return _merge(args, [*prog.split(), *argv])
    try:
        workloads = select([p.strip() for p in args.workloads.split(",") if p.strip()])
        conf = hspark.parse_conf(args.conf)
    except ValueError as exc:
        ap.error(str(exc))
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    if not stores or any(s not in hspark.STORES for s in stores):
        ap.error(f"--stores: choose from {', '.join(hspark.STORES)} (got {args.stores!r})")
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    size = Size(args.rows, args.batches, args.keys, args.quick, args.seed, args.resolution_us)
    options = {"floor": args.floor, "variants": args.variant, "native_rsd": args.native_rsd,
               "engines": {e.strip() for e in args.engines.split(",") if e.strip()}}
    sweep = [int(x) for x in args.sweep.split(",") if x.strip()]
    label = args.label or default_label(workloads, stores, args.quick)
    out_dir = Path(args.out_dir) if args.out_dir else (
        Path(tempfile.gettempdir()) / "interlace-bench" if args.quick else HERE / "results")
    exe = sys.executable
    exe = os.path.relpath(exe) if exe.startswith(os.getcwd()) else exe
    command = shlex.join([exe, *prog.split(), *argv])
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="interlace-bench-"))
    os.environ.setdefault("INTERLACE_BENCH_TIMING_DIR", str(work / "timing"))  # variant timed
    t_start = time.perf_counter()
    try:
        return _run(args, workloads, stores, conf, repeat, size, options, sweep, label, out_dir,
                    command, work, t_start)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


def _merge(args: Any, command: list[str]) -> int:
    """``--merge``: one report (markdown + JSON) of parts' results files."""
    raws = [json.loads(Path(f).read_text()) for f in args.merge]
    registry = load()
    try:
        workloads = [registry[w["name"]] for raw in raws for w in raw["workloads"]]
        stores = sorted({s for raw in raws for s in raw["stores"]})
        label = args.label or default_label(list({w.name: w for w in workloads}.values()),
                                            stores, any(raw["quick"] for raw in raws))
        meta, runs, checks, failures = report.merge(
            raws, label, shlex.join(command))
    except (KeyError, ValueError) as exc:
        parser().error(f"--merge: {exc}")
    table = report.cells(runs)
    md = report.render(meta, table, checks, failures)
    out_dir = Path(args.out_dir) if args.out_dir else HERE / "results"
    path = report.write(out_dir, f"{meta['date']}-{label}", md,
                        report.to_json(meta, runs, checks, failures))
    print(md)
    print(f"[written] {path} (+ .json)")
    return report.exit_status(failures)


def _run(args: Any, workloads: list[Workload], stores: list[str], conf: dict[str, str],
         repeat: int, size: Size, options: dict[str, Any], sweep: list[int], label: str,
         out_dir: Path, command: str, work: Path, t_start: float) -> int:
    datasets = {}
    for w in workloads:
        data = w.generate(size)
        w.write(data, work / "in" / w.name)
        datasets[w.name] = data
        print(f"[data] {w.name}: {data.input_rows:,} input rows, {data.data_batches} data "
              "micro-batches", flush=True)
    spark = hspark.open_session(conf)
    print("[spark] session up", flush=True)
    default_format = spark.conf.get(hspark.JOIN_FORMAT_KEY, "2")
    needs_formats = any(e.stream_join for w in workloads
                        for e in plan_engines(w, options, None, [], 0))
    found, rocks_formats = join_formats(spark, args.join_formats, stores, work,
                                        probe=needs_formats and args.join_formats == "auto")
    bench = Bench(spark, work, options, Path(args.jfr) if args.jfr else None)
    checks: dict[tuple[str, str], list[Check]] = {}
    for store in stores:
        hspark.use_store(spark, store)
        for w in workloads:
            data = datasets[w.name]
            kg = args.key_groups or w.default_key_groups()
            engines = plan_engines(w, options, rocks_formats if store == "rocksdb" else None,
                                   sweep, kg)
            frames: dict[str, Any] = {}
            timed: dict[str, list[hrun.RunResult]] = {}
            for e in engines:
                r, frames[e.name] = bench.once(store, w, data, kg, e, True)
                if r.seconds > LONG_RUN_S:  # minutes-long: its verification run is its timing
                    timed[e.name] = [dataclasses.replace(r, kind="timed", extra={
                        **r.extra, "timed_by_verification_run": True})]
                    bench.runs.append(timed[e.name][0])
            roles = {e.name: e.role for e in engines}
            emitting = {e.name for e in engines if e.floor_emits}
            checks[(w.name, store)] = cs = _verify(w, data, frames, options, roles, emitting)
            for c in cs:
                print(f"[check] {store} {w.name}: {c.what}: "
                      f"{'ok' if c.ok else 'by design' if c.by_design else 'FAILED'} — {c.detail}",
                      flush=True)
            bench.failures += [f"{store}/{w.name}: {c.what}: {c.detail}" for c in cs if c.failed]
            verify_rows = {e: len(f) for e, f in frames.items()}
            del frames
            for _ in range(repeat):
                for e in engines:  # engines interleaved: outside load hits all alike
                    done = timed.setdefault(e.name, [])
                    if done and min(r.seconds for r in done) > LONG_RUN_S:
                        continue  # minutes-long runs are not repeated
                    done.append(bench.once(store, w, data, kg, e, False)[0])
            bench.failures += timed_failures(f"{store}/{w.name}", engines, timed, verify_rows)
    spark.stop()
    meta = {
        "date": dt.date.today().isoformat(), "label": label, "quick": args.quick,
        "command": command, "versions": hspark.versions(), "conf": conf, "stores": stores,
        "repeat": repeat, "total_s": time.perf_counter() - t_start,
        "join_formats": found, "format_runs": "RocksDB: " + (
            ", ".join(map(str, rocks_formats)) or "none"),
        "default_join_format": default_format,
        "workloads": [{"name": w.name, "description": w.description,
                       "input_rows": datasets[w.name].input_rows,
                       "data_batches": datasets[w.name].data_batches,
                       "key_groups": args.key_groups or w.default_key_groups()}
                      for w in workloads],
        "options": {**options, "sweep": sweep, "size": dataclasses.asdict(size)},
    }
    runs, failures = bench.runs, bench.failures
    table = report.cells(runs)
    md = report.render(meta, table, checks, failures)
    stem = f"{meta['date']}-{label}"
    path = report.write(out_dir, stem, md, report.to_json(meta, runs, checks, failures))
    print()
    print(md)
    print(f"[written] {path} (+ .json)")
    return report.exit_status(failures)


@dataclasses.dataclass
class Bench:
    """The session and what the runs so far gave (every run, every failure)."""

    spark: Any
    work: Path
    options: dict[str, Any]
    jfr: Path | None
    runs: list[hrun.RunResult] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)

    def once(self, store: str, w: Workload, data: Any, key_groups: int, e: Engine,
             collect: bool) -> tuple[hrun.RunResult, Any]:
        """Run engine ``e`` on ``w`` once (``collect``: a verification run)."""
        ctx = Context(self.spark, self.work / "in" / w.name, data, e.key_groups or key_groups,
                      self.options)

        def cleanup() -> None:
            for f in ctx.cleanups:
                f()

        q = hrun.Query(lambda: e.build(ctx), e.columns, w.checksum, w.sink_filter, e.conf,
                       e.before, e.after, cleanup)
        r, frame = hrun.run_query(
            self.spark, q, workload=w.name, store=store, engine=e.name, role=e.role,
            input_rows=data.input_rows, data_batches=data.data_batches,
            ckpt_root=self.work / "checkpoints", collect=collect, jfr_dir=self.jfr)
        self.runs.append(r)
        _held(w, data, r)
        st = r.last_data_state
        print(f"[{r.kind}] {store} {w.name} {e.name}: {r.seconds:.1f} s, "
              f"{r.rows_per_s:,.0f} rows/s, out={r.out_rows:,}, "
              f"state={st['memoryUsedBytes']:,} B / {st['numRowsTotal']:,} rows, "
              f"other load {r.foreign:.2f} cores"
              + (f", conf {r.extra['conf']}" if r.extra.get("conf") else ""), flush=True)
        if r.role == "interlace" and r.dropped_by_watermark:
            self.failures.append(f"{store}/{w.name}/{e.name}: {r.dropped_by_watermark} rows "
                                 "dropped by the watermark")
        return r, frame


def _verify(w: Workload, data: Any, frames: dict[str, Any], options: dict[str, Any],
            roles: dict[str, str], emitting: set[str] | None = None) -> list[Check]:
    """The workload's checks of the natives and interlace (once per join state format when
    natives ran under several), then the extras: the floor emits nothing (a floor in
    ``emitting``: some rows), other key_groups and shim variants emit exactly interlace's
    output."""
    groups: dict[str, dict[str, Any]] = {}
    extras = {}
    for name, frame in frames.items():
        if roles[name] == "floor" or (roles[name] == "interlace" and name != "interlace"):
            extras[name] = frame
            continue
        base, _, fmt = name.partition("@f")
        groups.setdefault(fmt, {})[base] = frame
    plain = groups.pop("", {})
    out = []
    if not groups:
        out = w.verify(data, plain, options)
    for fmt, natives in groups.items():
        for c in w.verify(data, {**plain, **natives}, options):
            out.append(dataclasses.replace(c, what=f"[join format {fmt}] {c.what}"))
    for name, frame in extras.items():
        if roles[name] == "floor" and name in (emitting or set()):
            out.append(Check(f"{name}: emits rows", len(frame) > 0, f"{len(frame):,} rows"))
        elif roles[name] == "floor":
            out.append(Check(f"{name}: emits nothing", len(frame) == 0, f"{len(frame):,} rows"))
        elif "interlace" in frames:
            out.append(same_rows(auto_normalize(frames["interlace"]), auto_normalize(frame),
                                 f"interlace vs {name}: whole output"))
    return out


def timed_failures(where: str, engines: list[Engine], timed: dict[str, list[hrun.RunResult]],
                   verify_rows: dict[str, int]) -> list[str]:
    """Timed runs that disagree: between repeats, with the verification run's row count, or
    (engines that compute interlace's answer) with interlace's checksum; the floor emits
    nothing."""
    out = []
    # A run without a checksum is a long cell's verification run (its output was compared).
    sums = {n: {(r.out_rows, r.checksum) for r in rs if r.checksum is not None}
            for n, rs in timed.items()}
    for n, got in sums.items():
        if len(got) > 1:
            out.append(f"{where}/{n}: output differs between repeats: {sorted(got)}")
    ref = sums.get("interlace")
    for e in engines:
        got = sums.get(e.name, set())
        if e.role == "floor":
            if not e.floor_emits and any(n for n, _ in got):
                out.append(f"{where}/{e.name}: the floor emitted rows")
            continue
        if e.name in verify_rows and any(n != verify_rows[e.name] for n, _ in got):
            out.append(f"{where}/{e.name}: timed runs emitted {sorted(n for n, _ in got)} rows, "
                       f"the verification run {verify_rows[e.name]:,}")
        if e.exact and ref and got and e.name != "interlace" and got != ref:
            out.append(f"{where}/{e.name}: count/checksum {sorted(got)} differ from "
                       f"interlace's {sorted(ref)}")
    return out


def _held(w: Workload, data: Any, r: hrun.RunResult) -> None:
    """Record the state rows the data implies after the last data micro-batch."""
    if w.held is None:
        return
    st = r.last_data_state
    key = f"held-{st['batchId']}-{st['watermark_ms']}"
    cache = getattr(data, "cache", {})
    if key not in cache:
        cache[key] = w.held(data, st["batchId"], st["watermark_ms"])
    r.extra["held"] = cache[key]


__all__ = ["REGISTRY", "default_label", "main", "parser", "plan_engines", "timed_failures"]
