"""Docstring text that several public objects share, written once and filled in where it stands.

A docstring line that holds nothing but ``{name}`` stands for shared text: :func:`fill_doc`
replaces it with that text, indented like the line, so ``help()`` and ``docs/gen_api.py``
show each object's full docstring while the source says it once. The shims' shared
sections are here; the table joins' spec fields are
:data:`~interlace.operators.common.tables.TWO_TABLE_ARGS`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import TypeVar

__all__ = ["PREPARE_RETURNS", "RUN_RAISES", "fill_doc", "operator_usage"]

_T = TypeVar("_T")


def fill_doc(**parts: str) -> Callable[[_T], _T]:
    """Decorate a class or function: fill its docstring's ``{name}`` lines from ``parts``.

    Each part is dedented, then every non-blank line of it indented like its placeholder.
    A placeholder without a part, or a part without a placeholder, is an error (at import).
    """

    def decorate(obj: _T) -> _T:
        doc = obj.__doc__
        if doc is None:  # python -OO strips docstrings
            return obj
        lines: list[str] = []
        unused = set(parts)
        for line in doc.split("\n"):
            name = line.strip()
            if not (name.startswith("{") and name.endswith("}")):
                lines.append(line)
                continue
            name = name[1:-1]
            assert name in parts, f"{obj!r}: no text for the docstring's {{{name}}}"
            unused.discard(name)
            indent = line[: len(line) - len(line.lstrip())]
            text = textwrap.dedent(parts[name]).strip("\n")
            lines += [indent + t if t.strip() else "" for t in text.split("\n")]
        assert not unused, f"{obj!r}: its docstring has no {sorted(unused)}"
        obj.__doc__ = "\n".join(lines)
        return obj

    return decorate


#: The Returns and Raises of a join's ``prepare_*`` docstring (format ``operator``: the bound
#: operator class), filled in at its ``{returns}`` line.
PREPARE_RETURNS = """
    Returns:
        A :class:`{operator}`.

    Raises:
        ConfigError: Any problem with the inputs (SEMANTICS §6), before a query starts.
"""

#: The Raises of a join's public function (``stream_join``, ``table_join``, ...), filled in
#: at its ``{raises}`` line.
RUN_RAISES = """
    Raises:
        ConfigError: Invalid spec or inputs, before any query starts.
"""


def operator_usage(run: str, inputs: str) -> str:
    """A bound operator's docstring paragraph: the Spark call that gives ``run``'s rows.

    Args:
        run: The public function (``"table_join"``); its ``prepare_`` twin binds the operator.
        inputs: The example inputs of the call (``"left_changelog, right_changelog"``).
    """
    return f"""
        The low-level usage gives the same rows as :func:`{run}`::

            op = prepare_{run}({inputs}, spec)
            out = op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
                op.func, op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)
        """
