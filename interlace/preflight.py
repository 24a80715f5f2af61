"""Checks before a run: what Spark would reject, or silently get wrong, once it starts.

:func:`preflight` reads a pipeline file like :meth:`interlace.pipeline.Pipeline.load`, then
checks what can be checked without Spark: source paths exist, schema DDL types are Spark SQL
types, aggregated columns have the right types, join key types agree, ``[spark] master`` is
a master URL. ``interlace validate`` and ``interlace run`` (before Spark starts) call it.
Errors point at the TOML line like the pipeline's own validation (docs/cli.md).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable

from interlace.operators.errors import ConfigError
from interlace.pipeline import FILE_FORMATS, Pipeline, Source
from interlace.pipeline.ddl import ddl_column, top_level_split
from interlace.pipeline.kinds import join_kind, time_mode_of
from interlace.pipeline.toml import locate
from interlace.pipeline.validate import AGGREGATE_TABLE, JOIN_TABLE, WINDOW_TABLE, TablePath, err

__all__ = ["preflight"]

_INTEGRAL_TYPES = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
_FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE"})
_STRING_TYPES = frozenset({"STRING", "VARCHAR", "CHAR"})
_UNORDERED_TYPES = frozenset({"ARRAY", "MAP", "STRUCT", "VARIANT"})
# Spark's spellings of one type, as the canonical name.
_TYPE_SYNONYMS = {
    "BYTE": "TINYINT",
    "SHORT": "SMALLINT",
    "INTEGER": "INT",
    "LONG": "BIGINT",
    "REAL": "FLOAT",
    "DEC": "DECIMAL",
    "NUMERIC": "DECIMAL",
    "CHARACTER": "CHAR",
    "TIMESTAMP_LTZ": "TIMESTAMP",
}
_SPARK_TYPES = (
    *_INTEGRAL_TYPES,
    *_FLOAT_TYPES,
    *_STRING_TYPES,
    *_UNORDERED_TYPES,
    *_TYPE_SYNONYMS,
    *("DECIMAL", "BOOLEAN", "BINARY", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "INTERVAL"),
    *("TIME", "VOID"),
)
# Type names of other systems, as the Spark type that holds the same values.
_FOREIGN_TYPES = {
    "DATETIME": "TIMESTAMP",
    "TEXT": "STRING",
    "STR": "STRING",
    "UUID": "STRING",
    "JSON": "STRING",
    "BOOL": "BOOLEAN",
    "NUMBER": "DECIMAL(p,s)",
    "INT32": "INT",
    "INT64": "BIGINT",
    "FLOAT32": "FLOAT",
    "FLOAT64": "DOUBLE",
    "BYTES": "BINARY",
    "BLOB": "BINARY",
}
_TYPE_HELP = (
    "Spark SQL types are STRING, BOOLEAN, INT, BIGINT, DOUBLE, DECIMAL(p,s), DATE, "
    "TIMESTAMP, BINARY, ARRAY<t>, MAP<k, v>, STRUCT<name: t, ...>"
)
_MASTER_RE = re.compile(
    r"local(\[(\d+|\*)(\s*,\s*\d+)?\])?"
    r"|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]"
    r"|spark://[^\s/,]+:\d+(,[^\s/,]+:\d+)*"
    r"|yarn"
    r"|k8s://\S+"
)
_GLOB_CHARS = "{}[]*?\\"


def preflight(
    path: str | os.PathLike[str],
    *,
    base: str | os.PathLike[str] | None = None,
    on_missing_path: Callable[[str], None] | None = None,
) -> Pipeline:
    """Load a pipeline file and check what Spark would reject or get wrong once it runs.

    ``interlace validate`` and ``interlace run`` (before Spark starts) call this. On top of
    :meth:`Pipeline.load`, with no Spark:

    * a file source's ``path`` exists, resolved as the runner resolves it (a relative path
      against ``base``, default the working directory); globs and URLs are Spark's to check;
    * every type in a ``schema`` is a Spark SQL type (with a suggestion when it is not);
    * ``sum`` / ``avg`` aggregate an integer, floating-point or decimal column, ``min`` / ``max`` an
      orderable one (not ARRAY, MAP, STRUCT, VARIANT);
    * each pair of join keys compares exactly: the same type, integers with integers or
      decimals, strings with strings (a BIGINT key against a DOUBLE key is refused);
    * ``[spark] master`` is a Spark master URL.

    Columns behind a ``sql`` pre-stage are known only to Spark and are not checked.

    Args:
        path: The TOML file.
        base: Folder relative source paths resolve against (default: the working directory).
        on_missing_path: Called with the message of each missing source path instead of
            raising it (``interlace validate`` warns: the data may not be there yet).

    Returns:
        The pipeline.

    Raises:
        ConfigError: The first problem found, naming its table, key, line and the fix.
        OSError: The file cannot be read.

    """
    p = Pipeline.load(path)

    def located(exc: ConfigError) -> ConfigError:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8")
        return locate(exc, text, os.fspath(path))

    def missing(exc: ConfigError) -> None:
        if on_missing_path is None:
            raise exc
        on_missing_path(str(located(exc)))

    try:
        _check_before_run(p, os.fspath(base) if base is not None else os.getcwd(), missing)
    except ConfigError as exc:
        raise located(exc) from exc
    return p


def _check_before_run(p: Pipeline, base: str, missing_path: Callable[[ConfigError], None]) -> None:
    """Raise the first problem :func:`preflight` looks for (located by the caller)."""
    for i, src in enumerate(p.sources):
        table: TablePath = ("sources", i)
        if src.schema is not None:
            for col, typ in src.ddl_columns():
                problem = _type_problem(typ)
                if problem is not None:
                    raise err(
                        table,
                        "schema",
                        f"`schema` column {col!r} of source {src.name!r} has type {typ}: "
                        f"{problem} ({_TYPE_HELP})",
                    )
        raw = src.path
        if src.format not in FILE_FORMATS or raw is None or ":" in raw:
            continue  # no path, or a URL (s3a://, hdfs://, file:): Spark checks it
        if any(ch in raw for ch in _GLOB_CHARS):
            continue  # Spark does not check a glob either: files may appear later
        full = os.path.abspath(os.path.join(base, raw))
        if not os.path.exists(full):
            missing_path(
                err(
                    table,
                    "path",
                    f"`path` {raw!r} of source {src.name!r} does not exist (looked for {full}: "
                    "a relative path resolves against the pipeline file's folder); fix "
                    "`path` or create the folder",
                )
            )
    for run in p.stage_runs():  # a chain's stages read their upstreams' output types
        try:
            if run.pipeline.join is not None:
                _check_key_types(run.pipeline)
            else:
                _check_aggregation_types(run.pipeline)
        except ConfigError as exc:
            raise run.located(exc, p) from exc
    master = p.spark.master
    if not _MASTER_RE.fullmatch(master):
        if master.startswith("mesos://"):
            hint = "Spark 4 has no Mesos support; use "
        else:
            bracket = master[master.find("[") :] if "[" in master else ""
            near = [m for m in (master.lower(), "local" + bracket) if _MASTER_RE.fullmatch(m)]
            close = difflib.get_close_matches(
                master.lower(), [*near, "local", "yarn"], n=1, cutoff=0.7
            )
            hint = f"did you mean {close[0]!r}? Use " if close else "use "
        raise err(
            ("spark",),
            "master",
            f"`master` {master!r} is not a Spark master URL; {hint}local, local[N] "
            "(N threads), local[*], spark://HOST:PORT (a standalone cluster), yarn or "
            "k8s://https://HOST:PORT",
        )


def _type_word(typ: str) -> str:
    """The canonical name of a DDL type's first word: ``long`` and ``BIGINT(x)`` -> BIGINT."""
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)", typ)
    word = m.group(1).upper() if m else typ.strip().upper()
    return _TYPE_SYNONYMS.get(word, word)


