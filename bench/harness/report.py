"""Results: cells (fastest run, CPU), ratios, and the markdown + JSON files.

A *cell* is one (workload, store, engine) with its timed runs; the fastest run gives its
rows/s, the median CPU seconds of the benchmark's own processes over the runs its rows per
CPU-second. A *ratio* row puts an engine beside a native one of the same workload and store:
throughput ratio (rows/s), CPU ratio (rows per CPU-second) and state bytes (``memoryUsedBytes``
of the last data micro-batch), each other / native, so above 1 means faster or (state) more.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.compare import Check
from harness.run import RunResult

Key = tuple[str, str, str]  # (workload, store, engine)


@dataclasses.dataclass
class Cell:
    """The timed runs of one engine on one workload and store."""

    workload: str
    store: str
    engine: str
    role: str
    runs: list[RunResult]

    @property
    def fastest(self) -> RunResult:
        """The run with the shortest wall time."""
        return min(self.runs, key=lambda r: r.seconds)

    @property
    def rows_per_s(self) -> float:
        """Input rows per second of the fastest run."""
        return self.fastest.rows_per_s

    @property
    def rows_per_cpu_s(self) -> float:
        """Input rows per CPU-second of our own processes, median CPU over the runs."""
        cpu = statistics.median(r.own_cpu for r in self.runs)
        return self.fastest.input_rows / max(cpu, 1e-9)

    @property
    def state_bytes(self) -> int:
        """The fastest run's :attr:`~harness.run.RunResult.state_bytes`."""
        return self.fastest.state_bytes


def cells(runs: Iterable[RunResult]) -> dict[Key, Cell]:
    """Group the timed runs by (workload, store, engine), in first-run order."""
    out: dict[Key, Cell] = {}
    for r in runs:
        if r.kind != "timed":
            continue
        key = (r.workload, r.store, r.engine)
        if key not in out:
            out[key] = Cell(r.workload, r.store, r.engine, r.role, [])
        out[key].runs.append(r)
    return out


@dataclasses.dataclass(frozen=True)
class Ratio:
    """``other`` beside ``native`` on one workload and store (each figure other / native)."""

    workload: str
    store: str
    native: str
    other: str
    native_rows_per_s: float
    other_rows_per_s: float
    throughput: float
    cpu: float
    native_state_bytes: int
    other_state_bytes: int
    native_batch_ms: float
    other_batch_ms: float

    @property
    def state(self) -> float:
        """State bytes, other / native (``nan`` if native reports none)."""
        if not self.native_state_bytes:
            return float("nan")
        return self.other_state_bytes / self.native_state_bytes


def ratios(table: Mapping[Key, Cell]) -> list[Ratio]:
    """Every non-native cell beside every native cell of its workload and store."""
    out = []
    for (w, store, _), other in table.items():
        if other.role == "native":
            continue
        for (w2, store2, _), nat in table.items():
            if (w2, store2) != (w, store) or nat.role != "native":
                continue
            out.append(Ratio(w, store, nat.engine, other.engine, nat.rows_per_s,
                             other.rows_per_s, other.rows_per_s / nat.rows_per_s,
                             other.rows_per_cpu_s / nat.rows_per_cpu_s, nat.state_bytes,
                             other.state_bytes, nat.fastest.batch_ms, other.fastest.batch_ms))
    return out


def fmt_int(x: float) -> str:
    """``1,234`` (empty for nan)."""
    return "" if x != x else f"{x:,.0f}"


def fmt_bytes(x: float) -> str:
    """Bytes as MiB with one decimal."""
    return f"{x / 2**20:,.1f} MiB"


def fmt_ratio(x: float) -> str:
    """``1.23x`` (``n/a`` for nan)."""
    return "n/a" if x != x else f"{x:.2f}x"


def _wall(r: RunResult) -> str:
    return f"{r.seconds:.1f}" + ("*" if r.extra.get("timed_by_verification_run") else "")


def _status(checks: Sequence[Check]) -> str:
    if any(c.failed for c in checks):
        return "**NO**"
    return "yes" + (" (differences by design)" if any(c.by_design for c in checks) else "")


