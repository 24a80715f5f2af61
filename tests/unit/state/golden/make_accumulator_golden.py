"""Write the golden v1 accumulator states. Run once per released format version; never overwrite.

``accumulators_v1.bin``: msgpack of ``[[label, to_msgpack(state)], ...]``, one entry per
accumulator, value kind and step of :func:`golden_states` (update, grow, update, merge, take),
written by ``state/accumulators.py`` before it became a package (issue 15). The file is kept if
it exists.

    python tests/unit/state/golden/make_accumulator_golden.py
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pandas as pd
from interlace.state.accumulators import make_accumulator

HERE = Path(__file__).parent
GOLDEN = HERE / "accumulators_v1.bin"

# (agg, mode, column, dtype) of every accumulator configuration pinned here.
CONFIGS: list[tuple[str, str | None, str | None, str | None]] = [
    ("count", None, None, None),
    ("count", None, "x", None),
    ("sum", None, "x", None),
    ("sum", None, "x", "int64"),
    ("sum", None, "x", "bool"),
    ("avg", None, "x", None),
    ("min", None, "x", None),
    ("max", None, "x", None),
    ("min", None, "x", "int64"),
    ("first", None, "x", None),
    ("last", None, "x", None),
    ("last", None, "x", "object"),
    ("count_distinct", "exact", "x", None),
    ("count_distinct", "approximate", "x", None),
]

_UTC = dt.timezone.utc


def _values(kind: str, k: int, salt: int) -> Any:
    """Return ``k`` values of ``kind`` with NULLs, deterministic in ``salt``."""
    i = np.arange(k, dtype=np.int64) * 7 + salt
    null = i % 5 == 0
    if kind == "int":
        return (i * 31) % 23 - 11
    if kind == "nullable_int":
        return pd.Series(np.where(null, None, (i * 31) % 23 - 11), dtype="Int64")
    if kind == "int_as_float":
        return np.where(null, np.nan, ((i * 31) % 23 - 11).astype(np.float64))
    if kind == "float":
        return np.where(null, np.nan, ((i * 37) % 29) / 4.0 - 3.0)
    if kind == "bool":
        return (i % 3) == 1
    if kind == "str":
        return pd.Series([None if n else f"v{(j * 13) % 11}" for j, n in zip(i, null)], dtype=object)
    if kind == "decimal":
        return pd.Series([None if n else Decimal(int(j) % 17) / 4 for j, n in zip(i, null)], dtype=object)
    if kind == "timestamp":
        stamps = [None if n else dt.datetime(2026, 1, 1, tzinfo=_UTC) + dt.timedelta(seconds=int(j % 19))
                  for j, n in zip(i, null)]
        return pd.Series(pd.to_datetime(stamps, utc=True))
    msg = f"unknown kind {kind!r}"
    raise ValueError(msg)


KINDS = ["int", "nullable_int", "int_as_float", "float", "bool", "str", "decimal", "timestamp"]


def _kinds(agg: str, dtype: str | None) -> list[str]:
    if agg in ("sum", "avg"):
        kinds = ["int", "nullable_int", "int_as_float", "float", "bool", "decimal"]
        return ["int_as_float", "bool"] if dtype is not None else kinds
    if dtype == "int64":
        return ["int_as_float", "timestamp"]
    if dtype == "object":
        return ["str", "decimal"]
    return KINDS


def golden_states() -> Iterator[tuple[str, Any, Any]]:
    """Yield ``(label, accumulator, state)`` for every pinned step."""
    for agg, mode, column, dtype in CONFIGS:
        kw: dict[str, Any] = {"max_distinct_values_per_group": 1_000} if mode == "exact" else {}
        acc = make_accumulator(agg, mode, column=column, dtype=dtype, **kw)
        for kind in _kinds(agg, dtype):
            name = f"{agg}/{mode}/{column}/{dtype}/{kind}"
            k = 40
            slots = (np.arange(k, dtype=np.int64) * 5) % 3  # slot 3 stays empty
            t_us = 1_767_225_600_000_000 + ((np.arange(k, dtype=np.int64) * 11) % 7) * 1_000_000
            seq = np.arange(k, dtype=np.int64)
            s1 = acc.update(acc.init(4), slots, _values(kind, k, 0), t_us, seq)
            yield f"{name}/update", acc, s1
            s2 = acc.grow(s1, 2)
            s3 = acc.update(s2, (slots + 1) % 6, _values(kind, k, 3), t_us - 2_000_000, seq + k)
            yield f"{name}/grow+update", acc, s3
            s4 = acc.merge(s3, acc.take(s3, [1, 0, 5]), [4, 5, 0])
            yield f"{name}/merge", acc, s4
            yield f"{name}/take", acc, acc.take(s4, [5, 3, 3, 0])
    # HyperLogLog: one slot promoted to the dense form, one kept sparse, one merged into both.
    acc = make_accumulator("count_distinct", "approximate", column="x")
    k = 9_000
    big = acc.update(acc.init(3), np.zeros(k, dtype=np.int64), np.arange(k, dtype=np.int64))
    big = acc.update(big, np.full(50, 1, dtype=np.int64), np.array([f"s{j}" for j in range(50)], dtype=object))
    yield "hll/dense+sparse", acc, big
    merged = acc.merge(big, acc.take(big, [1, 0]), [0, 2])
    yield "hll/merge", acc, merged
    yield "hll/take", acc, acc.take(merged, [2, 1, 2])


def encoded() -> list[list[Any]]:
    """Return ``[[label, to_msgpack(state)], ...]`` as the current code encodes it."""
    return [[label, acc.to_msgpack(state)] for label, acc, state in golden_states()]


if __name__ == "__main__":
    if not GOLDEN.exists():
        GOLDEN.write_bytes(msgpack.packb(encoded(), use_bin_type=True))
