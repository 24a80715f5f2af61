"""The checkpoint's spec record (issue 13): a restart with a changed spec stops before Spark.

``interlace run`` records the operator, every spec field and the sources' schemas in the
checkpoint folder; a later run compares (``interlace.pipeline.checkpoint``). The CLI side, on
Spark, is ``tests/cli/test_errors.py::test_changed_spec_on_an_old_checkpoint``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlace.operators.errors import ConfigError
from interlace.pipeline import Pipeline
from interlace.pipeline.checkpoint import (
    SPEC_FILE,
    changed_fields,
    check_checkpoint,
    heartbeat_sources,
    record_checkpoint,
    spec_record,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JOIN_TOML = (EXAMPLES / "orders_payments.toml").read_text()
WINDOW_TOML = (EXAMPLES / "clicks_per_minute.toml").read_text()


def test_a_fresh_checkpoint_gets_the_record_and_the_same_spec_passes(tmp_path):
    p = Pipeline.from_toml(JOIN_TOML)
    check_checkpoint(p, tmp_path)  # nothing recorded yet: nothing to compare
    record_checkpoint(p, tmp_path)
    path = tmp_path / p.checkpoint_path() / SPEC_FILE
    record = json.loads(path.read_text())
    assert record == spec_record(p) and record["operator"] == type(p.join).__name__
    check_checkpoint(Pipeline.from_toml(JOIN_TOML), tmp_path)
    # A second record_checkpoint keeps the first record.
    other = Pipeline.from_toml(JOIN_TOML.replace("key_groups = 8", "key_groups = 16"))
    record_checkpoint(other, tmp_path)
    assert json.loads(path.read_text()) == record


@pytest.mark.parametrize(("toml", "old", "new", "want"), [
    ("window", "key_groups = 8", "key_groups = 9", "key_groups: 8 -> 9"),
    ("window", "duration_ms = 60_000", "duration_ms = 30_000", "duration_ms: 60000 -> 30000"),
    ("window", 'group_by = ["user"]', 'group_by = ["user", "page"]',
     'group_by: ["user"] -> ["user", "page"]'),
    ("join", 'how = "left"', 'how = "inner"', 'how: "left" -> "inner"'),
    ("join", "upper_ms = 600_000", "upper_ms = 300_000", "upper_ms: 600000 -> 300000"),
    ("join", "lateness_ms = 120_000", "lateness_ms = 90_000", "lateness_ms: 120000 -> 90000"),
])
def test_each_changed_field_is_named_with_its_old_and_new_value(tmp_path, toml, old, new, want):
    text = WINDOW_TOML if toml == "window" else JOIN_TOML
    assert old in text, old
    record_checkpoint(Pipeline.from_toml(text), tmp_path)
    with pytest.raises(ConfigError) as err:
        check_checkpoint(Pipeline.from_toml(text.replace(old, new)), tmp_path)
    msg = str(err.value)
    assert msg.startswith(f"the checkpoint {Pipeline.from_toml(text).checkpoint_path()} was "
                          "written by another spec; changed since:\n"), msg
    assert f"\n  {want}\n" in msg, msg
    assert msg.endswith("restore them, or give [spark] checkpoint a new folder to start over "
                        "from the sources"), msg
    assert msg.count("\n  ") == 1, msg  # only the changed field


def test_every_change_is_listed_and_a_source_schema_counts(tmp_path):
    p = Pipeline.from_toml(JOIN_TOML)
    changed = JOIN_TOML.replace('how = "left"', 'how = "full"').replace(
        "key_groups = 8", "key_groups = 2")
    schema = next(s.schema for s in p.sources if s.schema)
    changed = changed.replace(schema, schema + ", extra STRING", 1)
    diffs = changed_fields(spec_record(p), spec_record(Pipeline.from_toml(changed)))
    assert [d.split(":")[0] for d in diffs] == ["how", "key_groups",
                                                 f"source {p.sources[0].name!r}"], diffs


def test_another_operator_is_named(tmp_path):
    diffs = changed_fields(spec_record(Pipeline.from_toml(JOIN_TOML)),
                           spec_record(Pipeline.from_toml(WINDOW_TOML)))
    assert diffs[0].startswith("the operator: Join -> Window"), diffs


def test_a_checkpoint_with_batches_but_no_record_is_recorded_only_after_a_run(tmp_path):
    p = Pipeline.from_toml(WINDOW_TOML)
    offsets = tmp_path / p.checkpoint_path() / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text("v1")
    record_checkpoint(p, tmp_path)  # before the query: the spec that wrote it is unknown
    assert not (tmp_path / p.checkpoint_path() / SPEC_FILE).exists()
    record_checkpoint(p, tmp_path, ran=True)  # after a run the state's fingerprint accepted
    assert (tmp_path / p.checkpoint_path() / SPEC_FILE).exists()


def test_an_unreadable_record_is_a_clear_error(tmp_path):
    p = Pipeline.from_toml(WINDOW_TOML)
    path = tmp_path / p.checkpoint_path() / SPEC_FILE
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="holds an unreadable interlace-spec.json"):
        check_checkpoint(p, tmp_path)


# --- The state encoding a checkpoint holds (spark.interlace.state.encoding) ------------------

GOLDEN_CHECKPOINT = (Path(__file__).resolve().parents[1] / "cli" / "golden" / "join_v1_checkpoint"
                     / "out" / "checkpoint")


class _Conf:
    """A SparkSession's ``conf``, enough for the state encoding."""

    def __init__(self, values=None):
        self.values = dict(values or {})

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value

    def unset(self, key):
        self.values.pop(key, None)


