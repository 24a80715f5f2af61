"""The ``interlace`` command line.

* ``interlace run PIPELINE.toml [--continuous] [--metrics-port N]`` — run a pipeline.
* ``interlace validate PIPELINE.toml`` — check a pipeline file, no Spark started.
* ``interlace demo [--workdir DIR] [--master URL]`` — the README's main job on Spark (local by
  default) into DuckDB.
* ``interlace explain LOG.json --time-window-ms 15000 ...`` — a seed-003-style join table
  (``--operator window`` / ``stream_table`` / ``table`` / ``foreign_key`` for the other
  operators).
* ``interlace inspect PIPELINE.toml [--batch N] [--key K] [--json] ...`` — what each stage's
  state holds after its last committed micro-batch, and when each item is released
  (:mod:`interlace.inspection`, docs/inspect.md).
* ``interlace version``.

A failure prints a short message naming the problem and the fix; ``--verbose`` (before or after
the command) prints the full trace too (:mod:`interlace.errors_cli`, docs/cli.md).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="interlace", description="interlace streaming operators")
    _add_verbose(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a pipeline file")
    run.add_argument("pipeline", type=Path, help="the pipeline file (TOML)")
    _add_verbose(run)
    run.add_argument(
        "--continuous",
        action="store_true",
        help="keep running (default: stop when the sources are exhausted)",
    )
    run.add_argument(
        "--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port"
    )
    val = sub.add_parser("validate", help="validate a pipeline file")
    val.add_argument("pipeline", type=Path, help="the pipeline file (TOML) to check")
    _add_verbose(val)
    demo = sub.add_parser("demo", help="run the demo pipelines on local Spark into DuckDB")
    _add_verbose(demo)
    demo.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where data, checkpoints and demo.duckdb go (default: a temp folder)",
    )
    demo.add_argument(
        "--master",
        default=None,
        help="Spark master URL, e.g. spark://host:7077 (default: local[2]); on a cluster, "
        "--workdir must be a folder every executor sees at the same path",
    )
    ex = sub.add_parser(
        "explain",
        help="print an operator's output per event of a small JSON log",
        description="Replay a small JSON event log through the real join, window, "
        "stream-table, table-table or foreign-key operator function (no Spark) and print, per "
        "micro-batch, the rows it emits. See docs/explain.md. The same rules on a running "
        "pipeline's state, item by item with the watermark that releases each: "
        "interlace inspect PIPELINE.toml (docs/inspect.md).",
        epilog="""log format (JSON):
  {"events": [EVENT, ...]}: each event is its own micro-batch, in ts order (stable; with
  --arrival file, as written), then Spark's trailing no-data batch if the watermark moved.
    ts     required: seconds after 2026-01-01T00:00:00 UTC, or an ISO-8601 timestamp
    side   "left" or "right": required by every operator but window (stream_table: left
           is the stream, right the table; table, foreign_key: two tables; in a table a
           null value is a tombstone), refused by window
    ...    any other field is a column (--key/--value, --group-by/--agg)

join example (join.json):
  {"events": [{"side": "left", "ts": 3, "key": "k", "value": "A"},
              {"side": "right", "ts": 4, "key": "k", "value": "a"}]}
  interlace explain join.json --time-window-ms 15000 --how inner,left,full

