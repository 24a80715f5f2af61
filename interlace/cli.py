"""The ``interlace`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``interlace`` command line and return its exit code."""
    parser = argparse.ArgumentParser(prog="interlace", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the demo job on local Spark into embedded DuckDB")
    demo.add_argument("--workdir", type=Path, default=None,
                      help="where data, checkpoint and demo.duckdb go (default: a temp folder)")
    sub.add_parser("version", help="print the interlace version")
    args = parser.parse_args(argv)
    if args.command == "version":
        from interlace import __version__

        print(__version__)
        return 0
    if args.command == "demo":
        from interlace.demo import run_join_demo

        run_join_demo(args.workdir)
        return 0
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
