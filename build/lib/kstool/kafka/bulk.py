"""Writing many records fast, for sinks and copies.

Some brokers (the embedded one) report a wrong high watermark after a multi-record batch: it
covers only the batch's first record. Their connection profile sets `single_record_tail`; the
writer then batches freely but holds back the last record of every partition and sends it
alone after the bulk is flushed, so every write ends with a single-record batch and the
watermark covers everything. This needs the partition up front: the writer applies Kafka's
murmur2 partitioner itself (the one librdkafka's murmur2_random uses)."""

from __future__ import annotations

import itertools
from typing import Any

from kstool.kafka.client import KafkaClients, produce
from kstool.kafka.exceptions import KafkaOperationError
from kstool.kafka.partitioner import partition_for

BULK_SETTINGS = {"batch.num.messages": 10_000, "linger.ms": 5}


class BulkWriter:
    def __init__(self, clients: KafkaClients, partition_counts: dict[str, int], **extra: Any):
        self.clients = clients
        self.tail = clients.config.single_record_tail
        self.partition_counts = partition_counts
        settings = {**(BULK_SETTINGS if self.tail else {}), **extra}
        self.producer = clients.producer(**settings)
        self.failures: list[str] = []
        self.delivered = 0
        self._held: dict[tuple[str, int], tuple] = {}
        self._round_robin = itertools.count()

    def _on_delivery(self, err, _msg) -> None:
        if err is not None:
            self.failures.append(err.str())
        else:
            self.delivered += 1

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int = 0,
             headers: list | None = None, partition: int | None = None) -> None:
        if not self.tail:
            self._produce(topic, key, value, timestamp, headers, partition)
            return
        if partition is None:
            count = self.partition_counts[topic]
            partition = (partition_for(key, count) if key is not None
                         else next(self._round_robin) % count)
        slot = (topic, partition)
        previous = self._held.get(slot)
        self._held[slot] = (topic, key, value, timestamp, headers, partition)
        if previous is not None:
            self._produce(*previous)

    def _produce(self, topic, key, value, timestamp, headers, partition) -> None:
        kwargs = {"key": key, "value": value, "timestamp": timestamp or 0, "on_delivery": self._on_delivery}
        if headers:
            kwargs["headers"] = headers
        if partition is not None:
            kwargs["partition"] = partition
        produce(self.producer, topic, **kwargs)

    def flush(self) -> int:
        """Deliver everything; raise when any record was not delivered. Returns the count
        delivered since the last flush."""
        timeout = max(self.clients.timeout, 60)
        remaining = self.producer.flush(timeout)
        for record in self._held.values():  # each alone: one single-record batch per partition
            self._produce(*record)
            remaining += self.producer.flush(timeout)
        self._held.clear()
        if remaining or self.failures:
            reason = self.failures[0] if self.failures else "flush timed out"
            failed = len(self.failures) + remaining
            self.failures.clear()
            raise KafkaOperationError(f"{failed} record(s) not delivered: {reason}")
        delivered, self.delivered = self.delivered, 0
        return delivered
