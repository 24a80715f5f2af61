"""``interlace inspect`` at scale: read and decode a checkpoint holding ``--rows`` join rows.

Run (from the repository root)::

    .venv/bin/python bench/run.py inspect --rows 1000000

Builds a stream-stream left join whose buffers hold every row: ``--rows`` left rows (keys
``0 .. rows-1``, event times one millisecond apart) in one micro-batch, no right rows, and a
time bound of a day, so nothing is evicted. Then times :func:`interlace.inspection.
inspect_operator` on its checkpoint, ``--repeat`` times, on each state store named, and
prints the items found, the state's bytes and the seconds (the best and the median).
docs/inspect.md quotes the result. The query's own run is not timed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from harness import spark as hspark


def parser() -> argparse.ArgumentParser:
    """``bench/run.py inspect --help``."""
    ap = argparse.ArgumentParser(prog="bench/run.py inspect",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--key-groups", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--stores", default="hdfs,rocksdb",
                    help="comma-separated state stores (hdfs, rocksdb)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    from interlace import Join, prepare_join
    from interlace.inspection import inspect_operator

    work = Path(tempfile.mkdtemp(prefix="interlace-inspect-bench-"))
    spark = hspark.open_session({})
    try:
        left = (spark.range(args.rows)
                .selectExpr("id AS k", "CAST(id % 1000 AS STRING) AS v",
                            "timestamp_millis(1767225600000 + id) AS ts"))
        left.write.parquet(str(work / "in" / "left"))
        left.limit(0).write.parquet(str(work / "in" / "right"))
        schema = left.schema
        spec = Join(left_keys=["k"], right_keys=["k"], how="left", time_window_ms=86_400_000,
                    event_time_column="ts", key_groups=args.key_groups)
        print(f"{args.rows:,} held left rows, {args.key_groups} key groups")
        for store in args.stores.split(","):
            hspark.use_store(spark, store)
            frames = [spark.readStream.schema(schema).parquet(str(work / "in" / side))
                      for side in ("left", "right")]
            op = prepare_join(*frames, spec)
            ckpt = work / f"ckpt-{store}"
            query = (op.apply().writeStream.format("noop").option("checkpointLocation", str(ckpt))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            times, found = [], None
            for _ in range(args.repeat):
                started = time.perf_counter()
                found = inspect_operator(spark, ckpt, op)
                times.append(time.perf_counter() - started)
            assert found is not None
            state_bytes = sum(g.bytes for g in found.groups)
            print(f"{store}: {len(found.items):,} items, {state_bytes:,} bytes of blobs in "
                  f"{len(found.groups)} key groups: inspect {min(times):.1f} s best, "
                  f"{statistics.median(times):.1f} s median of {args.repeat}")
        return 0
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
