"""Kafka transactions that commit records and a consumer group's offsets together: the
exactly_once_v2 sink and `replay --transactional`. librdkafka writes them, except a transaction
holding a record with timestamp 0, which librdkafka would stamp with the send time: that one
goes through kstool's own client (kstool.kafka.wire.transaction) under the same transactional
id, and a new librdkafka producer is initialised for the next transaction. Over SASL, which that
client does not speak, such records get the send time, with a warning."""

from __future__ import annotations

import logging
import random
import time
from typing import NamedTuple

from confluent_kafka import KafkaException, Producer, TopicPartition

from kstool.kafka.bulk import BULK_SETTINGS
from kstool.kafka.client import KafkaClients, produce
from kstool.kafka.exceptions import KafkaOperationError
from kstool.kafka.groups import while_coordinator_moves
from kstool.kafka.partitioner import partition_for
from kstool.kafka.wire.protocol import Record, speaks_to
from kstool.kafka.wire.transaction import TRANSACTION_TIMEOUT_MS, commit_transaction

_log = logging.getLogger("kstool.transactions")


class OutRecord(NamedTuple):
    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int | None  # ms; None: stamped when sent
    headers: list[tuple[str, bytes | None]] = []
    partition: int | None = None  # None: Kafka's partitioner (murmur2 of the key)


class TransactionalWriter:
    def __init__(self, clients: KafkaClients, transactional_id: str, group: str,
                 partition_counts: dict[str, int]):
        self.clients, self.transactional_id, self.group = clients, transactional_id, group
        self.partition_counts = partition_counts
        self.timeout = max(clients.timeout, 30)
        self._producer: Producer | None = None
        self.producer()  # init_transactions now: fences a zombie and ends its open transaction
        self.group_member = clients.consumer(group_id=group)  # for its group metadata only

    def producer(self) -> Producer:
        """librdkafka's transactional producer; a new one after the wire client fenced it."""
        if self._producer is None:
            # a transaction ends with its marker, a batch of its own, which is the partition's
            # end: the tail profile's single-record batches (~6k records/s) are not needed
            # (what the user set with -X still goes)
            config = self.clients.config
            batching = {k: v for k, v in BULK_SETTINGS.items() if config.single_record_tail and k not in config.common}
            self._producer = self.clients.producer(**{**batching, "transactional.id": self.transactional_id,
                                                      "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS})
            self._producer.init_transactions(self.timeout)
        return self._producer

    def holds(self, offsets: dict[tuple[str, int], int]) -> bool:
        """The group already stands at `offsets`: the transaction that commits them committed.
        Asked of a writer just made, the answer is final (init_transactions ended any open
        transaction of its id); a writer fenced since it was made may miss a newer writer's
        commit, but its own transaction then fails."""
        if not offsets:
            return False
        partitions = [TopicPartition(t, p) for t, p in offsets]
        try:
            committed = while_coordinator_moves(lambda: self.group_member.committed(partitions, self.timeout),
                                                time.monotonic() + self.timeout)
        except KafkaException as exc:
            raise self.clients.translate(exc) from None
        return all(offsets[(tp.topic, tp.partition)] == tp.offset for tp in committed)

    def commit(self, records: list[OutRecord], offsets: dict[tuple[str, int], int]) -> None:
        """Write `records` and commit `offsets` to the group in one transaction; on failure the
        transaction is aborted and KafkaOperationError raised."""
        if any(r.timestamp == 0 for r in records):
            if speaks_to(self.clients.config):
                self._commit_on_wire(records, offsets)
                return
            _log.warning("records with timestamp 0 are stamped with the send time in a transaction "
                         "over SASL (librdkafka cannot write 0; kstool's own client does not speak SASL)")
        producer = self.producer()
        producer.begin_transaction()
        try:
            for r in records:
                extra = {"partition": r.partition} if r.partition is not None else {}
                produce(producer, r.topic, key=r.key, value=r.value, timestamp=r.timestamp or 0,
                        headers=r.headers or None, **extra)
            if offsets:
                producer.send_offsets_to_transaction(
                    [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())],
                    self.group_member.consumer_group_metadata(), self.timeout)
            producer.commit_transaction(self.timeout)
        except KafkaException as exc:
            self._abort()
            raise KafkaOperationError(f"transaction aborted: {exc}") from None

    def _commit_on_wire(self, records: list[OutRecord], offsets: dict[tuple[str, int], int]) -> None:
        if self._producer is not None:  # about to be fenced: nothing of it is in flight
            self._producer.flush(self.timeout)
            self._producer = None
        by_partition: dict[tuple[str, int], list[Record]] = {}
        for r in records:
            partition = r.partition
            if partition is None:  # where librdkafka's murmur2_random would put it
                count = self.partition_counts[r.topic]
                partition = partition_for(r.key, count) if r.key is not None else random.randrange(count)
            stamp = int(time.time() * 1000) if r.timestamp is None else r.timestamp
            by_partition.setdefault((r.topic, partition), []).append((r.key, r.value, stamp, list(r.headers)))
        commit_transaction(self.clients.config, self.transactional_id, self.clients.leader,
                           by_partition, self.group, offsets, self.clients.config.single_record_tail)

    def _abort(self) -> None:
        try:
            self.producer().abort_transaction(self.timeout)
        except KafkaException:
            pass  # fenced or broker gone: the next init_transactions aborts it

    def close(self) -> None:
        self.group_member.close()
        self._producer = None  # destroyed with its last reference (nothing is in flight after a commit)
