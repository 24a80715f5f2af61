"""Chains of operators (SEMANTICS §11): :class:`Stage` and how a chain resolves into stages.

A pipeline with ``stages`` runs one Spark query per stage (Spark runs one
``applyInPandasWithState`` per query). Each stage reads sources or earlier stages by name and
runs one operator; a stage's output reaches the stages that read it through a **channel**
(:mod:`interlace.chain`), which stamps every row with the writing stage's watermark, its
**clock**: the reading stage's Spark watermark follows that clock minus its own
``lateness_ms``. So a stage needs ``lateness_ms`` at least the **lag** of the upstream time
column it reads (``output_lags_ms()`` of the upstream's spec): a smaller one is a config error
naming the minimum, and ``0`` (the default) is raised to it.

Each stage is checked, and later run, as a one-operator :class:`~interlace.pipeline.Pipeline`
of its own (:func:`stage_pipelines`): its inputs that are stages become Parquet sources over
their channel folders, with the columns and types the upstream outputs
(:func:`output_schema`). Every check of a one-operator pipeline then applies to each stage,
and its errors name the stage's TOML table (``[[stages]] #2``, ``[stages.transform.join]``).

The layout on disk, under the chain's checkpoint folder ``C``: ``C/stages/NAME`` is stage
``NAME``'s query checkpoint, ``C/channels/UP/NAME`` (``.../NAME.right`` for a join reading
one stage on both sides) the channel from ``UP`` to ``NAME``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interlace.operators.common.names import EVENT_TIME_OUT, OP_COLUMN, VERSION_COLUMN
from interlace.operators.errors import ConfigError
from interlace.operators.join import Join
from interlace.operators.stream_table import StreamTableJoin
from interlace.operators.table_aggregate import TableAggregate
from interlace.operators.window import Window
from interlace.pipeline.kinds import JOIN_KINDS, JoinSpec, join_kind
from interlace.pipeline.parts import Source, Target
from interlace.pipeline.validate import WHERE_ATTR, TablePath, err, label
from interlace.pipeline.values import check_name, check_str, default_table
from interlace.state.accumulators import decimal_result

#: A pipeline (:class:`~.model.Pipeline`), read by attribute: the model imports this module.
PipelineLike = Any

__all__ = [
    "CHANNELS_FOLDER",
    "STAGES_FOLDER",
    "Stage",
    "StageRun",
    "channel_name",
    "output_schema",
    "stage_inputs",
    "stage_order",
    "stage_pipelines",
]

#: Under the chain's checkpoint folder: each stage's query checkpoint, and the channels.
STAGES_FOLDER, CHANNELS_FOLDER = "stages", "channels"

# The schema of a channel source whose columns only Spark knows (an upstream ``sql``): checked
# by Spark when the stage's query is built, like a source with a ``sql`` pre-stage.
_UNKNOWN_SCHEMA = "unknown STRING"


@dataclass(frozen=True, slots=True)
class Stage:
    """One operator of a chain (a ``[[stages]]`` table; SEMANTICS §11).

    Example:
        >>> from interlace import Aggregation, Join, Window
        >>> paid = Stage(name="paid", left_source="orders", right_source="payments",
        ...              join=Join(left_keys=["order_id"], right_keys=["order_id"], how="left",
        ...                        lower_ms=0, upper_ms=600_000, event_time_column="ts"))
        >>> sessions = Stage(name="sessions", window_source="paid", window=Window(
        ...     kind="session", gap_ms=1_800_000, event_time_column="left_ts",
        ...     group_by=["left_customer"], max_groups_per_window=10_000,
        ...     aggregations=[Aggregation(agg="sum", column="left_amount", as_="amount")]))
        >>> paid.join.output_lags_ms()["left_ts"]
        600000

    Args:
        name: Unique among the pipeline's sources and stages; later stages read it by name.
        join: The stage's join (any :class:`~interlace.pipeline.kinds.JoinSpec`), of
            ``left_source`` and ``right_source``: each names a source or another stage (one
            stage may be both).
        left_source: Join only: the left input, a source or a stage.
        right_source: Join only: the right input, a source or a stage.
        window: The stage's window aggregation, of ``window_source``.
        window_source: Window only: its input, a source or a stage (default: the only
            source, in a chain of one stage).
        transform_sql: Window only (TOML ``[stages.transform] sql``): a stateless Spark SQL
            pre-stage over the window's input, registered as the view ``source``.
        output_sql: A stateless Spark SQL projection of the stage's output, registered as
            the view ``output``, applied before its rows go on (to the channels or the
            target): e.g. ``SELECT *, window_start - INTERVAL 7 DAYS AS week_before FROM
            output``. Time columns it keeps under their own names keep their lag.
        dead_letter: Where the stage's dead letters go; required exactly when its operator
            has ``late_data="dlq"``.
        aggregate: The stage's table aggregation (:class:`~interlace.TableAggregate`) of
            ``aggregate_source``'s changelog (e.g. a table join stage's output).
        aggregate_source: Aggregation only: its input, a source or a stage.

    An operator with its dataclass default name (``"join"`` / ``"window"``) takes the name
    ``PIPELINE.STAGE``, as metrics and the state-cap error show it.
    """

    name: str
    join: JoinSpec | None = None
    left_source: str | None = None
    right_source: str | None = None
    window: Window | None = None
    window_source: str | None = None
    transform_sql: str | None = None
    output_sql: str | None = None
    dead_letter: Target | None = None
    aggregate: TableAggregate | None = None
    aggregate_source: str | None = None

    def __post_init__(self) -> None:
        check_name("name", self.name)
        for fname in ("left_source", "right_source", "window_source", "transform_sql",
                      "output_sql", "aggregate_source"):
            check_str(fname, getattr(self, fname))
        join_types = tuple(k.spec_type for k in JOIN_KINDS.values())
        if self.join is not None and not isinstance(self.join, join_types):
            names = " or ".join(f"{t.__name__}(...)" for t in join_types)
            msg = f"`join` must be a {names} (got {self.join!r})"
            raise ConfigError(msg)
        if self.window is not None and not isinstance(self.window, Window):
            msg = f"`window` must be a Window(...) (got {self.window!r})"
            raise ConfigError(msg)
        if self.aggregate is not None and not isinstance(self.aggregate, TableAggregate):
            msg = f"`aggregate` must be a TableAggregate(...) (got {self.aggregate!r})"
            raise ConfigError(msg)
        given = [op for op in (self.join, self.window, self.aggregate) if op is not None]
        if len(given) != 1:
            msg = (
                f"stage {self.name!r} needs exactly one operator: a `join`, a `window` or an "
                f"`aggregate` (got {'several' if given else 'none'})"
            )
            raise ConfigError(msg)

    @property
    def operator(self) -> str:
        """``"join"``, ``"window"`` or ``"aggregate"``: the stage's operator field."""
        return "join" if self.join is not None else (
            "window" if self.window is not None else "aggregate")

    @property
    def spec(self) -> Any:
        """The stage's operator spec (its join, window or table aggregation)."""
        return getattr(self, self.operator)

    def inputs(self) -> list[tuple[str, str | None]]:
        """Return ``(field, name)`` per input: ``left_source``/``right_source`` or the one."""
        if self.join is not None:
            return [("left_source", self.left_source), ("right_source", self.right_source)]
        if self.aggregate is not None:
            return [("aggregate_source", self.aggregate_source)]
        return [("window_source", self.window_source)]


