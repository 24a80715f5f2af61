"""A micro-batch into Delta: interlace's target vs Parquet, DuckDB and the hand-written MERGE.

    .venv/bin/python bench/run.py delta                       # 10,000 rows a batch, 20 batches
    .venv/bin/python bench/run.py delta --rows 2000 --batches 4 --runs 1   # a smoke run

What a target costs on the driver once Spark hands it a micro-batch (``toPandas`` is the same
for every target and left out): the same batches, as pandas frames, written by

* ``duckdb``: :class:`~interlace.connectors.duckdb.DuckDBTarget` (the demo's target);
* ``parquet``: :class:`~interlace.connectors.parquet.ParquetTarget` (the batch as a file;
  a changelog's rows as they come, not applied);
* ``delta``: :class:`~interlace.connectors.delta.DeltaTarget` (one commit per batch with its
  application transaction; a changelog reduced per key and MERGEd with version guards);
* ``hand``: what a careful user writes in ``foreachBatch`` with the same library today: an
  append with ``write_deltalake``; for a changelog the batch reduced to each key's newest
  change (without it MERGE fails on "multiple source rows matched") then one MERGE
  (update / insert / delete by ``op``), no version guard, no transaction: not exactly once.

Two outputs: ``append`` (a join's rows: 5 columns) and ``changelog`` (a table join's changes
over ``--keys`` keys, 10% deletes, each key's versions increasing, several changes of a key in
one batch). The engines take turns within each batch (the order rotating), so each writes
into a table of the same size at each step; ``--runs`` repeats with fresh tables. Reported,
per engine from its best run (lowest total): the median and p90 milliseconds per batch, and
``delta``'s median over each other engine's.
Each run's final tables are checked: ``delta`` and ``hand`` hold the DuckDB table's rows.
Results: ``bench/results/<date>-delta.md`` and ``.json``.

``bench/run.py delta-spark`` (:mod:`harness.tools.delta_spark`) measures on Spark: the
changelog stream from files into Delta through ``foreachBatch``, interlace's
:func:`delta_writer` against the MERGE users write with Spark's own Delta (delta-spark).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

RESULTS = Path(__file__).resolve().parents[2] / "results"
ENGINES = ("duckdb", "parquet", "delta", "hand")
T0 = dt.datetime(2026, 1, 1)


def parser() -> argparse.ArgumentParser:
    """``bench/run.py delta --help``."""
    ap = argparse.ArgumentParser(prog="bench/run.py delta", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000, help="rows per micro-batch")
    ap.add_argument("--batches", type=int, default=20, help="micro-batches per run")
    ap.add_argument("--keys", type=int, default=50_000, help="changelog keys")
    ap.add_argument("--runs", type=int, default=3, help="repeats (fresh tables each)")
    ap.add_argument("--outputs", default="append,changelog")
    ap.add_argument("--out", type=Path, help="result file stem (default bench/results/<date>)")
    return ap


def _schemas() -> dict[str, Any]:
    from pyspark.sql import types as T

    return {
        "append": T.StructType([
            T.StructField("order_id", T.LongType()), T.StructField("amount", T.DoubleType()),
            T.StructField("order_ts", T.TimestampType()), T.StructField("paid", T.DoubleType()),
            T.StructField("pay_ts", T.TimestampType())]),
        "changelog": T.StructType([
            T.StructField("id", T.LongType()), T.StructField("name", T.StringType()),
            T.StructField("balance", T.DoubleType()), T.StructField("op", T.StringType()),
            T.StructField("event_time", T.TimestampType()),
            T.StructField("version", T.LongType())]),
    }


def batches(output: str, rows: int, n: int, keys: int, seed: int = 7) -> list[pd.DataFrame]:
    """``n`` frames as ``toPandas`` hands them over (naive UTC timestamps)."""
    rng = np.random.default_rng(seed)
    out = []
    versions = np.zeros(keys, dtype=np.int64)
    for b in range(n):
        ts = (pd.to_datetime(T0) + pd.to_timedelta(b * 10 + rng.random(rows) * 10, unit="s")
              ).floor("us")  # Spark's precision
        if output == "append":
            ids = np.arange(b * rows, (b + 1) * rows)
            out.append(pd.DataFrame({"order_id": ids, "amount": rng.random(rows) * 100,
                                     "order_ts": ts, "paid": rng.random(rows) * 100,
                                     "pay_ts": ts + pd.Timedelta(seconds=2)}))
            continue
        ids = rng.integers(0, keys, rows)
        order = np.argsort(ids, kind="stable")
        ver = np.empty(rows, dtype=np.int64)  # each key's versions increase within the batch
        sorted_ids = ids[order]
        starts = np.r_[0, np.flatnonzero(np.diff(sorted_ids)) + 1]
        rank = np.arange(rows) - np.repeat(starts, np.diff(np.r_[starts, rows]))
        ver[order] = versions[sorted_ids] + rank
        np.add.at(versions, ids, 1)
        deletes = rng.random(rows) < 0.1
        out.append(pd.DataFrame({
            "id": ids, "name": np.where(deletes, None, [f"n{i}" for i in ids]),
            "balance": np.where(deletes, np.nan, rng.random(rows) * 1000),
            "op": np.where(deletes, "delete", "upsert"), "event_time": ts, "version": ver}))
    return out


class HandMerge:
    """The hand-written ``foreachBatch`` with delta-rs (module docstring: ``hand``)."""

    def __init__(self, path: Path, changelog: bool):
        self.path, self.changelog, self.columns = str(path), changelog, None

    def prepare(self, schema: Any) -> None:
        self.columns = [n for n in schema.names if n != "op"]

    def write(self, pdf: pd.DataFrame, batch_id: int) -> int:
        import pyarrow as pa
        from deltalake import DeltaTable, write_deltalake

        if not self.changelog:
            write_deltalake(self.path, pa.Table.from_pandas(pdf, preserve_index=False),
                            mode="append")
            return len(pdf)
        newest = pdf.sort_values("version").drop_duplicates(["id"], keep="last")
        source = pa.Table.from_pandas(newest, preserve_index=False)
        if not DeltaTable.is_deltatable(self.path):
            first = newest[newest["op"] == "upsert"].drop(columns="op")
            write_deltalake(self.path, pa.Table.from_pandas(first, preserve_index=False))
            return len(pdf)
        cols = {f"`{c}`": f"s.`{c}`" for c in self.columns or ()}
        (DeltaTable(self.path).merge(source, "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_delete("s.op = 'delete'")
            .when_matched_update(cols, "s.op = 'upsert'")
            .when_not_matched_insert(cols, "s.op = 'upsert'")
            .execute())
        return len(pdf)


def _engine(name: str, output: str, folder: Path, schema: Any) -> Any:
    from interlace.connectors.delta import DeltaTarget
    from interlace.connectors.duckdb import DuckDBTarget
    from interlace.connectors.parquet import ParquetTarget

    changelog = output == "changelog"
    key = ("id",) if changelog else ()
    target: Any
    if name == "duckdb":
        target = DuckDBTarget(folder / "t.duckdb", "t", "bench", key, changelog=changelog)
    elif name == "parquet":
        target = ParquetTarget(folder / "parquet")
    elif name == "delta":
        target = DeltaTarget(str(folder / "delta"), "bench", key, changelog=changelog)
    else:
        target = HandMerge(folder / "hand", changelog)
    target.prepare(schema)
    return target


def _rows(name: str, folder: Path, output: str) -> list[tuple]:
    import duckdb
    from deltalake import DeltaTable

    cols = ["order_id", "amount"] if output == "append" else ["id", "name", "balance", "version"]
    if name == "duckdb":
        con = duckdb.connect(str(folder / "t.duckdb"), read_only=True)
        try:
            df = con.execute(f"SELECT {', '.join(cols)} FROM t").fetchdf()
        finally:
            con.close()
    else:
        df = DeltaTable(str(folder / name)).to_pandas()[cols]
    df = df.astype(object).where(df.notna(), None)
    return sorted(map(tuple, df.itertuples(index=False, name=None)), key=repr)


def run_once(output: str, frames: list[pd.DataFrame], work: Path,
             log: Callable[[str], None]) -> dict[str, list[float]]:
    """One run: every engine into a fresh table, taking turns within each batch."""
    schema = _schemas()[output]
    folder = work / output
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    targets = {e: _engine(e, output, folder, schema) for e in ENGINES}
    times: dict[str, list[float]] = {e: [] for e in ENGINES}
    for b, frame in enumerate(frames):
        order = ENGINES[b % len(ENGINES):] + ENGINES[:b % len(ENGINES)]
        for e in order:
            pdf = frame.copy()
            t = time.perf_counter()
            targets[e].write(pdf, b)
            times[e].append((time.perf_counter() - t) * 1000)
    want = _rows("duckdb", folder, output)
    for e in ("delta", "hand"):
        got = _rows(e, folder, output)
        if got != want:
            msg = f"{output}: {e}'s table differs from DuckDB's ({len(got)} vs {len(want)} rows)"
            raise AssertionError(msg)
    log(f"  {output}: tables agree ({len(want)} rows); median ms " + ", ".join(
        f"{e} {np.median(v):.1f}" for e, v in times.items()))
    return times


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    import deltalake
    import duckdb

    outputs = [o for o in args.outputs.split(",") if o]
    work = Path(tempfile.mkdtemp(prefix="interlace-delta-bench-"))
    started = time.time()
    results: dict[str, Any] = {}
    try:
        for output in outputs:
            frames = batches(output, args.rows, args.batches, args.keys)
            runs = []
            for r in range(args.runs):
                print(f"{output} run {r + 1}/{args.runs}", file=sys.stderr)
                runs.append(run_once(output, frames, work, lambda s: print(s, file=sys.stderr)))
            # Each engine's best run (its lowest total), as the throughput harness reports.
            best = {e: min((t[e] for t in runs), key=sum) for e in ENGINES}
            results[output] = {e: {"median_ms": float(np.median(v)),
                                   "p90_ms": float(np.percentile(v, 90)),
                                   "total_ms": float(sum(v))} for e, v in best.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stem = args.out or RESULTS / f"{dt.date.today().isoformat()}-delta"
    meta = {"rows": args.rows, "batches": args.batches, "keys": args.keys, "runs": args.runs,
            "deltalake": deltalake.__version__, "duckdb": duckdb.__version__,
            "python": platform.python_version(), "took_s": round(time.time() - started, 1),
            "command": "bench/run.py delta " + " ".join(argv if argv is not None else
                                                        sys.argv[2:])}
    Path(f"{stem}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    Path(f"{stem}.md").write_text(report(meta, results))
    print(report(meta, results))
    return 0


def report(meta: dict[str, Any], results: dict[str, Any]) -> str:
    lines = [f"# A micro-batch into Delta ({dt.date.today().isoformat()})", "",
             f"`.venv/bin/python {meta['command'].strip()}`: {meta['rows']:,} rows a batch, "
             f"{meta['batches']} batches, {meta['keys']:,} changelog keys, each engine's best of "
             f"{meta['runs']} runs; deltalake {meta['deltalake']}, duckdb {meta['duckdb']}, "
             f"Python {meta['python']}; {meta['took_s']} s in all.", "",
             "| output | engine | median ms/batch | p90 ms/batch | delta / engine (median) |",
             "|---|---|---:|---:|---:|"]
    for output, engines in results.items():
        d = engines["delta"]["median_ms"]
        for e, v in engines.items():
            ratio = "" if e == "delta" else f"{d / v['median_ms']:.2f}"
            lines.append(f"| {output} | {e} | {v['median_ms']:.1f} | {v['p90_ms']:.1f} | "
                         f"{ratio} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
