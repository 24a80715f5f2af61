"""Shared pytest setup: Hypothesis profiles and the one session-scoped SparkSession."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# CI: 60 examples per property (1.5x the dev profile; tests that set their own count keep it).
# At 150 the property tests took ~600 s of the suite's ~3,500 s of worker time (junit, CI=true,
# 2026-11-26); at 100, the files with properties took ~1,050 s of ~5,600 (2026-11-28), and the
# whole CI (the compatibility tier of four PySpark lines included) must stay within 60 minutes
# on two cores. Each CI run draws new examples (not derandomized), so successive runs keep
# exploring.
settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

os.environ["PYSPARK_PYTHON"] = sys.executable

#: JVM flags of every Spark JVM the tests start: this process's session and, through the
#: environment, the `interlace run` / demo subprocesses (pyspark passes PYSPARK_SUBMIT_ARGS to
#: spark-submit), their executors on a cluster and the cluster's daemons (test_cluster.py).
#: The tests run hundreds of short queries on a few rows each: the JVM spent about half its
#: CPU in the C2 compiler (thread times, one replay file), optimising code that then ran for
#: seconds. C1 alone and the serial collector cut four replay files on two workers from 261 s
#: to 197 s. They change how fast the JVM runs, not what Spark computes; a PYSPARK_SUBMIT_ARGS
#: already set wins.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ["INTERLACE_TEST_JVM_OPTIONS"] = TEST_JVM_OPTIONS


def _class_data_archive(jvm_options: str) -> str:
    """`` -XX:SharedArchiveFile=...`` for the driver JVMs the tests start, or "" (no archive).

    A Spark driver spends about 6 of its 17 s start (a session and a first small job, two idle
    cores) loading and verifying classes from PySpark's jars. The JVM can dump the classes one
    run loaded into an archive (AppCDS, ``-XX:ArchiveClassesAtExit``) and map it in later runs:
    11 s instead of 17 (2026-11-28); tests/cli/test_errors.py (17 tests, a CLI subprocess each)
    took 92.5 s with it and 108.7 s without (2026-11-29, one worker). The suite starts about 150 driver JVMs (each worker's
    session, the `interlace` CLI subprocesses, the crash matrix's restarts), so the archive is
    built once per PySpark, Java and Python (about 30 s, under a lock: the first xdist process
    builds it, the others wait) in ``$INTERLACE_CDS_CACHE`` (default ~/.cache/interlace-cds).
    Driver JVMs only: a cluster's executors run from another classpath. A JVM whose classpath
    does not match the archive runs without it, silently (``-Xlog:cds=off``), as does every JVM
    if the build fails; what Spark computes does not change. ``INTERLACE_TEST_CDS=0`` turns
    it off (the compatibility tier starts too few JVMs per line to pay for a build)."""
    import fcntl
    import hashlib
    import shutil
    import subprocess
    from pathlib import Path

    if os.environ.get("INTERLACE_TEST_CDS", "1") == "0":
        return ""
    try:
        import pyspark
    except ImportError:
        return ""
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get(
        "JAVA_HOME") else shutil.which("java")
    if not java:
        return ""
    version = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    key = hashlib.sha256("|".join([pyspark.__version__, pyspark.__file__, java, version,
                                   sys.executable, jvm_options]).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("INTERLACE_CDS_CACHE",
                                Path.home() / ".cache" / "interlace-cds"))
    cache.mkdir(parents=True, exist_ok=True)
    archive, failed = cache / f"spark-{pyspark.__version__}-{key}.jsa", cache / f"{key}.failed"
    use = f" -XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"
    with open(cache / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            return use
        if failed.exists():
            return ""
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_SUBMIT_ARGS=(
            f'--driver-java-options "{jvm_options} -XX:ArchiveClassesAtExit={partial} '
            f'-Xlog:cds=off -Xlog:cds+dynamic=off" pyspark-shell'))
        proc = subprocess.run([sys.executable, "-c", _CDS_WORKLOAD], env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        if proc.returncode != 0 or not partial.exists():
            failed.write_text(proc.stderr[-4000:])
            return ""
        partial.rename(archive)
        return use


#: What the archive's build runs: a session, a batch aggregation, and a streaming
#: applyInPandasWithState on RocksDB (the classes the tests' queries load).
_CDS_WORKLOAD = """
import tempfile, pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout
from interlace import local_session
spark = local_session("interlace-cds", shuffle_partitions=2)
spark.conf.set("spark.sql.streaming.stateStore.providerClass",
               "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
d = tempfile.mkdtemp()
spark.range(1000).withColumn("k", F.col("id") % 7).withColumn(
    "ts", F.timestamp_seconds("id")).write.parquet(d + "/in")
spark.read.parquet(d + "/in").groupBy("k").count().collect()
def f(key, frames, state):
    n = sum(len(x) for x in frames) + (state.get[0] if state.exists else 0)
    state.update((n,))
    yield pd.DataFrame({"k": [key[0]], "n": [n]})
q = (spark.readStream.schema(spark.read.parquet(d + "/in").schema).parquet(d + "/in")
     .withWatermark("ts", "1 second").groupBy("k")
     .applyInPandasWithState(f, "k long, n long", "n long", "append",
                             GroupStateTimeout.EventTimeTimeout)
     .writeStream.format("parquet").option("path", d + "/out")
     .option("checkpointLocation", d + "/cp").trigger(availableNow=True).start())
q.awaitTermination()
spark.read.parquet(d + "/out").count()
spark.stop()
"""


if "PYSPARK_SUBMIT_ARGS" not in os.environ:
    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        f'--driver-java-options "{TEST_JVM_OPTIONS}{_class_data_archive(TEST_JVM_OPTIONS)}" '
        f'--conf "spark.executor.extraJavaOptions={TEST_JVM_OPTIONS}" pyspark-shell')


def _kafka_conf():
    """Spark's Kafka connector for every test session (tests/kafka need it before the session
    starts), resolved with Maven (cached). ``INTERLACE_TEST_KAFKA=0`` leaves it out (the
    compatibility tier's lines that run no Kafka test); so does a failed resolution, and the
    Kafka tests then fail naming the connector."""
    if os.environ.get("INTERLACE_TEST_KAFKA", "1") == "0":
        return {}
    from interlace.testing.kafka import spark_conf_for_kafka

    try:
        return spark_conf_for_kafka()
    except Exception as exc:  # noqa: BLE001 - reported, and the Kafka tests fail on it
        print(f"Spark's Kafka connector not resolved: {exc}", file=sys.stderr)
        return {}


@pytest.fixture(scope="session")
def spark():
    from interlace import local_session

    session = local_session("interlace-tests", shuffle_partitions=2, conf=_kafka_conf())
    yield session
    session.stop()



class ArrowChunks:
    """Cut key groups into Arrow chunks of ``rows`` (``spark.sql.execution.arrow.
    maxRecordsPerBatch``, for the queries a test starts; restored after it), and run an
    operator with its function wrapped to count the calls that got more than one frame."""

    def __init__(self, spark):
        self.spark = spark
        self.several = spark.sparkContext.accumulator(0)

    def rows(self, rows):
        from interlace.session import ARROW_BATCH_KEY

        self.spark.conf.set(ARROW_BATCH_KEY, str(rows))

    def apply(self, op):
        import dataclasses

        func, several = op.func, self.several

        def counting(key, frames, state):
            frames = list(frames)
            several.add(int(len(frames) > 1))
            yield from func(key, iter(frames), state)

        return dataclasses.replace(op, func=counting).apply()


@pytest.fixture
def arrow_chunks(spark):
    from interlace.session import ARROW_BATCH_KEY

    before = spark.conf.get(ARROW_BATCH_KEY)
    yield ArrowChunks(spark)
    spark.conf.set(ARROW_BATCH_KEY, before)


#: The state store providers the replay tests run on (SEMANTICS §5; issue 10): Spark's default,
#: RocksDB, and RocksDB with changelog checkpointing; each with the file suffix its checkpoint
#: must hold (so a test proves which provider ran) and the suffixes it must not.
STATE_STORES = {
    "hdfs": ({"state_store": "hdfs"}, ".delta", (".zip", ".changelog")),
    "rocksdb": ({"state_store": "rocksdb"}, ".zip", (".delta", ".changelog")),
    "rocksdb-changelog": ({"state_store": "rocksdb", "changelog_checkpointing": True},
                          ".changelog", (".delta",)),
}


class StateStore:
    """The provider a test runs on; :meth:`check` asserts a checkpoint was written by it."""

    def __init__(self, name):
        self.name = name
        self.settings, self.must, self.must_not = STATE_STORES[name]

    def check(self, checkpoint):
        from pathlib import Path

        names = [p.name for p in (Path(checkpoint) / "state").rglob("*") if p.is_file()]
        assert any(n.endswith(self.must) for n in names), (self.name, sorted(names)[:20])
        bad = [n for n in names if n.endswith(self.must_not)]
        assert not bad, (self.name, bad[:5])


def _on_store(spark, name):
    """Set the provider ``name`` on the session for one test; restore the settings after."""
    from interlace.session import state_store_conf

    store = StateStore(name)
    conf = state_store_conf(**store.settings)
    before = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    yield store
    for k, v in before.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


@pytest.fixture(params=list(STATE_STORES))
def state_store(request, spark):
    """Run the test once per state store provider: set on the session, restored afterwards."""
    yield from _on_store(spark, request.param)


@pytest.fixture(params=["hdfs", "rocksdb"])
def one_run_store(request, spark):
    """:func:`state_store` for tests whose query never stops and restarts, without
    ``rocksdb-changelog``: changelog checkpointing changes only what a commit writes and how a
    restart reloads the state (a running query keeps its RocksDB instance), so the restart
    tests, which reload, run it; here it would repeat the RocksDB case (CI time)."""
    yield from _on_store(spark, request.param)


# `make test` runs the suite on two pytest-xdist workers, whole files each (--dist loadfile),
# handed out in collection order. The longest files (minutes each: a standalone cluster,
# `interlace run` subprocesses) go first, so that no worker is left finishing one of them alone
# at the end; the order within a file, and of the other files, is unchanged.
LONGEST_FIRST = (
    "tests/deploy/test_cluster.py",
    "tests/cli/test_cli.py",
    "tests/cli/test_crash_matrix.py",
    "tests/cli/test_errors.py",
    "tests/deploy/test_connect.py",
    "tests/deploy/test_source_checkout.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
