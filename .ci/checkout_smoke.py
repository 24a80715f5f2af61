"""Run a small join on local Spark and compare it with the oracle (a CI smoke check).

``.ci/wheel`` runs it with the wheel's bare virtual environment from the repository root: the
checkout's ``interlace/`` folder is then the working directory of Spark's Python workers, the
case where it used to shadow the installed package (``No module named
'interlace.operators'``). The first four micro-batches of the seed-003 log, inner join.
"""

from __future__ import annotations

import sys
import tempfile

from pyspark.sql import types as T

import interlace
from interlace import Join, local_session
from interlace.testing.oracle import canonical_rows, oracle_join
from interlace.testing.log import JoinBatch
from interlace.testing.replay import replay_join
from interlace.testing.seed003 import JOIN_KWARGS, build_log

SCHEMA = T.StructType([
    T.StructField("k", T.StringType()),
    T.StructField("v", T.StringType()),
    T.StructField("event_time", T.TimestampType()),
])


def main() -> int:
    print(f"interlace {interlace.__version__} from {interlace.__file__}")
    spark = local_session("interlace-checkout-smoke", shuffle_partitions=2)
    spec = Join(how="inner", key_groups=2, **JOIN_KWARGS)
    log = build_log()[:4]  # four micro-batches, four joined rows: enough to prove the import
    with tempfile.TemporaryDirectory() as work:
        result = replay_join(spark, log, SCHEMA, SCHEMA, spec, workdir=work)
    cols = list(SCHEMA.names)
    want = oracle_join(spec, result.scheduled(log, JoinBatch), left_columns=cols,
                       right_columns=cols)
    got = canonical_rows([r for _, r in result.rows])
    exp = canonical_rows([o.row for o in want.rows])
    spark.stop()
    if got != exp or not exp:
        print(f"FAILED: Spark gave {len(got)} rows, the oracle {len(exp)}", file=sys.stderr)
        return 1
    print(f"ok: {len(got)} joined rows equal the oracle's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
