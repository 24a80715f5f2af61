"""What interlace keeps in ``GroupState``: versioned blobs, Arrow buffers, accumulators.

Nothing here imports pyspark, so all of it is testable without a JVM.
"""

from interlace.state.accumulators import (
    Accumulator,
    DistinctCapError,
    SumOverflowError,
    make_accumulator,
)
from interlace.state.blob import CURRENT_VERSION, decode, encode, fingerprint, register_migration
from interlace.state.buffers import JoinBuffers, decode_join_state, encode_join_state
from interlace.state.errors import InterlaceError, StateDecodeError, StateVersionError
from interlace.state.keygroups import (
    DEFAULT_JOIN_KEY_GROUPS,
    DEFAULT_KEY_GROUPS,
    key_group_sql,
    validate_key_groups,
)

__all__ = [
    "CURRENT_VERSION",
    "Accumulator",
    "DistinctCapError",
    "make_accumulator",
    "DEFAULT_JOIN_KEY_GROUPS",
    "DEFAULT_KEY_GROUPS",
    "InterlaceError",
    "JoinBuffers",
    "StateDecodeError",
    "StateVersionError",
    "SumOverflowError",
    "decode",
    "decode_join_state",
    "encode",
    "encode_join_state",
    "fingerprint",
    "key_group_sql",
    "register_migration",
    "validate_key_groups",
]
