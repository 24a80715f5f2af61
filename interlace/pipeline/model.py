"""The pipeline model: :class:`Pipeline`, the whole job, and its parts re-exported.

:class:`Pipeline` is a frozen dataclass checked when it is built, part by part (its
:class:`Source`, :class:`Target` and :class:`SparkSettings`, in :mod:`.parts`), then as a whole
(:mod:`interlace.pipeline.validate`; a chain's stages: :mod:`interlace.pipeline.stages`).
Reading and writing TOML live in :mod:`interlace.pipeline.toml`, which builds the pipeline
with the class it is given; the package docstring describes the format.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from interlace.operators.errors import ConfigError
from interlace.operators.join import Join
from interlace.operators.table_aggregate import TableAggregate
from interlace.operators.window import Window
from interlace.pipeline.kinds import JOIN_KIND, JOIN_KINDS, JoinSpec, join_kind
from interlace.pipeline.parts import (
    DEAD_LETTER_TABLE_SUFFIX,
    DEFAULT_CHECKPOINT,
    DEFAULT_DUCKDB_PATH,
    FILE_FORMATS,
    Source,
    SourceFormat,
    SparkSettings,
    Target,
    TargetKind,
)
from interlace.pipeline.stages import Stage, StageRun, stage_pipelines
from interlace.pipeline.toml import read_pipeline, write_pipeline
from interlace.pipeline.validate import (
    AGGREGATE_TABLE,
    JOIN_TABLE,
    WINDOW_TABLE,
    check_unique_sources,
    err,
    label,
    output_columns_of,
    toml_key,
    validate,
)
from interlace.pipeline.values import check_name, check_str, default_table

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
        aggregate: A table aggregation (:class:`~interlace.TableAggregate`, TOML
            ``[transform.aggregate]``) of ``aggregate_source``'s changelog; its output is a
            changelog by group (SEMANTICS §10), which a DuckDB target applies by group.
        aggregate_source: Aggregation only: the source to aggregate (default: the only one).

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
    aggregate: TableAggregate | None = None
    aggregate_source: str | None = None

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
            ("aggregate", (TableAggregate,)),
        ):
            value = getattr(self, fname)
            if value is None and fname in ("dead_letter", "join", "window", "aggregate"):
                continue
            if not isinstance(value, types):
                names = " or ".join(f"{t.__name__}(...)" for t in types)
                raise err((), None, f"`{fname}` must be a {names} (got {value!r})")
        for fname, table in (
            ("left_source", JOIN_TABLE),
            ("right_source", JOIN_TABLE),
            ("window_source", WINDOW_TABLE),
            ("aggregate_source", AGGREGATE_TABLE),
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
            ("aggregate", AGGREGATE_TABLE),
            ("aggregate_source", AGGREGATE_TABLE),
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

    def resolved_aggregate_source(self) -> str | None:
        """Return the table aggregation's source (``aggregate_source``, else the only source)."""
        if self.aggregate is None:
            return None
        if self.aggregate_source is not None:
            return self.aggregate_source
        return self.sources[0].name

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

        The default ``key`` of a duckdb, delta or kafka target: ``(window_start, window_end,
        *group_by)`` for a window under ``late_data="reopen"``; the key columns for a join
        whose output is a changelog
        (:attr:`~interlace.pipeline.kinds.JoinKind.changelog_key`); the group columns for a
        table aggregation (possibly none: one global group); else none.
        """
        if self.stages:
            return self.final_stage().resolved_target()
        t = self.target
        if t.kind not in ("duckdb", "kafka", "delta"):
            return t
        key = t.key
        if key is None and self.window is not None and self.window.late_data == "reopen":
            w = self.window
            key = (w.window_start_column, w.window_end_column, *w.group_by)
        changelog_key = None if self.join is None else join_kind(self.join).changelog_key
        if key is None and self.aggregate is not None:
            key = tuple(self.aggregate.group_by)  # a changelog by group (SEMANTICS §10)
        if key is None and changelog_key is not None:
            key = changelog_key(self.join)  # a changelog is applied by its key (kinds.py)
        if t.kind in ("kafka", "delta"):  # the record key / MERGE key; no table name
            return dataclasses.replace(t, key=key or None)
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
        return read_pipeline(text, path, cls)

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
        return write_pipeline(self)


