"""JVM jars from Maven Central, resolved with ``mvn`` into a cached folder.

Three sets: Delta Lake's Spark connector for a PySpark line (:func:`delta_spark_jars`, to read
a Delta table with Spark), Spark's Kafka connector for a PySpark line (:func:`connector_jars`, what
``spark.jars`` needs to read and write topics) and an Apache Kafka broker
(:func:`broker_jars`, what :mod:`interlace.testing.kafka` starts with ``java``). Each set is a
small generated ``pom.xml`` resolved by ``mvn dependency:copy-dependencies`` into
``$INTERLACE_JARS_CACHE`` (default ``~/.cache/interlace-jars``), one folder per set and
version, reused once complete. Spark's own ``--packages`` (Ivy) is not used: it may not see the
repository the machine's Maven is configured with.

``python -m interlace.connectors.jars [connector|broker] [VERSION]`` resolves a set and prints its
jars, comma-separated (what ``spark.jars`` takes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = [
    "BROKER_VERSION",
    "CONNECTOR_ARTIFACTS",
    "broker_jars",
    "connector_jars",
    "connector_version_for",
    "delta_spark_jars",
    "jars_cache",
]

#: The Apache Kafka broker the tests start (``org.apache.kafka:kafka_2.13``).
BROKER_VERSION = "4.1.1"
#: The connector's artifacts (at Spark's own version) and the two libraries it needs beside the
#: pyspark wheel, whose versions its POM names (kafka-clients, commons-pool2).
CONNECTOR_ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
)
#: The newest Spark version whose connector Maven Central serves here (docs/kafka.md).
NEWEST_CONNECTOR = "4.2.0"


def jars_cache() -> Path:
    """The folder resolved sets live in (``$INTERLACE_JARS_CACHE`` or ~/.cache/...)."""
    return Path(os.environ.get("INTERLACE_JARS_CACHE",
                               Path.home() / ".cache" / "interlace-jars"))


#: Per Spark line, the connector release whose two artifacts Maven Central serves here (not
#: every patch release has both: spark-token-provider-kafka-0-10_2.13 4.1.0 and 4.0.1 are
#: missing). Any patch release of the line works with any PySpark of the line.
SERVED_CONNECTORS = {"4.0": "4.0.0", "4.1": "4.1.1", "4.2": "4.2.0"}


def connector_version_for(pyspark_version: str) -> str:
    """The connector version for a PySpark version: its line's in :data:`SERVED_CONNECTORS`.

    The connector must be of Spark's own minor line (Spark 4.1 moved the streaming internals
    it uses). A line not in the table gets PySpark's own version.
    """
    major, minor = pyspark_version.split(".")[:2]
    return SERVED_CONNECTORS.get(f"{major}.{minor}", ".".join(pyspark_version.split(".")[:3]))


def _pom(dependencies: list[tuple[str, str, str]]) -> str:
    deps = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in dependencies
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>interlace</groupId><artifactId>jars</artifactId><version>1</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{deps}\n  </dependencies>\n</project>\n"
    )


def _resolve(name: str, dependencies: list[tuple[str, str, str]],
             include: tuple[str, ...] | None = None) -> list[Path]:
    import fcntl

    folder = jars_cache() / name
    done = folder / ".complete"
    if done.exists():
        return sorted(folder.glob("*.jar"))
    jars_cache().mkdir(parents=True, exist_ok=True)
    with open(jars_cache() / f"{name}.lock", "w") as lock:  # one resolver at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        _resolve_unlocked(folder, done, name, dependencies, include)
    return sorted(folder.glob("*.jar"))


def _resolve_unlocked(folder: Path, done: Path, name: str,
                      dependencies: list[tuple[str, str, str]],
                      include: tuple[str, ...] | None) -> None:
    if not done.exists():
        mvn = shutil.which("mvn")
        if mvn is None:
            msg = (f"resolving {name} needs Maven (`mvn` on PATH) and access to Maven Central; "
                   "install it (apt-get install maven) or put the jars in "
                   f"{folder} and touch {done}")
            raise RuntimeError(msg)
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "pom.xml").write_text(_pom(dependencies))
            staging = Path(tmp) / "jars"
            cmd = [mvn, "-q", "-B", "-f", str(Path(tmp) / "pom.xml"),
                   "dependency:copy-dependencies", f"-DoutputDirectory={staging}",
                   "-DincludeScope=runtime"]
            if include is not None:
                cmd.append("-DincludeArtifactIds=" + ",".join(include))
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                coords = ", ".join(":".join(d) for d in dependencies)
                errors = [ln.strip() for ln in (run.stdout + run.stderr).splitlines()
                          if "[ERROR]" in ln and ln.strip() != "[ERROR]"]
                why = errors[0].split("[ERROR]", 1)[-1].strip()[:600] if errors else ""
                msg = f"mvn could not resolve {coords} (exit {run.returncode}): {why}"
                raise RuntimeError(msg)
            if folder.exists():
                shutil.rmtree(folder)
            folder.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(staging), folder)
        done.touch()


def connector_jars(spark_version: str | None = None) -> list[Path]:
    """Spark's Kafka connector for ``spark_version`` (default: the installed pyspark's line)."""
    if spark_version is None:
        import pyspark

        spark_version = connector_version_for(pyspark.__version__)
    deps = [("org.apache.spark", "spark-sql-kafka-0-10_2.13", spark_version),
            ("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", spark_version)]
    return _resolve(f"spark-kafka-{spark_version}", deps, CONNECTOR_ARTIFACTS)


#: Per Spark line, Delta Lake's Spark connector (``io.delta``) that Maven Central serves here:
#: delta-spark 4.4 is built per Spark line (4.0 to 4.2); 3.3 for Spark 3.5 (whose pyspark wheel
#: ships Scala 2.12); none for 4.3.
DELTA_SPARK = {"3.5": ("delta-spark_2.12", "3.3.2"), "4.0": ("delta-spark_4.0_2.13", "4.4.0"),
               "4.1": ("delta-spark_4.1_2.13", "4.4.0"), "4.2": ("delta-spark_4.2_2.13", "4.4.0")}


def delta_spark_jars(pyspark_version: str | None = None) -> list[Path]:
    """Delta Lake's Spark reader and writer for a PySpark line (:data:`DELTA_SPARK`).

    interlace writes Delta with delta-rs (no jars); these are for reading a table with
    ``spark.read.format("delta")`` (docs/delta.md). A line without one raises, naming it.
    """
    if pyspark_version is None:
        import pyspark

        pyspark_version = pyspark.__version__
    line = ".".join(pyspark_version.split(".")[:2])
    if line not in DELTA_SPARK:
        msg = (f"no Delta Lake Spark connector is served for PySpark {line} (delta-spark "
               f"{', '.join(f'{v[1]} for {k}' for k, v in DELTA_SPARK.items())}); read the "
               "table with delta-rs, polars or DuckDB, or on one of those lines")
        raise RuntimeError(msg)
    artifact, version = DELTA_SPARK[line]
    return _resolve(f"{artifact}-{version}", [("io.delta", artifact, version)],
                    (artifact, "delta-storage"))


def broker_jars(version: str = BROKER_VERSION) -> list[Path]:
    """An Apache Kafka broker (KRaft) and an SLF4J binding for its log."""
    deps = [("org.apache.kafka", "kafka_2.13", version),
            # Kafka 4.1 logs through SLF4J 1.7: its simple binding, on stderr.
            ("org.slf4j", "slf4j-simple", "1.7.36")]
    return _resolve(f"kafka-broker-{version}", deps)


def main(argv: list[str] | None = None) -> int:
    """``connector``, ``broker`` or ``delta-spark`` ``[VERSION]``: resolve, print the jars."""
    args = list(sys.argv[1:] if argv is None else argv)
    what = args[0] if args else "connector"
    if what == "connector":
        jars = connector_jars(args[1] if len(args) > 1 else None)
    elif what == "broker":
        jars = broker_jars(*args[1:2])
    elif what == "delta-spark":
        jars = delta_spark_jars(*args[1:2])
    else:
        print("usage: python -m interlace.connectors.jars [connector|broker|delta-spark] "
              "[VERSION]",
              file=sys.stderr)
        return 2
    print(",".join(str(j) for j in jars))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
