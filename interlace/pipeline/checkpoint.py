"""The spec a checkpoint was written with, and the check that a restart keeps it.

``interlace run`` records, in the checkpoint folder (``interlace-spec.json``), the operator and
every field of its spec plus the schema and SQL of the sources it reads, the first time it
runs a pipeline there. Every later run compares the pipeline with that record **before Spark
starts** and, if anything differs, stops with one message naming every changed field, its old
and its new value, and the way out: restore them, or give ``[spark] checkpoint`` a new folder
(the query then starts over from the sources). docs/reliability.md says why no field may
change: each shapes the stored state, the watermark or the rows already written.

A checkpoint without the record (written before interlace kept it, or by the Python API) is
still guarded by the state's own fingerprint: the first micro-batch that reads state of
another spec fails (``StateVersionError``), naming the fields that could have changed.

The checkpoint also fixes how the state row holds the blob (``spark.interlace.state.encoding``,
:mod:`interlace.state.blob`): :func:`stored_state_encoding` reads it from Spark's state schema
file, and :func:`state_encoding_for` builds the query with it, so a checkpoint an earlier
interlace wrote (a binary blob column) continues without a setting.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from interlace.operators.errors import ConfigError

__all__ = [
    "PIPELINE_FILE",
    "SPEC_FILE",
    "changed_fields",
    "check_checkpoint",
    "heartbeat_sources",
    "record_checkpoint",
    "record_pipeline_file",
    "recorded_pipeline_file",
    "spec_record",
    "state_encoding_for",
    "stored_state_encoding",
]

SPEC_FILE = "interlace-spec.json"
#: The pipeline file that last ran a checkpoint (``interlace inspect CHECKPOINT`` reads it).
PIPELINE_FILE = "interlace-pipeline.json"
_FORMAT = 1
_IDLE_FIELDS = ("left_idle_timeout_ms", "right_idle_timeout_ms")
#: The record's entry for a join query with heartbeat sources (every join of a new
#: checkpoint; before, only one with idle inputs, whence its name, kept for older records).
_IDLE_KEY = "idle inputs (idle_timeout_ms: heartbeat sources)"


def _plain(value: Any) -> Any:
    """``value`` as JSON values (dataclasses as dicts, tuples as lists, the rest as text)."""
    return json.loads(json.dumps(value, default=str, sort_keys=True))


def _idle_set(pipeline: Any) -> bool:
    """Whether the pipeline's join has an idle input (a timeout on its spec or a source)."""
    return pipeline.join is not None and (
        any(getattr(pipeline.join, f, None) is not None for f in _IDLE_FIELDS)
        or any(s.idle_timeout_ms is not None for s in pipeline.sources))


def heartbeat_sources(pipeline: Any, base: Path | None = None) -> bool:
    """Whether the join query of ``pipeline`` reads heartbeat sources (docs/idle-inputs.md).

    Every join of a new checkpoint does: each input gets its restore heartbeat at each start
    (Spark keeps no per-input watermark across a restart), and an idle one its heartbeats. A
    checkpoint written without them (its record has no :data:`_IDLE_KEY`, or it has batches
    but no record) keeps its sources, unless an idle timeout is set (which
    :func:`check_checkpoint` then refuses for a recorded one: Spark continues no checkpoint
    whose query has other sources). ``base`` None: as for a new checkpoint.
    """
    if pipeline.join is None:
        return False
    if _idle_set(pipeline) or base is None:
        return True
    folder = pipeline.checkpoint_folder(base)
    path = folder / SPEC_FILE
    if path.is_file():
        try:
            return bool(json.loads(path.read_text()).get("spec", {}).get(_IDLE_KEY))
        except (OSError, ValueError):
            return False  # check_checkpoint names the unreadable record
    offsets = folder / "offsets"
    return not (offsets.is_dir() and any(offsets.iterdir()))


