"""Connectors: where a pipeline reads (sources) and writes (targets), one file each.

A **source** module has ``read(spark, src, base)``: the streaming DataFrame of a
:class:`~interlace.pipeline.Source` (``base``: the folder relative paths resolve against),
before its ``sql`` pre-stage. A **target** module has ``target(spec, ctx)``: an object built
from a :class:`~interlace.pipeline.Target` and the :class:`TargetContext` of the pipeline, with

* ``prepare(schema)``: called once, before the query starts, with the output's Spark schema
  (create tables or topics, check the key, fence earlier writers);
* ``write(pdf, batch_id) -> int``: one micro-batch as a pandas frame, on the driver, in
  ``foreachBatch``; a batch Spark replays after a crash (same ``batch_id``) must change
  nothing a second time; returns the rows written;
* optionally ``close()``: called when the run ends.

The modules, by the ``format`` / ``kind`` they serve (:data:`SOURCES`, :data:`TARGETS`):
:mod:`.files` (parquet, json, csv, rate), :mod:`.kafka` (a source and a target),
:mod:`.duckdb`, :mod:`.delta` (Delta Lake, with delta-rs), :mod:`.parquet`, :mod:`.console`;
:mod:`.jars` resolves JVM jars (Spark's Kafka connector, Delta's Spark reader) from Maven. A
new connector is a new module here, its name in the table below, and its ``format`` /
``kind`` in :mod:`interlace.pipeline.parts`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SOURCES", "TARGETS", "TargetContext", "make_target", "read_source"]

#: Source ``format`` -> the module that reads it.
SOURCES = {"parquet": "files", "json": "files", "csv": "files", "rate": "files",
           "kafka": "kafka"}
#: Target ``kind`` -> the module that writes it.
TARGETS = {"duckdb": "duckdb", "parquet": "parquet", "console": "console", "kafka": "kafka",
           "delta": "delta"}


def _module(name: str) -> Any:
    return importlib.import_module(f"{__name__}.{name}")


def read_source(spark: Any, src: Any, base: Path) -> Any:
    """The streaming DataFrame of ``src`` from its connector (before its ``sql``)."""
    return _module(SOURCES[src.format]).read(spark, src, base)


@dataclass(frozen=True)
class TargetContext:
    """What a target needs to know of the pipeline besides its ``[target]`` table.

    Attributes:
        pipeline: The pipeline (or chain stage) name: recorded with each committed batch.
        base: The folder relative paths resolve against.
        default_table: The table (or label) when the target names none.
        default_key: The key when the target names none.
        window_groups: The window's ``group_by`` columns when the rows are window output.
        changelog: The rows are a changelog (``op``, ``version``; SEMANTICS §9, §10).
        by_group: That changelog is a table aggregation's, keyed by its group columns.
        session: The rows are session windows' (their bounds are no stable key).
        fresh_checkpoint: The query's checkpoint holds no batch yet (Spark starts at batch 0):
            a target that records batch ids refuses one that already holds this pipeline's.
    """

    pipeline: str
    base: Path
    default_table: str
    default_key: Sequence[str] = ()
    window_groups: Sequence[str] | None = None
    changelog: bool = False
    by_group: bool = False
    session: bool = False
    fresh_checkpoint: bool = False


def make_target(spec: Any, pipeline: str, *, base: Path, default_table: str,
                default_key: Sequence[str] = (), window_groups: Sequence[str] | None = None,
                changelog: bool = False, by_group: bool = False,
                session: bool = False, fresh_checkpoint: bool = False) -> Any:
    """Build a target from a pipeline's ``[target]`` / ``[dead_letter]`` settings.

    ``window_groups``: the window's ``group_by`` columns when the rows are window output.
    ``changelog``: the rows are a changelog (``op``, ``version``), which a DuckDB target
    applies by its key and a Kafka target writes keyed, deletes as tombstones; Parquet and
    the console write the changes as rows. ``by_group``: that changelog is a table
    aggregation's, keyed by its group columns.
    """
    ctx = TargetContext(pipeline, base, default_table, tuple(default_key),
                        None if window_groups is None else tuple(window_groups),
                        changelog, by_group, session, fresh_checkpoint)
    return _module(TARGETS[spec.kind]).target(spec, ctx)
