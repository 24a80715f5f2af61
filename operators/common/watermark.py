"""Watermark arithmetic: the operator watermark ``wm`` and event-time timeouts in Spark's domain.

Spark hands the shim its watermark ``W`` (ms; ``<= 0`` until it has one). The operators decide
with ``wm = W + H`` (``H`` the horizon of the late-data policy: SEMANTICS §1), in µs. A timeout
set at ``T`` fires in the first micro-batch where ``W > T``; the functions below turn an
operator deadline (µs, in ``wm``) into that ``T``. Used by ``join/shim.py`` and
``window/shim.py`` through :mod:`.shim`.
"""

from __future__ import annotations

__all__ = ["NO_DEADLINE_MS", "operator_wm_us", "timeout_ms_when_past", "timeout_ms_when_reached"]

NO_DEADLINE_MS = 253_402_300_799_999
"""The timeout of a key group with state but no deadline (9999-12-31): it never fires."""


def operator_wm_us(spark_wm_ms: int, horizon_ms: int) -> int | None:
    """``wm_us = (W + H) * 1000``, or ``None`` while Spark's ``W <= 0`` (no watermark yet)."""
    return (spark_wm_ms + horizon_ms) * 1000 if spark_wm_ms > 0 else None


def timeout_ms_when_past(close_us: int, horizon_ms: int) -> int:
    """The timeout that fires in the first call where ``wm > close_us`` (strict).

    Spark fires when ``W > timeout``, and ``wm > close`` ⇔ ``W * 1000 > close - H * 1000`` ⇔
    ``W > (close - H * 1000) // 1000``.
    """
    return (close_us - horizon_ms * 1000) // 1000


def timeout_ms_when_reached(deadline_us: int, horizon_ms: int) -> int:
    """The timeout that fires in the first call where ``wm >= deadline_us``.

    Spark fires when ``W > timeout`` and ``(W + H) * 1000 >= D`` ⇔
    ``W > ceil((D - H * 1000) / 1000) - 1``.
    """
    c = deadline_us - horizon_ms * 1000
    return -((-c) // 1000) - 1
