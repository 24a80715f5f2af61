"""Write the golden v1 join blobs. Run once per released format version; never overwrite.

``join_v1.bin``: uncompressed Arrow IPC buffers (as written before interlace compressed
them); ``join_v1_zstd.bin``: zstd-compressed buffers (``JOIN_IPC_COMPRESSION``). Existing files
are kept.

    python tests/unit/state/golden/make_golden.py
"""

from __future__ import annotations

from pathlib import Path

import interlace.state.buffers as buffers_module
import pyarrow as pa
from interlace.state.buffers import JoinBuffers, buffer_schema, encode_join_state

HERE = Path(__file__).parent
LEFT_PAYLOAD = pa.schema([("__il_l0", pa.int64()), ("__il_l1", pa.string()), ("__il_l2", pa.timestamp("ns"))])
RIGHT_PAYLOAD = pa.schema([("__il_r0", pa.int64()), ("__il_r1", pa.float64())])
FP = "0123456789abcdef"


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


if __name__ == "__main__":
    for name, codec in (("join_v1.bin", None), ("join_v1_zstd.bin", "zstd")):
        if not (HERE / name).exists():
            buffers_module.JOIN_IPC_COMPRESSION = codec
            (HERE / name).write_bytes(encode_join_state(golden_buffers(), FP))
