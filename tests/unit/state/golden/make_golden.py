"""Write the golden join blobs. Run once per released format version; never overwrite.

``join_v1.bin``: format 1, uncompressed Arrow IPC buffers (as written before interlace
compressed them); ``join_v1_zstd.bin``: format 1, zstd-compressed buffers
(``JOIN_IPC_COMPRESSION``); both written by the release at git commit 2511b74 or earlier.
``join_v2.bin``: format 2, uncompressed (the left side leaves ``__il_tus`` out, as its
event-time column ``__il_l2`` gives it back; the right side has no timestamp column and keeps
it). ``join_v3.bin``: format 3, the same buffers (only ``v`` differs); ``window_v3_zstd.bin``:
format 3 with a zstd-compressed body (:func:`window_body`, as the window writes its state).
Only the current format's files are written, and existing files are kept.

    python tests/unit/state/golden/make_golden.py
"""

from __future__ import annotations

from pathlib import Path

import interlace.state.buffers as buffers_module
import pyarrow as pa
from interlace.state import blob
from interlace.state.buffers import JoinBuffers, buffer_schema, encode_join_state

HERE = Path(__file__).parent
LEFT_PAYLOAD = pa.schema([("__il_l0", pa.int64()), ("__il_l1", pa.string()), ("__il_l2", pa.timestamp("ns"))])
RIGHT_PAYLOAD = pa.schema([("__il_r0", pa.int64()), ("__il_r1", pa.float64())])
FP = "0123456789abcdef"
#: Each side's event-time payload column (``JoinPlan.time_columns``): the right has none.
TIME_COLUMNS = ("__il_l2", None)
#: The golden files of each format version and their IPC codec.
GOLDEN_FILES = {1: (("join_v1.bin", None), ("join_v1_zstd.bin", "zstd")),
                2: (("join_v2.bin", None),),
                3: (("join_v3.bin", None),)}
#: The compressed-body golden of format 3 (:func:`window_body`).
WINDOW_GOLDEN = "window_v3_zstd.bin"


def golden_buffers() -> JoinBuffers:
    left = pa.Table.from_pydict(
        {"__il_tus": [1_767_225_603_000_000, 1_767_225_605_000_000], "__il_m": [True, False],
         "__il_l0": [7, 8], "__il_l1": ["A", None],
         "__il_l2": pa.array([1_767_225_603_000_000_000, 1_767_225_605_000_000_000], pa.timestamp("ns"))},
        schema=buffer_schema(LEFT_PAYLOAD))
    right = pa.Table.from_pydict(
        {"__il_tus": [1_767_225_604_000_000], "__il_m": [True], "__il_r0": [7], "__il_r1": [2.5]},
        schema=buffer_schema(RIGHT_PAYLOAD))
    return JoinBuffers(left, right, {})


def encoded(codec: str | None) -> bytes:
    """The golden buffers as the running release encodes them, with IPC codec ``codec``."""
    saved = buffers_module.JOIN_IPC_COMPRESSION
    buffers_module.JOIN_IPC_COMPRESSION = codec
    try:
        return encode_join_state(golden_buffers(), FP, TIME_COLUMNS)
    finally:
        buffers_module.JOIN_IPC_COMPRESSION = saved


def window_body() -> dict:
    """A window body: a two-slot table and one count accumulator, as plain msgpack values."""
    from interlace.state.buffers import table_to_ipc

    slots = pa.table({"start": [0, 60_000_000], "end": [60_000_000, 120_000_000],
                      "k": [7, 7]})
    return {"slots": table_to_ipc(slots), "accs": [[3, 1]], "seq": 4}


if __name__ == "__main__":
    for name, codec in GOLDEN_FILES[blob.CURRENT_VERSION]:
        if not (HERE / name).exists():
            (HERE / name).write_bytes(encoded(codec))
    if blob.CURRENT_VERSION == 3 and not (HERE / WINDOW_GOLDEN).exists():
        (HERE / WINDOW_GOLDEN).write_bytes(blob.encode("window", FP, window_body(), compress=True))
