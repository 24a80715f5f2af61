"""Every pipeline TOML in the repository reads and writes as it did before issue 15.

The corpus: ``examples/*.toml``, every ```` ```toml ```` block of ``README.md`` and
``docs/*.md`` (a full pipeline as it stands; a fragment, such as ``[spark]`` settings, merged
into ``examples/clicks_per_minute.toml``), the demo's two pipelines (``interlace.demo``) and
two writer cases (odd strings and keys, grouped and negative numbers).

``tests/unit/golden/pipelines/`` holds, for each, the pipeline as the hand-written reader of
``interlace/pipeline.py`` (before the package and tomlkit) parsed it (``NAME.json``) and the
TOML its hand-written writer wrote (``NAME.toml``); both were generated once from that code.
Each case must parse to the golden pipeline, write the golden TOML byte for byte, and
round-trip. A new doc or example TOML fails here until its golden is added.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from interlace.demo import demo_pipelines
from interlace.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden" / "pipelines"
_FENCE = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


# Fields added after the goldens were written: left out of a dump while at their default, so
# every golden still describes its pipeline whole (a chain's stages are in its dump).
_LATER_FIELDS = {"stages": (), "aggregate": None, "aggregate_source": None,
                 "idle_timeout_ms": None, "left_idle_timeout_ms": None,
                 "right_idle_timeout_ms": None}
# Likewise a Source's Kafka fields (docs/kafka.md); by type: joins have a tombstone_column too.
_LATER_SOURCE_FIELDS = {"value_format": None, "key_format": None, "key_schema": None,
                        "timestamp_column": None, "tombstone_column": None}


def dump(obj: Any) -> Any:
    """Return a pipeline as plain JSON data: each dataclass as its fields and ``__type__``."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        later = {**_LATER_FIELDS, **(_LATER_SOURCE_FIELDS if type(obj).__name__ == "Source"
                                     else {})}
        return {"__type__": type(obj).__name__,
                **{f.name: dump(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                   if later.get(f.name, object()) != getattr(obj, f.name)}}
    if isinstance(obj, Mapping):
        return {str(k): dump(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [dump(v) for v in obj]
    assert obj is None or isinstance(obj, str | int | float | bool), obj
    return obj


def _repo_cases() -> dict[str, Pipeline]:
    cases = {f"examples-{f.stem}": Pipeline.load(f)
             for f in sorted((ROOT / "examples").glob("*.toml"))}
    base = tomllib.loads((ROOT / "examples" / "clicks_per_minute.toml").read_text())
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, m in enumerate(_FENCE.finditer(md.read_text()), start=1):
            block = m.group(1)
            data = tomllib.loads(block)
            if "sources" in data:
                cases[f"docs-{md.stem}-{i}"] = Pipeline.from_toml(block)
                continue
            merged = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
            for k, v in data.items():
                merged[k] = {**merged.get(k, {}), **v} if isinstance(v, dict) else v
            cases[f"docs-{md.stem}-{i}"] = Pipeline.from_toml(tomlkit.dumps(merged))
    for p in demo_pipelines(Path("demo")):
        cases[f"demo-{p.name}"] = p
    return cases


CASES = _repo_cases()
WRITER_CASES = ["writer-strings", "writer-numbers"]


def test_every_repo_toml_has_a_golden() -> None:
    goldens = {f.stem for f in GOLDEN.glob("*.json")}
    assert goldens == set(CASES) | set(WRITER_CASES)
    assert {"examples-orders_payments", "examples-clicks_per_minute", "docs-deploy-1",
            "demo-orders-payments", "demo-clicks-per-minute"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_repo_toml_parses_as_before_and_round_trips(name: str) -> None:
    p = CASES[name]
    assert dump(p) == json.loads((GOLDEN / f"{name}.json").read_text())
    assert Pipeline.from_toml(p.to_toml()) == p


@pytest.mark.parametrize("name", sorted(CASES) + WRITER_CASES)
def test_writer_reproduces_the_golden_toml(name: str) -> None:
    golden = (GOLDEN / f"{name}.toml").read_text()
    p = Pipeline.from_toml(golden)
    assert dump(p) == json.loads((GOLDEN / f"{name}.json").read_text())
    assert p.to_toml() == golden
    if name in CASES:
        assert CASES[name].to_toml() == golden
