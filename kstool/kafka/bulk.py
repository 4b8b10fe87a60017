"""Writing many records fast, for produce, sinks and copies.

Some brokers (the embedded one) report a wrong high watermark after a multi-record batch: it
covers only the batch's first record. kstool's own readers find the true end by reading
(kstool.kafka.ends), but other tools trust the watermark, so such a broker's connection profile
sets `single_record_tail`: the writer then batches freely but holds back the last record of
every partition and sends it alone after the bulk is flushed, so every write ends with a
single-record batch. This needs the partition up front: the writer applies Kafka's murmur2
partitioner itself (the one librdkafka's murmur2_random uses).

Timestamp 0 is a valid record timestamp (Kafka Streams keeps it), but librdkafka stamps a record
produced with timestamp 0 with the send time. Such records go through kstool's own Produce
request (kstool.kafka.wire.protocol), after the records before them are flushed, so each partition
keeps its order. Over SASL, which that client does not speak, they are stamped with the send
time, with a warning."""

from __future__ import annotations

import functools
import itertools
import json
import logging
import random
from collections import Counter, OrderedDict
from dataclasses import asdict
from typing import Any, Callable, cast

from confluent_kafka import KafkaError, KafkaException, Message

from kstool.kafka.client import KafkaClients, produce
from kstool.kafka.exceptions import KafkaOperationError
from kstool.kafka.partitioner import partition_for, partitions_for
from kstool.kafka.records import position_of
from kstool.kafka.wire.protocol import RecordWriter, speaks_to

_log = logging.getLogger("kstool.bulk")

Headers = list[tuple[str, bytes | None]]
# a record held back for the tail: (topic, key, value, timestamp, headers, partition, ref)
_Pending = tuple[str, bytes | None, bytes | None, int | None, Headers | None, int, Any]
BULK_SETTINGS = {"batch.num.messages": 10_000, "linger.ms": 5}
CONNECT_WAIT_S = 5.0
_TOO_LARGE = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}


def delivery_error(err: KafkaError, size: int, limit: str) -> str:
    """Why a record was not written, with what to change when it is too large."""
    if err.code() in _TOO_LARGE:
        return (f"the record is {size} bytes, over the size limit (producer message.max.bytes "
                f"{limit}; the topic's max.message.bytes and the broker's message.max.bytes apply "
                f"too): raise them, e.g. -X message.max.bytes={max(2 * size, 1_000_000)} and topic "
                f"config max.message.bytes")
    return err.str()


