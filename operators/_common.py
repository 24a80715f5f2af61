"""Transitional: the names ``interlace.pipeline`` still imports from here (issue 15).

Everything that was in this module now lives in :mod:`interlace.operators.common`, split by
theme. ``interlace/pipeline.py`` is being turned into a package in parallel and still imports
these five names from here; once it imports them from ``interlace.operators.common.names``,
``.spec`` and ``.checks``, delete this module.
"""

from __future__ import annotations

from interlace.operators.common.checks import as_name_tuple, check_literal
from interlace.operators.common.names import DEAD_LETTER_COLUMN, RESERVED_PREFIX
from interlace.operators.common.spec import TimeMode

__all__ = ["DEAD_LETTER_COLUMN", "RESERVED_PREFIX", "TimeMode", "as_name_tuple", "check_literal"]
