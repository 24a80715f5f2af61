"""No import circles: the modules of interlace and of bench/ import each other one way only.

The graph is read from the source with :mod:`ast` (nothing is imported): an edge for every
``import`` / ``from ... import`` of a module of the project, wherever it stands (module level,
inside a function, under ``TYPE_CHECKING``), to the module it names (``from pkg import sub``
to ``pkg.sub`` when that is a module, else to ``pkg``). A circle is a strongly connected set of
more than one module; each is reported with the imports that tie it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Source folders and the import name of their modules (pyproject.toml installs operators/ and
#: state/ as interlace.operators / interlace.state; bench/'s scripts import ``harness``).
TREES = {
    "interlace": ROOT / "interlace",
    "interlace.operators": ROOT / "operators",
    "interlace.state": ROOT / "state",
    "harness": ROOT / "bench" / "harness",
}


def modules() -> dict[str, Path]:
    """Every module of the trees, by dotted name (a package by its ``__init__.py``)."""
    out: dict[str, Path] = {}
    for prefix, root in TREES.items():
        for path in root.rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((prefix, *parts))] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The project modules ``name`` imports, with the line of each import."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:
                    yield sub, node.lineno
                elif target in known:
                    yield target, node.lineno


def graph() -> dict[str, dict[str, int]]:
    """``{module: {imported module: line}}`` over the whole project, self-imports left out."""
    known = modules()
    out: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        edges = out.setdefault(name, {})
        for target, line in imports(name, path, known):
            if target != name:
                edges.setdefault(target, line)
    return out


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_project_has_no_import_circle() -> None:
    edges = graph()
    found = circles(edges)
    report = []
    for part in found:
        ties = [f"  {a} -> {b} (line {edges[a][b]})" for a in part for b in part if b in edges[a]]
        report.append(f"circle of {len(part)} modules:\n" + "\n".join(ties))
    assert not found, "\n".join(report)


def test_the_graph_sees_imports_of_every_kind() -> None:
    # The check above is only as good as the graph: it must see module-level, function-level
    # and relative imports of the project's own modules.
    edges = graph()
    assert "interlace.explain_cells" in edges["interlace.explain_aggregate"]  # module level
    assert "interlace.explain_aggregate" in edges["interlace.explain"]  # inside a function
    assert "interlace.operators.common.compat" in edges["interlace"]
    assert len(edges) > 150
    # And a circle, when there is one, is found.
    assert circles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [
        ["a", "b", "c"]]
    assert circles({"a": {"b": 1}, "b": {}}) == []
