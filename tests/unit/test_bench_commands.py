"""Every benchmark command quoted in docs/ and README.md parses with bench/run.py's parsers.

A figure in the docs names the command that reproduces it (issue 47); this extracts each
``bench/run.py ...`` quoted in a code span or a code block and parses it with the entry
point's argparse parsers (parse only: nothing runs, no Spark), checks that every
``bench/*.py`` path quoted exists, and that the harness has no import circle.
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from harness import main as bench_main  # noqa: E402

DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^(```|~~~)")
#: A quoted script path or a link to one (``../bench/x.py``); one after ``COMMIT:`` names a file
#: git keeps (``git show C:bench/x.py``) and is not checked.
PATH = re.compile(r"(?:(?<=\.\./)|(?<![\w/.:-]))bench/[\w/]+\.py\b")
#: Where a quoted command ends: a comment, a pipe or redirect, the next command.
END = re.compile(r"\s(?:#|\||>|&&|;)\s?")


def _code(text: str) -> list[tuple[int, str]]:
    """(line number, code) for each code block line and each inline code span (a span may
    run over the lines of its paragraph)."""
    out: list[tuple[int, str]] = []
    in_block = False
    pending = ""
    para: list[tuple[int, str]] = []

    def flush() -> None:
        if para:
            joined = " ".join(line for _, line in para)
            out.extend((para[0][0], m) for m in re.findall(r"`([^`]+)`", joined))
            para.clear()

    for no, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.strip()):
            flush()
            in_block = not in_block
            continue
        if in_block:
            pending += line
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            out.append((no, pending))
            pending = ""
        elif line.strip():
            para.append((no, line))
        else:
            flush()
    flush()
    return out


def quoted_commands() -> list[tuple[str, list[str]]]:
    """``(where, argv)`` for every ``bench/run.py`` command quoted in the docs."""
    found: list[tuple[str, list[str]]] = []
    for doc in DOCS:
        for no, code in _code(doc.read_text()):
            for m in re.finditer(r"bench/run\.py\b", code):
                rest = END.split(code[m.end():], maxsplit=1)[0]
                try:
                    words = shlex.split(rest)
                except ValueError:  # the command closes a quote opened before it (bash -c '...')
                    words = shlex.split(rest.rstrip("'\""))
                # "[--opt VALUE]" marks an optional part, "..." more of the same: both parse.
                argv = [w.strip("[]") for w in words
                        if w not in ("...", "…") and w.strip("[]") + "[]" != w + "]"]
                found.append((f"{doc.relative_to(ROOT)}:{no}", argv))
    return found


COMMANDS = quoted_commands()


def test_the_docs_quote_commands() -> None:
    assert len(COMMANDS) > 50
    subcommands = {argv[0] for _, argv in COMMANDS if argv}
    assert {"throughput", "curves", "state", "profile"} <= subcommands


@pytest.mark.parametrize(("where", "argv"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_quoted_command_parses(where: str, argv: list[str]) -> None:
    """A command with options parses; one quoted by its name alone (``bench/run.py profile
    pyspy``'s recipe) names a subcommand."""
    try:
        if argv and not any(a.startswith("-") for a in argv):
            _, _, rest = bench_main.resolve(argv)
            if not rest:
                return
        ns = bench_main.parse(argv)
    except SystemExit as exc:
        if exc.code == 0 and {"-h", "--help"} & set(argv):
            return
        pytest.fail(f"{where}: `bench/run.py {shlex.join(argv)}` does not parse ({exc})")
    assert isinstance(ns, argparse.Namespace)


def test_every_quoted_bench_path_exists() -> None:
    missing = []
    for doc in DOCS:
        for no, line in enumerate(doc.read_text().splitlines(), 1):
            missing += [f"{doc.relative_to(ROOT)}:{no}: {p}" for p in PATH.findall(line)
                        if not (ROOT / p).exists()]
    assert not missing, "\n".join(missing)


def test_no_subcommand_is_throughput_and_unknown_ones_fail() -> None:
    assert bench_main.parse([]).workloads == "*"
    assert bench_main.parse(["--workloads", "join-*", "--stores", "hdfs"]).stores == "hdfs"
    assert bench_main.parse(["state", "sweep"]).workloads == "state"
    for argv in (["nope"], ["state"], ["state", "nope"], ["profile", "pyspy"]):
        with pytest.raises(SystemExit):
            bench_main.parse(argv)


def test_every_subcommand_builds_its_parser() -> None:
    for name, target in bench_main.COMMANDS.items():
        subs = [[name, s] for s in target] if isinstance(target, dict) else [[name]]
        for argv in subs:
            prog, module, _ = bench_main.resolve(argv)
            assert prog == "bench/run.py " + " ".join(argv)
            assert callable(module.main)
            if module.__name__ != bench_main.THROUGHPUT:
                assert module.parser().prog == prog  # its --help and errors name the command
            with pytest.raises(SystemExit) as exc:
                bench_main.parse([*argv, "--help"])
            assert exc.value.code == 0


def _harness_imports() -> dict[str, set[str]]:
    """Module -> the harness modules it imports (at the top or inside a function)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((BENCH / "harness").rglob("*.py")):
        rel = path.relative_to(BENCH).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                deps.add(node.module)
                deps |= {f"{node.module}.{a.name}" for a in node.names}
        graph[name] = deps
    return {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}


def test_the_harness_has_no_import_circle() -> None:
    graph = _harness_imports()
    assert "harness.joins" in graph["harness.workloads"]
    assert not {"harness.joins", "harness.tables", "harness.windows"} & graph["harness.registry"]

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += graph[m]
        return seen

    circles = [m for m in graph if m != "harness" and m in reach(m)]
    assert not circles, f"modules that import themselves back: {circles}"
