"""The parts of a pipeline: :class:`Source`, :class:`Target`, :class:`SparkSettings`.

Each is a frozen dataclass checked when it is built. The whole, :class:`~.model.Pipeline`,
is in :mod:`.model`; the modules that read, write and check a pipeline (:mod:`.toml`,
:mod:`.validate`, :mod:`.stages`) import these parts from here and never the model, which
imports them: the package's imports run one way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from interlace.operators.common.checks import as_name_tuple, check_idle_timeout, check_literal
from interlace.operators.common.names import RESERVED_PREFIX
from interlace.operators.common.spec import TimeMode
from interlace.operators.errors import ConfigError
from interlace.pipeline.ddl import is_timestamp, parse_ddl
from interlace.pipeline.values import EMPTY, as_str_map, check_name, check_str
from interlace.session import state_store_conf

# In the order the module defines them.
__all__ = [
    "SourceFormat",
    "KafkaValueFormat",
    "KafkaKeyFormat",
    "TargetKind",
    "FILE_FORMATS",
    "DEFAULT_DUCKDB_PATH",
    "DEFAULT_CHECKPOINT",
    "DEAD_LETTER_TABLE_SUFFIX",
    "Source",
    "Target",
    "SparkSettings",
]

SourceFormat = Literal["parquet", "json", "csv", "rate", "kafka"]
"""What a source reads.

* ``"parquet"``, ``"json"``, ``"csv"``: a folder of files (``path`` and ``schema`` required).
* ``"rate"``: Spark's rate source (columns ``timestamp``, ``value``), for demos and load.
* ``"kafka"``: Spark's Kafka source (its ``options``: ``kafka.bootstrap.servers``,
  ``subscribe``, ...). ``value_format = "json"`` decodes each value with ``schema``
  (docs/kafka.md); without it the connector's own columns are read (``key``, ``value``, ...).
"""

KafkaValueFormat = Literal["raw", "json"]
"""How a Kafka source's values are read: the connector's columns as they are, or JSON."""

KafkaKeyFormat = Literal["string", "json"]
"""How a JSON Kafka source's record keys are read: one ``key STRING`` column, or JSON."""

TargetKind = Literal["duckdb", "parquet", "console", "kafka", "delta"]
"""Where the output goes.

* ``"kafka"``: a topic, exactly once (Kafka transactions; ``options``:
  ``kafka.bootstrap.servers`` and ``topic``; docs/kafka.md).
* ``"duckdb"``: a table in a DuckDB file, upserted on ``key`` when one is set.
* ``"delta"``: a Delta Lake table at ``path``, exactly once (appends, or a MERGE by ``key``;
  docs/delta.md).
* ``"parquet"``: Parquet files appended under ``path``.
* ``"console"``: printed (debugging).
"""

FILE_FORMATS: tuple[str, ...] = ("parquet", "json", "csv")
#: The DuckDB file a duckdb target writes when it names no ``path``.
DEFAULT_DUCKDB_PATH = "interlace.duckdb"
#: Where checkpoints go when ``[spark] checkpoint`` is not set (``{name}`` is the pipeline's).
DEFAULT_CHECKPOINT = ".interlace/checkpoints/{name}"
#: Suffix of the default dead-letter table (after the target table's name).
DEAD_LETTER_TABLE_SUFFIX = "_dead_letters"

_TABLE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?\Z")

_RATE_COLUMNS: tuple[tuple[str, str], ...] = (("timestamp", "TIMESTAMP"), ("value", "BIGINT"))
_KAFKA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "BINARY"),
    ("value", "BINARY"),
    ("topic", "STRING"),
    ("partition", "INT"),
    ("offset", "BIGINT"),
    ("timestamp", "TIMESTAMP"),
    ("timestampType", "INT"),
)
_KAFKA_HEADERS: tuple[str, str] = ("headers", "ARRAY<STRUCT<key: STRING, value: BINARY>>")


