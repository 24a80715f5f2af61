"""Cost curves: time per micro-batch of interlace and Spark's native operators as rows per
micro-batch, keys and key groups grow, a plot and a fitted cost model.

Run from the repository root, alone on the machine (needs matplotlib: ``pip install
'.[bench]'``, or ``make curves``)::

    .venv/bin/python bench/curves.py                      # -> bench/results/<date>-curves.md
    .venv/bin/python bench/curves.py --workloads join-10k --stores hdfs,rocksdb

The code is bench/harness/curves.py; docs/performance.md ("Cost curves") reads the results.
"""

from __future__ import annotations

import sys

from harness.curves import main

if __name__ == "__main__":
    sys.exit(main())
