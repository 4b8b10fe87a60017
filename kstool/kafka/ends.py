"""The true end of partitions, found by reading.

A broker's ListOffsets(LATEST) answer is where reading stops for `consume -e`, lag, describe,
changelog and state reads, reset plans, replay and the stream source. Some brokers answer too
low: the embedded one reports the base offset of the last batch + 1, so a reader that trusts it
misses the rest of a batch written by any normally batching producer. Fetch responses carry the
right high watermark, so a consumer placed at the reported end takes the end from its first
fetch: the broker says "end of partition" (librdkafka's EOF event) when nothing lies beyond,
else the records it returns come with the partition's high watermark. On a correct broker the
first fetch answers EOF at once: one short round trip for all partitions together. Reading on
to an EOF instead could take seconds on a partition that is written without a pause.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kstool.kafka.records import position_of

if TYPE_CHECKING:
    from kstool.kafka.client import KafkaClients

TP = tuple[str, int]
_log = logging.getLogger("kstool.ends")
_END_READER: dict[str, Any] = {
    "enable.partition.eof": True,
    # the end as ListOffsets(LATEST) means it, open transactions included
    "isolation.level": "read_uncommitted",
    # an empty fetch at the end must come back at once, not after the 500 ms default wait
    "fetch.wait.max.ms": 10,
}


def read_until_answered(clients: "KafkaClients", positions: dict[TP, int],
                        answered: Callable[[TP, Any, Consumer], bool], settings: dict[str, Any] | None = None) -> set[TP]:
    """Read each partition from its position, handing every record and end-of-partition event
    (and the consumer, for what its fetches learnt) to `answered`, until it says the partition
    has answered or the client timeout runs out. Returns the partitions that never answered."""
    pending = set(positions)
    if not pending:
        return pending
    consumer = clients.consumer(**{**_END_READER, **(settings or {})})
    try:
        consumer.assign([TopicPartition(t, p, max(o, 0)) for (t, p), o in positions.items()])
        deadline = time.monotonic() + clients.timeout
        while pending and time.monotonic() < deadline:
            # consume() waits out its whole timeout unless it fills num_messages: short waits
            # let the loop end as soon as every partition has answered
            for msg in consumer.consume(num_messages=10_000, timeout=0.01):
                topic, partition, _ = position_of(msg)
                tp = (topic, partition)
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    if not err.retriable():
                        raise KafkaException(err)
                    continue
                if tp in pending and answered(tp, msg, consumer):
                    pending.discard(tp)
                    consumer.incremental_unassign([TopicPartition(*tp)])
    except KafkaException as exc:
        raise clients.translate(exc) from None
    finally:
        consumer.close()
    return pending


def read_ends(clients: "KafkaClients", reported: dict[TP, int]) -> dict[TP, int]:
    """Per partition, the offset after its last record: the reported end, confirmed or moved up
    by reading from it. A partition that gives no answer in time keeps the furthest known end."""
    ends = dict(reported)

    def answered(tp: TP, msg: Any, consumer: Consumer) -> bool:
        offset = position_of(msg)[2]
        if msg.error() is None:  # the fetch that brought it knew the partition's high watermark
            high = consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]
            ends[tp] = max(ends[tp], offset + 1, high)
        else:
            ends[tp] = max(ends[tp], offset)  # the end-of-partition event's offset is the end
        return True

    pending = read_until_answered(clients, reported, answered)
    if pending:
        _log.debug("no end-of-partition answer within %gs for %s; using %s", clients.timeout,
                   sorted(pending), {tp: ends[tp] for tp in sorted(pending)})
    moved = {tp: (reported[tp], ends[tp]) for tp in ends if ends[tp] != reported[tp]}
    if moved:
        _log.debug("broker-reported ends corrected by reading: %s", moved)
    return ends