@dataclass(frozen=True, slots=True)
class Source:
    """One named streaming input (a ``[[sources]]`` table).

    Example:
        >>> s = Source(name="orders", format="parquet", path="data/orders",
        ...            schema="order_id BIGINT, price DECIMAL(10,2), order_ts TIMESTAMP",
        ...            event_time_column="order_ts", options={"maxFilesPerTrigger": 1})
        >>> s.ddl_columns()
        [('order_id', 'BIGINT'), ('price', 'DECIMAL(10,2)'), ('order_ts', 'TIMESTAMP')]
        >>> s.options
        FrozenMap({'maxFilesPerTrigger': '1'})

    Args:
        name: Unique name; the operator refers to the source by it.
        format: See :data:`SourceFormat`.
        path: The folder to read (required for parquet, json and csv; not used otherwise).
        options: Passed to ``spark.readStream.options(...)``; values become strings.
        schema: Spark DDL of the files (required for parquet, json and csv; rate and kafka
            have fixed schemas).
        event_time_column: The source's event-time column. It is the TOML default of the
            operator's event-time column, and the two must agree.
        time_mode: ``"event"`` or ``"processing"``; must agree with the operator's.
        sql: A Spark SQL pre-stage over the source, registered as the view ``source``.
        idle_timeout_ms: For an input of a join: after this long (ms, processing time)
            without a row the source is idle, and left out of the watermark's minimum until
            it delivers again (SEMANTICS §1; docs/idle-inputs.md). None: never idle.
        value_format: Kafka only (:data:`KafkaValueFormat`): ``"json"`` reads each record's
            value as JSON with ``schema`` (required then) into columns; a value that is not
            JSON or not of the schema is malformed (counted, its event time NULL, so a dead
            letter under ``dlq``); a null value (a tombstone) has every value column NULL.
            Default ``"raw"``: the connector's columns.
        key_format: Kafka with ``value_format = "json"`` (:data:`KafkaKeyFormat`): the record
            key as a ``key STRING`` column (``"string"``, the default) or as JSON with
            ``key_schema`` (its fields become columns).
        key_schema: Spark DDL of a JSON key (``key_format = "json"``).
        timestamp_column: Kafka JSON: a TIMESTAMP column holding the record's timestamp
            (usable as ``event_time_column``).
        tombstone_column: Kafka JSON: a BOOLEAN column, true iff the record's value is null
            (name it as a table operator's ``tombstone_column``).

    """

    name: str
    format: SourceFormat
    path: str | None = None
    options: Mapping[str, str] = EMPTY
    schema: str | None = None
    event_time_column: str | None = None
    time_mode: TimeMode = "event"
    sql: str | None = None
    idle_timeout_ms: int | None = None
    value_format: KafkaValueFormat | None = None
    key_format: KafkaKeyFormat | None = None
    key_schema: str | None = None
    timestamp_column: str | None = None
    tombstone_column: str | None = None

    def __post_init__(self) -> None:
        check_name("name", self.name)
        check_idle_timeout("idle_timeout_ms", self.idle_timeout_ms, "the source",
                           "remove it for a source that is never idle")
        check_literal("format", self.format, SourceFormat)
        check_literal("time_mode", self.time_mode, TimeMode)
        for fname in ("path", "schema", "event_time_column", "sql", "key_schema",
                      "timestamp_column", "tombstone_column"):
            check_str(fname, getattr(self, fname))
        object.__setattr__(self, "options", as_str_map("options", self.options))
        self._check_kafka_fields()
        if self.format in FILE_FORMATS:
            if self.path is None:
                msg = (
                    f"`path` is required for format={self.format!r} (the folder Spark reads); "
                    f'e.g. path = "data/{self.name}"'
                )
                raise ConfigError(msg)
            if self.schema is None:
                msg = (
                    f"`schema` is required for format={self.format!r}: Spark's file streams "
                    'need their schema up front; e.g. schema = "id BIGINT, ts TIMESTAMP"'
                )
                raise ConfigError(msg)
        else:
            fixed = () if self.is_kafka_json else (("schema", "its columns are fixed"),)
            for fname, why in (("path", "it reads from `options`"), *fixed):
                if getattr(self, fname) is not None:
                    msg = (
                        f"`{fname}` does not apply to format={self.format!r} ({why}; got "
                        f"{fname}={getattr(self, fname)!r}); remove it"
                    )
                    raise ConfigError(msg)
        columns = self.ddl_columns()
        reserved = [c for c, _ in columns if c.startswith(RESERVED_PREFIX)]
        if reserved:
            msg = (
                f"`schema` has column(s) {reserved} starting with interlace's reserved prefix "
                f"{RESERVED_PREFIX!r}; rename them"
            )
            raise ConfigError(msg)
        et = self.event_time_column
        if et is not None and self.sql is None:
            # Without a SQL pre-stage the source's own columns are what the operator sees.
            types = dict(columns)
            if self.time_mode == "event":
                if et not in types:
                    msg = (
                        f"`event_time_column` {et!r} is not a column of the source (its "
                        f"columns: {[c for c, _ in columns]}); fix the name or add it to "
                        "`schema`"
                    )
                    raise ConfigError(msg)
                if not is_timestamp(types[et]):
                    msg = (
                        f"`event_time_column` {et!r} must be a TIMESTAMP column (got "
                        f"{types[et]}); convert it in a `sql` pre-stage, e.g. "
                        f"SELECT *, timestamp_millis({et}) AS event_ts FROM source"
                    )
                    raise ConfigError(msg)
            elif et in types:
                msg = (
                    f"`time_mode`='processing' synthesizes the event-time column {et!r}, but "
                    f"the source already has a column named {et!r}; set "
                    "`event_time_column` to another name"
                )
                raise ConfigError(msg)

    @property
    def is_kafka_json(self) -> bool:
        """Whether this is a Kafka source whose values are decoded as JSON."""
        return self.format == "kafka" and self.value_format == "json"

    def _check_kafka_fields(self) -> None:
        kafka_only = ("value_format", "key_format", "key_schema", "timestamp_column",
                      "tombstone_column")
        if self.format != "kafka":
            for fname in kafka_only:
                if getattr(self, fname) is not None:
                    msg = (f"`{fname}` only applies to format = \"kafka\" (got "
                           f"format={self.format!r}); remove it")
                    raise ConfigError(msg)
            return
        if self.value_format is not None:
            check_literal("value_format", self.value_format, KafkaValueFormat)
        if not self.is_kafka_json:
            for fname in kafka_only[1:]:
                if getattr(self, fname) is not None:
                    msg = (f"`{fname}` applies to a Kafka source with value_format = \"json\" "
                           f"(the raw connector columns are fixed); remove it or set "
                           'value_format = "json"')
                    raise ConfigError(msg)
            return
        if self.schema is None:
            msg = ('`schema` is required for value_format = "json": the value\'s fields, e.g. '
                   'schema = "order_id BIGINT, amount DOUBLE, order_ts TIMESTAMP"')
            raise ConfigError(msg)
        if self.key_format is not None:
            check_literal("key_format", self.key_format, KafkaKeyFormat)
        if self.key_format == "json" and self.key_schema is None:
            msg = ('key_format = "json" needs `key_schema`: the key\'s fields, e.g. '
                   'key_schema = "customer STRING"')
            raise ConfigError(msg)
        if self.key_format != "json" and self.key_schema is not None:
            msg = ('`key_schema` applies to key_format = "json" (the key is read as one '
                   '`key STRING` column otherwise); set key_format = "json" or remove it')
            raise ConfigError(msg)
        parts = [("the key", self._key_columns()), ("`schema`", parse_ddl(self.schema)),
                 ("`timestamp_column`", self._extra_columns())]
        seen: dict[str, str] = {}
        for where, cols in parts:
            for c, _ in cols:
                if c in seen:
                    msg = (f"column {c!r} of the Kafka source {self.name!r} comes from both "
                           f"{seen[c]} and {where}; rename one (a value field the key "
                           "already holds can be left out of `schema`)")
                    raise ConfigError(msg)
                seen[c] = where

    def _key_columns(self) -> list[tuple[str, str]]:
        if self.key_format == "json":
            assert self.key_schema is not None
            return parse_ddl(self.key_schema)
        return [("key", "STRING")]

    def _extra_columns(self) -> list[tuple[str, str]]:
        cols = []
        if self.timestamp_column is not None:
            cols.append((self.timestamp_column, "TIMESTAMP"))
        if self.tombstone_column is not None:
            cols.append((self.tombstone_column, "BOOLEAN"))
        return cols

    def ddl_columns(self) -> list[tuple[str, str]]:
        """Return the columns the source reads, before its ``sql`` pre-stage.

        Returns:
            ``(name, type)`` pairs: the parsed ``schema`` of a file source, the fixed schema
            of ``rate`` (``timestamp``, ``value``) and ``kafka`` (``key``, ``value``,
            ``topic``, ..., plus ``headers`` when ``includeHeaders`` is ``"true"``).

        """
        if self.format == "rate":
            return list(_RATE_COLUMNS)
        if self.is_kafka_json:
            assert self.schema is not None
            return [*self._key_columns(), *parse_ddl(self.schema), *self._extra_columns()]
        if self.format == "kafka":
            cols = list(_KAFKA_COLUMNS)
            if str(self.options.get("includeHeaders", "false")).lower() == "true":
                cols.append(_KAFKA_HEADERS)
            return cols
        assert self.schema is not None
        return parse_ddl(self.schema)


