"""The ``interlace`` command line.

* ``interlace run PIPELINE.toml [--continuous] [--metrics-port N]`` — run a pipeline.
* ``interlace validate PIPELINE.toml`` — check a pipeline file, no Spark started.
* ``interlace demo [--workdir DIR]`` — the README's main job on local Spark into DuckDB.
* ``interlace explain LOG.json --time-window-ms 15000 ...`` — a seed-003-style join table.
* ``interlace version``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="interlace", description="interlace streaming operators")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a pipeline file")
    run.add_argument("pipeline", type=Path)
    run.add_argument(
        "--continuous",
        action="store_true",
        help="keep running (default: stop when the sources are exhausted)",
    )
    run.add_argument(
        "--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port"
    )
    val = sub.add_parser("validate", help="validate a pipeline file")
    val.add_argument("pipeline", type=Path)
    demo = sub.add_parser("demo", help="run the demo pipelines on local Spark into DuckDB")
    demo.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where data, checkpoints and demo.duckdb go (default: a temp folder)",
    )
    ex = sub.add_parser("explain", help="print a join's output per event of a small JSON log")
    ex.add_argument("log", type=Path)
    ex.add_argument("--key", default="key")
    ex.add_argument("--value", default="value")
    ex.add_argument(
        "--how",
        default="inner,left,full",
        help="comma-separated: inner,left,right,full,left_semi,left_anti",
    )
    ex.add_argument("--time-window-ms", type=int, default=None)
    ex.add_argument("--lower-ms", type=int, default=None)
    ex.add_argument("--upper-ms", type=int, default=None)
    ex.add_argument("--lateness-ms", type=int, default=0)
    ex.add_argument("--late-data", default="drop", choices=["drop", "reopen", "dlq"])
    ex.add_argument("--allowed-lateness-ms", type=int, default=None)
    sub.add_parser("version", help="print the interlace version")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``interlace`` command line and return its exit code."""
    args = _parser().parse_args(argv)
    from interlace.operators.errors import ConfigError

    try:
        return _dispatch(args)
    except ConfigError as exc:
        print(f"interlace: configuration error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as exc:
        print(f"interlace: {exc}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "version":
        from interlace import __version__

        print(__version__)
        return 0
    if args.command == "validate":
        from interlace.pipeline import Pipeline

        p = Pipeline.load(args.pipeline)
        what = "join" if p.join is not None else "window"
        print(
            f"{args.pipeline}: ok ({what} pipeline {p.name!r}, {len(p.sources)} source(s), "
            f"target {p.target.kind}; output columns {p.output_columns()})"
        )
        return 0
    if args.command == "run":
        from interlace.pipeline import Pipeline
        from interlace.runner import run_pipeline

        p = Pipeline.load(args.pipeline)
        summary = run_pipeline(
            p, base=Path.cwd(), continuous=args.continuous, metrics_port=args.metrics_port
        )
        return 130 if summary.stopped_by_user else 0
    if args.command == "demo":
        from interlace.demo import run_demo

        run_demo(args.workdir)
        return 0
    if args.command == "explain":
        from interlace.explain import explain_join, load_events

        kwargs: dict[str, object] = {"lateness_ms": args.lateness_ms, "late_data": args.late_data}
        if args.time_window_ms is not None:
            kwargs["time_window_ms"] = args.time_window_ms
        else:
            kwargs["lower_ms"], kwargs["upper_ms"] = args.lower_ms, args.upper_ms
        if args.allowed_lateness_ms is not None:
            kwargs["allowed_lateness_ms"] = args.allowed_lateness_ms
        hows = [h.strip() for h in args.how.split(",") if h.strip()]
        print(
            explain_join(load_events(args.log), key=args.key, value=args.value, hows=hows, **kwargs)
        )
        return 0
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