def spec_record(pipeline: Any, base: Path | None = None) -> dict[str, Any]:
    """What the checkpoint of ``pipeline`` depends on: its operator, spec and sources read.

    ``base``: where the pipeline runs (whether its checkpoint has heartbeat sources,
    :func:`heartbeat_sources`); None: as for a new checkpoint.
    """
    spec = pipeline.join if pipeline.join is not None else (
        pipeline.window if pipeline.window is not None else pipeline.aggregate)
    fields = {f.name: _plain(dataclasses.asdict(spec)[f.name]) for f in dataclasses.fields(spec)
              if f.name not in _IDLE_FIELDS}
    # An idle timeout's value may change across restarts; whether the query reads heartbeat
    # sources may not (docs/idle-inputs.md): Spark continues no checkpoint whose query has
    # other sources. Absent: none (records of older checkpoints without idle inputs).
    if heartbeat_sources(pipeline, base):
        fields[_IDLE_KEY] = True
    sources = {
        s.name: {"format": s.format, "schema": s.schema, "sql": s.sql}
        for s in pipeline.sources
    }
    return {"format": _FORMAT, "operator": type(spec).__name__, "spec": fields,
            "sources": _plain(sources)}


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Each difference between two records, as ``field: old -> new``."""
    out = []
    if old.get("operator") != new["operator"]:
        out.append(f"the operator: {old.get('operator')} -> {new['operator']}")
    for section in ("spec", "sources"):
        was, now = old.get(section) or {}, new[section]
        for name in sorted(set(was) | set(now), key=lambda n: (n not in now, n)):
            if was.get(name) != now.get(name):
                label = name if section == "spec" else f"source {name!r}"
                out.append(f"{label}: {_short(was.get(name))} -> {_short(now.get(name))}")
    return out


def _short(value: Any, limit: int = 80) -> str:
    text = "(absent)" if value is None else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_checkpoint(pipeline: Any, base: Path) -> None:
    """Raise ``ConfigError`` if the checkpoint was written with another spec (before Spark).

    Raises:
        ConfigError: Naming every changed field with its old and new value, and the fix.
    """
    folder = pipeline.checkpoint_folder(base)
    path = folder / SPEC_FILE
    if not path.is_file():
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        msg = (f"the checkpoint {pipeline.checkpoint_path()} holds an unreadable {SPEC_FILE} "
               f"({exc}); restore it from a backup, or start from a new checkpoint folder "
               "([spark] checkpoint)")
        raise ConfigError(msg) from exc
    changed = changed_fields(old, spec_record(pipeline, base))
    if changed:
        lines = "\n".join(f"  {c}" for c in changed)
        msg = (f"the checkpoint {pipeline.checkpoint_path()} was written by another spec; "
               f"changed since:\n{lines}\nrestore them, or give [spark] checkpoint a new folder "
               "to start over from the sources")
        raise ConfigError(msg)


def record_checkpoint(pipeline: Any, base: Path, *, ran: bool = False) -> None:
    """Record the pipeline's spec in its checkpoint folder, unless a record is there.

    A fresh checkpoint (no micro-batch planned yet) gets the record before the query starts.
    One that holds batches but no record was written by another interlace or by the Python
    API: its spec is unknown, so it gets the record only once a run on it has ended without
    an error (``ran``: the state's fingerprint accepted the spec).
    """
    folder = pipeline.checkpoint_folder(base)
    path = folder / SPEC_FILE
    offsets = folder / "offsets"
    if path.is_file() or (not ran and offsets.is_dir() and any(offsets.iterdir())):
        return
    folder.mkdir(parents=True, exist_ok=True)
    _write_json(path, json.dumps(spec_record(pipeline, base), indent=2, sort_keys=True))


def _write_json(path: Path, text: str) -> None:
    """Write ``text`` (and a newline) to ``path`` whole or not at all (a rename)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)


# The blob column in a Spark state schema file (JSON of the value schema).
_BLOB_TYPE = re.compile(rb'"name"\s*:\s*"blob"\s*,\s*"type"\s*:\s*"(binary|string)"')


def stored_state_encoding(folder: Path) -> str | None:
    """How the state in checkpoint ``folder`` holds its blob, from Spark's state schema file.

    Returns:
        ``"binary"`` (written by an earlier interlace), ``"base64"``, or ``None`` when the
        checkpoint holds no state schema yet.
    """
    state = Path(folder) / "state"
    if not state.is_dir():
        return None
    # state/<operator>/<partition>/_metadata/schema, under either state store provider.
    for f in sorted(state.glob("*/*/_metadata/schema")):
        found = _BLOB_TYPE.search(f.read_bytes()) if f.is_file() else None
        if found:
            return "binary" if found.group(1) == b"binary" else "base64"
    return None


@contextlib.contextmanager
def state_encoding_for(spark: Any, folder: Path) -> Iterator[str]:
    """Build a query with the state encoding checkpoint ``folder`` needs, then restore.

    The checkpoint's own encoding wins (Spark refuses another state schema); a new checkpoint
    takes the session's setting (where ``interlace run`` has put the pipeline's
    ``[spark.conf]``), else the default. The session's setting is put back afterwards:
    operators read it when they are built.
    """
    from interlace.operators.common.shim import STATE_ENCODING_CONF
    from interlace.state.blob import DEFAULT_STATE_ENCODING

    before = spark.conf.get(STATE_ENCODING_CONF, None)
    chosen = stored_state_encoding(folder) or before or DEFAULT_STATE_ENCODING
    spark.conf.set(STATE_ENCODING_CONF, chosen)
    try:
        yield chosen
    finally:
        if before is None:
            spark.conf.unset(STATE_ENCODING_CONF)
        else:
            spark.conf.set(STATE_ENCODING_CONF, before)


def record_pipeline_file(pipeline: Any, base: Path, path: Path) -> None:
    """Record the pipeline file ``path`` in each of its stages' checkpoint folders.

    ``interlace run`` writes it before its queries start (a running query can be inspected):
    the file's text, where it was and the stage, so that ``interlace inspect CHECKPOINT``
    builds the stage's operator as the run did (its relative paths against that folder).
    """
    text = Path(path).read_text(encoding="utf-8")
    for run in pipeline.stage_runs():
        folder = run.pipeline.checkpoint_folder(base)
        folder.mkdir(parents=True, exist_ok=True)
        record = {"format": _FORMAT, "file": str(Path(path).resolve()),
                  "stage": run.pipeline.name, "toml": text}
        _write_json(folder / PIPELINE_FILE, json.dumps(record, indent=1))


def recorded_pipeline_file(folder: Path) -> dict[str, Any] | None:
    """The record :func:`record_pipeline_file` left in checkpoint ``folder``, or None.

    A table aggregation's first query has its checkpoint in ``STAGE/aggregate/keys``: the
    stage's record, two folders up, is found from there too.
    """
    for where in (folder, folder.parent.parent):
        path = where / PIPELINE_FILE
        if path.is_file():
            record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return record
    return None
