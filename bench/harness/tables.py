"""Table-join workloads: interlace's stream-table and table-table joins vs Spark's joins.

* ``table-st10k`` / ``table-st1m``: a stream of ``rows`` rows per micro-batch (``k, ts, v``)
  and a changelog table (``k, ts, tv``) of 10k / 1M keys whose full snapshot arrives in
  micro-batch 0, then 1 % of the keys are updated per micro-batch. interlace:
  ``stream_table_join(how="left", emit="final")``. Natives: the stream-static left join with
  the snapshot read as a batch DataFrame, cached before the clock starts (no state: the cost
  floor, stale once the table changes), and the left outer stream-stream interval join of the
  stream with the changelog (``t.ts BETWEEN s.ts - INTERVAL I AND s.ts``, watermarks on both).
* ``table-tt``: two changelogs (``k, ts, v, deleted``) over 10k keys: each side's snapshot
  (90 % of the keys) in micro-batch 0, then 1 % of the keys updated per side per micro-batch,
  5 % of the updates tombstones. interlace: ``table_join(how="full", emit="final")``; native:
  the full outer stream-stream join on ``k`` with ``r.ts BETWEEN l.ts - INTERVAL I AND l.ts +
  INTERVAL I``.

Event time advances ``span_s`` per micro-batch; stream rows are evenly spaced plus jitter,
updates uniform over their micro-batch plus jitter, snapshots at T0 - 1 s; no row is late.
After the data each input gets one sentinel file (key -1, far ahead), so the watermark passes
every row and ``emit="final"`` releases all of them; sinks drop key -1.

The natives answer other questions than interlace, so verification checks each engine
against what *it* computes, from the data: interlace's stream-table output is an as-of join
(one row per stream row, its matched rows and ``sum(right_tv)`` exact, its stream columns
those of the stream-static join), its table-table changelog applied to a dict target equals
the full join of both final snapshots; stream-static gives every row the snapshot's value,
the interval join every version of the key in ``[t - I, t]`` (or one NULL row), the full outer
join pairs within ``+-I`` plus each side's rows without one.
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
from harness import joins
from harness.registry import Context, Engine, Size, Workload, register

SNAPSHOT_US = hdata.T0_US - 1_000_000  # every snapshot version is valid from T0 - 1 s
SENTINEL_KEY = -1
SHIFT = np.int64(1) << np.int64(40)  # (key, time) packed in one int64: times < 2**40 µs
BASE_US = hdata.T0_US - 3_600_000_000  # relative times are >= 0
TABLE_SCHEMA = pa.schema([("k", pa.int64()), ("ts", hdata.TS), ("tv", pa.int64())])
TT_SCHEMA = pa.schema([("k", pa.int64()), ("ts", hdata.TS), ("v", pa.int64()),
                       ("deleted", pa.bool_())])
ST_COLUMNS = ("left_k", "left_ts", "left_v", "right_tv", "right_valid_from")
CHANGELOG_COLUMNS = ("k", "left_v", "right_v", "op", "version")
FULL_COLUMNS = ("k", "left_k", "right_k", "left_v", "right_v", "left_ts", "right_ts")


@dataclasses.dataclass(frozen=True)
class Shape:
    """A table workload: ``kind`` ``"st"`` (stream-table) or ``"tt"`` (table-table).

    ``interval_ms``: the native stream-stream joins' interval ``I`` (the lateness).
    """

    kind: str
    keys: int
    quick_keys: int
    interval_ms: int = 2_000
    lateness_ms: int = 2_000
    jitter_ms: int = 500
    span_s: float = 100.0
    update_frac: float = 0.01
    tombstone_frac: float = 0.05  # tt only
    snapshot_frac: float = 0.9  # tt only: share of the keys in each side's snapshot
    #: Updates per micro-batch fixed at this many, whatever the keys (``update_frac`` unused):
    #: the state grows with ``--keys`` while the change per micro-batch stays (issue 34).
    fixed_updates: int | None = None


Cols = tuple[Any, ...]


@dataclasses.dataclass
class TableData:
    """Per input, per data micro-batch, numpy columns (sentinels not included).

    ``st``: ``left`` = stream ``(k, t_us, v)``, ``right`` = table ``(k, t_us, tv)``;
    ``tt``: both ``(k, t_us, v, deleted)``.
    """

    shape: Shape
    keys: int
    left: list[Cols]
    right: list[Cols]
    cache: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def input_rows(self) -> int:
        """Rows of both inputs, the two sentinels included."""
        return sum(len(b[0]) for b in self.left + self.right) + 2

    @property
    def left_rows(self) -> int:
        """Stream (left) rows."""
        return sum(len(b[0]) for b in self.left)

    @property
    def data_batches(self) -> int:
        """Micro-batches holding data."""
        return len(self.left)

    def cat(self, side: str) -> Cols:
        """All micro-batches of ``side`` concatenated, per column."""
        batches = self.left if side == "left" else self.right
        return tuple(np.concatenate(c) for c in zip(*batches, strict=True))


def _update_times(s: Shape, rng: np.random.Generator, i: int, m: int) -> np.ndarray:
    span_us, jit = int(s.span_s * 1_000_000), s.jitter_ms * 1000
    return np.sort(hdata.T0_US + i * span_us + rng.integers(0, span_us, m)
                   + rng.integers(-jit, jit + 1, m))


def generate(s: Shape, keys: int, rows: int, batches: int, seed: int) -> TableData:
    """The data (deterministic in the arguments)."""
    rng = np.random.default_rng(seed)
    m = (min(keys, s.fixed_updates) if s.fixed_updates
         else max(1, round(keys * s.update_frac)))
    if s.kind == "st":
        span_us, jit = int(s.span_s * 1_000_000), s.jitter_ms * 1000
        stream = []
        for i in range(batches):
            base = i * span_us + (np.arange(rows, dtype=np.int64) * span_us) // rows
            stream.append((rng.integers(0, keys, rows, dtype=np.int64),
                           hdata.T0_US + base + rng.integers(-jit, jit + 1, rows),
                           rng.random(rows)))
        table = [(np.arange(keys, dtype=np.int64), np.full(keys, SNAPSHOT_US, np.int64),
                  rng.integers(0, 2**31, keys, dtype=np.int64))]
        for i in range(1, batches):
            table.append((rng.choice(keys, m, replace=False).astype(np.int64),
                          _update_times(s, rng, i, m), rng.integers(0, 2**31, m, dtype=np.int64)))
        return TableData(s, keys, stream, table)

    def side() -> list[Cols]:
        n0 = round(keys * s.snapshot_frac)
        out = [(np.sort(rng.choice(keys, n0, replace=False)).astype(np.int64),
                np.full(n0, SNAPSHOT_US, np.int64), rng.integers(0, 2**31, n0, dtype=np.int64),
                np.zeros(n0, bool))]
        for i in range(1, batches):
            out.append((rng.choice(keys, m, replace=False).astype(np.int64),
                        _update_times(s, rng, i, m), rng.integers(0, 2**31, m, dtype=np.int64),
                        rng.random(m) < s.tombstone_frac))
        return out

    return TableData(s, keys, side(), side())


def write(data: TableData, root: Path) -> None:
    """One Parquet file per input per data micro-batch, then each input's sentinel file."""
    s = data.shape
    t_end = np.array([hdata.T0_US + int((data.data_batches + 1) * s.span_s * 1_000_000)])
    sk = np.array([SENTINEL_KEY], np.int64)

    def tt_table(cols: Cols) -> pa.Table:  # a tombstone carries its key only
        return pa.Table.from_arrays(
            [pa.array(cols[0]), pa.array(cols[1]).cast(hdata.TS),
             pa.array(cols[2], mask=cols[3]), pa.array(cols[3])], schema=TT_SCHEMA)

    if s.kind == "st":
        hdata.write_batches(root / "stream", [hdata.table(joins.SCHEMA, list(c)) for c in
                                              [*data.left, (sk, t_end, np.zeros(1))]])
        hdata.write_batches(root / "table", [hdata.table(TABLE_SCHEMA, list(c)) for c in
                                             [*data.right, (sk, t_end, np.zeros(1, np.int64))]])
        return
    sentinel = (sk, t_end, np.zeros(1, np.int64), np.zeros(1, bool))
    for name, batches in (("left", data.left), ("right", data.right)):
        hdata.write_batches(root / name, [tt_table(c) for c in [*batches, sentinel]])


