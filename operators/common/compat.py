"""Standard-library names newer than the oldest Python interlace supports (3.10)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 12):
    from typing import override
else:  # declared in pyproject.toml for Python < 3.12
    from typing_extensions import override

__all__ = ["override"]
