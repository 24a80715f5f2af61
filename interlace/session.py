"""A SparkSession for local use, set up the way interlace is tested."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ARROW_BATCH_KEY",
    "ARROW_BATCH_ROWS",
    "STATE_STORES",
    "local_session",
    "state_store_conf",
]

_STATE = "org.apache.spark.sql.execution.streaming.state."
#: The state store providers interlace is tested on, by the name ``state_store`` takes.
STATE_STORES = {
    "hdfs": _STATE + "HDFSBackedStateStoreProvider",
    "rocksdb": _STATE + "RocksDBStateStoreProvider",
}
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG_KEY = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
#: Rows per Arrow batch that Spark sends to a Python worker. Spark cuts a key group's rows into
#: chunks of this many and hands the group's whole state over again with every chunk
#: (``ApplyInPandasWithStateWriter``), so at large micro-batches the default 10,000 repeats a
#: large state many times; :func:`local_session` raises it (docs/deploy.md, "Arrow batch size").
ARROW_BATCH_KEY = "spark.sql.execution.arrow.maxRecordsPerBatch"
ARROW_BATCH_ROWS = 100_000


def state_store_conf(
    state_store: str = "hdfs", changelog_checkpointing: bool = False
) -> dict[str, str]:
    """Return the Spark settings that select a state store provider.

    Args:
        state_store: ``"hdfs"`` (Spark's default, HDFSBackedStateStoreProvider: every key
            group's state in the executor's JVM heap, snapshots and deltas in the checkpoint)
            or ``"rocksdb"`` (RocksDBStateStoreProvider: state in native RocksDB on the
            executor's local disk, for large state and steady GC).
        changelog_checkpointing: With ``"rocksdb"``, checkpoint each micro-batch's changes
            instead of a RocksDB snapshot (lower, steadier commit latency).

    Raises:
        ConfigError: An unknown ``state_store``, or ``changelog_checkpointing`` without RocksDB.
    """
    from interlace.operators.errors import ConfigError

    if state_store not in STATE_STORES:
        msg = (
            f"`state_store` must be one of {', '.join(map(repr, STATE_STORES))} "
            f"(got state_store={state_store!r})"
        )
        raise ConfigError(msg)
    if changelog_checkpointing and state_store != "rocksdb":
        msg = "`changelog_checkpointing` applies to state_store='rocksdb' only; set both or neither"
        raise ConfigError(msg)
    conf = {PROVIDER_KEY: STATE_STORES[state_store]}
    if state_store == "rocksdb":
        conf[CHANGELOG_KEY] = str(bool(changelog_checkpointing)).lower()
    return conf


def local_session(
    app_name: str = "interlace",
    *,
    master: str = "local[2]",
    shuffle_partitions: int = 4,
    state_store: str = "hdfs",
    changelog_checkpointing: bool = False,
    conf: Mapping[str, str] | None = None,
    remote: str | None = None,
) -> Any:
    """Return (or create) a local SparkSession for interlace.

    Sets ``PYSPARK_PYTHON`` (and the driver's) to the running interpreter so Python workers
    import the same interlace, turns the UI and console progress bar off, uses UTC as the
    session time zone and a small number of shuffle partitions, and sends Python workers
    Arrow batches of up to 100,000 rows (``spark.sql.execution.arrow.maxRecordsPerBatch``;
    with Spark's default of 10,000, Spark hands a key group's state over once per 10,000 of
    its rows: docs/deploy.md, "Arrow batch size").

    With ``remote``, returns a new Spark Connect session of the server at that ``sc://`` URL
    instead (needs ``pip install 'interlace[connect]'``; docs/deploy.md, "Spark Connect"): only
    the ``spark.sql.*`` settings and ``conf`` apply (``app_name``, ``master``, the UI and driver
    settings are the server's). PySpark then treats the whole process as a Connect client (it
    sets ``SPARK_CONNECT_MODE_ENABLED``; ``pyspark.sql.functions`` build Connect columns from
    then on), so keep classic sessions out of that process.

    Args:
        app_name: Spark application name.
        master: Spark master URL.
        shuffle_partitions: ``spark.sql.shuffle.partitions``.
        state_store: ``"hdfs"`` (default) or ``"rocksdb"``; see :func:`state_store_conf`
            and docs/deploy.md. An existing session gets the setting too: it applies to
            queries started afterwards (a query's checkpoint keeps the provider it began with).
        changelog_checkpointing: RocksDB's changelog checkpointing (``"rocksdb"`` only).
        conf: Extra Spark settings (win over the defaults).
        remote: A Spark Connect URL, e.g. ``sc://localhost:15002`` (see
            :func:`interlace.testing.connect.local_connect_server`).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        ARROW_BATCH_KEY: str(ARROW_BATCH_ROWS),
        "spark.driver.memory": "2g",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    }
    settings.update(state_store_conf(state_store, changelog_checkpointing))
    settings.update(conf or {})
    if remote is not None:
        # create(), not getOrCreate(): the latter refuses while a classic SparkContext lives.
        connect_builder = SparkSession.builder.remote(remote)
        for k, v in settings.items():
            if k.startswith("spark.sql.") or k in (conf or {}):
                connect_builder = connect_builder.config(k, v)
        return connect_builder.create()
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    for key in (PROVIDER_KEY, CHANGELOG_KEY):  # SQL settings: also on a session that existed
        if key in settings:
            spark.conf.set(key, settings[key])
    spark.sparkContext.setLogLevel("ERROR")
    return spark