# ----------------------------------------------------------------------------------------------
# What each engine should output, computed from the data
# ----------------------------------------------------------------------------------------------


def _packed(k: np.ndarray, t: np.ndarray) -> Any:
    return k * SHIFT + (t - BASE_US)


def st_expected(data: TableData) -> dict[str, dict[str, int]]:
    """Per engine: output rows, rows with a table value, and ``sum(right_tv)``.

    interlace: as-of join (the version with the greatest time <= the row's; ties: the later
    arrival). native-static: the snapshot's version for every row. native-interval: one row
    per table update of the key in ``[t - I, t]``, or one row with NULLs if there is none.
    """
    if "expected" in data.cache:
        return data.cache["expected"]
    sk, st, _ = data.cat("left")
    tk, tt, tv = data.cat("right")
    order = np.argsort(_packed(tk, tt), kind="stable")  # stable: ties keep arrival order
    packed, tv_sorted, tk_sorted = _packed(tk, tt)[order], tv[order], tk[order]
    q = _packed(sk, st)
    idx = np.searchsorted(packed, q, "right") - 1
    ok = (idx >= 0) & (tk_sorted[np.maximum(idx, 0)] == sk)
    asof = {"rows": len(sk), "matched": int(ok.sum()), "sum_tv": int(tv_sorted[idx[ok]].sum())}
    snap_k, _, snap_tv = data.right[0]  # keys 0..n-1
    hit = np.isin(sk, snap_k)
    lookup = np.zeros(int(snap_k.max()) + 1, np.int64)
    lookup[snap_k] = snap_tv
    static = {"rows": len(sk), "matched": int(hit.sum()), "sum_tv": int(lookup[sk[hit]].sum())}
    lo = np.searchsorted(packed, q - data.shape.interval_ms * 1000, "left")
    hi = np.searchsorted(packed, q, "right")
    cs = np.concatenate([[0], np.cumsum(tv_sorted)])
    n = hi - lo
    # How far the natives are from the as-of answer: rows whose as-of version is not the
    # snapshot's (stream-static gives them a stale value), and rows whose key has a version
    # but none in [t - I, t] (the interval join gives them NULLs).
    asof["stale_in_snapshot"] = int((order[idx[ok]] >= len(snap_k)).sum())
    asof["no_version_in_interval"] = int((ok & (n == 0)).sum())
    interval = {"rows": int(np.maximum(n, 1).sum()), "matched": int(n.sum()),
                "sum_tv": int((cs[hi] - cs[lo]).sum())}
    data.cache["expected"] = {"interlace": asof, "native-static": static,
                              "native-interval": interval}
    return data.cache["expected"]


