"""Join workloads: interlace's stream-stream join vs Spark's native interval join.

Data (numpy, fixed seed): ``batches`` micro-batches of ``rows`` rows per side; event time
advances ``span_s`` per micro-batch on both sides. Left rows are evenly spaced plus uniform
jitter ``+-jitter_ms``. A fraction ``partner`` of right rows copies the key of a left row at
that row's time plus uniform ``+-window_ms/2`` (so it matches it); the rest get a random key.
Right rows are ordered by that time plus their own jitter. ``lateness_ms > 2 * jitter_ms``,
so no row is late in either engine. The outer workload adds one sentinel row per side (key
-1, a day ahead) after the data, so the watermark passes every row and both engines emit
every unmatched row; sinks drop key -1.

interlace: ``stream_join(left, right, Join(how=..., time_window_ms=W, lateness_ms=L))``;
native: ``withWatermark(ts, L)`` on both sides and
``l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL W AND l.ts + INTERVAL W`` (``how`` alike).
Verification: both engines' whole outputs are identical, and their row counts (pairs,
unmatched rows of each side) equal the exact ones computed from the data with numpy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from harness import compare as cmp
from harness import data as hdata
from harness.registry import Context, Engine, Size, Workload, register

SCHEMA = pa.schema([("k", pa.int64()), ("ts", hdata.TS), ("v", pa.float64())])
COLUMNS = ("left_k", "left_ts", "left_v", "right_k", "right_ts", "right_v")
SENTINEL_KEY = -1
FLUSH_AHEAD_US = 86_400 * 1_000_000


@dataclasses.dataclass(frozen=True)
class Shape:
    """A join workload's parameters (see the module docstring)."""

    keys: int
    window_ms: int
    how: str = "inner"
    lateness_ms: int = 2_000
    jitter_ms: int = 500
    span_s: float = 100.0
    partner: float = 0.9

    @property
    def flush(self) -> bool:
        """Outer joins get sentinel rows, so every unmatched row is emitted by the end."""
        return self.how != "inner"


Cols = tuple[np.ndarray, np.ndarray, np.ndarray]  # k, t_us, v


@dataclasses.dataclass
class JoinData:
    """Per side, per data micro-batch, ``(k, t_us, v)`` (sentinels not included)."""

    shape: Shape
    left: list[Cols]
    right: list[Cols]

    @property
    def input_rows(self) -> int:
        """Rows of both sides, sentinels included."""
        n = sum(len(b[0]) for b in self.left) + sum(len(b[0]) for b in self.right)
        return n + (2 if self.shape.flush else 0)

    @property
    def data_batches(self) -> int:
        """Micro-batches holding data."""
        return len(self.left)


def generate(shape: Shape, rows: int, batches: int, seed: int) -> JoinData:
    """The data of ``shape`` (deterministic in its arguments)."""
    rng = np.random.default_rng(seed)
    n = rows * batches
    span_us = int(shape.span_s * 1_000_000)
    jit = shape.jitter_ms * 1000
    half = shape.window_ms * 1000 // 2
    base_l = (np.arange(n, dtype=np.int64) * span_us) // rows
    lk = rng.integers(0, shape.keys, n, dtype=np.int64)
    lt = hdata.T0_US + base_l + rng.integers(-jit, jit + 1, n)
    is_partner = rng.random(n) < shape.partner
    rk = np.where(is_partner, lk, rng.integers(0, shape.keys, n, dtype=np.int64))
    base_r = base_l + rng.integers(-half, half + 1, n)
    order = np.argsort(base_r, kind="stable")
    rk, base_r = rk[order], base_r[order]
    rt = hdata.T0_US + base_r + rng.integers(-jit, jit + 1, n)
    lv, rv = rng.random(n), rng.random(n)

    def cut(k: np.ndarray, t: np.ndarray, v: np.ndarray) -> list[Cols]:
        return [(k[i * rows:(i + 1) * rows], t[i * rows:(i + 1) * rows],
                 v[i * rows:(i + 1) * rows]) for i in range(batches)]

    return JoinData(shape, cut(lk, lt, lv), cut(rk, rt, rv))