class _Session:
    def __init__(self, values=None):
        self.conf = _Conf(values)


def _schema_file(folder: Path, blob_type: str) -> Path:
    f = folder / "state" / "0" / "0" / "_metadata" / "schema"
    f.parent.mkdir(parents=True)
    value = {"type": "struct", "fields": [{"name": "groupState", "type": {
        "type": "struct", "fields": [{"name": "blob", "type": blob_type, "nullable": True,
                                      "metadata": {}}]}, "nullable": True, "metadata": {}}]}
    f.write_bytes(b"\x00\x02v2" + json.dumps(value, separators=(",", ":")).encode())
    return f


def test_the_state_encoding_of_a_checkpoint_is_read_from_spark_state_schema(tmp_path):
    from interlace.pipeline.checkpoint import stored_state_encoding

    # The golden checkpoint an earlier release wrote holds a binary blob column.
    assert stored_state_encoding(GOLDEN_CHECKPOINT) == "binary"
    assert stored_state_encoding(tmp_path / "none") is None
    (tmp_path / "empty" / "state").mkdir(parents=True)
    assert stored_state_encoding(tmp_path / "empty") is None
    _schema_file(tmp_path / "new", "string")
    assert stored_state_encoding(tmp_path / "new") == "base64"


def test_a_query_is_built_with_the_checkpoint_encoding_and_the_session_setting_is_restored(
        tmp_path):
    from interlace.operators.common.shim import STATE_ENCODING_CONF
    from interlace.pipeline.checkpoint import state_encoding_for

    _schema_file(tmp_path / "old", "binary")
    spark = _Session()
    with state_encoding_for(spark, tmp_path / "old") as chosen:
        assert chosen == "binary" and spark.conf.get(STATE_ENCODING_CONF) == "binary"
    assert STATE_ENCODING_CONF not in spark.conf.values
    # The checkpoint wins over the session's setting (where interlace run puts the pipeline's
    # [spark.conf]): Spark refuses another state schema. The setting is restored afterwards.
    spark = _Session({STATE_ENCODING_CONF: "base64"})
    with state_encoding_for(spark, tmp_path / "old") as chosen:
        assert chosen == "binary" and spark.conf.get(STATE_ENCODING_CONF) == "binary"
    assert spark.conf.get(STATE_ENCODING_CONF) == "base64"
    # A new checkpoint: the session's setting, else base64.
    spark = _Session({STATE_ENCODING_CONF: "binary"})
    with state_encoding_for(spark, tmp_path / "fresh") as chosen:
        assert chosen == "binary"
    with state_encoding_for(_Session(), tmp_path / "fresh") as chosen:
        assert chosen == "base64"


