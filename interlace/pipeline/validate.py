"""Whole-pipeline validation (SEMANTICS §6) and the errors that point into the TOML file.

:func:`validate` runs when a :class:`~interlace.pipeline.Pipeline` is built: a join naming
a source that does not exist, key columns absent from a source's schema, a target key absent
from the output, a window and a join in one pipeline, and so on. Each problem is raised by
:func:`err`, which labels it with its TOML table and remembers the key it is about, so that
``Pipeline.from_toml`` can add the line number (Python callers never see the key).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from interlace.operators.common.names import DEAD_LETTER_COLUMN, RESERVED_PREFIX
from interlace.operators.errors import ConfigError
from interlace.pipeline.ddl import is_boolean, is_timestamp
from interlace.pipeline.kinds import field_applies, join_kind, time_mode_of, with_dead_letter
from interlace.pipeline.parts import Source

#: A one-operator pipeline (:class:`~.model.Pipeline`), read by attribute: the model imports
#: this module.
PipelineLike = Any

__all__ = [
    "AGGREGATE_TABLE",
    "ET_FIELDS",
    "JOIN_TABLE",
    "WHERE_ATTR",
    "WINDOW_TABLE",
    "TablePath",
    "check_unique_sources",
    "err",
    "label",
    "output_columns_of",
    "resolve_source",
    "toml_key",
    "validate",
    "window_source_of",
]

# Where a pipeline-level error points in the TOML file: (table path, key). from_toml turns
# it into a line number; Python callers never see it.
WHERE_ATTR = "_interlace_toml_where"

TablePath = tuple[str | int, ...]


def err(table: TablePath, key: str | None, msg: str) -> ConfigError:
    """Build a pipeline-level error labelled with its TOML table, remembering where to point."""
    exc = ConfigError(f"{label(table)}: {msg}")
    setattr(exc, WHERE_ATTR, (table, key))
    return exc


def label(table: TablePath) -> str:
    """Name a table path: ``("sources", 1)`` is ``[[sources]] #2``, ``("target",)`` ``[target]``.

    A table inside an array of tables names both: ``("stages", 1, "transform", "window")`` is
    ``[stages.transform.window] of [[stages]] #2``.
    """
    if not table:
        return "top level"
    cut = max((i for i, p in enumerate(table[:-1]) if isinstance(p, int)), default=None)
    if cut is not None:
        outer, inner = table[: cut + 1], table[cut + 1 :]
        own = label((*[p for p in outer if not isinstance(p, int)], *inner))
        return f"{own} of {label(outer)}"
    if isinstance(table[-1], int):
        return f"[[{'.'.join(str(p) for p in table[:-1])}]] #{table[-1] + 1}"
    return f"[{'.'.join(str(p) for p in table)}]"


JOIN_TABLE: TablePath = ("transform", "join")
WINDOW_TABLE: TablePath = ("transform", "window")
AGGREGATE_TABLE: TablePath = ("transform", "aggregate")
ET_FIELDS = ("event_time_column", "left_event_time_column", "right_event_time_column")


def toml_key(field: str) -> str:
    """Return the TOML key of a field (``window_source`` is ``source``, ``as_`` is ``as``)."""
    return {"window_source": "source", "aggregate_source": "source", "transform_sql": "sql",
            "as_": "as"}.get(field, field)


def resolve_source(sources: Sequence[Source], name: str, table: TablePath, key: str) -> Source:
    """Return the source called ``name``; the error points at ``key`` of ``table``."""
    for s in sources:
        if s.name == name:
            return s
    have = ", ".join(repr(s.name) for s in sources)
    raise err(
        table,
        key,
        f"`{key}` names source {name!r} that does not exist (sources: {have}); "
        f"fix the name or add a [[sources]] table with name = {name!r}",
    )


def window_source_of(sources: Sequence[Source], name: str | None,
                     table: TablePath = WINDOW_TABLE) -> Source:
    """Return the window's (or the table aggregation's) source: ``name``, else the only one."""
    if name is not None:
        return resolve_source(sources, name, table, "source")
    if len(sources) != 1:
        have = ", ".join(repr(s.name) for s in sources)
        field = "window_source" if table == WINDOW_TABLE else "aggregate_source"
        raise err(
            table,
            None,
            "`source` is required when the pipeline has more than one "
            f'source (sources: {have}); set source = "..." '
            f"(`{field}` in Python)",
        )
    return sources[0]


def _input_columns(src: Source, time_mode: str, et: str, *, renamed: bool) -> list[str] | None:
    """Return the operator's input columns from ``src`` (None when a SQL pre-stage hides them)."""
    if renamed or src.sql is not None:
        return None
    cols = [c for c, _ in src.ddl_columns()]
    return cols + [et] if time_mode == "processing" else cols


