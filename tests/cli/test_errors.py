"""Errors users can act on (issue 11): the CLI prints one short message naming the problem and
the fix, never a Python traceback or a Java stack, unless asked with --verbose.

Most checks need no Spark (``validate``, and ``run`` refusing before Spark starts); three kinds
of error only exist once a query runs: a checkpoint written by another spec, and a malformed
record under ``mode = "FAILFAST"`` (JSON and CSV).
"""

from __future__ import annotations

import json
import re

import pytest
from cli_support import cli, run_here

pytestmark = pytest.mark.spark

WINDOW_TOML = """
name = "clicks"

[[sources]]
name = "clicks"
format = "{fmt}"
path = "in/clicks"
schema = "user STRING, page STRING, ts TIMESTAMP"
event_time_column = "ts"
{options}

[transform.window]
kind = "tumbling"
duration_ms = 10000
lateness_ms = 1000
group_by = ["user"]
max_groups_per_window = 100
key_groups = 2

[[transform.window.aggregations]]
agg = "count"
as = "clicks"

[target]
kind = "duckdb"
path = "out/w.duckdb"

[spark]
checkpoint = "out/checkpoint"
shuffle_partitions = 1
"""

JOIN_TOML = """
name = "orders-payments"

[[sources]]
name = "orders"
format = "json"
path = "in/orders"
schema = "order_id BIGINT, amount DOUBLE, order_ts TIMESTAMP"
event_time_column = "order_ts"

[[sources]]
name = "payments"
format = "json"
path = "in/payments"
schema = "order_id DOUBLE, paid DOUBLE, pay_ts TIMESTAMP"
event_time_column = "pay_ts"

[transform.join]
kind = "stream_stream_join"
left_source = "orders"
right_source = "payments"
left_keys = ["order_id"]
right_keys = ["order_id"]
lower_ms = 0
upper_ms = 30000

[target]
kind = "console"
"""


def clicks(root, fmt="json", lines=None, name="000000"):
    """Write one input file of the window pipeline; return its path."""
    folder = root / "in" / "clicks"
    folder.mkdir(parents=True, exist_ok=True)
    if lines is None:
        lines = [json.dumps({"user": "a", "page": "/x", "ts": "2026-01-01T00:00:01Z"}),
                 json.dumps({"user": "b", "page": "/y", "ts": "2026-01-01T00:00:02Z"})]
    path = folder / f"{name}.{fmt}"
    path.write_text("\n".join(lines) + "\n")
    return path


def pipeline(root, text, name="p.toml"):
    (root / name).write_text(text)
    return name


def window_toml(fmt="json", options=""):
    return WINDOW_TOML.format(fmt=fmt, options=options)


def assert_short(proc, code, *needles):
    """The run failed with ``code`` and a short message holding every needle, no trace."""
    err = proc.stderr
    assert proc.returncode == code, (proc.returncode, err)
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= 5, err
    assert lines[0].startswith("interlace: "), err
    assert "at org.apache" not in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


# --------------------------------------------------------------------------------------------
# Before Spark starts (validate, and run refusing early)
# --------------------------------------------------------------------------------------------


