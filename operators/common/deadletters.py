"""Dead letters (SEMANTICS §4): one JSON object per row that the operator could not use.

Under ``late_data="dlq"`` a late row, or a row without an event time, is emitted in the
``_dead_letter`` column (:data:`.names.DEAD_LETTER_COLUMN`) as
``{"side": ..., "reason": ..., "watermark": wm_ms, "row": {...}}``. The join
(``join/step.py``) reads its rows from Arrow, the window (``window/step.py``) from pandas
(:func:`pandas_records`); both write them with :func:`dead_letter`.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["dead_letter", "json_value", "pandas_records"]


def dead_letter(side: str, reason: str, wm_us: int | None, row: Mapping[str, Any]) -> str:
    """The JSON dead letter of one ``row`` (plain Python values) of input ``side``.

    Args:
        side: ``"left"`` / ``"right"`` (join), ``"input"`` (window).
        reason: ``"late"`` or ``"null_event_time"``.
        wm_us: The operator watermark (written in ms), ``None`` before Spark has one.
        row: Column name -> value.
    """
    wm_ms = None if wm_us is None else wm_us // 1000
    return json.dumps(
        {
            "side": side,
            "reason": reason,
            "watermark": wm_ms,
            "row": {k: json_value(v) for k, v in row.items()},
        }
    )


def json_value(v: Any) -> Any:
    """Encode one input value for a dead letter's ``row`` object (SEMANTICS §4).

    Also the values PySpark puts in pandas cells of nested columns: numpy arrays (array
    columns), numpy scalars and ``NaT`` inside them, ``pandas.Timestamp`` (a ``datetime``).
    """
    if v is None or v is pd.NaT:
        return None
    if isinstance(v, np.ndarray):
        return [json_value(x) for x in v]
    if isinstance(v, np.datetime64):
        return None if np.isnat(v) else json_value(pd.Timestamp(v).to_pydatetime())
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, _dt.datetime):
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(v, _dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes | bytearray):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    return v


def pandas_records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of a pandas frame as dicts of plain Python values (for :func:`dead_letter`).

    Timestamps become ``datetime``, NaT and NaN ``None``, numpy scalars Python scalars. A loop
    over rows: it runs only over dead-lettered rows, off the hot path.
    """
    out = []
    for rec in rows.to_dict("records"):
        row = {}
        for k, v in rec.items():
            if isinstance(v, pd.Timestamp):
                v = v.to_pydatetime()
            elif v is pd.NaT or (isinstance(v, float) and np.isnan(v)):
                v = None
            elif isinstance(v, np.generic):
                v = v.item()
            row[k] = v
        out.append(row)
    return out