def final_snapshot(cols: Cols) -> dict[int, int]:
    """A changelog's final table: per key the update with the greatest time (ties: the later
    arrival), tombstones removed."""
    k, t, v, deleted = cols
    f = pd.DataFrame({"k": k, "t": t, "v": v, "d": deleted}).sort_values(["k", "t"],
                                                                        kind="stable")
    last = f.groupby("k", sort=False).tail(1)
    last = last[~last["d"]]
    return dict(zip(last["k"].tolist(), last["v"].tolist(), strict=True))


def _int(x: Any) -> int | None:
    return None if x is None or pd.isna(x) else int(x)


def tt_expected(data: TableData) -> dict[str, Any]:
    """The full join of both final snapshots (pandas), and what the native join emits: pairs
    with equal keys and ``|r.ts - l.ts| <= I``, plus each side's rows without a partner."""
    if "expected" in data.cache:
        return data.cache["expected"]
    lf, rf = final_snapshot(data.cat("left")), final_snapshot(data.cat("right"))
    joined = pd.merge(pd.DataFrame({"k": list(lf), "left_v": list(lf.values())}),
                      pd.DataFrame({"k": list(rf), "right_v": list(rf.values())}),
                      on="k", how="outer")
    target = {int(r.k): (_int(r.left_v), _int(r.right_v)) for r in joined.itertuples()}
    i_us = data.shape.interval_ms * 1000
    (lk, lt, *_), (rk, rt, *_) = data.cat("left"), data.cat("right")

    def partners(ak: np.ndarray, at: np.ndarray, bk: np.ndarray, bt: np.ndarray) -> Any:
        b = np.sort(_packed(bk, bt))
        q = _packed(ak, at)
        return np.searchsorted(b, q + i_us, "right") - np.searchsorted(b, q - i_us, "left")

    pl, pr = partners(lk, lt, rk, rt), partners(rk, rt, lk, lt)
    native = {"pairs": int(pl.sum()), "left_only": int((pl == 0).sum()),
              "right_only": int((pr == 0).sum())}
    native["rows"] = native["pairs"] + native["left_only"] + native["right_only"]
    data.cache["expected"] = {"target": target, "native": native}
    return data.cache["expected"]


