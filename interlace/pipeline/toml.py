r"""Pipelines as TOML: :func:`read_pipeline` and :func:`write_pipeline`.

Reading: tomllib parses the text and is the authority on syntax (its errors carry the line
and column); every table and key is then checked against the model, and every error names
its table, its key and the key's line. The lines come from
:class:`~interlace.pipeline.positions.Positions` (a line scanner: its docstring says why not
tomlkit), computed only when an error needs one.

Writing: a tomlkit document holding only what differs from the defaults, in a fixed order
(the package docstring). tomlkit escapes every string and key. One departure: a string with
a newline (a SQL pre-stage, say) is written as a multi-line basic string built from
tomlkit's *single-line* escaping, with each ``\n`` escape turned back into a line break
and each ``\t`` into a tab, after the opening quotes' trimmed newline. tomlkit's own
multi-line strings are not lossless, measured with tomlkit 0.13.0, 0.14.0 and 0.15.2 (the
versions pyproject.toml allows): a CRLF is written raw and tomllib reads it back as LF
(all three), a bare CR is written raw, which is invalid TOML, and a leading newline is
trimmed away on reading (0.13 and 0.14). ``test_any_string_survives_the_toml_writer`` fails
on each.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import tomlkit
from tomlkit.items import Item, String, StringType, Table, Trivia

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with the tomli backport
    import tomli as tomllib

from interlace.operators.errors import ConfigError
from interlace.operators.table_aggregate import TableAggregate
from interlace.operators.window import Aggregation, Window
from interlace.pipeline.kinds import JOIN_KIND, JOIN_KINDS, join_kind, kinds_phrase
from interlace.pipeline.parts import Source, SparkSettings, Target
from interlace.pipeline.positions import Positions
from interlace.pipeline.stages import Stage
from interlace.pipeline.validate import (
    AGGREGATE_TABLE,
    ET_FIELDS,
    JOIN_TABLE,
    WHERE_ATTR,
    WINDOW_TABLE,
    TablePath,
    check_unique_sources,
    label,
    resolve_source,
    toml_key,
    window_source_of,
)

__all__ = ["locate", "read_pipeline", "write_pipeline"]

_P = TypeVar("_P")
#: A pipeline (:class:`~.model.Pipeline`): read by attribute, so this module needs no import of
#: the model, which imports it.
PipelineLike = Any


def read_pipeline(text: str, path: str | None, pipeline_type: type[_P]) -> _P:
    """Build a pipeline from TOML text (:meth:`Pipeline.from_toml <.model.Pipeline.from_toml>`).

    Args:
        text: The TOML document.
        path: The file it came from, for error messages.
        pipeline_type: The class to build, :class:`~.model.Pipeline` (which imports this
            module, so this one takes it as an argument).

    Raises:
        ConfigError: Invalid TOML or an invalid pipeline, naming table, key and line.

    """
    return _Reader(text, path).pipeline(pipeline_type)


def locate(exc: ConfigError, text: str, path: str | None = None) -> ConfigError:
    """Return a pipeline-level error with the line it points at in ``text`` (else ``exc``).

    For errors raised by :func:`~interlace.pipeline.validate.err` after the pipeline was
    read (``interlace.preflight``'s checks).
    """
    return _Reader(text, path).located(exc)


def join_defaults(pipeline_name: str, left: Source | None, right: Source | None) -> dict[str, Any]:
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


def window_defaults(pipeline_name: str, src: Source | None) -> dict[str, Any]:
    """Return what [transform.window] means when it leaves a key out (module docstring)."""
    out: dict[str, Any] = {"name": pipeline_name}
    if src is not None:
        out["time_mode"] = src.time_mode
        if src.event_time_column is not None:
            out["event_time_column"] = src.event_time_column
    return out


def aggregate_defaults(src: Source | None) -> dict[str, Any]:
    """Return what [transform.aggregate] means when it leaves a key out: the source's time."""
    if src is not None and src.event_time_column is not None:
        return {"event_time_column": src.event_time_column}
    return {}


def _field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------

# A backslash escape of a tomlkit single-line basic string (``\\`` is one, so ``\\n`` is a
# backslash and an ``n``, not a newline).
_ESCAPE = re.compile(r"\\.")
_LITERAL_IN_MULTILINE = {"\\n": "\n", "\\t": "\t"}


def _string(s: str, *, multiline: bool) -> String:
    """Return a TOML basic string, multi-line for text with newlines when allowed.

    Multi-line strings keep every newline and tab literally and escape everything else a
    basic string must escape (carriage returns too, so CRLF text survives the round trip;
    the module docstring says why this is not tomlkit's own multi-line form).
    """
    single = tomlkit.string(s)
    if not (multiline and "\n" in s):
        return single
    body = _ESCAPE.sub(
        lambda m: _LITERAL_IN_MULTILINE.get(m.group(), m.group()), single.as_string()[1:-1]
    )
    # TOML trims the newline after the opening quotes, so text starting with one keeps it.
    return String(StringType.MLB, s, "\n" + body, Trivia())


def _value(value: Any, *, inline: bool = False) -> Item:
    """Return one TOML value (str, int, bool, list of str, str map) as a tomlkit item."""
    if isinstance(value, bool):
        return tomlkit.item(value)
    if isinstance(value, int):  # 60_000, not 60000: durations read better grouped
        return tomlkit.value(f"{value:_}" if abs(value) >= 10_000 else str(value))
    if isinstance(value, str):
        return _string(value, multiline=not inline)
    if isinstance(value, Mapping):
        table = tomlkit.inline_table()
        if value:  # { a = "1" }, padded inside the braces
            table.append(None, tomlkit.ws(" "))
            for k, v in value.items():
                table.append(k, _value(v, inline=True))
            table.append(None, tomlkit.ws(" "))
        return table
    if isinstance(value, list | tuple):
        array = tomlkit.array()
        array.extend(_value(v, inline=True) for v in value)
        return array
    msg = f"cannot write {value!r} as TOML"  # an invariant: specs hold only the types above
    raise TypeError(msg)


# Key order in the TOML (seed order); fields not listed follow in declaration order.
_KEY_ORDER: dict[type, tuple[str, ...]] = {
    Source: ("name", "format", "path", "schema", "event_time_column", "time_mode", "sql",
             "idle_timeout_ms"),
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
            out.append((toml_key(f.name), value))
    return out


def _table(items: Sequence[tuple[str, Any]], *, super_table: bool = False) -> Table:
    table = tomlkit.table(is_super_table=super_table)
    for k, v in items:
        table.add(k, _value(v))
    return table


def _join_table(j: Any, left: str, right: str, default_name: str,
                source_of: Any) -> Table:
    """The ``[transform.join]`` table of a join reading ``left`` and ``right``."""
    defaults = join_defaults(default_name, source_of(left), source_of(right))
    et_now = {f: getattr(j, f) for f in ET_FIELDS}
    # The three event-time fields are left out together when they are what the sources
    # imply; otherwise each one that is set is written (reading fills nothing then).
    et_implied = all(et_now[f] == defaults[f] for f in ET_FIELDS)
    items: list[tuple[str, Any]] = [
        ("kind", join_kind(j).kind),  # also the default one: files always say which
        ("left_source", left),
        ("right_source", right),
    ]
    for k, v in _non_default(j, {f: v for f, v in defaults.items() if f not in ET_FIELDS}):
        if k in ET_FIELDS and (et_implied or v is None):
            continue
        items.append((k, v))
    return _table(items)


def _window_table(w: Window, source: str | None, src: Source | None, default_name: str) -> Table:
    """The ``[transform.window]`` table (with its aggregations) of a window of ``source``."""
    items = [("source", source)] if source is not None else []
    items += _non_default(w, window_defaults(default_name, src), skip=("aggregations",))
    return _with_aggregations(_table(items), w.aggregations)


def _with_aggregations(table: Table, aggregations: Sequence[Aggregation]) -> Table:
    """``table`` with its ``[[...aggregations]]`` array of tables added last."""
    aot = tomlkit.aot()
    for a in aggregations:
        aot.append(_table(_non_default(a)))
    table.add("aggregations", aot)
    return table


def _aggregate_table(a: TableAggregate, source: str | None, src: Source | None) -> Table:
    """The ``[transform.aggregate]`` table (with its aggregations) of ``source``."""
    items = [("source", source)] if source is not None else []
    items += [("keys", list(a.keys)), ("group_by", list(a.group_by))]
    items += _non_default(a, aggregate_defaults(src),
                          skip=("aggregations", "keys", "group_by"))
    return _with_aggregations(_table(items), a.aggregations)


def _transform_table(sql: str | None) -> Table:
    return _table([("sql", sql)] if sql is not None else [], super_table=sql is None)


def _stage_table(p: PipelineLike, st: Stage) -> Table:
    """One ``[[stages]]`` table: its name, projection, operator and dead-letter target."""
    sources = {s.name: s for s in p.sources}
    default_name = f"{p.name}.{st.name}"
    items: list[tuple[str, Any]] = [("name", st.name)]
    if st.output_sql is not None:
        items.append(("output_sql", st.output_sql))
    table = _table(items)
    transform = _transform_table(st.transform_sql)
    if st.join is not None:
        assert st.left_source is not None and st.right_source is not None
        transform.add("join", _join_table(st.join, st.left_source, st.right_source,
                                          default_name, sources.get))
    if st.window is not None:
        src = sources.get(st.window_source) if st.window_source is not None else (
            p.sources[0] if len(p.sources) == 1 else None)
        transform.add("window", _window_table(st.window, st.window_source, src, default_name))
    if st.aggregate is not None:
        src = sources.get(st.aggregate_source) if st.aggregate_source is not None else (
            p.sources[0] if len(p.sources) == 1 else None)
        transform.add("aggregate", _aggregate_table(st.aggregate, st.aggregate_source, src))
    table.add("transform", transform)
    if st.dead_letter is not None:
        table.add("dead_letter", _table(_non_default(st.dead_letter)))
    return table


def write_pipeline(p: PipelineLike) -> str:
    """Return ``p`` as TOML (:meth:`Pipeline.to_toml <.model.Pipeline.to_toml>`)."""
    doc = tomlkit.document()
    doc.add("name", _value(p.name))
    sources = tomlkit.aot()
    for s in p.sources:
        sources.append(_table(_non_default(s)))
    doc.add("sources", sources)
    if p.stages:
        stages = tomlkit.aot()
        for st in p.stages:
            stages.append(_stage_table(p, st))
        doc.add("stages", stages)
    else:
        transform = _transform_table(p.transform_sql)
        if p.join is not None:
            assert p.left_source is not None and p.right_source is not None
            transform.add("join", _join_table(p.join, p.left_source, p.right_source, p.name,
                                              p.source))
        if p.window is not None:
            src_name = p.resolved_window_source()
            assert src_name is not None
            transform.add("window", _window_table(p.window, p.window_source,
                                                  p.source(src_name), p.name))
        if p.aggregate is not None:
            src_name = p.resolved_aggregate_source()
            assert src_name is not None
            transform.add("aggregate", _aggregate_table(p.aggregate, p.aggregate_source,
                                                        p.source(src_name)))
        doc.add("transform", transform)
    doc.add("target", _table(_non_default(p.target)))
    if p.dead_letter is not None:
        doc.add("dead_letter", _table(_non_default(p.dead_letter)))
    spark = _non_default(p.spark)
    if spark:
        doc.add("spark", _table(spark))
    return doc.as_string()


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

_SOURCE_KEYS = [f.name for f in dataclasses.fields(Source)]
_TARGET_KEYS = [f.name for f in dataclasses.fields(Target)]
_SPARK_KEYS = [f.name for f in dataclasses.fields(SparkSettings)]
_WINDOW_FIELDS = [f.name for f in dataclasses.fields(Window) if f.name != "aggregations"]
_AGG_KEYS = [toml_key(f.name) for f in dataclasses.fields(Aggregation)]
_AGGREGATE_FIELDS = [f.name for f in dataclasses.fields(TableAggregate)
                     if f.name != "aggregations"]
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
        self._loc: Positions | None = None

    # Error helpers -------------------------------------------------------------------------------

    @property
    def loc(self) -> Positions:
        if self._loc is None:
            self._loc = Positions(self.text)
        return self._loc

    def where(self, table: TablePath, key: str | None = None) -> str:
        line = self.loc.line(table, key)
        if line is None:
            return f" (in {self.path})" if self.path else ""
        return f" (line {line} of {self.path})" if self.path else f" (line {line})"

    def located(self, exc: ConfigError) -> ConfigError:
        """Return ``exc`` with the line it points at (pipeline-level errors), else ``exc``."""
        location = getattr(exc, WHERE_ATTR, None)
        if location is None:
            return exc
        return ConfigError(f"{exc}{self.where(*location)}")

    def fail(self, table: TablePath, key: str | None, msg: str) -> ConfigError:
        return ConfigError(f"{label(table)}: {msg}{self.where(table, key)}")

    def build(self, cls: Any, table: TablePath, kwargs: dict[str, Any]) -> Any:
        """``cls(**kwargs)``; its ConfigError re-raised naming the table and the key's line."""
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            msg = str(exc)
            if cls in (Aggregation, Window):
                msg = msg.replace("`as_`", "`as`")
            present = {toml_key(k) for k in kwargs}
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

    def pipeline(self, pipeline_type: type[_P]) -> _P:
        try:
            doc = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            where = f" in {self.path}" if self.path else ""
            msg = f"invalid TOML{where}: {exc}"
            raise ConfigError(msg) from exc
        self.check_keys(
            doc, (), ["name", "sources", "stages", "transform", "target", "dead_letter", "spark"]
        )
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
            check_unique_sources(sources)
        except ConfigError as exc:
            raise self.located(exc) from exc
        kwargs: dict[str, Any] = {"name": name, "sources": sources}
        transform = self.table(doc.get("transform", {}), ("transform",), "[transform]")
        self.check_keys(transform, ("transform",), ["sql", "join", "window", "aggregate"])
        ops = [k for k in ("join", "window", "aggregate") if k in transform]
        if len(ops) > 1:
            what = ("a window and a join in one pipeline: " if set(ops) == {"join", "window"}
                    else "")
            raise self.fail(
                ("transform",),
                ops[1],
                f"{what}{' and '.join(f'[transform.{k}]' for k in ops)} are mutually "
                "exclusive: a pipeline runs one operator; chain them as [[stages]] "
                "(docs/chains.md)",
            )
        if "sql" in transform:
            kwargs["transform_sql"] = transform["sql"]
        if "join" in transform:
            kwargs.update(self.join(name, sources, transform["join"]))
        elif "window" in transform:
            kwargs.update(self.window(name, sources, transform["window"]))
        elif "aggregate" in transform:
            kwargs.update(self.aggregate(sources, transform["aggregate"]))
        if "stages" in doc:
            kwargs["stages"] = self.stages(name, sources, doc["stages"])
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
            return pipeline_type(**kwargs)
        except ConfigError as exc:
            raise self.located(exc) from exc

    def target(self, data: dict[str, Any], table: TablePath) -> Target:
        self.check_keys(data, table, _TARGET_KEYS)
        self.require(data, table, ["kind"])
        return self.build(Target, table, dict(data))  # type: ignore[no-any-return]

    def join(self, name: str, sources: list[Source], raw: object,
             prefix: TablePath = ()) -> dict[str, Any]:
        """Read ``[transform.join]`` (under ``prefix``: a stage's, whose inputs may be stages)."""
        jt: TablePath = (*prefix, *JOIN_TABLE)
        data = dict(self.table(raw, jt, "[transform.join]"))
        raw_kind = data.pop("kind", JOIN_KIND)
        kind = JOIN_KINDS.get(raw_kind) if isinstance(raw_kind, str) else None
        if kind is None:
            raise self.fail(
                jt,
                "kind",
                f"`kind` must be {kinds_phrase()} (got kind={raw_kind!r}); leave it out for a "
                "stream-stream join",
            )
        fields = kind.field_names
        for key in data:
            other = [k.kind for k in JOIN_KINDS.values() if k is not kind and key in k.field_names]
            if key not in fields and other:
                kinds = " or ".join(repr(k) for k in other)
                raise self.fail(
                    jt,
                    key,
                    f"`{key}` is a field of kind = {kinds}, not of kind = {kind.kind!r} "
                    f"(the {kind.title}); remove it, or set kind = {kinds}",
                )
        self.check_keys(data, jt, ["kind", "left_source", "right_source", *fields])
        self.require(data, jt, ["left_source", "right_source", *kind.required_fields])
        refs: dict[str, Source | None] = {}
        names = {}
        for key in ("left_source", "right_source"):
            ref = data.pop(key)
            if not isinstance(ref, str):
                raise self.fail(jt, key, f"`{key}` must be a source name (got {ref!r})")
            names[key] = ref
            if prefix:  # a stage's input: a source, else a stage (or unknown: the chain says)
                refs[key] = next((s for s in sources if s.name == ref), None)
                continue
            try:
                refs[key] = resolve_source(sources, ref, jt, key)
            except ConfigError as exc:
                raise self.located(exc) from exc
        defaults = join_defaults(name, refs["left_source"], refs["right_source"])
        if not any(f in data for f in ET_FIELDS):
            data.update({f: defaults[f] for f in ET_FIELDS})
        for key in ("time_mode", "name"):  # the table joins have neither
            if key in fields:
                data.setdefault(key, defaults[key])
        spec = self.build(kind.spec_type, jt, data)
        return {"join": spec, **names}

    def window(self, name: str, sources: list[Source], raw: object,
               prefix: TablePath = ()) -> dict[str, Any]:
        """Read ``[transform.window]`` (under ``prefix``: a stage's, whose input may be a stage)."""
        wt: TablePath = (*prefix, *WINDOW_TABLE)
        data = dict(self.table(raw, wt, "[transform.window]"))
        self.check_keys(
            data, wt, ["source", "aggregations", *_WINDOW_FIXED, *_WINDOW_FIELDS]
        )
        for key, only in _WINDOW_FIXED.items():
            if key in data and data.pop(key) != only:
                raise self.fail(
                    wt,
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
                    wt, "source", f"`source` must be a source name (got {ref!r})"
                )
            out["window_source"] = ref
        ref = out.get("window_source")
        if prefix:  # a stage's input: a source, else a stage (or unknown: the chain says)
            by_name = {s.name: s for s in sources}
            src = by_name.get(ref) if ref is not None else (
                sources[0] if len(sources) == 1 else None)
        else:
            try:
                src = window_source_of(sources, ref)
            except ConfigError as exc:
                raise self.located(exc) from exc
        aggs = self.aggregations(wt, data.pop("aggregations", None), "transform.window",
                                 "window")
        for key, value in window_defaults(name, src).items():
            data.setdefault(key, value)
        self.require(data, wt, ["kind"])
        out["window"] = self.build(Window, wt, {**data, "aggregations": aggs})
        return out

    def aggregations(self, table: TablePath, raw_aggs: object, what: str,
                     operator: str) -> list[Aggregation]:
        """Read an operator's ``[[WHAT.aggregations]]`` array of tables."""
        if raw_aggs is None:
            raise self.fail(table, None, f"missing [[{what}.aggregations]]: a {operator} needs "
                                         "at least one aggregation")
        if not isinstance(raw_aggs, list) or not all(isinstance(a, dict) for a in raw_aggs):
            raise self.fail(table, "aggregations", "`aggregations` must be an array of tables: "
                                                   f"one [[{what}.aggregations]] each")
        aggs = []
        for i, a in enumerate(raw_aggs):
            at: TablePath = (*table, "aggregations", i)
            self.check_keys(a, at, _AGG_KEYS)
            self.require(a, at, ["agg", "as"])
            kw = {("as_" if k == "as" else k): v for k, v in a.items()}
            aggs.append(self.build(Aggregation, at, kw))
        return aggs

    def aggregate(self, sources: list[Source], raw: object,
                  prefix: TablePath = ()) -> dict[str, Any]:
        """Read ``[transform.aggregate]`` (under ``prefix``: a stage's)."""
        at: TablePath = (*prefix, *AGGREGATE_TABLE)
        data = dict(self.table(raw, at, "[transform.aggregate]"))
        self.check_keys(data, at, ["source", "aggregations", *_AGGREGATE_FIELDS])
        self.require(data, at, ["keys", "group_by"])
        out: dict[str, Any] = {}
        ref = data.pop("source", None)
        if ref is not None and not isinstance(ref, str):
            raise self.fail(at, "source", f"`source` must be a source name (got {ref!r})")
        if ref is not None:
            out["aggregate_source"] = ref
        if prefix:
            by_name = {s.name: s for s in sources}
            src = by_name.get(ref) if ref is not None else (
                sources[0] if len(sources) == 1 else None)
        else:
            try:
                src = window_source_of(sources, ref, AGGREGATE_TABLE)
            except ConfigError as exc:
                raise self.located(exc) from exc
        aggs = self.aggregations(at, data.pop("aggregations", None), "transform.aggregate",
                                 "table aggregation")
        for key, value in aggregate_defaults(src).items():
            data.setdefault(key, value)
        out["aggregate"] = self.build(TableAggregate, at, {**data, "aggregations": aggs})
        return out

    def stages(self, name: str, sources: list[Source], raw: object) -> list[Stage]:
        """Read the ``[[stages]]`` tables: each a name, an operator, and optional extras."""
        if not isinstance(raw, list) or not all(isinstance(s, dict) for s in raw):
            raise self.fail((), "stages", "`stages` must be an array of tables: one [[stages]] "
                                          "table per stage")
        out = []
        for i, st in enumerate(raw):
            table: TablePath = ("stages", i)
            self.check_keys(st, table, ["name", "transform", "output_sql", "dead_letter"])
            self.require(st, table, ["name", "transform"])
            kwargs: dict[str, Any] = {k: st[k] for k in ("name", "output_sql") if k in st}
            op_name = f"{name}.{st['name']}"
            transform = self.table(st["transform"], (*table, "transform"),
                                   "[stages.transform]")
            self.check_keys(transform, (*table, "transform"),
                            ["sql", "join", "window", "aggregate"])
            ops = [k for k in ("join", "window", "aggregate") if k in transform]
            if len(ops) > 1:
                raise self.fail((*table, "transform"), ops[1],
                                "a stage runs one operator: "
                                f"{' and '.join(f'[stages.transform.{k}]' for k in ops)} are "
                                "mutually exclusive; make two stages, the second reading the "
                                "first")
            if "sql" in transform:
                kwargs["transform_sql"] = transform["sql"]
            if "join" in transform:
                kwargs.update(self.join(op_name, sources, transform["join"], table))
            elif "window" in transform:
                kwargs.update(self.window(op_name, sources, transform["window"], table))
            elif "aggregate" in transform:
                kwargs.update(self.aggregate(sources, transform["aggregate"], table))
            if "dead_letter" in st:
                dl = self.table(st["dead_letter"], (*table, "dead_letter"),
                                "[stages.dead_letter]")
                kwargs["dead_letter"] = self.target(dl, (*table, "dead_letter"))
            out.append(self.build(Stage, table, kwargs))
        return out
