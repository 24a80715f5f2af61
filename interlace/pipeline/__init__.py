"""Pipelines: named sources, one operator (or a chain of stages) and a target, in Python or TOML.

A :class:`Pipeline` is the whole job as data: its :class:`Source` tables, one operator
(:class:`~interlace.Join`, :class:`~interlace.StreamTableJoin`, :class:`~interlace.TableJoin`,
:class:`~interlace.ForeignKeyJoin` or :class:`~interlace.Window`),
the :class:`Target` it writes, an optional dead-letter target and the :class:`SparkSettings`.
It is validated as a whole when it is built (SEMANTICS §6): a join naming a source that does
not exist, key columns absent from a source's schema, a target key absent from the output, a
window and a join in one pipeline, and so on, all raise :class:`~interlace.ConfigError`
before Spark starts.

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
    kind = "stream_stream_join"   # the default; "stream_table", "table", "foreign_key"
    left_source = "orders"
    right_source = "payments"
    left_keys = ["order_id"]      # ... every field of the kind's spec by its Python name
    ...

    [target]
    kind = "duckdb"

The round trip is lossless: ``Pipeline.from_toml(p.to_toml()) == p``, and ``to_toml`` writes
only what differs from the defaults, in a fixed order. Defaults the TOML leaves out:

* ``[transform.join]`` without ``kind``: ``"stream_stream_join"``. ``to_toml`` always
  writes the kind.
* ``[transform.join]`` / ``[transform.window]`` without ``name``: the pipeline's name. In
  Python too, an operator left with its dataclass default name (``"join"`` / ``"window"``)
  takes the pipeline's name, so metrics and the state-cap error name the pipeline (the
  table joins have no ``name``).
* ``[transform.join]`` without any of ``event_time_column``, ``left_event_time_column``,
  ``right_event_time_column``: each side's source ``event_time_column`` (one shared
  ``event_time_column`` when both sources name the same column). Without ``time_mode``: the
  sources' ``time_mode`` when they agree, else ``"event"`` (the table joins have no
  ``time_mode``: they read event time only, and refuse ``time_mode = "processing"`` sources).
* ``[transform.window]`` without ``event_time_column`` / ``time_mode``: the window source's
  (``"ts"`` / ``"event"`` when the source names none). Without ``source``: the only source.

A source's ``event_time_column`` and ``time_mode`` must agree with the operator reading it
(the event-time column is checked only where no SQL pre-stage can rename it).

The package's modules, one concern each:

* :mod:`.model`: :class:`Pipeline` (and its parts, re-exported).
* :mod:`.parts`: :class:`Source`, :class:`Target`, :class:`SparkSettings`.
* :mod:`.stages`: :class:`Stage`, a chain's stages (``[[stages]]``, SEMANTICS §11,
  docs/chains.md) and how a chain resolves into one-operator pipelines.
* :mod:`.kinds`: the kinds of ``[transform.join]`` (which spec each ``kind`` builds, its
  columns and whether its output is a changelog).
* :mod:`.values`: :class:`FrozenMap` and the checks of single values (names, strings).
* :mod:`.ddl`: :func:`parse_ddl`, Spark DDL schema strings.
* :mod:`.validate`: whole-pipeline validation and errors that point into the TOML.
* :mod:`.toml`: reading and writing TOML (tomllib reads, tomlkit writes).
* :mod:`.positions`: line numbers of TOML tables and keys, for error messages.

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

from interlace.pipeline.ddl import parse_ddl
from interlace.pipeline.model import (
    DEAD_LETTER_TABLE_SUFFIX,
    DEFAULT_CHECKPOINT,
    DEFAULT_DUCKDB_PATH,
    FILE_FORMATS,
    JOIN_KIND,
    Pipeline,
    Source,
    SourceFormat,
    SparkSettings,
    Target,
    TargetKind,
)
from interlace.pipeline.stages import Stage
from interlace.pipeline.values import FrozenMap

__all__ = [
    "DEAD_LETTER_TABLE_SUFFIX",
    "DEFAULT_CHECKPOINT",
    "DEFAULT_DUCKDB_PATH",
    "FILE_FORMATS",
    "JOIN_KIND",
    "FrozenMap",
    "Pipeline",
    "Source",
    "SourceFormat",
    "SparkSettings",
    "Stage",
    "Target",
    "TargetKind",
    "parse_ddl",
]
