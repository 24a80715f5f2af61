"""The benchmark harness's Spark-free logic (bench/harness): registry, data, checks, report."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from harness import cli, curves, joins, report, spark, tables, windows  # noqa: E402
from harness.registry import Size  # noqa: E402
from harness.workloads import load, select  # noqa: E402
from harness.run import RunResult, state_of, watermark_ms  # noqa: E402

REGISTRY = load()
TINY = Size(rows=300, batches=2, keys=40, quick=True)


def _arrays(data: object) -> list[np.ndarray]:
    """Every numpy column of a workload's data, in order."""
    out: list[np.ndarray] = []
    for name in ("left", "right", "batches"):
        for batch in getattr(data, name, []):
            out += [np.asarray(c) for c in batch]
    return out


def test_registry_holds_every_workload_the_issue_names() -> None:
    assert list(REGISTRY) == [
        "join-100k", "join-10k", "join-hot", "join-outer",
        "window-tumbling", "window-hopping", "window-session",
        "table-st10k", "table-st1m", "table-tt", "join-state", "table-st-state", "window-session-state"]
    assert {w.family for w in REGISTRY.values()} == {"join", "window", "table", "state"}
    # The state sweep's workload runs only when named: not in the full benchmark.
    state = ["join-state", "table-st-state", "window-session-state"]
    assert set(state).isdisjoint(w.name for w in select(["*"]))
    assert [w.name for w in select(["table-st-state"])] == ["table-st-state"]
    assert [w.name for w in select(["state"])] == state
    assert REGISTRY["join-outer"].sink_filter is not None  # its sentinels are dropped


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_workload_builds_its_data_deterministically(name: str) -> None:
    w = REGISTRY[name]
    a, b = w.generate(TINY), w.generate(TINY)
    assert [x.tolist() for x in _arrays(a)] == [x.tolist() for x in _arrays(b)]
    other = w.generate(dataclasses.replace(TINY, seed=TINY.seed + 1))
    assert any(not np.array_equal(x, y) for x, y in zip(_arrays(a), _arrays(other), strict=True))
    assert a.input_rows > 0
    assert a.data_batches == 2


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_workload_writes_one_file_per_micro_batch(name: str, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    w = REGISTRY[name]
    data = w.generate(TINY)
    w.write(data, tmp_path)
    inputs = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    rows = 0
    for d in inputs:
        files = sorted(d.glob("*.parquet"))
        assert len(files) in (data.data_batches, data.data_batches + 1)  # + a sentinel's
        rows += sum(pq.read_metadata(f).num_rows for f in files)
    assert rows == data.input_rows


def test_quick_sizes_are_small_and_defaults_are_the_measured_ones() -> None:
    full = REGISTRY["join-10k"].generate(Size(batches=1))
    assert len(full.left[0][0]) == 100_000
    quick = REGISTRY["window-session"].generate(Size(quick=True))
    assert (quick.data_batches, quick.keys, len(quick.batches[0][0])) == (1, 500, 5_000)
    assert REGISTRY["table-st1m"].generate(Size(quick=True)).keys == 20_000


def test_select_takes_names_globs_and_families() -> None:
    assert [w.name for w in select(["join-*"])] == ["join-100k", "join-10k", "join-hot",
                                                   "join-outer"]
    assert [w.name for w in select(["table", "window-session"])] == [
        "window-session", "table-st10k", "table-st1m", "table-tt"]
    with pytest.raises(ValueError, match="no workload matches 'nope'"):
        select(["nope"])


def test_parse_conf_rejects_an_item_without_equals() -> None:
    assert spark.parse_conf(["a.b=1", "c=x=y"]) == {"a.b": "1", "c": "x=y"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        spark.parse_conf(["a.b"])


def _join_output(data: joins.JoinData) -> pd.DataFrame:
    """The join's whole output by brute force (pandas), as an engine's frame."""
    def side(batches: list, prefix: str) -> pd.DataFrame:
        k, t, v = (np.concatenate(c) for c in zip(*batches, strict=True))
        return pd.DataFrame({f"{prefix}_k": k, f"{prefix}_t": t, f"{prefix}_v": v})

    left, right = side(data.left, "left"), side(data.right, "right")
    m = left.merge(right, left_on="left_k", right_on="right_k")
    m = m[(m["right_t"] - m["left_t"]).abs() <= data.shape.window_ms * 1000]
    parts = [m]
    if data.shape.how == "full":
        lm = left.merge(m[["left_k", "left_t", "left_v"]].drop_duplicates(), how="left",
                        indicator=True)
        rm = right.merge(m[["right_k", "right_t", "right_v"]].drop_duplicates(), how="left",
                         indicator=True)
        parts += [lm[lm["_merge"] == "left_only"].drop(columns="_merge"),
                  rm[rm["_merge"] == "left_only"].drop(columns="_merge")]
    out = pd.concat(parts, ignore_index=True)
    for s in ("left", "right"):
        out[f"{s}_ts"] = pd.to_datetime(out.pop(f"{s}_t"), unit="us", utc=True)
    return out[list(joins.COLUMNS)]


@pytest.mark.parametrize("name", ["join-10k", "join-outer"])
def test_join_verification_passes_on_the_true_output_and_fails_on_a_changed_row(
        name: str) -> None:
    w = REGISTRY[name]
    data = w.generate(Size(rows=400, batches=2, keys=30))
    truth = _join_output(data)
    checks = w.verify(data, {"native": truth, "interlace": truth.copy()}, {})
    assert checks and not [c for c in checks if c.failed]
    changed = truth.copy()
    changed.loc[0, "right_v"] += 1.0
    failed = [c.what for c in w.verify(data, {"native": changed, "interlace": truth}, {})
              if c.failed]
    assert failed == ["interlace vs native: whole output"]


def test_window_verification_uses_the_oracle_and_tolerates_hll_error() -> None:
    w = REGISTRY["window-hopping"]
    data = w.generate(TINY)
    exact = windows.oracle(data)
    hll = exact.copy()
    hll.loc[0, "d"] += 2  # an HLL error of 2 on one window: inside the tolerance
    checks = w.verify(data, {"native": hll, "interlace": exact}, {})
    assert not [c for c in checks if c.failed]
    bad = exact.assign(s=exact["s"] + 1.0 / 64)
    failed = [c.what for c in w.verify(data, {"native": exact, "interlace": bad}, {})
              if c.failed]
    assert failed == ["interlace vs exact oracle: count, sum, min, max, avg",
                      "interlace vs native: count, sum, min, max, avg"]


def test_window_sessions_chain_rows_exactly_one_gap_apart() -> None:
    kind = windows.Kind("session", gap_ms=30_000)
    t0 = 1_000_000_000
    df = pd.DataFrame({"k": [1, 1, 1], "t": [t0, t0 + 30_000_000, t0 + 60_000_001],
                       "v": [1.0, 2.0, 3.0], "u": [1, 2, 3]})
    a = windows.assign(kind, df)
    assert a["start"].tolist() == [t0, t0, t0 + 60_000_001]  # touching merges; g + 1 µs splits


def _run(engine: str, role: str, seconds: float, cpu: float, state: int,
         workload: str = "w", store: str = "hdfs") -> RunResult:
    progress = [{"batchId": 0, "numInputRows": 10,
                 "stateOperators": [{"memoryUsedBytes": state, "numRowsTotal": 3}]}]
    return RunResult(workload, store, engine, "timed", 1_000, seconds, 5, 7, progress,
                     {"jvm": cpu, "python_workers": 0.0, "driver": 0.0, "outside": 9.0},
                     role=role, data_batches=1)


def test_report_ratios_use_the_fastest_run_and_the_median_cpu() -> None:
    runs = []
    for native_s, native_cpu, interlace_s, interlace_cpu in ((10, 4, 5, 2), (8, 6, 6, 1),
                                                             (9, 5, 7, 3)):
        runs += [_run("native", "native", native_s, native_cpu, 800),
                 _run("interlace", "interlace", interlace_s, interlace_cpu, 200)]
    runs.append(RunResult("w", "hdfs", "interlace", "verify", 1_000, 0.1, 5, None, [],
                          role="interlace"))
    table = report.cells(runs)
    assert [len(c.runs) for c in table.values()] == [3, 3]  # the verification run is left out
    nat, il = table[("w", "hdfs", "native")], table[("w", "hdfs", "interlace")]
    assert (nat.fastest.seconds, il.fastest.seconds) == (8.0, 5.0)
    assert nat.rows_per_cpu_s == pytest.approx(1_000 / 5.0)  # median CPU; "outside" not ours
    (r,) = report.ratios(table)
    assert (r.native, r.other) == ("native", "interlace")
    assert r.throughput == pytest.approx(8.0 / 5.0)
    assert r.cpu == pytest.approx(5.0 / 2.0)
    assert r.state == pytest.approx(0.25)


def test_report_compares_every_other_engine_with_every_native_of_its_workload_and_store() -> None:
    runs = [_run("native-static", "native", 1.0, 1.0, 0),
            _run("native-interval", "native", 2.0, 1.0, 10),
            _run("interlace", "interlace", 4.0, 1.0, 5), _run("floor", "floor", 2.0, 1.0, 5),
            _run("native", "native", 1.0, 1.0, 1, store="rocksdb")]
    pairs = [(r.native, r.other, r.store) for r in report.ratios(report.cells(runs))]
    assert pairs == [("native-static", "interlace", "hdfs"),
                     ("native-interval", "interlace", "hdfs"),
                     ("native-static", "floor", "hdfs"), ("native-interval", "floor", "hdfs")]
    static = report.ratios(report.cells(runs))[0]
    assert np.isnan(static.state)  # a stateless native: no state ratio


def test_a_run_read_back_from_its_results_file_gives_every_figure_of_the_report() -> None:
    progress = [{"batchId": i, "numInputRows": 10 * i, "durationMs": {"triggerExecution": ms},
                 "eventTime": {"watermark": f"2026-03-02T09:00:0{i}.12{i}Z"} if i else {},
                 "stateOperators": [
                     {"memoryUsedBytes": 100 * i, "numRowsTotal": i,
                      "numRowsDroppedByWatermark": i % 2,
                      "customMetrics": {"rocksdbSstFileSize": 7 * i, "other": 1}},
                     {"memoryUsedBytes": 5, "numRowsTotal": 1}]}
                for i, ms in enumerate([900, 30, 50, 40])]
    r = RunResult("w", "rocksdb", "native", "timed", 1_000, 2.5, 9, 42, progress,
                  {"jvm": 1.5, "outside": 0.25}, {"held": 12}, role="native", data_batches=3)
    back = RunResult.from_json(r.to_json())
    assert [back.state_at(i) for i in range(5)] == [r.state_at(i) for i in range(5)]
    assert r.state_at(3)["watermark_ms"] == 1_772_442_003_123  # exact to the millisecond
    assert (back.batch_ms, back.state_bytes, back.peak_state_bytes, back.dropped_by_watermark,
            back.own_cpu, back.extra, back.role, back.checksum) == (
        r.batch_ms, r.state_bytes, r.peak_state_bytes, r.dropped_by_watermark, r.own_cpu,
        r.extra, r.role, r.checksum) == (40.0, 7 * 2, 305, 2, 1.5, {"held": 12}, "native", 42)


def _results(workload: str, store: str, native_s: float, failures: list[str],
             pyspark: str = "4.3.0") -> dict:
    """A results file (parsed) of one workload on one store: a native and an interlace cell."""
    import json

    runs = [_run("native", "native", native_s, 2.0, 800, workload, store),
            _run("interlace", "interlace", 1.0, 1.0, 200, workload, store)]
    meta = {"date": "2026-11-26", "label": "part", "quick": False, "command": f"run {workload}",
            "versions": {"pyspark": pyspark, "interlace": "0.1", "pandas": "2.3.3",
                         "pyarrow": "26", "numpy": "2.4", "python": "3.11", "java": "17",
                         "cores": 2, "cpu": "x", "platform": "linux"}, "conf": {}, "stores": [store], "repeat": 3,
            "total_s": 100.0, "join_formats": {}, "format_runs": "RocksDB: none",
            "default_join_format": "2",
            "workloads": [{"name": workload, "description": "d", "input_rows": 1_000,
                           "data_batches": 1, "key_groups": 4}]}
    checks = {(workload, store): [cli.Check("interlace vs native", True, "identical")]}
    return json.loads(report.to_json(meta, runs, checks, failures))


def test_parts_of_a_run_merge_into_one_report_and_a_cell_of_two_parts_is_refused(
        tmp_path: Path) -> None:
    import json

    a = _results("join-10k", "hdfs", 3.0, [])
    b = _results("window-tumbling", "rocksdb", 1.5, ["rocksdb/window-tumbling: x: differs"])
    meta, runs, checks, failures = report.merge([a, b], "full", "bench/run.py --merge a b")
    ratios = {(r.workload, r.store): r.throughput for r in report.ratios(report.cells(runs))}
    assert ratios == {("join-10k", "hdfs"): pytest.approx(3.0),
                      ("window-tumbling", "rocksdb"): pytest.approx(1.5)}
    assert (meta["total_s"], meta["stores"], [w["name"] for w in meta["workloads"]]) == (
        200.0, ["hdfs", "rocksdb"], ["join-10k", "window-tumbling"])
    assert set(checks) == {("join-10k", "hdfs"), ("window-tumbling", "rocksdb")}
    assert failures == ["rocksdb/window-tumbling: x: differs"]
    md = report.render(meta, report.cells(runs), checks, failures)
    assert "- part 2, 2026-11-26, 100 s: `run window-tumbling`" in md and "FAILURES" in md
    with pytest.raises(ValueError, match="join-10k on hdfs was run in two parts"):
        report.merge([a, _results("join-10k", "hdfs", 2.0, [])], "full", "m")
    with pytest.raises(ValueError, match="differ in 'versions'"):
        report.merge([a, _results("window-tumbling", "hdfs", 1.0, [], "4.2.0")], "full", "m")

    files = []
    for name, raw in (("a", a), ("b", b)):
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps(raw))
    rc = cli.main(["--merge", *map(str, files), "--out-dir", str(tmp_path)])
    assert rc == 1  # part b's failure fails the merged report too
    (md_file,) = tmp_path.glob("2026-11-26-join-window.md")
    merged = json.loads(md_file.with_suffix(".json").read_text())
    assert len(merged["runs"]) == 4 and len(merged["ratios"]) == 2


def test_plan_runs_each_stream_join_native_once_per_join_format_under_rocksdb() -> None:
    w = REGISTRY["table-st10k"]
    plan = cli.plan_engines(w, {}, [2, 3, 4], [4, 16], 4)
    assert [e.name for e in plan] == [
        "native-static", "native-interval@f2", "native-interval@f3", "native-interval@f4",
        "interlace", "interlace@kg16"]
    conf = {e.name: dict(e.conf) for e in plan}
    assert conf["native-interval@f3"] == {spark.JOIN_FORMAT_KEY: "3"}
    assert conf["native-static"] == {}
    assert next(e for e in plan if e.name == "interlace@kg16").key_groups == 16
    hdfs = cli.plan_engines(REGISTRY["join-10k"], {"floor": True}, None, [], 4)
    assert [(e.name, e.role) for e in hdfs] == [("native", "native"), ("interlace", "interlace"),
                                                ("floor", "floor"), ("floor-out", "floor")]


def test_engines_option_runs_only_the_named_engines() -> None:
    only = cli.plan_engines(REGISTRY["join-hot"], {"floor": True, "engines": {"interlace"}},
                            None, [8], 4)
    assert [e.name for e in only] == ["interlace", "interlace@kg8"]
    everything = cli.plan_engines(REGISTRY["join-hot"], {"floor": True, "engines": set()},
                                  None, [], 4)
    assert [e.name for e in everything] == ["native", "interlace", "floor", "floor-out"]


def test_verification_runs_once_per_join_format_and_checks_the_extras() -> None:
    w = REGISTRY["join-10k"]
    data = w.generate(Size(rows=200, batches=1, keys=20))
    truth = _join_output(data)
    frames = {"native@f2": truth, "native@f3": truth, "interlace": truth,
              "interlace@kg8": truth.sample(frac=1.0, random_state=1), "floor": truth.iloc[0:0]}
    roles = {"native@f2": "native", "native@f3": "native", "interlace": "interlace",
             "interlace@kg8": "interlace", "floor": "floor"}
    checks = cli._verify(w, data, frames, {}, roles)
    assert {c.what.split("]")[0] + "]" for c in checks if c.what.startswith("[")} == {
        "[join format 2]", "[join format 3]"}
    assert [c.what for c in checks if not c.what.startswith("[")] == [
        "interlace vs interlace@kg8: whole output", "floor: emits nothing"]
    assert not [c for c in checks if c.failed]
    frames["interlace@kg8"] = truth.iloc[1:]
    frames["floor"] = truth
    failed = [c.what for c in cli._verify(w, data, frames, {}, roles) if c.failed]
    assert failed == ["interlace vs interlace@kg8: whole output", "floor: emits nothing"]


def test_every_table_workload_has_its_floors_on_request() -> None:
    for name in ("table-st10k", "table-tt"):
        w = REGISTRY[name]
        plain = [e.name for e in w.engines({})]
        floors = w.engines({"floor": True})
        assert [e.name for e in floors] == plain + ["floor", "floor-out"]
        assert [e.floor_emits for e in floors[-2:]] == [False, True]
    assert "floor" not in [e.name for e in tables.tt_engines({})]


def test_timed_failures_catch_repeats_engines_and_the_floor() -> None:
    engines = cli.plan_engines(REGISTRY["join-10k"], {"floor": True}, None, [], 4)

    def r(engine: str, n: int, s: int) -> RunResult:
        return RunResult("w", "hdfs", engine, "timed", 1, 1.0, n, s, [])

    good = {"native": [r("native", 5, 1), r("native", 5, 1)],
            "interlace": [r("interlace", 5, 1)], "floor": [r("floor", 0, 0)]}
    assert cli.timed_failures("x", engines, good, {"native": 5, "interlace": 5}) == []
    bad = {"native": [r("native", 5, 1), r("native", 5, 2)],
           "interlace": [r("interlace", 5, 3)], "floor": [r("floor", 1, 0)]}
    out = cli.timed_failures("x", engines, bad, {"native": 5, "interlace": 5})
    assert [f.split(":")[0] for f in out] == ["x/native", "x/native", "x/floor"]
    other = {"native": [r("native", 5, 2)], "interlace": [r("interlace", 5, 1)]}
    out = cli.timed_failures("x", engines, other, {"native": 5, "interlace": 5})
    assert out == ["x/native: count/checksum [(5, 2)] differ from interlace's [(5, 1)]"]


def test_the_window_floor_out_emits_its_ratio_of_rows_in_the_output_schema() -> None:
    from harness.floor import FloorFunction
    from pyspark.sql import types as T

    class State:
        def __init__(self) -> None:
            self.value = None

        def update(self, v: tuple) -> None:
            self.value = v

        def getCurrentWatermarkMs(self) -> int:  # noqa: N802 (GroupState's name)
            return 5

        def setTimeoutTimestamp(self, ms: int) -> None:  # noqa: N802
            self.timeout = ms

    schema = T.StructType([T.StructField("window_start", T.TimestampType()),
                           T.StructField("k", T.LongType()), T.StructField("a", T.DoubleType()),
                           T.StructField("g", T.StringType())])
    frames = [pd.DataFrame({"x": range(7)}), pd.DataFrame({"x": range(3)})]
    out = list(FloorFunction(0.5, schema)("key", iter(frames), State()))
    assert [list(f.columns) for f in out] == [["window_start", "k", "a", "g"]]
    assert len(out[0]) == 5 and str(out[0]["window_start"].dtype) == "datetime64[ns]"
    assert list(FloorFunction()("key", iter(frames), State())) == []
    engines = {e.name: e for e in windows.engines({"floor": True})}
    assert engines["floor"].role == engines["floor-out"].role == "floor"
    assert engines["floor-out"].floor_emits and not engines["floor"].floor_emits
    w = REGISTRY["window-tumbling"]
    data = w.generate(TINY)
    truth = windows.oracle(data)
    frames_by = {"native": truth, "interlace": truth, "floor": truth.iloc[0:0],
                 "floor-out": truth.iloc[0:0]}
    roles = {"native": "native", "interlace": "interlace", "floor": "floor", "floor-out": "floor"}
    failed = [c.what for c in cli._verify(w, data, frames_by, {}, roles, {"floor-out"})
              if c.failed]
    assert failed == ["floor-out: emits rows"]


def test_state_and_watermark_come_from_the_progress() -> None:
    p = {"batchId": 3, "eventTime": {"watermark": "2026-03-02T09:00:05.000Z"},
         "stateOperators": [
             {"memoryUsedBytes": 10, "numRowsTotal": 2, "numRowsDroppedByWatermark": 1,
              "customMetrics": {"rocksdbSstFileSize": 100}},
             {"memoryUsedBytes": 5, "numRowsTotal": 1, "customMetrics": {}}]}
    assert state_of(p) == {"batchId": 3, "memoryUsedBytes": 15, "numRowsTotal": 3, "dropped": 1,
                           "watermark_ms": watermark_ms(p), "rocksdbSstFileSize": 100}
    assert watermark_ms(p) == 1_772_442_005_000
    assert watermark_ms({"eventTime": {}}) == 0


def test_a_long_cells_verification_run_stands_in_without_a_checksum() -> None:
    engines = cli.plan_engines(REGISTRY["join-hot"], {}, None, [], 4)
    runs = {"native": [RunResult("w", "hdfs", "native", "timed", 1, 400.0, 5, None, [])],
            "interlace": [RunResult("w", "hdfs", "interlace", "timed", 1, 9.0, 5, 1, [])]}
    assert cli.timed_failures("x", engines, runs, {"native": 5, "interlace": 5}) == []


def test_ms_per_batch_is_the_median_after_the_first_data_micro_batch() -> None:
    progress = [{"batchId": i, "durationMs": {"triggerExecution": ms}}
                for i, ms in enumerate([5_000, 100, 300, 200, 9_000])]  # 4: a flush batch
    r = RunResult("w", "hdfs", "native", "timed", 1, 1.0, 0, 0, progress, data_batches=4)
    assert r.batch_ms == 200
    assert dataclasses.replace(r, data_batches=1).batch_ms == 5_000


def test_the_results_file_is_labelled_by_what_ran() -> None:
    everything = list(REGISTRY.values())
    assert cli.default_label(everything, ["hdfs", "rocksdb"], False) == "full"
    assert cli.default_label(everything, ["hdfs", "rocksdb"], True) == "quick"
    assert cli.default_label(select(["window-*", "join-hot"]), ["rocksdb"], False) == (
        "join-window-rocksdb")


@pytest.mark.parametrize("name", ["join-10k", "window-hopping", "table-st10k"])
def test_fixed_rate_keeps_the_events_per_second_as_rows_grow(name: str) -> None:
    """At a fixed rate ten times the rows cover ten times the event time; without it, the
    same event time (denser)."""
    w = REGISTRY[name]

    def span_us(size: Size) -> float:  # event time between two micro-batches' mean times
        data = w.generate(size)
        ts = [np.asarray(b[1]) for b in getattr(data, "left", None) or data.batches[:-1]]
        return float(ts[1].mean() - ts[0].mean())

    small = Size(rows=1_000, batches=2, keys=50, fixed_rate=True)
    big = dataclasses.replace(small, rows=10_000)
    assert span_us(big) == pytest.approx(10 * span_us(small), rel=0.05)
    dense = dataclasses.replace(big, fixed_rate=False)
    assert span_us(dense) == pytest.approx(span_us(dataclasses.replace(small, fixed_rate=False)),
                                           rel=0.05)


def _point(engine: str, axis: str, rows: int, out: float, ms: float, kg: int = 8) -> object:
    return curves.Point("hdfs", "w", axis, rows, engine, engine, rows, 10, kg, ms, out, 0, None,
                        1.0, 1.0, 1)


def test_the_cost_model_recovers_known_coefficients() -> None:
    pts = [_point("interlace", "rows", r, o, 50 + 0.002 * r + 0.01 * o)
           for r, o in ((10_000, 1_000), (100_000, 5_000), (300_000, 40_000),
                        (1_000_000, 90_000))]
    pts += [_point("interlace", "key_groups", 10_000, 1_000, 70 + 0.5 * g, kg=g)
            for g in (2, 8, 32)]
    (m,) = curves.fit(pts)
    assert m["fixed_ms"] == pytest.approx(50, abs=1e-6)
    assert m["us_per_row"] == pytest.approx(2.0)
    assert m["us_per_out"] == pytest.approx(10.0)
    assert m["ms_per_group"] == pytest.approx(0.5)
    assert m["r2"] == pytest.approx(1.0)
    text = curves.render({"date": "d", "command": "c", "total_s": 1, "batches": 3,
                          "repeat": 1, "versions": {}}, pts, [m], [])
    assert "all held" in text and "| 50 | 2.00 | 10.00 | 0.50 |" in text


def test_a_curve_point_is_its_fastest_run_with_the_timed_batches_output() -> None:
    progress = [{"batchId": i, "durationMs": {"triggerExecution": ms}}
                for i, ms in enumerate([900, 100, 300, 50])]
    slow = RunResult("w", "hdfs", "native", "timed", 10, 2.0, 0, 0, progress, data_batches=3,
                     extra={"out_per_batch": {"0": 5, "1": 7, "2": 9, "3": 100}})
    fast = dataclasses.replace(slow, seconds=1.0)
    p = curves.point("hdfs", "w", "rows", 10, "native", "native", 10, 5, 8, [slow, fast])
    assert p.seconds == 1.0 and p.runs == 2
    assert p.batch_ms == 200  # median of batches 1 and 2
    assert p.out_rows == 8  # mean output of batches 1 and 2: the flush (3) is left out


def test_the_cost_model_drops_the_output_term_when_output_follows_the_input() -> None:
    pts = [_point("native", "rows", r, r / 2, 500 + 0.01 * r) for r in (10_000, 100_000, 10**6)]
    (m,) = curves.fit(pts)
    assert "us_per_out" not in m
    assert m["us_per_row"] == pytest.approx(10.0)


def test_an_interrupted_curves_run_is_reported_from_its_points_file(tmp_path: Path) -> None:
    import json

    pts = [_point("interlace", "rows", r, 0, 400 + 0.004 * r) for r in (10_000, 100_000, 10**6)]
    saved = tmp_path / "points.json"
    saved.write_text(json.dumps({"points": [dataclasses.asdict(p) for p in pts],
                                 "failures": ["hdfs/w/rows 10: differs"]}))
    rc = curves.main(["--resume", str(saved), "--report-only", "--out-dir", str(tmp_path),
                      "--plot", "", "--label", "t"])
    assert rc == 1  # the kept failure still fails the run
    (md,) = tmp_path.glob("*-t.md")
    text = md.read_text()
    assert "**FAILED**: hdfs/w/rows 10: differs" in text and "| 1,000,000 | interlace |" in text


def test_the_session_state_sweep_holds_every_key_open_at_a_fixed_change() -> None:
    w = REGISTRY["window-session-state"]
    d = w.generate(Size(rows=300, batches=3, keys=1_000))
    assert sorted(d.batches[0][0].tolist()) == list(range(1_000))  # one session per key
    assert [len(b[0]) for b in d.batches] == [1_000, 300, 300, 1]  # the change, the flush row
    # The gap outlives the data: after the last data micro-batch every key's session is open.
    wm = d.spark_watermarks_ms()[3]
    assert w.held(d, 2, wm) == 1_000
    bigger = w.generate(Size(rows=300, batches=3, keys=10_000))
    assert w.held(bigger, 2, bigger.spark_watermarks_ms()[3]) == 10_000


def test_the_join_state_sweep_buffers_keys_rows_per_side_at_a_fixed_output() -> None:
    w = REGISTRY["join-state"]
    small = w.generate(Size(rows=2_000, batches=3, keys=20_000))
    big = w.generate(Size(rows=2_000, batches=3, keys=200_000))
    for d, keys in ((small, 20_000), (big, 200_000)):
        assert [len(b[0]) for b in d.left] == [keys, 2_000, 2_000]
        assert sorted(d.left[0][0].tolist()) == list(range(keys))
        assert sorted(d.right[0][0].tolist()) == list(range(keys, 2 * keys))
        # The 1-hour bound outlives the data: every row stays buffered.
        assert w.held(d, 2, d.left[2][1].max() // 1000) == 2 * keys + 8_000
    # The first micro-batch's rows match nothing; the output per later micro-batch does not
    # grow with the state once the state outnumbers the change (about 1.5 pairs per row: a
    # buffered one half the time, a partner 9 times in 10; fewer repeated buffered keys).
    from harness.joins import oracle

    first = oracle(dataclasses.replace(small, left=small.left[:1], right=small.right[:1]))
    assert first["pairs"] == 0
    a, b = oracle(small)["pairs"], oracle(big)["pairs"]
    assert 4_000 < a < 12_000 and 4_000 < b < 12_000 and abs(a - b) < 0.1 * b


def test_the_foreign_key_state_sweep_fixes_the_change_and_orders_its_files(tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    from harness.tools import foreign_key_state_sweep as fk

    fk.write_data(tmp_path, right=5_000, left=2_000, batches=3, seed=1)
    for name, first, later in (("orders", 2_000, 10_000), ("products", 5_000, 1_000)):
        files = sorted((tmp_path / name).glob("*.parquet"))
        assert [pq.read_metadata(f).num_rows for f in files] == [first, later, later, later]
        mtimes = [f.stat().st_mtime for f in files]
        assert mtimes == sorted(mtimes) and len(set(mtimes)) == len(mtimes)
    products = pq.read_table(tmp_path / "products" / "000000.parquet")
    assert sorted(products.column("product_id").to_pylist()) == list(range(5_000))


@pytest.mark.parametrize("kind,width_us", [("tumbling", 60_000_000), ("hopping", 10_000_000),
                                           ("session", 30_000_000)])
def test_the_combiner_floor_folds_each_piece_once_and_loses_no_row(kind: str,
                                                                   width_us: int) -> None:
    import pyarrow as pa
    from harness.floor import WindowFold

    rng = np.random.default_rng(7)
    n = 2_000
    # five rows of one key exactly one width (a session gap) apart, on window / pane bounds
    tus = np.concatenate([rng.integers(0, 600_000_000, n - 5), width_us * np.arange(1, 6)])
    k = np.concatenate([rng.integers(0, 5, n - 5), np.full(5, 99, dtype=np.int64)])
    kg = k % 2
    v = rng.integers(0, 640, n) / 64.0
    u = rng.integers(0, 50, n)
    t = pa.table({"__il_kg": pa.array(kg, pa.int32()), "__il_tus": tus,
                  "__il_t": pa.array(tus, pa.timestamp("us")), "k": k, "v": v, "u": u})
    order = rng.permutation(n)  # the fold must not depend on the partition's row order
    out = pa.Table.from_batches(list(WindowFold(kind, width_us, "k", "v", "u")(
        iter(t.take(order).to_batches(max_chunksize=300))))).to_pandas()
    assert out["n"].sum() == n and out["s"].sum() == v.sum()
    df = pd.DataFrame({"kg": kg, "k": k, "t": tus, "v": v, "u": u})
    if kind == "session":
        df = df.sort_values(["kg", "k", "t"])
        brk = (df["k"].diff() != 0) | (df["t"].diff() >= width_us)
        df["p"] = brk.cumsum()
        want = df.groupby("p").agg(k=("k", "first"), ws=("t", "min"), n=("v", "size"),
                                   s=("v", "sum"), mx=("v", "max"), du=("u", "nunique"),
                                   mt=("t", "max"))
        assert (df.groupby("p")["t"].diff().dropna() < width_us).all()
    else:
        df["ws"] = df["t"] - df["t"] % width_us
        want = df.groupby(["k", "ws"]).agg(n=("v", "size"), s=("v", "sum"), mx=("v", "max"),
                                           du=("u", "nunique"), mt=("t", "max")).reset_index()
    got = out.assign(du=out["du"].map(len),
                     mt=out["__il_t"].astype("datetime64[us]").astype("int64"))
    got = got.rename(columns={"__il_ws": "ws"})
    cols = ["k", "ws", "n", "s", "mx", "du", "mt"]
    assert len(got) == len(want)
    pd.testing.assert_frame_equal(
        got[cols].sort_values(["k", "ws"]).reset_index(drop=True).astype("float64"),
        want[cols].sort_values(["k", "ws"]).reset_index(drop=True).astype("float64"))


def test_the_frozen_floor_freezes_its_workers_garbage_collector_as_interlace_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import types
    import warnings

    from harness.floor import FloorFunction
    from interlace.operators.common import worker

    class State:
        def update(self, v: tuple) -> None:
            self.value = v

    frames = [pd.DataFrame({"x": range(3)})]
    monkeypatch.setitem(sys.modules, "pyspark.worker", types.ModuleType("pyspark.worker"))
    monkeypatch.delenv(worker.WORKER_GC_FREEZE_ENV, raising=False)
    from pandas.core.internals import concat as pandas_concat

    # prepare_worker also installs the padding fast path: put pandas' method back after.
    monkeypatch.setattr(pandas_concat.JoinUnit, "_is_valid_na_for",
                        pandas_concat.JoinUnit._is_valid_na_for)
    gc.unfreeze()
    try:
        with warnings.catch_warnings():
            monkeypatch.setattr(worker, "_worker_prepared", False)
            assert list(FloorFunction(timeout=False)("k", iter(frames), State())) == []
            assert gc.get_freeze_count() == 0
            assert list(FloorFunction(timeout=False, freeze=True)("k", iter(frames),
                                                                  State())) == []
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    kinds = {e.name for e in windows.engines({"floor": True}, windows.Kind("session",
                                                                            gap_ms=30_000))}
    assert {"floor", "floor-frozen", "floor-out-frozen", "floor-combined",
            "floor-combined-nd"} <= kinds
    emits = {e.name for e in windows.engines({"floor": True}, windows.Kind("session",
                                                                            gap_ms=30_000))
             if e.floor_emits}
    assert emits == {"floor-out", "floor-out-frozen"}


def test_latency_points_are_the_median_of_their_repeats_and_a_later_file_replaces_them(
        tmp_path: Path) -> None:
    """``bench/run.py latency --plot``: each (workload, engine, store, rate) is the median of
    its repeats' figures; a later file's runs of a point replace an earlier file's."""
    import json

    from harness.tools import latency

    def run(engine: str, p99: int, rep: int, rate: int = 1000) -> dict[str, object]:
        return {"workload": "session", "engine": engine, "rate": rate, "store": "hdfs",
                "rows_out": 10, "p50_ms": p99 // 2, "p95_ms": p99, "p99_ms": p99,
                "max_ms": p99, "processed_per_s": 1000, "batches": 60,
                "batch_ms_p50": 500 + rep, "repeat": rep}

    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("\n".join(json.dumps(r) for r in [
        run("native", 3000, 0), run("interlace", 9000, 0), run("interlace", 4000, 0, 4000)]))
    second.write_text("\n".join(json.dumps(r) for r in [
        run("interlace", 3000, 0), run("interlace", 5000, 1), run("interlace", 3600, 2)]))
    points = latency.medians([first, second])
    replaced = points[("session", "interlace", "hdfs", 1000)]
    assert (replaced["p99_ms"], replaced["p50_ms"], replaced["repeats"]) == (3600, 1800, 3)
    assert replaced["batch_ms_p50"] == 501 and "repeat" not in replaced
    assert points[("session", "native", "hdfs", 1000)]["repeats"] == 1
    assert points[("session", "interlace", "hdfs", 4000)]["p99_ms"] == 4000


def test_latency_repeats_interleave_the_engines_in_turn_reversed() -> None:
    """``--repeats``: every repeat runs every engine, each other repeat in reverse order."""
    from harness.tools import latency

    args = latency.parser().parse_args(["--repeats", "3", "--workloads", "stream-table-eager",
                                        "--reader-trigger", "100 milliseconds"])
    assert args.repeats == 3 and args.reader_trigger == "100 milliseconds"
    assert latency.schedule(["native", "interlace", "floor"], 3) == [
        (0, "native"), (0, "interlace"), (0, "floor"), (1, "floor"), (1, "interlace"),
        (1, "native"), (2, "native"), (2, "interlace"), (2, "floor")]
    assert {"stream-table", "stream-table-eager"} <= set(latency.WORKLOADS)
    assert set(latency.WORKLOADS) == {*latency.BUILDERS, *latency.CHAINS}


def test_latency_run_reports_a_chains_first_query_beside_its_output_query(
        tmp_path: Path) -> None:
    """A chain's run (interlace, floor) reports the median micro-batch of both its queries: the
    one reading the channel (``batch_ms_p50``) and the one writing it; a one-query run has
    none of the second, and ``--plot`` takes the median over the repeats of each."""
    import json

    from harness.tools import latency

    chain = latency.Run("chain-session", "floor", 1000, "hdfs", batch_ms=[900, 1100, 1000],
                        upstream_batch_ms=[1300, 1200])
    s = chain.summary()
    assert (s["batch_ms_p50"], s["upstream_batch_ms_p50"]) == (1000, 1250)
    assert (s["rows_out"], s["p99_ms"]) == (0, None)  # a floor emits nothing
    one = latency.Run("session", "native", 1000, "hdfs", batch_ms=[400]).summary()
    assert one["upstream_batch_ms_p50"] is None
    runs = tmp_path / "chain.jsonl"
    runs.write_text("\n".join(json.dumps(
        dict(s, upstream_batch_ms_p50=ms, repeat=i)) for i, ms in enumerate((1250, 1700, 1400))))
    point = latency.medians([runs])[("chain-session", "floor", "hdfs", 1000)]
    assert (point["upstream_batch_ms_p50"], point["repeats"]) == (1400, 3)
    # Every engine but native builds interlace's prepared operator: a misspelt one is refused
    # before Spark starts, not run as a floor.
    with pytest.raises(SystemExit, match="--engines: unknown flor; choose of native, "
                       "interlace, floor, floor-tws"):
        latency.main(["--engines", "native,flor"])
    with pytest.raises(SystemExit, match="--workloads: unknown sesion; choose of join-inner"):
        latency.main(["--workloads", "session,sesion"])


def test_kafka_latency_inputs_and_options() -> None:
    """``bench/run.py kafka-latency``: the join's right record carries the key of a
    left record produced 0-5 s (at the rate) earlier, none below 0; the window's keys cycle
    over 100; an unknown engine is refused before the broker starts; the medians of the runs
    are :func:`latency.medians`' (one rule for both sources)."""
    from harness.tools import kafka_latency, latency

    rate = 100
    ticks = [kafka_latency.records("join-inner", i, rate, 0.0) for i in range(2_000)]
    assert all(t[0][2]["lid"] == i for i, t in enumerate(ticks))
    delays = [i - t[1][2]["rid"] for i, t in enumerate(ticks) if len(t) == 2]
    assert len(delays) > 1_000 and all(0 <= d < latency.DELAY_S * rate for d in delays)
    assert any(len(t) == 1 for t in ticks) and all(t[1][0] == "right" for t in ticks[-10:])
    ((side, key, value),) = kafka_latency.records("tumbling", 205, rate, 0.0)
    assert (side, key, value["k"], value["v"], value["ts"]) == (
        "clicks", "5", 5, 205, "1970-01-01T00:00:00.000000Z")
    args = kafka_latency.parser().parse_args([])
    assert (args.workloads, args.engines, args.repeats) == (
        "join-inner,tumbling", "passthrough,native,interlace", 3)
    assert set(kafka_latency.WORKLOADS) <= set(latency.WORKLOADS)  # the same definitions
    with pytest.raises(SystemExit, match="--engines: unknown floor; "
                       "choose of passthrough, native, interlace, interlace-eo"):
        kafka_latency.main(["--engines", "native,floor"])
    runs = [{"workload": "tumbling", "engine": "native", "rate": 1000, "store": "hdfs",
             "p50_ms": p, "p99_ms": 2 * p, "repeat": i} for i, p in enumerate((900, 700, 800))]
    point = latency.median_points(runs)[("tumbling", "native", "hdfs", 1000)]
    assert (point["p50_ms"], point["p99_ms"], point["repeats"]) == (800, 1600, 3)
