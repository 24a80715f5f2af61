"""Spec resolution the oracles share: late-data mode, time mode, horizon, output columns.

Each oracle reads its duck-typed spec in its own ``_resolve``; the fields every operator
has alike are resolved here, once (``SEMANTICS.md`` §1 for the horizon, §4 for the
dead-letter column; each join side's event-time column and output prefix), and read as
``resolve.lateness(spec, late_data)``. Only what an
oracle needs to run is checked; the operator's spec validation is the place for friendly
config errors. ``__all__`` holds the public constants; the functions serve the oracles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from interlace.testing.oracles.rows import DEAD_LETTER_COLUMN

__all__ = ["DEFAULT_DLQ_HORIZON_MS", "LATE_DATA_MODES"]

LATE_DATA_MODES = ("drop", "reopen", "dlq")
"""Every supported ``late_data`` mode."""

DEFAULT_DLQ_HORIZON_MS = 86_400_000
"""Horizon ``H`` under ``late_data="dlq"`` when ``dlq_horizon_ms`` is not set (one day)."""

SIDES = ("left", "right")
"""A join's two sides."""


def check_modes(spec: object, late_data: object) -> str:
    """Check the ``late_data`` mode and the spec's ``time_mode``.

    Args:
        spec: The duck-typed spec (its ``time_mode`` is read; missing means ``"event"``).
        late_data: The ``late_data`` value the oracle read from the spec.

    Returns:
        The ``late_data`` mode.

    Raises:
        ValueError: If either mode is unknown.

    """
    if late_data not in LATE_DATA_MODES:
        msg = f"`late_data` must be one of {LATE_DATA_MODES} (got {late_data!r})"
        raise ValueError(msg)
    time_mode = getattr(spec, "time_mode", None) or "event"
    if time_mode not in ("event", "processing"):
        msg = f"`time_mode` must be 'event' or 'processing' (got {time_mode!r})"
        raise ValueError(msg)
    return str(late_data)


@dataclass(frozen=True)
class Lateness:
    """The spec's lateness, resolved (ms).

    Attributes:
        horizon_ms: ``H``, so that ``wm = W + H``: ``allowed_lateness_ms`` under reopen,
            ``dlq_horizon_ms`` (default one day) under dlq, 0 under drop.
        allowance_ms: ``AL``, how long past its close a row or window is kept under
            reopen (the allowed lateness); 0 otherwise.
        delay_ms: The ``withWatermark`` delay the library sets: ``lateness_ms + H``.

    """

    horizon_ms: int
    allowance_ms: int
    delay_ms: int


def lateness(spec: object, late_data: str) -> Lateness:
    """Resolve the horizon ``H`` (``SEMANTICS.md`` §1) and the reopen allowance ``AL``.

    Args:
        spec: The duck-typed spec: ``lateness_ms``, ``allowed_lateness_ms`` (default
            ``lateness_ms``), ``dlq_horizon_ms`` (default one day).
        late_data: The checked ``late_data`` mode.

    Returns:
        ``H``, ``AL`` and the watermark delay.

    Raises:
        ValueError: If the allowed lateness is not positive under reopen.

    """
    lateness_ms = int(getattr(spec, "lateness_ms", 0) or 0)
    if late_data == "reopen":
        allowed = getattr(spec, "allowed_lateness_ms", None)
        allowed_ms = lateness_ms if allowed is None else int(allowed)
        if allowed_ms <= 0:
            msg = f"`allowed_lateness_ms` must be > 0 under reopen (got {allowed_ms})"
            raise ValueError(msg)
        horizon_ms, allowance_ms = allowed_ms, allowed_ms
    elif late_data == "dlq":
        horizon = getattr(spec, "dlq_horizon_ms", None)
        horizon_ms = DEFAULT_DLQ_HORIZON_MS if horizon is None else int(horizon)
        allowance_ms = 0
    else:
        horizon_ms, allowance_ms = 0, 0
    return Lateness(
        horizon_ms=horizon_ms, allowance_ms=allowance_ms, delay_ms=lateness_ms + horizon_ms
    )


def output_columns(
    columns: Sequence[str], late_data: str, fix: str | None = None
) -> tuple[str, ...]:
    """Append ``_dead_letter`` under dlq and check that no two output columns collide.

    Args:
        columns: The output columns before the dead-letter column.
        late_data: The ``late_data`` mode.
        fix: How to fix a collision; given, the message names the colliding columns and it
            (else every output column).

    Raises:
        ValueError: If two output columns have the same name.

    """
    finished = list(columns)
    if late_data == "dlq":
        finished.append(DEAD_LETTER_COLUMN)
    if len(set(finished)) != len(finished):
        if fix is None:
            msg = f"output columns collide: {finished}"
        else:
            duplicates = sorted({name for name in finished if finished.count(name) > 1})
            msg = f"output columns collide: {duplicates}; {fix}"
        raise ValueError(msg)
    return tuple(finished)


def event_time_columns(spec: object) -> dict[str, str]:
    """Return each join side's event-time column: a per-side override wins over the shared one.

    Raises:
        ValueError: If a side has none.

    """
    shared = getattr(spec, "event_time_column", None)
    columns: dict[str, str] = {}
    for side in SIDES:
        name = getattr(spec, f"{side}_event_time_column", None) or shared
        if name is None:
            msg = f"no event-time column for the {side} side (set `event_time_column`)"
            raise ValueError(msg)
        columns[side] = str(name)
    return columns


def prefixes(spec: object) -> dict[str, str]:
    """Return each join side's output prefix (default ``left_`` / ``right_``; "" is allowed)."""
    chosen = {side: getattr(spec, f"{side}_prefix", None) for side in SIDES}
    return {side: f"{side}_" if chosen[side] is None else str(chosen[side]) for side in SIDES}