def generate_state(shape: Shape, rows: int, batches: int, keys: int, seed: int) -> JoinData:
    """The state sweep's data (issue 34): ``batches`` data micro-batches per side, the first
    ``keys`` rows per side (left keys ``0..keys-1``, right keys ``keys..2*keys-1``, each once:
    they fill the buffers without matching each other), the others ``rows`` rows per side.
    A later row's key is, with probability 1/2, a random key of the other side's first
    micro-batch (one buffered match), else a key new to this micro-batch; a right row takes
    a left row's key of its micro-batch with probability ``shape.partner``. So the output
    per micro-batch does not depend on ``keys``, and a time bound longer than the data's span
    keeps every row buffered: ``keys`` sets the state while the change stays."""
    rng = np.random.default_rng(seed)
    span_us, jit = int(shape.span_s * 1_000_000), shape.jitter_ms * 1000
    left: list[Cols] = []
    right: list[Cols] = []
    for i in range(batches):
        m = keys if i == 0 else rows
        times = [np.sort(hdata.T0_US + i * span_us + rng.integers(0, span_us, m))
                 for _ in range(2)]
        if i == 0:
            lk = rng.permutation(keys).astype(np.int64)
            rk = keys + rng.permutation(keys).astype(np.int64)
        else:
            fresh = 2 * keys + 2 * rows * i + np.arange(2 * m, dtype=np.int64)
            lk = np.where(rng.random(m) < 0.5, keys + rng.integers(0, keys, m), fresh[:m])
            own = np.where(rng.random(m) < 0.5, rng.integers(0, keys, m), fresh[m:])
            rk = np.where(rng.random(m) < shape.partner, rng.permutation(lk), own)
        left.append((lk, times[0] + rng.integers(-jit, jit + 1, m), rng.random(m)))
        right.append((rk, times[1] + rng.integers(-jit, jit + 1, m), rng.random(m)))
    return JoinData(shape, left, right)


def write(data: JoinData, root: Path) -> None:
    """One Parquet file per side per micro-batch (then the sentinel's, for outer joins)."""
    s = data.shape
    end = hdata.T0_US + int((data.data_batches + 1) * s.span_s * 1_000_000) + FLUSH_AHEAD_US
    sentinel = (np.array([SENTINEL_KEY]), np.array([end]), np.zeros(1))
    for side, batches in (("left", data.left), ("right", data.right)):
        cols = [*batches, sentinel] if s.flush else batches
        hdata.write_batches(root / side, [hdata.table(SCHEMA, list(c)) for c in cols])


def oracle(data: JoinData) -> dict[str, int]:
    """Exact counts: pairs (equal keys, ``|r.t - l.t| <= W``), rows of each side matched."""
    w_us = data.shape.window_ms * 1000
    lk, lt = (np.concatenate(c) for c in list(zip(*data.left, strict=True))[:2])
    rk, rt = (np.concatenate(c) for c in list(zip(*data.right, strict=True))[:2])
    # Relative times (from an hour before T0, +-W) stay below 2**34 µs (4.7 hours); keys
    # below 2**29.
    shift = np.int64(1) << np.int64(34)
    base = hdata.T0_US - 3_600_000_000

    def matches(ak: np.ndarray, at: np.ndarray, bk: np.ndarray, bt: np.ndarray) -> np.ndarray:
        b = np.sort(bk * shift + (bt - base))
        q = ak * shift + (at - base)
        return np.searchsorted(b, q + w_us, "right") - np.searchsorted(b, q - w_us, "left")

    per_left, per_right = matches(lk, lt, rk, rt), matches(rk, rt, lk, lt)
    return {"pairs": int(per_left.sum()), "left_rows": len(lk), "right_rows": len(rk),
            "left_matched": int((per_left > 0).sum()),
            "right_matched": int((per_right > 0).sum())}


def expected_rows(data: JoinData) -> dict[str, int]:
    """Output rows by kind for the workload's ``how``: pairs, left-only, right-only."""
    o = oracle(data)
    how = data.shape.how
    return {"pairs": o["pairs"],
            "left_only": o["left_rows"] - o["left_matched"] if how in ("left", "full") else 0,
            "right_only": o["right_rows"] - o["right_matched"] if how in ("right", "full") else 0}


def held(data: JoinData, batch_id: int, wm_ms: int) -> int:
    """Rows interlace buffers after micro-batch ``batch_id`` ran with Spark watermark ``wm_ms``.

    A row is evicted once ``wm > t + W`` (both sides, symmetric window); with ``wm <= 0``
    nothing is.
    """
    w_us = data.shape.window_ms * 1000
    total = 0
    for side in (data.left, data.right):
        t = np.concatenate([b[1] for b in side[:batch_id + 1]])
        total += len(t) if wm_ms <= 0 else int((wm_ms * 1000 <= t + w_us).sum())
    return total


def _sides(ctx: Context) -> tuple[Any, Any]:
    return (hdata.read_stream(ctx.spark, ctx.root / "left", SCHEMA),
            hdata.read_stream(ctx.spark, ctx.root / "right", SCHEMA))


def spec(shape: Shape, key_groups: int) -> Any:
    """interlace's ``Join`` spec for ``shape``."""
    from interlace import Join

    return Join(left_keys=["k"], right_keys=["k"], how=shape.how, time_window_ms=shape.window_ms,
                event_time_column="ts", lateness_ms=shape.lateness_ms, key_groups=key_groups)


def build_interlace(ctx: Context) -> Any:
    """``stream_join`` on the workload's sides."""
    from interlace import stream_join

    return stream_join(*_sides(ctx), spec(ctx.data.shape, ctx.key_groups))