@dataclass(frozen=True)
class StageRun:
    """One stage resolved for checking and running: a one-operator pipeline and its wiring.

    Attributes:
        stage: The stage as the chain declares it (None: a pipeline of one operator).
        pipeline: The stage as a one-operator pipeline (name ``CHAIN.STAGE``; inputs that are
            stages are Parquet sources over their channels; lateness filled in).
        upstream: Per input that is a stage, its source name in :attr:`pipeline` -> the
            upstream stage's name.
        consumers: The channel names this stage writes, one per input of a later stage
            that reads it (:func:`channel_name`).
        final: Whether this is the stage whose output goes to the chain's target.
    """

    stage: Stage | None
    pipeline: PipelineLike
    upstream: Mapping[str, str]
    consumers: tuple[str, ...]
    final: bool
    index: int = 0

    def located(self, exc: ConfigError, chain: PipelineLike) -> ConfigError:
        """Return an error about :attr:`pipeline` as the chain's, naming the stage's table."""
        if self.stage is None:
            return exc
        return _relabel(exc, self.index, self.pipeline.sources, chain)


def channel_name(consumer: str, field: str, repeated: bool) -> str:
    """Name the channel a stage reads for one input: the stage's name (``.right`` if repeated).

    A join that reads one upstream stage on both sides reads two channels: ``NAME`` (left)
    and ``NAME.right``.
    """
    return f"{consumer}.right" if repeated and field == "right_source" else consumer