class BulkWriter:
    """Sends records in batches; flush() reports exactly how many were written per partition
    and which were not, each named by the `ref` it was sent with (e.g. "line 7")."""

    def __init__(self, clients: KafkaClients, partition_counts: dict[str, int], errors_only: bool = False, *,
                 locate: Callable[[bytes | None, bytes | None], Any] | None = None, **extra: Any):
        """errors_only: librdkafka reports failed deliveries only (no Python call per record
        written; a sink's counts come from its rows): per_partition then stays empty.
        locate(key, value): the `ref` of the first record that failed, when it was sent without
        one (send_batch)."""
        self.clients = clients
        self.tail = clients.config.single_record_tail
        self.partition_counts = partition_counts
        # the tail profile's single-record batches are for the last record only
        conf = {**(BULK_SETTINGS if self.tail else {}), **extra}
        self.errors_only, self.locate = errors_only, locate
        if errors_only:
            conf["delivery.report.only.error"] = True
        self.producer = clients.producer(**conf)
        self._connect(next(iter(partition_counts), None))
        self._broker_losses = clients.broker_losses
        settings = clients.config.producer_conf(**conf)
        self._size_limit = settings.get("message.max.bytes", "1000000")
        # librdkafka's local queue: at most so many records and bytes (its defaults)
        self._queue_limits = (int(settings.get("queue.buffering.max.messages", 100_000)),
                              1024 * int(settings.get("queue.buffering.max.kbytes", 1_048_576)))
        self.failures: list[tuple[Any, str]] = []
        self.per_partition: Counter[tuple[str, int]] = Counter()  # all delivered so far
        # since the last flush (errors_only: each record librdkafka took, less those reported failed)
        self.delivered = 0
        self._held: dict[tuple[str, int], _Pending] = {}
        self._round_robin = itertools.count()
        self._zero_writer: RecordWriter | None = None

    def _connect(self, topic: str | None) -> None:
        """librdkafka asks for an idempotent producer's id on a 500 ms timer until a broker is
        up; a metadata request brings one up now (a one-line produce: 0.9 -> 0.4 s). Briefly:
        through an outage the writes wait, not this."""
        if topic is None:
            return
        try:
            self.producer.list_topics(topic, timeout=min(self.clients.timeout, CONNECT_WAIT_S))
        except KafkaException:
            pass  # the writes say why, record by record

    @property
    def stale(self) -> bool:
        """Every broker went away since this writer was made: its producer may be unknown to them."""
        return self.clients.broker_losses > self._broker_losses

    def _on_delivery(self, ref: Any, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            size = len(msg.value() or b"") + len(msg.key() or b"")
            self.failures.append((self._named(ref, msg.key(), msg.value()), delivery_error(err, size, self._size_limit)))
            self.delivered -= self.errors_only
        else:
            self.delivered += 1
            topic, partition, _ = position_of(msg)
            self.per_partition[(topic, partition)] += 1

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int | None = None,
             headers: Headers | None = None, partition: int | None = None, ref: Any = None) -> None:
        """timestamp None: the producer stamps the record as it sends it."""
        if not self.tail:
            self._produce(topic, key, value, timestamp, headers, partition, ref)
            return
        if partition is None:
            partition = self._partition_of(topic, key)
        slot = (topic, partition)
        previous = self._held.get(slot)
        self._held[slot] = (topic, key, value, timestamp, headers, partition, ref)
        if previous is not None:
            self._produce(*previous)

    def send_rows(self, topic: str, keys: list[bytes | None], values: list[bytes | None],
                  timestamps: list[int | None], partitions: list[int] | None = None,
                  headers: list[Headers | None] | None = None) -> None:
        """Many records to one topic, as send() one by one would write them (partitions None:
        Kafka's partitioner; headers None: none has any), with no Python call per record but the
        producer's."""
        if not keys:
            return
        last: dict[int, int] = {}  # partition -> its last record here, held back for the tail
        if self.tail:
            if partitions is None:
                partitions = self._partitions(topic, keys)
            for partition, index in self._last_of_each(partitions).items():
                previous = self._held.pop((topic, partition), None)
                if previous is not None:  # it comes before this call's records in its partition
                    self._produce(*previous)
                last[partition] = index
        held = set(last.values())
        produce_one, report, taken = self.producer.produce, self._report_rows, 0
        for i, (key, value, timestamp) in enumerate(zip(keys, values, timestamps)):
            if i in held:
                continue
            partition = -1 if partitions is None else partitions[i]  # -1: librdkafka's partitioner
            if timestamp == 0 or (headers is not None and headers[i]):  # see _produce
                self._produce(topic, key, value, timestamp, headers[i] if headers is not None else None,
                              None if partition < 0 else partition, None)
                continue
            while True:
                try:
                    produce_one(topic, value, key, partition, report, timestamp=timestamp or 0)
                    taken += 1
                    break
                except BufferError:  # the local queue is full: serve delivery reports, try again
                    self.producer.poll(0.05)
                except KafkaException as exc:  # refused before sending (e.g. over message.max.bytes)
                    size = len(value or b"") + len(key or b"")
                    self.failures.append((None, delivery_error(exc.args[0], size, self._size_limit)))
                    break
        self._taken(taken)
        for partition, i in last.items():
            self._held[(topic, partition)] = (topic, keys[i], values[i], timestamps[i],
                                              headers[i] if headers is not None else None, partition, None)

    def send_batch(self, topic: str, partition: int, values: list[bytes], keys: list[bytes | None] | None = None) -> None:
        """Many records to one partition of a topic through librdkafka's batch call: no call
        per record, to send it or for its delivery (an errors_only writer only; a record that
        fails is named by `locate`). Each record is stamped as it is sent; no headers (the batch
        call takes neither), no tail profile: send() and send_rows() do those."""
        assert self.errors_only and not self.tail
        if not values:
            return
        batch: list[dict[str, Any]] = ([{"value": value} for value in values] if keys is None
                                       else [{"key": key, "value": value} for key, value in zip(keys, values)])
        self._make_room(len(batch), max(map(len, values)) + max(map(len, filter(None, keys or ())), default=0))
        taken = self.producer.produce_batch(topic, batch, partition=partition, on_delivery=self._report_rows)
        self._taken(taken)
        if taken < len(batch):  # refused before sending (e.g. over message.max.bytes)
            for m in batch:
                if "_error" in m:
                    self._refused(m["_error"], m.get("key"), m["value"])

    def _make_room(self, count: int, largest: int) -> None:
        """Waits until librdkafka's queue surely takes `count` more records of at most `largest`
        bytes: one it refused for room (QUEUE_FULL) while taking those after it, as its queue
        drained meanwhile, would be sent out of order if sent again."""
        most_records, most_bytes = self._queue_limits
        while len(self.producer) and (len(self.producer) + count > most_records
                                      or (len(self.producer) + count) * largest > most_bytes):
            self.producer.poll(0.05)

    def _refused(self, err: KafkaError, key: bytes | None, value: bytes) -> None:
        self.failures.append((self._named(None, key, value), delivery_error(err, len(value) + len(key or b""),
                                                                           self._size_limit)))

    def _named(self, ref: Any, key: bytes | None, value: bytes | None) -> Any:
        """A failed record's ref; one sent without it is located, the first only (flush names it)."""
        if ref is None and self.locate is not None and not self.failures:
            return self.locate(key, value)
        return ref

    @functools.cached_property
    def _report_rows(self) -> Any:
        return functools.partial(self._on_delivery, None)

    def _partition_of(self, topic: str, key: bytes | None) -> int:
        """Where a record goes when no partition is given: Kafka's partitioner, null keys in turn."""
        count = self.partition_counts[topic]
        return partition_for(key, count) if key is not None else next(self._round_robin) % count

    def _partitions(self, topic: str, keys: list[bytes | None]) -> list[int]:
        """_partition_of of many records, all at once when every one has a key."""
        if None not in keys:
            return cast(list[int], partitions_for(cast(list[bytes], keys), self.partition_counts[topic]).tolist())
        return [self._partition_of(topic, key) for key in keys]

    @staticmethod
    def _last_of_each(partitions: list[int]) -> dict[int, int]:
        last: dict[int, int] = {}
        for index in range(len(partitions) - 1, -1, -1):
            last.setdefault(partitions[index], index)
        return last

    def _produce(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int | None,
                 headers: Headers | None, partition: int | None, ref: Any) -> None:
        if timestamp == 0 and speaks_to(self.clients.config):
            self._produce_at_zero(topic, key, value, headers, partition, ref)
            return
        if timestamp == 0:
            _log.warning("a record with timestamp 0 is stamped with the send time: librdkafka "
                         "cannot write 0, and kstool's own client does not speak SASL")
        kwargs: dict[str, Any] = {"key": key, "value": value, "timestamp": timestamp or 0,
                  "on_delivery": functools.partial(self._on_delivery, ref)}
        if headers:
            kwargs["headers"] = headers
        if partition is not None:
            kwargs["partition"] = partition
        try:
            produce(self.producer, topic, **kwargs)
        except KafkaException as exc:  # refused before sending (e.g. over message.max.bytes)
            size = len(value or b"") + len(key or b"")
            self.failures.append((ref, delivery_error(exc.args[0], size, self._size_limit)))
            return
        self._taken(1)

    def _taken(self, count: int) -> None:
        """Records librdkafka took: an errors_only writer counts them delivered until reported failed."""
        if self.errors_only:
            self.delivered += count

    def _produce_at_zero(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers | None,
                         partition: int | None, ref: Any) -> None:
        if partition is None:  # the partition librdkafka would choose (random for null keys)
            count = self.partition_counts.get(topic) or len(self.clients.topic_partitions(topic))
            partition = partition_for(key, count) if key is not None else random.randrange(count)
        self.producer.flush(max(self.clients.timeout, 60))  # what came before goes first
        if self._zero_writer is None:
            self._zero_writer = RecordWriter(self.clients.config, self.clients.leader)
        try:
            self._zero_writer.write(topic, partition, key, value, 0, list(headers or []))
        except KafkaOperationError as exc:
            self.failures.append((ref, str(exc)))
            return
        self.delivered += 1
        self.per_partition[(topic, partition)] += 1

    def flush(self, send_held: bool = True, written_before: int = 0) -> int:
        """Deliver everything; raise when any record was not delivered. Returns the count
        delivered since the last flush. send_held=False keeps the records held back for the
        tail (take_held), for a writer whose tail another writer sends after all others.
        written_before: delivered by earlier flushes, for the count an error gives."""
        timeout = max(self.clients.timeout, 60)
        remaining = self.producer.flush(timeout)
        if send_held and self._held:  # one per partition: each goes as a single-record batch
            for record in self._held.values():
                self._produce(*record)
            remaining += self.producer.flush(timeout)
        if send_held:
            self._held.clear()
        if self._zero_writer is not None:  # its connections are not needed until the next batch
            self._zero_writer.close()
        if self.errors_only:
            self.delivered -= remaining
        delivered, self.delivered = self.delivered, 0
        if remaining or self.failures:
            ref, reason = self.failures[0] if self.failures else (None, "flush timed out")
            failed = len(self.failures) + remaining
            self.failures.clear()
            where = f"{ref}: " if ref is not None else ""
            raise KafkaOperationError(f"{written_before + delivered} record(s) written, {failed} not delivered "
                                      f"(first: {where}{reason})")
        return delivered

    def take_held(self) -> list[tuple[str, bytes | None, bytes | None, int | None, int, Headers | None]]:
        """(topic, key, value, timestamp, partition, headers) of the records held back for the tail."""
        held = [(topic, key, value, ts, partition, headers)
                for topic, key, value, ts, headers, partition, _ in self._held.values()]
        self._held.clear()
        return held


