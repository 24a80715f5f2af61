"""Window workloads: interlace's window aggregation vs Spark's native windowed aggregation.

Data (numpy, fixed seed; the same for the three workloads): ``batches`` micro-batches of
``rows`` rows over ``keys`` uniform keys ``k``; event time advances ``span_s`` per micro-batch
(uniform within it, sorted), so no row is ever late; then one flush micro-batch, a single row
one day ahead, which moves the watermark past every window (Spark's following no-data batch
closes them all). ``v`` holds multiples of 1/64, so every sum is exact in any order; ``u``
(long, up to 10^6) feeds the distinct count. ``resolution_us`` rounds event times down to a
grid (whole seconds make rows exactly one session gap apart and on window bounds common).

Each workload computes ``count(*)``, ``sum(v)``, ``min(v)``, ``max(v)``, ``avg(v)`` and an
approximate distinct count of ``u`` per key, ``lateness_ms=5000``: tumbling 1 min, hopping
1 min / 10 s, session gap 30 s. interlace: ``window_aggregate(df, Window(kind=...,
group_by=["k"], max_groups_per_window=1_000_000, aggregations=[...]))`` (HyperLogLog p=14);
native: ``withWatermark("ts", L).groupBy(window(...) | session_window(...), "k").agg(...)`` in
append mode, ``approx_count_distinct(u)`` (HLL++ at rsd 0.05 unless ``--native-rsd``).

Verification: each engine's output has exactly the (window, key) rows of an exact pandas
oracle with identical count, sum, min, max and avg (to 1e-9), distinct counts within 4
standard errors of the exact ones, and the engines have the same rows as each other. Timed
runs' checksums leave the distinct count out (HLL differs by design) and round avg to 6 places.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from harness import compare as cmp
from harness import data as hdata
from harness.registry import Context, Engine, Size, Workload, register

SCHEMA = pa.schema([("k", pa.int64()), ("ts", hdata.TS), ("v", pa.float64()), ("u", pa.int64())])
LATENESS_MS = 5_000
FLUSH_AHEAD_US = 86_400 * 1_000_000
SPAN_S = 120.0
#: Collected and compared columns; timed runs checksum CHECKSUM (no HLL, avg rounded).
COLUMNS = ("window_start", "window_end", "k", "n", "s", "mn", "mx", "a", "d")
CHECKSUM = ("window_start", "window_end", "k", "n", "s", "mn", "mx", "round(a, 6)")
INTERLACE_HLL_TOL = 4 * 0.0081  # 4 standard errors of interlace's HLL (p=14)


@dataclasses.dataclass(frozen=True)
class Kind:
    """A window workload's window: ``kind`` and its durations (ms)."""

    kind: str
    duration_ms: int = 0
    hop_ms: int = 0
    gap_ms: int = 0

    @property
    def window_kw(self) -> dict[str, int]:
        """The ``Window(...)`` duration arguments."""
        if self.kind == "session":
            return {"gap_ms": self.gap_ms}
        kw = {"duration_ms": self.duration_ms}
        if self.kind == "hopping":
            kw["hop_ms"] = self.hop_ms
        return kw


Cols = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # k, t_us, v, u


@dataclasses.dataclass
class WindowData:
    """Per micro-batch ``(k, t_us, v, u)``; the last one is the flush row."""

    kind: Kind
    batches: list[Cols]
    keys: int
    cache: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def input_rows(self) -> int:
        """Rows of every micro-batch, the flush row included."""
        return sum(len(b[0]) for b in self.batches)

    @property
    def data_batches(self) -> int:
        """Micro-batches before the flush row's."""
        return len(self.batches) - 1

    def frame(self, upto: int | None = None) -> pd.DataFrame:
        """Micro-batches ``0..upto`` (all by default) as one frame ``k, t, v, u``."""
        bs = self.batches if upto is None else self.batches[:upto + 1]
        return pd.DataFrame({c: np.concatenate([b[i] for b in bs])
                             for i, c in enumerate(("k", "t", "v", "u"))})

    def spark_watermarks_ms(self) -> list[int]:
        """Spark's watermark W during each micro-batch (0 in the first), then after the last."""
        out, mx = [0], None
        for b in self.batches:
            m = int(b[1].max()) // 1000
            mx = m if mx is None else max(mx, m)
            out.append(max(out[-1], mx - LATENESS_MS))
        return out


