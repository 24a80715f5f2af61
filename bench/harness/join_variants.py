"""Experimental variants of interlace's join shim, for measuring proposed changes.

Nothing here is used by interlace itself. ``bench/run.py --variant NAME`` (engine
``interlace:NAME`` beside the released shim, on the join workloads) and
``bench/run.py profile join --variant NAME`` run a variant in place of
:class:`interlace.operators.join.JoinFunction` (the benchmark registers this module with
cloudpickle by value, so Spark's Python workers get this code without installing it), so a
proposed change to ``operators/join/`` can be measured end to end before anyone edits it.

Variants:

* ``baseline``: ``JoinFunction`` unchanged.
* ``timed``: ``baseline`` plus per-call CPU timing written to files (see
  :class:`TimedJoinFunction`), to split the Python workers' CPU between interlace and PySpark.
* ``uncompressed``: ``baseline`` writing its blobs' Arrow IPC buffers uncompressed, as
  interlace did before ``JOIN_IPC_COMPRESSION`` (zstd); to measure what compression buys.
* ``floor``: not a join: reads every input frame, keeps an 8-byte state and emits nothing
  (:class:`FloorJoinFunction`): what Spark's ``applyInPandasWithState`` path costs on the
  join's prepared input before interlace does any work. Its output is not checked.
* ``identity_kg``: ``baseline`` with the group value of key group ``g`` being ``g`` itself, as
  before the balanced ids of :mod:`interlace.state.keygroups`; to measure what balancing the
  key groups over the shuffle partitions buys (a variant may define ``prepare(prepared, op)``
  to change the prepared input).
* ``wide``: ``baseline`` on the prepared layout before shared slots (every column of both
  sides, the other side's null, event-time columns twice); to measure what
  :func:`interlace.operators.join.payload_sources` buys.
* ``ascii``: ``baseline`` storing its state blob base64-encoded (:class:`AsciiStateJoinFunction`);
  to measure what Pyrolite's pickling of binary state (a latin-1 string sent as UTF-8) costs.
* ``bigchunks``: ``baseline`` in a query started with
  ``spark.sql.execution.arrow.maxRecordsPerBatch=100000`` (:class:`BigChunksJoinFunction`;
  a variant's ``SESSION_CONF`` applies to its query only).
* ``nofreeze``: ``baseline`` without the GC freeze of
  :func:`interlace.operators.common.worker.prepare_worker` (the
  workers' garbage collector untouched, as before it), collections logged
  (:class:`NoFreezeJoinFunction`); ``gcstat``: ``baseline`` with its collections logged.

The ``fastconv`` variant measured in docs/performance.md (column-wise pandas-to-Arrow input,
single-threaded output conversion) has been adopted by ``JoinFunction`` and removed here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from interlace.operators.join import JoinFunction

__all__ = [
    "VARIANTS",
    "FloorJoinFunction",
    "GcStatJoinFunction",
    "NoFreezeJoinFunction",
    "TimedJoinFunction",
    "UncompressedJoinFunction",
]


class TimedJoinFunction(JoinFunction):
    """``JoinFunction`` unchanged, plus its CPU time per call appended to a file per process.

    Each call appends ``cpu_seconds wall_seconds input_rows output_rows`` to
    ``$INTERLACE_BENCH_TIMING_DIR/<pid>.txt`` (default ``/tmp/interlace-bench-timing``). The
    time covers ``JoinFunction.__call__`` only (the output is materialised before it is
    yielded), so comparing it with the Python workers' total CPU separates interlace's own cost
    from PySpark's worker (Arrow <-> pandas conversion, state (de)serialisation, framing).
    """

    def __call__(
        self, key: Any, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        import os
        import time

        c0 = time.process_time()
        frames = list(frames)  # PySpark converts lazily; charge that conversion to PySpark
        c1, t1 = time.process_time(), time.perf_counter()
        outs = list(super().__call__(key, iter(frames), state))
        c2, t2 = time.process_time(), time.perf_counter()
        folder = os.environ.get("INTERLACE_BENCH_TIMING_DIR", "/tmp/interlace-bench-timing")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{os.getpid()}.txt"), "a") as fh:
            fh.write(f"{c2 - c1:.6f} {t2 - t1:.6f} {sum(len(f) for f in frames)} "
                     f"{sum(len(o) for o in outs)} {c1 - c0:.6f}\n")
        yield from outs


class UncompressedJoinFunction(JoinFunction):
    """``JoinFunction`` with ``JOIN_IPC_COMPRESSION = None`` while it runs (one call at a time
    per Python worker, so patching the module global is safe there)."""

    def __call__(
        self, key: Any, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        import interlace.state.buffers as buffers

        saved, buffers.JOIN_IPC_COMPRESSION = buffers.JOIN_IPC_COMPRESSION, None
        try:
            yield from list(super().__call__(key, frames, state))
        finally:
            buffers.JOIN_IPC_COMPRESSION = saved


class FloorJoinFunction(JoinFunction):
    """A no-op in the join's place: consumes the frames, keeps 8 bytes of state, emits nothing."""

    def __call__(
        self, key: Any, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        for _ in frames:
            pass
        state.update((b"\0" * 8,))
        state.setTimeoutTimestamp(max(int(state.getCurrentWatermarkMs()), 1) + 10**12)
        yield from ()


class IdentityKeyGroupJoinFunction(JoinFunction):
    """``JoinFunction`` unchanged; :meth:`prepare` regroups rows by the key group number."""

    @staticmethod
    def prepare(prepared: Any, op: Any) -> Any:
        from interlace.operators.join import KEY_GROUP_COLUMN
        from pyspark.sql import functions as F

        # The prepared column carrying each key (JoinPlan.input_sources), per side.
        src = dict(zip(op.plan.input_schema.names, op.plan.input_sources, strict=True))
        keys = [F.coalesce(F.col(f"`{src[lk]}`"), F.col(f"`{src[rk]}`"))
                for lk, rk in zip(op.plan.left_key_internal, op.plan.right_key_internal,
                                  strict=True)]
        kg = F.pmod(F.xxhash64(*keys), F.lit(op.spec.key_groups)).cast("int")
        return prepared.withColumn(KEY_GROUP_COLUMN, kg)


class WideLayoutJoinFunction(JoinFunction):
    """``JoinFunction`` on the prepared layout used before shared slots: every column of both
    sides (the other side's null), the event-time columns carried again beside ``__il_t``.

    :meth:`prepare` rebuilds that layout from today's with one ``CASE WHEN`` per column (a
    projection the old layout did not need, so this variant is, if anything, a little slower
    than the released code before the change).
    """

    def __init__(self, plan: Any, counters: Any | None = None) -> None:
        import dataclasses

        super().__init__(
            dataclasses.replace(plan, input_sources=tuple(plan.input_schema.names)), counters)

    @staticmethod
    def prepare(prepared: Any, op: Any) -> Any:
        from interlace.operators import join as J
        from pyspark.sql import functions as F

        plan = op.plan
        cols = [F.col(c) for c in (J.SIDE_COLUMN, J.KEY_GROUP_COLUMN, J.EVENT_TIME_COLUMN,
                                   J.TIME_COLUMN)]
        for name, source in list(zip(plan.input_schema.names, plan.input_sources,
                                     strict=True))[2:]:
            side = J.LEFT if name.startswith(J.LEFT_PREFIX_INTERNAL) else J.RIGHT
            # metadata={}: a copy of __il_t must not carry its watermark (one per stream).
            cols.append(F.when(F.col(J.SIDE_COLUMN) == side, F.col(f"`{source}`"))
                        .alias(name, metadata={}))
        return prepared.select(*cols)


class _Base64State:
    """A ``GroupState`` whose binary value is stored base64-encoded (ASCII)."""

    def __init__(self, state: Any) -> None:
        self._state = state

    @property
    def get(self) -> tuple[bytes]:
        import binascii

        return (binascii.a2b_base64(bytes(self._state.get[0])),)

    def update(self, value: tuple[bytes]) -> None:
        import binascii

        self._state.update((binascii.b2a_base64(value[0], newline=False),))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


class AsciiStateJoinFunction(JoinFunction):
    """``JoinFunction`` storing its blob base64-encoded. Spark hands the state to Python pickled
    by Pyrolite, which sends ``byte[]`` as a latin-1 string encoded to UTF-8: every byte >= 0x80
    takes the slow path of ``String.getBytes`` and two bytes on the wire, and compressed blobs
    are half such bytes. ASCII takes the JVM's fast path, at 4/3 the stored size."""

    def __call__(
        self, key: Any, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        yield from super().__call__(key, frames, _Base64State(state))


class BigChunksJoinFunction(JoinFunction):
    """``JoinFunction`` unchanged, its query started with 100,000-row Arrow batches.

    Spark sends a key group's rows to Python in chunks of
    ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000 by default) and pickles the
    group's state into *every* chunk (``ApplyInPandasWithStateWriter``: the state metadata is
    1:1 with chunks), so a key group with 50,000 rows has its blob pickled five times per
    micro-batch. The harness sets ``SESSION_CONF`` for this variant's queries only.
    """

    SESSION_CONF = {"spark.sql.execution.arrow.maxRecordsPerBatch": "100000"}


def _log_collections(folder: str) -> None:
    """Append ``generation cpu_seconds collected`` per garbage collection of this worker to
    ``folder/<pid>.txt`` (once per process; the harness gives each engine its own workers)."""
    import gc
    import os
    import time

    if getattr(gc, "_il_logged", False):
        return
    path = os.path.join(folder, f"{os.getpid()}.txt")
    t0: list[float] = [0.0]

    def cb(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            t0[0] = time.process_time()
        else:
            os.makedirs(folder, exist_ok=True)  # the harness empties it before each run
            with open(path, "a") as fh:
                fh.write(f"{info['generation']} {time.process_time() - t0[0]:.6f} "
                         f"{info['collected']}\n")

    gc.callbacks.append(cb)
    gc._il_logged = True  # type: ignore[attr-defined]


class GcStatJoinFunction(JoinFunction):
    """``JoinFunction`` unchanged, every garbage collection of its workers logged to
    ``GC_LOG_DIR`` (the harness sums them into the run's ``extra``)."""

    GC_LOG_DIR = "/tmp/interlace-bench-gc/gcstat"

    def __call__(
        self, key: Any, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        _log_collections(self.GC_LOG_DIR)
        yield from super().__call__(key, frames, state)


class NoFreezeJoinFunction(GcStatJoinFunction):
    """``gcstat`` as before the GC freeze
    (:func:`interlace.operators.common.worker.prepare_worker`): the worker's garbage collector
    left alone."""

    GC_LOG_DIR = "/tmp/interlace-bench-gc/nofreeze"

    def __call__(
        self, key: Any, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        import os

        from interlace.operators.common.worker import WORKER_GC_FREEZE_ENV

        # The documented opt-out, read by prepare_worker() at this worker's first call.
        os.environ[WORKER_GC_FREEZE_ENV] = "0"
        yield from super().__call__(key, frames, state)


VARIANTS: dict[str, type[JoinFunction]] = {
    "baseline": JoinFunction,
    "timed": TimedJoinFunction,
    "uncompressed": UncompressedJoinFunction,
    "floor": FloorJoinFunction,
    "identity_kg": IdentityKeyGroupJoinFunction,
    "wide": WideLayoutJoinFunction,
    "ascii": AsciiStateJoinFunction,
    "bigchunks": BigChunksJoinFunction,
    "gcstat": GcStatJoinFunction,
    "nofreeze": NoFreezeJoinFunction,
}
