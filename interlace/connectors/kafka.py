"""Kafka: topics in (a stream, or a table from a compacted topic), changelog topics out.

**In.** :func:`kafka_input` turns the DataFrame of ``spark.readStream.format("kafka")`` into
an operator's input (the pipeline's ``value_format = "json"``): the key (``key STRING``, or the
fields of a JSON key), the value's fields by a Spark DDL schema, and optionally the record's
timestamp and a tombstone flag as columns. A null value (a tombstone) has every value column
NULL, which SEMANTICS §7 reads as a delete of its key; with ``tombstone_column`` the flag says
so explicitly (an all-NULL JSON value is then an update). A value that is not JSON, or not of
the schema, is **malformed**: its value columns are NULL, its event time is set NULL (so no
operator applies it: under ``late_data = "dlq"`` it is a dead letter with reason
``null_event_time``, otherwise dropped and counted), and :data:`CORRUPT_RECORD` holds a JSON
object with its ``topic``, ``partition``, ``offset``, ``key`` and raw ``value`` (the bytes as
UTF-8 text, invalid sequences replaced, and as base64 in ``value_base64``).

When the event time is a value field, a tombstone (which has no fields) takes the record's
timestamp instead: a delete happens when Kafka received it.

**Out.** :class:`KafkaTarget` (``[target] kind = "kafka"``) writes each micro-batch from the
driver in one Kafka transaction, with a record of the batch id on a marker topic in the same
transaction; a replayed batch whose id is recorded is skipped (docs/kafka.md, "Exactly once").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interlace.operators.errors import ConfigError

__all__ = [
    "CORRUPT_RECORD",
    "DEFAULT_COMMIT_TOPIC",
    "KafkaTarget",
    "check_broker",
    "check_connector",
    "check_source",
    "client_config",
    "kafka_input",
    "kafka_writer",
    "read",
    "target",
    "to_kafka_columns",
]

from interlace.connectors.duckdb import OP_COLUMN as OP
from interlace.connectors.duckdb import VERSION_COLUMN as VERSION
from interlace.connectors.files import CORRUPT_RECORD

_CONNECTOR_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
#: Setting this Spark conf to ``true`` runs a connector of another Spark minor line.
ALLOW_MISMATCH_CONF = "spark.interlace.kafka.allowConnectorMismatch"
#: ``false``: ``interlace run`` leaves the connector to ``spark.jars`` (no Maven resolution).
RESOLVE_CONF = "spark.interlace.kafka.resolveConnector"


def _connector_fix(spark_version: str) -> str:
    from interlace.connectors.jars import connector_version_for

    v = connector_version_for(spark_version)
    return (
        f"The jars for Spark {spark_version}: org.apache.spark:spark-sql-kafka-0-10_2.13:{v} "
        f"and spark-token-provider-kafka-0-10_2.13:{v}, with the kafka-clients and "
        "commons-pool2 their POM names. `python -m interlace.connectors.jars connector "
        f"{v}` resolves them with Maven and prints the value for "
        '[spark] conf = { "spark.jars" = "..." } (set before Spark starts)'
    )


def connector_conf(allow_mismatch: bool = False) -> dict[str, str]:
    """Spark settings that put the running PySpark line's Kafka connector on the classpath.

    ``spark.jars``, resolved with Maven into the cache. A line Maven Central serves no
    connector of here (4.3) gets the newest one served
    (:data:`interlace.connectors.jars.NEWEST_CONNECTOR`) only with ``allow_mismatch``, which
    also sets ``spark.interlace.kafka.allowConnectorMismatch`` (docs/kafka.md: pairs tried).
    """
    import pyspark

    from interlace.connectors import jars

    version = jars.connector_version_for(pyspark.__version__)
    mismatch = allow_mismatch and _newer(version, jars.NEWEST_CONNECTOR)
    if mismatch:
        version = jars.NEWEST_CONNECTOR
    try:
        found = jars.connector_jars(version)
    except RuntimeError as exc:
        msg = (f"Spark's Kafka connector {version} could not be resolved ({exc}). "
               f"{_connector_fix(pyspark.__version__)}")
        if _newer(version, jars.NEWEST_CONNECTOR):
            msg += (f". The newest connector served here is {jars.NEWEST_CONNECTOR}: "
                    f'"{ALLOW_MISMATCH_CONF}" = "true" in [spark] conf runs it on Spark '
                    f"{pyspark.__version__} (docs/kafka.md: the pairs tried)")
        raise ConfigError(msg) from exc
    conf = {"spark.jars": ",".join(str(j) for j in found)}
    if mismatch:
        conf[ALLOW_MISMATCH_CONF] = "true"
    return conf


def session_conf(pipeline: Any, conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with Spark's Kafka connector added when the pipeline reads a topic.

    For the session ``interlace run`` starts: a pipeline with a Kafka source whose
    ``[spark] conf`` names no connector (``spark.jars`` / ``spark.jars.packages`` without
    ``spark-sql-kafka``) gets :func:`connector_conf` (with a mismatch only where the pipeline
    allows one: ``spark.interlace.kafka.allowConnectorMismatch = "true"``), unless
    ``spark.interlace.kafka.resolveConnector`` is ``"false"``.
    """
    if not any(s.format == "kafka" for s in pipeline.sources):
        return conf
    if conf.get(RESOLVE_CONF, "true").lower() == "false":
        return conf
    named = conf.get("spark.jars", "") + conf.get("spark.jars.packages", "")
    if "spark-sql-kafka" in named:
        return conf
    allow = conf.get(ALLOW_MISMATCH_CONF, "false").lower() == "true"
    extra = connector_conf(allow)
    listed = [j for j in conf.get("spark.jars", "").split(",") if j]
    return {**conf, **extra, "spark.jars": ",".join([*listed, extra["spark.jars"]])}