def generate(kind: Kind, rows: int, batches: int, keys: int, seed: int,
             resolution_us: int = 1, span_s: float = SPAN_S) -> WindowData:
    """The data (deterministic in the arguments; ``kind`` does not change it)."""
    rng = np.random.default_rng(seed)
    span_us = int(span_s * 1_000_000)
    out: list[Cols] = []
    for i in range(batches):
        t = np.sort(hdata.T0_US + i * span_us + rng.integers(0, span_us, rows))
        t = t // resolution_us * resolution_us
        k = rng.integers(0, keys, rows, dtype=np.int64)
        v = rng.integers(0, 6_400, rows).astype(np.float64) / 64.0  # exact binary fractions
        u = rng.integers(0, 1_000_000, rows, dtype=np.int64)
        out.append((k, t, v, u))
    flush_t = hdata.T0_US + batches * span_us + FLUSH_AHEAD_US
    out.append((np.zeros(1, np.int64), np.array([flush_t], np.int64), np.zeros(1),
                np.zeros(1, np.int64)))
    return WindowData(kind, out, keys)


def generate_state(kind: Kind, rows: int, batches: int, keys: int, seed: int,
                   span_s: float = SPAN_S) -> WindowData:
    """The state sweep's data (issue 34).

    ``batches`` data micro-batches, the first opening one session per key (``keys`` rows,
    every key once, in the first span), the others ``rows`` rows at random keys; with a gap
    longer than the data's span every session stays open until the flush, so ``keys`` sets
    the state while the change per micro-batch stays ``rows``.
    """
    rng = np.random.default_rng(seed)
    span_us = int(span_s * 1_000_000)
    out: list[Cols] = []
    sizes = [keys] + [rows] * (batches - 1)
    for i, m in enumerate(sizes):
        t = np.sort(hdata.T0_US + i * span_us + rng.integers(0, span_us, m))
        k = rng.permutation(keys).astype(np.int64) if i == 0 else rng.integers(
            0, keys, m, dtype=np.int64)
        v = rng.integers(0, 6_400, m).astype(np.float64) / 64.0
        u = rng.integers(0, 1_000_000, m, dtype=np.int64)
        out.append((k, t, v, u))
    flush_t = hdata.T0_US + len(sizes) * span_us + FLUSH_AHEAD_US
    out.append((np.zeros(1, np.int64), np.array([flush_t], np.int64), np.zeros(1),
                np.zeros(1, np.int64)))
    return WindowData(kind, out, keys)


def write(data: WindowData, root: Path) -> None:
    """One Parquet file per micro-batch, the flush row's last."""
    hdata.write_batches(root / "events", [hdata.table(SCHEMA, list(b)) for b in data.batches])


def assign(kind: Kind, df: pd.DataFrame) -> pd.DataFrame:
    """One row per (input row, window), with ``start`` / ``end`` (µs).

    Sessions chain rows of a key while the gap is ``<= gap`` (sessions that touch merge, as
    Spark's ``session_window`` and interlace do).
    """
    if kind.kind == "session":
        gap = kind.gap_ms * 1000
        df = df.sort_values(["k", "t"], kind="stable").reset_index(drop=True)
        k, t = df["k"].to_numpy(), df["t"].to_numpy()
        new = np.ones(len(df), dtype=bool)
        new[1:] = (k[1:] != k[:-1]) | (t[1:] - t[:-1] > gap)
        sid = np.cumsum(new) - 1
        last = pd.Series(t).groupby(sid).transform("max").to_numpy()
        return df.assign(start=t[new][sid], end=last + gap)
    t = df["t"].to_numpy()
    d, hop = kind.duration_ms * 1000, (kind.hop_ms or kind.duration_ms) * 1000
    k_lo, k_hi = (t - d) // hop + 1, t // hop
    counts = k_hi - k_lo + 1
    rows = np.repeat(np.arange(len(t)), counts)
    offs = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    start = (np.repeat(k_lo, counts) + offs) * hop
    return df.iloc[rows].reset_index(drop=True).assign(start=start, end=start + d)


