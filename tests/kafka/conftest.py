"""The Kafka tests' broker: one real KRaft broker per test process (session-scoped).

:class:`interlace.testing.kafka.KafkaBroker` starts it from the ``kafka_2.13`` jars (resolved
with Maven into a cache; ``.ci/run`` resolves them before the tests). Each test names its own
topics (``topics`` fixture), so tests share the broker without seeing each other's records.
"""

from __future__ import annotations

import itertools
import uuid

import pytest

from interlace.testing.kafka import KafkaBroker

_count = itertools.count()


@pytest.fixture(scope="session")
def broker():
    b = KafkaBroker()
    b.start()
    yield b
    b.stop()


@pytest.fixture
def topics():
    """A function naming a topic unique to this test: ``topics("orders")``."""
    tag = f"{next(_count)}-{uuid.uuid4().hex[:6]}"
    return lambda name: f"{name}-{tag}"
