"""Operator counters: what the Python workers add per call, and how an accumulator merges it.

Every ``step`` call returns per-call counts; the shim (:class:`.shim.OperatorFunction`) adds them
with :func:`add_counts`. With an accumulator from :func:`interlace.metrics.counters` (which
uses :class:`CounterParam`) each call's counts are keyed by (operator, key group, micro-batch),
so a task Spark runs again replaces its earlier counts instead of adding to them; the
:mod:`interlace.metrics` docstring tells the whole rule. :mod:`interlace.metrics` re-exports
these names; the operators import them from here (``interlace.operators`` imports nothing
from the ``interlace`` facade modules).
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.accumulators import AccumulatorParam

__all__ = [
    "KEEP_BATCHES", "CallCounts", "CounterParam", "CounterTotals", "add_counts", "new_operator_id",
]

KEEP_BATCHES = 16
"""Micro-batches per operator whose entries the driver keeps (older ones are folded)."""

_FOLDED_MEMORY = 1024  # folded batch timestamps remembered per operator, to ignore repeats


def new_operator_id() -> str:
    """A fresh operator identity (taken on the driver when the operator function is built)."""
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class CallCounts:
    """One operator call's counts and what identifies the call across task attempts.

    Attributes:
        op: The operator instance (:func:`new_operator_id`).
        key_group: Spark's grouping key of the call (a tuple: the key group id).
        batch_ms: The micro-batch's processing timestamp (``getCurrentProcessingTimeMs()``).
        counts: Counter name -> count.
    """

    op: str
    key_group: Hashable
    batch_ms: int
    counts: Mapping[str, int]


EntryKey = tuple[str, Hashable, int]


class CounterTotals(dict[str, int]):
    """An accumulator value: the dict name -> total, plus the entries the totals sum.

    The dict items are the totals (what ``.value`` shows). ``entries`` holds the counts of each
    (operator, key group, batch) still kept, ``base`` the folded batches and plain-dict adds.
    """

    def __init__(self, base: Mapping[str, int] | None = None) -> None:
        super().__init__()
        self.entries: dict[EntryKey, dict[str, int]] = {}
        self.base: dict[str, int] = {}
        # Operator -> batch timestamp -> key groups with an entry (insertion order = arrival).
        self.recent: dict[str, dict[int, set[Hashable]]] = {}
        self.folded: dict[str, dict[int, None]] = {}
        if base:
            self.add_plain(base)

    def add_plain(self, counts: Mapping[str, int]) -> None:
        """Add counts that carry no call identity (always additive)."""
        for k, v in counts.items():
            self.base[k] = self.base.get(k, 0) + int(v)
            self[k] = self.get(k, 0) + int(v)

    def add_call(self, call: CallCounts) -> None:
        """Worker side: add one call's counts to its entry (calls within one task add up)."""
        key = (call.op, call.key_group, int(call.batch_ms))
        self._set(key, _summed(self.entries.get(key), call.counts))

    def merge(self, update: CounterTotals) -> None:
        """Driver side: take a task's entries, replacing the same (op, key group, batch)."""
        self.add_plain(update.base)
        for key, counts in update.entries.items():
            op, _, batch_ms = key
            if batch_ms in self.folded.get(op, ()):
                continue  # a repeat of a batch already folded into the base
            self._set(key, counts)
        self._compact()

    def _set(self, key: EntryKey, counts: Mapping[str, int]) -> None:
        old = self.entries.get(key, {})
        for k in set(old) | set(counts):
            self[k] = self.get(k, 0) - old.get(k, 0) + int(counts.get(k, 0))
        self.entries[key] = dict(counts)
        op, kg, batch_ms = key
        self.recent.setdefault(op, {}).setdefault(batch_ms, set()).add(kg)

    def _compact(self) -> None:
        for op, batches in self.recent.items():
            while len(batches) > KEEP_BATCHES:
                batch_ms = next(iter(batches))
                for kg in batches.pop(batch_ms):
                    for k, v in self.entries.pop((op, kg, batch_ms)).items():
                        self.base[k] = self.base.get(k, 0) + v
                folded = self.folded.setdefault(op, {})
                folded[batch_ms] = None
                while len(folded) > _FOLDED_MEMORY:
                    del folded[next(iter(folded))]


def _summed(a: Mapping[str, int] | None, b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a or {})
    for k, v in b.items():
        out[k] = out.get(k, 0) + int(v)
    return out


class CounterParam(AccumulatorParam):  # type: ignore[type-arg]
    """Merges :class:`CounterTotals` by replacement, plain dicts by addition.

    A call's counts add up within a task, and a task's entries replace the same (operator, key
    group, micro-batch) on the driver; plain dicts name -> int add (for code that adds its own
    counts).
    """

    def zero(self, value: Any) -> CounterTotals:
        """Return empty totals."""
        return CounterTotals()

    def addInPlace(self, a: Any, b: Any) -> CounterTotals:  # noqa: N802
        """Merge ``b`` (a :class:`CallCounts`, a task's :class:`CounterTotals` or a dict)."""
        # Not yet CounterTotals: the value was set to a plain dict on the driver.
        totals = a if isinstance(a, CounterTotals) else CounterTotals(a)
        if isinstance(b, CallCounts):
            totals.add_call(b)
        elif isinstance(b, CounterTotals):
            totals.merge(b)
        else:
            totals.add_plain(b)
        return totals


def add_counts(sink: Any, op: str, key: Any, state: Any, counts: Mapping[str, int]) -> None:
    """Add one operator call's ``counts`` to ``sink`` (an operator's ``counters``).

    An accumulator from :func:`interlace.metrics.counters` gets them as :class:`CallCounts`
    keyed by ``op``, the call's grouping ``key`` and ``state.getCurrentProcessingTimeMs()``, so
    that a repeated call for the same key group and micro-batch replaces its earlier counts; any
    other sink with an ``add`` (``interlace.testing.local``'s, a user's own accumulator) gets the
    plain dict.
    """
    if isinstance(getattr(sink, "accum_param", None), CounterParam):
        kg = tuple(k.item() if hasattr(k, "item") else k for k in key)
        sink.add(CallCounts(op, kg, int(state.getCurrentProcessingTimeMs()), dict(counts)))
    else:
        sink.add(counts)