@dataclass(frozen=True, slots=True)
class Target:
    """Where a pipeline writes (``[target]``), or its dead letters go (``[dead_letter]``).

    Example:
        >>> Target(kind="duckdb", key=["window_start", "window_end", "user"]).key
        ('window_start', 'window_end', 'user')

    Args:
        kind: See :data:`TargetKind`.
        path: The DuckDB file (default ``interlace.duckdb``; for ``[dead_letter]``, the
            target's file), the Parquet folder or the Delta table (required for both).
        table: DuckDB table (default: the pipeline name with non-identifier characters
            replaced by ``_``; for ``[dead_letter]`` that plus ``_dead_letters``).
            A delta target's table is its ``path`` (a folder or URI).
        key: DuckDB, Delta and Kafka: the natural key rows are upserted on (Kafka: the record
            key). Windows under ``late_data="reopen"`` default to ``(window_start,
            window_end, *group_by)``, so re-emitted windows replace their earlier rows; a
            join whose output is a changelog, to its key columns (applied by ``version``,
            docs/targets.md); otherwise rows are appended.
        options: Writer options (strings); a delta target's are delta-rs storage options
            (credentials, region, ...).

    """

    kind: TargetKind
    path: str | None = None
    table: str | None = None
    key: Sequence[str] | None = None
    options: Mapping[str, str] = EMPTY

    def __post_init__(self) -> None:
        check_literal("kind", self.kind, TargetKind)
        check_str("path", self.path)
        check_str("table", self.table)
        object.__setattr__(self, "key", as_name_tuple("key", self.key, allow_none=True))
        object.__setattr__(self, "options", as_str_map("options", self.options))
        if self.kind in ("parquet", "delta") and self.path is None:
            what = ("the folder to write" if self.kind == "parquet"
                    else "the Delta table's folder or URI")
            msg = (
                f"`path` is required for a {self.kind} target ({what}); e.g. "
                'path = "out/orders_payments"'
            )
            raise ConfigError(msg)
        if self.kind == "console" and self.path is not None:
            msg = f"`path` does not apply to a console target (got path={self.path!r}); remove it"
            raise ConfigError(msg)
        if self.kind == "kafka":
            absent = [o for o in ("kafka.bootstrap.servers", "topic") if o not in self.options]
            if absent:
                msg = (f"a kafka target needs options {absent}; e.g. options = "
                       '{ "kafka.bootstrap.servers" = "127.0.0.1:9092", topic = "paid_orders" }')
                raise ConfigError(msg)
            for fname in ("path", "table"):
                if getattr(self, fname) is not None:
                    msg = (f"`{fname}` does not apply to a kafka target (got {fname}="
                           f"{getattr(self, fname)!r}); the topic is options.topic")
                    raise ConfigError(msg)
        elif self.kind == "delta":
            if self.table is not None:
                msg = (f"`table` does not apply to a delta target (got table={self.table!r}); "
                       "the table is its `path`")
                raise ConfigError(msg)
        elif self.kind != "duckdb":
            for fname in ("table", "key"):
                if getattr(self, fname) is not None:
                    msg = (
                        f"`{fname}` only applies to a duckdb target (got kind={self.kind!r}, "
                        f'{fname}={getattr(self, fname)!r}); remove it or use kind = "duckdb"'
                    )
                    raise ConfigError(msg)
        if self.table is not None and not _TABLE_RE.match(self.table):
            msg = (
                f"`table` must be an identifier or schema.identifier (got "
                f'table={self.table!r}); e.g. table = "orders_payments"'
            )
            raise ConfigError(msg)
        if self.key is not None:
            if not self.key:
                msg = "`key` must name at least one column, or be left out (rows are appended)"
                raise ConfigError(msg)
            dupes = sorted({k for k in self.key if self.key.count(k) > 1})
            if dupes:
                msg = f"`key` names column(s) {dupes} twice (got key={list(self.key)})"
                raise ConfigError(msg)


