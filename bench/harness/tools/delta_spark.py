"""``bench/run.py delta-spark``: into Delta on Spark, ``delta_writer`` vs delta-spark's MERGE.

    COMPAT_RUN='python bench/run.py delta-spark' bash .ci/compat 4.2   # delta-spark 4.4 jars

The changelog of :func:`harness.tools.delta.batches` (``--rows`` a batch, ``--batches``,
``--keys``) as Parquet files, one per micro-batch (increasing mtimes), read by a stream
(``maxFilesPerTrigger`` 1, ``availableNow``) into a Delta table through ``foreachBatch``:

* ``interlace``: :func:`interlace.delta_writer` (the batch collected to the driver, reduced
  per key, one delta-rs MERGE with version guards and its application transaction);
* ``delta-spark``: what a Spark user writes today: the batch reduced to each key's newest
  change (``row_number`` over the key by ``version`` desc: without it MERGE fails on "multiple
  source rows matched"), then ``MERGE INTO delta.`path``` (delete / update / insert by
  ``op``), run by Spark on its executors: no transaction, not exactly once.

The measure: seconds inside the ``foreachBatch`` function per batch (the batch's read is in
both), median and p90 over the batches of each engine's best run; the engines alternate run
by run. Both tables must hold the same rows at the end. A session with delta-spark's jars
(:func:`interlace.connectors.jars.delta_spark_jars`) and its extension, ``local[2]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ENGINES = ("interlace", "delta-spark")
COLS = ["id", "name", "balance", "event_time", "version"]


def _session() -> Any:
    from pyspark.sql import SparkSession

    from interlace.connectors.jars import delta_spark_jars

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (SparkSession.builder.master("local[2]").appName("delta-bench")
            .config("spark.jars", ",".join(str(j) for j in delta_spark_jars()))
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog",
                    "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2").getOrCreate())


def _inputs(folder: Path, frames: list[Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    for i, f in enumerate(frames):
        path = folder / f"{i:05d}.parquet"
        t = pa.Table.from_pandas(f, preserve_index=False)
        t = t.set_column(t.schema.get_field_index("event_time"), "event_time",
                         t.column("event_time").cast(pa.timestamp("us", tz="UTC")))
        pq.write_table(t, path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def _spark_merge(path: str) -> Any:
    def merge(df: Any, batch_id: int) -> None:
        spark = df.sparkSession
        df.createOrReplaceTempView("il_batch")
        cols = ", ".join(f"`{c}`" for c in COLS)
        spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{path}` (id BIGINT, name STRING, "
                  "balance DOUBLE, event_time TIMESTAMP, version BIGINT) USING DELTA")
        spark.sql(
            f"MERGE INTO delta.`{path}` t USING (SELECT * FROM (SELECT *, row_number() OVER "
            "(PARTITION BY id ORDER BY version DESC) AS il_n FROM il_batch) WHERE il_n = 1) s "
            "ON t.id = s.id WHEN MATCHED AND s.op = 'delete' THEN DELETE "
            "WHEN MATCHED AND s.op = 'upsert' THEN UPDATE SET "
            + ", ".join(f"t.`{c}` = s.`{c}`" for c in COLS)
            + f" WHEN NOT MATCHED AND s.op = 'upsert' THEN INSERT ({cols}) VALUES "
            f"({', '.join(f's.`{c}`' for c in COLS)})")
    return merge


def _run(spark: Any, engine: str, inputs: Path, work: Path) -> tuple[list[float], Any]:
    from interlace import delta_writer

    path = str(work / engine / "table")
    inner = (delta_writer(path, "bench", key=("id",), changelog=True)
             if engine == "interlace" else _spark_merge(path))
    times: list[float] = []

    def timed(df: Any, batch_id: int) -> None:
        t = time.perf_counter()
        inner(df, batch_id)
        times.append(time.perf_counter() - t)

    stream = (spark.readStream.schema("id BIGINT, name STRING, balance DOUBLE, op STRING, "
                                      "event_time TIMESTAMP, version BIGINT")
              .option("maxFilesPerTrigger", 1).parquet(str(inputs)))
    q = (stream.writeStream.foreachBatch(timed).trigger(availableNow=True)
         .option("checkpointLocation", str(work / engine / "ck")).start())
    q.awaitTermination()
    rows = spark.read.format("delta").load(path).select(*COLS).toPandas()
    return times, rows.sort_values("id").reset_index(drop=True)


def parser() -> argparse.ArgumentParser:
    """``bench/run.py delta-spark --help``."""
    ap = argparse.ArgumentParser(prog="bench/run.py delta-spark",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000, help="changes per micro-batch")
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--keys", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, help="result file stem")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    import pyspark

    from harness.tools.delta import RESULTS, batches

    frames = batches("changelog", args.rows, args.batches, args.keys)
    work = Path(tempfile.mkdtemp(prefix="interlace-delta-spark-"))
    spark = _session()
    started = time.time()
    runs: dict[str, list[list[float]]] = {e: [] for e in ENGINES}
    try:
        _inputs(work / "in", frames)
        for r in range(args.runs):
            tables = {}
            for e in ENGINES if r % 2 == 0 else tuple(reversed(ENGINES)):
                shutil.rmtree(work / e, ignore_errors=True)
                times, tables[e] = _run(spark, e, work / "in", work)
                runs[e].append(times)
                print(f"run {r + 1} {e}: median {np.median(times) * 1000:.0f} ms/batch",
                      file=sys.stderr)
            a, b = tables["interlace"], tables["delta-spark"]
            if len(a) != len(b) or not (a["version"].to_numpy() == b["version"].to_numpy()).all():
                msg = f"the tables differ: {len(a)} vs {len(b)} rows"
                raise AssertionError(msg)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    best = {e: min(v, key=sum) for e, v in runs.items()}
    res = {e: {"median_ms": float(np.median(v) * 1000),
               "p90_ms": float(np.percentile(v, 90) * 1000),
               "total_s": float(sum(v))} for e, v in best.items()}
    meta = {"rows": args.rows, "batches": args.batches, "keys": args.keys, "runs": args.runs,
            "pyspark": pyspark.__version__, "took_s": round(time.time() - started, 1),
            "command": "bench/run.py delta-spark " + " ".join(
                argv if argv is not None else sys.argv[2:])}
    stem = args.out or RESULTS / f"{dt.date.today().isoformat()}-delta-spark"
    ratio = res["interlace"]["median_ms"] / res["delta-spark"]["median_ms"]
    text = "\n".join([
        f"# Into Delta on Spark: delta_writer vs delta-spark MERGE ({dt.date.today()})", "",
        f"`{meta['command'].strip()}` on PySpark {meta['pyspark']} (the 4.2 compatibility venv, "
        f"delta-spark jars): {args.rows:,} changes a batch over {args.keys:,} keys, "
        f"{args.batches} batches, each engine's best of {args.runs} runs; {meta['took_s']} s.",
        "", "| engine | median ms/batch | p90 ms/batch | total s |", "|---|---:|---:|---:|",
        *(f"| {e} | {v['median_ms']:.0f} | {v['p90_ms']:.0f} | {v['total_s']:.1f} |"
          for e, v in res.items()),
        "", f"interlace / delta-spark (median): {ratio:.2f}.", ""])
    Path(f"{stem}.json").write_text(json.dumps({"meta": meta, "results": res}, indent=2))
    Path(f"{stem}.md").write_text(text)
    print(text)
    return 0
