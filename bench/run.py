"""The benchmark's one entry point: a subcommand per measurement (``--help`` lists them).

Run from the repository root (one Spark job at a time on the machine)::

    .venv/bin/python bench/run.py --help                  # the subcommands
    .venv/bin/python bench/run.py throughput              # -> bench/results/<date>-full.md
    .venv/bin/python bench/run.py                         # the same (no subcommand: throughput)
    .venv/bin/python bench/run.py throughput --quick      # smoke run of the whole registry
    .venv/bin/python bench/run.py throughput --list       # the registered workloads
    .venv/bin/python bench/run.py curves --workloads join-10k --stores hdfs,rocksdb
    .venv/bin/python bench/run.py state sweep --workloads join-state --keys 1000000
    .venv/bin/python bench/run.py profile pyspy spy-*.txt

The code lives in bench/harness/ (main.py: the subcommands; the registry, Spark session, CPU
accounting, run, report; tools/: the measurements outside the registry); docs/performance.md
("How to reproduce") describes the method.
"""

from __future__ import annotations

import sys

from harness.main import main

if __name__ == "__main__":
    sys.exit(main())
