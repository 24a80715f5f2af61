"""The prepared input every operator builds in Spark: event time, watermark, key group.

Each operator's wrapper (``prepare_join`` in ``join/shim.py``, ``prepare_window`` in
``window/shim.py``) checks its event-time column with :func:`with_event_time`, selects it as
the watermarked ``__il_t`` with :func:`watermarked`, and adds :func:`prepared_columns` (the key
group ``__il_kg``, ``__il_t``, the µs time ``__il_tus`` and the out-of-range flag
``__il_oor``). Neighbours: :mod:`.shim` (the function that reads the prepared input),
:mod:`.names` (the column names).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

from interlace.operators.common.checks import (
    check_event_time,
    check_input,
    require_columns,
    side_field,
)
from interlace.operators.common.connect import check_counters
from interlace.operators.common.idle import with_heartbeats
from interlace.operators.common.names import (
    CLOCK_COLUMN,
    EVENT_TIME_COLUMN,
    KEY_GROUP_COLUMN,
    RESERVED_PREFIX,
    TICK_COLUMN,
    TIME_US_COLUMN,
)
from interlace.operators.common.worker import guard_source_checkout
from interlace.operators.errors import ConfigError
from interlace.state.keygroups import key_group_ids, key_group_sql

__all__ = [
    "HOME_COLUMN",
    "OUT_OF_RANGE_COLUMN",
    "PANDAS_RANGE_US",
    "SIDE_COLUMN",
    "checked_inputs",
    "checked_side",
    "group_key_sql",
    "prepared_columns",
    "shared_clock",
    "two_sided_input",
    "watermarked",
    "with_event_time",
    "without_clock",
]

#: The side tag (int32: 0 left, 1 right) of a two-input table join's prepared row.
SIDE_COLUMN = RESERVED_PREFIX + "side"
#: Under replication (:func:`two_sided_input`): true on the one copy of a replicated row that
#: counts it (the copy in its own key's key group) and on every row of the other side.
HOME_COLUMN = RESERVED_PREFIX + "home"
#: True on a prepared row that held a timestamp PySpark cannot hand to pandas (those values
#: are NULL in the prepared input): the operator's function drops and counts the row
#: (``out_of_range_dropped``; :func:`watermarked`).
OUT_OF_RANGE_COLUMN = RESERVED_PREFIX + "oor"
_EPOCH = _dt.datetime(1970, 1, 1)
#: The timestamps (µs since the epoch, inclusive) interlace hands to Python: from
#: 1677-09-22 to 2262-04-11 UTC. PySpark gives ``applyInPandasWithState`` timestamps as pandas
#: ``datetime64[ns]``, which ends on 1677-09-21T00:12:43 and 2262-04-11T23:47:16; a day is
#: kept back at each end for the session time zone's offset.
PANDAS_RANGE_US = (
    (_dt.datetime(1677, 9, 22) - _EPOCH) // _dt.timedelta(microseconds=1),
    (_dt.datetime(2262, 4, 11) - _EPOCH) // _dt.timedelta(microseconds=1),
)


def with_event_time(df: Any, column: str, field_name: str, what: str, time_mode: str) -> Any:
    """Return ``df`` with its event-time ``column`` checked (synthesized first if processing).

    Args:
        df: An input DataFrame.
        column: Its event-time column.
        field_name: The spec field naming ``column``, for messages.
        what: The input, for messages (``"the left input"``).
        time_mode: ``"processing"`` adds ``column`` as ``current_timestamp()``.

    Raises:
        ConfigError: ``column`` is missing, not a timestamp, already watermarked, or (under
            processing) already present.
    """
    from pyspark.sql import functions as F

    if time_mode == "processing":
        if column in df.columns:
            msg = (
                f"`time_mode`='processing' synthesizes the event-time column {column!r}, but "
                f"{what} already has a column named {column!r}; rename it or set "
                f"`{field_name}` to another name"
            )
            raise ConfigError(msg)
        df = df.withColumn(column, F.current_timestamp())
    check_event_time(df, column, field_name, what)
    return df


def without_clock(df: Any) -> Any:
    """Return ``df`` without a chain's clock and tick columns (:mod:`.names`), if it has them.

    They are not input columns: the clock sets Spark's watermark (:func:`watermarked`), and
    neither is ever buffered, aggregated, joined, output or dead-lettered. Operators read their
    input's schema and columns from this view.
    """
    chain = [c for c in (CLOCK_COLUMN, TICK_COLUMN) if c in df.columns]
    return df.drop(*chain) if chain else df


def shared_clock(sides: Sequence[tuple[Any, str]]) -> list[tuple[Any, str]]:
    """Give every input of a two-input operator a chain clock when one of them has it.

    An input without one gets its own event time as its clock: watermarked on it, with the
    same delay, it moves Spark's watermark and is filtered by it exactly as when watermarked
    on the event time, and the prepared inputs keep one column layout and one watermarked
    column (the one Spark's filter of late rows reads) for their union.

    Args:
        sides: Each input with its event-time column (:func:`checked_inputs`).

    Returns:
        ``sides``, unchanged unless one input has the clock and another has not.
    """
    from pyspark.sql import functions as F

    if not any(CLOCK_COLUMN in df.columns for df, _ in sides):
        return list(sides)
    return [
        (df if CLOCK_COLUMN in df.columns else df.withColumn(CLOCK_COLUMN, F.col(f"`{et}`")), et)
        for df, et in sides
    ]


def watermarked(df: Any, event_time: str, columns: Sequence[str], delay_ms: int) -> Any:
    """Select ``event_time`` as ``__il_t`` and ``columns``, with the watermark on ``__il_t``.

    Also :data:`OUT_OF_RANGE_COLUMN`: true on a row holding a timestamp PySpark cannot hand
    to pandas (outside :data:`PANDAS_RANGE_US`; it fails the query in PySpark's conversion
    to ``datetime64[ns]``). Such values are replaced by NULL here, so the row passes; the
    function then drops and counts it (:class:`~.shim.OperatorFunction`). Such a row's
    ``__il_t`` is NULL: it moves no watermark, and Spark's filter lets it through to be
    counted.

    A chain stage's input (``df`` holds :data:`~.names.CLOCK_COLUMN`, stamped by the channel
    with the upstream stage's watermark) gets the watermark on the clock instead, which is
    selected too: Spark's ``W`` then follows the upstream's watermark minus ``delay_ms``, and
    the operator judges each row's own event time against it (SEMANTICS §11). Spark's filter
    of rows behind the previous ``W`` then reads the clock, which never drops a row (the
    channel stamps ``upstream wm + 999 µs``, and the upstream's ``wm`` never decreases). A
    channel's ticks (:data:`~.names.TICK_COLUMN` true: clock-only rows of upstream
    micro-batches without output) move the watermark and are removed right after it.
    """
    from pyspark.sql import functions as F

    columns = [c for c in columns if c not in (CLOCK_COLUMN, TICK_COLUMN)]
    fits = {c: _fits_pandas(df, c) for c in dict.fromkeys([event_time, *columns])}
    out_of_range = F.lit(False)
    for f in fits.values():
        if f is not None:
            out_of_range = out_of_range | ~f

    def carried(c: str) -> Any:
        col = F.col(f"`{c}`")
        return col if fits[c] is None else F.when(fits[c], col)

    clocked = CLOCK_COLUMN in df.columns
    base = df.select(
        F.when(~out_of_range, F.col(f"`{event_time}`")).alias(EVENT_TIME_COLUMN),
        *[carried(c).alias(c) for c in columns],
        out_of_range.alias(OUT_OF_RANGE_COLUMN),
        *([F.when(~out_of_range, F.col(CLOCK_COLUMN)).alias(CLOCK_COLUMN)] if clocked else []),
        *([F.col(TICK_COLUMN)] if clocked and TICK_COLUMN in df.columns else []),
    )
    marked = base.withWatermark(CLOCK_COLUMN if clocked else EVENT_TIME_COLUMN,
                                f"{delay_ms} milliseconds")
    if TICK_COLUMN not in base.columns:
        return marked
    # The filter names the clock: Spark's optimizer moves a filter below the watermark node
    # unless it reads the watermarked column, and ticks must reach that node.
    tick = F.coalesce(F.col(TICK_COLUMN), F.lit(False)) & F.col(CLOCK_COLUMN).isNotNull()
    return marked.filter(~tick).drop(TICK_COLUMN)


def _fits_pandas(df: Any, column: str) -> Any:
    """A Column: every timestamp in ``column`` (nested ones too) is NULL or fits pandas.

    Fits: within :data:`PANDAS_RANGE_US`. ``None`` for a column whose type holds no timestamp.
    """
    from pyspark.sql import functions as F

    typ = df.schema[column].dataType
    return _fits(F.col(f"`{column}`"), typ) if _holds_timestamp(typ) else None


def _holds_timestamp(typ: Any) -> bool:
    from pyspark.sql import types as T

    if isinstance(typ, T.TimestampType | T.TimestampNTZType):
        return True
    if isinstance(typ, T.StructType):
        return any(_holds_timestamp(f.dataType) for f in typ.fields)
    if isinstance(typ, T.ArrayType):
        return _holds_timestamp(typ.elementType)
    if isinstance(typ, T.MapType):
        return _holds_timestamp(typ.keyType) or _holds_timestamp(typ.valueType)
    return False


def _each_fits(typ: Any) -> Any:
    """The one-argument function ``F.forall`` applies to each element of type ``typ``."""
    return lambda x: _fits(x, typ)


def _fits(col: Any, typ: Any) -> Any:
    """:func:`_fits_pandas` for the value ``col`` of a type that holds a timestamp."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    lo_us, hi_us = PANDAS_RANGE_US
    if isinstance(typ, T.TimestampType):
        return col.isNull() | F.unix_micros(col).between(lo_us, hi_us)
    if isinstance(typ, T.TimestampNTZType):  # wall-clock values: compare with wall clocks
        lo, hi = (_EPOCH + _dt.timedelta(microseconds=us) for us in PANDAS_RANGE_US)
        return col.isNull() | col.between(F.lit(lo).cast("timestamp_ntz"),
                                           F.lit(hi).cast("timestamp_ntz"))
    parts: list[Any] = []
    if isinstance(typ, T.StructType):
        parts = [_fits(col.getField(f.name), f.dataType) for f in typ.fields
                 if _holds_timestamp(f.dataType)]
    elif isinstance(typ, T.ArrayType):
        parts = [F.forall(col, _each_fits(typ.elementType))]
    elif isinstance(typ, T.MapType):
        parts = [F.forall(part, _each_fits(t))
                 for part, t in ((F.map_keys(col), typ.keyType), (F.map_values(col),
                                                                   typ.valueType))
                 if _holds_timestamp(t)]
    every = parts[0]
    for part in parts[1:]:
        every = every & part
    return col.isNull() | F.coalesce(every, F.lit(True))


def prepared_columns(base: Any, sql_keys: Sequence[str], key_groups: int) -> list[Any]:
    """The key group, watermarked time, µs time and out-of-range flag of a prepared row.

    ``__il_kg``, ``__il_t``, ``__il_tus`` and ``__il_oor`` of ``base`` (a frame from
    :func:`watermarked`), then its chain clock if it has one: Spark's stateful operator needs
    the watermarked column among its input's. The key group is that of the SQL expressions
    ``sql_keys`` (0 for every row if none).
    """
    from pyspark.sql import functions as F

    if sql_keys:
        kg = F.expr(key_group_sql(list(sql_keys), key_groups)).cast("int")
    else:
        kg = F.lit(0)
    return [
        kg.alias(KEY_GROUP_COLUMN),
        F.col(EVENT_TIME_COLUMN),
        F.unix_micros(F.col(EVENT_TIME_COLUMN)).alias(TIME_US_COLUMN),
        F.col(OUT_OF_RANGE_COLUMN),
        *([F.col(CLOCK_COLUMN)] if CLOCK_COLUMN in base.columns else []),
    ]


def checked_side(df: Any, spec: Any, side: str, what: str, time_mode: str) -> tuple[Any, str]:
    """Check one input of a two-input operator; return it (event time ready) and that column.

    The input must be streaming without reserved names, its event-time column (the spec's
    ``side_event_time_column(side)``, named in messages by the field that set it) a timestamp
    without a watermark, and its ``{side}_keys`` present.

    Args:
        df: The input DataFrame.
        spec: The operator's spec (``left_keys``, ``right_keys``, event-time fields).
        side: ``"left"`` or ``"right"``.
        what: The input, for messages (``"the left input"``).
        time_mode: ``"event"`` or ``"processing"`` (see :func:`with_event_time`).
    """
    check_input(df, what)
    et = spec.side_event_time_column(side)
    assert et is not None
    df = with_event_time(df, et, side_field(spec, side, "event_time_column"), what, time_mode)
    require_columns(df, spec.left_keys if side == "left" else spec.right_keys, f"{side}_keys", what)
    return df, et


def checked_inputs(
    left: Any,
    right: Any,
    spec: Any,
    counters: Any | None,
    what: tuple[str, str],
    time_mode: str = "event",
    *,
    heartbeat_location: Any | None = None,
) -> tuple[tuple[Any, str], tuple[Any, str]]:
    """Check both inputs of a two-input operator (:func:`checked_side`) and where it runs.

    The installed interlace must be the one the workers import
    (:func:`~.worker.guard_source_checkout`), ``counters`` an accumulator of the same session
    (:func:`~.connect.check_counters`).

    An input with an idle timeout (``spec.left_idle_timeout_ms`` / ``right_idle_timeout_ms``)
    gets its heartbeats under ``heartbeat_location`` (:func:`~.idle.with_heartbeats`).

    Returns:
        Each input, event time ready, with its event-time column.
    """
    guard_source_checkout(left.sparkSession)
    check_counters(left, counters)
    sides = (
        checked_side(left, spec, "left", what[0], time_mode),
        checked_side(right, spec, "right", what[1], time_mode),
    )
    timeouts = [getattr(spec, f"{side}_idle_timeout_ms", None) for side in ("left", "right")]
    watched, _ = with_heartbeats(sides, timeouts, heartbeat_location)
    return watched[0], watched[1]


def two_sided_input(
    spec: Any,
    sides: Sequence[tuple[Any, str]],
    key_types: Sequence[Any],
    payloads: Sequence[Any],
    *,
    replicated_side: int | None = None,
) -> Any:
    """The prepared input of a table join: both inputs tagged by side, in one union.

    Each row holds its side (:data:`SIDE_COLUMN`: 0 for ``sides[0]``, 1 for ``sides[1]``),
    its key group (of its keys cast to the ``key_types`` both sides compare them in, so equal
    keys of both sides share a key group), ``__il_t``, ``__il_tus``, then the columns of both
    inputs under their internal ``payloads`` names (the other side's NULL). Each input gets
    ``withWatermark(event_time, watermark_delay_ms)`` before the union, so Spark combines the
    two watermarks by ``spark.sql.streaming.multipleWatermarkPolicy``.

    With ``replicated_side``, every row of that side is copied into every key group (the
    foreign-key join's right table: each key group then holds the whole table), and every row
    gets :data:`HOME_COLUMN`: true on the copy in the key group of the row's own keys (the one
    that counts it and dead-letters it), and on every row of the other side.

    Args:
        spec: The join's spec: its ``left_keys`` / ``right_keys`` pick the key group, its
            ``watermark_delay_ms`` (``lateness_ms + H``) and ``key_groups`` apply.
        sides: Each input and its event-time column, as :func:`checked_inputs` returns them.
        key_types: The Spark types each side's keys are hashed in (per side, or one list
            both sides share).
        payloads: Their internal payload schemas (Arrow), one field per input column.
        replicated_side: The side whose rows go to every key group, if any.
    """
    from pyspark.sql import functions as F

    sides = shared_clock(sides)
    dfs = [df for df, _ in sides]
    keys = (spec.left_keys, spec.right_keys)
    key_groups, delay_ms = spec.key_groups, spec.watermark_delay_ms
    per_side = (
        key_types if key_types and isinstance(key_types[0], (list, tuple)) else [key_types] * 2
    )
    frames = []
    for side, ((df, et), side_keys) in enumerate(zip(sides, keys, strict=True)):
        base = watermarked(df, et, df.columns, delay_ms)
        carried = without_clock(df)
        kg_inputs = [
            f"CAST(`{k}` AS {t.simpleString()})"
            for k, t in zip(side_keys, per_side[side], strict=True)
        ]
        kg, *times = prepared_columns(base, kg_inputs, key_groups)
        head = [F.lit(side).cast("int").alias(SIDE_COLUMN)]
        if replicated_side is None:
            head += [kg, *times]
        elif side == replicated_side:
            ids = key_group_ids(key_groups)
            every = (
                F.expr(f"array({', '.join(map(str, ids))})")
                if ids != list(range(key_groups))
                else F.sequence(F.lit(0), F.lit(key_groups - 1))
            )
            own = F.expr(key_group_sql(kg_inputs, key_groups)).cast("int")
            head += [F.explode(every).alias(KEY_GROUP_COLUMN), *times,
                     own.alias(HOME_COLUMN)]
        else:
            head += [kg, *times, F.lit(True).alias(HOME_COLUMN)]
        cols = list(head)
        for s, (src, payload) in enumerate(zip(dfs, payloads, strict=True)):
            src = carried if s == side else without_clock(src)
            for f, internal in zip(src.schema.fields, payload.names, strict=True):
                value = F.col(f"`{f.name}`") if s == side else F.lit(None).cast(f.dataType)
                cols.append(value.alias(internal))
        frame = base.select(*cols)
        if replicated_side is not None and side == replicated_side:
            home = F.col(HOME_COLUMN) == F.col(KEY_GROUP_COLUMN)
            frame = frame.withColumn(HOME_COLUMN, home)
        frames.append(frame)
    return frames[0].unionByName(frames[1])


def group_key_sql(column: str, data_type: Any) -> str:
    """The SQL a grouping column's key group is hashed from.

    A window's or a table aggregation's ``group_by`` column, a table aggregation's key.
    The steps put NaN and NULL in one group and ``-0.0`` with ``0.0`` (SQL ``GROUP BY``; NaN
    reaches pandas as NULL anyway), so a float column is hashed with NaN as NULL and ``+ 0.0``:
    otherwise ``xxhash64`` can send the members of one group to two key groups, which would
    emit the group twice (docs/reliability.md, "Hostile input").
    """
    from pyspark.sql import types as T

    if isinstance(data_type, T.FloatType | T.DoubleType):
        typ = data_type.simpleString()
        return (f"IF(isnan(`{column}`), CAST(NULL AS {typ}), "
                f"`{column}` + CAST(0 AS {typ}))")
    return f"`{column}`"