def _newer(a: str, b: str) -> bool:
    return tuple(int(x) for x in a.split(".")) > tuple(int(x) for x in b.split("."))


def check_connector(spark: Any) -> None:
    """Raise a :class:`ConfigError` naming the jars if Spark's Kafka connector is unusable.

    Missing: the jars and the fix. Of another Spark minor line than the running Spark
    (Spark 4.1 moved the streaming internals the connector uses): refused, with the same fix,
    unless ``spark.interlace.kafka.allowConnectorMismatch`` is ``true`` (docs/kafka.md says
    which combinations were tried).
    """
    jvm = spark.sparkContext._jvm
    version = spark.version
    try:
        cls = jvm.org.apache.spark.util.Utils.classForName(_CONNECTOR_CLASS, True, False)
    except Exception as exc:
        msg = ("source format 'kafka' needs Spark's Kafka connector, which is not on the "
               f"classpath. {_connector_fix(version)}")
        raise ConfigError(msg) from exc
    try:
        location = str(cls.getProtectionDomain().getCodeSource().getLocation().getPath())
    except Exception:  # a connector built into a fat jar: nothing to compare
        return
    import re

    found = re.search(r"spark-sql-kafka-0-10_[\d.]+-(\d+\.\d+)\.\d+", location)
    if found is None or version.startswith(found.group(1) + "."):
        return
    if spark.conf.get(ALLOW_MISMATCH_CONF, "false").lower() == "true":
        return
    msg = (f"Spark's Kafka connector on the classpath is {location.rsplit('/', 1)[-1]} "
           f"(Spark {found.group(1)}), but Spark is {version}: a connector must be of Spark's "
           f"own minor line. {_connector_fix(version)}. To run this pair anyway set "
           f'"{ALLOW_MISMATCH_CONF}" = "true" in [spark] conf (docs/kafka.md: tried pairs)')
    raise ConfigError(msg)


