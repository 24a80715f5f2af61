"""The floor: a no-op ``applyInPandasWithState`` function in interlace's place.

Run on an interlace operator's own prepared input, key groups, output schema and timeout, it
reads every frame, keeps an 8-byte state and emits nothing: what Spark's stateful pandas path
costs before interlace does any work. ``--floor`` adds it to the workloads that define it.

``floor-out`` (windows, stream-stream and stream-table joins): the same no-op, but it also
emits ``out_ratio`` output rows per input row (the workload's output per input row, from its
oracle), copied from a constant frame of the output schema. PySpark's output path of
``applyInPandasWithState`` costs per output row (the state column is padded to the data's
length and converted, docs/performance.md "The output floor"); the plain floor emits nothing
and does not pay it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any


def _template(schema: Any, rows: int) -> Any:
    """A frame of ``rows`` rows of zero values for a Spark ``StructType``."""
    import numpy as np
    import pandas as pd

    cols: dict[str, Any] = {}
    for f in schema.fields:
        t = f.dataType.typeName()
        if t in ("timestamp", "timestamp_ntz"):
            cols[f.name] = np.zeros(rows, dtype="datetime64[ns]")
        elif t in ("long", "integer", "short", "byte"):
            cols[f.name] = np.zeros(rows, dtype=np.int64)
        elif t in ("double", "float"):
            cols[f.name] = np.zeros(rows, dtype=np.float64)
        elif t == "boolean":
            cols[f.name] = np.zeros(rows, dtype=bool)
        elif t == "string":
            cols[f.name] = np.full(rows, "", dtype=object)
        else:
            msg = f"floor-out: no constant value for column {f.name!r} of type {t}"
            raise TypeError(msg)
    return pd.DataFrame(cols)


class FloorFunction:
    """Read every frame, keep 8 bytes of state with a far timeout; emit nothing, or
    (``out_ratio`` > 0) that many rows of ``schema`` per input row."""

    def __init__(self, out_ratio: float = 0.0, schema: Any = None, timeout: bool = True,
                 freeze: bool = False) -> None:
        self.out_ratio, self.schema, self.timeout = out_ratio, schema, timeout
        self.freeze = freeze
        self._rows: Any = None

    def __call__(self, key: Any, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        if self.freeze:  # what every interlace shim does first: freeze the worker's GC once
            from interlace.operators.common.worker import prepare_worker

            prepare_worker()
        n = 0
        for f in frames:
            n += len(f)
        state.update((b"\0" * 8,))
        if self.timeout:  # ``False`` under ``GroupStateTimeout.NoTimeout``
            state.setTimeoutTimestamp(max(int(state.getCurrentWatermarkMs()), 1) + 10**12)
        want = int(round(n * self.out_ratio))
        if want <= 0:
            return iter(())
        if self._rows is None or len(self._rows) < want:
            held = 0 if self._rows is None else len(self._rows)
            self._rows = _template(self.schema, max(want, 2 * held))
        return iter((self._rows.iloc[:want].copy(),))


def floor_on(op: Any, out_ratio: float = 0.0, freeze: bool = False) -> Any:
    """The floor on a prepared interlace operator (``prepare_join(...)`` etc.); with
    ``out_ratio``, the floor that emits that many output rows per input row; with ``freeze``,
    the floor that first freezes its Python worker's garbage collector as interlace's
    operators do (``prepare_worker``: without it the floor pays the worker's full collections,
    which interlace does not, and can be slower than interlace itself)."""
    from pyspark import cloudpickle

    # Spark's Python workers cannot import bench/: ship this module's code by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    func = FloorFunction(out_ratio, op.output_schema if out_ratio else None, freeze=freeze)
    return op.prepared.groupBy(*op.group_columns).applyInPandasWithState(
        func, op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)


def tws_floor_on(op: Any) -> Any:
    """The floor on Spark's other Python stateful API, ``transformWithStateInPandas`` (PySpark
    4.0+, the RocksDB state store only): the same prepared input and key groups, a processor
    that reads every frame, keeps 8 bytes in a ``ValueState`` and emits nothing. It registers
    no timer (the ``applyInPandasWithState`` floor sets a timeout, a field of its state)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return op.prepared.groupBy(*op.group_columns).transformWithStateInPandas(
        _tws_processor()(), op.output_schema, "Append", "EventTime")


