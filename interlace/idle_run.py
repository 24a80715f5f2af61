"""Idle inputs in a pipeline run (docs/idle-inputs.md): the runner's side of the heartbeats.

A join source's ``idle_timeout_ms`` becomes the join spec's timeout for its side
(:func:`with_idle_sources`); the heartbeats live under the query's checkpoint
(:func:`heartbeat_folder`); :mod:`interlace.runner` reports which source is idle since when
(:func:`idle_sources`), counts no heartbeat as an input row (:func:`without_heartbeats`), and
starts an ``availableNow`` run again to read the heartbeats it wrote
(:func:`heartbeats_unread`, at most :data:`IDLE_RERUNS` times). The heartbeats themselves:
:mod:`interlace.operators.common.idle`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from interlace.metrics import rows_read_from
from interlace.operators.common.idle import batch_metrics, heartbeats_at

__all__ = [
    "IDLE_RERUNS",
    "heartbeat_folder",
    "heartbeats_unread",
    "idle_sources",
    "observe_before_commit",
    "unread_input",
    "with_idle_sources",
    "without_heartbeats",
]

#: How many times an availableNow run is started again to read the heartbeats it wrote.
IDLE_RERUNS = 2


def with_idle_sources(pipeline: Any) -> Any:
    """The pipeline's join spec with its sources' ``idle_timeout_ms`` (where it has none)."""
    spec = pipeline.join
    changes = {}
    for side, name in (("left", pipeline.left_source), ("right", pipeline.right_source)):
        timeout = pipeline.source(name).idle_timeout_ms
        if timeout is not None and getattr(spec, f"{side}_idle_timeout_ms") is None:
            changes[f"{side}_idle_timeout_ms"] = timeout
    return dataclasses.replace(spec, **changes) if changes else spec


def heartbeat_folder(pipeline: Any, base: Path) -> Path:
    """Where an idle input's heartbeats live: ``heartbeats/`` in the query's checkpoint."""
    return Path(pipeline.checkpoint_folder(base)) / "heartbeats"


def heartbeats_unread(pipeline: Any, base: Path) -> bool:
    """Whether the finished availableNow query wrote heartbeats it could not read.

    Spark's file source lists an ``availableNow`` run's files when it starts; a heartbeat
    written during the run (an input went idle meanwhile) waits for the next run, which
    ``run_pipeline`` starts at once.
    """
    if pipeline.join is None:
        return False
    beats = heartbeats_at(heartbeat_folder(pipeline, base))
    return beats is not None and beats.written_since_start > 0


def without_heartbeats(pipeline: Any, base: Path, progress: dict[str, Any]) -> dict[str, Any]:
    """``progress`` with ``numInputRows`` less the heartbeats read (no input rows)."""
    if pipeline.join is None:
        return progress
    beats = rows_read_from(progress, [heartbeat_folder(pipeline, base)])
    if not beats:
        return progress
    return {**progress, "numInputRows": int(progress.get("numInputRows") or 0) - beats}


def observe_before_commit(pipeline: Any, base: Path, query: Any) -> None:
    """Feed the join's heartbeats the micro-batch ``query`` is writing, before Spark commits it.

    So ``_idle.json`` holds each input's greatest clock as of every committed batch: a crash
    right after the commit (before the listener saves it) restores the right clocks.
    """
    if pipeline.join is None:
        return
    beats = heartbeats_at(heartbeat_folder(pipeline, base))
    if beats is not None:
        metrics = batch_metrics(query)
        if metrics:
            beats.observe(metrics)


#: Source formats whose input is files in a folder, as Spark's file source lists them.
_FILE_FORMATS = ("parquet", "json", "csv", "orc", "text")


def unread_input(pipeline: Any, base: Path) -> bool:
    """Whether a join input's folder, or its heartbeats', may hold a file never read.

    For an ``availableNow`` run: without one, the run reads nothing and needs no restore
    heartbeat (:func:`~interlace.operators.common.idle.restore_held`). The files read are
    those Spark's file sources logged under ``sources/`` in the checkpoint. True whenever
    unsure (a source that is no folder of files, a glob, no log yet): a restore heartbeat
    too many costs one micro-batch, one too few a ``W`` that waits for both inputs.
    """
    seen: set[str] = set()
    logs = Path(pipeline.checkpoint_folder(base)) / "sources"
    for log in (logs.glob("*/*") if logs.is_dir() else ()):
        if log.name.startswith(".") or not log.is_file():
            continue
        for line in log.read_text(errors="replace").splitlines()[1:]:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                seen.add(str(Path(unquote(urlparse(entry["path"]).path)).resolve()))
    if not seen:
        return True
    folders = []
    for name in (pipeline.left_source, pipeline.right_source):
        src = pipeline.source(name)
        if src.format not in _FILE_FORMATS or not src.path:
            return True
        folders.append(Path(src.path) if Path(src.path).is_absolute() else base / src.path)
    beats = heartbeat_folder(pipeline, base)  # an idle heartbeat a run wrote for the next
    folders += [f for f in (beats / "left", beats / "right") if f.is_dir()]
    for folder in folders:
        if not folder.is_dir():
            return True
        for f in folder.rglob("*"):
            hidden = any(part.startswith((".", "_")) for part in f.relative_to(folder).parts)
            if f.is_file() and not hidden and str(f.resolve()) not in seen:
                return True
    return False


def idle_sources(pipeline: Any, base: Path,
                 progress: dict[str, Any]) -> dict[str, float | None]:
    """Each join source with an idle timeout -> since when it is idle (s), None if active.

    The listener may not have seen ``progress`` (a micro-batch's, or ``{}``) yet: it is fed
    here too (the same batch twice changes nothing), so a progress line agrees with its batch.
    """
    if pipeline.join is None:
        return {}
    beats = heartbeats_at(heartbeat_folder(pipeline, base))
    if beats is None:
        return {}
    beats.observe(progress.get("observedMetrics") or {})
    names = {"left": pipeline.left_source, "right": pipeline.right_source}
    return {names[side]: (None if since is None else since / 1000)
            for side, since in beats.idle_since_ms().items()
            if beats.tracker.timeouts_ms.get(side) is not None}
