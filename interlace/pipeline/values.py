"""Single values of a pipeline: the frozen string map (``options``, ``conf``) and name checks."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping

from interlace.operators.errors import ConfigError

# The helpers below FrozenMap serve the package's other modules, which import them by name.
__all__ = ["FrozenMap"]

_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")


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


EMPTY = FrozenMap()


def as_str_map(field: str, value: object) -> FrozenMap:
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


def check_str(field: str, value: object, *, allow_none: bool = True) -> None:
    """Raise unless ``value`` is a non-empty str (or None when allowed)."""
    if value is None and allow_none:
        return
    if not isinstance(value, str) or not value.strip():
        need = "a non-empty string" + (" or absent" if allow_none else "")
        msg = f"`{field}` must be {need} (got {field}={value!r})"
        raise ConfigError(msg)


def check_name(field: str, value: object) -> None:
    """Raise unless ``value`` is a usable name (letters, digits, ``_``, ``-``, ``.``)."""
    check_str(field, value, allow_none=False)
    assert isinstance(value, str)
    if not _NAME_RE.match(value):
        msg = (
            f"`{field}` must start with a letter, digit or '_' and hold only letters, digits, "
            f"'_', '-' and '.' (got {field}={value!r}); it names files and tables, e.g. "
            '"orders-payments"'
        )
        raise ConfigError(msg)


def default_table(name: str) -> str:
    """Turn a pipeline name into a table name: non-identifier characters become ``_``."""
    table = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return "_" + table if table[:1].isdigit() else table

