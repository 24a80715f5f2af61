"""The documentation's examples run, its links resolve, and its seed-003 tables are current.

* Every ``>>>`` example in interlace's modules runs (``doctest.testmod``), so a docstring
  example cannot rot unnoticed.
* Every relative link in ``README.md`` and ``docs/*.md`` points to an existing file.
* The seed-003 tables in ``docs/joins.md`` are regenerated from the oracle and compared with
  the page, so the page cannot drift from the semantics.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import interlace
from interlace import Join
from interlace.testing.log import to_us
from interlace.testing.oracle import oracle_join
from interlace.testing.seed003 import BASE, COLUMNS, JOIN_KWARGS, build_log, kafka_emit_batches

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


# ---------------------------------------------------------------------------------------
# Doctests
# ---------------------------------------------------------------------------------------


def _public_modules() -> list[str]:
    names = {"interlace"}
    for info in pkgutil.walk_packages(interlace.__path__, prefix="interlace."):
        names.add(info.name)
    # operators/ and state/ install as interlace.operators / interlace.state (package-dir).
    for pkg in ("interlace.operators", "interlace.state"):
        module = importlib.import_module(pkg)
        names.add(pkg)
        for info in pkgutil.walk_packages(module.__path__, prefix=pkg + "."):
            names.add(info.name)
    return sorted(names)


MODULES = _public_modules()


def test_the_modules_with_examples_are_found() -> None:
    for name in ("interlace.operators.join", "interlace.state.blob", "interlace.testing.log",
                 "interlace.testing.oracle"):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


@pytest.mark.parametrize(
    "name", ["interlace.operators.join", "interlace.testing.log", "interlace.testing.oracle"]
)
def test_modules_that_must_have_examples_have_them(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), verbose=False, report=False)
    assert result.attempted > 0, f"{name} has no >>> examples"


# ---------------------------------------------------------------------------------------
# Relative links
# ---------------------------------------------------------------------------------------

# [text](target) and [text](target "title"); images too. Code spans and fenced blocks are
# removed first so that `a[i](x)` in code is not taken for a link.
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def _link_targets(text: str) -> list[str]:
    text = _CODE_SPAN.sub("", _FENCE.sub("", text))
    return [t for t in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I)]


def _relative_links(text: str) -> list[str]:
    """Return the file part of every relative link (no URLs, no same-page anchors)."""
    return [t.split("#", 1)[0] for t in _link_targets(text) if not t.startswith("#")]


def _anchors(markdown: str) -> set[str]:
    """Return GitHub's heading anchors of a Markdown file."""
    out = set()
    for line in _FENCE.sub("", markdown).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


def test_doc_files_exist() -> None:
    for name in ("README.md", "LICENSE", "docs/index.md", "docs/joins.md", "docs/state.md",
                 "docs/glossary.md", "docs/late-data.md"):
        assert (ROOT / name).is_file(), name


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files(doc: Path) -> None:
    missing = []
    for target in _relative_links(doc.read_text(encoding="utf-8")):
        if not (doc.parent / target).resolve().exists():
            missing.append(target)
    assert not missing, f"{doc.relative_to(ROOT)} links to missing files: {missing}"


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_anchors_point_to_existing_headings(doc: Path) -> None:
    broken = []
    for target in _link_targets(doc.read_text(encoding="utf-8")):
        if "#" not in target:
            continue
        path, anchor = target.split("#", 1)
        file = (doc.parent / path).resolve() if path else doc
        if file.suffix == ".md" and file.is_file():
            if anchor not in _anchors(file.read_text(encoding="utf-8")):
                broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)} links to missing headings: {broken}"


def test_anchor_slugs_follow_github() -> None:
    assert _anchors("## Spark's pre-filter\n### `how`\n# Choices and known gaps\n") == {
        "sparks-pre-filter", "how", "choices-and-known-gaps"}


def test_link_finder_ignores_code_and_urls() -> None:
    text = "[a](docs/x.md) [b](https://e.org) [c](#top) `[d](no.md)`\n```\n[e](no2.md)\n```\n"
    assert _relative_links(text) == ["docs/x.md"]


# ---------------------------------------------------------------------------------------
# The seed-003 tables in docs/joins.md
# ---------------------------------------------------------------------------------------

HOWS = ("inner", "left", "right", "full", "left_semi", "left_anti")
T0_MS = to_us(BASE) // 1000


def _seconds(value_ms: int) -> str:
    s = (value_ms - T0_MS) / 1000
    return str(int(s)) if s == int(s) else str(s)


