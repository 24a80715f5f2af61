"""Validation shared by every operator: spec fields when a spec is built, inputs when prepared.

Every check raises :class:`~interlace.operators.errors.ConfigError` with the field in
backticks, the rule, the value received and the fix (STYLE.md). The spec-level vocabulary is in
:mod:`.spec`, the reserved names in :mod:`.names`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, get_args

from interlace.operators.common.names import CLOCK_COLUMN, RESERVED_PREFIX, TICK_COLUMN
from interlace.operators.errors import ConfigError
from pyspark.sql import DataFrame
from pyspark.sql import types as T

__all__ = [
    "as_name_tuple",
    "check_event_time_columns",
    "check_idle_timeout",
    "check_idle_timeouts",
    "check_key_lists",
    "check_str_fields",
    "check_carried_types",
    "check_event_time",
    "check_input",
    "check_int",
    "check_late_data_fields",
    "check_literal",
    "reject_reserved",
    "require_columns",
    "require_names",
    "require_streaming",
    "side_field",
]


def check_literal(field: str, value: object, alias: Any) -> None:
    """Raise :class:`ConfigError` unless ``value`` is one of the ``Literal`` ``alias`` values."""
    allowed = get_args(alias)
    if value not in allowed:
        msg = f"`{field}` must be one of {', '.join(map(repr, allowed))} (got {field}={value!r})"
        raise ConfigError(msg)


def check_int(
    field: str, value: object, *, minimum: int | None = None, allow_none: bool = False
) -> None:
    """Raise :class:`ConfigError` unless ``value`` is an int (>= ``minimum``)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"`{field}` must be an int number of milliseconds (got {field}={value!r})"
        raise ConfigError(msg)
    if minimum is not None and value < minimum:
        msg = f"`{field}` must be >= {minimum} (got {field}={value})"
        raise ConfigError(msg)


def as_name_tuple(field: str, value: object, *, allow_none: bool = False) -> tuple[str, ...] | None:
    """Normalise a column-name list to a tuple of str, rejecting a bare string."""
    if value is None and allow_none:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        msg = f'`{field}` must be a list of column names (got {field}={value!r}); e.g. ["id"]'
        raise ConfigError(msg)
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            msg = f"`{field}` must hold non-empty column names (got {name!r} in {list(names)})"
            raise ConfigError(msg)
    return names


def require_streaming(df: DataFrame, what: str) -> None:
    """Raise unless ``df`` is a streaming DataFrame."""
    if not df.isStreaming:
        msg = (
            f"{what} must be a streaming DataFrame (spark.readStream...), got a batch DataFrame; "
            "use Spark's batch operators for batch data"
        )
        raise ConfigError(msg)


def require_columns(df: DataFrame, names: Sequence[str], field: str, what: str) -> None:
    """Raise naming ``field`` if any of ``names`` is not a column of ``df``."""
    require_names(df.columns, names, field, what)


def require_names(
    have: Sequence[str], names: Iterable[str], field: str, what: str, *, verb: str = "names"
) -> None:
    """Raise naming ``field`` if any of ``names`` is not in ``have`` (``what``'s columns).

    ``verb`` agrees with ``field``: ``"name"`` where ``field`` names two fields.
    """
    present = set(have)
    missing = [n for n in names if n not in present]
    if missing:
        msg = (
            f"`{field}` {verb} column(s) {missing} absent from {what} (its columns: "
            f"{list(have)}); fix the name or select the column first"
        )
        raise ConfigError(msg)


def reject_reserved(df: DataFrame, what: str) -> None:
    """Raise if ``df`` has a column using interlace's reserved prefix (but a chain's clock)."""
    bad = [c for c in df.columns
           if c.startswith(RESERVED_PREFIX) and c not in (CLOCK_COLUMN, TICK_COLUMN)]
    if bad:
        msg = (
            f"{what} has column(s) {bad} starting with the reserved prefix {RESERVED_PREFIX!r}; "
            "rename them before passing the DataFrame to interlace"
        )
        raise ConfigError(msg)


def check_event_time(df: DataFrame, column: str, field: str, what: str) -> None:
    """Check that ``column`` is a timestamp without a watermark already set on it."""
    require_columns(df, [column], field, what)
    f = df.schema[column]
    if not isinstance(f.dataType, T.TimestampType):
        hint = (
            f"F.col({column!r}).cast('timestamp')"
            if isinstance(f.dataType, T.TimestampNTZType)
            else "F.to_timestamp(...) or F.timestamp_micros(...)"
        )
        msg = (
            f"`{field}` column {column!r} of {what} must be a TimestampType column (Spark's "
            f"withWatermark needs one), got {f.dataType.simpleString()}; convert it, e.g. {hint}"
        )
        raise ConfigError(msg)
    for g in df.schema.fields:
        if "spark.watermarkDelayMs" in (g.metadata or {}):
            msg = (
                f"{what} already carries a watermark on column {g.name!r}; interlace owns "
                "withWatermark (it sets the delay from `lateness_ms` and `late_data`); "
                "remove your withWatermark call and set `lateness_ms` instead"
            )
            raise ConfigError(msg)



def check_input(df: DataFrame, what: str) -> None:
    """Check that ``df`` is streaming, without reserved names or types interlace cannot carry.

    See :func:`reject_reserved` and :func:`check_carried_types`.
    """
    require_streaming(df, what)
    reject_reserved(df, what)
    check_carried_types(df.schema, what)


