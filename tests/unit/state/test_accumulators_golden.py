"""Accumulator states stay byte-stable: the golden v1 states (``golden/accumulators_v1.bin``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import msgpack
import pytest
from interlace.state.accumulators import make_accumulator

GOLDEN = Path(__file__).parent / "golden"
_spec = importlib.util.spec_from_file_location(
    "make_accumulator_golden", GOLDEN / "make_accumulator_golden.py"
)
assert _spec is not None and _spec.loader is not None
make_golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_golden)

WANT = msgpack.unpackb(
    (GOLDEN / "accumulators_v1.bin").read_bytes(), raw=False, strict_map_key=False
)


def _packed(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def test_every_golden_state_encodes_to_the_same_bytes() -> None:
    got = make_golden.encoded()
    assert [label for label, _ in got] == [label for label, _ in WANT]
    for (label, obj), (_, want) in zip(got, WANT, strict=True):
        assert _packed(obj) == _packed(want), label


@pytest.mark.parametrize("entry", WANT, ids=[label for label, _ in WANT])
def test_golden_state_decodes_and_reencodes_identically(entry: list[object]) -> None:
    label, obj = entry
    assert isinstance(obj, dict)
    kw = {"max_distinct_values_per_group": 1_000} if obj["mode"] == "exact" else {}
    acc = make_accumulator(obj["agg"], obj["mode"], column="x", **kw)
    state = acc.from_msgpack(obj)
    assert _packed(acc.to_msgpack(state)) == _packed(obj), label
