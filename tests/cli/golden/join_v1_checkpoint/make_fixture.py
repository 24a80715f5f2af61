"""Write the "previous release" join checkpoint: state blobs of format version 1 (issue 13).

A full outer join pipeline (``p.toml``) run with ``interlace run`` over the first two of its
four input files per source. This folder keeps what that run left behind, as a user upgrading
interlace would have it:

* ``p.toml``: the pipeline (relative paths; DuckDB target and dead-letter table; HDFS state
  store; ``maxFilesPerTrigger = 1``, so each file is one micro-batch).
* ``in/``: the input files of the first run (``00000{0,1}.parquet`` per source).
* ``out/checkpoint/``: Spark's checkpoint after that run (batches 0, 1 and the no-data batch 2),
  its state stores holding version-1 ``join`` blobs, and ``interlace-spec.json``.
* ``out/result.duckdb.gz``: the target after that run (joined rows, dead letters, commits),
  gzipped (1.8 MB of mostly empty DuckDB blocks become 4 KB); :func:`unpack` restores it.
* ``later/``: the input files the continuation adds (``00000{2,3}.parquet`` per source).

``tests/cli/test_state_migration.py`` copies ``p.toml`` and ``out/`` into a fresh folder
(:func:`unpack`), puts
only ``later/`` there as ``in/`` (Spark's file source remembers the files it read by absolute
path: the first run's files in another folder would be read again), and continues the run with
the current release, which migrates the blobs on read.

Run it with the release that writes version 1, i.e. git commit
2511b74c01871742d661fa83eda339c7d24f987e (``interlace.state.blob.CURRENT_VERSION == 1``), never
with a later one; it refuses to overwrite an existing fixture::

    git worktree add /tmp/il-v1 2511b74c01871742d661fa83eda339c7d24f987e
    cd /tmp/il-v1 && python -m venv .venv && .venv/bin/pip install -e '.[test]'
    .venv/bin/python tests/cli/golden/join_v1_checkpoint/make_fixture.py \
        --into /work/main/tests/cli/golden/join_v1_checkpoint

The checkpoint is made relocatable by hand: ``.crc`` files are removed (Hadoop's local file
system reads a file without its checksum), and so is the run's log folder (``.interlace``).
The absolute paths left are those of the first run's input files in Spark's file-source log
(``out/checkpoint/sources/*/0``), which only serve to skip files already read.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

T0 = dt.datetime(2026, 1, 1)
#: The first file's modification time; file ``i`` gets ``MTIME0 + i`` (Spark orders by it).
MTIME0 = 1_700_000_000.0
FIRST_RUN = 2  # files 0 and 1 are read by the first run, 2 and 3 by the continuation

PIPELINE = """\
# The previous release's pipeline (issue 13): a full outer join, late rows to a dead-letter
# table. Written by make_fixture.py; the continuation test runs it unchanged.
name = "state-migration"

[[sources]]
name = "orders"
format = "parquet"
path = "in/orders"
schema = "order_id BIGINT, item STRING, order_ts TIMESTAMP"
event_time_column = "order_ts"
options = { maxFilesPerTrigger = "1" }

[[sources]]
name = "payments"
format = "parquet"
path = "in/payments"
schema = "order_id BIGINT, paid DOUBLE, pay_ts TIMESTAMP"
event_time_column = "pay_ts"
options = { maxFilesPerTrigger = "1" }

[transform.join]
kind = "stream_stream_join"
left_source = "orders"
right_source = "payments"
left_keys = ["order_id"]
right_keys = ["order_id"]
how = "full"
time_window_ms = 60000
lateness_ms = 5000
late_data = "dlq"
key_groups = 2

[target]
kind = "duckdb"
path = "out/result.duckdb"
table = "joined"

[dead_letter]
kind = "duckdb"
path = "out/result.duckdb"
table = "letters"