def apply_changelog(f: pd.DataFrame) -> tuple[dict[int, tuple[Any, Any]], list[str]]:
    """interlace's changelog applied to a dict target: per key the row with the highest
    ``version``; ``delete`` removes the key. Also checks versions are 0..n-1 per key."""
    if not len(f):
        return {}, ["no changelog rows"]
    problems = []
    per_key = f.groupby("k")["version"].agg(["min", "max", "count", "nunique"])
    bad = per_key[(per_key["min"] != 0) | (per_key["max"] + 1 != per_key["count"])
                  | (per_key["nunique"] != per_key["count"])]
    if len(bad):
        problems.append(f"{len(bad)} keys whose versions are not 0..n-1 (e.g. key "
                        f"{int(bad.index[0])})")
    last = f.sort_values(["k", "version"]).groupby("k").tail(1)
    last = last[last["op"] == "upsert"]
    return {int(r.k): (_int(r.left_v), _int(r.right_v)) for r in last.itertuples()}, problems


# ----------------------------------------------------------------------------------------------
# Engines
# ----------------------------------------------------------------------------------------------


def _st_spec(s: Shape, key_groups: int) -> Any:
    from interlace import StreamTableJoin

    return StreamTableJoin(left_keys=["k"], right_keys=["k"], how="left", event_time_column="ts",
                           lateness_ms=s.lateness_ms, emit="final", key_groups=key_groups)


def _st_inputs(ctx: Context) -> tuple[Any, Any]:
    return (hdata.read_stream(ctx.spark, ctx.root / "stream", joins.SCHEMA),
            hdata.read_stream(ctx.spark, ctx.root / "table", TABLE_SCHEMA))


def _st_select(joined: Any) -> Any:
    from pyspark.sql import functions as F

    return joined.select(
        F.col("s.k").alias("left_k"), F.col("s.ts").alias("left_ts"),
        F.col("s.v").alias("left_v"), F.col("t.tv").alias("right_tv"),
        F.col("t.ts").alias("right_valid_from"))


def build_st_interlace(ctx: Context) -> Any:
    """``stream_table_join(how="left", emit="final")``."""
    from interlace import stream_table_join

    return stream_table_join(*_st_inputs(ctx), _st_spec(ctx.data.shape, ctx.key_groups))


def st_prepared(ctx: Context) -> Any:
    """``prepare_stream_table_join`` on the workload's inputs: what the floors run on."""
    from interlace import prepare_stream_table_join

    return prepare_stream_table_join(*_st_inputs(ctx), _st_spec(ctx.data.shape, ctx.key_groups))


def build_st_static(ctx: Context) -> Any:
    """Stream-static left join with micro-batch 0's snapshot, cached before the clock starts."""
    static = (ctx.spark.read.schema(hdata.spark_schema(TABLE_SCHEMA))
              .parquet(str(ctx.root / "table" / "000000.parquet")).cache())
    static.count()
    ctx.cleanups.append(static.unpersist)
    s, _ = _st_inputs(ctx)
    return _st_select(s.alias("s").join(static.alias("t"), on="k", how="left"))


def build_st_interval(ctx: Context) -> Any:
    """Left outer stream-stream join of the stream with the changelog over ``[t - I, t]``."""
    from pyspark.sql import functions as F

    sh = ctx.data.shape
    delay = f"{sh.lateness_ms} milliseconds"
    s, t = _st_inputs(ctx)
    return _st_select(s.withWatermark("ts", delay).alias("s").join(
        t.withWatermark("ts", delay).alias("t"),
        F.expr(f"s.k = t.k AND t.ts BETWEEN s.ts - INTERVAL {sh.interval_ms} MILLISECONDS "
               "AND s.ts"), "left_outer"))


def _tt_inputs(ctx: Context) -> tuple[Any, Any]:
    return (hdata.read_stream(ctx.spark, ctx.root / "left", TT_SCHEMA),
            hdata.read_stream(ctx.spark, ctx.root / "right", TT_SCHEMA))


def _tt_spec(ctx: Context) -> Any:
    from interlace import TableJoin

    return TableJoin(
        left_keys=["k"], right_keys=["k"], how="full", event_time_column="ts",
        lateness_ms=ctx.data.shape.lateness_ms, tombstone_column="deleted", emit="final",
        key_groups=ctx.key_groups)


def build_tt_interlace(ctx: Context) -> Any:
    """``table_join(how="full", emit="final", tombstone_column="deleted")``."""
    from interlace import table_join

    return table_join(*_tt_inputs(ctx), _tt_spec(ctx))


