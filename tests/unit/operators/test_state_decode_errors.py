"""A corrupt, truncated or foreign blob in a checkpoint gives a ``StateDecodeError`` that names
the operator and the key group (issue 13), for every operator, through the function Spark
calls (``applyInPandasWithState``'s), not a traceback from deep inside msgpack or Arrow."""

from __future__ import annotations

import pyarrow as pa
import pytest

from interlace import Aggregation, Join, StreamTableJoin, Window
from interlace.operators.join.plan import JoinPlan
from interlace.operators.join.shim import JoinFunction
from interlace.operators.stream_table.plan import StreamTablePlan
from interlace.operators.stream_table.shim import StreamTableJoinFunction
from interlace.operators.window.plan import WindowPlan
from interlace.operators.window.shim import WindowFunction
from interlace.state import StateDecodeError, StateVersionError, encode
from interlace.testing.local import FakeGroupState

TS = pa.timestamp("us")
LEFT = pa.schema([("id", pa.int64()), ("ts", TS)])
RIGHT = pa.schema([("id", pa.int64()), ("v", pa.string()), ("ts", TS)])


def functions():
    join = Join(left_keys=["id"], right_keys=["id"], time_window_ms=1000,
                event_time_column="ts", key_groups=4)
    window = Window(kind="tumbling", duration_ms=1000, event_time_column="ts", group_by=["id"],
                    max_groups_per_window=100, aggregations=[Aggregation(agg="count", as_="n")],
                    key_groups=4)
    st = StreamTableJoin(left_keys=["id"], right_keys=["id"], event_time_column="ts",
                         lateness_ms=1000, key_groups=4)
    return {
        "Join": JoinFunction(JoinPlan.from_schemas(join, LEFT, RIGHT)),
        "Window": WindowFunction(WindowPlan.from_schema(window, LEFT)),
        "StreamTableJoin": StreamTableJoinFunction(StreamTablePlan.from_schemas(st, LEFT, RIGHT)),
    }


BAD = {
    "garbage": (b"\x00\x01not msgpack at all", StateDecodeError, "not valid msgpack"),
    "truncated": (None, StateDecodeError, ""),
    "another operator": (encode("elsewhere", "0" * 16, {"x": 1}), StateDecodeError,
                         "written by a 'elsewhere' operator"),
    "another spec": (None, StateVersionError, "different spec"),
}


KINDS = {"Join": "join", "Window": "window", "StreamTableJoin": "stream_table"}


@pytest.mark.parametrize("operator", list(KINDS))
@pytest.mark.parametrize("bad", list(BAD))
def test_a_bad_blob_names_the_operator_and_the_key_group(operator, bad):
    func = functions()[operator]
    blob, error, needle = BAD[bad]
    if bad in ("truncated", "another spec"):  # the operator's own kind, another fingerprint
        own = encode(KINDS[operator], "f" * 16, {"history": b"x" * 64})
        blob = own[: len(own) // 2] if bad == "truncated" else own
    state = FakeGroupState(watermark_ms=5_000, value=(blob,))
    with pytest.raises(error) as err:
        list(func((3,), iter(()), state))
    msg = str(err.value)
    assert msg.endswith(f"({operator} operator, key group 3)"), msg
    assert needle in msg, msg
    assert state.value == (blob,)  # the stored state is left as it was
