"""``bench/run.py``: the one entry point of the benchmark, a subcommand per measurement.

Every figure docs/ quotes names the command reproducing it (``tests/unit/test_bench_commands.py``
parses each one). ``bench/run.py`` with no subcommand (or only options) is ``throughput``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

#: Throughput: the registry's workloads, native vs interlace (and the floor), per state store.
THROUGHPUT = "harness.cli"

#: subcommand -> module, or group -> {subcommand -> (module, what it measures)}. Each module
#: has ``parser()`` (argparse) and ``main(argv)``; ``state sweep`` is ``throughput`` on the
#: ``state`` family.
COMMANDS: dict[str, str | dict[str, tuple[str, str]]] = {
    "throughput": THROUGHPUT,
    "curves": "harness.curves",
    "state": {
        "sweep": (THROUGHPUT, "throughput on the state workloads (--keys: the state held)"),
        "fk-sweep": ("harness.tools.foreign_key_state_sweep",
                     "the foreign-key join on Spark as the right table grows"),
        "plot": ("harness.tools.state_curves", "the sweeps' results plotted (a PNG in docs/)"),
        "join-calls": ("harness.tools.join_state",
                       "one join call as the buffers grow (no Spark)"),
        "stream-table-calls": ("harness.tools.stream_table_state",
                               "one stream-table call as the table grows (no Spark)"),
        "window-calls": ("harness.tools.window_state",
                         "one session-window call at a large state (no Spark)"),
        "fk-calls": ("harness.tools.foreign_key_state",
                     "the foreign-key join's replicated right table per key group (no Spark)"),
    },
    "profile": {
        "pyspy": ("harness.tools.pyspy_top", "py-spy samples of the Python workers, by stage"),
        "jfr": ("harness.tools.jfr_top", "a Java Flight Recording's hot frames"),
        "join": ("harness.tools.profile_join",
                 "the join's Python side on a workload's batch (no Spark's JVM)"),
        "window": ("harness.tools.window_hotpath",
                   "step_window's hot path and the state sizes (no Spark)"),
    },
    "micro": {
        "output-path": ("harness.tools.pyspark_output_path",
                        "PySpark's applyInPandasWithState output path per row"),
        "window-call": ("harness.tools.window_call_cost",
                        "a window call's fixed cost (no Spark)"),
        "join-blob": ("harness.tools.join_blob_bench",
                      "a key group's join blob: bytes, encode and decode"),
        "keygroup-planning": ("harness.tools.keygroup_planning",
                              "what the balanced key-group lookup adds to planning"),
    },
    "batch-overhead": "harness.tools.batch_overhead",
    "chains": "harness.tools.chains",
    "table-aggregate": "harness.tools.table_aggregate",
    "foreign-key": "harness.tools.foreign_key_spark",
    "ab": "harness.tools.ab",
    "inspect": "harness.tools.inspect_scale",
    "latency": "harness.tools.latency",
    "kafka": "harness.tools.kafka",
    "kafka-latency": "harness.tools.kafka_latency",
    "delta": "harness.tools.delta",
    "delta-spark": "harness.tools.delta_spark",
}

HELP = {
    "throughput": "interlace vs Spark's native operators, every workload, both state stores "
                  "(the default)",
    "curves": "time per micro-batch as rows, keys and key groups grow; plot, cost model",
    "state": "state at scale: the Spark sweeps, one call at a large state, the plot",
    "profile": "where the time goes: py-spy and JFR summaries, the hot paths",
    "micro": "micro-benchmarks without a stream",
    "batch-overhead": "fixed cost per micro-batch, native vs the no-op floor",
    "chains": "a two-stage chain vs the same operators in one query",
    "table-aggregate": "table aggregation vs Spark's native changelog aggregation",
    "foreign-key": "the foreign-key join on Spark: load and update batches per key_groups",
    "ab": "two builds' interpreters running bench/run.py throughput, alternating",
    "inspect": "interlace inspect on a checkpoint holding a million join rows",
    "latency": "arrival-to-commit latency percentiles at steady input rates, native vs "
               "interlace",
    "kafka": "Kafka topics in and out on a real broker: native vs interlace, the broker's "
             "cost, the exactly-once target's",
    "kafka-latency": "latency's join and tumbling window on a real broker (produced to a "
                     "topic, read back from one): native vs interlace, the broker's floor",
    "delta": "a micro-batch into Delta vs Parquet, DuckDB and a hand-written delta-rs MERGE "
             "(no Spark)",
    "delta-spark": "into Delta on Spark: delta_writer vs delta-spark's MERGE in foreachBatch "
                   "(a line delta-spark is served for)",
}


def top_parser() -> argparse.ArgumentParser:
    """``bench/run.py --help``: the subcommands (each has its own ``--help``)."""
    lines = []
    for name, target in COMMANDS.items():
        lines.append(f"  {name:20s} {HELP[name]}")
        if isinstance(target, dict):
            lines += [f"    {sub:18s} {what}" for sub, (_, what) in target.items()]
    ap = argparse.ArgumentParser(
        prog="bench/run.py", description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="subcommands:\n" + "\n".join(lines) + "\n\nbench/run.py SUBCOMMAND --help for "
               "its options; bench/run.py OPTIONS (no subcommand) is bench/run.py throughput.")
    ap.add_argument("command", choices=list(COMMANDS), help="the measurement")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="its options")
    return ap


def resolve(argv: list[str]) -> tuple[str, ModuleType, list[str]]:
    """``(prog, module, rest)`` for a command line; exits (argparse) on an unknown name."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["throughput", *argv]
    top = top_parser().parse_args(argv[:1])
    target, prog, rest = COMMANDS[top.command], f"bench/run.py {top.command}", argv[1:]
    if isinstance(target, dict):
        group = argparse.ArgumentParser(prog=prog, description=HELP[top.command])
        group.add_argument("subcommand", choices=list(target),
                           help="; ".join(f"{k}: {what}" for k, (_, what) in target.items()))
        sub = group.parse_args(rest[:1])
        module = target[sub.subcommand][0]
        prog, rest = f"{prog} {sub.subcommand}", rest[1:]
    else:
        module = target
    return prog, importlib.import_module(module), rest


def _workloads(prog: str) -> str:
    return "state" if prog == "bench/run.py state sweep" else "*"


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse a command line without running it (the docs' commands are checked with this)."""
    prog, module, rest = resolve(argv)
    if module.__name__ == THROUGHPUT:
        return module.parser(prog, _workloads(prog)).parse_args(rest)
    return module.parser().parse_args(rest)


def main(argv: list[str] | None = None) -> int:
    """Run the command line's measurement; its exit status."""
    prog, module, rest = resolve(sys.argv[1:] if argv is None else argv)
    if module.__name__ == THROUGHPUT:
        return int(module.main(rest, prog, _workloads(prog)))
    sys.argv = [*prog.split(), *rest]  # what the measurement records as its command
    return int(module.main(rest) or 0)
