"""A real Apache Kafka broker for tests and for trying a pipeline: one KRaft node on loopback.

:class:`KafkaBroker` starts ``kafka.Kafka`` with ``java`` from the ``kafka_2.13`` jars
(:func:`interlace.connectors.jars.broker_jars`, resolved from Maven Central and cached): one
combined broker and controller on 127.0.0.1 with two free ports, its storage formatted in a
temporary folder, a small heap, replication factor 1 for the internal topics (offsets,
transactions). :meth:`KafkaBroker.start` returns once the broker answers a metadata request;
:meth:`KafkaBroker.stop` ends it (:meth:`kill` ends it at once, as a crash would), and
:meth:`restart` starts it again on the same ports and storage.

``python -m interlace.testing.kafka broker [--port 9092]`` (``make kafka``) runs one in the
foreground until Ctrl-C, printing its bootstrap address; ``python -m interlace.testing.kafka
read BOOTSTRAP TOPIC [--table] [--uncommitted]`` prints a topic, one JSON object a line.

The helpers below use ``confluent-kafka`` (the ``kafka`` extra): :func:`create_topic`,
:func:`produce`, :func:`read_topic` (``read_committed`` by default) and :func:`read_table`
(a compacted topic's table: the last value of each key, tombstones deleting it).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "KafkaBroker",
    "create_topic",
    "free_port",
    "produce",
    "read_table",
    "read_topic",
    "spark_conf_for_kafka",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={logs}
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.cleaner.backoff.ms=1000
log.retention.ms=-1
log.message.timestamp.before.max.ms=9223372036854775807
"""


