from __future__ import annotations

import importlib.util
from pathlib import Path

import interlace.state.buffers as buffers_module
import msgpack
import pyarrow as pa
import pytest
from interlace.state import blob
from interlace.state.buffers import (
    TIME_COLUMN,
    JoinBuffers,
    decode_join_state,
    encode_join_state,
    ipc_to_table,
    table_to_ipc,
)
from interlace.state.errors import StateDecodeError, StateVersionError

GOLDEN = Path(__file__).parent / "golden"
_spec = importlib.util.spec_from_file_location("make_golden", GOLDEN / "make_golden.py")
assert _spec and _spec.loader
make_golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_golden)


def _schemas():
    from interlace.state.buffers import buffer_schema

    return buffer_schema(make_golden.LEFT_PAYLOAD), buffer_schema(make_golden.RIGHT_PAYLOAD)


@pytest.mark.parametrize("name", ["join_v1.bin", "join_v1_zstd.bin", "join_v2.bin", "join_v3.bin"])
def test_golden_join_blob_of_every_version_decodes_to_the_same_buffers(name):
    data = (GOLDEN / name).read_bytes()
    assert msgpack.unpackb(data)["v"] == int(name[6])
    ls, rs = _schemas()
    got = decode_join_state(data, make_golden.FP, ls, rs)
    want = make_golden.golden_buffers()
    assert got.left.equals(want.left)
    assert got.right.equals(want.right)


@pytest.mark.parametrize("name", ["join_v1.bin", "join_v1_zstd.bin"])
def test_the_v1_to_v2_migration_drops_the_duplicated_event_time_in_us(name):
    v1 = msgpack.unpackb((GOLDEN / name).read_bytes(), raw=False)
    assert ipc_to_table(v1["body"]["left"]).column_names[0] == TIME_COLUMN
    v2 = blob._MIGRATIONS[1](v1)
    assert v2["v"] == 2 and (v2["kind"], v2["fp"]) == (v1["kind"], v1["fp"])
    # The left side's event time __il_l2 gives __il_tus back; the right side has no timestamp
    # column, so it keeps __il_tus (and its bytes).
    assert v2["body"]["times"] == {"left": "__il_l2", "right": None}
    assert ipc_to_table(v2["body"]["left"]).column_names == ["__il_m", "__il_l0", "__il_l1",
                                                             "__il_l2"]
    assert v2["body"]["right"] == v1["body"]["right"]
    assert v2["body"]["extra"] == v1["body"]["extra"] == {}
    # The migrated left side is what the current release writes for the same buffers.
    now = msgpack.unpackb(make_golden.encoded(buffers_module.JOIN_IPC_COMPRESSION), raw=False)
    assert v2["body"]["left"] == now["body"]["left"]


def test_other_kinds_only_change_version_in_the_migration():
    env = {"v": 1, "kind": "window", "fp": "f", "body": {"slots": b"x", "accs": [], "seq": 3}}
    assert blob._MIGRATIONS[1](env) == {**env, "v": 2}
    old = msgpack.packb(env, use_bin_type=True)
    assert blob.decode(old, kind="window", fp="f") == env["body"]


def test_uncompressed_encoding_is_byte_stable_against_the_golden_blob(monkeypatch):
    monkeypatch.setattr(buffers_module, "JOIN_IPC_COMPRESSION", None)
    data = (GOLDEN / "join_v3.bin").read_bytes()
    assert encode_join_state(make_golden.golden_buffers(), make_golden.FP,
                             make_golden.TIME_COLUMNS) == data
    # Without the plan's columns the encoder finds the same ones among the timestamp columns.
    assert encode_join_state(make_golden.golden_buffers(), make_golden.FP) == data


def test_join_blobs_are_compressed_and_round_trip():
    # zstd bytes may change with the zstd library, so compare sizes and contents, not bytes.
    assert buffers_module.JOIN_IPC_COMPRESSION == "zstd"
    n = 20_000
    left = pa.Table.from_pydict(
        {"__il_tus": pa.array(range(10**15, 10**15 + n * 1000, 1000), pa.int64()),
         "__il_m": [False] * n, "__il_l0": [i % 100 for i in range(n)],
         "__il_l1": [f"v{i % 7}" for i in range(n)],
         "__il_l2": pa.array([10**18 + i * 10**6 for i in range(n)], pa.timestamp("ns"))},
        schema=_schemas()[0])
    buffers = JoinBuffers(left, _schemas()[1].empty_table(), {"x": 1})
    data = encode_join_state(buffers, "fp")
    plain = blob.encode("join", "fp", {"left": table_to_ipc(left), "right": b"", "extra": {}})
    assert len(data) < len(plain) / 3
    got = decode_join_state(data, "fp", *_schemas())
    assert got.left.equals(left) and got.right.num_rows == 0 and got.extra == {"x": 1}


def test_blob_round_trips_body_and_checks_kind_and_fingerprint():
    data = blob.encode("window", "fp1", {"x": [1, 2], "b": b"\x00"})
    assert blob.decode(data, kind="window", fp="fp1") == {"x": [1, 2], "b": b"\x00"}
    assert blob.decode(data, kind="window", fp=None) == {"x": [1, 2], "b": b"\x00"}
    with pytest.raises(StateDecodeError, match="written by a 'window' operator"):
        blob.decode(data, kind="join", fp="fp1")
    with pytest.raises(StateVersionError, match="different spec"):
        blob.decode(data, kind="window", fp="other")


