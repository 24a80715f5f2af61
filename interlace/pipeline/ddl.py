"""Spark DDL schema strings (``"name TYPE, ..."``) as ``(name, type)`` pairs.

:func:`parse_ddl` reads a source's ``schema``; :func:`top_level_split` and :func:`ddl_column`
are its pieces, which ``interlace.preflight`` reuses to read nested ``STRUCT`` fields.
"""

from __future__ import annotations

import re

from interlace.operators.errors import ConfigError

# The pieces of parse_ddl serve the package and interlace.preflight, which import them by name.
__all__ = ["parse_ddl"]


_OPEN, _CLOSE = "(<", ")>"


def top_level_split(text: str, sep: str) -> list[str]:
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


def ddl_column(piece: str) -> tuple[str, str]:
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
    words = [w for w in top_level_split(re.sub(r"\s", " ", rest), " ") if w]
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
        cols = [ddl_column(p) for p in top_level_split(ddl, ",")]
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


def is_boolean(type_text: str) -> bool:
    """Return whether a DDL type is ``BOOLEAN``."""
    return type_text.strip().upper() == "BOOLEAN"


def is_timestamp(type_text: str) -> bool:
    """Return whether a DDL type is a timestamp (``TIMESTAMP``, ``_NTZ`` or ``_LTZ``)."""
    return type_text.strip().upper() in ("TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ")