def kafka_input(
    df: Any,
    schema: str,
    *,
    key_format: str = "string",
    key_schema: str | None = None,
    timestamp_column: str | None = None,
    tombstone_column: str | None = None,
    event_time_column: str | None = None,
) -> Any:
    """Decode a Kafka source DataFrame (JSON values) into an operator's input.

    Args:
        df: ``spark.readStream.format("kafka")...load()`` (the connector's columns).
        schema: Spark DDL of the value's JSON fields.
        key_format: ``"string"``: the key as ``key STRING``; ``"json"``: the fields of
            ``key_schema``.
        key_schema: Spark DDL of a JSON key.
        timestamp_column: A column for the record's timestamp (e.g. as the event time).
        tombstone_column: A BOOLEAN column, true iff the record's value is null.
        event_time_column: The event-time column: a value field (a tombstone then takes the
            record's timestamp) or ``timestamp_column``. A malformed record's is NULL.

    Returns:
        The key columns, the value's fields, the optional columns, and
        :data:`CORRUPT_RECORD` (NULL unless the record is malformed).

    Example (needs a broker; tests/kafka/test_kafka_python.py runs it)::

        raw = (spark.readStream.format("kafka")
               .option("kafka.bootstrap.servers", "127.0.0.1:9092")
               .option("subscribe", "orders").load())
        orders = kafka_input(raw, "order_id BIGINT, amount DOUBLE, order_ts TIMESTAMP",
                             event_time_column="order_ts")
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    value_type = T._parse_datatype_string(schema)
    if not isinstance(value_type, T.StructType):
        raise ConfigError(f"the Kafka value schema must be a list of fields (got {schema!r})")
    if CORRUPT_RECORD in value_type.names:
        raise ConfigError(f"the value schema must not have a {CORRUPT_RECORD!r} field")
    value_names = list(value_type.names)
    text = F.col("value").cast("string")
    with_corrupt = T.StructType([*value_type.fields,
                                 T.StructField(CORRUPT_RECORD, T.StringType())])
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD}
    parsed = F.from_json(text, with_corrupt, opts)
    cols: list[Any] = []
    if key_format == "json":
        if key_schema is None:
            raise ConfigError('key_format = "json" needs key_schema (the key\'s fields)')
        key_type = T._parse_datatype_string(key_schema)
        key_struct = F.from_json(
            F.col("key").cast("string"),
            T.StructType([*key_type.fields, T.StructField(CORRUPT_RECORD, T.StringType())]),
            opts)
        cols += [key_struct.getField(n).alias(n) for n in key_type.names]
        bad_key = F.col("key").isNotNull() & (
            key_struct.isNull() | key_struct.getField(CORRUPT_RECORD).isNotNull())
    elif key_format == "string":
        cols.append(F.col("key").cast("string").alias("key"))
        bad_key = F.lit(False)
    else:
        raise ConfigError(f"key_format must be 'string' or 'json' (got {key_format!r})")
    staged = df.select(
        "*", parsed.alias("__il_v"), bad_key.alias("__il_bad_key"))
    malformed = (F.col("value").isNotNull()
                 & (F.col(f"__il_v.{CORRUPT_RECORD}").isNotNull() | F.col("__il_v").isNull())
                 ) | F.col("__il_bad_key")
    staged = staged.withColumn("__il_malformed", malformed)
    out: list[Any] = list(cols)
    for n in value_names:
        out.append(F.when(~F.col("__il_malformed"), F.col(f"__il_v.{n}")).alias(n))
    if timestamp_column is not None:
        out.append(F.col("timestamp").alias(timestamp_column))
    if tombstone_column is not None:
        out.append(F.col("value").isNull().alias(tombstone_column))
    corrupt = F.to_json(F.struct(
        F.col("topic"), F.col("partition"), F.col("offset"),
        F.col("key").cast("string").alias("key"), text.alias("value"),
        F.base64(F.col("value")).alias("value_base64")))
    out.append(F.when(F.col("__il_malformed"), corrupt).alias(CORRUPT_RECORD))
    decoded = staged.select(*out, F.col("timestamp").alias("__il_ts"),
                            F.col("__il_malformed"), F.col("value").isNull().alias("__il_null"))
    if event_time_column is not None:
        if event_time_column not in decoded.columns:
            raise ConfigError(
                f"event_time_column {event_time_column!r} is neither a value field nor "
                f"timestamp_column (columns: {decoded.columns[:-3]})")
        et = F.col(event_time_column)
        if event_time_column in value_names:  # a tombstone has no fields: Kafka's time
            et = F.when(F.col("__il_null"), F.col("__il_ts")).otherwise(et)
        decoded = decoded.withColumn(
            event_time_column, F.when(F.col("__il_malformed"), F.lit(None)).otherwise(et)
            .cast("timestamp"))
    return decoded.drop("__il_ts", "__il_malformed", "__il_null")


def read(spark: Any, src: Any, base: Path) -> Any:
    """A pipeline's Kafka source: the connector and broker checked, the values decoded.

    With ``value_format = "json"``, :func:`kafka_input`; otherwise the connector's columns.
    """
    check_connector(spark)
    check_source(src)  # the broker answers and the topics exist, within seconds
    opts = {k: str(v) for k, v in dict(src.options or {}).items()}
    df = spark.readStream.format("kafka").options(**opts).load()
    if not src.is_kafka_json:
        return df
    return kafka_input(df, src.schema, key_format=src.key_format or "string",
                       key_schema=src.key_schema, timestamp_column=src.timestamp_column,
                       tombstone_column=src.tombstone_column,
                       event_time_column=(src.event_time_column
                                          if src.time_mode == "event" else None))


# Out: the exactly-once target ------------------------------------------------------------------

#: The compacted topic that records each target's last committed micro-batch.
DEFAULT_COMMIT_TOPIC = "_interlace_commits"
#: How long the target waits for the broker at start before it says so.
CONNECT_TIMEOUT_S = 10.0


def _client_module() -> Any:
    try:
        import confluent_kafka
    except ImportError as exc:
        msg = ("Kafka needs the confluent-kafka client on the driver: pip install "
               "'interlace[kafka]' (or confluent-kafka>=2.4)")
        raise ConfigError(msg) from exc
    return confluent_kafka


def client_config(options: Any) -> dict[str, str]:
    """The ``kafka.``-prefixed options as a client's configuration (prefix removed)."""
    return {k.removeprefix("kafka."): str(v) for k, v in dict(options).items()
            if k.startswith("kafka.")}