def test_newer_version_is_a_clear_error_naming_found_and_supported():
    data = msgpack.packb({"v": 99, "kind": "join", "fp": "x", "body": {}})
    with pytest.raises(StateVersionError, match=r"version 99.*reads versions \[1, 2, 3\]"):
        blob.decode(data, kind="join", fp=None)


def test_garbage_is_a_decode_error():
    with pytest.raises(StateDecodeError):
        blob.decode(b"\xc1not msgpack", kind="join", fp=None)
    with pytest.raises(StateDecodeError, match="no interlace envelope"):
        blob.decode(msgpack.packb([1, 2]), kind="join", fp=None)


def test_migration_chain_upgrades_an_old_version_on_read(monkeypatch):
    monkeypatch.setattr(blob, "_MIGRATIONS", dict(blob._MIGRATIONS))
    monkeypatch.setattr(blob, "_OLDEST_VERSION", 1)

    def upgrade_v0_to_v1(env):
        body = dict(env["body"])
        body["renamed"] = body.pop("old")
        return {**env, "v": 1, "body": body}

    blob.register_migration(0, upgrade_v0_to_v1)
    old = msgpack.packb({"v": 0, "kind": "window", "fp": "f", "body": {"old": 5}})
    assert blob.decode(old, kind="window", fp="f") == {"renamed": 5}  # then 1 -> 2 -> 3
    assert blob.supported_versions() == [0, 1, 2, 3]


def test_version_without_a_registered_migration_is_an_error(monkeypatch):
    monkeypatch.setattr(blob, "_MIGRATIONS", {})
    old = msgpack.packb({"v": 0, "kind": "join", "fp": "f", "body": {}})
    with pytest.raises(StateVersionError, match="no registered migration"):
        blob.decode(old, kind="join", fp="f")


def test_fingerprint_is_stable_and_order_independent():
    assert blob.fingerprint({"a": 1, "b": (1, 2)}) == blob.fingerprint({"b": [1, 2], "a": 1})
    assert blob.fingerprint({"a": 1}) != blob.fingerprint({"a": 2})


# --- The blob in the state row (spark.interlace.state.encoding) ---------------------------


@pytest.mark.parametrize("data", [b"", b"\x00\xff" * 7, (GOLDEN / "join_v2.bin").read_bytes()])
def test_a_blob_goes_through_either_state_encoding_and_back_unchanged(data):
    text = blob.to_state_value(data, "base64")
    assert isinstance(text, str) and text.isascii()
    assert blob.from_state_value(text) == data
    raw = blob.to_state_value(data, "binary")
    assert raw == data and isinstance(raw, bytes)
    # Spark hands a binary state value to Python as bytearray.
    assert blob.from_state_value(bytearray(data)) == data


def test_a_state_value_that_is_not_base64_is_a_decode_error_and_an_unknown_encoding_fails():
    with pytest.raises(StateDecodeError, match=r"not base64 text \(5 characters\)"):
        blob.from_state_value("ab!cd")
    with pytest.raises(ValueError, match="'zip' is not one of"):
        blob.to_state_value(b"x", "zip")



# --- Format 3: the 2 -> 3 migration and compressed bodies --------------------------------


def test_the_v2_to_v3_migration_only_changes_the_version():
    env = msgpack.unpackb((GOLDEN / "join_v2.bin").read_bytes(), raw=False)
    assert blob._MIGRATIONS[2](env) == {**env, "v": 3}
    v3 = msgpack.unpackb((GOLDEN / "join_v3.bin").read_bytes(), raw=False)
    assert {**env, "v": 3} == v3


def test_the_golden_compressed_window_blob_decodes_to_its_body():
    data = (GOLDEN / make_golden.WINDOW_GOLDEN).read_bytes()
    env = msgpack.unpackb(data, raw=False)
    assert (env["v"], env["kind"], env["codec"]) == (3, "window", "zstd")
    assert isinstance(env["body"], bytes) and env["size"] > len(env["body"]) - 20
    assert blob.decode(data, kind="window", fp=make_golden.FP) == make_golden.window_body()


def test_a_compressed_body_round_trips_is_smaller_and_is_checked_like_a_plain_one():
    body = {"slots": b"\0" * 50_000, "accs": [[1, 2]], "seq": 9}
    packed = blob.encode("window", "f", body, compress=True)
    plain = blob.encode("window", "f", body)
    assert len(packed) * 20 < len(plain)
    assert blob.decode(packed, kind="window", fp="f") == body == blob.decode(
        plain, kind="window", fp="f")
    with pytest.raises(StateVersionError, match="different spec"):
        blob.decode(packed, kind="window", fp="g")
    with pytest.raises(StateDecodeError, match="not 'join'"):
        blob.decode(packed, kind="join", fp="f")


def test_a_compressed_body_that_is_damaged_or_of_an_unknown_codec_is_a_decode_error():
    env = msgpack.unpackb(blob.encode("window", "f", {"seq": 1}, compress=True), raw=False)
    bad = {**env, "body": env["body"][:-3]}
    with pytest.raises(StateDecodeError, match="zstd body does not decompress"):
        blob.decode(msgpack.packb(bad, use_bin_type=True), kind="window", fp="f")
    other = {**env, "codec": "brotli"}
    with pytest.raises(StateDecodeError, match="body codec 'brotli'"):
        blob.decode(msgpack.packb(other, use_bin_type=True), kind="window", fp="f")
