"""docs/kafka.md's worked example as written: the demo's orders and payments on Kafka.

``examples/kafka_data.py`` puts the demo's rows on the test broker, ``interlace run
examples/orders_payments_kafka.toml`` (its bootstrap servers pointed at the test broker;
nothing else changed: the connector is resolved by the run) joins them into ``paid_orders``,
and ``python -m interlace.testing.kafka read`` prints it: every order exactly once (a left
join), most with their payment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from cli_support import cli

from interlace.demo import generate_orders_payments

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_kafka_example_runs_as_written(broker, tmp_path):
    text = (EXAMPLES / "orders_payments_kafka.toml").read_text()
    assert text.count("127.0.0.1:9092") >= 3  # the sources', the target's, the comments'
    (tmp_path / "p.toml").write_text(text.replace("127.0.0.1:9092", broker.bootstrap))
    subprocess.run([sys.executable, str(EXAMPLES / "kafka_data.py"), broker.bootstrap],
                   check=True, timeout=120)
    cli("run", "p.toml", cwd=tmp_path, timeout=600)
    out = subprocess.run([sys.executable, "-m", "interlace.testing.kafka", "read",
                          broker.bootstrap, "paid_orders"], check=True, timeout=120,
                         capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    ids = Counter(r["value"]["order_id"] for r in rows)
    orders, _ = generate_orders_payments()
    assert set(ids) == {o["order_id"] for batch in orders for o in batch}
    assert set(ids.values()) == {1}
    assert all(r["key"] == {"order_id": r["value"]["order_id"]} for r in rows)
    paid = sum(r["value"]["payment_id"] is not None for r in rows)
    assert 0.75 * len(rows) < paid < len(rows)