stream-table example (st.json; the table's null value at ts 4 is a tombstone):
  {"events": [{"side": "right", "ts": 2, "key": "k", "value": "gold"},
              {"side": "left", "ts": 3, "key": "k", "value": "o1"},
              {"side": "right", "ts": 4, "key": "k", "value": null},
              {"side": "left", "ts": 5, "key": "k", "value": "o2"}]}
  interlace explain st.json --operator stream_table --emit eager

table-table example (tt.json; a changelog out: an upsert per change, a delete at ts 4):
  {"events": [{"side": "left", "ts": 1, "key": "k", "value": "A"},
              {"side": "right", "ts": 2, "key": "k", "value": "a"},
              {"side": "right", "ts": 3, "key": "k", "value": "b"},
              {"side": "left", "ts": 4, "key": "k", "value": null}]}
  interlace explain tt.json --operator table --emit eager

foreign-key example (fk.json; left: (key, fk), right: (fk, value); order o2 moves to 2):
  {"events": [{"side": "right", "ts": 1, "fk": 1, "value": "pen"},
              {"side": "left", "ts": 2, "key": "o1", "fk": 1},
              {"side": "left", "ts": 3, "key": "o2", "fk": 1},
              {"side": "right", "ts": 4, "fk": 1, "value": "blue pen"},
              {"side": "left", "ts": 5, "key": "o2", "fk": 2}]}
  interlace explain fk.json --operator foreign_key --emit eager

Table aggregation example (agg.json; a1 moves from eu to us, a2's update with only nulls
is a delete, which empties eu):
  {"events": [{"ts": 1, "key": "a1", "group": "eu", "value": 100},
              {"ts": 2, "key": "a2", "group": "eu", "value": 50},
              {"ts": 3, "key": "a1", "group": "us", "value": 120},
              {"ts": 4, "key": "a2", "group": null, "value": null}]}
  interlace explain agg.json --operator aggregate --emit eager --agg count,sum:value

window example (win.json; the event at ts 4 is written, so arrives, last: revision 1):
  {"events": [{"ts": 3, "key": "k1", "value": 5}, {"ts": 12, "key": "k1", "value": 2},
              {"ts": 15, "key": "k1", "value": 1}, {"ts": 4, "key": "k1", "value": 1}]}
  interlace explain win.json --operator window --kind tumbling --duration-ms 10000 \\
      --agg count,sum:value --arrival file --late-data reopen --allowed-lateness-ms 10000
""",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ex.add_argument("log", type=Path, help="the JSON event log (format below)")
    ex.add_argument(
        "--operator",
        default="join",
        choices=["join", "window", "stream_table", "table", "foreign_key", "aggregate"],
        help="the operator to replay the log through (default: join)",
    )
    ex.add_argument(
        "--arrival",
        default="ts",
        choices=["ts", "file"],
        help="the order events arrive in: ts (sorted by ts, stable; default) or file (as "
        "written, so an event written after later ones arrives late)",
    )
    jo = ex.add_argument_group(
        "join options (--operator join; key, value, how: the table joins too)"
    )
    jo.add_argument("--key", default=None, help="the join key field, both sides (default: key)")
    jo.add_argument("--value", default=None, help="the field shown in the table (default: value)")
    jo.add_argument(
        "--how",
        default=None,
        help="join types, one column each, comma-separated from inner,left,right,full,"
        "left_semi,left_anti (default: inner,left,full); stream_table, foreign_key: "
        "inner,left (default: both); table: inner,left,full (default: all three)",
    )
    jo.add_argument(
        "--time-window-ms",
        type=int,
        default=None,
        help="match rows whose times differ by at most this (symmetric bounds)",
    )
    jo.add_argument(
        "--lower-ms",
        type=int,
        default=None,
        help="lower bound of right.ts - left.ts (with --upper-ms, instead of --time-window-ms)",
    )
    jo.add_argument("--upper-ms", type=int, default=None, help="upper bound of right.ts - left.ts")
    wo = ex.add_argument_group("window options (--operator window)")
    wo.add_argument(
        "--kind",
        default=None,
        choices=["tumbling", "hopping", "session"],
        help="the window kind (required with --operator window)",
    )
    wo.add_argument(
        "--duration-ms", type=int, default=None, help="window length (tumbling, hopping)"
    )
    wo.add_argument("--hop-ms", type=int, default=None, help="hop (hopping): 0 < hop <= duration")
    wo.add_argument("--gap-ms", type=int, default=None, help="session gap (session)")
    wo.add_argument(
        "--group-by",
        default=None,
        help="group-by fields, comma-separated; '' for one group (default: key)",
    )
    wo.add_argument(
        "--agg",
        default=None,
        help="aggregations, comma-separated, each AGG[:FIELD][=ALIAS] with AGG one of count, "
        "sum, min, max, avg, first, last, count_distinct, e.g. count,sum:value,avg:value=mean "
        "(default: count)",
    )
    so = ex.add_argument_group(
        "table join options (--operator stream_table, table, foreign_key)"
    )
    so.add_argument(
        "--emit",
        default=None,
        choices=["final", "eager"],
        help="final: a row waits until the watermark passes it (default); eager: it is "
        "joined with (or applied to) what was received so far",
    )
    so.add_argument(
        "--fk",
        default=None,
        help="foreign_key: the field of left events holding the foreign key, and of right "
        "events holding their key (default: fk)",
    )
    so.add_argument(
        "--history-retention-ms",
        type=int,
        default=None,
        help="stream_table: how long table versions are kept behind the watermark (default: "
        "--lateness-ms)",
    )
    late = ex.add_argument_group(
        "late data (every operator; --allowed-lateness-ms and reopen: join and window only)"
    )
    late.add_argument(
        "--lateness-ms",
        type=int,
        default=None,
        help="how far behind the maximum event time a row may arrive (default: 0)",
    )
    late.add_argument(
        "--late-data",
        default=None,
        choices=["drop", "reopen", "dlq"],
        help="what happens to a row later than that (default: drop)",
    )
    late.add_argument(
        "--allowed-lateness-ms",
        type=int,
        default=None,
        help="under reopen: how long closed state is kept (default: --lateness-ms)",
    )
    late.add_argument(
        "--dlq-horizon-ms",
        type=int,
        default=None,
        help="under dlq: how far behind the watermark late rows still reach the operator "
        "(default: one day)",
    )
    _inspect_parser(sub)
    sub.add_parser("version", help="print the interlace version")
    return parser


def _inspect_parser(sub: Any) -> None:
    ins = sub.add_parser(
        "inspect", help="show what a pipeline's state holds and when each item is released",
        description="Read each stage's checkpoint through Spark's state data source (read-only; "
        "PySpark 4.0+) and print every held item with the watermark that releases it. See "
        "docs/inspect.md.")
    ins.add_argument("pipeline", type=Path,
                     help="the pipeline file (TOML) whose checkpoints to read, or a checkpoint "
                     "folder `interlace run` wrote (it records the pipeline file there)")
    _add_verbose(ins)
    ins.add_argument("--batch", type=int, default=None,
                     help="the micro-batch to read (default: the last committed one)")
    ins.add_argument("--key", default=None,
                     help="only items whose key is VALUE (any key column) or COLUMN=VALUE")
    ins.add_argument("--operator", default=None,
                     help="only this stage (its name) or operator kind (join)")
    ins.add_argument("--held-longer-than", default=None, metavar="DURATION",
                     help="only items whose event time is more than DURATION (e.g. 90s, 10m, "
                     "2h, or ms) behind the operator's watermark")
    ins.add_argument("--limit", type=int, default=50, help="items printed per stage (default 50)")
    ins.add_argument("--json", action="store_true",
                     help="print every stage's summary and items as JSON")


def _duration_ms(text: str) -> int:
    from interlace.operators.errors import ConfigError

    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    t = text.strip().lower()
    for unit in sorted(units, key=len, reverse=True):
        if t.endswith(unit) and t[: -len(unit)].strip().replace(".", "", 1).isdigit():
            return int(float(t[: -len(unit)]) * units[unit])
    if t.isdigit():
        return int(t)
    msg = (f"--held-longer-than {text!r} is not a duration: give a number and a unit, e.g. "
           "90s, 10m, 2h (or milliseconds: 600000)")
    raise ConfigError(msg)


def _add_verbose(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: `interlace --verbose run` and `interlace run --verbose` both set it.
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="on failure, print the full trace (and Spark's output) instead of a short message "
        "naming the log file",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``interlace`` command line and return its exit code.

    A failure prints a short message naming the problem and the fix (exit 2 for a problem in
    the configuration or the input, 1 otherwise); see :mod:`interlace.errors_cli`.
    """
    args = _parser().parse_args(argv)
    from interlace.errors_cli import run_command

    return run_command(args, _dispatch)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "version":
        from interlace import __version__

        print(__version__)
        return 0
    if args.command == "validate":
        from interlace.preflight import preflight

        def warn(msg: str) -> None:  # the data may not be there yet: `run` refuses, not validate
            print(f"interlace: warning: {msg}", file=sys.stderr)

        base = args.pipeline.resolve().parent  # relative paths: against the file's folder
        p = preflight(args.pipeline, base=base, on_missing_path=warn)
        if p.stages:
            from interlace.pipeline.kinds import join_kind

            steps = ", ".join(
                f"{r.stage.name}: "
                f"{join_kind(r.pipeline.join).title if r.pipeline.join is not None else 'window'}"
                for r in p.stage_runs() if r.stage is not None
            )
            what = f"chain pipeline {p.name!r} of {len(p.stages)} stages ({steps})"
        else:
            what = f"{'join' if p.join is not None else 'window'} pipeline {p.name!r}"
        print(
            f"{args.pipeline}: ok ({what}, {len(p.sources)} source(s), "
            f"target {p.target.kind}; output columns {p.output_columns()})"
        )
        return 0
    if args.command == "run":
        from interlace.pipeline.checkpoint import record_pipeline_file
        from interlace.preflight import preflight
        from interlace.runner import run_pipeline

        base = args.pipeline.resolve().parent  # relative paths: against the file's folder
        p = preflight(args.pipeline, base=base)  # before Spark starts
        record_pipeline_file(p, base, args.pipeline)  # for `interlace inspect CHECKPOINT`
        summary = run_pipeline(
            p,
            base=base,
            continuous=args.continuous,
            metrics_port=args.metrics_port,
            progress=sys.stderr,
        )
        return 130 if summary.stopped_by_user else 0
    if args.command == "demo":
        from interlace.demo import run_demo

        run_demo(args.workdir, master=args.master)
        return 0
    if args.command == "explain":
        from interlace.explain import explain_log

        fixed = ("command", "log", "operator", "arrival")
        options = {k: v for k, v in vars(args).items() if k not in fixed and v is not None}
        print(explain_log(args.log, args.operator, args.arrival, **options))
        return 0
    if args.command == "inspect":
        return _inspect(args)
    raise AssertionError(args.command)


def _inspect(args: argparse.Namespace) -> int:
    from interlace.inspection import inspect_pipeline, render, to_json
    from interlace.preflight import preflight
    from interlace.session import local_session

    held_ms = (_duration_ms(args.held_longer_than) if args.held_longer_than is not None
               else None)
    path, base, only = args.pipeline, args.pipeline.resolve().parent, args.operator
    with contextlib.ExitStack() as stack:
        if args.pipeline.is_dir():  # a checkpoint folder: the pipeline file its run recorded
            path, base, only = _recorded_pipeline(args.pipeline, only, stack)
        p = preflight(path, base=base, on_missing_path=lambda msg: None)
    s = p.spark
    spark = local_session(f"interlace-inspect-{p.name}", master=s.master,
                          shuffle_partitions=s.shuffle_partitions, state_store=s.state_store,
                          changelog_checkpointing=s.changelog_checkpointing,
                          conf=dict(s.conf or {}))
    found = [one.filtered(key=args.key, held_longer_than_ms=held_ms)
             for one in inspect_pipeline(spark, p, base, batch_id=args.batch, only=only)]
    print(to_json(found) if args.json else render(found, limit=args.limit))
    return 0


def _recorded_pipeline(folder: Path, only: str | None,
                       stack: contextlib.ExitStack) -> tuple[Path, Path, str | None]:
    """(pipeline file, base, stage) for ``interlace inspect CHECKPOINT``, from its record."""
    import tempfile

    from interlace.inspection import InspectError
    from interlace.pipeline.checkpoint import PIPELINE_FILE, recorded_pipeline_file

    record = recorded_pipeline_file(folder)
    if record is None:
        msg = (f"{folder} is a folder without {PIPELINE_FILE} (`interlace run` records its "
               "pipeline file in each checkpoint it runs; this one was not run by it, or by an "
               "earlier version): pass the pipeline file, interlace inspect PIPELINE.toml, or "
               "from Python interlace.inspect(spark, checkpoint, op)")
        raise InspectError(msg)
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory())) / Path(record["file"]).name
    tmp.write_text(record["toml"], encoding="utf-8")  # the text that ran, even if edited since
    return tmp, Path(record["file"]).parent, only or record["stage"]


if __name__ == "__main__":
    sys.exit(main())
