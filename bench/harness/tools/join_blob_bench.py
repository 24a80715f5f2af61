"""Bytes and encode / decode time of one key group's join blob, format 1 vs 2 (issue 13).

No Spark. A key group holding ``N`` buffered rows per side of the orders / payments join of
``examples/orders_payments.toml`` (orders: id, customer, amount, order_ts; payments: payment id,
order id, paid, pay_ts), event times one every 50 ms, half the rows matched. Format 1 is the
previous release's ``encode_join_state`` / ``decode_join_state`` (copied below from git commit
2511b74: ``__il_tus`` stored); format 2 is the current one (``__il_tus`` left out and
recomputed from the event-time column). The two are timed alternately, ``REPEATS`` times each,
so outside load hits both alike; prints the blob bytes and the median wall and
process CPU times.

Run: ``.venv/bin/python bench/run.py micro join-blob [N]`` (default 10000).
"""

from __future__ import annotations

import argparse
import statistics
import time

import pyarrow as pa
from interlace.operators.join.plan import JoinPlan
from interlace.state import blob
from interlace.state.buffers import (
    JOIN_IPC_COMPRESSION,
    JoinBuffers,
    decode_join_state,
    encode_join_state,
    ipc_to_table,
    table_to_ipc,
)

from interlace import Join

TS = pa.timestamp("ns")
ORDERS = pa.schema([("order_id", pa.int64()), ("customer", pa.string()),
                    ("amount", pa.float64()), ("order_ts", TS)])
PAYMENTS = pa.schema([("payment_id", pa.string()), ("order_id", pa.int64()),
                      ("paid", pa.float64()), ("pay_ts", TS)])
T0_US = 1_772_442_000_000_000  # 2026-03-02 09:00 UTC
REPEATS = 100


def buffers(plan: JoinPlan, n: int) -> JoinBuffers:
    """``n`` rows per side, as ``step`` leaves them (µs time, matched flag, payload)."""
    t_us = [T0_US + i * 50_000 for i in range(n)]
    ts = pa.array([t * 1000 for t in t_us], TS)
    matched = [i % 2 == 0 for i in range(n)]
    left = pa.Table.from_arrays(
        [pa.array(t_us, pa.int64()), pa.array(matched), pa.array(range(n), pa.int64()),
         pa.array([f"customer-{i % 997}" for i in range(n)]),
         pa.array([round(i * 0.37 % 500, 2) for i in range(n)]), ts],
        schema=plan.left_buffer_schema)
    right = pa.Table.from_arrays(
        [pa.array([t + 20_000_000 for t in t_us], pa.int64()), pa.array(matched),
         pa.array([f"pay-{i:08d}" for i in range(n)]), pa.array(range(n), pa.int64()),
         pa.array([round(i * 0.37 % 500, 2) for i in range(n)]),
         pa.array([(t + 20_000_000) * 1000 for t in t_us], TS)],
        schema=plan.right_buffer_schema)
    return JoinBuffers(left, right, {})


def v1_encode(buffers: JoinBuffers, fp: str) -> bytes:
    """The previous release's ``encode_join_state`` (format 1 body)."""
    body = {
        "left": table_to_ipc(buffers.left, JOIN_IPC_COMPRESSION),
        "right": table_to_ipc(buffers.right, JOIN_IPC_COMPRESSION),
        "extra": dict(sorted(buffers.extra.items())),
    }
    return blob.encode("join", fp, body)


def v1_decode(data: bytes, fp: str, left_schema: pa.Schema, right_schema: pa.Schema) -> JoinBuffers:
    """The previous release's ``decode_join_state`` (format 1 body, no migration needed)."""
    body = blob.decode(data, kind="join", fp=fp)
    left = ipc_to_table(body["left"])
    right = ipc_to_table(body["right"])
    for table, schema in ((left, left_schema), (right, right_schema)):
        assert table.schema.equals(schema)
    extra = {str(k): int(v) for k, v in dict(body.get("extra", {})).items()}
    return JoinBuffers(left, right, extra)


def run(n: int) -> None:
    spec = Join(left_keys=["order_id"], right_keys=["order_id"], how="left", lower_ms=0,
                upper_ms=600_000, left_event_time_column="order_ts",
                right_event_time_column="pay_ts")
    plan = JoinPlan.from_schemas(spec, ORDERS, PAYMENTS)
    schemas = (plan.left_buffer_schema, plan.right_buffer_schema)
    buf = buffers(plan, n)
    cases = {
        "format 1": (lambda: v1_encode(buf, plan.fp), lambda d: v1_decode(d, plan.fp, *schemas)),
        "format 2": (lambda: encode_join_state(buf, plan.fp, plan.time_columns),
                     lambda d: decode_join_state(d, plan.fp, *schemas)),
    }
    data = {name: enc() for name, (enc, _) in cases.items()}
    for name, (_, dec) in cases.items():
        got = dec(data[name])
        assert got.left.equals(buf.left) and got.right.equals(buf.right), name
    times: dict[str, dict[str, list[float]]] = {
        name: {k: [] for k in ("enc", "dec", "enc_cpu", "dec_cpu")} for name in cases}
    for _ in range(REPEATS):
        for name, (enc, dec) in cases.items():
            t0, c0 = time.perf_counter(), time.process_time()
            enc()
            t1, c1 = time.perf_counter(), time.process_time()
            dec(data[name])
            t2, c2 = time.perf_counter(), time.process_time()
            for key, value in (("enc", t1 - t0), ("dec", t2 - t1), ("enc_cpu", c1 - c0),
                               ("dec_cpu", c2 - c1)):
                times[name][key].append(value)
    print(f"{n} rows per side, median of {REPEATS} alternating runs (wall / CPU of the process):")
    for name in cases:
        ms = {k: statistics.median(v) * 1000 for k, v in times[name].items()}
        print(f"  {name}: blob {len(data[name]):,} bytes ({len(data[name]) / (2 * n):.1f} B/row), "
              f"encode {ms['enc']:.2f} / {ms['enc_cpu']:.2f} ms, "
              f"decode {ms['dec']:.2f} / {ms['dec_cpu']:.2f} ms")


def parser() -> argparse.ArgumentParser:
    """The command line: rows per side."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py micro join-blob", description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", type=int, nargs="?", default=10_000, help="rows per side (10000)")
    return ap


def main(argv: list[str] | None = None) -> None:
    run(parser().parse_args(argv).rows)
