"""The spec vocabulary every operator shares: late data, time mode, the late-data fields.

Each operator's own spec (``join/spec.py``, ``window/spec.py``) mixes in
:class:`LateDataFields`; the field checks it calls are in :mod:`.checks`.
"""

from __future__ import annotations

from typing import Literal

from interlace.operators.common.checks import check_late_data_fields
from interlace.operators.errors import ConfigError
from interlace.state.keygroups import validate_key_groups

__all__ = ["DEFAULT_DLQ_HORIZON_MS", "LateData", "LateDataFields", "TimeMode"]

#: Default horizon under ``late_data="dlq"``: how far behind the watermark a late row may be
#: and still reach the operator to be dead-lettered (one day).
DEFAULT_DLQ_HORIZON_MS = 86_400_000

LateData = Literal["drop", "reopen", "dlq"]
"""What happens to a late row.

* ``"drop"``: discarded and counted.
* ``"reopen"``: accepted while within ``allowed_lateness_ms``; past that, dropped and counted.
* ``"dlq"``: sent to the dead-letter column ``_dead_letter`` (SEMANTICS §4).
"""

TimeMode = Literal["event", "processing"]
"""Where event time comes from.

* ``"event"``: a ``TimestampType`` column of the input.
* ``"processing"``: the micro-batch's ``current_timestamp()``.
"""


class LateDataFields:
    """The late-data fields of an operator spec and the watermark values derived from them.

    A mixin for the frozen spec dataclasses (it adds no fields and no slots): the spec
    declares ``late_data``, ``lateness_ms``, ``allowed_lateness_ms``, ``dlq_horizon_ms`` and
    ``key_groups``, and calls :meth:`_check_late_data_fields` and :meth:`_check_key_groups`
    from its ``__post_init__`` where its order of checks wants them.
    """

    __slots__ = ()

    late_data: LateData
    lateness_ms: int
    allowed_lateness_ms: int | None
    dlq_horizon_ms: int
    key_groups: int

    @property
    def allowance_ms(self) -> int:
        """``AL``: the allowed lateness under ``reopen`` (0 under drop and dlq).

        Under reopen, how long a closed window or a buffered row is kept past its close.
        """
        if self.late_data != "reopen":
            return 0
        return self.lateness_ms if self.allowed_lateness_ms is None else self.allowed_lateness_ms

    @property
    def horizon_ms(self) -> int:
        """``H``: how far the Spark watermark is held behind the operator's ``wm``."""
        if self.late_data == "reopen":
            return self.allowance_ms
        if self.late_data == "dlq":
            return self.dlq_horizon_ms
        return 0

    @property
    def watermark_delay_ms(self) -> int:
        """The delay interlace passes to ``withWatermark``: ``lateness_ms + H``."""
        return self.lateness_ms + self.horizon_ms

    def _check_late_data_fields(self) -> None:
        check_late_data_fields(
            self.late_data,
            self.lateness_ms,
            self.allowed_lateness_ms,
            self.dlq_horizon_ms,
            self.allowance_ms,
        )

    def _check_key_groups(self) -> None:
        try:
            validate_key_groups(self.key_groups)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
