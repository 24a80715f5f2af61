"""What the balanced key-group id lookup adds to planning a query, by number of key groups.

``interlace.state.keygroups.key_group_sql`` maps key group ``g`` to its balanced id with an
array literal of ``key_groups`` entries (``balanced_id_lookup_sql``), which Spark parses once
when the query is built and optimises and plans again in every micro-batch. This prints the
time to build the DataFrame (parse and analysis of the expression), then runs the same tiny
aggregation (10 rows grouped by the key group) with the lookup and with the plain
``pmod(xxhash64(...), N)``, alternately, and prints the median time per execution of each:
the difference is the literal's cost per micro-batch.

    /work/venv/bin/python bench/run.py micro keygroup-planning --sizes 8,1024,4096,65536 --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import time


def parser() -> argparse.ArgumentParser:
    """``bench/run.py micro keygroup-planning --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py micro keygroup-planning", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="8,1024,4096,65536")
    ap.add_argument("--repeat", type=int, default=7)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    from interlace.state.keygroups import balanced_id_lookup_sql
    from pyspark.sql import functions as F

    from interlace import local_session

    spark = local_session("keygroup-planning", master="local[2]", shuffle_partitions=4)
    spark.range(10).groupBy("id").count().collect()  # warm-up
    print("| key_groups | build ms | lookup ms / execution | pmod only ms / execution | "
          "difference ms |")
    print("|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.sizes.split(",")):
        t = time.perf_counter()
        # The lookup whatever n (key_group_sql itself stops using it above 4,096 key groups).
        group = f"pmod(xxhash64(`id`), {n})"
        lookup_df = spark.range(10).select(F.expr(balanced_id_lookup_sql(group, n)).alias("kg"))
        build = (time.perf_counter() - t) * 1000
        frames = {
            "lookup": lookup_df,
            "plain": spark.range(10).select(F.expr(group).alias("kg")),
        }
        times: dict[str, list[float]] = {k: [] for k in frames}
        for _ in range(args.repeat + 1):  # the first round warms up each plan
            for name, df in frames.items():
                t = time.perf_counter()
                df.groupBy("kg").count().collect()
                times[name].append(time.perf_counter() - t)
        lookup = statistics.median(times["lookup"][1:]) * 1000
        plain = statistics.median(times["plain"][1:]) * 1000
        print(f"| {n:,} | {build:.0f} | {lookup:.0f} | {plain:.0f} | {lookup - plain:+.0f} |")
    spark.stop()
    return 0