def oracle(data: WindowData) -> pd.DataFrame:
    """The exact output of the whole run: every window closed by the final watermark."""
    if "oracle" not in data.cache:
        a = assign(data.kind, data.frame())
        a = a[a["end"] <= data.spark_watermarks_ms()[-1] * 1000]
        out = a.groupby(["start", "end", "k"], sort=True).agg(
            n=("v", "size"), s=("v", "sum"), mn=("v", "min"), mx=("v", "max"), a=("v", "mean"),
            d=("u", "nunique")).reset_index()
        data.cache["oracle"] = out.rename(columns={"start": "window_start",
                                                   "end": "window_end"})
    return data.cache["oracle"]


def held(data: WindowData, batch_id: int, wm_ms: int) -> int:
    """(window, key) slots both engines hold after micro-batch ``batch_id`` (watermark W)."""
    a = assign(data.kind, data.frame(batch_id))
    a = a[a["end"] > wm_ms * 1000] if wm_ms > 0 else a
    return int(len(a.drop_duplicates(["start", "k"])))


def spec(kind: Kind, key_groups: int, keys: int = 0) -> Any:
    """interlace's ``Window`` spec with the six aggregations; the groups cap at 1,000,000,
    or twice ``keys`` (the state sweep's open sessions) where that is more."""
    from interlace import Aggregation, Window

    aggs = [
        Aggregation(agg="count", as_="n"),
        Aggregation(agg="sum", column="v", as_="s"),
        Aggregation(agg="min", column="v", as_="mn"),
        Aggregation(agg="max", column="v", as_="mx"),
        Aggregation(agg="avg", column="v", as_="a"),
        Aggregation(agg="count_distinct", column="u", mode="approximate", as_="d"),
    ]
    return Window(kind=kind.kind, event_time_column="ts", lateness_ms=LATENESS_MS,
                  group_by=["k"], max_groups_per_window=max(1_000_000, 2 * keys),
                  aggregations=aggs,
                  key_groups=key_groups, **kind.window_kw)


def source(ctx: Context) -> Any:
    """The events as a stream."""
    return hdata.read_stream(ctx.spark, ctx.root / "events", SCHEMA)


def build_interlace(ctx: Context) -> Any:
    """``window_aggregate`` with the six aggregations."""
    from interlace import window_aggregate

    return window_aggregate(source(ctx), spec(ctx.data.kind, ctx.key_groups, ctx.data.keys))


def prepared(ctx: Context) -> Any:
    """``prepare_window`` on the workload's events: what the floors run on."""
    from interlace import prepare_window

    return prepare_window(source(ctx), spec(ctx.data.kind, ctx.key_groups, ctx.data.keys))


def native(src: Any, kind: Kind, rsd: float | None) -> Any:
    """Spark's windowed aggregation of ``src`` with the same windows and aggregations."""
    from pyspark.sql import functions as F

    if kind.kind == "session":
        win = F.session_window("ts", f"{kind.gap_ms} milliseconds")
    elif kind.kind == "hopping":
        win = F.window("ts", f"{kind.duration_ms} milliseconds", f"{kind.hop_ms} milliseconds")
    else:
        win = F.window("ts", f"{kind.duration_ms} milliseconds")
    distinct = F.approx_count_distinct("u") if rsd is None else F.approx_count_distinct("u", rsd)
    agg = (src.withWatermark("ts", f"{LATENESS_MS} milliseconds").groupBy(win.alias("w"), "k")
           .agg(F.count(F.lit(1)).alias("n"), F.sum("v").alias("s"), F.min("v").alias("mn"),
                F.max("v").alias("mx"), F.avg("v").alias("a"), distinct.alias("d")))
    return agg.select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                      *COLUMNS[2:])