def check_broker(bootstrap: str, topics: list[str], what: str,
                 timeout_s: float = CONNECT_TIMEOUT_S, config: dict[str, str] | None = None,
                 ) -> None:
    """Raise a :class:`ConfigError` unless a broker at ``bootstrap`` answers and has ``topics``.

    Within ``timeout_s``: Spark's own Kafka source would retry for minutes before failing.
    """
    ck = _client_module()
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**(config or {}), "bootstrap.servers": bootstrap, "log_level": 0})
    try:
        meta = admin.list_topics(timeout=timeout_s)
    except ck.KafkaException as exc:
        msg = (f"{what}: no Kafka broker answered at bootstrap servers {bootstrap!r} within "
               f"{timeout_s:g} s ({exc.args[0] if exc.args else exc}); start it, or fix "
               "kafka.bootstrap.servers")
        raise ConfigError(msg) from exc
    missing = [t for t in topics if t not in meta.topics or meta.topics[t].error is not None]
    if missing:
        msg = (f"{what}: topic(s) {missing} do not exist on {bootstrap}; create them first "
               "(a table or changelog topic with cleanup.policy=compact), e.g. kafka-topics.sh "
               f"--bootstrap-server {bootstrap} --create --topic {missing[0]}")
        raise ConfigError(msg)


def check_source(src: Any) -> None:
    """Check a pipeline's Kafka source before Spark reads it: the broker answers, topics exist."""
    opts = dict(src.options or {})
    bootstrap = opts.get("kafka.bootstrap.servers")
    if not bootstrap:
        msg = (f"Kafka source {src.name!r} needs options.\"kafka.bootstrap.servers\", e.g. "
               'options = { "kafka.bootstrap.servers" = "127.0.0.1:9092", subscribe = "orders" }')
        raise ConfigError(msg)
    topics = [t.strip() for t in str(opts.get("subscribe", "")).split(",") if t.strip()]
    if not topics and not any(k in opts for k in ("subscribePattern", "assign")):
        msg = (f"Kafka source {src.name!r} names no topic: set options.subscribe (or "
               "subscribePattern / assign, as Spark's Kafka source takes them)")
        raise ConfigError(msg)
    check_broker(bootstrap, topics, f"Kafka source {src.name!r}", config=client_config(opts))