def _check_event_time(
    p: PipelineLike, src: Source, table: TablePath, field: str, et: str, time_mode: str,
    renamed: bool,
) -> None:
    """Check that the operator's time settings agree with its source's and its schema."""
    if src.time_mode != time_mode:
        raise err(
            table,
            "time_mode",
            f"`time_mode`={time_mode!r} disagrees with source "
            f"{src.name!r} (time_mode={src.time_mode!r}); set the same "
            "time_mode on both",
        )
    if renamed or src.sql is not None:
        return  # a SQL pre-stage may rename or synthesize the column; Spark checks it
    if src.event_time_column is not None and src.event_time_column != et:
        raise err(
            table,
            field,
            f"`{field}`={et!r} disagrees with source {src.name!r} "
            f"(event_time_column={src.event_time_column!r}); use the same "
            "column in both, or leave the operator's out to inherit it",
        )
    types = dict(src.ddl_columns())
    if time_mode == "event":
        if et not in types:
            raise err(
                table,
                field,
                f"`{field}` {et!r} is not a column of source {src.name!r} "
                f"(its columns: {list(types)}); fix the name",
            )
        if not is_timestamp(types[et]):
            raise err(
                table,
                field,
                f"`{field}` {et!r} of source {src.name!r} must be a TIMESTAMP "
                f"column (got {types[et]}); convert it in the source's `sql`",
            )
    elif et in types:
        raise err(
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
        raise err(
            table,
            key,
            f"`{key}` names column(s) {missing} absent from {what} (its "
            f"columns: {have}); fix the name or add the column",
        )


def _join_side_columns(p: PipelineLike) -> tuple[list[str] | None, list[str] | None]:
    j = p.join
    assert j is not None and p.left_source is not None and p.right_source is not None
    out = []
    for side, name in (("left", p.left_source), ("right", p.right_source)):
        et = j.side_event_time_column(side)
        assert et is not None
        out.append(_input_columns(p.source(name), time_mode_of(j), et, renamed=False))
    return out[0], out[1]


def output_columns_of(p: PipelineLike) -> list[str] | None:
    """Output columns in order, or None when a join input's columns are unknown."""
    if p.window is not None:
        return list(p.window.output_columns)
    if p.aggregate is not None:
        return list(p.aggregate.output_names())
    j = p.join
    assert j is not None
    left, right = _join_side_columns(p)
    names = join_kind(j).output_columns(j, left, right)
    return None if names is None else with_dead_letter(j, names)


def check_unique_sources(sources: Sequence[Source]) -> None:
    """Raise on the first source whose name an earlier source already has."""
    seen: dict[str, int] = {}
    for i, s in enumerate(sources):
        if s.name in seen:
            raise err(
                ("sources", i),
                "name",
                f"duplicate source name {s.name!r} (also "
                f"{label(('sources', seen[s.name]))}); source "
                "names must be unique",
            )
        seen[s.name] = i


def _check_idle_sources(p: PipelineLike) -> None:
    """A source's ``idle_timeout_ms`` needs a join to read it, and agrees with the join's."""
    for i, src in enumerate(p.sources):
        if src.idle_timeout_ms is None:
            continue
        side = None
        if p.join is not None:
            side = {p.left_source: "left", p.right_source: "right"}.get(src.name)
        if side is None:
            raise err(
                ("sources", i),
                "idle_timeout_ms",
                f"source {src.name!r} has `idle_timeout_ms`, but no join reads it: only an "
                "input of a join is left out of the watermark's minimum when idle (a window "
                "or an aggregation has one input, whose watermark is its own); remove it",
            )
        assert p.join is not None
        field = f"{side}_idle_timeout_ms"
        own = getattr(p.join, field, None)
        if own is not None and own != src.idle_timeout_ms:
            raise err(
                ("sources", i),
                "idle_timeout_ms",
                f"`idle_timeout_ms`={src.idle_timeout_ms} of source {src.name!r} disagrees "
                f"with the join's `{field}`={own}; set one of them",
            )


def validate(p: PipelineLike) -> None:
    """Check the pipeline as a whole; raise the first problem found."""
    check_unique_sources(p.sources)
    if not p.sources:
        raise err((), None, "a pipeline needs at least one [[sources]] table")
    # Exactly one operator.
    given = [t for t, op in (("join", p.join), ("window", p.window),
                             ("aggregate", p.aggregate)) if op is not None]
    if len(given) > 1:
        tables = " and ".join(f"[transform.{t}]" for t in given)
        what = ("a window and a join in one pipeline: " if set(given) == {"join", "window"}
                else "")
        raise err(
            ("transform",),
            None,
            f"{what}{tables} are mutually exclusive: a pipeline runs one operator; chain "
            "them as [[stages]] (docs/chains.md)",
        )
    if not given:
        raise err(
            ("transform",),
            None,
            "the pipeline has no operator: add a [transform.join], a [transform.window] "
            "or a [transform.aggregate] table (`join`, `window` or `aggregate`)",
        )
    _check_idle_sources(p)
    if p.join is not None:
        _validate_join(p)
    elif p.window is not None:
        _validate_window(p)
    else:
        _validate_aggregate(p)
    # Dead letters: a [dead_letter] target exactly when the operator dead-letters.
    op_table = {"join": JOIN_TABLE, "window": WINDOW_TABLE, "aggregate": AGGREGATE_TABLE}[
        given[0]]
    op = p.join if p.join is not None else p.window if p.window is not None else p.aggregate
    assert op is not None
    if op.late_data == "dlq" and p.dead_letter is None:
        raise err(
            op_table,
            "late_data",
            "late_data='dlq' needs a [dead_letter] target for the "
            "dead letters (`dead_letter` in Python); add one, e.g. "
            '[dead_letter] kind = "duckdb"',
        )
    if op.late_data != "dlq" and p.dead_letter is not None:
        raise err(
            ("dead_letter",),
            None,
            f"a [dead_letter] target only receives rows under "
            f"late_data='dlq' (got late_data={op.late_data!r}); "
            'remove it or set late_data = "dlq"',
        )
    if p.dead_letter is not None and p.dead_letter.key is not None:
        raise err(
            ("dead_letter",),
            "key",
            "`key` does not apply to [dead_letter] (dead letters "
            "are appended per micro-batch); remove it",
        )
    # Output columns and the target key.
    names = output_columns_of(p)
    if names is not None:
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            shaped_by = (
                join_kind(p.join).output_fields
                if p.join is not None
                else "`left_prefix`, `right_prefix`, `output_left_columns`, "
                "`output_right_columns`"
            )
            raise err(
                op_table,
                None,
                f"output columns {dupes} appear twice (from {shaped_by}); choose distinct "
                "prefixes or select fewer columns",
            )
        bad = [n for n in names if n.startswith(RESERVED_PREFIX)]
        if bad:
            raise err(
                op_table,
                None,
                f"output columns {bad} use the reserved prefix "
                f"{RESERVED_PREFIX!r}; change the prefix",
            )
    key = p.target.key
    if key is not None and names is not None:
        usable = [n for n in names if n != DEAD_LETTER_COLUMN]
        _check_columns(("target",), "key", key, usable, "the output columns")
    if key is not None and p.join is not None:
        _check_changelog_key(p, key)
    if key is not None and p.aggregate is not None and tuple(key) != tuple(
            p.aggregate.group_by):
        raise err(
            ("target",),
            "key",
            f"`key` {list(key)} is not the table aggregation's group "
            f"({list(p.aggregate.group_by)}, its `group_by`): each change's `version` counts "
            "per group, so the target applies changes by it; remove `key` (it defaults to it)",
        )
    w = p.window
    if w is not None and w.kind == "session" and w.late_data == "reopen" and (
        p.target.kind == "parquet"
    ):
        raise err(
            ("target",),
            "kind",
            "a Parquet target appends every revision, and under late_data = \"reopen\" a "
            "session's bounds move when late rows grow or merge it, so its files cannot "
            'converge to the final sessions; write to kind = "duckdb" (it applies the '
            'convergence rule, docs/targets.md) or use late_data = "drop" / "dlq"',
        )


def _validate_join(p: PipelineLike) -> None:
    j = p.join
    assert j is not None
    for fname, value in (("window_source", p.window_source), ("transform_sql", p.transform_sql)):
        if value is not None:
            table: TablePath = WINDOW_TABLE if fname == "window_source" else ("transform",)
            raise err(
                table,
                toml_key(fname),
                f"`{fname}` ({label(table)} "
                f"{toml_key(fname)}) only applies to a window "
                f"(got {fname}={value!r}); for a join give "
                "each source its own `sql` pre-stage",
            )
    for key in ("left_source", "right_source"):
        if getattr(p, key) is None:
            raise err(
                JOIN_TABLE,
                None,
                f"`{key}` is required: the join reads two sources by "
                f"name (sources: "
                f"{', '.join(repr(s.name) for s in p.sources)})",
            )
    assert p.left_source is not None and p.right_source is not None
    kind = join_kind(j)
    left = resolve_source(p.sources, p.left_source, JOIN_TABLE, "left_source")
    right = resolve_source(p.sources, p.right_source, JOIN_TABLE, "right_source")
    if left.name == right.name:
        raise err(
            JOIN_TABLE,
            "right_source",
            f"`left_source` and `right_source` are both "
            f"{left.name!r}; a {kind.title} needs two "
            f"different sources ({kind.two_sources})",
        )
    for i, s in enumerate(p.sources):
        if s.name not in (left.name, right.name):
            raise err(
                ("sources", i),
                "name",
                f"source {s.name!r} is not read by the join "
                f"(left_source={left.name!r}, "
                f"right_source={right.name!r}); remove it",
            )
    if not kind.processing_time:
        for i, s in enumerate(p.sources):
            if s.time_mode != "event":
                raise err(
                    ("sources", i),
                    "time_mode",
                    f"source {s.name!r} has time_mode={s.time_mode!r}, but the {kind.title} "
                    f'(kind = "{kind.kind}") joins on event time only (a table version is '
                    "valid from its update's event time, SEMANTICS §7); remove `time_mode` "
                    "(or set it to \"event\") and give the source an `event_time_column`",
                )
    left_cols, right_cols = _join_side_columns(p)
    srcs = {"left": (left, left_cols), "right": (right, right_cols)}
    for i, side in enumerate(("left", "right")):
        et = j.side_event_time_column(side)
        assert et is not None
        field = (
            f"{side}_event_time_column"
            if getattr(j, f"{side}_event_time_column") is not None
            else "event_time_column"
        )
        src = srcs[side][0]
        _check_event_time(p, src, JOIN_TABLE, field, et, time_mode_of(j), renamed=False)
        what = f"the {kind.side_labels[i]} source {src.name!r}"
        for fside, fname in kind.column_fields:
            if fside == side and field_applies(j, side, fname):
                value = getattr(j, fname)
                names = [value] if isinstance(value, str) else (value or ())
                _check_columns(JOIN_TABLE, fname, names, srcs[side][1], what)
    for side, fname in kind.boolean_fields:
        column = getattr(j, fname)
        src = srcs[side][0]
        if column is None or src.sql is not None or not field_applies(j, side, fname):
            continue
        typ = dict(src.ddl_columns()).get(column)
        if typ is not None and not is_boolean(typ):
            raise err(
                JOIN_TABLE,
                fname,
                f"`{fname}` {column!r} of source {src.name!r} must be a BOOLEAN column "
                f"(true = delete; got {typ}); declare it BOOLEAN in the source's `schema` or "
                f"derive one in its `sql`, e.g. SELECT *, op = 'd' AS {column} FROM source",
            )


def _check_changelog_key(p: PipelineLike, key: Sequence[str]) -> None:
    """A changelog is applied by the columns it is keyed by; another `key` is refused."""
    j = p.join
    assert j is not None
    changelog_key = join_kind(j).changelog_key
    if changelog_key is None:
        return
    want = changelog_key(j)
    if set(key) != set(want) or len(key) != len(want):
        raise err(
            ("target",),
            "key",
            f"`key` {list(key)} is not the key of the {join_kind(j).title}'s changelog "
            f"({list(want)}, its `left_keys`): each change's `version` counts per that key, "
            "so the target applies changes by it; remove `key` (it defaults to them)",
        )


def _validate_window(p: PipelineLike) -> None:
    w = p.window
    assert w is not None
    for key in ("left_source", "right_source"):
        if getattr(p, key) is not None:
            raise err(
                JOIN_TABLE,
                key,
                f"`{key}` only applies to a join (got {key}={getattr(p, key)!r}); remove it",
            )
    src = window_source_of(p.sources, p.window_source)
    for i, s in enumerate(p.sources):
        if s.name != src.name:
            raise err(
                ("sources", i),
                "name",
                f"source {s.name!r} is not read by the window "
                f"(it aggregates {src.name!r}); remove it",
            )
    renamed = p.transform_sql is not None
    _check_event_time(
        p, src, WINDOW_TABLE, "event_time_column", w.event_time_column, w.time_mode, renamed
    )
    cols = _input_columns(src, w.time_mode, w.event_time_column, renamed=renamed)
    what = f"source {src.name!r}"
    _check_columns(WINDOW_TABLE, "group_by", w.group_by, cols, what)
    for i, a in enumerate(w.aggregations):
        if a.column is not None:
            _check_columns((*WINDOW_TABLE, "aggregations", i), "column", [a.column], cols, what)



def _validate_aggregate(p: PipelineLike) -> None:
    a = p.aggregate
    assert a is not None
    for key in ("left_source", "right_source", "window_source"):
        if getattr(p, key) is not None:
            raise err(AGGREGATE_TABLE, None,
                      f"`{key}` does not apply to a table aggregation (got "
                      f"{key}={getattr(p, key)!r}); remove it")
    src = window_source_of(p.sources, p.aggregate_source, AGGREGATE_TABLE)
    for i, s in enumerate(p.sources):
        if s.name != src.name:
            raise err(("sources", i), "name",
                      f"source {s.name!r} is not read by the table aggregation (it aggregates "
                      f"{src.name!r}); remove it")
    renamed = p.transform_sql is not None
    et = a.event_time_column
    _check_event_time(p, src, AGGREGATE_TABLE, "event_time_column", et, "event", renamed)
    cols = _input_columns(src, "event", et, renamed=renamed)
    what = f"source {src.name!r}"
    _check_columns(AGGREGATE_TABLE, "keys", a.keys, cols, what)
    _check_columns(AGGREGATE_TABLE, "group_by", a.group_by, cols, what)
    if a.tombstone_column is not None:
        _check_columns(AGGREGATE_TABLE, "tombstone_column", [a.tombstone_column], cols, what)
        types = dict(src.ddl_columns())
        if cols is not None and not is_boolean(types[a.tombstone_column]):
            raise err(AGGREGATE_TABLE, "tombstone_column",
                      f"`tombstone_column` {a.tombstone_column!r} of {what} must be BOOLEAN "
                      f"(got {types[a.tombstone_column]}); true marks a delete")
    if a.value_columns is not None:
        _check_columns(AGGREGATE_TABLE, "value_columns", a.value_columns, cols, what)
    for i, g in enumerate(a.aggregations):
        if g.column is not None:
            _check_columns((*AGGREGATE_TABLE, "aggregations", i), "column", [g.column], cols,
                           what)