def stage_inputs(stage: Stage) -> list[tuple[str, str, str]]:
    """Return ``(field, input name, source name in the stage's pipeline)`` per named input.

    The source name is the input's own, but for a join reading one input on both sides,
    whose right side is ``NAME.right`` (two sources of a one-operator pipeline differ).
    """
    named = [(f, n) for f, n in stage.inputs() if n is not None]
    names = [n for _, n in named]
    repeated = len(names) == 2 and names[0] == names[1]
    return [(f, n, f"{n}.right" if repeated and f == "right_source" else n) for f, n in named]


def _stage_table(i: int) -> TablePath:
    return ("stages", i)


def _relabel(
    exc: ConfigError, i: int, sources: Sequence[Source], chain: PipelineLike
) -> ConfigError:
    """Return a stage's one-operator pipeline error as the chain's, pointing at its table.

    ``[transform...]`` and the top level become the stage's own tables; a real source keeps
    its ``[[sources]]`` table in the chain; ``[target]`` stays (the final stage writes it).
    """
    where = getattr(exc, WHERE_ATTR, None)
    if where is None:
        return err(_stage_table(i), None, str(exc))
    table, key = where
    text = str(exc)
    head = f"{label(table)}: "
    body = text[len(head):] if text.startswith(head) else text
    body = body.replace("[dead_letter]", "[stages.dead_letter]")
    for s in sources:  # an input that is a stage is a channel source of the stage's pipeline
        if all(s.name != own.name for own in chain.sources):
            body = body.replace(f"source {s.name!r}", f"stage {s.name.removesuffix('.right')!r}")
    if table and table[0] == "sources" and len(table) > 1 and isinstance(table[1], int):
        name = sources[table[1]].name
        own = [k for k, s in enumerate(chain.sources) if s.name == name]
        return err(("sources", own[0]) if own else _stage_table(i), key if own else None, body)
    if table == ("target",):
        return err(table, key, body)
    return err((*_stage_table(i), *table), key, body)


def stage_order(p: PipelineLike) -> list[int]:
    """Check the chain's graph and return the stages' indexes in an order that runs them.

    Raises:
        ConfigError: Duplicate names (among sources and stages), an unknown input, a cycle,
            a source no stage reads, or not exactly one final stage (read by no stage).
    """
    stages = tuple(p.stages)
    seen: dict[str, TablePath] = {s.name: ("sources", i) for i, s in enumerate(p.sources)}
    for i, st in enumerate(stages):
        if st.name in seen:
            raise err(_stage_table(i), "name",
                      f"duplicate name {st.name!r} (also {label(seen[st.name])}); sources and "
                      "stages share one namespace: rename one")
        seen[st.name] = _stage_table(i)
    by_name = {st.name: i for i, st in enumerate(stages)}
    sources = {s.name for s in p.sources}
    have = ", ".join(repr(n) for n in [*sources, *by_name])
    read: set[str] = set()
    for i, st in enumerate(stages):
        table = (*_stage_table(i), "transform", "join" if st.join is not None else "window")
        for field, name in st.inputs():
            key = "source" if field == "window_source" else field
            if name is None:
                if st.join is not None:
                    raise err(table, None, f"`{field}` is required: a stage's join reads two "
                                           f"inputs by name (sources and stages: {have})")
                if len(stages) == 1 and len(p.sources) == 1:
                    continue
                raise err(table, None, "`source` is required in a chain: name the window's "
                                       f"input, a source or a stage (sources and stages: {have})")
            if name not in sources and name not in by_name:
                raise err(table, key, f"`{key}` names {name!r}, which is neither a source nor "
                                      f"a stage (sources and stages: {have}); fix the name")
            if name == st.name:
                raise err(table, key, f"stage {st.name!r} reads itself; a stage reads sources "
                                      "and other stages")
            read.add(name)
    order: list[int] = []
    state: dict[int, str] = {}

    def visit(i: int, path: list[str]) -> None:
        if state.get(i) == "done":
            return
        if state.get(i) == "open":
            cycle = " -> ".join([*path[path.index(stages[i].name):], stages[i].name])
            raise err(_stage_table(i), None,
                      f"the stages form a cycle ({cycle}); a stage may only read sources "
                      "and stages that do not read it")
        state[i] = "open"
        for _, name in stages[i].inputs():
            if name in by_name:
                visit(by_name[name], [*path, stages[i].name])
        state[i] = "done"
        order.append(i)

    for i in range(len(stages)):
        visit(i, [])
    for i, s in enumerate(p.sources):
        if s.name not in read and not (len(stages) == 1 and len(p.sources) == 1):
            raise err(("sources", i), "name",
                      f"source {s.name!r} is read by no stage; remove it or read it")
    finals = [st.name for st in stages if st.name not in read]
    if len(finals) != 1:
        raise err((), "stages",
                  f"stages {finals} are read by no other stage; a chain ends in one stage, "
                  "whose output goes to the [target]: read the others, or remove them")
    return order


