"""Versioned msgpack envelope for everything interlace keeps in ``GroupState``.

The envelope is the same in every format version; ``body`` is per kind and per version::

    {"v": 3,                      # int, format version (1, 2 or 3; 3 is written)
     "kind": "join" | "window" | "stream_table" | "table_join" | "foreign_key",  # the writer
     "fp": "<16 hex chars>",      # fingerprint of the spec fields that give state its meaning
     "body": {...}}               # kind-specific, msgpack-native values only

Version 3 (current) adds one optional form: ``{"v": 3, "kind", "fp", "codec": "zstd",
"size": <int>, "body": <bytes>}``, where ``body`` is the zstd-compressed msgpack of the body
map (``size`` bytes once decompressed). :func:`encode` writes it when asked
(``compress=True``: the window does, whose slot table and accumulators are raw numpy bytes and
compress about 6x; the other kinds' Arrow buffers are zstd-compressed already). A version-3
body is otherwise the version-2 body of its kind.

Version 2 (and 3) — join body: ``{"left": <Arrow IPC stream bytes>, "right": <Arrow IPC
stream bytes>, "times": {"left": str | None, "right": str | None}, "extra": {name: int}}``.
Each side's table is ``__il_m`` then the payload columns; ``__il_tus`` (the event time in µs)
is left out when ``times[side]`` names the payload's event-time column, which gives it back
exactly (read as UTC; always so in a UTC session), and comes first otherwise. See
:mod:`interlace.state.buffers`.

Version 1 — join body: ``{"left": <Arrow IPC>, "right": <Arrow IPC>, "extra": {name: int}}``,
each side ``__il_tus``, ``__il_m``, then the payload columns (which hold the event-time column
too: ``__il_tus`` duplicates it).

Every other kind's body is the same in versions 1, 2 and 3:

* window: ``{"slots": <Arrow IPC stream bytes>, "accs": [<accumulator state>, ...], "seq":
  int}`` — one slot per (window, group), see :mod:`interlace.operators.window`.
* stream_table: ``{"history": <Arrow IPC stream bytes>, "held": <Arrow IPC stream bytes>,
  "seq": int}`` — see :mod:`interlace.state.tables`.
* table_join, foreign_key: see :mod:`interlace.state.table_join` and
  :mod:`interlace.state.foreign_key`.

Decoding runs the registered migration chain (``_MIGRATIONS[v]`` upgrades a version-``v``
blob to ``v + 1``) until the current version is reached. 1 → 2: a join body loses
``__il_tus`` per side (:func:`interlace.state.buffers.upgrade_join_body_v1`), every other kind
only changes ``v``. 2 → 3: only ``v`` changes. A blob whose ``v`` is newer than
:data:`CURRENT_VERSION` raises :class:`StateVersionError` naming the version found and the
versions supported. A blob whose ``fp`` differs from the running spec's fingerprint also raises
:class:`StateVersionError`: the spec changed between restarts (for example a new
``time_window_ms``), and silently reinterpreting old buffers would give wrong results.

Encoding is deterministic (msgpack of plain values; dict order fixed by the writer), so golden
blobs are byte-stable (``tests/unit/state/golden/``).

In ``GroupState`` a blob is the one value of the state row, held as one of
:data:`STATE_ENCODINGS` (:func:`to_state_value`, :func:`from_state_value`): ``"base64"``, the
default, a string column with the blob in base64; or ``"binary"``, a binary column with the
bytes, which checkpoints of earlier builds hold. Spark hands a binary state value from the JVM
to Python through its pickler one byte at a time (Pyrolite builds a string per byte and
encodes it as UTF-8), which cost more than the operator itself once a key group holds tens of
megabytes; an ASCII string crosses as one copy (docs/performance.md, "What a key group's
state costs in Spark").
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import msgpack
from interlace.state.errors import StateDecodeError, StateVersionError

__all__ = [
    "CURRENT_VERSION",
    "DEFAULT_STATE_ENCODING",
    "STATE_ENCODINGS",
    "from_state_value",
    "to_state_value",
    "supported_versions",
    "decode",
    "encode",
    "fingerprint",
    "register_migration",
]

CURRENT_VERSION = 3
#: The body codec of a compressed version-3 envelope, and its level.
BODY_CODEC, BODY_CODEC_LEVEL = "zstd", 1

Migration = Callable[[dict[str, Any]], dict[str, Any]]


#: (kind, version) -> the upgrade of that kind's version-``v`` body to ``v + 1``, registered by
#: the module that owns the body (:mod:`interlace.state.buffers` for ``join`` 1 → 2; the
#: package imports it, so it is registered before any blob is decoded). This module imports
#: none of them: the Arrow code of a body stays with its kind.
_BODY_UPGRADES: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}
#: The kinds whose version-1 body differs from version 2's.
_V1_BODIES_CHANGED = ("join",)


def register_body_upgrade(
    kind: str, from_version: int, fn: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    """Register ``fn`` to upgrade a ``kind`` body of ``from_version`` (the envelope's ``v``)."""
    _BODY_UPGRADES[(kind, from_version)] = fn


def _upgrade_v1_to_v2(envelope: dict[str, Any]) -> dict[str, Any]:
    """Version 1 → 2: a join body drops the duplicated ``__il_tus``; other kinds keep theirs."""
    body = envelope.get("body")
    kind = envelope.get("kind")
    if kind in _V1_BODIES_CHANGED and isinstance(body, dict):
        step = _BODY_UPGRADES.get((str(kind), 1))
        if step is None:
            msg = f"no upgrade of a version-1 {kind} body is registered (import interlace.state)"
            raise StateDecodeError(msg)
        body = step(body)
    return {**envelope, "v": 2, "body": body}


def _upgrade_v2_to_v3(envelope: dict[str, Any]) -> dict[str, Any]:
    """Version 2 → 3: the bodies are the same (version 3 may also compress one)."""
    return {**envelope, "v": 3}


# version v -> function that upgrades a v envelope to v + 1. Version 1 is the first layout;
# tests also register a synthetic v0 -> v1 step to prove the chain runs from further back.
_MIGRATIONS: dict[int, Migration] = {1: _upgrade_v1_to_v2, 2: _upgrade_v2_to_v3}
_OLDEST_VERSION = 1


def register_migration(from_version: int, fn: Migration) -> None:
    """Register ``fn`` to upgrade a ``from_version`` envelope to ``from_version + 1``.

    Args:
        from_version: The version the function reads.
        fn: Takes and returns a whole envelope dict; it must set ``"v"`` to the new version.
    """
    global _OLDEST_VERSION
    _MIGRATIONS[from_version] = fn
    _OLDEST_VERSION = min(_OLDEST_VERSION, from_version)


def supported_versions() -> list[int]:
    """Return every format version :func:`decode` can read."""
    return list(range(_OLDEST_VERSION, CURRENT_VERSION + 1))


def fingerprint(fields: Mapping[str, Any]) -> str:
    """Hash the spec fields that give state its meaning into 16 hex characters.

    Args:
        fields: JSON-serialisable values (tuples become lists).

    Returns:
        A stable hex digest; equal specs give equal fingerprints across processes.
    """
    payload = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def encode(kind: str, fp: str, body: Mapping[str, Any], *, compress: bool = False) -> bytes:
    """Wrap ``body`` in a current-version envelope and serialise it.

    Args:
        kind: ``"join"``, ``"window"``, ...
        fp: The spec fingerprint (:func:`fingerprint`).
        body: msgpack-native values only (bytes, str, int, float, bool, None, list, dict).
        compress: Store the body as zstd-compressed msgpack (:data:`BODY_CODEC`).

    Returns:
        The blob bytes.
    """
    envelope: dict[str, Any] = {"v": CURRENT_VERSION, "kind": kind, "fp": fp}
    if compress:
        import pyarrow as pa  # only for compressed bodies

        packed = msgpack.packb(dict(body), use_bin_type=True)
        codec = pa.Codec(BODY_CODEC, compression_level=BODY_CODEC_LEVEL)
        envelope.update(codec=BODY_CODEC, size=len(packed),
                        body=codec.compress(packed, asbytes=True))
    else:
        envelope["body"] = dict(body)
    out = msgpack.packb(envelope, use_bin_type=True)
    assert isinstance(out, bytes)
    return out


def decode(blob: bytes, *, kind: str, fp: str | None) -> dict[str, Any]:
    """Deserialise a blob, upgrade it to the current version and return its body.

    Args:
        blob: Bytes written by :func:`encode` (by this or an older version).
        kind: The kind the caller expects.
        fp: The running spec's fingerprint, or ``None`` to skip the check.

    Returns:
        The body dict at :data:`CURRENT_VERSION`.

    Raises:
        StateDecodeError: Not an interlace blob, or of another kind.
        StateVersionError: A newer format version, or a different spec fingerprint.
    """
    try:
        envelope = msgpack.unpackb(blob, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types
        msg = f"state blob is not valid msgpack ({len(blob)} bytes): {exc}"
        raise StateDecodeError(msg) from exc
    if not isinstance(envelope, dict) or "v" not in envelope or "body" not in envelope:
        msg = "state blob has no interlace envelope (expected keys v, kind, fp, body)"
        raise StateDecodeError(msg)
    version = envelope["v"]
    if not isinstance(version, int) or version > CURRENT_VERSION:
        msg = (
            f"state blob has format version {version!r}, but this interlace reads versions "
            f"{supported_versions()}; upgrade interlace to the version that wrote this checkpoint"
        )
        raise StateVersionError(msg)
    if "codec" in envelope:  # a compressed version-3 body: the map it holds
        envelope = {"v": version, "kind": envelope.get("kind"), "fp": envelope.get("fp"),
                    "body": _decompressed(envelope)}
    while envelope["v"] < CURRENT_VERSION:
        step = _MIGRATIONS.get(envelope["v"])
        if step is None:
            msg = (
                f"state blob has format version {envelope['v']}, which no registered migration "
                f"upgrades; supported versions are {supported_versions()}"
            )
            raise StateVersionError(msg)
        envelope = step(envelope)
    if envelope.get("kind") != kind:
        msg = f"state blob was written by a {envelope.get('kind')!r} operator, not {kind!r}"
        raise StateDecodeError(msg)
    if fp is not None and envelope.get("fp") != fp:
        msg = (
            f"state blob was written by an operator with a different spec (fingerprint "
            f"{envelope.get('fp')} != {fp}); a field that shapes {kind} state changed between "
            "restarts (join: keys, bounds, how, allowed lateness, key_groups, input columns; "
            "window: kind, durations, group_by, aggregations, late_data, key_groups, column "
            "types). Restore the old spec or start from a new checkpoint location"
        )
        raise StateVersionError(msg)
    body = envelope["body"]
    if not isinstance(body, dict):
        msg = f"state blob body is a {type(body).__name__}, not a map"
        raise StateDecodeError(msg)
    return body


def _decompressed(envelope: Mapping[str, Any]) -> Any:
    """The body map of a compressed version-3 envelope."""
    import pyarrow as pa

    codec, size, data = envelope.get("codec"), envelope.get("size"), envelope.get("body")
    if codec != BODY_CODEC or not isinstance(size, int) or not isinstance(data, bytes):
        msg = f"state blob has a body codec {codec!r} this interlace cannot read"
        raise StateDecodeError(msg)
    try:
        packed = pa.Codec(codec).decompress(data, decompressed_size=size, asbytes=True)
        return msgpack.unpackb(packed, raw=False, strict_map_key=False)
    except Exception as exc:  # Arrow and msgpack raise several types
        msg = f"state blob's {codec} body does not decompress ({len(data)} bytes): {exc}"
        raise StateDecodeError(msg) from exc


#: How a blob is held in the state row: a base64 string, or the bytes themselves.
STATE_ENCODINGS = ("base64", "binary")
#: What a new checkpoint holds.
DEFAULT_STATE_ENCODING = "base64"


def to_state_value(blob: bytes, encoding: str) -> bytes | str:
    """The state row's value for ``blob``: its base64 text, or the bytes (``"binary"``).

    Args:
        blob: Bytes written by :func:`encode`.
        encoding: One of :data:`STATE_ENCODINGS`.

    Returns:
        ``str`` for ``"base64"``, ``bytes`` for ``"binary"``.
    """
    if encoding == "base64":
        return base64.b64encode(blob).decode("ascii")
    if encoding == "binary":
        return blob
    msg = f"state encoding {encoding!r} is not one of {list(STATE_ENCODINGS)}"
    raise ValueError(msg)


def from_state_value(value: bytes | bytearray | memoryview | str) -> bytes:
    """The blob in a state row's value, whichever of :data:`STATE_ENCODINGS` holds it.

    Raises:
        StateDecodeError: A string that is not base64.
    """
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            msg = f"state value is not base64 text ({len(value)} characters): {exc}"
            raise StateDecodeError(msg) from exc
    return bytes(value)
