"""Pipelines: named sources, one operator (a join or a window) and a target, in Python or TOML.

A :class:`Pipeline` is the whole job as data: its :class:`Source` tables, one operator
(:class:`~interlace.Join` or :class:`~interlace.Window`), the :class:`Target` it writes,
an optional dead-letter target and the :class:`SparkSettings`. It is validated as a whole
when it is built (SEMANTICS §6): a join naming a source that does not exist, key columns
absent from a source's schema, a target key absent from the output, a window and a join in
one pipeline, and so on, all raise :class:`~interlace.ConfigError` before Spark starts.

The same pipeline reads from and writes to TOML (the layout of seeds 000 and 001)::

    name = "orders-payments"

    [[sources]]
    name = "orders"
    format = "parquet"
    path = "data/orders"
    schema = "order_id BIGINT, amount DOUBLE, order_ts TIMESTAMP"
    event_time_column = "order_ts"
    options = { maxFilesPerTrigger = "1" }

    [transform.join]              # or [transform.window] + [[transform.window.aggregations]]
    kind = "stream_stream_join"
    left_source = "orders"
    right_source = "payments"
    left_keys = ["order_id"]      # ... every Join field by its Python name
    ...

    [target]
    kind = "duckdb"

The round trip is lossless: ``Pipeline.from_toml(p.to_toml()) == p``, and ``to_toml`` writes
only what differs from the defaults, in a fixed order. Defaults the TOML leaves out:

* ``[transform.join]`` / ``[transform.window]`` without ``name``: the pipeline's name. In
  Python too, an operator left with its dataclass default name (``"join"`` / ``"window"``)
  takes the pipeline's name, so metrics and the state-cap error name the pipeline.
* ``[transform.join]`` without any of ``event_time_column``, ``left_event_time_column``,
  ``right_event_time_column``: each side's source ``event_time_column`` (one shared
  ``event_time_column`` when both sources name the same column). Without ``time_mode``: the
  sources' ``time_mode`` when they agree, else ``"event"``.
* ``[transform.window]`` without ``event_time_column`` / ``time_mode``: the window source's
  (``"ts"`` / ``"event"`` when the source names none). Without ``source``: the only source.

A source's ``event_time_column`` and ``time_mode`` must agree with the operator reading it
(the event-time column is checked only where no SQL pre-stage can rename it).

Example:
    >>> from interlace import Aggregation, Window
    >>> from interlace.pipeline import Pipeline, Source, Target
    >>> p = Pipeline(
    ...     name="clicks-per-minute",
    ...     sources=[Source(name="clicks", format="json", path="data/clicks",
    ...                     schema="user STRING, page STRING, click_ts TIMESTAMP",
    ...                     event_time_column="click_ts")],
    ...     window=Window(kind="tumbling", duration_ms=60_000, event_time_column="click_ts",
    ...                   group_by=["user"], max_groups_per_window=100_000,
    ...                   aggregations=[Aggregation(agg="count", as_="clicks")]),
    ...     target=Target(kind="console"))
    >>> print(p.to_toml())
    name = "clicks-per-minute"
    <BLANKLINE>
    [[sources]]
    name = "clicks"
    format = "json"
    path = "data/clicks"
    schema = "user STRING, page STRING, click_ts TIMESTAMP"
    event_time_column = "click_ts"
    <BLANKLINE>
    [transform.window]
    kind = "tumbling"
    duration_ms = 60_000
    group_by = ["user"]
    max_groups_per_window = 100_000
    <BLANKLINE>
    [[transform.window.aggregations]]
    agg = "count"
    as = "clicks"
    <BLANKLINE>
    [target]
    kind = "console"
    <BLANKLINE>
    >>> Pipeline.from_toml(p.to_toml()) == p
    True
    >>> p.output_columns()
    ['window_start', 'window_end', 'user', 'clicks']

"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with the tomli backport
    import tomli as tomllib

from interlace.operators._common import (
    DEAD_LETTER_COLUMN,
    RESERVED_PREFIX,
    TimeMode,
    as_name_tuple,
    check_literal,
)
from interlace.operators.errors import ConfigError
from interlace.operators.join import Join
from interlace.operators.window import Aggregation, Window
from interlace.session import state_store_conf

__all__ = [
    "FrozenMap",
    "Pipeline",
    "Source",
    "SourceFormat",
    "SparkSettings",
    "Target",
    "TargetKind",
    "parse_ddl",
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
#: The ``kind`` of ``[transform.join]`` (seed 000).
JOIN_KIND = "stream_stream_join"

_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
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

# Where a pipeline-level error points in the TOML file: (table path, key). from_toml turns
# it into a line number; Python callers never see it.
_WHERE_ATTR = "_interlace_toml_where"

TablePath = tuple[str | int, ...]


# --------------------------------------------------------------------------------------------
# Frozen string maps (options, conf)
# --------------------------------------------------------------------------------------------


class FrozenMap(Mapping[str, str]):
    """An immutable, hashable ``str -> str`` mapping, kept sorted by key.

    Used for ``options`` and ``conf`` so that specs stay frozen and hashable. Equal to any
    mapping with the same items (``FrozenMap({"a": "1"}) == {"a": "1"}``).

    Example:
        >>> m = FrozenMap({"b": "2", "a": "1"})
        >>> list(m.items()), m == {"a": "1", "b": "2"}, hash(m) == hash(FrozenMap(m))
        ([('a', '1'), ('b', '2')], True, True)

    """

    __slots__ = ("_dict", "_items")

    def __init__(self, data: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        items = tuple(sorted(dict(data).items()))
        self._items: tuple[tuple[str, str], ...] = items
        self._dict: dict[str, str] = dict(items)

    def __getitem__(self, key: str) -> str:
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._dict == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._dict!r})"


_EMPTY = FrozenMap()


def _as_str_map(field: str, value: object) -> FrozenMap:
    """Normalise ``value`` to a :class:`FrozenMap`; TOML numbers and booleans become strings.

    Spark options and conf are strings; ``maxFilesPerTrigger = 1`` is accepted as ``"1"`` and
    ``true`` as ``"true"`` (Spark's spelling).
    """
    if isinstance(value, FrozenMap):
        return value
    if not isinstance(value, Mapping):
        msg = (
            f"`{field}` must be a table of strings (got {field}={value!r}); "
            f'e.g. {field} = {{ maxFilesPerTrigger = "1" }}'
        )
        raise ConfigError(msg)
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            msg = f"`{field}` keys must be strings (got {k!r})"
            raise ConfigError(msg)
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, str | int | float):
            out[k] = str(v)
        else:
            msg = (
                f"`{field}` values must be strings (got {k}={v!r}); Spark options and conf "
                'are strings, e.g. "1"'
            )
            raise ConfigError(msg)
    return FrozenMap(out)


def _check_str(field: str, value: object, *, allow_none: bool = True) -> None:
    """Raise unless ``value`` is a non-empty str (or None when allowed)."""
    if value is None and allow_none:
        return
    if not isinstance(value, str) or not value.strip():
        need = "a non-empty string" + (" or absent" if allow_none else "")
        msg = f"`{field}` must be {need} (got {field}={value!r})"
        raise ConfigError(msg)


def _check_name(field: str, value: object) -> None:
    """Raise unless ``value`` is a usable name (letters, digits, ``_``, ``-``, ``.``)."""
    _check_str(field, value, allow_none=False)
    assert isinstance(value, str)
    if not _NAME_RE.match(value):
        msg = (
            f"`{field}` must start with a letter, digit or '_' and hold only letters, digits, "
            f"'_', '-' and '.' (got {field}={value!r}); it names files and tables, e.g. "
            '"orders-payments"'
        )
        raise ConfigError(msg)


def _default_table(name: str) -> str:
    """Turn a pipeline name into a table name: non-identifier characters become ``_``."""
    table = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return "_" + table if table[:1].isdigit() else table


# --------------------------------------------------------------------------------------------
# Spark DDL ("name TYPE, ...")
# --------------------------------------------------------------------------------------------

_OPEN, _CLOSE = "(<", ")>"


def _top_level_split(text: str, sep: str) -> list[str]:
    """Split ``text`` at ``sep`` outside brackets, backticks and quotes."""
    parts: list[str] = []
    depth, quote, start, i = 0, "", 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote != "`":
                i += 1
            elif ch == quote:
                if quote == "`" and text[i + 1 : i + 2] == "`":
                    i += 1  # `` is an escaped backtick inside a quoted name
                else:
                    quote = ""
        elif ch in "`'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                msg = f"unbalanced {ch!r} at character {i + 1}"
                raise ValueError(msg)
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    if quote:
        msg = f"unterminated {quote} quote"
        raise ValueError(msg)
    if depth:
        msg = "unbalanced brackets: a '(' or '<' is never closed"
        raise ValueError(msg)
    parts.append(text[start:])
    return parts


def _ddl_column(piece: str) -> tuple[str, str]:
    """Parse one ``name TYPE [NOT NULL] [COMMENT '...']`` column definition."""
    piece = piece.strip()
    if not piece:
        msg = "an empty column definition (two commas in a row, or a trailing comma)"
        raise ValueError(msg)
    if piece.startswith("`"):
        i, name = 1, []
        while True:
            j = piece.find("`", i)
            if j < 0:
                msg = f"unterminated backtick in {piece!r}"
                raise ValueError(msg)
            name.append(piece[i:j])
            if piece[j + 1 : j + 2] == "`":
                name.append("`")
                i = j + 2
                continue
            rest = piece[j + 1 :]
            break
        col = "".join(name)
        if not col:
            msg = "an empty column name (``)"
            raise ValueError(msg)
    else:
        m = re.match(r"[A-Za-z0-9_]+", piece)
        if not m or (
            piece[m.end() : m.end() + 1] not in ("", ":") and not piece[m.end()].isspace()
        ):
            msg = (
                f"column name in {piece!r} must be letters, digits and '_'; quote other names "
                "with backticks, e.g. `order id` BIGINT"
            )
            raise ValueError(msg)
        col, rest = m.group(), piece[m.end() :]
    rest = rest.strip()
    if rest.startswith(":"):
        rest = rest[1:].strip()
    words = [w for w in _top_level_split(re.sub(r"\s", " ", rest), " ") if w]
    type_words: list[str] = []
    for w in words:
        if w.upper() in ("NOT", "COMMENT"):
            break
        type_words.append(w)
    if not type_words:
        msg = f"column {col!r} has no type; e.g. {col} STRING"
        raise ValueError(msg)
    return col, " ".join(type_words)


def parse_ddl(ddl: str) -> list[tuple[str, str]]:
    """Parse a Spark DDL schema string into ``(name, type)`` pairs.

    Handles nested types (``DECIMAL(10,2)``, ``MAP<STRING, INT>``, ``STRUCT<a: INT>``),
    backtick-quoted names (```order id` ``, with doubled backticks inside), an optional colon
    after the name, and ``NOT NULL`` / ``COMMENT '...'`` suffixes (dropped). Types are returned
    as written; Spark itself checks them when the query starts.

    Example:
        >>> parse_ddl("id BIGINT, `unit price` DECIMAL(10,2), tags MAP<STRING, INT> NOT NULL")
        [('id', 'BIGINT'), ('unit price', 'DECIMAL(10,2)'), ('tags', 'MAP<STRING, INT>')]

    Args:
        ddl: The schema, e.g. ``"order_id BIGINT, ts TIMESTAMP"``.

    Returns:
        The columns in order.

    Raises:
        ConfigError: The string is not a column list, or names a column twice.

    """
    try:
        cols = [_ddl_column(p) for p in _top_level_split(ddl, ",")]
    except ValueError as exc:
        msg = (
            f"`schema` is not a Spark DDL column list ({exc}; got schema={ddl!r}); "
            'write it as "name TYPE, ...", e.g. "order_id BIGINT, ts TIMESTAMP"'
        )
        raise ConfigError(msg) from exc
    names = [c for c, _ in cols]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        msg = (
            f"`schema` names column(s) {dupes} twice (got schema={ddl!r}); column names "
            "must be unique"
        )
        raise ConfigError(msg)
    return cols


def _is_timestamp(type_text: str) -> bool:
    return type_text.strip().upper() in ("TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ")


# --------------------------------------------------------------------------------------------
# Sources, targets, Spark settings
# --------------------------------------------------------------------------------------------


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
    options: Mapping[str, str] = _EMPTY
    schema: str | None = None
    event_time_column: str | None = None
    time_mode: TimeMode = "event"
    sql: str | None = None

    def __post_init__(self) -> None:
        _check_name("name", self.name)
        check_literal("format", self.format, SourceFormat)
        check_literal("time_mode", self.time_mode, TimeMode)
        for fname in ("path", "schema", "event_time_column", "sql"):
            _check_str(fname, getattr(self, fname))
        object.__setattr__(self, "options", _as_str_map("options", self.options))
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
                if not _is_timestamp(types[et]):
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
            re-emitted windows replace their earlier rows; otherwise rows are appended.
        options: Writer options (strings).

    """

    kind: TargetKind
    path: str | None = None
    table: str | None = None
    key: Sequence[str] | None = None
    options: Mapping[str, str] = _EMPTY

    def __post_init__(self) -> None:
        check_literal("kind", self.kind, TargetKind)
        _check_str("path", self.path)
        _check_str("table", self.table)
        object.__setattr__(self, "key", as_name_tuple("key", self.key, allow_none=True))
        object.__setattr__(self, "options", _as_str_map("options", self.options))
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
    conf: Mapping[str, str] = _EMPTY

    def __post_init__(self) -> None:
        _check_str("master", self.master, allow_none=False)
        _check_str("checkpoint", self.checkpoint)
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
        conf = _as_str_map("conf", self.conf)
        for key, field in (
            ("spark.sql.shuffle.partitions", "shuffle_partitions"),
            ("spark.master", "master"),
        ):
            if key in conf:
                msg = f"`conf` sets {key!r}; set it with `{field}` instead"
                raise ConfigError(msg)
        object.__setattr__(self, "conf", conf)


# --------------------------------------------------------------------------------------------
# Pipeline
# --------------------------------------------------------------------------------------------


def _err(table: TablePath, key: str | None, msg: str) -> ConfigError:
    """Build a pipeline-level error labelled with its TOML table, remembering where to point."""
    exc = ConfigError(f"{_label(table)}: {msg}")
    setattr(exc, _WHERE_ATTR, (table, key))
    return exc


def _label(table: TablePath) -> str:
    """Name a table path: ``("sources", 1)`` is ``[[sources]] #2``, ``("target",)`` ``[target]``."""
    if not table:
        return "top level"
    if isinstance(table[-1], int):
        return f"[[{'.'.join(str(p) for p in table[:-1])}]] #{table[-1] + 1}"
    return f"[{'.'.join(str(p) for p in table)}]"


_JOIN_TABLE: TablePath = ("transform", "join")
_WINDOW_TABLE: TablePath = ("transform", "window")
_ET_FIELDS = ("event_time_column", "left_event_time_column", "right_event_time_column")


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A whole streaming job: sources, one operator, a target (see the module docstring).

    Args:
        name: The pipeline's name (letters, digits, ``_``, ``-``, ``.``); names the default
            checkpoint, DuckDB table and the operator.
        sources: The inputs (stored as a tuple), with unique names; every source must feed
            the operator.
        target: Where the output goes.
        join: A stream-stream join of ``left_source`` and ``right_source``.
        left_source: Join only: the left input's source name.
        right_source: Join only: the right input's source name (not the left one).
        window: A window aggregation of ``window_source``.
        window_source: Window only: the source to aggregate (default: the only source).
        transform_sql: Window only (``[transform] sql``): a Spark SQL pre-stage over the
            window's source, registered as the view ``source``.
        dead_letter: Where dead letters go; required exactly when the operator has
            ``late_data="dlq"`` (the target gets the normal rows, without ``_dead_letter``).
        spark: Spark settings.

    Raises:
        ConfigError: Anything invalid, naming the TOML table and key (SEMANTICS §6).

    """

    name: str
    sources: Sequence[Source]
    target: Target
    join: Join | None = None
    left_source: str | None = None
    right_source: str | None = None
    window: Window | None = None
    window_source: str | None = None
    transform_sql: str | None = None
    dead_letter: Target | None = None
    spark: SparkSettings = SparkSettings()

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        _check_name("name", self.name)
        if isinstance(self.sources, str | bytes | Mapping) or not isinstance(
            self.sources, Iterable
        ):
            raise _err((), None, "`sources` must be a list of Source(...)")
        sources = tuple(self.sources)
        setattr_(self, "sources", sources)
        for i, s in enumerate(sources):
            if not isinstance(s, Source):
                raise _err(("sources", i), None, f"must be a Source(...) (got {s!r})")
        for fname, typ in (
            ("target", Target),
            ("dead_letter", Target),
            ("spark", SparkSettings),
            ("join", Join),
            ("window", Window),
        ):
            value = getattr(self, fname)
            if value is None and fname in ("dead_letter", "join", "window"):
                continue
            if not isinstance(value, typ):
                raise _err((), None, f"`{fname}` must be a {typ.__name__}(...) (got {value!r})")
        for fname, table in (
            ("left_source", _JOIN_TABLE),
            ("right_source", _JOIN_TABLE),
            ("window_source", _WINDOW_TABLE),
            ("transform_sql", ("transform",)),
        ):
            try:
                _check_str(fname, getattr(self, fname))
            except ConfigError as exc:
                raise _err(table, _toml_key(fname), str(exc)) from exc
        # An operator left with its default name takes the pipeline's (module docstring).
        if self.join is not None and self.join.name == "join":
            setattr_(self, "join", dataclasses.replace(self.join, name=self.name))
        if self.window is not None and self.window.name == "window":
            setattr_(self, "window", dataclasses.replace(self.window, name=self.name))
        _validate(self)

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

        A join's come from the sources' schemas, the prefixes and ``output_*_columns``
        (semi / anti joins: the left columns unprefixed); a window's from
        :attr:`Window.output_columns`. ``_dead_letter`` is last under ``late_data="dlq"``
        (the target itself gets the rows without it).

        Raises:
            ConfigError: A join input has a ``sql`` pre-stage (its columns are known only to
                Spark) and the join does not list ``output_*_columns`` for it.

        """
        names = _output_columns(self)
        if names is None:
            msg = (
                "[transform.join]: the output columns are unknown: a joined source has a "
                "`sql` pre-stage, whose columns only Spark knows; list "
                "`output_left_columns` / `output_right_columns` to fix them"
            )
            raise ConfigError(msg)
        return names

    def checkpoint_path(self) -> str:
        """Return the checkpoint folder (``[spark] checkpoint`` or the default)."""
        return self.spark.checkpoint or DEFAULT_CHECKPOINT.format(name=self.name)

    def resolved_target(self) -> Target:
        """Return :attr:`target` with its defaults filled in (path, table, key)."""
        t = self.target
        if t.kind != "duckdb":
            return t
        key = t.key
        if key is None and self.window is not None and self.window.late_data == "reopen":
            w = self.window
            key = (w.window_start_column, w.window_end_column, *w.group_by)
        return dataclasses.replace(
            t,
            path=t.path or DEFAULT_DUCKDB_PATH,
            table=t.table or _default_table(self.name),
            key=key,
        )

    def resolved_dead_letter(self) -> Target | None:
        """Return :attr:`dead_letter` with its defaults filled in (None without one).

        A duckdb dead-letter target defaults to the target's file (when that is DuckDB) and to
        the table ``{target table}_dead_letters``.
        """
        d = self.dead_letter
        if d is None or d.kind != "duckdb":
            return d
        main = self.resolved_target()
        path = d.path or (main.path if main.kind == "duckdb" else None) or DEFAULT_DUCKDB_PATH
        table = d.table or (main.table or _default_table(self.name)) + DEAD_LETTER_TABLE_SUFFIX
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
        return _Reader(text, path).pipeline()

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
        return _write(self)


def _toml_key(field: str) -> str:
    """Return the TOML key of a field (``window_source`` is ``source``, ``as_`` is ``as``)."""
    return {"window_source": "source", "transform_sql": "sql", "as_": "as"}.get(field, field)


# --------------------------------------------------------------------------------------------
# Whole-pipeline validation
# --------------------------------------------------------------------------------------------


def _resolve_source(sources: Sequence[Source], name: str, table: TablePath, key: str) -> Source:
    for s in sources:
        if s.name == name:
            return s
    have = ", ".join(repr(s.name) for s in sources)
    raise _err(
        table,
        key,
        f"`{key}` names source {name!r} that does not exist (sources: {have}); "
        f"fix the name or add a [[sources]] table with name = {name!r}",
    )


def _window_source(sources: Sequence[Source], name: str | None) -> Source:
    if name is not None:
        return _resolve_source(sources, name, _WINDOW_TABLE, "source")
    if len(sources) != 1:
        have = ", ".join(repr(s.name) for s in sources)
        raise _err(
            _WINDOW_TABLE,
            None,
            "`source` is required when the pipeline has more than one "
            f'source (sources: {have}); set source = "..." '
            "(`window_source` in Python)",
        )
    return sources[0]


def _input_columns(src: Source, time_mode: str, et: str, *, renamed: bool) -> list[str] | None:
    """Return the operator's input columns from ``src`` (None when a SQL pre-stage hides them)."""
    if renamed or src.sql is not None:
        return None
    cols = [c for c, _ in src.ddl_columns()]
    return cols + [et] if time_mode == "processing" else cols


def _check_event_time(
    p: Pipeline, src: Source, table: TablePath, field: str, et: str, time_mode: str, renamed: bool
) -> None:
    """Check that the operator's time settings agree with its source's and its schema."""
    if src.time_mode != time_mode:
        raise _err(
            table,
            "time_mode",
            f"`time_mode`={time_mode!r} disagrees with source "
            f"{src.name!r} (time_mode={src.time_mode!r}); set the same "
            "time_mode on both",
        )
    if renamed or src.sql is not None:
        return  # a SQL pre-stage may rename or synthesize the column; Spark checks it
    if src.event_time_column is not None and src.event_time_column != et:
        raise _err(
            table,
            field,
            f"`{field}`={et!r} disagrees with source {src.name!r} "
            f"(event_time_column={src.event_time_column!r}); use the same "
            "column in both, or leave the operator's out to inherit it",
        )
    types = dict(src.ddl_columns())
    if time_mode == "event":
        if et not in types:
            raise _err(
                table,
                field,
                f"`{field}` {et!r} is not a column of source {src.name!r} "
                f"(its columns: {list(types)}); fix the name",
            )
        if not _is_timestamp(types[et]):
            raise _err(
                table,
                field,
                f"`{field}` {et!r} of source {src.name!r} must be a TIMESTAMP "
                f"column (got {types[et]}); convert it in the source's `sql`",
            )
    elif et in types:
        raise _err(
            table,
            field,
            f"`time_mode`='processing' synthesizes the event-time column "
            f"{et!r}, but source {src.name!r} already has a column named "
            f"{et!r}; set `{field}` to another name",
        )


def _check_columns(
    table: TablePath, key: str, names: Iterable[str], have: list[str] | None, what: str
) -> None:
    if have is None:
        return
    missing = [n for n in names if n not in have]
    if missing:
        raise _err(
            table,
            key,
            f"`{key}` names column(s) {missing} absent from {what} (its "
            f"columns: {have}); fix the name or add the column",
        )


def _join_side_columns(p: Pipeline) -> tuple[list[str] | None, list[str] | None]:
    j = p.join
    assert j is not None and p.left_source is not None and p.right_source is not None
    out = []
    for side, name in (("left", p.left_source), ("right", p.right_source)):
        et = j.side_event_time_column(side)
        assert et is not None
        out.append(_input_columns(p.source(name), j.time_mode, et, renamed=False))
    return out[0], out[1]


def _output_columns(p: Pipeline) -> list[str] | None:
    """Output columns in order, or None when a join input's columns are unknown."""
    if p.window is not None:
        return list(p.window.output_columns)
    j = p.join
    assert j is not None
    left, right = _join_side_columns(p)
    lsel = list(j.output_left_columns) if j.output_left_columns is not None else left
    rsel = list(j.output_right_columns) if j.output_right_columns is not None else right
    if j.how in ("left_semi", "left_anti"):
        if lsel is None:
            return None
        names = list(lsel)
    else:
        if lsel is None or rsel is None:
            return None
        names = [j.left_prefix + c for c in lsel] + [j.right_prefix + c for c in rsel]
    return names + [DEAD_LETTER_COLUMN] if j.late_data == "dlq" else names


def _check_unique_sources(sources: Sequence[Source]) -> None:
    seen: dict[str, int] = {}
    for i, s in enumerate(sources):
        if s.name in seen:
            raise _err(
                ("sources", i),
                "name",
                f"duplicate source name {s.name!r} (also "
                f"{_label(('sources', seen[s.name]))}); source "
                "names must be unique",
            )
        seen[s.name] = i


def _validate(p: Pipeline) -> None:
    """Check the pipeline as a whole; raise the first problem found."""
    _check_unique_sources(p.sources)
    if not p.sources:
        raise _err((), None, "a pipeline needs at least one [[sources]] table")
    # Exactly one operator.
    if p.join is not None and p.window is not None:
        raise _err(
            ("transform",),
            None,
            "a window and a join in one pipeline: [transform.join] "
            "and [transform.window] are mutually exclusive; chain "
            "two pipelines to aggregate a join's output",
        )
    if p.join is None and p.window is None:
        raise _err(
            ("transform",),
            None,
            "the pipeline has no operator: add a [transform.join] "
            "or a [transform.window] table (`join` or `window`)",
        )
    if p.join is not None:
        _validate_join(p)
    else:
        _validate_window(p)
    # Dead letters: a [dead_letter] target exactly when the operator dead-letters.
    op_table = _JOIN_TABLE if p.join is not None else _WINDOW_TABLE
    op = p.join if p.join is not None else p.window
    assert op is not None
    if op.late_data == "dlq" and p.dead_letter is None:
        raise _err(
            op_table,
            "late_data",
            "late_data='dlq' needs a [dead_letter] target for the "
            "dead letters (`dead_letter` in Python); add one, e.g. "
            '[dead_letter] kind = "duckdb"',
        )
    if op.late_data != "dlq" and p.dead_letter is not None:
        raise _err(
            ("dead_letter",),
            None,
            f"a [dead_letter] target only receives rows under "
            f"late_data='dlq' (got late_data={op.late_data!r}); "
            'remove it or set late_data = "dlq"',
        )
    if p.dead_letter is not None and p.dead_letter.key is not None:
        raise _err(
            ("dead_letter",),
            "key",
            "`key` does not apply to [dead_letter] (dead letters "
            "are appended per micro-batch); remove it",
        )
    # Output columns and the target key.
    names = _output_columns(p)
    if names is not None:
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise _err(
                op_table,
                None,
                f"output columns {dupes} appear twice (from `left_prefix`, "
                "`right_prefix`, `output_left_columns`, "
                "`output_right_columns`); choose distinct prefixes or "
                "select fewer columns",
            )
        bad = [n for n in names if n.startswith(RESERVED_PREFIX)]
        if bad:
            raise _err(
                op_table,
                None,
                f"output columns {bad} use the reserved prefix "
                f"{RESERVED_PREFIX!r}; change the prefix",
            )
    key = p.target.key
    if key is not None and names is not None:
        usable = [n for n in names if n != DEAD_LETTER_COLUMN]
        _check_columns(("target",), "key", key, usable, "the output columns")
    w = p.window
    if w is not None and w.kind == "session" and w.late_data == "reopen" and (
        p.target.kind == "parquet"
    ):
        raise _err(
            ("target",),
            "kind",
            "a Parquet target appends every revision, and under late_data = \"reopen\" a "
            "session's bounds move when late rows grow or merge it, so its files cannot "
            'converge to the final sessions; write to kind = "duckdb" (it applies the '
            'convergence rule, docs/targets.md) or use late_data = "drop" / "dlq"',
        )


def _validate_join(p: Pipeline) -> None:
    j = p.join
    assert j is not None
    for fname, value in (("window_source", p.window_source), ("transform_sql", p.transform_sql)):
        if value is not None:
            table: TablePath = _WINDOW_TABLE if fname == "window_source" else ("transform",)
            raise _err(
                table,
                _toml_key(fname),
                f"`{fname}` ({_label(table)} "
                f"{_toml_key(fname)}) only applies to a window "
                f"(got {fname}={value!r}); for a join give "
                "each source its own `sql` pre-stage",
            )
    for key in ("left_source", "right_source"):
        if getattr(p, key) is None:
            raise _err(
                _JOIN_TABLE,
                None,
                f"`{key}` is required: the join reads two sources by "
                f"name (sources: "
                f"{', '.join(repr(s.name) for s in p.sources)})",
            )
    assert p.left_source is not None and p.right_source is not None
    left = _resolve_source(p.sources, p.left_source, _JOIN_TABLE, "left_source")
    right = _resolve_source(p.sources, p.right_source, _JOIN_TABLE, "right_source")
    if left.name == right.name:
        raise _err(
            _JOIN_TABLE,
            "right_source",
            f"`left_source` and `right_source` are both "
            f"{left.name!r}; a stream-stream join needs two "
            "different sources (declare a stream twice, "
            "under two names, to join it with itself)",
        )
    for i, s in enumerate(p.sources):
        if s.name not in (left.name, right.name):
            raise _err(
                ("sources", i),
                "name",
                f"source {s.name!r} is not read by the join "
                f"(left_source={left.name!r}, "
                f"right_source={right.name!r}); remove it",
            )
    left_cols, right_cols = _join_side_columns(p)
    for side, src, cols, keys, sel in (
        ("left", left, left_cols, j.left_keys, j.output_left_columns),
        ("right", right, right_cols, j.right_keys, j.output_right_columns),
    ):
        et = j.side_event_time_column(side)
        assert et is not None
        field = (
            f"{side}_event_time_column"
            if getattr(j, f"{side}_event_time_column") is not None
            else "event_time_column"
        )
        _check_event_time(p, src, _JOIN_TABLE, field, et, j.time_mode, renamed=False)
        what = f"the {side} source {src.name!r}"
        _check_columns(_JOIN_TABLE, f"{side}_keys", keys, cols, what)
        _check_columns(_JOIN_TABLE, f"output_{side}_columns", sel or (), cols, what)


def _validate_window(p: Pipeline) -> None:
    w = p.window
    assert w is not None
    for key in ("left_source", "right_source"):
        if getattr(p, key) is not None:
            raise _err(
                _JOIN_TABLE,
                key,
                f"`{key}` only applies to a join (got {key}={getattr(p, key)!r}); remove it",
            )
    src = _window_source(p.sources, p.window_source)
    for i, s in enumerate(p.sources):
        if s.name != src.name:
            raise _err(
                ("sources", i),
                "name",
                f"source {s.name!r} is not read by the window "
                f"(it aggregates {src.name!r}); remove it",
            )
    renamed = p.transform_sql is not None
    _check_event_time(
        p, src, _WINDOW_TABLE, "event_time_column", w.event_time_column, w.time_mode, renamed
    )
    cols = _input_columns(src, w.time_mode, w.event_time_column, renamed=renamed)
    what = f"source {src.name!r}"
    _check_columns(_WINDOW_TABLE, "group_by", w.group_by, cols, what)
    for i, a in enumerate(w.aggregations):
        if a.column is not None:
            _check_columns((*_WINDOW_TABLE, "aggregations", i), "column", [a.column], cols, what)


# --------------------------------------------------------------------------------------------
# TOML defaults that depend on the pipeline (shared by reading and writing)
# --------------------------------------------------------------------------------------------


def _join_defaults(pipeline_name: str, left: Source | None, right: Source | None) -> dict[str, Any]:
    """Return what [transform.join] means when it leaves a key out (module docstring)."""
    lt = left.event_time_column if left is not None else None
    rt = right.event_time_column if right is not None else None
    if lt is not None and lt == rt:
        et: dict[str, Any] = {
            "event_time_column": lt,
            "left_event_time_column": None,
            "right_event_time_column": None,
        }
    else:
        et = {
            "event_time_column": None,
            "left_event_time_column": lt,
            "right_event_time_column": rt,
        }
    modes = {s.time_mode for s in (left, right) if s is not None}
    time_mode = modes.pop() if len(modes) == 1 else "event"
    return {"name": pipeline_name, "time_mode": time_mode, **et}


def _window_defaults(pipeline_name: str, src: Source | None) -> dict[str, Any]:
    """Return what [transform.window] means when it leaves a key out (module docstring)."""
    out: dict[str, Any] = {"name": pipeline_name}
    if src is not None:
        out["time_mode"] = src.time_mode
        if src.event_time_column is not None:
            out["event_time_column"] = src.event_time_column
    return out


def _field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


# --------------------------------------------------------------------------------------------
# Writing TOML
# --------------------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")
_ESCAPES = {
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}


def _fmt_str(s: str, *, multiline: bool) -> str:
    """Format a TOML basic string, multi-line for text with newlines when allowed.

    Multi-line strings keep every newline literally and escape everything else a basic
    string must escape; carriage returns are escaped, so CRLF text survives the round trip.
    """
    ml = multiline and "\n" in s
    out = []
    for ch in s:
        if ch == "\n" and ml:
            out.append("\n")
        elif ch == "\t" and ml:
            out.append("\t")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    body = "".join(out)
    # The newline after the opening quotes is trimmed by TOML, so text starting with a newline
    # keeps it.
    return f'"""\n{body}"""' if ml else f'"{body}"'


def _fmt_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _fmt_str(key, multiline=False)


def _fmt(value: Any, *, inline: bool = False) -> str:
    """Format one TOML value (str, int, bool, list of str, str map)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, str):
        return _fmt_str(value, multiline=not inline)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = ", ".join(f"{_fmt_key(k)} = {_fmt(v, inline=True)}" for k, v in value.items())
        return "{ " + items + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_fmt(v, inline=True) for v in value) + "]"
    msg = f"cannot write {value!r} as TOML"  # an invariant: specs hold only the types above
    raise TypeError(msg)


# Key order in the TOML (seed order); fields not listed follow in declaration order.
_KEY_ORDER: dict[type, tuple[str, ...]] = {
    Source: ("name", "format", "path", "schema", "event_time_column", "time_mode", "sql"),
    Window: (
        "kind",
        "duration_ms",
        "hop_ms",
        "gap_ms",
        "event_time_column",
        "time_mode",
        "lateness_ms",
        "group_by",
        "late_data",
        "allowed_lateness_ms",
        "dlq_horizon_ms",
        "max_groups_per_window",
    ),
    Aggregation: ("agg", "column", "mode", "max_distinct_values_per_group", "as_"),
}


def _ordered_fields(obj: Any) -> list[dataclasses.Field[Any]]:
    order = _KEY_ORDER.get(type(obj), ())
    fs = dataclasses.fields(obj)
    return sorted(fs, key=lambda f: order.index(f.name) if f.name in order else len(order))


def _non_default(
    obj: Any, defaults: Mapping[str, Any] | None = None, skip: Sequence[str] = ()
) -> list[tuple[str, Any]]:
    """Return ``(toml key, value)`` for every field of ``obj`` that differs from its default."""
    out = []
    for f in _ordered_fields(obj):
        if f.name in skip:
            continue
        value = getattr(obj, f.name)
        default = (defaults or {}).get(f.name, _field_default(f))
        if default is dataclasses.MISSING or value != default:
            out.append((_toml_key(f.name), value))
    return out


def _table(lines: list[str], header: str, items: Sequence[tuple[str, Any]]) -> None:
    lines += ["", header]
    lines += [f"{_fmt_key(k)} = {_fmt(v)}" for k, v in items]


def _write(p: Pipeline) -> str:
    lines = [f"name = {_fmt(p.name)}"]
    for s in p.sources:
        _table(lines, "[[sources]]", _non_default(s))
    if p.transform_sql is not None:
        _table(lines, "[transform]", [("sql", p.transform_sql)])
    if p.join is not None:
        assert p.left_source is not None and p.right_source is not None
        j = p.join
        defaults = _join_defaults(p.name, p.source(p.left_source), p.source(p.right_source))
        et_now = {f: getattr(j, f) for f in _ET_FIELDS}
        # The three event-time fields are left out together when they are what the sources
        # imply; otherwise each one that is set is written (reading fills nothing then).
        et_implied = all(et_now[f] == defaults[f] for f in _ET_FIELDS)
        items: list[tuple[str, Any]] = [
            ("kind", JOIN_KIND),
            ("left_source", p.left_source),
            ("right_source", p.right_source),
        ]
        for k, v in _non_default(j, {f: v for f, v in defaults.items() if f not in _ET_FIELDS}):
            if k in _ET_FIELDS and (et_implied or v is None):
                continue
            items.append((k, v))
        _table(lines, "[transform.join]", items)
    if p.window is not None:
        w = p.window
        src_name = p.resolved_window_source()
        assert src_name is not None
        items = [("source", p.window_source)] if p.window_source is not None else []
        items += _non_default(
            w, _window_defaults(p.name, p.source(src_name)), skip=("aggregations",)
        )
        _table(lines, "[transform.window]", items)
        for a in w.aggregations:
            _table(lines, "[[transform.window.aggregations]]", _non_default(a))
    _table(lines, "[target]", _non_default(p.target))
    if p.dead_letter is not None:
        _table(lines, "[dead_letter]", _non_default(p.dead_letter))
    spark = _non_default(p.spark)
    if spark:
        _table(lines, "[spark]", spark)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Reading TOML
# --------------------------------------------------------------------------------------------

_KEY_TOKEN = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_DOTTED = rf"{_KEY_TOKEN}(?:\s*\.\s*{_KEY_TOKEN})*"
_AOT_HEADER = re.compile(rf"\s*\[\[\s*({_DOTTED})\s*\]\]")
_HEADER = re.compile(rf"\s*\[\s*({_DOTTED})\s*\]")
_KEY_LINE = re.compile(rf"\s*({_DOTTED})\s*=")
_INLINE_KEY = re.compile(rf"[{{,]\s*({_DOTTED})\s*=")


def _key_parts(dotted: str) -> tuple[str, ...]:
    parts = re.findall(_KEY_TOKEN, dotted)
    out = []
    for part in parts:
        if part[0] in "\"'":
            out.append(str(tomllib.loads(f"k = {part}")["k"]))
        else:
            out.append(part)
    return tuple(out)


class _Locator:
    """Line numbers of tables and keys in TOML text (tomllib reports no positions).

    A small line scanner: it tracks multi-line strings and open brackets so only real
    headers and keys are recorded, numbers ``[[array]]`` tables by occurrence, and records
    the keys of one-line inline tables (``options = { a = "1" }``) on their line.
    """

    def __init__(self, text: str) -> None:
        self.keys: dict[TablePath, int] = {}
        self.tables: dict[TablePath, int] = {}
        counts: dict[TablePath, int] = {}
        section: TablePath = ()
        ml = ""  # the closing delimiter of an open multi-line string
        depth = 0
        for lineno, line in enumerate(text.splitlines(), start=1):
            pos = 0
            if ml:
                end = _find_close(line, 0, ml)
                if end < 0:
                    continue
                ml, pos = "", end
            elif depth == 0:
                m = _AOT_HEADER.match(line)
                if m:
                    parts = _key_parts(m.group(1))
                    idx = counts.get(parts, 0)
                    counts[parts] = idx + 1
                    section = (*parts, idx)
                    self.tables.setdefault(section, lineno)
                    continue
                m = _HEADER.match(line)
                if m:
                    section = _key_parts(m.group(1))
                    self.tables.setdefault(section, lineno)
                    continue
                m = _KEY_LINE.match(line)
                if m:
                    path = (*section, *_key_parts(m.group(1)))
                    self.keys.setdefault(path, lineno)
                    pos = m.end()
                    rest = line[pos:].lstrip()
                    if rest.startswith("{"):
                        for im in _INLINE_KEY.finditer(rest):
                            self.keys.setdefault((*path, *_key_parts(im.group(1))), lineno)
            ml, depth = _scan(line, pos, depth)

    def line(self, table: TablePath, key: str | None = None) -> int | None:
        """Return the line of ``key`` in ``table`` (else of the table itself), if found."""
        if key is not None:
            for path in ((*table, key), (*table, key, 0)):
                if path in self.keys:
                    return self.keys[path]
                if path in self.tables:
                    return self.tables[path]
        # The table itself, else its first line, else its parent's (an inline table in an
        # array, say ``aggregations = [{ ... }]``, has no header of its own).
        while table:
            if table in self.tables:
                return self.tables[table]
            if table in self.keys:
                return self.keys[table]
            n = len(table)
            lines = [v for k, v in (*self.tables.items(), *self.keys.items()) if k[:n] == table]
            if lines:
                return min(lines)
            table = table[:-1]
        return None


def _find_close(line: str, pos: int, delim: str) -> int:
    """Index just past ``delim`` closing a multi-line string in ``line``, or -1."""
    i = pos
    while i < len(line):
        if delim == '"""' and line[i] == "\\":
            i += 2
            continue
        if line.startswith(delim, i):
            end = i + 3
            while line.startswith(delim[0], end) and end - i < 5:  # up to two quotes before
                end += 1
            return end
        i += 1
    return -1


def _scan(line: str, pos: int, depth: int) -> tuple[str, int]:
    """Scan the rest of a line: return (open multi-line delimiter or "", bracket depth)."""
    i = pos
    while i < len(line):
        ch = line[i]
        if ch == "#":
            break
        if line.startswith('"""', i) or line.startswith("'''", i):
            delim = line[i : i + 3]
            end = _find_close(line, i + 3, delim)
            if end < 0:
                return delim, depth
            i = end
            continue
        if ch in "\"'":
            j = i + 1
            while j < len(line) and line[j] != ch:
                j += 2 if ch == '"' and line[j] == "\\" else 1
            i = j + 1
            continue
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth = max(0, depth - 1)
        i += 1
    return "", depth


_SOURCE_KEYS = [f.name for f in dataclasses.fields(Source)]
_TARGET_KEYS = [f.name for f in dataclasses.fields(Target)]
_SPARK_KEYS = [f.name for f in dataclasses.fields(SparkSettings)]
_JOIN_FIELDS = [f.name for f in dataclasses.fields(Join)]
_WINDOW_FIELDS = [f.name for f in dataclasses.fields(Window) if f.name != "aggregations"]
_AGG_KEYS = [_toml_key(f.name) for f in dataclasses.fields(Aggregation)]
# Seed 001 keys that admit one value only in this version; accepted and checked, not kept.
_WINDOW_FIXED = {"crash_recovery": "at_least_once", "on_state_cap": "fail"}
_HINTS = {
    "source_idleness_ms": (
        "Spark has no per-source idleness fallback; to let a quiet source not hold the "
        'watermark back, set [spark] conf = { "spark.sql.streaming.multipleWatermarkPolicy" '
        '= "max" }. '
    ),
    "as_": "the alias is spelled `as` in TOML. ",
}


class _Reader:
    """Turns TOML text into a :class:`Pipeline`, pointing every error at its line."""

    def __init__(self, text: str, path: str | None) -> None:
        self.text = text
        self.path = path
        self._loc: _Locator | None = None

    # Error helpers -------------------------------------------------------------------------------

    @property
    def loc(self) -> _Locator:
        if self._loc is None:
            self._loc = _Locator(self.text)
        return self._loc

    def where(self, table: TablePath, key: str | None = None) -> str:
        line = self.loc.line(table, key)
        if line is None:
            return f" (in {self.path})" if self.path else ""
        return f" (line {line} of {self.path})" if self.path else f" (line {line})"

    def located(self, exc: ConfigError) -> ConfigError:
        """Return ``exc`` with the line it points at (pipeline-level errors), else ``exc``."""
        location = getattr(exc, _WHERE_ATTR, None)
        if location is None:
            return exc
        return ConfigError(f"{exc}{self.where(*location)}")

    def fail(self, table: TablePath, key: str | None, msg: str) -> ConfigError:
        return ConfigError(f"{_label(table)}: {msg}{self.where(table, key)}")

    def build(self, cls: Any, table: TablePath, kwargs: dict[str, Any]) -> Any:
        """``cls(**kwargs)``; its ConfigError re-raised naming the table and the key's line."""
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            msg = str(exc)
            if cls in (Aggregation, Window):
                msg = msg.replace("`as_`", "`as`")
            present = {_toml_key(k) for k in kwargs}
            named = [n for n in re.findall(r"`([A-Za-z_]+)`", msg) if n in present]
            raise self.fail(table, named[0] if named else None, msg) from exc

    def table(self, value: object, table: TablePath, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(table, None, f"must be a table ({what}), got {value!r}")
        return value

    def check_keys(self, data: Mapping[str, Any], table: TablePath, valid: Sequence[str]) -> None:
        for key in data:
            if key in valid:
                continue
            close = difflib.get_close_matches(key, valid, n=1)
            hint = _HINTS.get(key, f"did you mean `{close[0]}`? " if close else "")
            raise self.fail(
                table, key, f"unknown key `{key}`; {hint}valid keys: {', '.join(sorted(valid))}"
            )

    def require(self, data: Mapping[str, Any], table: TablePath, keys: Sequence[str]) -> None:
        for key in keys:
            if key not in data:
                raise self.fail(table, None, f"missing required key `{key}`")

    # Reading ---------------------------------------------------------------------------------

    def pipeline(self) -> Pipeline:
        try:
            doc = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            where = f" in {self.path}" if self.path else ""
            msg = f"invalid TOML{where}: {exc}"
            raise ConfigError(msg) from exc
        self.check_keys(doc, (), ["name", "sources", "transform", "target", "dead_letter", "spark"])
        self.require(doc, (), ["name", "sources", "target"])
        name = doc["name"]
        if not isinstance(name, str):
            raise self.fail((), "name", f"`name` must be a string (got name={name!r})")
        raw_sources = doc["sources"]
        if not isinstance(raw_sources, list) or not all(isinstance(s, dict) for s in raw_sources):
            raise self.fail(
                (),
                "sources",
                "`sources` must be an array of tables: one [[sources]] table per source",
            )
        sources = []
        for i, raw in enumerate(raw_sources):
            table: TablePath = ("sources", i)
            self.check_keys(raw, table, _SOURCE_KEYS)
            self.require(raw, table, ["name", "format"])
            sources.append(self.build(Source, table, dict(raw)))
        try:
            _check_unique_sources(sources)
        except ConfigError as exc:
            raise self.located(exc) from exc
        kwargs: dict[str, Any] = {"name": name, "sources": sources}
        transform = self.table(doc.get("transform", {}), ("transform",), "[transform]")
        self.check_keys(transform, ("transform",), ["sql", "join", "window"])
        if "join" in transform and "window" in transform:
            raise self.fail(
                ("transform",),
                "window",
                "a window and a join in one pipeline: "
                "[transform.join] and [transform.window] "
                "are mutually exclusive; chain two "
                "pipelines to aggregate a join's output",
            )
        if "sql" in transform:
            kwargs["transform_sql"] = transform["sql"]
        if "join" in transform:
            kwargs.update(self.join(name, sources, transform["join"]))
        elif "window" in transform:
            kwargs.update(self.window(name, sources, transform["window"]))
        target = self.table(doc["target"], ("target",), "[target]")
        kwargs["target"] = self.target(target, ("target",))
        if "dead_letter" in doc:
            dl = self.table(doc["dead_letter"], ("dead_letter",), "[dead_letter]")
            kwargs["dead_letter"] = self.target(dl, ("dead_letter",))
        if "spark" in doc:
            spark = self.table(doc["spark"], ("spark",), "[spark]")
            self.check_keys(spark, ("spark",), _SPARK_KEYS)
            kwargs["spark"] = self.build(SparkSettings, ("spark",), spark)
        try:
            return Pipeline(**kwargs)
        except ConfigError as exc:
            raise self.located(exc) from exc

    def target(self, data: dict[str, Any], table: TablePath) -> Target:
        self.check_keys(data, table, _TARGET_KEYS)
        self.require(data, table, ["kind"])
        return self.build(Target, table, dict(data))  # type: ignore[no-any-return]

    def join(self, name: str, sources: list[Source], raw: object) -> dict[str, Any]:
        data = dict(self.table(raw, _JOIN_TABLE, "[transform.join]"))
        self.check_keys(data, _JOIN_TABLE, ["kind", "left_source", "right_source", *_JOIN_FIELDS])
        kind = data.pop("kind", JOIN_KIND)
        if kind != JOIN_KIND:
            raise self.fail(
                _JOIN_TABLE, "kind", f"`kind` must be {JOIN_KIND!r} (got kind={kind!r})"
            )
        self.require(data, _JOIN_TABLE, ["left_source", "right_source"])
        refs = {}
        for key in ("left_source", "right_source"):
            ref = data.pop(key)
            if not isinstance(ref, str):
                raise self.fail(_JOIN_TABLE, key, f"`{key}` must be a source name (got {ref!r})")
            try:
                refs[key] = _resolve_source(sources, ref, _JOIN_TABLE, key)
            except ConfigError as exc:
                raise self.located(exc) from exc
        defaults = _join_defaults(name, refs["left_source"], refs["right_source"])
        if not any(f in data for f in _ET_FIELDS):
            data.update({f: defaults[f] for f in _ET_FIELDS})
        data.setdefault("time_mode", defaults["time_mode"])
        data.setdefault("name", defaults["name"])
        spec = self.build(Join, _JOIN_TABLE, data)
        return {
            "join": spec,
            "left_source": refs["left_source"].name,
            "right_source": refs["right_source"].name,
        }

    def window(self, name: str, sources: list[Source], raw: object) -> dict[str, Any]:
        data = dict(self.table(raw, _WINDOW_TABLE, "[transform.window]"))
        self.check_keys(
            data, _WINDOW_TABLE, ["source", "aggregations", *_WINDOW_FIXED, *_WINDOW_FIELDS]
        )
        for key, only in _WINDOW_FIXED.items():
            if key in data and data.pop(key) != only:
                raise self.fail(
                    _WINDOW_TABLE,
                    key,
                    f"`{key}` must be {only!r} in this version "
                    f"(the other values of seed 001 are reserved)",
                )
        out: dict[str, Any] = {}
        src: Source | None = None
        if "source" in data:
            ref = data.pop("source")
            if not isinstance(ref, str):
                raise self.fail(
                    _WINDOW_TABLE, "source", f"`source` must be a source name (got {ref!r})"
                )
            out["window_source"] = ref
        try:
            src = _window_source(sources, out.get("window_source"))
        except ConfigError as exc:
            raise self.located(exc) from exc
        raw_aggs = data.pop("aggregations", None)
        if raw_aggs is None:
            raise self.fail(
                _WINDOW_TABLE,
                None,
                "missing [[transform.window.aggregations]]: a "
                "window needs at least one aggregation",
            )
        if not isinstance(raw_aggs, list) or not all(isinstance(a, dict) for a in raw_aggs):
            raise self.fail(
                _WINDOW_TABLE,
                "aggregations",
                "`aggregations` must be an array of "
                "tables: one "
                "[[transform.window.aggregations]] each",
            )
        aggs = []
        for i, a in enumerate(raw_aggs):
            table: TablePath = (*_WINDOW_TABLE, "aggregations", i)
            self.check_keys(a, table, _AGG_KEYS)
            self.require(a, table, ["agg", "as"])
            kw = {("as_" if k == "as" else k): v for k, v in a.items()}
            aggs.append(self.build(Aggregation, table, kw))
        for key, value in _window_defaults(name, src).items():
            data.setdefault(key, value)
        self.require(data, _WINDOW_TABLE, ["kind"])
        out["window"] = self.build(Window, _WINDOW_TABLE, {**data, "aggregations": aggs})
        return out
