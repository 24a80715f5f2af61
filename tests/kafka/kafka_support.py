"""Helpers of the Kafka tests: pipeline files on the test broker, records in and out."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from interlace.testing.kafka import spark_conf_for_kafka

UTC = dt.timezone.utc


def ms(t: dt.datetime) -> int:
    """A naive-UTC or aware datetime as epoch milliseconds (a Kafka record timestamp)."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return int(t.timestamp() * 1000)


def spark_toml(checkpoint: str, state_store: str = "hdfs") -> str:
    """A ``[spark]`` table with the connector's jars (and the test's checkpoint)."""
    conf = ", ".join(f'"{k}" = "{v}"' for k, v in spark_conf_for_kafka().items())
    return (f'[spark]\nmaster = "local[2]"\ncheckpoint = "{checkpoint}"\nshuffle_partitions = 2\n'
            f'state_store = "{state_store}"\nconf = {{ {conf} }}\n')


def kafka_options(bootstrap: str, **more: str) -> str:
    """An inline TOML table of Kafka options (``kafka.bootstrap.servers`` first)."""
    items = {"kafka.bootstrap.servers": bootstrap, **more}
    return "{ " + ", ".join(f'"{k}" = "{v}"' for k, v in items.items()) + " }"


def source_toml(name: str, bootstrap: str, topic: str, schema: str, *,
                event_time: str = "event_time", record_time: bool = True,
                extra: str = "", **options: str) -> str:
    """A ``[[sources]]`` table reading ``topic`` as JSON values (event time: record's or field)."""
    opts = kafka_options(bootstrap, subscribe=topic, startingOffsets="earliest", **options)
    stamp = f'timestamp_column = "{event_time}"\n' if record_time else ""
    return (f'[[sources]]\nname = "{name}"\nformat = "kafka"\nvalue_format = "json"\n'
            f'schema = "{schema}"\n{stamp}event_time_column = "{event_time}"\n{extra}'
            f"options = {opts}\n\n")


def target_toml(bootstrap: str, topic: str, table: str = "target", key: str = "") -> str:
    """A ``[target]`` (or ``[dead_letter]``) table writing ``topic``."""
    k = f"key = {json.dumps(key.split(','))}\n" if key else ""
    return (f'[{table}]\nkind = "kafka"\n{k}'
            f"options = {kafka_options(bootstrap, topic=topic)}\n\n")


def values(records):
    """The JSON values of records (None for a tombstone)."""
    return [None if r["value"] is None else json.loads(r["value"]) for r in records]


def write_pipeline(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path