def _json_lines(pdf: Any, schema: Any) -> list[str | None]:
    """Each row of ``pdf`` as a JSON object; timestamps ISO-8601 UTC (``...Z``), ints exact."""
    from pyspark.sql import types as T

    if len(pdf) == 0:
        return []
    frame = pdf.copy()
    ints = (T.LongType, T.IntegerType, T.ShortType, T.ByteType)
    for f in schema.fields if schema is not None else ():
        if f.name not in frame.columns:
            continue
        if isinstance(f.dataType, ints):
            frame[f.name] = frame[f.name].astype("Int64")
        elif isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType)):
            col = frame[f.name]
            frame[f.name] = col.dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ").where(col.notna(), None)
    text = frame.to_json(orient="records", lines=True, date_format="iso", date_unit="us")
    return list(text.splitlines())


class KafkaTarget:
    """A topic written exactly once per micro-batch (Kafka transactions; docs/kafka.md).

    Each micro-batch is one transaction of a transactional producer whose
    ``transactional.id`` is ``interlace.<pipeline>.<topic>``: its rows, and a record on the
    compacted :data:`DEFAULT_COMMIT_TOPIC` (key: the transactional id, value: the batch id and
    its row count). At start, ``init_transactions`` fences any earlier producer of the id and
    aborts its open transaction; the last committed batch id is then read from the commit
    topic (``read_committed``), and a batch at or below it is skipped: the batch Spark
    replays after a crash is written once. A ``read_committed`` consumer sees every row
    exactly once; a ``read_uncommitted`` one may also see rows of aborted attempts.

    Rows: the value is the row as JSON (every column; a changelog's ``op`` left out), the
    key the JSON object of the ``key`` columns (no key: null, Kafka spreads the rows). A
    changelog's ``delete`` and a window's ``retracted`` row are tombstones (null value) of
    their key, so a compacted topic, or a KTable reading it, converges to the table the DuckDB
    target holds. Among a batch's changes of one key, they are written in the order of their
    ``version`` (a compacted topic keeps the last).
    """

    def __init__(self, bootstrap: str, topic: str, pipeline: str, *,
                 key: tuple[str, ...] = (), changelog: bool = False,
                 window_groups: tuple[str, ...] | None = None, session: bool = False,
                 config: dict[str, str] | None = None,
                 commit_topic: str = DEFAULT_COMMIT_TOPIC) -> None:
        self.bootstrap, self.topic, self.pipeline = bootstrap, topic, pipeline
        self.key, self.changelog = tuple(key), changelog
        self.window_groups, self.session = window_groups, session
        self.config = dict(config or {})
        self.commit_topic = commit_topic
        self.transactional_id = f"interlace.{pipeline}.{topic}"
        self.written: dict[int, int] = {}
        self.schema: Any = None
        self.producer: Any = None
        self.last_committed = -1

    def prepare(self, schema: Any) -> None:
        """Check the broker and topic, fence earlier producers, read the last committed batch."""
        ck = _client_module()
        what = f"Kafka target (topic {self.topic!r})"
        missing = [k for k in self.key if k not in schema.names]
        if missing:
            msg = f"target `key` column(s) {missing} are not output columns {schema.names}"
            raise ConfigError(msg)
        if self.changelog and not self.key and OP not in schema.names:
            raise ConfigError(f"{what}: a changelog needs its key columns")
        retracting = "retracted" in schema.names
        if self.session and retracting:
            msg = (f"{what}: session windows under late_data = \"reopen\" have no stable key "
                   "(a late row moves a session's bounds, and nothing retracts the old ones), "
                   "so a compacted topic cannot converge; use late_data = \"drop\" or "
                   "\"dlq\" (final sessions, appended), tumbling or hopping windows, or a "
                   "duckdb target (docs/kafka.md)")
            raise ConfigError(msg)
        self.schema = schema
        check_broker(self.bootstrap, [self.topic], what, config=self.config)
        self._ensure_commit_topic()
        self.producer = ck.Producer({
            **self.config, "bootstrap.servers": self.bootstrap,
            "transactional.id": self.transactional_id, "enable.idempotence": True,
            "linger.ms": 20, "transaction.timeout.ms": 60_000})
        try:
            self.producer.init_transactions(60)
        except ck.KafkaException as exc:
            msg = (f"{what}: the transactional producer {self.transactional_id!r} could not "
                   f"start ({exc.args[0]}); the broker needs transactions (a transaction "
                   "state log with its replication factor met)")
            raise ConfigError(msg) from exc
        self.last_committed = self._read_last_committed()

    def _ensure_commit_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({**self.config, "bootstrap.servers": self.bootstrap,
                             "log_level": 0})  # errors come back as exceptions
        if self.commit_topic in admin.list_topics(timeout=CONNECT_TIMEOUT_S).topics:
            return
        futures = admin.create_topics([NewTopic(
            self.commit_topic, 1, -1, config={"cleanup.policy": "compact"})])
        for f in futures.values():
            try:
                f.result(timeout=30)
            except Exception as exc:  # created meanwhile by another target: fine
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise

    def _read_last_committed(self) -> int:
        import json

        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer({
            **self.config, "bootstrap.servers": self.bootstrap,
            "group.id": f"{self.transactional_id}.commits", "enable.auto.commit": False,
            "isolation.level": "read_committed", "enable.partition.eof": True})
        last = -1
        try:
            tp = TopicPartition(self.commit_topic, 0, OFFSET_BEGINNING)
            consumer.assign([tp])
            while True:
                msg = consumer.poll(CONNECT_TIMEOUT_S)
                if msg is None:
                    break
                if msg.error() is not None:
                    if msg.error().code() == _client_module().KafkaError._PARTITION_EOF:
                        break
                    raise _client_module().KafkaException(msg.error())
                if msg.key() == self.transactional_id.encode() and msg.value() is not None:
                    last = max(last, int(json.loads(msg.value())["batch_id"]))
        finally:
            consumer.close()
        return last

    def records(self, pdf: Any) -> list[tuple[str | None, str | None]]:
        """``(key, value)`` for each row of a micro-batch, in the order they are written."""
        if len(pdf) == 0:
            return []
        frame = pdf.reset_index(drop=True)
        if self.changelog and VERSION in frame.columns:
            frame = frame.assign(__il_row=range(len(frame))).sort_values(
                [VERSION, "__il_row"], kind="stable").drop(columns="__il_row")
        delete = frame[OP].eq("delete") if OP in frame.columns and self.changelog else None
        if "retracted" in frame.columns:
            gone = frame["retracted"].fillna(False).astype(bool)
            delete = gone if delete is None else delete | gone
        keys = (_json_lines(frame[list(self.key)], self.schema) if self.key
                else [None] * len(frame))
        values = _json_lines(frame.drop(columns=[OP] if self.changelog and OP in frame.columns
                                        else []), self.schema)
        if delete is not None:
            values = [None if d else v for v, d in zip(values, delete.tolist(), strict=True)]
        return list(zip(keys, values, strict=True))

    def write(self, pdf: Any, batch_id: int) -> int:
        """Write one micro-batch in one transaction, unless it is already committed."""
        import json

        from interlace.faults import crash_point

        ck = _client_module()
        if batch_id <= self.last_committed:
            return 0
        records = self.records(pdf)
        producer = self.producer
        producer.begin_transaction()
        try:
            for i, (k, v) in enumerate(records):
                producer.produce(self.topic, key=k, value=v)
                if i % 10_000 == 9_999:
                    producer.poll(0)
            producer.produce(self.commit_topic, key=self.transactional_id,
                             value=json.dumps({"batch_id": batch_id, "rows": len(records),
                                               "topic": self.topic}))
            # Every record at the broker, inside the open transaction (commit would flush
            # them too): what a crash here leaves, the next run's init_transactions aborts.
            producer.flush(60)
            crash_point("target-uncommitted")
            producer.commit_transaction(60)
        except ck.KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if err is not None and getattr(err, "txn_requires_abort", lambda: False)():
                producer.abort_transaction(60)
            msg = (f"Kafka target (topic {self.topic!r}): micro-batch {batch_id} was not "
                   f"committed ({err}); nothing of it is visible to read_committed readers, "
                   "and a rerun writes it")
            raise RuntimeError(msg) from exc
        crash_point("target-committed")
        self.last_committed = batch_id
        self.written[batch_id] = len(records)
        return len(records)

    def close(self) -> None:
        """Flush and drop the producer."""
        if self.producer is not None:
            self.producer.flush(10)
            self.producer = None



