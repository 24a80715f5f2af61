"""docs/architecture.md names a file for every stage: each named file must exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_file_the_architecture_page_names_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    paths = set(re.findall(r"`((?:operators|state|interlace)/[\w/]+\.py)", text))
    assert len(paths) >= 30, sorted(paths)
    missing = sorted(p for p in paths if not (ROOT / p).is_file())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_no_product_file_is_over_800_lines() -> None:
    """Issue 15: a reader holds a file in their head (docs/architecture.md)."""
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text().splitlines())
        for folder in ("operators", "state", "interlace")
        for p in (ROOT / folder).rglob("*.py")
    }
    assert len(sizes) > 60
    big = {p: n for p, n in sizes.items() if n > 800}
    assert not big, big
