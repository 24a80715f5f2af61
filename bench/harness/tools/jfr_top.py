"""Summarise a Java Flight Recording (``bench/run.py throughput --jfr DIR``): where the JVM ran.

Run::

    .venv/bin/python bench/run.py profile jfr /tmp/jfr/hdfs-join-100k-interlace-*.jfr [--top 25]

Reads the ``jdk.ExecutionSample`` events (threads running Java code; a thread blocked in a
socket read or sleeping is not sampled) with the JDK's ``jfr`` tool and prints:

* samples per thread kind, and how many ran inside Spark tasks vs. in the stream execution
  thread (the driver's per-micro-batch planning, codegen, offset and commit logs);
* samples per *stage of the plan* a task-thread sample is in, found from the deepest
  recognised frame (file scan, shuffle write/read, sort, Arrow to/from Python, state store,
  native join, codegen'd projection, aggregation), so both engines can be compared;
* the top self frames and the top inclusive methods.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections import Counter
from pathlib import Path

# Checked top of stack first: the first pattern a frame matches names the category.
CATEGORIES: list[tuple[str, str]] = [
    ("python: write Arrow to worker",
     r"ArrowWriter|ArrowPythonRunner.*Writer|BaseStreamingArrowWriter|"
     r"PythonArrowInput|ArrowStreamWriter|writeNextBatchToArrowStream|ApplyInPandasWithStateWriter"),
    ("python: read Arrow from worker", r"PythonArrowOutput|ArrowColumnVector|ArrowStreamReader|"
     r"ApplyInPandasWithStatePythonRunner\$\$anon.*read|ColumnarBatchRow|"
     r"FlatMapGroupsInPandasWithStateExec.*deserialize"),
    ("state store", r"StateStore|HDFSBackedStateStore|RocksDB|SymmetricHashJoinStateManager|"
     r"StateStoreRDD|KeyWithIndexToValue|KeyToNumValues"),
    ("native join logic", r"StreamingSymmetricHashJoinExec|OneSideHashJoiner|JoinedRow"),
    ("sort", r"UnsafeExternalSorter|UnsafeInMemorySorter|SortExec|RadixSort|TimSort|"
     r"UnsafeExternalRowSorter|PrefixComparators"),
    ("shuffle write", r"ShuffleWriter|ShuffleExternalSorter|UnsafeShuffleWriter|"
     r"BypassMergeSortShuffleWriter|SortShuffleWriter|ShuffleWriteProcessor"),
    ("shuffle read", r"ShuffleBlockFetcherIterator|BlockStoreShuffleReader|ShuffledRowRDD|"
     r"UnsafeRowSerializer.*deserialize"),
    ("compression (lz4/zstd/snappy)", r"lz4|zstd|snappy|Lz4|Zstd|Snappy"),
    ("parquet scan", r"parquet|Parquet|VectorizedColumnReader|FileScanRDD"),
    ("aggregation (sink checksum)", r"HashAggregate|XXH64|Murmur3|aggregate"),
    ("codegen'd operators", r"GeneratedClass|GeneratedIterator|BufferedRowIterator"),
]
_COMPILED = [(name, re.compile(p)) for name, p in CATEGORIES]
_FRAME = re.compile(r"^\s+([\w$.<>/]+)\(.*\)\s+line:")


def samples(path: Path) -> list[tuple[str, list[str]]]:
    """(thread name, frames top first) per ExecutionSample."""
    out = subprocess.run(
        ["jfr", "print", "--events", "jdk.ExecutionSample", "--stack-depth", "96", str(path)],
        capture_output=True, text=True, check=True).stdout
    result: list[tuple[str, list[str]]] = []
    thread, frames, in_stack = "", [], False
    for line in out.splitlines():
        if line.startswith("jdk.ExecutionSample"):
            thread, frames, in_stack = "", [], False
        elif "sampledThread" in line:
            thread = line.split("=", 1)[1].strip()
        elif "stackTrace = [" in line:
            in_stack = True
        elif in_stack and line.strip() == "]":
            in_stack = False
            result.append((thread, frames))
        elif in_stack:
            m = _FRAME.match(line)
            if m:
                frames.append(m.group(1))
    return result


def category(frames: list[str]) -> str:
    for frame in frames:
        for name, pat in _COMPILED:
            if pat.search(frame):
                return name
    return "other"


def parser() -> argparse.ArgumentParser:
    """``bench/run.py profile jfr --help``."""
    ap = argparse.ArgumentParser(
        prog="bench/run.py profile jfr", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--top", type=int, default=20)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for f in args.files:
        ss = samples(Path(f))
        runner = "org.apache.spark.executor.Executor$TaskRunner.run"
        task = [(t, fr) for t, fr in ss if runner in fr]
        driver = [(t, fr) for t, fr in ss if "stream execution thread" in t]
        print(f"## {Path(f).name}: {len(ss)} samples, {len(task)} in Spark tasks, "
              f"{len(driver)} in the stream execution thread (driver: planning, offsets, "
              "commits)\n")
        kinds = Counter(re.sub(r"[\d.]+|\(.*", "", t).strip('" ') for t, _ in ss)
        print("| thread | samples |\n|---|---:|")
        for k, n in kinds.most_common(8):
            print(f"| {k} | {n} |")
        cats = Counter(category(fr) for _, fr in task)
        print("\n| task-thread samples by plan stage | samples | share |\n|---|---:|---:|")
        for k, n in cats.most_common():
            print(f"| {k} | {n} | {n / max(len(task), 1):.0%} |")
        self_ = Counter(fr[0] for _, fr in ss if fr)
        print("\n| top self frames | samples |\n|---|---:|")
        for k, n in self_.most_common(args.top):
            print(f"| `{k}` | {n} |")
        incl = Counter(m for _, fr in ss for m in set(fr))
        print("\n| top inclusive methods | samples |\n|---|---:|")
        for k, n in incl.most_common(args.top):
            print(f"| `{k}` | {n} |")
        print()
    return 0
