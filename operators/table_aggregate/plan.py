"""The table aggregation's plan: a spec resolved against the input table's Arrow schema.

:class:`TableAggregatePlan` is what both stages' steps read (picklable; shipped to the
workers). It fixes the internal columns of the three tables the stages pass along:

* the **prepared input** of stage 1: ``__il_tus`` (µs event time), ``__il_tomb`` (the update
  is a tombstone, SEMANTICS §7), then the table's columns as ``__il_c<i>`` (those the
  aggregation reads; every column under ``dlq``, for the dead letters);
* the **deltas** stage 1 emits and stage 2 reads: per applied update and group it touches,
  ``__il_tus``, ``__il_et`` (the event time, typed), ``__il_seq`` (the key's arrival number),
  ``__il_ho`` / ``__il_hn`` (the row takes an old row out / puts a new one in), the key
  ``__il_k<i>``, the group ``__il_g<i>``, the old and new aggregated values ``__il_o<j>`` /
  ``__il_n<j>``, and ``__il_dl`` under ``dlq`` (a late update's letter, passed through);
* the **output**: the group columns, the aliases, ``op``, ``event_time``, ``version``
  (and ``_dead_letter``).

Neighbours: ``spec.py``, ``step.py``, :mod:`interlace.state.table_aggregate`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from interlace.operators.common.names import DEAD_LETTER_COLUMN, RESERVED_PREFIX
from interlace.operators.errors import ConfigError
from interlace.operators.table_aggregate.spec import TableAggregate
from interlace.state.accumulators import decimal_result
from interlace.state.buffers import TIME_COLUMN
from interlace.state.tables import SEQ_COLUMN, TOMBSTONE_FLAG_COLUMN

__all__ = [
    "EVENT_TIME_IN",
    "with_letters",
    "LETTER_COLUMN",
    "HAS_NEW",
    "HAS_OLD",
    "TOMB_COLUMN",
    "TableAggregatePlan",
]

TOMB_COLUMN = RESERVED_PREFIX + "tomb"
EVENT_TIME_IN = RESERVED_PREFIX + "et"
HAS_OLD, HAS_NEW = RESERVED_PREFIX + "ho", RESERVED_PREFIX + "hn"
#: A late update's dead letter on its way to stage 2 (a channel drops ``_dead_letter``).
LETTER_COLUMN = RESERVED_PREFIX + "dl"
NEXT_VERSION, PRESENT_ROWS = RESERVED_PREFIX + "ver", RESERVED_PREFIX + "n"
GROUP_ROW, AGG_INDEX, VALUE_COUNT = (RESERVED_PREFIX + "grow", RESERVED_PREFIX + "agg",
                                     RESERVED_PREFIX + "cnt")


def with_letters(rows: pa.Table, letters: list[str]) -> pa.Table:
    """``rows``, then one row per dead letter: every column NULL but the last, the letter."""
    if not letters:
        return rows
    schema = rows.schema
    lettered = pa.Table.from_arrays(
        [*(pa.nulls(len(letters), f.type) for f in schema)][:-1]
        + [pa.array(letters, pa.string())], schema=schema)
    return pa.concat_tables([rows, lettered])


def _sum_kind(name: str, typ: pa.DataType, agg: str, alias: str) -> tuple[str, int]:
    """``(kind, scale)`` of a sum / avg over a column of ``typ``, or a config error."""
    if pa.types.is_integer(typ):
        return "int", 0
    if pa.types.is_floating(typ):
        return "float", 0
    if pa.types.is_decimal(typ):
        return "decimal", typ.scale
    msg = (
        f"aggregation `{alias}`: {agg} needs a numeric column; `{name}` is {typ}; cast it "
        "upstream or use min / max / count"
    )
    raise ConfigError(msg)


def _agg_type(agg: str, typ: pa.DataType | None, kind: str) -> pa.DataType:
    """The output type of one aggregation (Spark's, for ``sum`` / ``avg`` of decimals)."""
    if agg in ("count", "count_distinct"):
        return pa.int64()
    assert typ is not None
    if agg in ("min", "max"):
        return typ
    if kind == "decimal":
        return pa.decimal128(*decimal_result(agg, typ.precision, typ.scale))
    if agg == "sum" and kind == "int":
        return pa.int64()
    return pa.float64()


@dataclass(frozen=True)
class TableAggregatePlan:
    """A :class:`TableAggregate` resolved against its input's Arrow schema.

    Attributes:
        spec: The spec.
        names: The input columns carried into stage 1 (``__il_c<i>`` is ``names[i]``).
        types: Their Arrow types.
        key_index: Positions of the key columns in :attr:`names`.
        group_index: Positions of the group columns.
        value_index: Positions of the aggregated columns (:attr:`spec.columns` order).
        time_index: Position of the event-time column.
        sum_kinds: Per aggregation, ``(kind, scale)`` of a sum / avg (else ``("", 0)``).
        fp: The state fingerprint.
    """

    spec: TableAggregate
    names: tuple[str, ...]
    types: tuple[pa.DataType, ...]
    key_index: tuple[int, ...]
    group_index: tuple[int, ...]
    value_index: tuple[int, ...]
    time_index: int
    sum_kinds: tuple[tuple[str, int], ...]
    fp: str
    #: Stage 2 takes the vectorised path for counts and integer sums where it applies
    #: (``counts.py``); ``False`` forces the row-by-row path (tests compare the two).
    vectorised: bool = True

    @classmethod
    def from_schema(cls, spec: TableAggregate, schema: pa.Schema) -> TableAggregatePlan:
        """Resolve ``spec`` against the input table's Arrow ``schema``.

        Raises:
            ConfigError: A key, group, aggregated, tombstone or value column is missing, or a
                sum / avg reads a column that is not numeric.
        """
        have = set(schema.names)
        et = spec.event_time_column
        assert et is not None
        for field_name, cols in (("keys", spec.keys), ("group_by", spec.group_by),
                                 ("aggregations", spec.columns),
                                 ("value_columns", spec.value_columns or ()),
                                 ("event_time_column", [et]),
                                 ("tombstone_column",
                                  [spec.tombstone_column] if spec.tombstone_column else [])):
            missing = [c for c in cols if c not in have]
            if missing:
                msg = (
                    f"`{field_name}` names column(s) {missing} that the input table does not "
                    f"have (its columns: {schema.names}); fix the name or add the column "
                    "upstream"
                )
                raise ConfigError(msg)
        if spec.late_data == "dlq":
            names = tuple(n for n in schema.names if not n.startswith(RESERVED_PREFIX))
        else:
            names = tuple(dict.fromkeys([*spec.keys, *spec.group_by, *spec.columns, et]))
        types = tuple(schema.field(n).type for n in names)
        kinds = []
        for a in spec.aggregations:
            if a.agg in ("sum", "avg"):
                assert a.column is not None
                kinds.append(_sum_kind(a.column, schema.field(a.column).type, a.agg, a.as_))
            else:
                kinds.append(("", 0))
        return cls(
            spec=spec,
            names=names,
            types=types,
            key_index=tuple(names.index(k) for k in spec.keys),
            group_index=tuple(names.index(g) for g in spec.group_by),
            value_index=tuple(names.index(c) for c in spec.columns),
            time_index=names.index(et),
            sum_kinds=tuple(kinds),
            fp=spec.state_fingerprint(list(schema.names)),
        )

    # --- the prepared input of stage 1 -------------------------------------------------

    @property
    def horizon_ms(self) -> int:
        """``H`` of stage 1 (the shared ``OperatorFunction`` reads it)."""
        return self.spec.horizon_ms

    @property
    def dlq(self) -> bool:
        """Whether late updates go to dead letters."""
        return self.spec.late_data == "dlq"

    def column(self, i: int) -> str:
        """The internal name of input column ``i``."""
        return f"{RESERVED_PREFIX}c{i}"

    @property
    def input_schema(self) -> pa.Schema:
        """Stage 1's prepared input: µs time, tombstone flag, then the carried columns."""
        return pa.schema([pa.field(TIME_COLUMN, pa.int64()), pa.field(TOMB_COLUMN, pa.bool_()),
                          *(pa.field(self.column(i), t) for i, t in enumerate(self.types))])

    @property
    def held_schema(self) -> pa.Schema:
        """Stage 1's held updates: the prepared input plus the arrival number."""
        return self.input_schema.append(pa.field(SEQ_COLUMN, pa.int64()))

    def _typed(self, prefix: str, index: tuple[int, ...]) -> list[pa.Field]:
        return [pa.field(f"{RESERVED_PREFIX}{prefix}{j}", self.types[i])
                for j, i in enumerate(index)]

    @property
    def key_fields(self) -> list[pa.Field]:
        """``__il_k<i>``: the key columns."""
        return self._typed("k", self.key_index)

    @property
    def group_fields(self) -> list[pa.Field]:
        """``__il_g<i>``: the group columns."""
        return self._typed("g", self.group_index)

    @property
    def value_fields(self) -> list[pa.Field]:
        """``__il_v<j>``: the aggregated columns, as stage 1 keeps them per key."""
        return self._typed("v", self.value_index)

    @property
    def keys_schema(self) -> pa.Schema:
        """Stage 1's per-key rows (:class:`~interlace.state.table_aggregate.KeyRowsState`)."""
        return pa.schema([*self.key_fields, pa.field(TIME_COLUMN, pa.int64()),
                          pa.field(TOMBSTONE_FLAG_COLUMN, pa.bool_()), *self.group_fields,
                          *self.value_fields])

    @property
    def delta_schema(self) -> pa.Schema:
        """What stage 1 emits and stage 2 reads (the module docstring)."""
        fields = [pa.field(TIME_COLUMN, pa.int64()),
                  pa.field(EVENT_TIME_IN, self.types[self.time_index]),
                  pa.field(SEQ_COLUMN, pa.int64()), pa.field(HAS_OLD, pa.bool_()),
                  pa.field(HAS_NEW, pa.bool_()), *self.key_fields, *self.group_fields,
                  *self._typed("o", self.value_index), *self._typed("n", self.value_index)]
        if self.dlq:
            fields.append(pa.field(LETTER_COLUMN, pa.string()))
        return pa.schema(fields)

    @property
    def state_schemas(self) -> tuple[pa.Schema, pa.Schema]:
        """Stage 1's state tables: the per-key rows, the held updates."""
        return self.keys_schema, self.held_schema

    @property
    def group_state_schemas(self) -> tuple[pa.Schema, pa.Schema]:
        """Stage 2's state tables: the groups, the multisets."""
        return self.groups_schema, self.values_schema

    # --- stage 2 -------------------------------------------------------------------------

    @property
    def multiset_aggs(self) -> tuple[int, ...]:
        """The aggregations held as a multiset: min, max, count_distinct."""
        return tuple(i for i, a in enumerate(self.spec.aggregations)
                     if a.agg in ("min", "max", "count_distinct"))

    def value_type(self, agg: int) -> pa.DataType:
        """The input type of aggregation ``agg``'s column."""
        column = self.spec.aggregations[agg].column
        assert column is not None
        return self.types[self.names.index(column)]

    @property
    def groups_schema(self) -> pa.Schema:
        """Stage 2's per-group rows (:class:`~interlace.state.table_aggregate.GroupsState`)."""
        return pa.schema([*self.group_fields, pa.field(NEXT_VERSION, pa.int64()),
                          pa.field(PRESENT_ROWS, pa.int64()),
                          *(pa.field(f"{RESERVED_PREFIX}a{i}", pa.string())
                            for i in range(len(self.spec.aggregations)))])

    @property
    def values_schema(self) -> pa.Schema:
        """Stage 2's multisets (one typed value column per multiset aggregation)."""
        return pa.schema([pa.field(GROUP_ROW, pa.int64()), pa.field(AGG_INDEX, pa.int32()),
                          pa.field(VALUE_COUNT, pa.int64()),
                          *(pa.field(f"{RESERVED_PREFIX}m{i}", self.value_type(i))
                            for i in self.multiset_aggs)])

    @property
    def output_schema(self) -> pa.Schema:
        """The changelog's Arrow schema (SEMANTICS §10 output columns)."""
        spec = self.spec
        fields = [pa.field(self.names[i], self.types[i]) for i in self.group_index]
        for a, (kind, _) in zip(spec.aggregations, self.sum_kinds, strict=True):
            typ = None if a.column is None else self.types[self.names.index(a.column)]
            fields.append(pa.field(a.as_, _agg_type(a.agg, typ, kind)))
        fields += [pa.field("op", pa.string()),
                   pa.field("event_time", self.types[self.time_index]),
                   pa.field("version", pa.int64())]
        if self.dlq:
            fields.append(pa.field(DEAD_LETTER_COLUMN, pa.string()))
        return pa.schema(fields)
