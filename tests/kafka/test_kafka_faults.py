"""Kafka faults: what a run says and does when the broker, a topic or the connector is wrong.

* No broker at the bootstrap servers: the run stops within seconds, naming them (Spark's own
  source would retry for minutes), for a source and for the target.
* A missing topic, on either side: named, with how to create it.
* Spark's connector missing, or of another Spark line: ``interlace run`` names the jars and
  the command that resolves the right ones.
* The broker killed and restarted while ``interlace run`` runs: the run goes on or fails
  loud; rerun from its checkpoint, the topic read with ``read_committed`` holds what an
  uninterrupted run writes, each row once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pyspark
import pytest
from cli_support import cli, run_here
from kafka_support import kafka_options, source_toml, target_toml, values, write_pipeline

from interlace.connectors.jars import connector_jars, connector_version_for
from interlace.connectors.kafka import ALLOW_MISMATCH_CONF, RESOLVE_CONF
from interlace.operators.errors import ConfigError
from interlace.preflight import preflight
from interlace.runner import run_pipeline
from interlace.testing.kafka import (
    KafkaBroker,
    create_topic,
    free_port,
    produce,
    read_topic,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

CLICKS = "user STRING, n BIGINT, ts TIMESTAMP"
WINDOW = ('[transform.window]\nkind = "tumbling"\nduration_ms = 10_000\ngroup_by = ["user"]\n'
          'lateness_ms = 0\nmax_groups_per_window = 1_000\n\n'
          '[[transform.window.aggregations]]\nagg = "sum"\ncolumn = "n"\nas = "total"\n\n')


def clicks(n, start=0):
    return [(f"u{i % 3}", {"user": f"u{i % 3}", "n": i,
                           "ts": f"2026-01-01T00:{(start + i) // 60:02d}:{(start + i) % 60:02d}Z"})
            for i in range(n)]


def pipeline(source_bootstrap, topic, target_bootstrap, out, spark_conf, extra=""):
    conf = ", ".join(f'"{k}" = "{v}"' for k, v in spark_conf.items())
    return ('name = "clicks"\n\n'
            + source_toml("clicks", source_bootstrap, topic, CLICKS, event_time="ts",
                          record_time=False, **({"maxOffsetsPerTrigger": extra} if extra else {}))
            + WINDOW + target_toml(target_bootstrap, out)
            + f'[spark]\ncheckpoint = "checkpoint"\nshuffle_partitions = 2\nconf = {{ {conf} }}\n')


def run_in_process(spark, folder):
    return run_pipeline(preflight(folder / "p.toml", base=folder), base=folder, spark=spark)


@pytest.fixture
def kafka_conf():
    from interlace.testing.kafka import spark_conf_for_kafka

    return spark_conf_for_kafka()


@pytest.mark.parametrize("side", ["source", "target"])
def test_no_broker_at_start_is_refused_within_seconds_naming_the_servers(
        spark, broker, topics, tmp_path, kafka_conf, side):
    topic, out = topics("clicks"), topics("out")
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, out, 1)
    produce(broker.bootstrap, topic, clicks(3))
    nowhere = f"127.0.0.1:{free_port()}"
    src, dst = (nowhere, broker.bootstrap) if side == "source" else (broker.bootstrap, nowhere)
    write_pipeline(tmp_path, "p", pipeline(src, topic, dst, out, kafka_conf))
    start = time.monotonic()
    with pytest.raises(ConfigError, match="no Kafka broker answered") as info:
        run_in_process(spark, tmp_path)
    assert nowhere in str(info.value)
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("side", ["source", "target"])
def test_a_missing_topic_is_named_with_how_to_create_it(spark, broker, topics, tmp_path,
                                                        kafka_conf, side):
    topic, out = topics("clicks"), topics("out")
    create_topic(broker.bootstrap, topic if side == "target" else out, 1)
    if side == "target":
        produce(broker.bootstrap, topic, clicks(3))
    write_pipeline(tmp_path, "p", pipeline(broker.bootstrap, topic, broker.bootstrap, out,
                                           kafka_conf))
    missing = topic if side == "source" else out
    with pytest.raises(ConfigError, match=f"{missing}.*do not exist.*--create --topic"):
        run_in_process(spark, tmp_path)


def test_the_connector_missing_names_the_jars_and_the_fix(broker, topics, tmp_path):
    topic, out = topics("clicks"), topics("out")
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, out, 1)
    no_resolve = {RESOLVE_CONF: "false"}  # as where Maven is not reachable
    write_pipeline(tmp_path, "p", pipeline(broker.bootstrap, topic, broker.bootstrap, out,
                                           no_resolve))
    proc = cli("run", "p.toml", cwd=tmp_path, check=False, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "not on the classpath" in proc.stderr
    v = connector_version_for(pyspark.__version__)
    assert f"spark-sql-kafka-0-10_2.13:{v}" in proc.stderr
    assert f"python -m interlace.connectors.jars connector {v}" in proc.stderr


def test_interlace_run_resolves_the_connector_itself(broker, topics, tmp_path):
    """No ``spark.jars``: ``interlace run`` resolves its line's connector with Maven (on 4.3,
    where none is served here, 4.2's, as the pipeline allows)."""
    topic, out = topics("clicks"), topics("out")
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, out, 1)
    produce(broker.bootstrap, topic, clicks(12))
    write_pipeline(tmp_path, "p", pipeline(broker.bootstrap, topic, broker.bootstrap, out,
                                           {ALLOW_MISMATCH_CONF: "true"}))
    cli("run", "p.toml", cwd=tmp_path, timeout=300)
    assert sorted((v["user"], v["total"]) for v in values(read_topic(broker.bootstrap, out))) == \
        [("u0", 0 + 3 + 6 + 9), ("u1", 1 + 4 + 7), ("u2", 2 + 5 + 8)]