def _canonical_type(typ: str) -> str:
    """A DDL type with Spark's synonyms replaced and no spaces, to compare two types."""
    words = re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: _type_word(m.group()), typ)
    return re.sub(r"\s+", "", words)


def _type_problem(typ: str) -> str | None:
    """Say what is wrong with a DDL type (nested ones too), or None when Spark accepts it."""
    word = _type_word(typ)
    first = (re.findall(r"[^\s<(]+", typ) or [typ])[0]
    if word not in _SPARK_TYPES:
        named = _FOREIGN_TYPES.get(word) or next(
            iter(difflib.get_close_matches(word, _SPARK_TYPES, n=1)), None
        )
        return f"{first} is not a Spark SQL type" + (f"; did you mean {named}?" if named else "")
    if word not in ("ARRAY", "MAP", "STRUCT"):
        if word in ("VARCHAR", "CHAR") and "(" not in typ:
            return f"{first} needs a length, e.g. {first}(20) (or use STRING)"
        tail = re.sub(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*(\([^)]*\))?", "", typ, count=1).strip()
        if tail and word != "INTERVAL" and tail.split()[0].upper() not in ("COLLATE", "DEFAULT"):
            return f"unexpected {tail!r} after {first}"
        return None
    rest = typ.strip()[len(word) :].strip()
    example = {"ARRAY": "ARRAY<STRING>", "MAP": "MAP<STRING, INT>", "STRUCT": "STRUCT<a: INT>"}
    empty = not rest[1:-1].strip() and word != "STRUCT"  # STRUCT<> is a valid empty struct
    if empty or not (rest.startswith("<") and rest.endswith(">")):
        return f"{word} needs its element types in <...>, e.g. {example[word]}"
    inner = rest[1:-1]
    try:
        parts = top_level_split(inner, ",")
        if word == "STRUCT":
            if not inner.strip():
                return None
            types = [t for _, t in (ddl_column(f) for f in parts)]
        else:
            types = parts
    except ValueError as exc:
        return f"{exc}, e.g. {example[word]}"
    if len(types) != {"ARRAY": 1, "MAP": 2}.get(word, len(types)):
        return (
            f"{word} takes {'one type' if word == 'ARRAY' else 'two types'}, e.g. {example[word]}"
        )
    for t in types:
        problem = _type_problem(t)
        if problem is not None:
            return problem
    return None