# --------------------------------------------------------------------------------------------
# Output schemas: what a source or a stage hands the stages that read it
# --------------------------------------------------------------------------------------------

Columns = list[tuple[str, str]]


def _agg_type(agg: str, src: str | None) -> str:
    """The Spark type of an aggregation of a ``src`` column (a window's or a table's)."""
    if agg in ("count", "count_distinct"):
        return "BIGINT"
    decimal = re.fullmatch(r"\s*(?:DEC|DECIMAL|NUMERIC)\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*",
                           (src or "").upper())
    if decimal and agg in ("sum", "avg"):
        p, sc = decimal_result(agg, int(decimal.group(1)), int(decimal.group(2)))
        return f"DECIMAL({p},{sc})"
    if agg == "avg":
        return "DOUBLE"
    assert src is not None
    if agg == "sum":
        return "BIGINT" if src.upper() in ("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT",
                                            "BYTE", "SHORT", "LONG") else "DOUBLE"
    return src  # min, max, first, last


def _window_output(w: Window, cols: Columns) -> Columns:
    types = dict(cols)
    out = [(w.window_start_column, "TIMESTAMP"), (w.window_end_column, "TIMESTAMP")]
    out += [(g, types[g]) for g in w.group_by]
    out += [(a.as_, _agg_type(a.agg, types.get(a.column) if a.column else None))
            for a in w.aggregations]
    if w.late_data == "reopen":
        out += [("revision", "BIGINT"), ("retracted", "BOOLEAN")]
    return out


def _join_output(j: JoinSpec, left: Columns, right: Columns) -> Columns | None:
    """The output columns and types of a join (without ``_dead_letter``), in output order."""
    lt, rt = dict(left), dict(right)
    names = join_kind(j).output_columns(j, [c for c, _ in left], [c for c, _ in right])
    if names is None:
        return None
    if isinstance(j, Join):
        if j.how in ("left_semi", "left_anti"):
            return [(n, lt[n]) for n in names]
        lsel = list(j.output_left_columns) if j.output_left_columns is not None else list(lt)
        types = [lt[c] for c in lsel]
        rsel = list(j.output_right_columns) if j.output_right_columns is not None else list(rt)
        types += [rt[c] for c in rsel]
        return list(zip(names, types, strict=True))
    if isinstance(j, StreamTableJoin):
        values = names[len(left):-1]
        types = [t for _, t in left]
        types += [rt[v[len(j.right_prefix):]] for v in values]
        return list(zip(names, [*types, "TIMESTAMP"], strict=True))
    # The table-table and foreign-key joins: keys, both sides' values, op, event_time, version.
    fixed = {OP_COLUMN: "STRING", EVENT_TIME_OUT: "TIMESTAMP", VERSION_COLUMN: "BIGINT"}
    keys = list(j.left_keys)
    n_left = len([n for n in names[len(keys):] if n.startswith(j.left_prefix)])
    out: Columns = [(k, lt[k]) for k in keys]
    values = names[len(keys):-3]
    for i, n in enumerate(values):
        side_types, prefix = (lt, j.left_prefix) if i < n_left else (rt, j.right_prefix)
        out.append((n, side_types[n[len(prefix):]]))
    out += [(n, fixed[n]) for n in names[-3:]]
    return out


