"""The pipeline model: :class:`Source`, :class:`Target`, :class:`SparkSettings`, :class:`Pipeline`.

Each is a frozen dataclass checked when it is built; :class:`Pipeline` then checks the whole
(:mod:`interlace.pipeline.validate`). Reading and writing TOML live in
:mod:`interlace.pipeline.toml`; the package docstring describes the format.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from interlace.operators.common.checks import as_name_tuple, check_literal
from interlace.operators.common.names import RESERVED_PREFIX
from interlace.operators.common.spec import TimeMode
from interlace.operators.errors import ConfigError
from interlace.operators.join import Join
from interlace.operators.window import Window
from interlace.pipeline.ddl import is_timestamp, parse_ddl
from interlace.pipeline.kinds import JOIN_KIND, JOIN_KINDS, JoinSpec, join_kind
from interlace.pipeline.stages import Stage, StageRun, stage_pipelines
from interlace.pipeline.validate import (
    JOIN_TABLE,
    WINDOW_TABLE,
    check_unique_sources,
    err,
    label,
    output_columns_of,
    toml_key,
    validate,
)
from interlace.pipeline.values import EMPTY, as_str_map, check_name, check_str, default_table
from interlace.session import state_store_conf

# In the order the module defines them.
__all__ = [
    "SourceFormat",
    "TargetKind",
    "FILE_FORMATS",
    "DEFAULT_DUCKDB_PATH",
    "DEFAULT_CHECKPOINT",
    "DEAD_LETTER_TABLE_SUFFIX",
    "JOIN_KIND",
    "Source",
    "Target",
    "SparkSettings",
    "Stage",
    "Pipeline",
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

    """

    name: str
    format: SourceFormat
    path: str | None = None
    options: Mapping[str, str] = EMPTY
    schema: str | None = None
    event_time_column: str | None = None
    time_mode: TimeMode = "event"
    sql: str | None = None

    def __post_init__(self) -> None:
        check_name("name", self.name)
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


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A whole streaming job: sources, one operator or a chain of stages, a target.

    One operator (``join`` or ``window``, the module docstring), or ``stages``: a chain of
    operators, one Spark query each, the last one writing the target (SEMANTICS §11,
    :mod:`interlace.pipeline.stages`, docs/chains.md).

    Args:
        name: The pipeline's name (letters, digits, ``_``, ``-``, ``.``); names the default
            checkpoint, DuckDB table and the operator.
        sources: The inputs (stored as a tuple), with unique names; every source must feed
            the operator.
        target: Where the output goes.
        join: A join of ``left_source`` and ``right_source``: a stream-stream
            :class:`~interlace.Join` (TOML ``kind = "stream_stream_join"``, the default), a
            :class:`~interlace.StreamTableJoin` (``kind = "stream_table"``: the left source is
            the stream, the right one the table's changelog), a :class:`~interlace.TableJoin`
            (``kind = "table"``) or a :class:`~interlace.ForeignKeyJoin` (``kind =
            "foreign_key"``), which join two tables' changelogs and output a changelog (see
            :mod:`interlace.pipeline.kinds`).
        left_source: Join only: the left input's source name.
        right_source: Join only: the right input's source name (not the left one).
        window: A window aggregation of ``window_source``.
        window_source: Window only: the source to aggregate (default: the only source).
        transform_sql: Window only (``[transform] sql``): a Spark SQL pre-stage over the
            window's source, registered as the view ``source``.
        dead_letter: Where dead letters go; required exactly when the operator has
            ``late_data="dlq"`` (the target gets the normal rows, without ``_dead_letter``).
        spark: Spark settings.
        stages: A chain of :class:`~interlace.pipeline.stages.Stage` (stored as a tuple),
            instead of ``join`` / ``window`` and their fields; each stage names its inputs
            (sources or stages) and may have its own ``dead_letter``.

    Raises:
        ConfigError: Anything invalid, naming the TOML table and key (SEMANTICS §6).

    """

    name: str
    sources: Sequence[Source]
    target: Target
    join: JoinSpec | None = None
    left_source: str | None = None
    right_source: str | None = None
    window: Window | None = None
    window_source: str | None = None
    transform_sql: str | None = None
    dead_letter: Target | None = None
    spark: SparkSettings = SparkSettings()
    stages: Sequence[Stage] = ()

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        check_name("name", self.name)
        if isinstance(self.sources, str | bytes | Mapping) or not isinstance(
            self.sources, Iterable
        ):
            raise err((), None, "`sources` must be a list of Source(...)")
        sources = tuple(self.sources)
        setattr_(self, "sources", sources)
        for i, s in enumerate(sources):
            if not isinstance(s, Source):
                raise err(("sources", i), None, f"must be a Source(...) (got {s!r})")
        join_types = tuple(k.spec_type for k in JOIN_KINDS.values())
        for fname, types in (
            ("target", (Target,)),
            ("dead_letter", (Target,)),
            ("spark", (SparkSettings,)),
            ("join", join_types),
            ("window", (Window,)),
        ):
            value = getattr(self, fname)
            if value is None and fname in ("dead_letter", "join", "window"):
                continue
            if not isinstance(value, types):
                names = " or ".join(f"{t.__name__}(...)" for t in types)
                raise err((), None, f"`{fname}` must be a {names} (got {value!r})")
        for fname, table in (
            ("left_source", JOIN_TABLE),
            ("right_source", JOIN_TABLE),
            ("window_source", WINDOW_TABLE),
            ("transform_sql", ("transform",)),
        ):
            try:
                check_str(fname, getattr(self, fname))
            except ConfigError as exc:
                raise err(table, toml_key(fname), str(exc)) from exc
        # An operator left with its default name takes the pipeline's (module docstring);
        # the table joins (stream-table, table-table, foreign-key) have no name.
        if isinstance(self.join, Join) and self.join.name == "join":
            setattr_(self, "join", dataclasses.replace(self.join, name=self.name))
        if self.window is not None and self.window.name == "window":
            setattr_(self, "window", dataclasses.replace(self.window, name=self.name))
        if isinstance(self.stages, str | bytes | Mapping) or not isinstance(self.stages, Iterable):
            raise err((), "stages", "`stages` must be a list of Stage(...)")
        setattr_(self, "stages", tuple(self.stages))
        for i, st in enumerate(self.stages):
            if not isinstance(st, Stage):
                raise err(("stages", i), None, f"must be a Stage(...) (got {st!r})")
        if self.stages:
            self._check_chain_fields()
            stage_pipelines(self)  # checks the graph and every stage (stages.py)
        else:
            validate(self)

    def _check_chain_fields(self) -> None:
        """A chain's operators live in its stages: the one-operator fields must be unset."""
        check_unique_sources(self.sources)
        if not self.sources:
            raise err((), None, "a pipeline needs at least one [[sources]] table")
        for fname, table in (
            ("join", JOIN_TABLE),
            ("window", WINDOW_TABLE),
            ("left_source", JOIN_TABLE),
            ("right_source", JOIN_TABLE),
            ("window_source", WINDOW_TABLE),
            ("transform_sql", ("transform",)),
            ("dead_letter", ("dead_letter",)),
        ):
            if getattr(self, fname) is not None:
                where = "each stage's [stages.dead_letter]" if fname == "dead_letter" else (
                    "the [[stages]] tables")
                raise err(table, None,
                          f"a pipeline with [[stages]] has its operators in {where}: move "
                          f"{label(table)} there (`{fname}` in Python goes in a Stage)")

    # Chains ------------------------------------------------------------------------------------

    def stage_runs(self) -> list[StageRun]:
        """Return the pipeline's stages resolved for running, in an order that runs them.

        A pipeline without ``stages`` is one stage: itself. See
        :func:`~interlace.pipeline.stages.stage_pipelines`.
        """
        if not self.stages:
            return [StageRun(stage=None, pipeline=self, upstream={}, consumers=(), final=True)]
        return stage_pipelines(self)

    def final_stage(self) -> Pipeline:
        """Return the one-operator pipeline whose output goes to the target (``self`` if one)."""
        if not self.stages:
            return self
        return next(r.pipeline for r in self.stage_runs() if r.final)

    # Look-ups and resolved defaults ------------------------------------------------------------

    def source(self, name: str) -> Source:
        """Return the source called ``name``.

        Raises:
            KeyError: No source has that name.

        """
        for s in self.sources:
            if s.name == name:
                return s
        raise KeyError(name)

    def resolved_window_source(self) -> str | None:
        """Return the window's source name (``window_source``, else the only source).

        Returns:
            The name, or None for a join.

        """
        if self.window is None:
            return None
        return self.window_source if self.window_source is not None else self.sources[0].name

    def output_columns(self) -> list[str]:
        """Return the operator's output column names, in order.

        A stream-stream join's come from the sources' schemas, the prefixes and
        ``output_*_columns`` (semi / anti joins: the left columns unprefixed); a stream-table
        join's are the prefixed stream columns, the prefixed table ``value_columns`` and
        ``right_valid_from`` (SEMANTICS §8); a table-table or foreign-key join's are the
        ``left_keys``, both tables' prefixed value columns, ``op``, ``event_time`` and
        ``version`` (SEMANTICS §9); a window's are :attr:`Window.output_columns`.
        ``_dead_letter`` is last under ``late_data="dlq"`` (the target itself gets the rows
        without it).

        Raises:
            ConfigError: A join input has a ``sql`` pre-stage (its columns are known only to
                Spark) and the join does not list the columns it outputs from it.

        """
        if self.stages:
            return self.final_stage().output_columns()
        names = output_columns_of(self)
        if names is None:
            assert self.join is not None  # a window's output columns are always known
            fix = join_kind(self.join).unknown_output_fix
            msg = (
                "[transform.join]: the output columns are unknown: a joined source has a "
                f"`sql` pre-stage, whose columns only Spark knows; {fix}"
            )
            raise ConfigError(msg)
        return names

    def checkpoint_path(self) -> str:
        """Return the checkpoint folder (``[spark] checkpoint`` or the default)."""
        return self.spark.checkpoint or DEFAULT_CHECKPOINT.format(name=self.name)

    def checkpoint_folder(self, base: str | os.PathLike[str]) -> pathlib.Path:
        """Return the checkpoint folder, resolved against ``base`` if it is relative.

        ``base`` is the pipeline file's folder, as for every relative path of a pipeline.
        """
        folder = pathlib.Path(self.checkpoint_path())
        return folder if folder.is_absolute() else pathlib.Path(base) / folder

    def resolved_target(self) -> Target:
        """Return :attr:`target` with its defaults filled in (path, table, key).

        The default ``key`` of a duckdb target: ``(window_start, window_end, *group_by)`` for
        a window under ``late_data="reopen"``; the key columns for a join whose output is a
        changelog (:attr:`~interlace.pipeline.kinds.JoinKind.changelog_key`); else none.
        """
        if self.stages:
            return self.final_stage().resolved_target()
        t = self.target
        if t.kind != "duckdb":
            return t
        key = t.key
        if key is None and self.window is not None and self.window.late_data == "reopen":
            w = self.window
            key = (w.window_start_column, w.window_end_column, *w.group_by)
        changelog_key = None if self.join is None else join_kind(self.join).changelog_key
        if key is None and changelog_key is not None:
            key = changelog_key(self.join)  # a changelog is applied by its key (kinds.py)
        return dataclasses.replace(
            t,
            path=t.path or DEFAULT_DUCKDB_PATH,
            table=t.table or default_table(self.name),
            key=key,
        )

    def resolved_dead_letter(self) -> Target | None:
        """Return :attr:`dead_letter` with its defaults filled in (None without one).

        A duckdb dead-letter target defaults to the target's file (when that is DuckDB) and to
        the table ``{target table}_dead_letters``.
        """
        d = self.dead_letter
        if d is None or d.kind != "duckdb":
            return d  # a chain's dead letters: each stage's (stage_runs)
        main = self.resolved_target()
        path = d.path or (main.path if main.kind == "duckdb" else None) or DEFAULT_DUCKDB_PATH
        table = d.table or (main.table or default_table(self.name)) + DEAD_LETTER_TABLE_SUFFIX
        return dataclasses.replace(d, path=path, table=table)

    # TOML --------------------------------------------------------------------------------------

    @classmethod
    def from_toml(cls, text: str, *, path: str | None = None) -> Pipeline:
        """Build a pipeline from TOML text.

        Args:
            text: The TOML document.
            path: The file it came from, for error messages.

        Returns:
            The validated pipeline.

        Raises:
            ConfigError: A TOML syntax error (with tomllib's line and column), an unknown key
                (with its table, line and the valid keys), or any invalid setting (with its
                table and line).

        """
        from interlace.pipeline.toml import read_pipeline  # toml.py builds this module's classes

        return read_pipeline(text, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Pipeline:
        """Read a pipeline from a TOML file.

        Relative paths inside the file (sources, targets, checkpoint) are kept as written;
        ``interlace run`` / ``validate`` resolve them against the file's folder
        (:func:`interlace.runner.run_pipeline` against its ``base``).

        Raises:
            ConfigError: The file is not UTF-8 or not a valid pipeline (see :meth:`from_toml`).
            OSError: The file cannot be read.

        """
        with open(path, "rb") as fh:
            raw = fh.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"{os.fspath(path)} is not UTF-8 text ({exc}); TOML files are UTF-8"
            raise ConfigError(msg) from exc
        return cls.from_toml(text, path=os.fspath(path))

    def to_toml(self) -> str:
        """Return the pipeline as TOML: only non-default values, in a fixed order.

        ``Pipeline.from_toml(p.to_toml()) == p`` for every pipeline ``p``.
        """
        from interlace.pipeline.toml import write_pipeline  # toml.py builds this module's classes

        return write_pipeline(self)


