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
* ``"kafka"``: Spark's Kafka source; the model accepts it, the runner checks the connector.
"""

TargetKind = Literal["duckdb", "parquet", "console"]
"""Where the output goes.

* ``"duckdb"``: a table in a DuckDB file, upserted on ``key`` when one is set.
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

    def __post_init__(self) -> None:
        check_name("name", self.name)
        check_idle_timeout("idle_timeout_ms", self.idle_timeout_ms, "the source",
                           "remove it for a source that is never idle")
        check_literal("format", self.format, SourceFormat)
        check_literal("time_mode", self.time_mode, TimeMode)
        for fname in ("path", "schema", "event_time_column", "sql"):
            check_str(fname, getattr(self, fname))
        object.__setattr__(self, "options", as_str_map("options", self.options))
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
            for fname, why in (
                ("path", "it reads from `options`"),
                ("schema", "its columns are fixed"),
            ):
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

    def ddl_columns(self) -> list[tuple[str, str]]:
        """Return the columns the source reads, before its ``sql`` pre-stage.

        Returns:
            ``(name, type)`` pairs: the parsed ``schema`` of a file source, the fixed schema
            of ``rate`` (``timestamp``, ``value``) and ``kafka`` (``key``, ``value``,
            ``topic``, ..., plus ``headers`` when ``includeHeaders`` is ``"true"``).

        """
        if self.format == "rate":
            return list(_RATE_COLUMNS)
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
            target's file) or the Parquet folder (required).
        table: DuckDB table (default: the pipeline name with non-identifier characters
            replaced by ``_``; for ``[dead_letter]`` that plus ``_dead_letters``).
        key: DuckDB only: the natural key rows are upserted on. Windows under
            ``late_data="reopen"`` default to ``(window_start, window_end, *group_by)``, so
            re-emitted windows replace their earlier rows; a join whose output is a
            changelog, to its key columns (applied by ``version``, docs/targets.md);
            otherwise rows are appended.
        options: Writer options (strings).

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
        if self.kind == "parquet" and self.path is None:
            msg = (
                "`path` is required for a parquet target (the folder to write); e.g. "
                'path = "out/orders_payments"'
            )
            raise ConfigError(msg)
        if self.kind == "console" and self.path is not None:
            msg = f"`path` does not apply to a console target (got path={self.path!r}); remove it"
            raise ConfigError(msg)
        if self.kind != "duckdb":
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