def _aggregate_output(a: TableAggregate, cols: Columns) -> Columns:
    types = dict(cols)
    out = [(g, types[g]) for g in a.group_by]
    out += [(agg.as_, _agg_type(agg.agg, types.get(agg.column) if agg.column else None))
            for agg in a.aggregations]
    return [*out, (OP_COLUMN, "STRING"), (EVENT_TIME_OUT, "TIMESTAMP"),
            (VERSION_COLUMN, "BIGINT")]


def _source_columns(src: Source) -> Columns | None:
    if src.sql is not None:
        return None
    cols = list(src.ddl_columns())
    if src.time_mode == "processing":
        cols.append((src.event_time_column or "event_time", "TIMESTAMP"))
    return cols


def output_schema(p: PipelineLike, name: str) -> Columns | None:
    """Return the columns and Spark types a source or stage of ``p`` hands its readers.

    A stage's are its operator's output columns without ``_dead_letter`` (dead letters go to
    its own target). None where Spark alone knows them: behind a ``sql`` (a source's, a
    window's ``transform_sql``, a stage's ``output_sql``).
    """
    return _schemas(p).get(name)


def _schemas(p: PipelineLike) -> dict[str, Columns | None]:
    out: dict[str, Columns | None] = {s.name: _source_columns(s) for s in p.sources}
    for i in stage_order(p):
        st = p.stages[i]
        ins = {f: out.get(n) if n is not None else out.get(p.sources[0].name)
               for f, n in st.inputs()}
        out[st.name] = None
        if st.output_sql is not None or None in ins.values():
            continue
        try:
            if st.window is not None:
                if st.transform_sql is None:
                    out[st.name] = _window_output(st.window, ins["window_source"] or [])
            elif st.aggregate is not None:
                if st.transform_sql is None:
                    out[st.name] = _aggregate_output(st.aggregate, ins["aggregate_source"] or [])
            else:
                assert st.join is not None
                out[st.name] = _join_output(st.join, ins["left_source"] or [],
                                            ins["right_source"] or [])
        except KeyError:
            pass  # a column the stage names is missing: its own checks say which
    return out


# --------------------------------------------------------------------------------------------
# Stages as one-operator pipelines
# --------------------------------------------------------------------------------------------


def _event_time_field(spec: Any, field: str) -> tuple[str, str]:
    """The event-time column an operator reads from one input, and the field that names it."""
    if field in ("window_source", "aggregate_source"):
        return spec.event_time_column, "event_time_column"
    side = "left" if field == "left_source" else "right"
    own = getattr(spec, f"{side}_event_time_column", None)
    et = spec.side_event_time_column(side)
    return et, (f"{side}_event_time_column" if own is not None else "event_time_column")


def _with_lateness(p: PipelineLike, i: int, stage: Stage, lags: dict[str, dict[str, int]],
                   schemas: Mapping[str, Columns | None]) -> Stage:
    """Check the stage's lateness against the lag of each upstream time column it reads.

    ``lateness_ms`` 0 (the default) below the lag is raised to it; any other value below it is
    an error naming the minimum (SEMANTICS §6, §11).
    """
    spec = stage.spec
    table = (*_stage_table(i), "transform", stage.operator)
    need = 0
    reasons = []
    for field, name in stage.inputs():
        if name not in lags:
            continue  # a source: its own event times set its watermark
        if getattr(spec, "time_mode", "event") == "processing":
            raise err(table, "time_mode",
                      f"stage {stage.name!r} reads stage {name!r} under time_mode='processing'; "
                      "a stage reading a stage runs on the upstream's event time and clock: "
                      "remove `time_mode`")
        et, et_field = _event_time_field(spec, field)
        column_lags = lags[name]
        cols = schemas.get(name)
        if et not in column_lags and cols is not None and et not in dict(cols):
            continue  # no such column: the stage's own checks say so, naming its columns
        if et not in column_lags:
            usable = ", ".join(f"{c!r} (lag {v} ms)" for c, v in column_lags.items()) or "none"
            raise err(table, et_field,
                      f"`{et_field}` {et!r} of stage {name!r} has no bounded lag: its rows can "
                      f"come any time behind that stage's watermark, so no `lateness_ms` keeps "
                      f"them all (SEMANTICS §11); read one of its time columns with a lag: "
                      f"{usable}")
        lag = column_lags[et]
        if lag > need:
            need = lag
        reasons.append(f"{et!r} of stage {name!r} lags {lag} ms")
    if spec.lateness_ms >= need:
        return stage
    if spec.lateness_ms == 0:
        spec = dataclasses.replace(spec, lateness_ms=need)
        return dataclasses.replace(stage, **{stage.operator: spec})
    raise err(table, "lateness_ms",
              f"`lateness_ms`={spec.lateness_ms} is below the lag of the upstream time column "
              f"this stage reads ({'; '.join(reasons)}): the chain would drop rows it delayed "
              f"itself. Set lateness_ms >= {need} (the minimum), or leave it out to get "
              f"exactly that")