def tt_prepared(ctx: Context) -> Any:
    """``prepare_table_join`` on the workload's inputs: what the floors run on."""
    from interlace import prepare_table_join

    return prepare_table_join(*_tt_inputs(ctx), _tt_spec(ctx))


def build_tt_native(ctx: Context) -> Any:
    """Full outer stream-stream join on ``k`` within ``+-I``."""
    from pyspark.sql import functions as F

    sh = ctx.data.shape
    delay, i = f"{sh.lateness_ms} milliseconds", sh.interval_ms
    left, right = _tt_inputs(ctx)
    return left.withWatermark("ts", delay).alias("l").join(
        right.withWatermark("ts", delay).alias("r"),
        F.expr(f"l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL {i} MILLISECONDS "
               f"AND l.ts + INTERVAL {i} MILLISECONDS"), "full_outer").select(
        F.coalesce(F.col("l.k"), F.col("r.k")).alias("k"), F.col("l.k").alias("left_k"),
        F.col("r.k").alias("right_k"), F.col("l.v").alias("left_v"),
        F.col("r.v").alias("right_v"), F.col("l.ts").alias("left_ts"),
        F.col("r.ts").alias("right_ts"))


def st_engines(options: Mapping[str, Any]) -> list[Engine]:
    """Stream-static, interval join, interlace, and (``floor``) the floors."""
    from harness.floor import floor_engines

    out = [Engine("native-static", "native", build_st_static, ST_COLUMNS, exact=False),
           Engine("native-interval", "native", build_st_interval, ST_COLUMNS, stream_join=True,
                  exact=False),
           Engine("interlace", "interlace", build_st_interlace, ST_COLUMNS)]
    if options.get("floor"):
        out += floor_engines(st_prepared, lambda d: st_expected(d)["interlace"]["rows"],
                             ST_COLUMNS)
    return out


def tt_engines(options: Mapping[str, Any]) -> list[Engine]:
    """The full outer stream-stream join, interlace, and (``floor``) the floors. Its
    floor-out emits one row per input row: interlace's changelog has about one row per
    update (18,799 for 18,802 input rows at full size), not worth an oracle run to count."""
    from harness.floor import floor_engines

    out = [Engine("native-full", "native", build_tt_native, FULL_COLUMNS, stream_join=True,
                  exact=False),
           Engine("interlace", "interlace", build_tt_interlace, CHANGELOG_COLUMNS)]
    if options.get("floor"):
        out += floor_engines(tt_prepared, lambda d: d.input_rows, CHANGELOG_COLUMNS)
    return out


# ----------------------------------------------------------------------------------------------
# Verification
# ----------------------------------------------------------------------------------------------


def _st_counts(f: pd.DataFrame) -> dict[str, int]:
    tv = pd.to_numeric(f["right_tv"])
    return {"rows": len(f), "matched": int(tv.notna().sum()), "sum_tv": int(tv.fillna(0).sum())}


def st_verify(data: TableData, frames: Mapping[str, Any],
              _options: Mapping[str, Any]) -> list[cmp.Check]:
    """Each engine's rows, matched rows and ``sum(right_tv)`` vs what it computes; interlace's
    stream columns vs the stream-static join's; the natives vs interlace (by design)."""
    exp = st_expected(data)
    checks = []
    for e, f in frames.items():
        got = _st_counts(f)
        for what in ("rows", "matched", "sum_tv"):
            checks.append(cmp.count_check(f"{e}: {what} vs the data ({_ANSWERS[e]})", got[what],
                                          exp[e][what]))
    if "interlace" in frames:
        il = _st_counts(frames["interlace"])
        for e in ("native-static", "native-interval"):
            if e in frames:
                got = _st_counts(frames[e])
                same = got == il
                checks.append(cmp.Check(
                    f"interlace vs {e}: rows, matched, sum(right_tv)", same,
                    f"interlace {il}, {e} {got}", by_design=not same))
        if "native-static" in frames:
            cols = ("left_k", "left_ts", "left_v")
            a, b = (cmp.normalize(frames[e], cols, times=("left_ts",), ints=("left_k",))
                    for e in ("interlace", "native-static"))
            checks.append(cmp.same_rows(a, b, "interlace vs native-static: stream columns "
                                              "(each stream row once)"))
    a = exp["interlace"]
    checks.append(cmp.Check(
        "why the natives differ", True,
        f"of {a['rows']:,} stream rows, {a['stale_in_snapshot']:,} have an as-of version newer "
        f"than the snapshot (native-static gives them the snapshot's value) and "
        f"{a['no_version_in_interval']:,} have no version in [t - I, t] although their key is in "
        "the table (native-interval gives them NULLs; it gives several rows to a stream row "
        "whose key changed more than once in the interval)"))
    return checks