@dataclass(frozen=True, slots=True)
class SparkSettings:
    """How the pipeline runs Spark (``[spark]``).

    Args:
        master: Spark master URL.
        checkpoint: The query's checkpoint folder (default
            ``.interlace/checkpoints/{pipeline name}``).
        shuffle_partitions: ``spark.sql.shuffle.partitions``.
        state_store: The state store provider, ``"hdfs"`` (Spark's default) or ``"rocksdb"``
            (large state; docs/deploy.md says which to use when).
        changelog_checkpointing: RocksDB's changelog checkpointing (``state_store =
            "rocksdb"`` only).
        conf: Any other Spark setting, e.g. ``spark.sql.streaming.multipleWatermarkPolicy``
            (an entry here wins over the settings above).

    Example:
        >>> SparkSettings(conf={"spark.sql.streaming.multipleWatermarkPolicy": "max"}).conf
        FrozenMap({'spark.sql.streaming.multipleWatermarkPolicy': 'max'})

    """

    master: str = "local[2]"
    checkpoint: str | None = None
    shuffle_partitions: int = 4
    state_store: str = "hdfs"
    changelog_checkpointing: bool = False
    conf: Mapping[str, str] = EMPTY

    def __post_init__(self) -> None:
        check_str("master", self.master, allow_none=False)
        check_str("checkpoint", self.checkpoint)
        sp = self.shuffle_partitions
        if isinstance(sp, bool) or not isinstance(sp, int) or sp < 1:
            msg = f"`shuffle_partitions` must be an int >= 1 (got shuffle_partitions={sp!r})"
            raise ConfigError(msg)
        if not isinstance(self.changelog_checkpointing, bool):
            msg = (
                "`changelog_checkpointing` must be true or false "
                f"(got changelog_checkpointing={self.changelog_checkpointing!r})"
            )
            raise ConfigError(msg)
        state_store_conf(self.state_store, self.changelog_checkpointing)  # validates both
        conf = as_str_map("conf", self.conf)
        for key, field in (
            ("spark.sql.shuffle.partitions", "shuffle_partitions"),
            ("spark.master", "master"),
        ):
            if key in conf:
                msg = f"`conf` sets {key!r}; set it with `{field}` instead"
                raise ConfigError(msg)
        object.__setattr__(self, "conf", conf)