def _known_types(src: Source, time_mode: str, et: str | None) -> dict[str, str] | None:
    """The operator's input column types from ``src`` (None behind a ``sql`` pre-stage)."""
    if src.sql is not None:
        return None
    types = dict(src.ddl_columns())
    if time_mode == "processing" and et is not None:
        types[et] = "TIMESTAMP"
    return types


def _check_key_types(p: Pipeline) -> None:
    j = p.join
    assert j is not None and p.left_source is not None and p.right_source is not None
    left, right = p.source(p.left_source), p.source(p.right_source)
    time_mode = time_mode_of(j)  # the stream-table join reads event time only
    lt = _known_types(left, time_mode, j.side_event_time_column("left"))
    rt = _known_types(right, time_mode, j.side_event_time_column("right"))
    if lt is None or rt is None:
        return
    # The columns the join compares pairwise: the keys; the foreign-key join's foreign key
    # with the right table's key.
    for lf, rf in join_kind(j).key_pairs:
        for lk, rk in zip(getattr(j, lf), getattr(j, rf), strict=True):
            a, b = lt[lk], rt[rk]
            wa, wb = _type_word(a), _type_word(b)
            exact = _INTEGRAL_TYPES | {"DECIMAL"}
            if (
                _canonical_type(a) == _canonical_type(b)
                or (wa in exact and wb in exact)
                or (wa in _STRING_TYPES and wb in _STRING_TYPES)
            ):
                continue
            raise err(
                JOIN_TABLE,
                lf,
                f"join key types differ: `{lf}` {lk!r} of source {left.name!r} is {a} and "
                f"`{rf}` {rk!r} of source {right.name!r} is {b}; keys of different types do "
                f"not match reliably, so declare both the same type in the sources' `schema` "
                f"(e.g. {rk} {a} in source {right.name!r}) or CAST one in a `sql` pre-stage",
            )


def _check_aggregation_types(p: Pipeline) -> None:
    w = p.window if p.window is not None else p.aggregate
    assert w is not None
    if p.aggregate is not None:
        src = p.source(p.resolved_aggregate_source() or p.sources[0].name)
        time_mode, table = "event", AGGREGATE_TABLE
    else:
        src = p.source(p.resolved_window_source() or p.sources[0].name)
        time_mode, table = p.window.time_mode, WINDOW_TABLE
    et = w.event_time_column
    assert et is not None
    types = None if p.transform_sql is not None else _known_types(src, time_mode, et)
    if types is None:
        return
    for i, a in enumerate(w.aggregations):
        if a.column is None or a.column not in types:
            continue
        typ = types[a.column]
        word = _type_word(typ)
        if a.agg in ("sum", "avg") and word not in _INTEGRAL_TYPES | _FLOAT_TYPES | {"DECIMAL"}:
            need = ("an integer, floating-point or decimal column (TINYINT .. BIGINT, FLOAT, "
                    "DOUBLE, DECIMAL)")
            fix = "declare it BIGINT or DOUBLE in the source's `schema`"
        elif a.agg in ("min", "max") and word in _UNORDERED_TYPES:
            need = "a column whose values order (a number, string, date or timestamp)"
            fix = "aggregate one of its fields, extracted in a `sql` pre-stage"
        else:
            continue
        raise err(
            (*table, "aggregations", i),
            "column",
            f"aggregation {a.as_!r}: {a.agg} needs {need}, but `column` {a.column!r} of "
            f"source {src.name!r} is {typ}; {fix}, or CAST it in a `sql` pre-stage",
        )
