"""The benchmark: interlace vs Spark's native operators, every workload, both state stores.

Run from the repository root (one Spark job at a time on the machine)::

    .venv/bin/python bench/run.py                 # everything -> bench/results/<date>-full.md
    .venv/bin/python bench/run.py --quick         # smoke run of the whole registry
    .venv/bin/python bench/run.py --list          # the registered workloads
    .venv/bin/python bench/run.py --workloads 'join-*,window-session' --stores rocksdb
    .venv/bin/python bench/run.py --merge A.json B.json   # parts of one run -> one report

The harness lives in bench/harness/ (registry, Spark session, CPU accounting, run, report);
docs/performance.md ("How to reproduce") describes the method.
"""

from __future__ import annotations

import sys

from harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