def build_native(ctx: Context) -> Any:
    """Spark's stream-stream interval join with the same bounds, lateness and ``how``."""
    from pyspark.sql import functions as F

    s = ctx.data.shape
    delay, w = f"{s.lateness_ms} milliseconds", s.window_ms
    left, right = _sides(ctx)
    cond = F.expr(f"l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL {w} MILLISECONDS "
                  f"AND l.ts + INTERVAL {w} MILLISECONDS")
    how = {"inner": "inner", "left": "left_outer", "right": "right_outer",
           "full": "full_outer"}[s.how]
    joined = left.withWatermark("ts", delay).alias("l").join(
        right.withWatermark("ts", delay).alias("r"), cond, how)
    return joined.select(*(F.col(f"{side[0]}.{c}").alias(f"{side}_{c}")
                           for side in ("left", "right") for c in ("k", "ts", "v")))


def prepared(ctx: Context) -> Any:
    """``prepare_join`` on the workload's sides: what the floors run on."""
    from interlace import prepare_join

    return prepare_join(*_sides(ctx), spec(ctx.data.shape, ctx.key_groups))


def engines(options: Mapping[str, Any]) -> list[Engine]:
    """Native, interlace, and (options) the floor and shim variants."""
    from harness import variants
    from harness.floor import floor_engines

    out = [Engine("native", "native", build_native, COLUMNS, stream_join=True),
           Engine("interlace", "interlace", build_interlace, COLUMNS)]
    if options.get("floor"):
        out += floor_engines(prepared, lambda d: sum(expected_rows(d).values()), COLUMNS)
    out += [variants.engine(name, _sides, spec, COLUMNS) for name in options.get("variants", ())]
    return out


def verify(data: JoinData, frames: Mapping[str, Any],
           _options: Mapping[str, Any]) -> list[cmp.Check]:
    """Every engine's output vs interlace's (exact), and its row counts vs the data's."""
    want = expected_rows(data)
    norm = {e: cmp.normalize(f, COLUMNS, times=("left_ts", "right_ts"),
                             ints=("left_k", "right_k")) for e, f in frames.items()}
    checks = []
    for e, f in norm.items():
        got = {"pairs": int((f["left_k"].notna() & f["right_k"].notna()).sum()),
               "left_only": int(f["right_k"].isna().sum()),
               "right_only": int(f["left_k"].isna().sum())}
        for kind, n in want.items():
            if n or got[kind]:
                checks.append(cmp.count_check(f"{e}: {kind.replace('_', '-')} rows vs the data",
                                              got[kind], n))
        if e != "interlace" and "interlace" in norm:
            checks.append(cmp.same_rows(norm["interlace"], f, f"interlace vs {e}: whole output"))
    return checks


def _register(name: str, label: str, shape: Shape, state: bool = False) -> None:
    def gen(size: Size) -> JoinData:
        rows = size.rows or (10_000 if size.quick else 100_000)
        if state:
            return generate_state(shape, rows, size.batches or (2 if size.quick else 6),
                                  size.keys or (5_000 if size.quick else shape.keys),
                                  size.seed + _SEEDS[name])
        batches = size.batches or (1 if size.quick else 4)
        sh = dataclasses.replace(shape, keys=size.keys or shape.keys,
                                 span_s=size.span_s(shape.span_s, 100_000, rows))
        return generate(sh, rows, batches, size.seed + _SEEDS[name])

    from interlace.state.keygroups import DEFAULT_JOIN_KEY_GROUPS

    register(Workload(
        name=name, family="state" if state else "join", label=label, in_full=not state,
        description=(f"{shape.keys:,} keys, how={shape.how!r}, W={shape.window_ms:,} ms, "
                     f"L={shape.lateness_ms:,} ms"
                     + ("; micro-batch 0 buffers `keys` rows per side, the others add `rows` "
                        "per side" if state else "")),
        generate=gen, write=write, engines=engines, verify=verify,
        default_key_groups=lambda: DEFAULT_JOIN_KEY_GROUPS,
        sink_filter=f"coalesce(left_k, right_k) <> {SENTINEL_KEY}" if shape.flush else None,
        held=held, held_label="buffered rows"))


# Seed offsets of join_bench's workloads (a, b, c), so the data is the one measured before.
_SEEDS = {"join-100k": 0, "join-10k": 1, "join-hot": 2, "join-outer": 3, "join-state": 4}
_register("join-100k", "join, 100k keys", Shape(keys=100_000, window_ms=5_000))
_register("join-10k", "join, 10k keys", Shape(keys=10_000, window_ms=5_000))
# Hot keys: 10 events/s per key per side, so the window stays small for the output to stay
# manageable (~5 matches per left row).
_register("join-hot", "join, 100 hot keys", Shape(keys=100, window_ms=200, jitter_ms=50))
_register("join-outer", "full outer join, 10k keys", Shape(keys=10_000, window_ms=5_000,
                                                           how="full"))
# The state sweep (issue 34): `--keys` rows buffered per side (a 1-hour time bound outlives
# the data's 10 minutes), the change stays 100,000 rows per side per micro-batch.
_register("join-state", "join, 1 h bound, 100k rows per side per micro-batch",
          Shape(keys=100_000, window_ms=3_600_000), state=True)