def test_a_connector_of_another_spark_line_is_refused(broker, topics, tmp_path):
    topic, out = topics("clicks"), topics("out")
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, out, 1)
    other = "4.2.0" if pyspark.__version__.startswith("4.1.") else "4.1.1"
    jars = {"spark.jars": ",".join(str(j) for j in connector_jars(other))}
    write_pipeline(tmp_path, "p", pipeline(broker.bootstrap, topic, broker.bootstrap, out, jars))
    proc = cli("run", "p.toml", cwd=tmp_path, check=False, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert f"spark-sql-kafka-0-10_2.13-{other}.jar (Spark {other[:3]})" in proc.stderr
    assert "allowConnectorMismatch" in proc.stderr


def test_the_broker_killed_and_restarted_mid_run_loses_and_doubles_nothing(spark, tmp_path,
                                                                           kafka_conf):
    with KafkaBroker() as own:
        topic, out, want = "clicks", "out", "reference"
        for t in (topic, out, want):
            create_topic(own.bootstrap, t, 1)
        produce(own.bootstrap, topic, clicks(60) + clicks(1, start=1_000))
        write_pipeline(tmp_path / "reference", "p", pipeline(
            own.bootstrap, topic, own.bootstrap, want, kafka_conf, extra="4"))
        run_here(spark, tmp_path / "reference", "p.toml")
        folder = tmp_path / "run"
        write_pipeline(folder, "p", pipeline(own.bootstrap, topic, own.bootstrap, out,
                                             kafka_conf, extra="4"))
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        proc = subprocess.Popen([sys.executable, "-m", "interlace.cli", "run", "p.toml"],
                                cwd=folder, env=env, stderr=subprocess.PIPE, text=True,
                                stdout=subprocess.DEVNULL, start_new_session=True)
        lines, started = [], threading.Event()

        def read():
            for line in proc.stderr:
                lines.append(line)
                if "batch 2:" in line:
                    started.set()

        threading.Thread(target=read, daemon=True).start()
        assert started.wait(240), "".join(lines[-20:])
        own.kill()  # SIGKILL: as when the broker's machine dies
        time.sleep(5)
        own.start()
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("the run hung after the broker came back:\n"
                                 + "".join(lines[-30:])) from None
        if proc.returncode != 0:  # failed loud: it must say what, and a rerun finishes
            assert "Kafka" in "".join(lines) or "kafka" in "".join(lines), "".join(lines[-30:])
            run_here(spark, folder, "p.toml")
        got = Counter(json.dumps(v, sort_keys=True) for v in values(read_topic(own.bootstrap, out)))
        ref = Counter(json.dumps(v, sort_keys=True)
                      for v in values(read_topic(own.bootstrap, want)))
        assert sum(ref.values()) == 60 // 10 * 3  # six 10 s windows of three users
        assert got == ref, ("lost", ref - got, "twice", got - ref)
        print(f"\nbroker restart: the run {'went on' if proc.returncode == 0 else 'failed'}"
              f" (exit {proc.returncode}):\n" + "".join(lines[-8:]))


def test_kafka_options_in_the_message_of_a_missing_subscribe(spark, broker, tmp_path,
                                                            kafka_conf):
    conf = ", ".join(f'"{k}" = "{v}"' for k, v in kafka_conf.items())
    text = ('name = "x"\n\n[[sources]]\nname = "clicks"\nformat = "kafka"\n'
            f'value_format = "json"\nschema = "{CLICKS}"\nevent_time_column = "ts"\n'
            f"options = {kafka_options(broker.bootstrap)}\n\n" + WINDOW
            + '[target]\nkind = "console"\n\n'
            + f'[spark]\ncheckpoint = "checkpoint"\nconf = {{ {conf} }}\n')
    write_pipeline(tmp_path, "p", text)
    with pytest.raises(ConfigError, match="names no topic: set options.subscribe"):
        run_in_process(spark, tmp_path)
