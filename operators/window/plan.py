"""The window plan: a :class:`~.spec.Window` resolved against the input's Arrow schema.

:class:`WindowPlan` is the picklable runtime description shipped to the Python workers (times
in µs): one :class:`AggPlan` per aggregation (its accumulator and result type), the slot
schema of the state, the state fingerprint. Neighbours: ``spec.py`` (the user's spec),
``step.py`` (runs a plan), ``shim.py`` (builds one from the Spark schema).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from interlace.operators.common.checks import require_names
from interlace.operators.common.keytypes import check_key_type
from interlace.operators.errors import ConfigError
from interlace.operators.window.spec import Aggregation, Window, output_names
from interlace.state import blob
from interlace.state.accumulators import Accumulator, decimal_result, make_accumulator
from interlace.state.keygroups import KEY_GROUP_ID_SCHEME
from numpy.typing import NDArray

__all__ = ["AggPlan", "WindowPlan"]


@dataclass(frozen=True)
class AggPlan:
    """One aggregation, resolved: input column, accumulator dtype, output kind."""

    agg: str
    mode: str | None
    column: str | None
    alias: str
    dtype: str | None
    out_timestamp: bool
    cap: int | None
    result_type: pa.DataType = pa.int64()

    def accumulator(self) -> Accumulator[Any]:
        """Return this aggregation's accumulator (one shared instance per configuration)."""
        return _accumulator(self.agg, self.mode, self.column, self.dtype, self.cap)


@functools.lru_cache(maxsize=256)
def _accumulator(
    agg: str, mode: str | None, column: str | None, dtype: str | None, cap: int | None
) -> Accumulator[Any]:
    """Build an accumulator once per configuration.

    :func:`step_window` asks for each aggregation's accumulator several times per call, and
    :func:`make_accumulator` validates its arguments each time. An accumulator holds only its
    configuration and no method changes it, so one instance serves every caller. A process
    runs a handful of plans: 256 entries bound the cache without ever evicting in practice.
    """
    return make_accumulator(
        agg, mode, column=column, dtype=dtype, max_distinct_values_per_group=cap
    )