def render(meta: Mapping[str, Any], table: Mapping[Key, Cell],
           checks: Mapping[tuple[str, str], list[Check]], failures: Sequence[str]) -> str:
    """The markdown report."""
    v = meta["versions"]
    lines = [
        f"# Benchmark — {meta['date']} ({meta['label']})"
        + (" — --quick: smoke run, not numbers" if meta["quick"] else ""), "",
        f"Command: `{meta['command']}` (from the repository root)", "",
        *[f"- part {i}, {part['date']}, {part['total_s']:,.0f} s: `{part['command']}`"
          for i, part in enumerate(meta.get("parts", []), 1)],
        *([""] if meta.get("parts") else []),
        f"- interlace {v['interlace']} (`{v.get('interlace_path', '?')}`), "
        f"PySpark {v['pyspark']}, pandas {v['pandas']}, "
        f"pyarrow {v['pyarrow']}, numpy {v['numpy']}, Python {v['python']}, {v['java']}",
        f"- {v['cores']} cores ({v['cpu']}), {v['platform']}; "
        f"`local_session(master=\"local[2]\", shuffle_partitions=4)`"
        + "".join(f"; `{k}={x}`" for k, x in meta["conf"].items()),
        f"- state stores: {', '.join(meta['stores'])}; timed runs per cell: {meta['repeat']} "
        "(engines interleaved, the fastest reported), after one verification run per engine "
        "that collects the whole output",
        f"- wall time of the whole run: {meta['total_s']:,.0f} s", "",
        "| workload | what | input rows | data micro-batches | interlace key_groups |",
        "|---|---|---:|---:|---:|",
    ]
    for w in meta["workloads"]:
        lines.append(f"| {w['name']} | {w['description']} | {w['input_rows']:,} | "
                     f"{w['data_batches']} | {w['key_groups']} |")
    formats = meta.get("join_formats") or {}
    if formats:
        lines += ["", "## Join state formats (`spark.sql.streaming.join.stateFormatVersion`)", "",
                  "A tiny stream-stream join per format and store; natives that are stream-stream "
                  f"joins run once per format in {meta['format_runs']} (others: the default, "
                  f"{meta['default_join_format']}).", "",
                  "| format | " + " | ".join(formats) + " |",
                  "|---:|" + "---|" * len(formats)]
        for fmt in sorted({f for per in formats.values() for f in per}):
            lines.append(f"| {fmt} | " + " | ".join(formats[s].get(fmt, "") for s in formats)
                         + " |")
    rs = ratios(table)
    main = [r for r in rs if r.other == "interlace"]
    lines += [
        "", "## interlace vs native", "",
        "Throughput: input rows / query wall time (fastest run). CPU: input rows per "
        "CPU-second of the benchmark's own processes (median over runs), steadier than wall "
        "time on a shared machine. ms/batch: median `triggerExecution` of the data "
        "micro-batches after the first (fastest run). State: at the last data micro-batch, "
        "`memoryUsedBytes` (HDFS) or the SST files' size `rocksdbSstFileSize` (RocksDB, whose "
        "`memoryUsedBytes` is its memory use, not the state's size). Ratios are interlace / "
        "native.", "",
        "| store | workload | native | native rows/s | interlace rows/s | throughput | CPU | "
        "ms/batch: native, interlace | native state | interlace state | state | outputs |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in main:
        lines.append(
            f"| {r.store} | {r.workload} | {r.native} | {fmt_int(r.native_rows_per_s)} | "
            f"{fmt_int(r.other_rows_per_s)} | **{fmt_ratio(r.throughput)}** | "
            f"**{fmt_ratio(r.cpu)}** | {fmt_int(r.native_batch_ms)}, "
            f"{fmt_int(r.other_batch_ms)} | {fmt_bytes(r.native_state_bytes)} | "
            f"{fmt_bytes(r.other_state_bytes)} | {fmt_ratio(r.state)} | "
            f"{_status(checks.get((r.workload, r.store), []))} |")
    extra = [r for r in rs if r.other != "interlace"]
    if extra:
        lines += ["", "## Other engines (floor, key_groups sweep, shim variants) vs native", "",
                  "| store | workload | native | engine | rows/s | throughput | CPU | "
                  "ms/batch: native, engine |",
                  "|---|---|---|---|---:|---:|---:|---:|"]
        lines += [f"| {r.store} | {r.workload} | {r.native} | {r.other} | "
                  f"{fmt_int(r.other_rows_per_s)} | {fmt_ratio(r.throughput)} | "
                  f"{fmt_ratio(r.cpu)} | {fmt_int(r.native_batch_ms)}, "
                  f"{fmt_int(r.other_batch_ms)} |" for r in extra]
    lines += ["", "## Verification (the verification runs' whole outputs)", ""]
    for (w, store), cs in checks.items():
        lines.append(f"- **{w}, {store}**: {_status(cs)}")
        for c in cs:
            mark = "ok" if c.ok else ("by design" if c.by_design else "**FAILED**")
            lines.append(f"  - {c.what}: {mark} — {c.detail}")
    lines += [
        "", "## Runs", "",
        "Wall times of the timed runs (s), own CPU-s per run; CPU-s of the fastest run by "
        "process (Spark's JVM, the Python workers, the driver, and other load on the machine); "
        "state of the last data micro-batch (bytes, state rows, rows held per the data) and "
        "the peak over the run. A wall time marked * is a verification run (the output "
        "collected) that took over 3 minutes: such a cell runs once.", "",
        "| store | workload | engine | wall (s) | own CPU-s | JVM / workers / driver / other | "
        "state bytes | numRowsTotal | held (data) | bytes / held | peak bytes | "
        "RocksDB SST bytes |",
        "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (w, store, e), c in table.items():
        f, st = c.fastest, c.fastest.last_data_state
        held = f.extra.get("held")
        cpu = f.cpu
        lines.append(
            f"| {store} | {w} | {e} | {', '.join(_wall(r) for r in c.runs)} | "
            f"{', '.join(f'{r.own_cpu:.1f}' for r in c.runs)} | "
            f"{cpu.get('jvm', 0):.1f} / {cpu.get('python_workers', 0):.1f} / "
            f"{cpu.get('driver', 0):.1f} / {cpu.get('outside', 0):.1f} | "
            f"{fmt_bytes(st['memoryUsedBytes'])} | {st['numRowsTotal']:,} | "
            f"{'' if held is None else f'{held:,}'} | "
            f"{'' if not held else fmt_int(st['memoryUsedBytes'] / held)} | "
            f"{fmt_bytes(f.peak_state_bytes)} | "
            f"{fmt_bytes(st['rocksdbSstFileSize']) if 'rocksdbSstFileSize' in st else ''} |")
    if failures:
        lines += ["", "## FAILURES", ""] + [f"- {x}" for x in failures]
    return "\n".join(lines) + "\n"


def to_json(meta: Mapping[str, Any], runs: Sequence[RunResult],
            checks: Mapping[tuple[str, str], list[Check]], failures: Sequence[str]) -> str:
    """Everything: the header, every run, the ratios, the checks and the failures."""
    return json.dumps({
        **meta,
        "ratios": [{**dataclasses.asdict(r),
                    "state_ratio": None if r.state != r.state else r.state}
                   for r in ratios(cells(runs))],
        "checks": [{"workload": w, "store": s, **dataclasses.asdict(c)}
                   for (w, s), cs in checks.items() for c in cs],
        "failures": list(failures),
        "runs": [r.to_json() for r in runs],
    }, indent=1, default=str)


def merge(raws: Sequence[Mapping[str, Any]], label: str, command: str
          ) -> tuple[dict[str, Any], list[RunResult], dict[tuple[str, str], list[Check]],
                     list[str]]:
    """One report's ``(meta, runs, checks, failures)`` from results files (their parsed JSON)
    of parts of one benchmark, e.g. a full run split by ``--workloads`` over two sittings.

    The parts must have been run with the same versions, conf and repeats, and must not
    share a (workload, store): a cell timed in two sessions is not one cell. The header keeps
    the first part's date, sums the wall times and lists every part's command.
    """
    if not raws:
        raise ValueError("nothing to merge")
    first = raws[0]
    for raw in raws[1:]:
        for key in ("versions", "conf", "repeat", "quick"):
            if raw.get(key) != first.get(key):
                raise ValueError(f"the parts differ in {key!r}: {first.get(key)!r} vs "
                                 f"{raw.get(key)!r}; run them alike to merge them")
    runs = [RunResult.from_json(r) for raw in raws for r in raw["runs"]]
    owner: dict[tuple[str, str], int] = {}
    for i, raw in enumerate(raws):
        for r in raw["runs"]:
            if owner.setdefault((r["workload"], r["store"]), i) != i:
                raise ValueError(f"{r['workload']} on {r['store']} was run in two parts; "
                                 "merge parts that split the workloads or the stores")
    checks: dict[tuple[str, str], list[Check]] = {}
    for raw in raws:
        for c in raw["checks"]:
            c = dict(c)
            checks.setdefault((c.pop("workload"), c.pop("store")), []).append(Check(**c))
    workloads = list({w["name"]: w for raw in raws for w in raw["workloads"]}.values())
    formats: dict[str, Any] = {}
    for raw in raws:
        formats.update(raw.get("join_formats") or {})
    meta = {
        **first, "label": label, "command": command,
        "parts": [{"command": raw["command"], "date": raw["date"], "total_s": raw["total_s"]}
                  for raw in raws],
        "stores": list(dict.fromkeys(s for raw in raws for s in raw["stores"])),
        "total_s": sum(raw["total_s"] for raw in raws), "workloads": workloads,
        "join_formats": formats,
        "format_runs": max((raw["format_runs"] for raw in raws), key=len),
    }
    for key in ("ratios", "checks", "failures", "runs"):
        meta.pop(key, None)
    return meta, runs, checks, [f for raw in raws for f in raw["failures"]]


def exit_status(failures: Sequence[str]) -> int:
    """1 (after listing them on stderr) when any check failed, else 0."""
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


def write(out_dir: Path, stem: str, markdown: str, raw: str) -> Path:
    """Write ``<stem>.md`` and ``<stem>.json`` into ``out_dir``; return the markdown's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / f"{stem}.md"
    md.write_text(markdown)
    md.with_suffix(".json").write_text(raw)
    return md
