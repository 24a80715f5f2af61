"""Hostile values and row accounting for the hostile-input tests (issue 13).

The values: NULL keys and event times, NaN / ±inf / -0.0, unicode with combining marks and
emoji, binary, decimal(38,18), nested struct / array / map payloads, duplicate times and times
at 0001-01-01, before 1970 and at 9999-12-31.

The accounting: every input row carries a unique ``id``; a test collects which ids reached the
output, which became dead letters and which Spark's own watermark filter removed
(:func:`spark_dropped_ids`, recomputed from the batch watermarks), and checks that the rest is
exactly what the counters count (:func:`assert_accounted`), with every counter named in
docs/reliability.md (:func:`documented_counters`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from interlace.operators.common.prepare import PANDAS_RANGE_US
from interlace.testing.log import JoinBatch, to_us

#: Modest and derandomized: the same examples in CI and on every machine, well under a minute.
HOSTILE = settings(max_examples=60, deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

BASE = dt.datetime(2026, 1, 1)
NAN, INF = float("nan"), float("inf")
#: The last batch's time: later than every hostile time interlace takes, so every window
#: closes and every buffered row is evicted (the last day PySpark can hand to pandas).
END = dt.datetime(2262, 4, 10)

#: Event times: mostly near BASE (with duplicates), and the extremes: at or before the epoch
#: (Spark's filter removes them), beyond what pandas holds (interlace drops and counts them).
EXTREME_TIMES = (dt.datetime(1, 1, 1), dt.datetime(1950, 6, 1, 12, 0, 0, 1),
                 dt.datetime(1969, 12, 31, 23, 59, 59), dt.datetime(1970, 1, 1),
                 dt.datetime(9999, 12, 31), dt.datetime(2262, 4, 11, 0, 0, 0, 1))
STRINGS = ("a", "e\u0301", "\u00e9", "\U0001f389", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
           "", "\u0000x", "z" * 40)
BINARIES = (b"", b"\x00", b"\x00\xff", b"\xff", b"a")
#: decimal(38,18) values, at scale 18 as Spark hands them over.
DECIMALS = tuple(Decimal(d) for d in (
    "0.000000000000000000", "-0.000000000000000001", "1.500000000000000000",
    "99999999999999999999.999999999999999999", "-99999999999999999999.999999999999999999"))
FLOATS = (0.0, -0.0, 1.5, NAN, INF, -INF, 1e308, -5e-324)
INTS = (0, 1, -(2**63), 2**63 - 1)

#: Key column -> (Arrow type, its values); every kind of key a test may join or group on.
KEY_KINDS: dict[str, tuple[pa.DataType, tuple[Any, ...]]] = {
    "ks": (pa.string(), STRINGS[:5]),
    "kb": (pa.binary(), BINARIES),
    "kd": (pa.decimal128(38, 18), DECIMALS),
    "kf": (pa.float64(), FLOATS[:6]),
    "ki": (pa.int64(), INTS),
}
NESTED = pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))])
#: Payload columns (beside ``id``, the keys and ``ts``).
PAYLOAD = {
    "f": pa.float64(),
    "u": pa.string(),
    "b": pa.binary(),
    "d": pa.decimal128(38, 18),
    "st": NESTED,
    "arr": pa.list_(pa.float64()),
    "m": pa.map_(pa.string(), pa.int64()),
    "pt": pa.timestamp("us"),
}
#: Every column of a hostile row, as Arrow types (timestamps in µs: 0001 and 9999 fit).
SCHEMA = pa.schema([("id", pa.int64()), *((k, t) for k, (t, _) in KEY_KINDS.items()),
                    *PAYLOAD.items(), ("ts", pa.timestamp("us"))])
COLUMNS = tuple(SCHEMA.names)


def nullable(values: Iterable[Any]) -> st.SearchStrategy[Any]:
    """One of ``values`` or NULL."""
    return st.sampled_from((*values, None))


def event_times() -> st.SearchStrategy[dt.datetime | None]:
    """Times near BASE (seconds, so duplicates are common), the extremes, or NULL."""
    near = st.integers(-5, 12).map(lambda s: BASE + dt.timedelta(seconds=s))
    return st.one_of(near, near, near, st.sampled_from(EXTREME_TIMES), st.none())


@st.composite
def payloads(draw: Any) -> dict[str, Any]:
    """Hostile payload values: NaN / ±inf, unicode, binary, decimals, nested values, NULLs."""
    text = st.one_of(st.sampled_from(STRINGS), st.text(max_size=4))
    return {
        "f": draw(nullable(FLOATS)),
        "u": draw(st.one_of(st.none(), text)),
        "b": draw(st.one_of(nullable(BINARIES), st.binary(max_size=4))),
        "d": draw(nullable(DECIMALS)),
        "st": draw(st.one_of(st.none(), st.fixed_dictionaries({
            "a": nullable(INTS), "b": st.one_of(st.none(), st.lists(st.one_of(st.none(), text),
                                                                    max_size=3))}))),
        "arr": draw(st.one_of(st.none(), st.lists(nullable(FLOATS), max_size=3))),
        "m": draw(st.one_of(st.none(), st.dictionaries(st.sampled_from(STRINGS[:4]),
                                                       nullable(INTS), max_size=3))),
        # A timestamp payload: usually plain, sometimes one pandas cannot hold (9999-12-31).
        "pt": draw(st.sampled_from([None, BASE, BASE, dt.datetime(1900, 1, 1),
                                    dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)])),
    }


@st.composite
def hostile_rows(draw: Any, ids: Iterable[int]) -> list[dict[str, Any]]:
    """One hostile row per id: every key kind (possibly NULL), payloads, an event time."""
    rows = []
    for i in ids:
        keys = {k: draw(nullable(values)) for k, (_, values) in KEY_KINDS.items()}
        rows.append({"id": i, **keys, **draw(payloads()), "ts": draw(event_times())})
    return rows


def end_row(row_id: int = -1) -> dict[str, Any]:
    """A plain row at :data:`END` (its id is not one of the accounted ones; as a table update
    it is not a tombstone)."""
    return {"id": row_id, **{k: values[1] for k, (_, values) in KEY_KINDS.items()},
            **dict.fromkeys(PAYLOAD), "u": "end", "ts": END}


@st.composite
def hostile_join_logs(draw: Any, max_batches: int = 5, max_rows: int = 4) -> list[JoinBatch]:
    """Batches of hostile rows on both sides (unique ids), then a batch at :data:`END`."""
    log, next_id = [], 0
    for _ in range(draw(st.integers(1, max_batches))):
        sides = []
        for _side in range(2):
            n = draw(st.integers(0, max_rows))
            sides.append(draw(hostile_rows(range(next_id, next_id + n))))
            next_id += n
        log.append(JoinBatch(left=sides[0], right=sides[1]))
    return [*log, JoinBatch(left=[end_row()], right=[end_row(-2)])]


def through_pandas(value: Any) -> Any:
    """``value`` as the operator receives it: PySpark hands rows over as pandas, where a NaN
    in a float column is NULL (nested values keep theirs)."""
    return None if isinstance(value, float) and math.isnan(value) else value


def fits_pandas(row: Mapping[str, Any], columns: Iterable[str]) -> bool:
    """Whether each timestamp of ``row`` in ``columns`` (nested ones too) is one PySpark can
    hand to pandas."""
    lo, hi = PANDAS_RANGE_US

    def fits(v: Any) -> bool:
        if isinstance(v, dt.datetime):
            return lo <= to_us(v) <= hi
        if isinstance(v, Mapping):
            return all(fits(k) and fits(x) for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return all(fits(x) for x in v)
        return True

    return all(fits(row.get(c)) for c in columns)


def oracle_rows(rows: Iterable[Mapping[str, Any]], event_time: str = "ts",
                timestamps: Iterable[str] = ("ts", "pt")) -> list[dict[str, Any]]:
    """The rows as the oracle takes them: NaN as NULL (:func:`through_pandas`), and without
    the rows outside the oracles' contract, which the operator counts or dead-letters and the
    accounting checks: no event time, or a timestamp pandas cannot hold."""
    timestamps = tuple(timestamps)
    return [{k: through_pandas(v) for k, v in r.items()} for r in rows
            if r.get(event_time) is not None and fits_pandas(r, timestamps)]


def spark_dropped_ids(batches: Sequence[Iterable[Mapping[str, Any]]],
                      watermarks_ms: Sequence[int], event_time: str = "ts",
                      timestamps: Sequence[str] = ("ts", "pt")) -> set[int]:
    """The ids Spark's watermark filter removes: in batch ``b``, a row with
    ``t <= W[b - 1]`` (``W`` is 0 before Spark has one, so rows at or before the epoch go
    in every batch; a NULL time is never removed, nor a row with a timestamp pandas cannot
    hold, whose event time interlace makes NULL)."""
    out = set()
    for b, rows in enumerate(batches):
        w_prev = watermarks_ms[b - 1] if b > 0 else 0
        for r in rows:
            t = r.get(event_time)
            if t is not None and fits_pandas(r, timestamps) and to_us(t) <= w_prev * 1000:
                out.add(r["id"])
    return out


def dead_letters(rows: Iterable[Mapping[str, Any]],
                 column: str = "_dead_letter") -> list[dict[str, Any]]:
    """The parsed dead letters among output rows."""
    return [json.loads(r[column]) for r in rows if r.get(column) is not None]


def documented_counters() -> set[str]:
    """Counter names listed in docs/reliability.md's "Hostile input" section (``name``)."""
    text = (Path(__file__).parents[2] / "docs" / "reliability.md").read_text()
    section = text.split("## Hostile input", 1)[1].split("\n## ", 1)[0]
    names = set()
    for name in re.findall(r"`([a-z_]+(?:_left|_right|_left/right)?)`", section):
        if name.endswith("_left/right"):
            base = name.removesuffix("_left/right")
            names |= {f"{base}_left", f"{base}_right"}
        else:
            names.add(name)
    return names


def assert_accounted(inputs: set[int], *, output: set[int], dead: set[int], spark: set[int],
                     counted: Mapping[str, int], held: set[int] = frozenset()) -> None:
    """Every input id is output, a dead letter, removed by Spark, or counted by name.

    ``output``, ``dead`` and ``spark`` must be disjoint subsets of ``inputs`` (``held``: ids
    still in the operator's state at the end, which the test names); the ids left over must
    be exactly as many as the ``counted`` counters say, and each counter used must be
    documented.
    """
    parts = {"output": output, "dead letters": dead, "spark's filter": spark, "held": held}
    seen: set[int] = set()
    for name, ids in parts.items():
        assert ids <= inputs, (name, sorted(ids - inputs))
        assert not ids & seen, (name, sorted(ids & seen))
        seen |= ids
    rest = inputs - seen
    used = {k: v for k, v in counted.items() if v}
    assert len(rest) == sum(used.values()), (sorted(rest), used)
    undocumented = set(used) - documented_counters()
    assert not undocumented, f"counters not in docs/reliability.md: {sorted(undocumented)}"