@dataclass(frozen=True)
class WindowPlan:
    """Everything :func:`step_window` needs (times in µs)."""

    kind: str
    duration_us: int
    hop_us: int
    gap_us: int
    late_data: str
    allowance_us: int
    horizon_ms: int
    group_by: tuple[str, ...]
    group_schema: pa.Schema
    aggs: tuple[AggPlan, ...]
    columns: tuple[str, ...]
    max_groups: int
    name: str
    start_column: str
    end_column: str
    fp: str

    @property
    def output_names(self) -> list[str]:
        """Output column names in order."""
        bounds, aliases = (self.start_column, self.end_column), [a.alias for a in self.aggs]
        return output_names(*bounds, self.group_by, aliases, self.late_data)

    @property
    def keeps_last_output(self) -> bool:
        """Sessions under reopen keep what each slot last emitted, to retract it exactly."""
        return self.kind == "session" and self.late_data == "reopen"

    @property
    def slot_schema(self) -> pa.Schema:
        """Arrow schema of the slot table (one row per (window, group)).

        ``emitted``: emitted at least once; ``revision``: of the last emit (-1: never);
        ``dirty``: changed since its last emit (new windows are dirty), so it emits when it
        closes. Sessions under reopen also keep their last emitted bounds and aggregates
        (``__last_*``): a session absorbed by a merge is retracted with exactly those.
        """
        base = [
            pa.field("start", pa.int64()),
            pa.field("end", pa.int64()),
            pa.field("emitted", pa.bool_()),
            pa.field("revision", pa.int64()),
            pa.field("dirty", pa.bool_()),
        ]
        last: list[pa.Field] = []
        if self.keeps_last_output:
            last = [pa.field("__last_start", pa.int64()), pa.field("__last_end", pa.int64())]
            last += [pa.field(f"__last_{i}", a.result_type) for i, a in enumerate(self.aggs)]
        return pa.schema(base + list(self.group_schema) + last)

    def new_slots(
        self,
        starts: NDArray[np.int64],
        ends: NDArray[np.int64],
        groups: pa.Table,
        src: NDArray[np.int64],
    ) -> pa.Table:
        """Slots for new windows ``[starts, ends)`` with the groups of rows ``src``."""
        n = len(starts)
        cols: dict[str, Any] = {
            "start": pa.array(starts, pa.int64()),
            "end": pa.array(ends, pa.int64()),
            "emitted": pa.array(np.zeros(n, dtype=bool)),
            "revision": pa.array(np.full(n, -1, dtype=np.int64)),
            "dirty": pa.array(np.ones(n, dtype=bool)),
            **{name: groups.column(name).take(pa.array(src)) for name in self.group_by},
        }
        for f in self.slot_schema:
            if f.name.startswith("__last_"):
                cols[f.name] = pa.nulls(n, f.type)
        return pa.table(cols, schema=self.slot_schema)

    @classmethod
    def from_schema(cls, spec: Window, schema: pa.Schema) -> WindowPlan:
        """Resolve ``spec`` against the input's Arrow schema (no Spark needed)."""
        names = tuple(schema.names)
        needed = [*spec.group_by, *(a.column for a in spec.aggregations if a.column)]
        # Both fields in one message: "`group_by`/`aggregations` name column(s) ...".
        require_names(names, needed, "group_by`/`aggregations", "the input", verb="name")
        for g in spec.group_by:
            check_key_type("group_by", g, schema.field(g).type, "the input")
        aggs = []
        for a in spec.aggregations:
            typ = schema.field(a.column).type if a.column else None
            dtype, out_ts = _acc_dtype(a, typ)
            aggs.append(
                AggPlan(
                    a.agg,
                    a.mode if a.agg == "count_distinct" else None,
                    a.column,
                    a.as_,
                    dtype,
                    out_ts,
                    a.max_distinct_values_per_group,
                    _result_arrow_type(a.agg, dtype, typ),
                )
            )
        d = (spec.duration_ms or 0) * 1000
        return cls(
            kind=spec.kind,
            duration_us=d,
            hop_us=(spec.hop_ms or 0) * 1000 if spec.kind == "hopping" else d,
            gap_us=(spec.gap_ms or 0) * 1000,
            late_data=spec.late_data,
            allowance_us=spec.allowance_ms * 1000,
            horizon_ms=spec.horizon_ms,
            group_by=tuple(spec.group_by),
            group_schema=pa.schema([schema.field(g) for g in spec.group_by]),
            aggs=tuple(aggs),
            columns=names,
            max_groups=int(spec.max_groups_per_window or 0),
            name=spec.name,
            start_column=spec.window_start_column,
            end_column=spec.window_end_column,
            fp=blob.fingerprint(
                {
                    "kind": spec.kind,
                    "d": spec.duration_ms,
                    "hop": spec.hop_ms,
                    "gap": spec.gap_ms,
                    "group_by": list(spec.group_by),
                    "al": spec.allowance_ms,
                    "late": spec.late_data,
                    "key_groups": spec.key_groups,
                    "key_group_ids": KEY_GROUP_ID_SCHEME,
                    "aggs": [[a.agg, a.column, a.as_, a.mode] for a in spec.aggregations],
                    "types": [str(schema.field(c).type) for c in needed],
                }
            ),
        )


def _result_arrow_type(agg: str, dtype: str | None, typ: pa.DataType | None) -> pa.DataType:
    """Arrow type of an aggregation's raw result (timestamps as int64 µs)."""
    if agg in ("count", "count_distinct"):
        return pa.int64()
    if agg in ("sum", "avg") and typ is not None and pa.types.is_decimal(typ):
        return pa.decimal128(*decimal_result(agg, typ.precision, typ.scale))
    if agg == "avg" or dtype == "float64":
        return pa.float64()
    if dtype == "int64":
        return pa.int64()
    if dtype == "bool":
        return pa.bool_()
    assert typ is not None
    return typ


def _acc_dtype(a: Aggregation, typ: pa.DataType | None) -> tuple[str | None, bool]:
    """Accumulator dtype and whether the output is a timestamp, for one aggregation."""
    if typ is None or a.agg in ("count", "count_distinct"):
        if a.agg == "count_distinct" and typ is not None and pa.types.is_timestamp(typ):
            return "int64", False
        return None, False
    if pa.types.is_timestamp(typ):
        if a.agg in ("sum", "avg"):
            msg = f"aggregation `{a.as_}`: {a.agg} of timestamp column {a.column!r} is not defined"
            raise ConfigError(msg)
        return "int64", True
    if pa.types.is_integer(typ):
        return "int64", False
    if pa.types.is_floating(typ):
        return "float64", False
    if pa.types.is_decimal(typ):  # sum / avg exact, as Spark's (state/accumulators/decimals.py)
        return f"decimal({typ.precision},{typ.scale})", False
    if pa.types.is_boolean(typ):
        if a.agg in ("sum", "avg"):
            msg = f"aggregation `{a.as_}`: {a.agg} of boolean column {a.column!r}; cast it to int"
            raise ConfigError(msg)
        return "bool", False
    if a.agg in ("sum", "avg"):
        msg = (
            f"aggregation `{a.as_}`: {a.agg} needs a numeric column ({a.column!r} is {typ}); "
            "cast it to double or bigint first"
        )
        raise ConfigError(msg)
    return "object", False
