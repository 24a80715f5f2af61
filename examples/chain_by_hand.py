"""Example 1 of docs/chains.md by hand: a left join, then a session window over its output.

Two queries, wired with ``interlace.chain``, no pipeline file: the join's output goes to a
channel (:class:`~interlace.chain.ChannelWriter` in ``foreachBatch``), the window reads it back
(:func:`~interlace.chain.read_channel`) with the lateness the join's lag asks for
(:func:`~interlace.chain.min_lateness_ms`). Run it with a folder to work in::

    python examples/chain_by_hand.py /tmp/by-hand

It writes the data of ``examples/chains_data.py`` there and prints the closed sessions.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from interlace import Aggregation, Join, Window, local_session, stream_join, window_aggregate
from interlace.chain import ChannelWriter, min_lateness_ms, read_channel
from interlace.operators.common.arrow import arrow_schema_for


def main(folder: Path) -> list[dict]:
    """Run the chain over ``folder/data``; return the sessions it closed."""
    spec = importlib.util.spec_from_file_location(
        "chains_data", Path(__file__).with_name("chains_data.py"))
    assert spec is not None and spec.loader is not None
    data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(data)
    data.write(folder)
    spark = local_session("chain-by-hand")

    # Stage 1: orders LEFT JOIN payments, into a channel.
    orders = (spark.readStream.schema(data.ORDERS_DDL).option("maxFilesPerTrigger", 1)
              .parquet(str(folder / "data" / "orders")))
    payments = (spark.readStream.schema(data.PAYMENTS_DDL).option("maxFilesPerTrigger", 1)
                .parquet(str(folder / "data" / "payments")))
    join = Join(left_keys=["order_id"], right_keys=["order_id"], how="left", lower_ms=0,
                upper_ms=600_000, left_event_time_column="order_ts",
                right_event_time_column="pay_ts", lateness_ms=120_000)
    paid = stream_join(orders, payments, join)
    channel = folder / "channel"
    join_checkpoint = folder / "checkpoints" / "paid"
    writer = ChannelWriter([channel], join_checkpoint, join.horizon_ms,
                           arrow_schema_for(paid.schema, timestamp_unit="us", timestamp_tz="UTC"))
    (paid.writeStream.foreachBatch(lambda df, batch_id: writer.write(df.toPandas(), batch_id))
     .option("checkpointLocation", str(join_checkpoint))
     .trigger(availableNow=True).start().awaitTermination())

    # Stage 2: session windows per customer over the channel, with the join's lag as lateness.
    window = Window(kind="session", gap_ms=1_800_000, event_time_column="left_order_ts",
                    group_by=["left_customer"], max_groups_per_window=10_000,
                    lateness_ms=min_lateness_ms(join, "left_order_ts"),
                    aggregations=[Aggregation(agg="count", as_="orders"),
                                  Aggregation(agg="sum", column="left_amount", as_="amount")])
    sessions = window_aggregate(read_channel(spark, channel, paid.schema), window)
    rows: list[dict] = []
    (sessions.writeStream
     .foreachBatch(lambda df, _: rows.extend(df.toPandas().to_dict("records")))
     .option("checkpointLocation", str(folder / "checkpoints" / "sessions"))
     .trigger(availableNow=True).start().awaitTermination())
    return rows


if __name__ == "__main__":
    for row in sorted(main(Path(sys.argv[1] if len(sys.argv) > 1 else "by-hand")),
                      key=lambda r: (r["left_customer"], r["window_start"])):
        print(row)
