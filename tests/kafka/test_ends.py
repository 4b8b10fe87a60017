"""The true end of a partition when the broker answers short fetches empty.

The embedded broker, at the end of a long log of small batches that is still written, answers
a fetch whose lookup outlasts fetch.wait.max.ms with nothing (no records, no high watermark,
no end of partition): measured at ~800k records in 50-record batches, a 10 ms wait never got an
answer and a 20 ms one did in 35 ms. A real broker is read here; only its slowness is played,
by a consumer that hears nothing while its fetch wait is under 100 ms."""

from __future__ import annotations

import os
import time

import pytest

from kstool.config import build_client_config
from kstool.kafka import ends
from kstool.kafka.client import KafkaClients
from kstool.kafka.ends import read_ends
from tests.helpers import create_topic, produce_batched

# the embedded broker's workarounds and a command group's end-to-end runs: on both brokers
pytestmark = pytest.mark.embedded_tier


class _Deaf:
    """A consumer that gets no answer to its fetches (the broker's empty responses)."""

    def __init__(self, consumer):
        self._consumer = consumer

    def consume(self, num_messages: int, timeout: float):
        time.sleep(timeout)
        return []

    def __getattr__(self, name):
        return getattr(self._consumer, name)


class _SlowLookups(KafkaClients):
    def __init__(self, config):
        super().__init__(config)
        self.waits: list[int] = []

    def consumer(self, **settings):
        consumer = super().consumer(**settings)
        self.waits.append(int(settings["fetch.wait.max.ms"]))
        return _Deaf(consumer) if int(settings["fetch.wait.max.ms"]) < 100 else consumer


def test_a_partition_silent_under_a_short_fetch_wait_is_asked_again_with_a_longer_one(kafka, monkeypatch):
    monkeypatch.setattr(ends, "_first_wait", {})  # what this test teaches the module stays here
    topic = f"ends-slow-{os.getpid()}"
    create_topic(kafka, topic, 1)
    produce_batched(kafka, topic, [(b"k", b"v%d" % i, 0) for i in range(1_000)])
    clients = _SlowLookups(build_client_config(kafka.bootstrap))
    # reported too low, as the embedded broker reports: the reading must move it to the end
    assert read_ends(clients, {(topic, 0): 990}) == {(topic, 0): 1_000}
    assert clients.waits[0] < 100 <= clients.waits[-1]
    # the next reading starts with the wait that answered: a run asks every batch
    clients.waits.clear()
    assert read_ends(clients, {(topic, 0): 990}) == {(topic, 0): 1_000}
    assert clients.waits == [100]