class KafkaBroker:
    """One KRaft broker + controller on 127.0.0.1 (see the module docstring).

    Args:
        port: The client port (default: a free one).
        folder: Where its storage and log go (default: a new temporary folder, removed by
            :meth:`stop`).
        heap: The JVM's heap (``-Xmx`` and ``-Xms``).
    """

    def __init__(self, port: int | None = None, folder: Path | None = None,
                 heap: str = "384m") -> None:
        self.port = port or free_port()
        self.controller = free_port()
        self._own_folder = folder is None
        self.folder = Path(folder or tempfile.mkdtemp(prefix="interlace-kafka-"))
        self.heap = heap
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.folder / "broker.log"
        self._formatted = False

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` clients use."""
        return f"127.0.0.1:{self.port}"

    def _java(self) -> list[str]:
        from interlace.connectors.jars import broker_jars

        jars = broker_jars()
        classpath = os.pathsep.join(str(j) for j in jars)
        java = (os.path.join(os.environ["JAVA_HOME"], "bin", "java")
                if os.environ.get("JAVA_HOME") else shutil.which("java") or "java")
        return [java, f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-cp", classpath]

    def start(self, timeout_s: float = 60.0) -> KafkaBroker:
        """Format the storage (first start only), start the broker, wait until it answers."""
        props = self.folder / "server.properties"
        if not self._formatted:
            (self.folder / "logs").mkdir(parents=True, exist_ok=True)
            props.write_text(_PROPERTIES.format(port=self.port, controller=self.controller,
                                                logs=self.folder / "logs"))
            cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            fmt = subprocess.run(
                [*self._java(), "kafka.tools.StorageTool", "format", "--standalone",
                 "-t", cluster, "-c", str(props)], capture_output=True, text=True)
            if fmt.returncode != 0:
                msg = f"formatting the broker's storage failed:\n{fmt.stdout}{fmt.stderr}"
                raise RuntimeError(msg)
            self._formatted = True
        log = open(self.log_path, "ab")  # noqa: SIM115 - the broker's, closed with it
        self.process = subprocess.Popen([*self._java(), "kafka.Kafka", str(props)],
                                        stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                msg = f"the Kafka broker exited with {self.process.returncode}:\n{tail}"
                raise RuntimeError(msg)
            if self.answers():
                return self
            time.sleep(0.3)
        self.kill()
        msg = f"the Kafka broker did not answer on {self.bootstrap} within {timeout_s} s"
        raise RuntimeError(msg)

    def answers(self) -> bool:
        """Whether the broker answers a metadata request now."""
        from confluent_kafka.admin import AdminClient

        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            admin.list_topics(timeout=2)
            return True
        except Exception:
            return False

    def kill(self) -> None:
        """End the broker at once (SIGKILL), keeping its storage for :meth:`restart`."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    def restart(self, timeout_s: float = 60.0) -> KafkaBroker:
        """Stop (SIGTERM) and start the broker again on the same ports and storage."""
        self._terminate()
        return self.start(timeout_s)

    def _terminate(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def stop(self) -> None:
        """Stop the broker and remove its temporary folder."""
        self._terminate()
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def create_topic(bootstrap: str, name: str, partitions: int = 1, *,
                 compacted: bool = False, config: Mapping[str, str] | None = None) -> None:
    """Create a topic (``cleanup.policy=compact`` when ``compacted``); wait until it exists."""
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = dict(config or {})
    if compacted:
        conf.setdefault("cleanup.policy", "compact")
    # Errors come back as exceptions; librdkafka's own log would go on about a broker that a
    # test stopped for as long as the client lives.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=conf)])
    for f in futures.values():
        f.result(timeout=30)


def produce(bootstrap: str, topic: str,
            records: Iterable[tuple[Any, Any] | tuple[Any, Any, int]]) -> int:
    """Write ``(key, value[, timestamp_ms])`` records, in order; return how many.

    A key or value that is a dict or list is written as JSON, a ``str`` as UTF-8, ``bytes``
    as they are, ``None`` as a null (a ``None`` value is a tombstone).
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    failed: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    n = 0
    for record in records:
        key, value = record[0], record[1]
        kwargs: dict[str, Any] = {}
        if len(record) > 2:
            kwargs["timestamp"] = int(record[2])  # type: ignore[misc]
        producer.produce(topic, key=_encode(key), value=_encode(value), on_delivery=delivered,
                         **kwargs)
        n += 1
        if n % 10_000 == 0:
            producer.flush()
    left = producer.flush(30)
    if left:
        msg = f"{left} records to {topic!r} were not delivered within 30 s"
        raise RuntimeError(msg)
    if failed:
        msg = f"{len(failed)} records to {topic!r} were refused: {failed[0]}"
        raise RuntimeError(msg)
    return n


def _encode(x: Any) -> bytes | None:
    if x is None or isinstance(x, bytes):
        return x
    if isinstance(x, (dict, list)):
        return json.dumps(x, sort_keys=True).encode()
    return str(x).encode()


def read_topic(bootstrap: str, topic: str, *, committed: bool = True,
               timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """Every record of ``topic`` now, per partition in offset order.

    ``committed``: read with ``isolation.level=read_committed`` (records of aborted or open
    transactions are not returned); ``False``: ``read_uncommitted``. Each record is a dict:
    ``key``, ``value`` (bytes or None), ``partition``, ``offset``, ``timestamp``, ``headers``.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"interlace-read-{uuid.uuid4()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed" if committed else "read_uncommitted",
    })
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        if meta.error is not None:
            raise RuntimeError(f"topic {topic!r}: {meta.error}")
        parts = sorted(meta.partitions)
        ends = {}
        for p in parts:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: list[dict[str, Any]] = []
        # A partition is read once the consumer's position reaches its end (past any
        # transaction marker); an open transaction holds a read_committed consumer back, so
        # three quiet polls in a row also end the read.
        deadline, quiet = time.monotonic() + timeout_s, 0
        while time.monotonic() < deadline and quiet < 3:
            msgs = consumer.consume(500, timeout=0.5)
            for m in msgs:
                if m.error() is None:
                    out.append({"key": m.key(), "value": m.value(),
                                "partition": m.partition(), "offset": m.offset(),
                                "timestamp": m.timestamp()[1],
                                "headers": dict(m.headers() or [])})
            if msgs:
                quiet = 0
                continue
            positions = consumer.position([TopicPartition(topic, p) for p in parts])
            if all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition]
                   for tp in positions):
                break
            quiet += 1
        out.sort(key=lambda r: (r["partition"], r["offset"]))
        return out
    finally:
        consumer.close()


def read_table(bootstrap: str, topic: str, *, committed: bool = True) -> dict[str, Any]:
    """The table a compacted topic (or a KTable reading it) holds: key text -> last value.

    Keys are the records' keys as text; values are decoded as JSON; a ``None`` value (a
    tombstone) deletes its key.
    """
    table: dict[str, Any] = {}
    for r in read_topic(bootstrap, topic, committed=committed):
        key = "" if r["key"] is None else r["key"].decode(errors="replace")
        if r["value"] is None:
            table.pop(key, None)
        else:
            table[key] = _decode(r["value"])
    return table


def _decode(b: bytes | None) -> Any:
    if b is None:
        return None
    try:
        return json.loads(b)
    except ValueError:
        return b.decode(errors="replace")


def spark_conf_for_kafka() -> dict[str, str]:
    """Spark settings that put Spark's Kafka connector on the classpath (for tests, demos).

    :func:`interlace.connectors.kafka.connector_conf` allowing a mismatch: the running
    PySpark's line, or on 4.3 (no 4.3 connector is served here) the 4.2 one.
    """
    from interlace.connectors.kafka import connector_conf

    return connector_conf(allow_mismatch=True)


def main(argv: list[str] | None = None) -> int:
    """``broker`` (the default): run a broker until Ctrl-C; ``read``: print a topic."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m interlace.testing.kafka",
                                     description="A one-node Kafka broker on 127.0.0.1, and "
                                                 "a topic read back.")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("broker", help="run a broker in the foreground until Ctrl-C")
    run.add_argument("--port", type=int, default=9092)
    run.add_argument("--folder", type=Path, default=None,
                     help="storage folder (kept); default: a temporary one, removed")
    read = sub.add_parser("read", help="print a topic's records, one JSON object a line")
    read.add_argument("bootstrap")
    read.add_argument("topic")
    read.add_argument("--uncommitted", action="store_true",
                      help="read_uncommitted (default: read_committed)")
    read.add_argument("--table", action="store_true",
                      help="each key's last value, tombstones removing it")
    sub.add_parser("jars", help="resolve the broker's jars and Spark's Kafka connector (the "
                                "tests' pair: see spark_conf_for_kafka) into the cache")
    args = parser.parse_args(["broker"] if not (argv if argv is not None else sys.argv[1:])
                             else argv)
    if args.command == "jars":
        from interlace.connectors.jars import broker_jars

        print(f"broker: {len(broker_jars())} jars; connector: "
              f"{spark_conf_for_kafka()['spark.jars']}")
        return 0
    if args.command == "read":
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the read quietly
        if args.table:
            for key, value in read_table(args.bootstrap, args.topic,
                                         committed=not args.uncommitted).items():
                print(json.dumps({"key": key, "value": value}))
            return 0
        for r in read_topic(args.bootstrap, args.topic, committed=not args.uncommitted):
            print(json.dumps({"key": _decode(r["key"]), "value": _decode(r["value"]),
                              "partition": r["partition"], "offset": r["offset"]}))
        return 0
    broker = KafkaBroker(port=args.port, folder=args.folder)
    broker.start()
    print(f"Kafka {broker.bootstrap} (KRaft, one node; log {broker.log_path}); Ctrl-C stops it",
          flush=True)
    try:
        while broker.process is not None and broker.process.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