def test_missing_source_path(tmp_path):
    name = pipeline(tmp_path, window_toml().replace('path = "in/clicks"', 'path = "in/nope"'))
    # validate warns (the data may not be there yet) and names the path, its line and the fix.
    proc = cli("validate", name, cwd=tmp_path)
    assert "ok" in proc.stdout
    warning = proc.stderr.strip()
    assert warning.startswith("interlace: warning: [[sources]] #1: `path` 'in/nope' of source "
                              "'clicks' does not exist"), warning
    assert str(tmp_path / "in/nope") in warning and "(line 7 of p.toml)" in warning
    assert "fix `path` or create the folder" in warning
    # run refuses before Spark starts: one line, exit 2.
    proc = cli("run", name, cwd=tmp_path, check=False)
    err = assert_short(proc, 2, "`path` 'in/nope' of source 'clicks' does not exist",
                       "fix `path` or create the folder", "(line 7 of p.toml)")
    assert len(err.strip().splitlines()) == 1
    proc = cli("run", name, "--verbose", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == err.strip()


@pytest.mark.parametrize(("schema", "needles"), [
    ("user STRING, page STRIG, ts TIMESTAMP",
     ["`schema` column 'page' of source 'clicks' has type STRIG: STRIG is not a Spark SQL type; "
      "did you mean STRING?", "(line 8 of p.toml)"]),
    ("user STRING, page TEXT, ts TIMESTAMP",
     ["type TEXT: TEXT is not a Spark SQL type; did you mean STRING?"]),
    ("user STRING, page ARRAY<INTEGR>, ts TIMESTAMP",
     ["type ARRAY<INTEGR>: INTEGR is not a Spark SQL type; did you mean INTEGER?"]),
    ("user VARCHAR, page STRING, ts TIMESTAMP", ["VARCHAR needs a length, e.g. VARCHAR(20)"]),
])
def test_bad_schema_ddl(tmp_path, schema, needles):
    clicks(tmp_path)
    text = window_toml().replace('"user STRING, page STRING, ts TIMESTAMP"', json.dumps(schema))
    name = pipeline(tmp_path, text)
    for command in ("validate", "run"):
        proc = cli(command, name, cwd=tmp_path, check=False)
        assert_short(proc, 2, "interlace: configuration error: [[sources]] #1:",
                     "Spark SQL types are STRING, BOOLEAN, INT, BIGINT", *needles)
    proc = cli("validate", "--verbose", name, cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" in proc.stderr and needles[0] in proc.stderr


def test_mismatched_join_key_types(tmp_path):
    for side in ("orders", "payments"):
        (tmp_path / "in" / side).mkdir(parents=True)
    name = pipeline(tmp_path, JOIN_TOML)
    for command in ("validate", "run"):
        proc = cli(command, name, cwd=tmp_path, check=False)
        assert_short(proc, 2, "[transform.join]: join key types differ: `left_keys` 'order_id' "
                     "of source 'orders' is BIGINT and `right_keys` 'order_id' of source "
                     "'payments' is DOUBLE", "declare both the same type in the sources' "
                     "`schema` (e.g. order_id BIGINT in source 'payments') or CAST one",
                     "(line 22 of p.toml)")
    # Integer keys of different widths compare exactly: accepted.
    pipeline(tmp_path, JOIN_TOML.replace("order_id DOUBLE", "order_id INT"))
    assert "ok" in cli("validate", name, cwd=tmp_path).stdout


def test_aggregation_column_types(tmp_path):
    clicks(tmp_path)
    text = window_toml().replace('agg = "count"', 'agg = "sum"\ncolumn = "page"')
    name = pipeline(tmp_path, text)
    proc = cli("validate", name, cwd=tmp_path, check=False)
    assert_short(proc, 2, "[[transform.window.aggregations]] #1: aggregation 'clicks': sum needs "
                 "an integer, floating-point or decimal column", "`column` 'page' of source "
                 "'clicks' is STRING; declare it BIGINT or DOUBLE", "(line 22 of p.toml)")
    pipeline(tmp_path, text.replace('agg = "sum"', 'agg = "max"'))  # strings order
    assert "ok" in cli("validate", name, cwd=tmp_path).stdout
    pipeline(tmp_path, text.replace("page STRING", "page DECIMAL(12,2)"))  # decimals sum
    assert "ok" in cli("validate", name, cwd=tmp_path).stdout


def test_implausible_master(tmp_path):
    clicks(tmp_path)
    for master, hint in (("locl[2]", "did you mean 'local[2]'?"),
                         ("mesos://host:5050", "Spark 4 has no Mesos support"),
                         ("spark://host", "")):
        name = pipeline(tmp_path, window_toml() + f'master = "{master}"\n')
        for command in ("validate", "run"):
            proc = cli(command, name, cwd=tmp_path, check=False)
            assert_short(proc, 2, f"[spark]: `master` '{master}' is not a Spark master URL", hint,
                         "local[N] (N threads), local[*], spark://HOST:PORT",
                         "(line 31 of p.toml)")
    for master in ("local", "local[*]", "local[4, 2]", "spark://a:7077,b:7077", "yarn",
                   "k8s://https://10.0.0.1:443", "local-cluster[2, 1, 1024]"):
        pipeline(tmp_path, window_toml() + f'master = "{master}"\n')
        assert "ok" in cli("validate", "p.toml", cwd=tmp_path).stdout, master


# --------------------------------------------------------------------------------------------
# While a query runs (Spark)
# --------------------------------------------------------------------------------------------


def test_changed_spec_on_an_old_checkpoint(spark, tmp_path):
    """Issue 13: a restart with a changed spec stops before Spark starts, naming each field."""
    clicks(tmp_path)
    name = pipeline(tmp_path, window_toml())
    run_here(spark, tmp_path, name)  # in-process: the checkpoint is what matters here
    record = json.loads((tmp_path / "out/checkpoint/interlace-spec.json").read_text())
    assert record["operator"] == "Window" and record["spec"]["key_groups"] == 2
    clicks(tmp_path, name="000001")  # new input: the next batch reads the stored state
    changed = window_toml().replace("key_groups = 2", "key_groups = 3").replace(
        "lateness_ms = 1000", "lateness_ms = 4000")
    pipeline(tmp_path, changed)
    proc = cli("run", name, cwd=tmp_path, check=False)
    err = assert_short(proc, 2, "interlace: configuration error: the checkpoint out/checkpoint "
                       "was written by another spec; changed since:", "  key_groups: 2 -> 3",
                       "  lateness_ms: 1000 -> 4000",
                       "restore them, or give [spark] checkpoint a new folder")
    assert len(err.strip().splitlines()) == 4, err
    assert "log4j" not in (tmp_path / ".interlace/logs/p.log").read_text(), "Spark started"
    # A checkpoint without the record (an older interlace, the Python API): the state's own
    # fingerprint stops the first micro-batch that reads it.
    (tmp_path / "out/checkpoint/interlace-spec.json").unlink()
    pipeline(tmp_path, window_toml().replace("key_groups = 2", "key_groups = 3"))
    proc = cli("run", name, cwd=tmp_path, check=False)
    err = assert_short(proc, 2, "interlace: the checkpoint out/checkpoint was written by another "
                       "spec; use a new checkpoint or restore the old spec",
                       "StateVersionError: state blob was written by an operator with a "
                       "different spec", "run with --verbose for the full trace, or see "
                       ".interlace/logs/p.log")
    assert len(err.strip().splitlines()) == 3
    log = (tmp_path / ".interlace/logs/p.log").read_text()
    assert "interlace.state.errors.StateVersionError" in log and "at org.apache" in log
    assert "Traceback" in log
    assert not (tmp_path / "out/checkpoint/interlace-spec.json").exists()  # spec unknown
    # --verbose: Spark's output and the full trace, then the same message.
    proc = cli("run", name, "--verbose", cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr and "at org.apache" in proc.stderr
    assert "interlace.state.errors.StateVersionError" in proc.stderr
    tail = proc.stderr.strip().splitlines()[-2:]
    assert tail == err.strip().splitlines()[:2], tail


@pytest.mark.parametrize(("fmt", "bad", "cause"), [
    ("json", '{"user": "b", "page": "/y", "ts": "2026-01-01T00:00:02Z"',
     "Unexpected end-of-input"),
    ("csv", "b,/y,not-a-time", "The value 'not-a-time' of the type \"STRING\" cannot be cast to "
     "\"TIMESTAMP\" because it is malformed."),
])
def test_failfast_malformed_record(tmp_path, fmt, bad, cause):
    good = (json.dumps({"user": "a", "page": "/x", "ts": "2026-01-01T00:00:01Z"})
            if fmt == "json" else "a,/x,2026-01-01T00:00:01Z")
    path = clicks(tmp_path, fmt, [good, bad])
    name = pipeline(tmp_path, window_toml(fmt, 'options = { mode = "FAILFAST" }'))
    proc = cli("run", name, cwd=tmp_path, check=False)
    err = assert_short(proc, 2, f" in {path} (source 'clicks', mode FAILFAST): {cause}",
                       'drop mode = "FAILFAST"', "PERMISSIVE mode",
                       "run with --verbose for the full trace, or see .interlace/logs/p.log")
    assert len(err.strip().splitlines()) == 3
    # With Spark's partial parse of the record when it holds a value (the CSV's user).
    record = " [b,null]" if fmt == "csv" else ""
    assert err.startswith(f"interlace: malformed record{record} in {path} "), err
    assert "MALFORMED_RECORD_IN_PARSING" in (tmp_path / ".interlace/logs/p.log").read_text()


# --------------------------------------------------------------------------------------------
# The mapping itself, on messages as Spark words them (no Spark needed)
# --------------------------------------------------------------------------------------------


def _context(tmp_path, text):
    from interlace.errors_cli import _Context
    from interlace.pipeline import Pipeline

    return _Context(Pipeline.from_toml(text), tmp_path, "p.toml")


def test_path_not_found_at_run_time_names_the_source(tmp_path):
    from pyspark.errors import AnalysisException

    from interlace.errors_cli import explain_error

    exc = AnalysisException(f"[PATH_NOT_FOUND] Path does not exist: file:{tmp_path}/in/clicks. "
                            "SQLSTATE: 42K03")
    got = explain_error(exc, context=_context(tmp_path, window_toml()))
    assert got.code == 2
    assert got.render("x.log").splitlines() == [
        f"interlace: source 'clicks' reads 'in/clicks', which does not exist ({tmp_path}/in/clicks)",
        "  fix: correct `path` in the [[sources]] table named 'clicks' in p.toml, or create the "
        "folder",
        "  run with --verbose for the full trace, or see x.log",
    ]


def test_a_corrupt_state_blob_names_the_checkpoint_operator_and_key_group(tmp_path):
    from interlace.errors_cli import explain_error
    from interlace.state import StateDecodeError

    exc = StateDecodeError("state blob is not valid msgpack (41 bytes): unpack(b) received extra "
                           "data. (Window operator, key group 3)")
    got = explain_error(exc, context=_context(tmp_path, window_toml()))
    lines = got.render("x.log").splitlines()
    assert got.code == 2
    assert lines[0] == (f"interlace: the checkpoint {tmp_path}/out/checkpoint holds state this interlace "
                        "cannot decode (corrupted, truncated, or of another operator); restore "
                        "it from a backup or use a new checkpoint")
    assert lines[1].endswith("(Window operator, key group 3)"), lines


def test_ddl_parse_error_at_run_time_names_the_schema(tmp_path):
    from pyspark.errors import ParseException

    from interlace.errors_cli import explain_error

    text = window_toml().replace("page STRING", "page STRIG")
    exc = ParseException('\n[UNSUPPORTED_DATATYPE] Unsupported data type "STRIG". SQLSTATE: 0A000 '
                         "(line 1, pos 18)\n\n== SQL ==\nuser STRING, page STRIG, ts TIMESTAMP, "
                         "_corrupt_record STRING\n------------------^^^\n")
    got = explain_error(exc, context=_context(tmp_path, text))
    lines = got.render().splitlines()
    assert got.code == 2 and len(lines) == 4
    assert lines[0] == ("interlace: the `schema` of source 'clicks' is not valid Spark DDL: "
                        'Unsupported data type "STRIG".')
    assert lines[1] == "  schema = 'user STRING, page STRIG, ts TIMESTAMP' in p.toml"
    assert lines[2].startswith("  fix: Spark SQL types are STRING, BOOLEAN, INT, BIGINT, DOUBLE")


def test_anything_else_prints_the_first_line_and_the_verbose_hint():
    from pyspark.errors import StreamingQueryException

    from interlace.errors_cli import explain_error

    exc = StreamingQueryException(
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [FOREACH_BATCH_"
        "USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch "
        "sink. Reason: An exception was raised by the Python Proxy. Return Message: Traceback "
        "(most recent call last):\n  File \"x.py\", line 1, in sink\n"
        "duckdb.duckdb.IOException: IO Error: Could not set lock on file \"out/w.duckdb\"\n"
        "\tat org.apache.spark.Foo.bar(Foo.scala:1)\n SQLSTATE: 39000")
    got = explain_error(exc)
    assert got.code == 1
    assert got.render().splitlines() == [
        "interlace: An error occurred in the user provided function in foreach batch sink. "
        "Reason: An exception was raised by the Python Proxy.",
        "  cause: IOException: IO Error: Could not set lock on file \"out/w.duckdb\"",
        "  run with --verbose for the full trace",
    ]


def test_interlace_errors_raised_in_a_worker_print_their_own_message():
    from pyspark.errors import PythonException

    from interlace.errors_cli import explain_error

    for name, code in (("StateCapError", 1), ("DistinctCapError", 1), ("SumOverflowError", 1),
                       ("ConfigError", 2)):
        module = {"StateCapError": "operators.errors", "DistinctCapError": "state.accumulators",
                  "SumOverflowError": "state.accumulators", "ConfigError": "operators.errors"}[name]
        exc = PythonException("An exception was thrown from the Python worker:\nTraceback (most "
                              f"recent call last):\n  File \"w.py\"\ninterlace.{module}.{name}: "
                              "raise `max_groups_per_window`\n")
        got = explain_error(exc)
        assert got.code == code
        first = got.render().splitlines()[0]
        assert re.fullmatch(r"interlace: (configuration error|\w+Error): raise "
                            r"`max_groups_per_window`", first), first


def test_spark_failing_to_start_says_why():
    from pyspark.errors import PySparkRuntimeError

    from interlace.errors_cli import explain_error

    exc = PySparkRuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending "
                              "its port number.")
    output = ("WARNING: Using incubator modules: jdk.incubator.vector\n"
              "26/11/25 04:49:15 WARN Utils: Set SPARK_LOCAL_IP if you need to bind\n"
              'Exception in thread "main" org.apache.spark.SparkException: Master must either be '
              "yarn or start with spark, k8s, or local\n\tat org.apache.spark.Foo(Foo.scala:1)\n")
    got = explain_error(exc, output=output)
    assert got.render("d.log").splitlines() == [
        "interlace: Spark did not start: SparkException: Master must either be yarn or start with "
        "spark, k8s, or local",
        "  run with --verbose for the full trace, or see d.log",
    ]
