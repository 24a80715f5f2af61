"""The benchmark's SparkSession, its settings, and the state store and join state format.

One session serves every store: the provider is a SQL setting that a streaming query copies
when it starts (its checkpoint keeps it), so :func:`use_store` switches the queries started
afterwards. Settings that must apply to one query only (a join state format, a shim
variant's ``SESSION_CONF``) go through :func:`query_conf`.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from harness import data as hdata

MASTER = "local[2]"
SHUFFLE_PARTITIONS = 4
STORES = ("hdfs", "rocksdb")
JOIN_FORMAT_KEY = "spark.sql.streaming.join.stateFormatVersion"
#: Every value Spark 4.3's SQLConf accepts for JOIN_FORMAT_KEY ("Valid versions are 1, 2, 3,
#: and 4"; 1 is deprecated, 3 and 4 use virtual column families and need RocksDB).
JOIN_FORMATS = (1, 2, 3, 4)


def parse_conf(items: list[str]) -> dict[str, str]:
    """``["K=V", ...]`` (``--conf``) as a dict; a malformed item raises ``ValueError``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            msg = f"`--conf` takes KEY=VALUE (got {item!r})"
            raise ValueError(msg)
        out[key.strip()] = value
    return out


def open_session(conf: Mapping[str, str]) -> Any:
    """The benchmark's session: ``local_session(master="local[2]", shuffle_partitions=4)``."""
    # PySpark's applyInPandasWithState worker concatenates all-NA padding frames, which makes
    # pandas 2.x print a FutureWarning per call; the Python workers inherit this variable.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    from interlace import local_session

    return local_session("interlace-bench", master=MASTER, shuffle_partitions=SHUFFLE_PARTITIONS,
                         conf=dict(conf))


def use_store(spark: Any, store: str) -> None:
    """Make queries started from now on use state store ``store`` (``hdfs`` / ``rocksdb``)."""
    from interlace.session import state_store_conf

    for key, value in state_store_conf(store).items():
        spark.conf.set(key, value)


@contextlib.contextmanager
def query_conf(spark: Any, conf: Mapping[str, str]) -> Iterator[None]:
    """Set ``conf`` for the query started inside the block, then restore the session's values.

    A streaming query copies the session's settings when ``start()`` runs, so restoring them
    right after ``start()`` leaves that query with ``conf`` and every later query without.
    """
    saved = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def checkpoint_conf(ckpt: Path, key: str) -> str | None:
    """The value of ``key`` a query recorded in its checkpoint (offset log of batch 0)."""
    try:
        lines = (ckpt / "offsets" / "0").read_text().splitlines()
    except OSError:
        return None
    for line in lines[1:]:
        with contextlib.suppress(ValueError):
            meta = json.loads(line)
            if isinstance(meta, dict) and "conf" in meta:
                value = meta["conf"].get(key)
                return None if value is None else str(value)
    return None


def probe_join_formats(spark: Any, store: str, work: Path) -> dict[int, str]:
    """Run a tiny stream-stream join per join state format on ``store``; what each gave.

    Returns ``format -> "ok"`` (the query ran, its checkpoint records that format and the
    join emitted its one pair) or the first line of the error Spark raised.
    """
    import pyarrow as pa
    from pyspark.sql import functions as F

    schema = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
    root = work / "probe"
    for side in ("left", "right"):
        if not (root / side).exists():
            t = pa.array([hdata.T0_US, hdata.T0_US + 60_000_000]).cast(schema.field("ts").type)
            hdata.write_batches(root / side, [pa.Table.from_arrays([pa.array([1, 2]), t],
                                                                   schema=schema)])
    use_store(spark, store)
    out: dict[int, str] = {}
    for fmt in JOIN_FORMATS:
        left = hdata.read_stream(spark, root / "left", schema).withWatermark("ts", "1 second")
        right = hdata.read_stream(spark, root / "right", schema).withWatermark("ts", "1 second")
        joined = left.alias("l").join(right.alias("r"), F.expr(
            "l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL 1 SECOND AND l.ts + INTERVAL 1 SECOND"))
        rows: list[int] = []
        ckpt = work / "checkpoints" / f"probe-{store}-{fmt}-{time.time_ns()}"

        def sink(df: Any, _batch_id: int, rows: list[int] = rows) -> None:
            rows.append(df.count())

        try:
            with query_conf(spark, {JOIN_FORMAT_KEY: str(fmt)}):
                query = (joined.writeStream.foreachBatch(sink)
                         .option("checkpointLocation", str(ckpt))
                         .trigger(availableNow=True).start())
            query.awaitTermination()
            recorded = checkpoint_conf(ckpt, JOIN_FORMAT_KEY)
            if recorded != str(fmt):
                out[fmt] = f"ran, but the checkpoint records format {recorded}"
            elif sum(rows) != 2:
                out[fmt] = f"ran, but emitted {sum(rows)} rows instead of 2"
            else:
                out[fmt] = "ok"
        except Exception as exc:  # noqa: BLE001 - any failure is this format's answer
            out[fmt] = _first_line(exc)
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    # StreamingQueryException: "[STREAM_FAILED] Query [id = ..., runId = ...] terminated with
    # exception: <the cause> SQLSTATE: ..." - keep the cause.
    text = text.split("terminated with exception:", 1)[-1].split(" SQLSTATE:", 1)[0]
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return type(exc).__name__


def versions() -> dict[str, str]:
    """Library versions, Java, cores, CPU and platform, for a report's header."""
    import numpy
    import pandas
    import pyarrow
    import pyspark

    import interlace

    return {
        "interlace": interlace.__version__,
        "interlace_path": str(Path(interlace.__file__).resolve().parent),
        "pyspark": pyspark.__version__,
        "pandas": pandas.__version__,
        "pyarrow": pyarrow.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "java": _java_version(),
        "cores": str(os.cpu_count()),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "executable": sys.executable,
    }


def _java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
        return out.stderr.splitlines()[0].strip()
    except (OSError, IndexError):
        return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
