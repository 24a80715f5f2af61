"""Join shim variants (bench/harness/join_variants.py) as extra engines: ``--variant NAME``.

A variant is a proposed change to interlace's join shim, measured end to end before anyone
edits ``operators/join/``: engine ``interlace:NAME`` runs it on the join's own prepared input
beside the released shim (same session, interleaved). A variant's ``SESSION_CONF`` applies to
its queries only. ``timed`` has the workers write the CPU time of every call
(``$INTERLACE_BENCH_TIMING_DIR``); ``gcstat`` / ``nofreeze`` log the workers' garbage
collections (their ``GC_LOG_DIR``): both are summed into the run's ``extra``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.registry import Context, Engine

TIMING_ENV = "INTERLACE_BENCH_TIMING_DIR"
TIMING_DEFAULT = "/tmp/interlace-bench-timing"


def _module() -> Any:
    """harness/join_variants.py, registered to be pickled by value (workers cannot import it)."""
    from pyspark import cloudpickle

    from harness import join_variants

    cloudpickle.register_pickle_by_value(join_variants)
    return join_variants


def names() -> list[str]:
    """The variants bench/harness/join_variants.py defines."""
    return list(_module().VARIANTS)


def engine(name: str, sides: Callable[[Context], tuple[Any, Any]],
           spec: Callable[[Any, int], Any], columns: tuple[str, ...]) -> Engine:
    """Engine ``interlace:NAME`` (role ``floor`` for the no-op ``floor`` variant)."""
    variants = _module().VARIANTS
    if name not in variants:
        msg = (f"unknown join variant {name!r}; bench/harness/join_variants.py has "
               f"{', '.join(variants)}")
        raise ValueError(msg)
    cls = variants[name]

    def build(ctx: Context) -> Any:
        from interlace import prepare_join

        op = prepare_join(*sides(ctx), spec(ctx.data.shape, ctx.key_groups))
        prepared = cls.prepare(op.prepared, op) if hasattr(cls, "prepare") else op.prepared
        return prepared.groupBy(*op.group_columns).applyInPandasWithState(
            cls(op.plan), op.output_schema, op.state_schema, op.output_mode, op.timeout_conf)

    timing = Path(os.environ.get(TIMING_ENV, TIMING_DEFAULT))
    gc_dir = Path(cls.GC_LOG_DIR) if getattr(cls, "GC_LOG_DIR", None) else None

    def before() -> None:
        shutil.rmtree(timing, ignore_errors=True)
        if gc_dir is not None:
            shutil.rmtree(gc_dir, ignore_errors=True)

    def after(r: Any) -> None:
        if timing.exists():  # variant "timed": one line per JoinFunction call
            calls = [line.split() for f in timing.glob("*.txt")
                     for line in f.read_text().splitlines()]
            r.extra["timed"] = {"calls": len(calls),
                                "join_function_cpu_s": sum(float(c[0]) for c in calls),
                                "input_frames_cpu_s": sum(float(c[4]) for c in calls)}
        if gc_dir is not None and gc_dir.exists():
            full = [line.split() for f in gc_dir.glob("*.txt")
                    for line in f.read_text().splitlines() if line.startswith("2 ")]
            r.extra["gc_full"] = {"collections": len(full),
                                  "cpu_s": sum(float(c[1]) for c in full)}

    return Engine(f"interlace:{name}", "floor" if name == "floor" else "interlace", build,
                  columns, conf=dict(getattr(cls, "SESSION_CONF", {})), before=before,
                  after=after)