def build_native(ctx: Context) -> Any:
    """The native aggregation on the workload's events."""
    return native(source(ctx), ctx.data.kind, ctx.options.get("native_rsd"))


def engines(options: Mapping[str, Any], kind: Kind | None = None) -> list[Engine]:
    """Native, interlace, and (``floor``) the no-op floor and the floor that emits rows; for
    every kind also the floor that prepares its worker as interlace does (``floor-frozen``:
    ``prepare_worker``, the garbage collector frozen and PySpark's output padding sped up),
    that floor emitting interlace's output rows (``floor-out-frozen``), and the floors on a
    combiner's partials (with and without the distinct values)."""
    from harness.floor import floor_engines, floor_on

    out = [Engine("native", "native", build_native, COLUMNS),
           Engine("interlace", "interlace", build_interlace, COLUMNS)]
    if options.get("floor"):
        out += floor_engines(prepared, lambda d: len(oracle(d)), COLUMNS)
    if options.get("floor") and kind is not None:
        out.append(Engine("floor-frozen", "floor",
                          lambda ctx: floor_on(prepared(ctx), freeze=True), COLUMNS))
        out.append(Engine("floor-out-frozen", "floor", build_frozen_output_floor, COLUMNS,
                          floor_emits=True))
        out.append(Engine("floor-combined", "floor", build_combined_floor, COLUMNS))
        out.append(Engine("floor-combined-nd", "floor",
                          lambda ctx: build_combined_floor(ctx, distinct=False), COLUMNS))
    return out


def build_frozen_output_floor(ctx: Context) -> Any:
    """The frozen floor that also emits as many (constant) output rows as interlace does:
    the least any ``applyInPandasWithState`` operator that emits this output can cost."""
    from harness.floor import floor_on

    ratio = len(oracle(ctx.data)) / max(ctx.data.input_rows, 1)
    return floor_on(prepared(ctx), ratio, freeze=True)


def build_combined_floor(ctx: Context, distinct: bool = True) -> Any:
    """The no-op floor on a combiner's partials (issue 32, lever 1; ``WindowFold``: per
    tumbling window, hopping pane or session-window mini-session). ``distinct`` False:
    partials without the distinct values (the ceiling of a fold of count, sum, min, max and
    avg only)."""
    import math

    from harness.floor import WindowFold, combined_floor_on

    kind = ctx.data.kind
    s = spec(kind, ctx.key_groups, ctx.data.keys)
    width_ms = {"tumbling": kind.duration_ms, "hopping": math.gcd(kind.duration_ms, kind.hop_ms),
                "session": kind.gap_ms}[kind.kind]
    fold = WindowFold(kind.kind, width_ms * 1000, "k", "v", "u" if distinct else None)
    return combined_floor_on(prepared(ctx), fold, s.watermark_delay_ms)


def native_tolerance(rsd: float | None) -> float:
    """Tolerance of one native distinct count: 4 standard errors of its HLL++."""
    return 4 * (rsd if rsd is not None else 0.05)


