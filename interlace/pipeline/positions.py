"""Line numbers of the tables and keys of a TOML text, for error messages.

tomllib reports no positions, so :class:`Positions` scans the text itself: a small line
scanner that tracks multi-line strings and open brackets so that only real headers and keys
are recorded, numbers ``[[array]]`` tables by occurrence, and records the keys of one-line
inline tables (``options = { a = "1" }``) on their line. Values inside arrays get no line of
their own: an error about ``aggregations = [{ ... }]`` points at the ``aggregations`` line.

Why not tomlkit (issue 15 asked to measure): tomlkit items carry no positions, and the only
way to get them through its public API is to render the parsed document back and find each
item in the rendering (tried: a marker appended to every item's indent). That holds only
while the rendering equals the text, and for valid pipeline TOML it does not: an array of
tables split by another table (``[[sources]]``, ``[transform.join]``, ``[[sources]]``) is
rendered with its tables together, ``tomlkit.parse(t).as_string() != t`` (measured with
tomlkit 0.13.0, 0.14.0 and 0.15.2), so every line after the split would be wrong or lost.
The scanner gives those files the same lines as any other (tests/unit/test_pipeline.py pins
its cases, multi-line strings that look like headers among them).
"""

from __future__ import annotations

import re
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with the tomli backport
    import tomli as tomllib

from interlace.pipeline.validate import TablePath

__all__ = ["Positions"]

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


class Positions:
    r"""Line numbers of the tables and keys in a TOML text (the module docstring says how).

    Example:
        >>> pos = Positions('name = "x"\n\n[[sources]]\noptions = { a = "1" }\n')
        >>> pos.line(("sources", 0), "options"), pos.line(("sources", 0, "options"), "a")
        (4, 4)
        >>> pos.line(("sources", 0)), pos.line(("target",))
        (3, None)

    """

    def __init__(self, text: str) -> None:
        self.keys: dict[TablePath, int] = {}
        self.tables: dict[TablePath, int] = {}
        counts: dict[TablePath, int] = {}
        # The current element of each array of tables, by its path: a header under one
        # (``[stages.transform.join]`` after ``[[stages]]``) is inside that element.
        current: dict[TablePath, int] = {}

        def within(parts: tuple[str, ...]) -> TablePath:
            out: list[str | int] = []
            for part in parts:
                out.append(part)
                if tuple(out) in current:
                    out.append(current[tuple(out)])
            return tuple(out)

        section: TablePath = ()
        ml = ""  # the closing delimiter of an open multi-line string
        depth = 0
        # Lines as TOML (and tomllib) count them: split at "\n" only. str.splitlines() also
        # breaks at U+0085, U+2028, ... which TOML allows raw inside strings and comments.
        for lineno, line in enumerate(text.split("\n"), start=1):
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
                    array = (*within(parts[:-1]), parts[-1])
                    idx = counts.get(array, 0)
                    counts[array], current[array] = idx + 1, idx
                    section = (*array, idx)
                    self.tables.setdefault(section, lineno)
                    continue
                m = _HEADER.match(line)
                if m:
                    section = within(_key_parts(m.group(1)))
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