def _tws_processor() -> type:
    """The no-op ``StatefulProcessor`` class (built on call: PySpark 3.5 has no such API)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class TwsFloor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            from interlace.operators.common.worker import prepare_worker

            prepare_worker()  # as the applyInPandasWithState floor's ``freeze``
            self.value = handle.getValueState("s", "v binary")

        def handleInputRows(self, key: Any, rows: Iterator[Any],  # noqa: N802 (Spark's name)
                            timerValues: Any) -> Iterator[Any]:  # noqa: N803
            for _ in rows:  # every frame read, as the applyInPandasWithState floor's
                pass
            self.value.update((b"\0" * 8,))
            return iter(())

        def close(self) -> None:
            pass

    return TwsFloor


def floor_engines(prepared: Callable[[Any], Any], output_rows: Callable[[Any], int],
                  columns: tuple[str, ...]) -> list[Any]:
    """A workload's ``floor`` and ``floor-out`` engines: ``prepared(ctx)`` is its prepared
    interlace operator, ``output_rows(data)`` the rows interlace emits from its data."""
    from harness.registry import Engine

    def floor(ctx: Any) -> Any:
        return floor_on(prepared(ctx))

    def floor_out(ctx: Any) -> Any:
        return floor_on(prepared(ctx), output_rows(ctx.data) / max(ctx.data.input_rows, 1))

    return [Engine("floor", "floor", floor, columns),
            Engine("floor-out", "floor", floor_out, columns, floor_emits=True)]


class WindowFold:
    """The combiner's floor (issue 32, lever 1): fold each partition's prepared rows into one
    partial per (key group, group, piece) before the shuffle.

    A ``mapInArrow`` function. A piece is what a combiner could fold without changing any
    verdict or output: tumbling, the window (``floor(t / d) * d``); hopping, the pane of width
    ``gcd(d, hop)`` (every window is a union of whole panes); session, the partition's
    mini-sessions of one group (rows less than ``gap`` apart, in event-time order), which the
    operator would merge as it merges held sessions. Each partial is the count, sum, min and
    max of ``value``, the distinct ``distinct`` values (a list: what an HLL or exact-distinct
    partial would be built from), the piece's start (``__il_ws``) and its greatest event time
    (the watermark's column, so Spark's pre-filter and watermark see the partial as its
    latest row).
    """

    def __init__(self, kind: str, width_us: int, group: str, value: str,
                 distinct: str | None) -> None:
        if kind not in ("tumbling", "hopping", "session"):
            raise ValueError(f"WindowFold: unknown kind {kind!r}")
        self.kind, self.width_us = kind, width_us
        self.group, self.value, self.distinct = group, value, distinct

    def _pieces(self, t: Any) -> tuple[Any, list[tuple[str, str]]]:
        """The table with its piece column ``__il_p`` and the extra aggregation for
        ``__il_ws``."""
        import numpy as np
        import pyarrow as pa

        tus = t.column("__il_tus").to_numpy()
        if self.kind != "session":
            return t.append_column("__il_p", pa.array(tus - tus % self.width_us)), []
        kg = t.column("__il_kg").to_numpy()
        g = t.column(self.group).to_numpy()
        order = np.lexsort((tus, g, kg))
        ts, gs, ks = tus[order], g[order], kg[order]
        brk = np.ones(len(ts), dtype=bool)
        brk[1:] = (ks[1:] != ks[:-1]) | (gs[1:] != gs[:-1]) | (ts[1:] - ts[:-1] >= self.width_us)
        cid = np.empty(len(ts), dtype=np.int64)
        cid[order] = np.cumsum(brk)
        return t.append_column("__il_p", pa.array(cid)), [("__il_tus", "min")]

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        parts = [b for b in batches if b.num_rows]
        if not parts:
            return
        t, start = self._pieces(pa.Table.from_batches(parts))
        distinct = [(self.distinct, "distinct")] if self.distinct else []
        out = t.group_by(["__il_kg", self.group, "__il_p"], use_threads=False).aggregate([
            (self.value, "count"), (self.value, "sum"), (self.value, "min"), (self.value, "max"),
            *distinct, ("__il_t", "max"), *start])
        names = {f"{self.value}_count": "n", f"{self.value}_sum": "s", f"{self.value}_min": "mn",
                 f"{self.value}_max": "mx", f"{self.distinct}_distinct": "du",
                 "__il_t_max": "__il_t", "__il_tus_min": "__il_ws"}
        if not start:
            names["__il_p"] = "__il_ws"
        out = out.rename_columns([names.get(c, c) for c in out.column_names])
        yield from out.select(["__il_kg", "__il_t", "__il_ws", self.group, "n", "s", "mn", "mx",
                               *(["du"] if self.distinct else [])]).to_batches()


def combined_floor_on(op: Any, fold: WindowFold, delay_ms: int) -> Any:
    """The floor on ``fold``'s partials of a prepared window (``prepare_window(...)``).

    A ``mapInArrow`` output is a new column: its ``__il_t`` is declared with the watermark's
    metadata (Spark refuses a second ``withWatermark``, and an event-time timeout needs the
    watermarked column among its input's), so Spark's pre-filter judges each partial by its
    greatest event time. Then the same no-op ``applyInPandasWithState`` as :func:`floor_on`.
    """
    from pyspark import cloudpickle
    from pyspark.sql import types as T

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ddl = T._parse_datatype_string(
        "__il_kg INT, __il_t TIMESTAMP, __il_ws BIGINT, "
        f"{fold.group} BIGINT, n BIGINT, s DOUBLE, mn DOUBLE, mx DOUBLE"
        + (", du ARRAY<BIGINT>" if fold.distinct else ""))
    schema = T.StructType([
        T.StructField(f.name, f.dataType, f.nullable,
                      {"spark.watermarkDelayMs": delay_ms} if f.name == "__il_t" else None)
        for f in ddl.fields])
    partials = op.prepared.mapInArrow(fold, schema)
    return partials.groupBy(*op.group_columns).applyInPandasWithState(
        FloorFunction(), op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)