def _seed_results(policy: str) -> dict[str, object]:
    log = build_log()
    return {
        how: oracle_join(Join(how=how, **JOIN_KWARGS), log, left_columns=list(COLUMNS),
                         right_columns=list(COLUMNS), watermark_policy=policy)
        for how in HOWS
    }


def _record(row: dict[str, object]) -> str:
    return f"{row['v']}@{_seconds(to_us(row['event_time']) // 1000)}"  # type: ignore[arg-type]


def _cell(how: str, rows: list[dict[str, object]]) -> str:
    if how in ("left_semi", "left_anti"):
        return ", ".join(str(r["v"]) for r in rows)
    return ", ".join(f"{r['left_v'] or 'null'} - {r['right_v'] or 'null'}" for r in rows)


def seed003_emission_table(policy: str = "min") -> str:
    """Return the per-micro-batch emission table of docs/joins.md, from the oracle."""
    log = build_log()
    results = _seed_results(policy)
    first = results["inner"]
    horizon_ms = Join(**JOIN_KWARGS).horizon_ms  # H; wm = W + H
    lines = [
        "| batch | left in | right in | `W` seen | `wm` | inner | left | right | full "
        "| left_semi | left_anti |",
        "|---:|---|---|---:|---:|---|---|---|---|---|---|",
    ]
    for b in range(first.num_batches):  # type: ignore[attr-defined]
        if b < len(log):
            left = ", ".join(_record(r) for r in log[b].left)
            right = ", ".join(_record(r) for r in log[b].right)
        else:
            left = right = "(no-data batch)"
        w_ms = first.spark_watermarks_ms[b]  # type: ignore[attr-defined]
        w = _seconds(w_ms) if w_ms > 0 else "none"
        wm = _seconds(w_ms + horizon_ms) if w_ms > 0 else "none"
        cells = [_cell(how, results[how].rows_for_batch(b)) for how in HOWS]  # type: ignore[attr-defined]
        lines.append("| " + " | ".join([str(b), left, right, w, wm, *cells]) + " |")
    return "\n".join(lines)


def seed003_null_padded_table() -> str:
    """Return the Kafka-vs-interlace table of null-padded rows (full join) of docs/joins.md."""
    kafka = {p: b for p, b in kafka_emit_batches("outer").items() if None in p}
    by_policy = {}
    for policy in ("min", "max"):
        full = _seed_results(policy)["full"]
        by_policy[policy] = {
            (o.row["left_v"], o.row["right_v"]): o.batch
            for o in full.rows  # type: ignore[attr-defined]
            if o.row["left_v"] is None or o.row["right_v"] is None
        }
    closes = {"E": 40, "F": 60, "f": 80, "G": 100}
    lines = [
        "| row | event time | close (`t + 15 + 5`) | Kafka table batch "
        "| interlace, `min` | interlace, `max` |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for pair in sorted(by_policy["min"], key=lambda p: (by_policy["min"][p], closes[p[0] or p[1]])):
        name = f"{pair[0] or 'null'} - {pair[1] or 'null'}"
        t = closes[pair[0] or pair[1]]
        lines.append(
            f"| {name} | {t} | {t + 20} | {kafka.get(pair, '(after the table)')} "
            f"| {by_policy['min'][pair]} | {by_policy['max'][pair]} |"
        )
    return "\n".join(lines)


def _between(text: str, marker: str) -> str:
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    assert begin in text and end in text, f"docs/joins.md lost its {marker} markers"
    return text.split(begin, 1)[1].split(end, 1)[0].strip()


def test_seed003_emission_table_in_joins_md_is_the_oracles() -> None:
    text = (ROOT / "docs" / "joins.md").read_text(encoding="utf-8")
    assert _between(text, "seed003-min") == seed003_emission_table("min")


def test_seed003_null_padded_table_in_joins_md_is_the_oracles() -> None:
    text = (ROOT / "docs" / "joins.md").read_text(encoding="utf-8")
    assert _between(text, "seed003-null-padded") == seed003_null_padded_table()


if __name__ == "__main__":  # print the tables, to paste into docs/joins.md
    print(seed003_emission_table("min"))
    print()
    print(seed003_null_padded_table())


def test_api_reference_is_generated_from_the_current_docstrings():
    import importlib.util
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    spec = importlib.util.spec_from_file_location("gen_api", docs / "gen_api.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (docs / "api.md").read_text() == gen.render(), "run: python docs/gen_api.py"
