"""The Delta writer in Python, for a query of one's own: ``delta_writer`` in ``foreachBatch``.

Seed 003's KTable-KTable join written by hand: both tables read with ``spark.readStream``,
joined by :func:`interlace.table_join`, written by :func:`interlace.delta_writer` (exactly
once: a micro-batch handed to it again is skipped, the table's log holding one commit per
batch) into a Delta table that holds the seed's last row. Beside it, the hand-written
``foreachBatch`` that users write today (append the batch as it comes) holds a replayed
batch twice.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_support import assert_one_commit_per_batch, delta_rows
from deltalake import DeltaTable, write_deltalake

import interlace.testing.seed003_tables as seed
from interlace import TableJoin, delta_writer, table_join

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("key", pa.string()), ("v", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])


def test_a_table_join_by_hand_through_delta_writer_once_per_batch(spark, tmp_path):
    for i, (ts, side, v, *_) in enumerate(seed.TABLE_TABLE):  # one file per record
        folder = tmp_path / side
        folder.mkdir(exist_ok=True)
        pq.write_table(pa.Table.from_pylist([{"key": seed.KEY, "v": v, "ts": seed.at(ts)}],
                                            SCHEMA), folder / f"{i:03d}.parquet")

    def read(side):
        return (spark.readStream.schema("key STRING, v STRING, ts TIMESTAMP")
                .option("maxFilesPerTrigger", 100).parquet(str(tmp_path / side)))

    spec = TableJoin(left_keys=["key"], right_keys=["key"], how="full", emit="eager",
                     event_time_column="ts", lateness_ms=0, key_groups=2)
    joined = table_join(read("left"), read("right"), spec)
    writer = delta_writer(str(tmp_path / "joined"), "seed003-by-hand", key=("key",),
                          changelog=True)
    naive = str(tmp_path / "naive")
    seen = []

    def both(df, batch_id):
        pdf = df.toPandas()
        writer(df, batch_id)
        writer(df, batch_id)  # as Spark replays a batch after a crash: skipped
        for _ in range(2):  # the hand-written append, replayed: written twice
            write_deltalake(naive, pa.Table.from_pandas(pdf, preserve_index=False), mode="append")
        seen.append(batch_id)

    q = (joined.writeStream.foreachBatch(both).trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    q.awaitTermination()
    assert seen
    got = delta_rows(tmp_path / "joined")
    assert [(r["key"], r["left_v"], r["right_v"]) for r in got] == [(seed.KEY, "D", "d")]
    assert "op" not in got[0]
    batches = assert_one_commit_per_batch(tmp_path / "joined", "interlace.seed003-by-hand")
    assert batches == [b for b in seen if b in batches]
    changes = [c for e in seed.TABLE_TABLE if e[5] is not None for c in [e[5]]]
    assert len(DeltaTable(naive).to_pandas()) == 2 * len(changes)
