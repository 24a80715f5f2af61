"""Cost of the foreign-key join's replicated right table, per key group (no Spark).

Every key group holds the whole right table (docs/foreign-key-join.md), so per micro-batch
each key group that is called decodes, updates and re-encodes it. This measures, for right
tables of 1k / 10k / 100k keys and a key group holding 10k left rows:

* the state blob's bytes (total, per right key, per left row),
* decode + step + encode time of one call that applies 1% of the right keys and 1k left
  updates (``emit="eager"``), the call every key group runs in every micro-batch,
* the same call with no right update (a left-only micro-batch).

Run: ``.venv/bin/python bench/run.py state fk-calls`` (prints a Markdown table).
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import time

import pyarrow as pa
from interlace.operators.common.prepare import HOME_COLUMN, SIDE_COLUMN
from interlace.operators.foreign_key import ForeignKeyJoinPlan, step
from interlace.state.buffers import TIME_COLUMN
from interlace.state.foreign_key import (
    ForeignKeyState,
    decode_foreign_key_state,
    encode_foreign_key_state,
)

from interlace import ForeignKeyJoin

TS = pa.timestamp("ns")
LEFT = pa.schema([("order_id", pa.int64()), ("product_id", pa.int64()), ("qty", pa.int64()),
                  ("ts", TS)])
RIGHT = pa.schema([("product_id", pa.int64()), ("name", pa.string()), ("price", pa.float64()),
                   ("ts", TS)])
BASE = dt.datetime(2026, 1, 1)


def batch(plan: ForeignKeyJoinPlan, left: list[tuple[int, int, int]],
          right: list[tuple[int, str, float]], t_us: int) -> pa.Table:
    n_l, n_r = len(left), len(right)
    n = n_l + n_r
    cols = {
        SIDE_COLUMN: pa.array([0] * n_l + [1] * n_r, pa.int32()),
        TIME_COLUMN: pa.array([t_us] * n, pa.int64()),
        HOME_COLUMN: pa.array([True] * n),
    }
    lp, rp = plan.sides[0].payload, plan.sides[1].payload
    ts = pa.array([BASE + dt.timedelta(microseconds=t_us)] * n, TS)
    for i, f in enumerate(lp):
        if i < 3:
            cols[f.name] = pa.array([row[i] for row in left] + [None] * n_r, f.type)
        else:
            cols[f.name] = ts
    for i, f in enumerate(rp):
        if i < 3:
            cols[f.name] = pa.array([None] * n_l + [row[i] for row in right], f.type)
        else:
            cols[f.name] = ts
    return pa.Table.from_pydict(cols, schema=plan.input_schema)


def measure(n_right: int, n_left: int = 10_000, repeat: int = 5) -> dict[str, float]:
    rnd = random.Random(1)
    spec = ForeignKeyJoin(left_keys=["order_id"], foreign_key_columns=["product_id"],
                          right_keys=["product_id"], how="left", emit="eager",
                          event_time_column="ts")
    plan = ForeignKeyJoinPlan.from_schemas(spec, LEFT, RIGHT)
    state = ForeignKeyState.empty(plan.left_schema, plan.right_schema, plan.held_schema)
    products = [(p, f"product {p}", rnd.random() * 100) for p in range(n_right)]
    orders = [(o, rnd.randrange(n_right), rnd.randrange(1, 9)) for o in range(n_left)]
    state = step(plan, state, batch(plan, orders, products, 1_000_000), None).state
    blob = encode_foreign_key_state(state, plan.fp)
    right_only = ForeignKeyState(state.left.slice(0, 0), state.right, state.held, state.seq)
    right_bytes = len(encode_foreign_key_state(right_only, plan.fp))

    def call(left: list[tuple[int, int, int]], right: list[tuple[int, str, float]],
             t_us: int) -> float:
        start = time.perf_counter()
        st = decode_foreign_key_state(blob, plan.fp, plan.left_schema, plan.right_schema,
                                      plan.held_schema)
        res = step(plan, st, batch(plan, left, right, t_us), None)
        encode_foreign_key_state(res.state, plan.fp)
        return time.perf_counter() - start

    times, left_only = [], []
    for r in range(repeat):
        upd = [(p, f"new {p}", 1.0) for p in rnd.sample(range(n_right), max(1, n_right // 100))]
        lupd = [(rnd.randrange(n_left), rnd.randrange(n_right), 1) for _ in range(1_000)]
        times.append(call(lupd, upd, 2_000_000 + r))
        left_only.append(call(lupd, [], 2_000_000 + r))
    return {
        "right_keys": n_right,
        "left_rows": n_left,
        "blob_bytes": len(blob),
        "right_table_bytes": right_bytes,
        "bytes_per_right_key": right_bytes / n_right,
        "call_ms": statistics.median(times) * 1000,
        "left_only_call_ms": statistics.median(left_only) * 1000,
    }


def parser() -> argparse.ArgumentParser:
    """The command line (no options)."""
    return argparse.ArgumentParser(
        prog="bench/run.py state fk-calls", description=__doc__.split("\n\n")[0])


def main(argv: list[str] | None = None) -> None:
    parser().parse_args(argv)
    print("| right keys | left rows / key group | blob bytes | right table bytes | "
          "bytes / right key | call ms (1% right + 1k left updates) | call ms (1k left only) |")
    print("|---|---|---|---|---|---|---|")
    for n_right in (1_000, 10_000, 100_000):
        m = measure(n_right)
        print(f"| {m['right_keys']:,} | {m['left_rows']:,} | {m['blob_bytes']:,} | "
              f"{m['right_table_bytes']:,} | {m['bytes_per_right_key']:.1f} | "
              f"{m['call_ms']:.1f} | {m['left_only_call_ms']:.1f} |")