def target(spec: Any, ctx: Any) -> KafkaTarget:
    """The ``[target] kind = "kafka"`` of a pipeline (options: bootstrap servers, topic)."""
    opts = dict(spec.options)
    return KafkaTarget(
        opts["kafka.bootstrap.servers"], opts["topic"], ctx.pipeline,
        key=tuple(spec.key) if spec.key else tuple(ctx.default_key),
        changelog=ctx.changelog,
        window_groups=None if ctx.window_groups is None else tuple(ctx.window_groups),
        session=ctx.session, config=client_config(opts),
        commit_topic=opts.get("commit_topic", DEFAULT_COMMIT_TOPIC))


# The same in Python: for users who write their own query -----------------------------------


def kafka_writer(bootstrap: str, topic: str, name: str, *, key: tuple[str, ...] = (),
                 changelog: bool = False, config: dict[str, str] | None = None,
                 commit_topic: str = DEFAULT_COMMIT_TOPIC) -> Any:
    """A ``foreachBatch`` function that writes each micro-batch to ``topic`` exactly once.

    The :class:`KafkaTarget` of a pipeline, for a query of your own:
    ``df.writeStream.foreachBatch(kafka_writer(...))``. ``name`` identifies the writer (its
    transactional id is ``interlace.<name>.<topic>``): keep it across restarts of the query,
    and give two queries two names. The batch is collected to the driver (``toPandas``).
    The target is prepared on the first call, with that batch's schema.

    Args:
        bootstrap: ``bootstrap.servers``.
        topic: The output topic (it must exist).
        name: The writer's name (see above).
        key: The columns of the record key (JSON object); none: null keys.
        changelog: The rows are a changelog (``op``, ``version``): a ``delete`` is a tombstone.
        config: More producer settings (librdkafka names, e.g. ``{"compression.type": "lz4"}``).
        commit_topic: Where the committed batch ids go (created compacted if missing).

    Example (needs a broker; tests/kafka/test_kafka_python.py runs it)::

        out = table_join(customers, accounts, spec)
        (out.writeStream.option("checkpointLocation", "/chk/joined")
            .foreachBatch(kafka_writer("127.0.0.1:9092", "joined", "customers-accounts",
                                       key=("customer",), changelog=True))
            .start())
    """
    target = KafkaTarget(bootstrap, topic, name, key=tuple(key), changelog=changelog,
                         config=config, commit_topic=commit_topic)

    def write(df: Any, batch_id: int) -> None:
        if target.producer is None:
            target.prepare(df.schema)
        target.write(df.toPandas(), batch_id)

    write.target = target  # type: ignore[attr-defined]
    return write


def to_kafka_columns(df: Any, key: tuple[str, ...] = (), *, changelog: bool = False) -> Any:
    """Spark's Kafka sink's columns of an output: ``key`` and ``value`` as JSON strings.

    For Spark's own (at-least-once) ``writeStream.format("kafka")``: ``value`` is the row as
    JSON (a changelog's ``op`` left out), null (a tombstone) for a changelog's ``delete`` and
    a window's ``retracted`` row; ``key`` the JSON object of the ``key`` columns (no key:
    null). On a compacted topic a replayed batch then rewrites the same last values, so the
    table converges all the same; for exactly once per record use :func:`kafka_writer`.
    """
    from pyspark.sql import functions as F

    names = [c for c in df.columns if not (changelog and c == OP)]
    gone = F.lit(False)
    if changelog and OP in df.columns:
        gone = F.col(OP) == F.lit("delete")
    if "retracted" in df.columns:
        gone = gone | F.coalesce(F.col("retracted"), F.lit(False))
    value = F.when(~gone, F.to_json(F.struct(*[F.col(c) for c in names])))
    key_col = F.to_json(F.struct(*[F.col(c) for c in key])) if key else F.lit(None).cast("string")
    return df.select(key_col.alias("key"), value.alias("value"))