def check_carried_types(schema: T.StructType, what: str) -> None:
    """Raise :class:`ConfigError` naming the first column whose type interlace cannot carry.

    Every input column goes through ``applyInPandasWithState``, which hands the rows to Python
    as Arrow, then pandas: a type PySpark has no Arrow form for (``interval year to month``,
    the legacy ``interval``, ``char`` / ``varchar``) would fail the query at its first row.
    This check finds it when the operator is prepared, before the query starts.
    """
    from interlace.operators.common.compat import pyspark_version, spark_to_arrow_type

    for f in schema.fields:
        try:
            spark_to_arrow_type(f.dataType)
        except Exception as exc:  # PySpark raises its own error types, by line
            type_name = f.dataType.simpleString()
            fix = (
                f"cast it first, e.g. F.col({f.name!r}).cast('string'), or drop it"
                if type_name != "string"
                else "this is a bug of interlace on this PySpark line: please report it with "
                "the message below"
            )
            reason = " ".join(str(exc).split())[:300]
            msg = (
                f"column {f.name!r} of {what} has type {type_name}, which PySpark "
                f"{pyspark_version()} cannot hand to pandas in applyInPandasWithState "
                f"({type(exc).__name__}: {reason}); {fix}"
            )
            raise ConfigError(msg) from exc


def check_late_data_fields(
    late_data: str,
    lateness_ms: object,
    allowed_lateness_ms: object,
    dlq_horizon_ms: object,
    allowance_ms: int,
) -> None:
    """Validate the late-data fields shared by every operator spec (SEMANTICS §1, §6).

    Args:
        late_data: The (already checked) policy.
        lateness_ms: ``lateness_ms`` as given.
        allowed_lateness_ms: ``allowed_lateness_ms`` as given.
        dlq_horizon_ms: ``dlq_horizon_ms`` as given.
        allowance_ms: The resolved allowance ``AL`` (reopen: the allowed lateness, else 0).
    """
    check_int("lateness_ms", lateness_ms, minimum=0)
    check_int("allowed_lateness_ms", allowed_lateness_ms, allow_none=True)
    check_int("dlq_horizon_ms", dlq_horizon_ms, minimum=1)
    if late_data == "reopen" and allowance_ms <= 0:
        msg = (
            "`allowed_lateness_ms` must be > 0 under late_data='reopen' (got "
            f"allowed_lateness_ms={allowed_lateness_ms}, lateness_ms={lateness_ms}); "
            "set allowed_lateness_ms, or use late_data='drop'"
        )
        raise ConfigError(msg)
    if late_data != "reopen" and allowed_lateness_ms is not None:
        msg = (
            f"`allowed_lateness_ms` only applies to late_data='reopen' (got "
            f"late_data={late_data!r}); remove it or set late_data='reopen'"
        )
        raise ConfigError(msg)


def check_key_lists(spec: Any, hint: str) -> None:
    """Normalise a frozen spec's ``left_keys`` / ``right_keys``: non-empty, of equal length.

    Each becomes a tuple of names (set on ``spec`` in place).

    Args:
        spec: The spec, from its ``__post_init__``.
        hint: The fix for empty keys, in the operator's words.
    """
    left = as_name_tuple("left_keys", spec.left_keys)
    right = as_name_tuple("right_keys", spec.right_keys)
    assert left is not None and right is not None
    if not left or not right:
        msg = (
            f"`left_keys` and `right_keys` must be non-empty (got left_keys={list(left)}, "
            f"right_keys={list(right)}); {hint}"
        )
        raise ConfigError(msg)
    if len(left) != len(right):
        msg = (
            f"`left_keys` and `right_keys` must have equal length (got {list(left)} and "
            f"{list(right)}); they are compared pairwise"
        )
        raise ConfigError(msg)
    object.__setattr__(spec, "left_keys", left)
    object.__setattr__(spec, "right_keys", right)


def check_event_time_columns(spec: Any) -> None:
    """Raise unless ``spec.side_event_time_column(side)`` names a column for both sides."""
    for side in ("left", "right"):
        if spec.side_event_time_column(side) is None:
            msg = (
                f"no event-time column for the {side} input: set `event_time_column` (both "
                f"inputs) or `{side}_event_time_column`"
            )
            raise ConfigError(msg)


def check_idle_timeouts(spec: Any) -> None:
    """Raise unless ``left_idle_timeout_ms`` / ``right_idle_timeout_ms`` are None or > 0."""
    for side in ("left", "right"):
        check_idle_timeout(f"{side}_idle_timeout_ms", getattr(spec, f"{side}_idle_timeout_ms"),
                           f"the {side} input", "None: never idle (docs/idle-inputs.md)")


def check_idle_timeout(field: str, value: object, what: str, never: str) -> None:
    """Raise unless the idle timeout ``value`` of ``what`` is None or a positive int (ms).

    ``never``: how to say "never idle" where ``field`` is set (the message's last words).
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value <= 0):
        msg = (
            f"`{field}` must be a positive int of milliseconds (got {value!r}): how long "
            f"{what} may deliver no row before it is left out of the watermark's minimum; "
            f"{never}"
        )
        raise ConfigError(msg)


def check_str_fields(spec: object, *fields: str) -> None:
    """Raise unless each of ``fields`` of ``spec`` is a str (prefixes, names)."""
    for fname in fields:
        if not isinstance(getattr(spec, fname), str):
            msg = f"`{fname}` must be a str (got {getattr(spec, fname)!r})"
            raise ConfigError(msg)


def side_field(spec: object, side: str, name: str) -> str:
    """The spec field that sets ``side``'s ``name``: ``{side}_{name}`` if given, else ``name``.

    For messages about a per-side override (``left_event_time_column``) or the shared field
    (``event_time_column``) it overrides.
    """
    return f"{side}_{name}" if getattr(spec, f"{side}_{name}") is not None else name