# An idempotent producer's first send waits for its producer id (0.5-1 s): a process that writes
# batch after batch, run after run (an executor's Python worker, the warm engine) keeps its writers.
# One writer per settings and topics; an app's topics include its own changelogs, and an app runs
# once at a time (its lock), so two runs never share one. The least recently used go beyond
# MAX_SHARED_WRITERS (twice the engine's parked queries): an idle producer's librdkafka threads
# still wake, and a process that ran many apps (a test worker: ~150) spent 3% of the suite's CPU on them.
MAX_SHARED_WRITERS = 16
_SHARED: OrderedDict[str, BulkWriter] = OrderedDict()


def _shared_key(clients: KafkaClients, partition_counts: dict[str, int]) -> str:
    return json.dumps([asdict(clients.config), partition_counts], sort_keys=True, default=str)


def shared_writer(clients: KafkaClients, partition_counts: dict[str, int]) -> BulkWriter:
    """This process's idempotent writer for these settings and topics; a new one when every
    broker went away since the last batch (a broker that lost its state, as the embedded one
    does on a restart, would leave the old producer's sends to time out)."""
    key = _shared_key(clients, partition_counts)
    kept = _SHARED.get(key)
    if kept is not None:
        _SHARED.move_to_end(key)
        kept.producer.poll(0)  # serves the error callbacks queued while it was idle
        if kept.stale:
            kept = None
    if kept is None:
        idempotent: dict[str, Any] = {"enable.idempotence": True}
        kept = _SHARED[key] = BulkWriter(clients, partition_counts, errors_only=True, **idempotent)
        while len(_SHARED) > MAX_SHARED_WRITERS:  # each was flushed by its last batch
            _SHARED.popitem(last=False)
    return kept


def drop_shared_writer(clients: KafkaClients, partition_counts: dict[str, int]) -> None:
    """Forget a writer whose flush failed: after an outage its producer may be fenced or unknown
    to the broker, and it still holds what it did not deliver."""
    _SHARED.pop(_shared_key(clients, partition_counts), None)
