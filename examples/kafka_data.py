"""Put the demo's orders and payments on a Kafka broker, for examples/orders_payments_kafka.toml.

    make kafka                                   # a broker on 127.0.0.1:9092 (another shell)
    python examples/kafka_data.py 127.0.0.1:9092
    interlace run examples/orders_payments_kafka.toml
    python -m interlace.testing.kafka read 127.0.0.1:9092 paid_orders | head

Creates the topics ``orders`` and ``payments`` (two partitions, records keyed by order id,
JSON values with ISO-8601 UTC times, in the demo's batch order) and ``paid_orders`` (the
output), and writes the demo's rows (``interlace.demo.generate_orders_payments``: out of
order within a batch, some payments a batch late, a few far behind the watermark).
"""

from __future__ import annotations

import sys

from interlace.demo import generate_orders_payments
from interlace.testing.kafka import create_topic, produce

TOPICS = ("orders", "payments", "paid_orders")


def iso(row: dict) -> dict:
    """The row with its times as ISO-8601 UTC text (what JSON values hold)."""
    return {k: (v.isoformat() + "Z" if hasattr(v, "isoformat") else v) for k, v in row.items()}


def main(bootstrap: str) -> None:
    """Create the topics and write the demo's orders and payments."""
    from confluent_kafka.admin import AdminClient

    existing = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    for topic in TOPICS:
        if topic not in existing:
            create_topic(bootstrap, topic, 2)
    orders, payments = generate_orders_payments()
    n = produce(bootstrap, "orders",
                [(str(r["order_id"]), iso(r)) for batch in orders for r in batch])
    m = produce(bootstrap, "payments",
                [(str(r["order_id"]), iso(r)) for batch in payments for r in batch])
    print(f"{n} orders and {m} payments on {bootstrap}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092")