def test_an_unknown_state_encoding_setting_is_a_config_error_naming_the_setting():
    from interlace.operators.common.shim import STATE_ENCODING_CONF, state_encoding_of

    assert state_encoding_of(_Session()) == "base64"
    assert state_encoding_of(_Session({STATE_ENCODING_CONF: " Binary "})) == "binary"
    with pytest.raises(ConfigError, match=r"spark\.interlace\.state\.encoding='zip' is not one "
                                          r"of \['base64', 'binary'\]"):
        state_encoding_of(_Session({STATE_ENCODING_CONF: "zip"}))


IDLE = 'event_time_column = "pay_ts"'


def test_a_new_join_checkpoint_has_heartbeat_sources_so_idle_inputs_may_come_and_go(tmp_path):
    """Every join of a new checkpoint reads heartbeat sources (each input's watermark restored
    at a restart, docs/idle-inputs.md), so turning idle timeouts on or off, or changing them,
    changes nothing Spark stored."""
    assert IDLE in JOIN_TOML
    off = Pipeline.from_toml(JOIN_TOML)
    on = Pipeline.from_toml(JOIN_TOML.replace(IDLE, IDLE + "\nidle_timeout_ms = 60_000"))
    longer = Pipeline.from_toml(JOIN_TOML.replace(IDLE, IDLE + "\nidle_timeout_ms = 90_000"))
    assert "left_idle_timeout_ms" not in spec_record(off)["spec"]
    assert heartbeat_sources(off, tmp_path)  # fresh
    record_checkpoint(off, tmp_path)
    assert heartbeat_sources(off, tmp_path)
    for pipeline in (on, longer, off):
        check_checkpoint(pipeline, tmp_path)
    window = Pipeline.from_toml(WINDOW_TOML)
    assert not heartbeat_sources(window, tmp_path / "w")  # one input: no heartbeats


def test_an_older_join_checkpoint_keeps_its_sources_and_refuses_idle_inputs(tmp_path):
    """A checkpoint written without heartbeat sources (a record without the key, or batches
    but no record) keeps them off, and an idle timeout, which needs them, is refused."""
    off = Pipeline.from_toml(JOIN_TOML)
    on = Pipeline.from_toml(JOIN_TOML.replace(IDLE, IDLE + "\nidle_timeout_ms = 60_000"))
    record_checkpoint(off, tmp_path)
    path = off.checkpoint_folder(tmp_path) / SPEC_FILE
    record = json.loads(path.read_text())
    key = "idle inputs (idle_timeout_ms: heartbeat sources)"
    del record["spec"][key]  # as an earlier interlace wrote it
    path.write_text(json.dumps(record))
    assert not heartbeat_sources(off, tmp_path)
    check_checkpoint(off, tmp_path)
    with pytest.raises(ConfigError, match=r"heartbeat sources\): \(absent\) -> true"):
        check_checkpoint(on, tmp_path)
    unrecorded = tmp_path / "unrecorded"
    offsets = off.checkpoint_folder(unrecorded) / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text("v1\n")
    assert not heartbeat_sources(off, unrecorded)
    assert heartbeat_sources(on, unrecorded)  # the run then fails on Spark's own check
    record_checkpoint(off, unrecorded, ran=True)
    assert key not in json.loads(
        (off.checkpoint_folder(unrecorded) / SPEC_FILE).read_text())["spec"]