_ANSWERS = {"interlace": "as-of join", "native-static": "the snapshot's values",
            "native-interval": "every version in [t - I, t]"}


def tt_verify(data: TableData, frames: Mapping[str, Any],
              _options: Mapping[str, Any]) -> list[cmp.Check]:
    """interlace's changelog applied vs the full join of the final snapshots; native-full's
    pairs and unmatched rows vs the data."""
    exp = tt_expected(data)
    checks = []
    if "interlace" in frames:
        f = frames["interlace"]
        got, problems = apply_changelog(f.assign(k=f["k"].astype(np.int64),
                                                 version=f["version"].astype(np.int64)))
        checks.append(cmp.Check("interlace: versions per key are 0..n-1", not problems,
                                "; ".join(problems) or "yes"))
        checks.append(cmp.Check(
            "interlace: changelog applied to a dict target vs the full join of both final "
            "snapshots", got == exp["target"],
            f"{len(got):,} keys applied, {len(exp['target']):,} in the join"
            + ("" if got == exp["target"] else
               f"; {sum(got.get(k) != v for k, v in exp['target'].items()):,} keys differ")))
    if "native-full" in frames:
        f = frames["native-full"]
        nx = exp["native"]
        pairs = int((f["left_k"].notna() & f["right_k"].notna()).sum())
        checks.append(cmp.count_check("native-full: rows vs the data (pairs within +-I, plus "
                                      "rows without one)", len(f), nx["rows"]))
        checks.append(cmp.count_check("native-full: pairs vs the data", pairs, nx["pairs"]))
        checks.append(cmp.Check(
            "interlace vs native-full", False,
            f"different answers by design: a changelog of the full join of two tables "
            f"({len(exp['target']):,} keys at the end) vs every pair of updates within +-I "
            f"({nx['pairs']:,}) plus {nx['left_only']:,} left and {nx['right_only']:,} right "
            "updates without one", by_design=True))
    return checks


def _register(name: str, label: str, shape: Shape, seed_offset: int,
              family: str = "table") -> None:
    from interlace.state.keygroups import DEFAULT_JOIN_KEY_GROUPS

    def gen(size: Size) -> TableData:
        keys = size.keys or (shape.quick_keys if size.quick else shape.keys)
        rows = size.rows or (10_000 if size.quick else 100_000)
        sh = dataclasses.replace(shape, span_s=size.span_s(shape.span_s, 100_000, rows))
        return generate(sh, keys, rows, size.batches or (3 if size.quick else 5),
                        size.seed + seed_offset)

    st = shape.kind == "st"
    register(Workload(
        name=name, family=family, label=label, in_full=family == "table",
        description=(f"{label}; I = L = {shape.lateness_ms:,} ms; snapshot in micro-batch 0, "
                     + (f"{shape.fixed_updates:,} keys updated per micro-batch"
                        if shape.fixed_updates else
                        f"{shape.update_frac:.0%} of the keys updated per micro-batch")),
        generate=gen, write=write, engines=st_engines if st else tt_engines,
        verify=st_verify if st else tt_verify,
        default_key_groups=lambda: DEFAULT_JOIN_KEY_GROUPS,
        sink_filter=f"{'left_k' if st else 'k'} <> {SENTINEL_KEY}",
        held=lambda data, _b, _wm: data.keys * (1 if st else 2),
        held_label="table keys" if st else "keys of both tables"))


# Seeds of table_bench (20260312 + index) relative to the harness's default seed 20260302.
_register("table-st10k", "stream-table, 10k keys", Shape("st", 10_000, 1_000), 10)
_register("table-st1m", "stream-table, 1M keys", Shape("st", 1_000_000, 20_000), 11)
_register("table-tt", "table-table, 10k keys", Shape("tt", 10_000, 1_000), 12)
# The state sweep (issue 34): `--keys` sets the table (the state), the change stays 10,000
# updates and the stream's rows per micro-batch; seed as st1m's.
_register("table-st-state", "stream-table, 10k updates per micro-batch",
          Shape("st", 1_000_000, 20_000, fixed_updates=10_000), 11, family="state")