def agreement(got: pd.DataFrame, want: pd.DataFrame, tol_rel: float, what: str) -> list[cmp.Check]:
    """Same (window, key) rows; equal count/sum/min/max, avg to 1e-9; distinct within tolerance.

    ``tol_rel``: the allowed |error| of one distinct count, relative, plus 2 (HLL++ at Spark's
    default has 512 registers, so a collision among 10 values is common); the mean relative
    error must stay below a third of ``tol_rel``.
    """
    keys = ["window_start", "window_end", "k"]
    g = cmp.normalize(got, COLUMNS, times=keys[:2], ints=("k", "n", "d"))
    w = cmp.normalize(want, COLUMNS, times=keys[:2], ints=("k", "n", "d"))
    if len(g) != len(w) or not g[keys].equals(w[keys]):
        only_g, only_w = cmp.diff_rows(g[keys], w[keys])
        return [cmp.Check(f"{what}: (window, key) rows", False,
                          f"{len(g):,} vs {len(w):,} rows; {only_g:,} only in the first, "
                          f"{only_w:,} only in the second")]
    checks = [cmp.Check(f"{what}: (window, key) rows", True, f"{len(g):,} rows, the same")]
    bad = {c: int((g[c].to_numpy(float) != w[c].to_numpy(float)).sum())
           for c in ("n", "s", "mn", "mx")}
    bad["a (1e-9)"] = int((~np.isclose(g["a"].to_numpy(float), w["a"].to_numpy(float),
                                       rtol=1e-9, atol=1e-9)).sum())
    checks.append(cmp.Check(f"{what}: count, sum, min, max, avg", not any(bad.values()),
                            "identical" if not any(bad.values()) else
                            ", ".join(f"{c} differs on {n:,} rows" for c, n in bad.items() if n)))
    dg, dw = g["d"].to_numpy(np.int64), w["d"].to_numpy(np.int64)
    err = np.abs(dg - dw)
    mean_rel = float((err / np.maximum(dw, 1)).mean()) if len(err) else 0.0
    ok = bool((err <= tol_rel * dw + 2).all()) and mean_rel <= tol_rel / 3
    checks.append(cmp.Check(f"{what}: approximate distinct", ok,
                            f"mean rel. error {mean_rel:.3%}, max abs. error "
                            f"{int(err.max()) if len(err) else 0} (tolerance {tol_rel:.3f} "
                            "relative + 2)"))
    return checks


def verify(data: WindowData, frames: Mapping[str, Any],
           options: Mapping[str, Any]) -> list[cmp.Check]:
    """Each engine vs the exact oracle, and interlace vs native (``native_rsd``: HLL++'s)."""
    want = oracle(data)
    tol = {"native": native_tolerance(options.get("native_rsd")),
           "interlace": INTERLACE_HLL_TOL}
    checks = []
    for e, f in frames.items():
        checks += agreement(f, want, tol.get(e, INTERLACE_HLL_TOL), f"{e} vs exact oracle")
    if "native" in frames and "interlace" in frames:
        checks += agreement(frames["interlace"], frames["native"],
                            tol["native"] + tol["interlace"], "interlace vs native")
    return checks


def _register(name: str, label: str, kind: Kind, state: bool = False) -> None:
    from interlace.state.keygroups import DEFAULT_KEY_GROUPS

    def gen(size: Size) -> WindowData:
        rows = size.rows or (5_000 if size.quick else 100_000)
        if state:
            return generate_state(kind, rows, size.batches or (2 if size.quick else 6),
                                  size.keys or (5_000 if size.quick else 100_000), size.seed)
        return generate(kind, rows, size.batches or (1 if size.quick else 4),
                        size.keys or (500 if size.quick else 10_000), size.seed,
                        size.resolution_us, size.span_s(SPAN_S, 100_000, rows))

    what = ("; micro-batch 0 opens one session per key, the others add `rows` rows at random "
            "keys" if state else "")
    register(Workload(
        name=name, family="state" if state else "window", label=label, in_full=not state,
        description=(f"{label}; count, sum, min, max, avg, approximate distinct; L=5,000 ms"
                     + what),
        generate=gen, write=write, engines=lambda options: engines(options, kind),
        verify=verify,
        default_key_groups=lambda: DEFAULT_KEY_GROUPS, checksum=CHECKSUM, held=held,
        held_label="(window, key) slots"))


_register("window-tumbling", "tumbling 1 min", Kind("tumbling", duration_ms=60_000))
_register("window-hopping", "hopping 1 min / 10 s", Kind("hopping", duration_ms=60_000,
                                                          hop_ms=10_000))
_register("window-session", "session gap 30 s", Kind("session", gap_ms=30_000))
# The state sweep (issue 34): `--keys` open sessions (a 1-hour gap outlives the data's 12
# minutes), the change stays 100,000 rows per micro-batch.
_register("window-session-state", "session gap 1 h, 100k rows per micro-batch",
          Kind("session", gap_ms=3_600_000), state=True)