def stage_pipelines(p: PipelineLike) -> list[StageRun]:
    """Resolve the chain into one-operator pipelines, in an order that runs them.

    Raises:
        ConfigError: The chain's graph (:func:`stage_order`), a lateness below a lag, or any
            check of a one-operator pipeline, naming the stage's TOML table.
    """
    order = stage_order(p)
    stages = list(p.stages)
    by_name = {st.name: st for st in stages}
    schemas = _schemas(p)
    consumers: dict[str, list[str]] = {st.name: [] for st in stages}
    for st in stages:
        for field, name, source_name in stage_inputs(st):
            if name in consumers:
                consumers[name].append(channel_name(st.name, field, source_name != name))
    lags: dict[str, dict[str, int]] = {}
    runs: list[StageRun] = []
    base = p.checkpoint_path().rstrip("/")
    for i in order:
        stage = _with_lateness(p, i, stages[i], lags, schemas)
        final = not consumers[stage.name]
        srcs: list[Source] = []
        upstream: dict[str, str] = {}
        for field, name, source_name in stage_inputs(stage):
            if name not in by_name:
                srcs.append(p.source(name))
                continue
            cols = schemas[name]
            quoted = [(c.replace("`", "``"), t) for c, t in cols] if cols is not None else None
            channel = channel_name(stage.name, field, source_name != name)
            srcs.append(Source(
                name=source_name, format="parquet",
                path=f"{base}/{CHANNELS_FOLDER}/{name}/{channel}",
                schema=(", ".join(f"`{c}` {t}" for c, t in quoted) if quoted is not None
                        else _UNKNOWN_SCHEMA),
                sql=None if cols is not None else "SELECT * FROM source",
            ))
            upstream[source_name] = name
        if not srcs:  # a one-stage chain's window over the only source
            srcs = list(p.sources)
        renamed = {f: n for f, _, n in stage_inputs(stage)}
        spark = dataclasses.replace(
            p.spark, checkpoint=f"{base}/{STAGES_FOLDER}/{stage.name}")
        target = _final_target(p) if final else Target(kind="console")
        try:
            sub = type(p)(  # the model's Pipeline (it imports this module)
                name=f"{p.name}.{stage.name}",
                sources=srcs,
                target=target,
                join=stage.join,
                left_source=renamed.get("left_source"),
                right_source=renamed.get("right_source"),
                window=stage.window,
                window_source=renamed.get("window_source"),
                transform_sql=stage.transform_sql,
                dead_letter=stage.dead_letter,
                spark=spark,
                aggregate=stage.aggregate,
                aggregate_source=renamed.get("aggregate_source"),
            )
        except ConfigError as exc:
            raise _relabel(exc, i, srcs, p) from exc
        # An output_sql keeps the lag of each time column it keeps under its name (Stage).
        lags[stage.name] = dict(stage.spec.output_lags_ms())
        runs.append(StageRun(stage=stage, pipeline=sub, upstream=upstream,
                             consumers=tuple(consumers[stage.name]), final=final, index=i))
    return runs


def _final_target(p: PipelineLike) -> Target:
    """The chain's target as its final stage writes it: a DuckDB table named after the chain."""
    t = p.target
    if t.kind != "duckdb" or t.table is not None:
        return t
    return dataclasses.replace(t, table=default_table(p.name))
