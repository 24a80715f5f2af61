"""Fixed cost per micro-batch: Spark's native window aggregation vs the no-op floor.

Run (from the repository root)::

    /work/venv/bin/python bench/batch_overhead.py
    /work/venv/bin/python bench/batch_overhead.py --conf KEY=VALUE ...   # e.g. checkpoint settings
    /work/venv/bin/python bench/batch_overhead.py --count-process-starts  # + a JFR recording

Both engines of ``bench/window_bench.py`` (native tumbling aggregation, and the "floor": a
no-op ``applyInPandasWithState`` function on interlace's prepared input), run in one session
and interleaved, on two inputs written with ``window_bench.generate``: ``--small-batches``
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
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import window_bench as wb  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--small-batches", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--key-groups", type=int, default=8)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--count-process-starts", action="store_true")
    args = ap.parse_args(argv)

    from interlace import local_session

    work = Path(tempfile.mkdtemp(prefix="interlace-batch-overhead-"))
    conf = dict(c.split("=", 1) for c in args.conf)
    jfr = work / "run.jfr"
    if args.count_process_starts:
        conf["spark.driver.extraJavaOptions"] = (
            "-XX:StartFlightRecording=settings=profile")
    try:
        inputs = {  # folder -> (rows per data micro-batch, data)
            "small": (1, wb.generate(1, args.small_batches, 10, 120.0, seed=1)),
            "large": (args.rows, wb.generate(args.rows, args.batches, 10_000, 120.0, seed=2)),
        }
        for name, (_, data) in inputs.items():
            wb.write_inputs(data, work / "in" / name)
        w = wb.WORKLOADS["tumbling"]
        spark = local_session("interlace-batch-overhead", master="local[2]",
                              shuffle_partitions=4, conf=conf)
        add_batch: dict[tuple[str, str], list[int]] = {}
        for rep in range(args.repeat):
            for engine in ("native", "floor"):
                for name, (rows, _) in inputs.items():
                    src = (spark.readStream.schema(wb.spark_schema())
                           .option("maxFilesPerTrigger", 1).parquet(str(work / "in" / name)))
                    out = (wb.build_floor(src, w, args.key_groups) if engine == "floor"
                           else wb.build_native(src, w, None))
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


if __name__ == "__main__":
    sys.exit(main())