[spark]
checkpoint = "out/checkpoint"
shuffle_partitions = 2
"""


def at(sec: int) -> dt.datetime:
    """``T0 + sec`` seconds (naive, meaning UTC)."""
    return T0 + dt.timedelta(seconds=sec)


def _o(k: int, sec: int) -> dict:
    return {"order_id": k, "item": f"item-{k}", "order_ts": at(sec)}


def _p(k: int, sec: int) -> dict:
    return {"order_id": k, "paid": float(k) + 0.5, "pay_ts": at(sec)}


#: Per file (= micro-batch): (orders, payments). |pay_ts - order_ts| <= 60 s matches.
#: File 1's orders 4, 5 and 11 and payments 2 and 10 are still buffered when the first run
#: ends (its watermark is 100 s): file 2 matches orders 4 and 5 and payment 10, order 11 and
#: payment 2 are evicted by the continuation (order 11 unmatched, emitted null-padded).
#: File 2's order 7 at 20 s is late (the watermark the first run reached is 100 s): a dead
#: letter. File 3's rows at 1000 s move the watermark past everything else.
FILES: list[tuple[list[dict], list[dict]]] = [
    ([_o(1, 0), _o(2, 5), _o(3, 10)], [_p(1, 20), _p(9, 0)]),
    ([_o(4, 100), _o(5, 110), _o(11, 115)], [_p(2, 50), _p(10, 105)]),
    ([_o(10, 120), _o(6, 130), _o(7, 20)], [_p(4, 140), _p(5, 160)]),
    ([_o(8, 200), _o(99, 1000)], [_p(8, 210), _p(6, 300), _p(98, 1000)]),
]


def spark_schemas() -> tuple:
    """The two sources' schemas (PySpark types), as in ``PIPELINE``."""
    from pyspark.sql import types as T

    orders = T.StructType([T.StructField("order_id", T.LongType()),
                           T.StructField("item", T.StringType()),
                           T.StructField("order_ts", T.TimestampType())])
    pays = T.StructType([T.StructField("order_id", T.LongType()),
                         T.StructField("paid", T.DoubleType()),
                         T.StructField("pay_ts", T.TimestampType())])
    return orders, pays


def write_files(folder: Path, indices: range) -> None:
    """Write files ``indices`` of both sources under ``folder/{orders,payments}/``."""
    from interlace.testing.replay import write_parquet_rows

    for name, schema, side in zip(("orders", "payments"), spark_schemas(), (0, 1), strict=True):
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in indices:
            write_parquet_rows(folder / name / f"{i:06d}.parquet", FILES[i][side], schema,
                               MTIME0 + i)


def set_mtimes(folder: Path) -> None:
    """Give each input file under ``folder`` its modification time (git does not keep it)."""
    for f in folder.rglob("*.parquet"):
        t = MTIME0 + int(f.stem)
        os.utime(f, (t, t))


def pack(into: Path) -> None:
    """Gzip ``into/out/result.duckdb`` to ``result.duckdb.gz`` (byte-stable: no name, no time)."""
    db = into / "out" / "result.duckdb"
    with open(db, "rb") as src, open(db.with_suffix(".duckdb.gz"), "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    db.unlink()


def unpack(fixture: Path, folder: Path) -> None:
    """Copy the first run's ``p.toml`` and ``out/`` (DuckDB file unzipped) into ``folder``."""
    shutil.copy(fixture / "p.toml", folder / "p.toml")
    shutil.copytree(fixture / "out", folder / "out", ignore=shutil.ignore_patterns("*.gz"))
    with gzip.open(fixture / "out" / "result.duckdb.gz", "rb") as src, \
            open(folder / "out" / "result.duckdb", "wb") as dst:
        shutil.copyfileobj(src, dst)


def make(into: Path) -> None:
    """Run the first two files with this release and copy the result into ``into``."""
    from interlace.state import blob

    assert blob.CURRENT_VERSION == 1, "run this with the release that writes version-1 blobs"
    if (into / "out").exists():
        raise SystemExit(f"{into / 'out'} exists: a released fixture is never regenerated")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "p.toml").write_text(PIPELINE)
        write_files(work / "in", range(FIRST_RUN))
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        subprocess.run([sys.executable, "-m", "interlace.cli", "run", "p.toml"], cwd=work,
                       check=True, env=env)
        for crc in (work / "out").rglob("*.crc"):
            crc.unlink()
        into.mkdir(parents=True, exist_ok=True)
        shutil.copy(work / "p.toml", into / "p.toml")
        shutil.copytree(work / "in", into / "in", dirs_exist_ok=True)
        shutil.copytree(work / "out", into / "out")
    pack(into)
    write_files(into / "later", range(FIRST_RUN, len(FILES)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--into", type=Path, default=HERE, help="the fixture folder")
    make(parser.parse_args().into)
