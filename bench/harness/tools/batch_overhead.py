"""Fixed cost per micro-batch: Spark's native window aggregation vs the no-op floor.

Run (from the repository root)::

    /work/venv/bin/python bench/run.py batch-overhead
    /work/venv/bin/python bench/run.py batch-overhead --conf KEY=VALUE ...  # checkpoint settings
    /work/venv/bin/python bench/run.py batch-overhead --count-process-starts  # + a JFR recording

Two engines of the window-tumbling workload (bench/harness/windows.py: native tumbling
aggregation, and the "floor" of bench/harness/floor.py: a no-op ``applyInPandasWithState``
function on interlace's prepared input), run in one session and interleaved, on two inputs
written with ``harness.windows.generate``: ``--small-batches``
micro-batches of 1 row (what a micro-batch costs however few rows it holds) and
``--batches`` of ``--rows`` rows. Prints the median ``addBatch`` time (ms) of each
(engine, input) over ``--repeat`` runs: micro-batches with that input's row count, leaving out
each run's first micro-batch (planning) and the flush / no-data micro-batches.
With ``--count-process-starts`` the JVM records a Java Flight Recording, and the number of
``jdk.ProcessStart`` events (Hadoop's shell-outs for local files) over the whole script is
printed. docs/performance-windows.md quotes its results.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from harness import data as hdata
from harness import spark as hspark
from harness import windows as hw
from harness.floor import floor_on


def parser() -> argparse.ArgumentParser:
    """``bench/run.py batch-overhead --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py batch-overhead", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--small-batches", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--key-groups", type=int, default=8)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--count-process-starts", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    from interlace import prepare_window

    work = Path(tempfile.mkdtemp(prefix="interlace-batch-overhead-"))
    conf = hspark.parse_conf(args.conf)
    jfr = work / "run.jfr"
    if args.count_process_starts:
        conf["spark.driver.extraJavaOptions"] = (
            "-XX:StartFlightRecording=settings=profile")
    try:
        kind = hw.Kind("tumbling", duration_ms=60_000)
        inputs = {  # folder -> (rows per data micro-batch, data)
            "small": (1, hw.generate(kind, 1, args.small_batches, 10, seed=1)),
            "large": (args.rows, hw.generate(kind, args.rows, args.batches, 10_000, seed=2)),
        }
        for name, (_, data) in inputs.items():
            hw.write(data, work / "in" / name)
        spark = hspark.open_session(conf)
        add_batch: dict[tuple[str, str], list[int]] = {}
        for rep in range(args.repeat):
            for engine in ("native", "floor"):
                for name, (rows, _) in inputs.items():
                    src = hdata.read_stream(spark, work / "in" / name / "events", hw.SCHEMA)
                    out = (floor_on(prepare_window(src, hw.spec(kind, args.key_groups)))
                           if engine == "floor" else hw.native(src, kind, None))
                    ckpt = work / f"ckpt-{rep}-{engine}-{name}"
                    query = (out.writeStream
                             .foreachBatch(lambda df, _: df.selectExpr("count(*)").collect())
                             .option("checkpointLocation", str(ckpt))
                             .trigger(availableNow=True).start())
                    query.awaitTermination()
                    add_batch.setdefault((engine, name), []).extend(
                        int(p.durationMs.get("addBatch", 0)) for p in query.recentProgress[1:]
                        if p.numInputRows == rows)
        if args.count_process_starts:  # the JVM outlives spark.stop(): dump the recording now
            jvm = spark.sparkContext._jvm
            for rec in jvm.jdk.jfr.FlightRecorder.getFlightRecorder().getRecordings():
                rec.dump(jvm.java.io.File(str(jfr)).toPath())
        spark.stop()
        print(f"median addBatch (ms), first micro-batch of each run left out; conf {conf or '{}'}")
        for (engine, name), times in add_batch.items():
            label = f"{inputs[name][0]:,} row(s)"
            print(f"  {engine:6s} {label:>14s}: {statistics.median(times):6.0f}  (n={len(times)})")
        if args.count_process_starts:
            jfr_tool = Path(shutil.which("java") or "java").resolve().parent / "jfr"
            summary = subprocess.run([str(jfr_tool), "summary", str(jfr)], capture_output=True,
                                     text=True, check=True).stdout
            starts = next((line.split()[1] for line in summary.splitlines()
                           if line.strip().startswith("jdk.ProcessStart")), "0")
            runs = args.repeat * 2 * len(inputs)
            print(f"  jdk.ProcessStart events: {starts} over {runs} query runs")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0
