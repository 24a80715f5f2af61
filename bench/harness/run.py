"""Run one query: build, start, ``availableNow``, ``awaitTermination``; time, CPU, progress.

A run is timed from ``start()`` to the end of ``awaitTermination()`` (the DataFrame is built,
and any static input cached, before the clock starts). Its sink is ``foreachBatch`` with a
single action per micro-batch, so the stateful operator runs once per micro-batch:

* a *timed* run's sink computes the row count and an order-independent checksum,
  ``sum(xxhash64(<output columns>))``, in one ``selectExpr``;
* a *verification* run's sink collects the micro-batch to pandas (``toPandas``), so the
  whole output can be compared with the other engines' and with an oracle afterwards.

Rows a workload adds to flush the watermark (its sentinel rows) are filtered out first. State
figures come from the query's progress (``stateOperators``), per micro-batch.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import json
import shutil
import statistics
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from harness import cpu as hcpu
from harness import spark as hspark

#: customMetrics of a state operator summed into a run's state figures (RocksDB's files on
#: disk, and the HDFS provider's in-memory versions), where the provider reports them.
STATE_METRICS = ("rocksdbSstFileSize", "rocksdbTotalBytesWritten", "stateOnCurrentVersionSizeBytes")


@dataclasses.dataclass
class RunResult:
    """One run of one engine on one workload and state store."""

    workload: str
    store: str
    engine: str
    kind: str  # "verify" (collects the output) or "timed" (count + checksum)
    input_rows: int
    seconds: float
    out_rows: int
    checksum: int | None
    progress: list[dict[str, Any]]
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    role: str = "interlace"
    data_batches: int = 1

    @property
    def rows_per_s(self) -> float:
        """Input rows per wall-clock second."""
        return self.input_rows / max(self.seconds, 1e-9)

    @property
    def own_cpu(self) -> float:
        """CPU seconds of the benchmark's own processes (JVM, Python workers, driver)."""
        return hcpu.own_seconds(self.cpu)

    @property
    def foreign(self) -> float:
        """Average cores used by processes outside the benchmark during the run."""
        return self.cpu.get("outside", 0.0) / max(self.seconds, 1e-9)

    def state_at(self, batch_id: int) -> dict[str, int]:
        """State figures of micro-batch ``batch_id`` (zeros if it has no progress)."""
        for p in self.progress:
            if int(p.get("batchId", -1)) == batch_id:
                return state_of(p)
        return state_of({"batchId": batch_id})

    @property
    def last_data_state(self) -> dict[str, int]:
        """State figures of the last micro-batch holding data (before any flush)."""
        return self.state_at(self.data_batches - 1)

    @property
    def steady_batches(self) -> range:
        """The data micro-batches after the first (the first plans the query and, for table
        joins, loads the snapshot); the first if alone."""
        return range(1, self.data_batches) if self.data_batches > 1 else range(1)

    @property
    def batch_ms(self) -> float:
        """Median ``triggerExecution`` (ms) of the :attr:`steady_batches`."""
        ids = self.steady_batches
        ms = [int(p.get("durationMs", {}).get("triggerExecution", 0)) for p in self.progress
              if int(p.get("batchId", -1)) in ids]
        return float(statistics.median(ms)) if ms else float("nan")

    @property
    def state_bytes(self) -> int:
        """State size at the last data micro-batch: ``memoryUsedBytes``, but under RocksDB
        (whose ``memoryUsedBytes`` is its memory use, not the state's size) the size of its
        SST files, ``rocksdbSstFileSize``."""
        st = self.last_data_state
        if self.store == "rocksdb" and "rocksdbSstFileSize" in st:
            return st["rocksdbSstFileSize"]
        return st["memoryUsedBytes"]

    @property
    def peak_state_bytes(self) -> int:
        """The largest ``memoryUsedBytes`` over the run's micro-batches."""
        return max((state_of(p)["memoryUsedBytes"] for p in self.progress), default=0)

    @property
    def dropped_by_watermark(self) -> int:
        """Rows the state operators dropped as late, over the whole run."""
        return sum(state_of(p)["dropped"] for p in self.progress)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (progress reduced to durations and per-batch state)."""
        raw = {k: v for k, v in dataclasses.asdict(self).items() if k != "progress"}
        raw["batches"] = [{"batchId": int(p.get("batchId", -1)),
                           "numInputRows": int(p.get("numInputRows", 0)),
                           "durationMs": p.get("durationMs", {}), "state": state_of(p)}
                          for p in self.progress]
        return raw

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RunResult:
        """The run :meth:`to_json` wrote (a results file's ``runs``), its progress rebuilt from
        the per-batch state so that every figure the report draws comes out the same."""
        fields = {f.name for f in dataclasses.fields(cls)} - {"progress"}
        return cls(**{k: v for k, v in raw.items() if k in fields},
                   progress=[_progress_of(b) for b in raw.get("batches", [])])


def _progress_of(batch: Mapping[str, Any]) -> dict[str, Any]:
    """A progress dict with one state operator that :func:`state_of` reads back as
    ``batch["state"]`` (the inverse of what :meth:`RunResult.to_json` keeps)."""
    st = batch.get("state", {})
    op = {"memoryUsedBytes": st.get("memoryUsedBytes", 0),
          "numRowsTotal": st.get("numRowsTotal", 0),
          "numRowsDroppedByWatermark": st.get("dropped", 0),
          "customMetrics": {k: st[k] for k in STATE_METRICS if k in st}}
    out: dict[str, Any] = {"batchId": batch.get("batchId", -1),
                           "numInputRows": batch.get("numInputRows", 0),
                           "durationMs": batch.get("durationMs", {}), "stateOperators": [op]}
    if st.get("watermark_ms"):
        wm = _EPOCH + dt.timedelta(milliseconds=st["watermark_ms"])
        out["eventTime"] = {"watermark": wm.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"}
    return out


def state_of(p: Mapping[str, Any]) -> dict[str, int]:
    """Sum the state operators of one progress: bytes, rows, drops, the watermark (ms)."""
    ops = p.get("stateOperators") or []
    out = {
        "batchId": int(p.get("batchId", -1)),
        "memoryUsedBytes": sum(int(o.get("memoryUsedBytes", 0)) for o in ops),
        "numRowsTotal": sum(int(o.get("numRowsTotal", 0)) for o in ops),
        "dropped": sum(int(o.get("numRowsDroppedByWatermark", 0)) for o in ops),
        "watermark_ms": watermark_ms(p),
    }
    for name in STATE_METRICS:
        values = [int(o["customMetrics"][name]) for o in ops
                  if name in (o.get("customMetrics") or {})]
        if values:
            out[name] = sum(values)
    return out


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def watermark_ms(p: Mapping[str, Any]) -> int:
    """Spark's watermark during the micro-batch of progress ``p`` (0 before the first)."""
    raw = (p.get("eventTime") or {}).get("watermark")
    if not raw:
        return 0
    wm = dt.datetime.strptime(raw, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
    return (wm - _EPOCH) // dt.timedelta(milliseconds=1)  # exact: no float on the way


@dataclasses.dataclass
class Query:
    """What :func:`run_query` runs: the output DataFrame's builder and how to sink it."""

    build: Callable[[], Any]
    output_columns: tuple[str, ...]
    checksum: tuple[str, ...] | None = None
    sink_filter: str | None = None
    conf: Mapping[str, str] = dataclasses.field(default_factory=dict)
    before: Callable[[], None] | None = None
    after: Callable[[RunResult], None] | None = None
    cleanup: Callable[[], None] | None = None


def run_query(spark: Any, q: Query, *, workload: str, store: str, engine: str, role: str,
              input_rows: int, data_batches: int, ckpt_root: Path, collect: bool,
              jfr_dir: Path | None = None) -> tuple[RunResult, pd.DataFrame | None]:
    """Run ``q`` once; return the run and, if ``collect``, its whole output as pandas."""
    # Each engine gets Python workers of its own: Spark keeps one worker pool per environment
    # of a UDF (read from sc.environment when the query is built), and interlace freezes its
    # workers' garbage collector, which must not speed up another engine's (floor) run.
    spark.sparkContext.environment["INTERLACE_BENCH_WORKERS"] = engine
    out = q.build().select(*q.output_columns)
    cols = ", ".join(q.checksum or [f"`{c}`" for c in q.output_columns])
    acc: dict[str, Any] = {"n": 0, "s": 0, "frames": [], "per_batch": {}}

    def sink(df: Any, batch_id: int) -> None:
        if q.sink_filter:
            df = df.where(q.sink_filter)
        if collect:
            frame = df.toPandas()
            acc["frames"].append(frame)
            acc["n"] += len(frame)
            acc["per_batch"][int(batch_id)] = len(frame)
            return
        row = df.selectExpr(
            "count(*) AS n",
            f"sum(CAST(xxhash64({cols}) AS DECIMAL(20, 0))) AS s").collect()[0]
        acc["n"] += int(row["n"])
        acc["per_batch"][int(batch_id)] = int(row["n"])
        acc["s"] += int(row["s"] if row["s"] is not None else Decimal(0))

    ckpt = ckpt_root / f"{store}-{workload}-{engine}-{time.time_ns()}".replace(":", "_")
    if q.before:
        q.before()
    jvm = hcpu.jvm_pid() if jfr_dir else None
    if jvm:
        hcpu.jcmd(jvm, "JFR.start", "name=bench", "settings=profile")
    gc.collect()
    cpu0 = hcpu.snapshot()
    t0 = time.perf_counter()
    with hspark.query_conf(spark, q.conf):
        query = (out.writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt))
                 .trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    used = hcpu.delta(cpu0, hcpu.snapshot())
    progress = [json.loads(p.json) if hasattr(p, "json") else dict(p)
                for p in query.recentProgress]
    r = RunResult(workload, store, engine, "verify" if collect else "timed", input_rows,
                  seconds, acc["n"], None if collect else acc["s"], progress, used, role=role,
                  data_batches=data_batches)
    r.extra["out_per_batch"] = acc["per_batch"]
    for key in q.conf:
        r.extra.setdefault("conf", {})[key] = hspark.checkpoint_conf(ckpt, key)
    if jvm and jfr_dir:
        jfr_dir.mkdir(parents=True, exist_ok=True)
        target = jfr_dir / f"{ckpt.name}.jfr"
        hcpu.jcmd(jvm, "JFR.stop", "name=bench", f"filename={target}")
        r.extra["jfr"] = str(target)
    if q.after:
        q.after(r)
    if q.cleanup:
        q.cleanup()
    shutil.rmtree(ckpt, ignore_errors=True)
    frame = None
    if collect:
        frames = [f for f in acc["frames"] if len(f)]
        frame = (pd.concat(frames, ignore_index=True) if frames
                 else pd.DataFrame(columns=list(q.output_columns)))
    return r, frame
