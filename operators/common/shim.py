"""The ``applyInPandasWithState`` side every operator shares: the ``GroupState`` chores.

Each operator's ``shim.py`` (``join/shim.py``, ``window/shim.py``) subclasses
:class:`OperatorFunction` (the function handed to ``applyInPandasWithState``: it implements
``_call``, returning a :class:`CallResult`) and
:class:`BoundOperator` (the operator bound to its prepared input); it prepares that input with
:mod:`.prepare`. Only the shims touch ``GroupState``; the pure steps (``step.py``) get the
watermark as an argument.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
from interlace.operators.common.arrow import frames_to_table, table_to_pandas
from interlace.operators.common.compat import override
from interlace.operators.common.counters import add_counts, new_operator_id
from interlace.operators.common.names import KEY_GROUP_COLUMN
from interlace.operators.common.prepare import (
    HOME_COLUMN,
    OUT_OF_RANGE_COLUMN,
    SIDE_COLUMN,
    two_sided_input,
)
from interlace.operators.common.watermark import (
    NO_DEADLINE_MS,
    operator_wm_us,
    timeout_ms_when_past,
)
from interlace.operators.common.worker import prepare_worker
from interlace.operators.errors import ConfigError
from interlace.state.blob import (
    DEFAULT_STATE_ENCODING,
    STATE_ENCODINGS,
    from_state_value,
    to_state_value,
)
from interlace.state.errors import StateDecodeError
from interlace.state.tables import TablesState

__all__ = [
    "BoundOperator",
    "CallResult",
    "Frames",
    "OperatorFunction",
    "STATE_ENCODING_CONF",
    "TableStepResult",
    "TablesFunction",
    "bind_changelog_join",
    "bound_operators",
    "changelog_output_fields",
    "state_encoding_of",
]

_B = TypeVar("_B", bound="BoundOperator")

#: The operators bound while :func:`bound_operators` runs (None: not collecting).
_BOUND: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "interlace_bound_operators", default=None)


@contextlib.contextmanager
def bound_operators() -> Iterator[list[Any]]:
    """Collect every :class:`BoundOperator` bound inside the block, in order.

    ``interlace inspect`` builds a pipeline's query as ``interlace run`` does and takes its
    operator's plan from here: the plan decodes the state and gives each held item its
    release rule.
    """
    found: list[Any] = []
    token = _BOUND.set(found)
    try:
        yield found
    finally:
        _BOUND.reset(token)

STATE_ENCODING_CONF = "spark.interlace.state.encoding"
"""The Spark setting that says how an operator built in the session holds its state blob:
``base64`` (default: a string column, the blob in base64) or ``binary`` (a binary column, as
checkpoints of earlier builds do; ``interlace run`` picks it for them by itself). See
:mod:`interlace.state.blob` and docs/state.md."""

Frames = Iterator[pd.DataFrame]
"""What Spark hands an ``applyInPandasWithState`` function per key group: pandas frames."""


@dataclass(frozen=True)
class CallResult:
    """What one call of an operator's pure step leaves for Spark.

    Attributes:
        output: The rows to yield, or ``None`` if there are none.
        counts: The call's counters (see :mod:`.counters`).
        stored: ``(blob, timeout_ms)``: the key group's new state and its event-time timeout in
            Spark's domain (:mod:`.watermark`); ``None`` when the key group holds nothing.
    """

    output: pd.DataFrame | None
    counts: Mapping[str, int]
    stored: tuple[bytes, int] | None


class OperatorFunction:
    """Base of the ``applyInPandasWithState`` functions (picklable; holds only the plan).

    :meth:`__call__` is the part every operator shares; a subclass implements :meth:`_call`,
    which decodes the state, runs the operator's pure step and encodes the new state.
    """

    #: How the blob is stored (:data:`interlace.state.blob.STATE_ENCODINGS`); set by
    #: :meth:`BoundOperator.bind` from :data:`STATE_ENCODING_CONF`. Either is read.
    state_encoding: str = "binary"

    def __init__(self, plan: Any, counters: Any | None = None) -> None:
        self.plan = plan
        self.counters = counters
        self.op_id = new_operator_id()  # keys its counters (interlace.metrics)

    def __call__(
        self, key: Any, frames: Frames, state: Any
    ) -> Iterator[pd.DataFrame]:
        """Process one key group (Spark calls this; see the class docstring).

        Prepares the worker once, runs :meth:`_call` with ``wm_us = (W + H) * 1000``
        (``None`` while Spark's ``W <= 0``), yields the output, adds the counters, then writes
        the state last: removes it, or stores the blob and sets the timeout, never behind
        ``W`` (Spark rejects that) nor below 1.
        """
        prepare_worker()
        spark_wm_ms = int(state.getCurrentWatermarkMs())
        wm_us = operator_wm_us(spark_wm_ms, self.plan.horizon_ms)
        dropped: dict[str, int] = {}
        try:
            done = self._call(from_state_value(state.get[0]) if state.exists else None,
                              _in_range_rows(frames, dropped), wm_us)
        except StateDecodeError as exc:  # name where the bad blob is (issue 13)
            raise type(exc)(f"{exc} ({self.operator_name} operator, key group "
                            f"{_key_group(key)})") from exc
        if done.output is not None:
            yield done.output
        counts = {**done.counts, **dropped} if dropped else done.counts
        if self.counters is not None and counts:
            add_counts(self.counters, self.op_id, key, state, counts)
        # State last: outputs exist before anything is evicted from the stored state.
        if done.stored is None:
            state.remove()
        else:
            state.update((to_state_value(done.stored[0], self.state_encoding),))
            state.setTimeoutTimestamp(max(done.stored[1], spark_wm_ms, 1))

    def _call(
        self, blob: bytes | None, frames: Frames, wm_us: int | None
    ) -> CallResult:
        """Run one call on the key group's stored ``blob`` (``None``: no state yet)."""
        raise NotImplementedError

    @property
    def operator_name(self) -> str:
        """The operator's name in messages (``Join``, ``Window``, ``StreamTableJoin``, ...)."""
        return type(self).__name__.removesuffix("Function")


def _in_range_rows(frames: Frames, dropped: dict[str, int]) -> Frames:
    """Spark's frames without the rows the prepared input flagged out of range, counted.

    A row with a timestamp PySpark cannot hand to pandas reaches the function with that value
    NULL and :data:`~.prepare.OUT_OF_RANGE_COLUMN` true (:func:`~.prepare.watermarked`): it
    is dropped here, before the step, and counted in ``dropped`` as
    ``out_of_range_dropped`` (``_left`` / ``_right`` by its side tag; a row replicated into
    every key group only in its home key group). Frames without the flag (tests building
    them by hand) pass as they are.
    """
    for frame in frames:
        if OUT_OF_RANGE_COLUMN in frame.columns:
            bad = np.asarray(frame[OUT_OF_RANGE_COLUMN], dtype=bool)
            if bad.any():
                counted = bad
                if HOME_COLUMN in frame.columns:
                    counted = bad & np.asarray(frame[HOME_COLUMN], dtype=bool)
                if SIDE_COLUMN in frame.columns:
                    sides = np.asarray(frame[SIDE_COLUMN])[counted]
                    for s, name in enumerate(("left", "right")):
                        n = int((sides == s).sum())
                        if n:
                            key = f"out_of_range_dropped_{name}"
                            dropped[key] = dropped.get(key, 0) + n
                elif counted.any():
                    dropped["out_of_range_dropped"] = (
                        dropped.get("out_of_range_dropped", 0) + int(counted.sum())
                    )
                frame = frame[~bad].reset_index(drop=True)
        yield frame


def _key_group(key: Any) -> Any:
    """The key group id of Spark's grouping key (a one-element tuple), for messages."""
    return key[0] if isinstance(key, tuple) and len(key) == 1 else key


class TableStepResult(Protocol):
    """What a table join's pure step returns (``stream_table``, ``table``, ``foreign_key``)."""

    @property
    def output(self) -> pa.Table:
        """The output rows, then the dead letters."""

    @property
    def state(self) -> TablesState:
        """The key group's state after the call."""

    @property
    def next_due_us(self) -> int | None:
        """The earliest event time among held rows (due when ``wm >`` it), or ``None``."""

    @property
    def counters(self) -> dict[str, int]:
        """The call's counters."""


class TablesFunction(OperatorFunction):
    """Base of the table joins' functions: the key group's state is a :class:`TablesState`.

    Per call it decodes the key group's blob (its tables in the plan's ``state_schemas``;
    empty without a blob), runs the operator's pure step with ``wm_us = (W + H) * 1000``
    (``None`` while Spark's ``W <= 0``) on the frames in the plan's ``input_schema``, yields
    the output, writes the state last, and stores what remains with one event-time timeout
    at the earliest deadline (:meth:`_deadlines_ms`: a held row is due when ``wm > t``;
    :data:`NO_DEADLINE_MS` without one). A subclass names its :attr:`state_type` and its
    :attr:`pure_step`.
    """

    state_type: ClassVar[type[TablesState]]
    pure_step: ClassVar[Callable[..., TableStepResult]]
    """The operator's pure ``step(plan, state, batch, wm_us)`` (a ``staticmethod``)."""

    def _deadlines_ms(self, result: TableStepResult) -> list[int]:
        """The stored state's deadlines in Spark's domain: a held row is due when ``wm > t``."""
        if result.next_due_us is None:
            return []
        return [timeout_ms_when_past(result.next_due_us, self.plan.horizon_ms)]

    @override
    def _call(self, blob: bytes | None, frames: Frames, wm_us: int | None) -> CallResult:
        """Decode the state, run :attr:`pure_step`, encode what remains."""
        plan = self.plan
        schemas = plan.state_schemas
        if blob is not None:
            state = self.state_type.decode(blob, plan.fp, *schemas)
        else:
            state = self.state_type.empty(*schemas)
        result = self.pure_step(plan, state, frames_to_table(plan.input_schema, frames), wm_us)
        stored = None
        if result.state.num_rows:
            deadlines = self._deadlines_ms(result)
            timeout = min(deadlines) if deadlines else NO_DEADLINE_MS
            stored = (result.state.encode(plan.fp), timeout)
        output = table_to_pandas(result.output) if result.output.num_rows else None
        return CallResult(output, result.counters, stored)


def changelog_output_fields(plan: Any, key_types: Sequence[Any], dfs: Sequence[Any],
                            event_time: str) -> list[Any]:
    """The Spark output fields of a changelog join (SEMANTICS §9), in ``plan.output_names``.

    Args:
        plan: The join's plan (``output_names``, ``sides``, ``dlq``).
        key_types: The Spark types of the output key columns.
        dfs: Both tables (checked), for the value columns' types.
        event_time: The left table's event-time column (``event_time`` has its type).
    """
    from pyspark.sql import types as T

    names = iter(plan.output_names)
    fields = [T.StructField(next(names), t, True) for t in key_types]
    for df, side in zip(dfs, plan.sides, strict=True):
        fields += [T.StructField(next(names), df.schema[v].dataType, True)
                   for v in side.value_names]
    fields.append(T.StructField(next(names), T.StringType(), True))
    fields.append(T.StructField(next(names), dfs[0].schema[event_time].dataType, True))
    fields.append(T.StructField(next(names), T.LongType(), True))
    if plan.dlq:
        fields.append(T.StructField(next(names), T.StringType(), True))
    return fields


def bind_changelog_join(operator: type[_B], spec: Any, plan: Any, sides: Sequence[Any],
                        key_types: Sequence[Any], output_key_types: Sequence[Any],
                        func: Any) -> _B:
    """Prepare a changelog join's input and bind it (the table-table and foreign-key joins).

    Args:
        operator: The :class:`BoundOperator` subclass to bind.
        spec: The join.
        plan: Its plan (``sides``, ``replicated_side``, ``output_names``, ``dlq``).
        sides: Both tables (checked) with their event-time columns.
        key_types: The Spark types each side's key groups are computed in
            (:func:`~interlace.operators.common.prepare.two_sided_input`).
        output_key_types: The Spark types of the output key columns.
        func: The operator's ``applyInPandasWithState`` function.
    """
    prepared = two_sided_input(spec, sides, key_types, [s.payload for s in plan.sides],
                               replicated_side=plan.replicated_side)
    fields = changelog_output_fields(plan, output_key_types, [df for df, _ in sides],
                                     sides[0][1])
    return operator.bind(spec, plan, prepared, func, fields)


@dataclass(frozen=True)
class BoundOperator:
    """An operator bound to its prepared input, ready for ``groupBy().applyInPandasWithState``.

    Attributes:
        spec: The operator's spec.
        plan: The resolved plan shipped to the workers.
        prepared: The prepared (key-grouped, watermarked) input.
        group_columns: Columns to group by (the key group).
        func: The function for ``applyInPandasWithState``.
        output_schema: The output schema (Spark ``StructType``).
        state_schema: The state schema: one ``blob`` column, a string (the blob in base64) or
            binary (:data:`STATE_ENCODING_CONF`).
        output_mode: ``"append"``.
        timeout_conf: ``GroupStateTimeout.EventTimeTimeout``.
    """

    spec: Any
    plan: Any
    prepared: Any
    group_columns: tuple[str, ...]
    func: Any
    output_schema: Any
    state_schema: Any
    output_mode: str = "append"
    timeout_conf: str = "EventTimeTimeout"

    def apply(self) -> Any:
        """Run ``groupBy().applyInPandasWithState`` and return the output DataFrame."""
        return self.prepared.groupBy(*self.group_columns).applyInPandasWithState(
            self.func, self.output_schema, self.state_schema, self.output_mode, self.timeout_conf
        )

    @classmethod
    def bind(
        cls: type[_B], spec: Any, plan: Any, prepared: Any, func: Any, output_fields: list[Any]
    ) -> _B:
        """Bind with what every operator uses: the key group, one blob, append, event time.

        The blob's column type follows the session's :data:`STATE_ENCODING_CONF`.

        Raises:
            ConfigError: That setting is not one of ``base64``, ``binary``.
        """
        from pyspark.sql import types as T
        from pyspark.sql.streaming.state import GroupStateTimeout

        encoding = state_encoding_of(prepared.sparkSession)
        func.state_encoding = encoding
        blob_type = T.StringType() if encoding == "base64" else T.BinaryType()
        bound = cls(
            spec=spec,
            plan=plan,
            prepared=prepared,
            group_columns=(KEY_GROUP_COLUMN,),
            func=func,
            output_schema=T.StructType(output_fields),
            state_schema=T.StructType([T.StructField("blob", blob_type, False)]),
            output_mode="append",
            timeout_conf=GroupStateTimeout.EventTimeTimeout,
        )
        collecting = _BOUND.get()
        if collecting is not None:
            collecting.append(bound)
        return bound


def state_encoding_of(spark: Any) -> str:
    """The session's :data:`STATE_ENCODING_CONF` (``base64`` unless set).

    Raises:
        ConfigError: Not one of :data:`interlace.state.blob.STATE_ENCODINGS`.
    """
    value = str(spark.conf.get(STATE_ENCODING_CONF, DEFAULT_STATE_ENCODING)).strip().lower()
    if value not in STATE_ENCODINGS:
        msg = (
            f"{STATE_ENCODING_CONF}={value!r} is not one of {list(STATE_ENCODINGS)}: use "
            "'base64' (the default) for a new checkpoint, 'binary' for a checkpoint an "
            "earlier interlace wrote (docs/state.md)"
        )
        raise ConfigError(msg)
    return value
