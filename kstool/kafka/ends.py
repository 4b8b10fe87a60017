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

from kstool.kafka.read_errors import ends_the_read
from kstool.kafka.records import position_of

if TYPE_CHECKING:
    from kstool.kafka.client import KafkaClients

TP = tuple[str, int]
_log = logging.getLogger("kstool.ends")
_END_READER: dict[str, Any] = {
    "enable.partition.eof": True,
    # the end as ListOffsets(LATEST) means it, open transactions included
    "isolation.level": "read_uncommitted",
}
# (fetch.wait.max.ms, seconds to wait for answers with it; None: until the client timeout).
# An empty fetch at the end must come back at once, not after the 500 ms default wait. But the
# embedded broker answers empty, without the high watermark, when finding the offset outlasts
# the wait: at the end of a log of ~800k records in 50-record batches, written on, a 10 ms
# wait never got an answer and 20 ms did in 35 ms (bench/notes/what-mattered.md). Partitions
# still silent are asked again with a longer wait, and a broker that needed one gets it first
# next time (a run asks for the ends every batch).
FETCH_WAITS: tuple[tuple[int, float | None], ...] = ((10, 0.5), (100, 2.0), (1000, None))
_first_wait: dict[str, int] = {}  # bootstrap servers -> the FETCH_WAITS index that answered there last


def read_until_answered(clients: "KafkaClients", positions: dict[TP, int],
                        answered: Callable[[TP, Any, Consumer], bool], settings: dict[str, Any] | None = None) -> set[TP]:
    """Read each partition from its position, handing every record and end-of-partition event
    (and the consumer, for what its fetches learnt) to `answered`, until it says the partition
    has answered or the client timeout runs out. Returns the partitions that never answered,
    those of topics the user may not read (ACLs) among them."""
    pending, refused = set(positions), set()
    deadline = time.monotonic() + clients.timeout
    broker = clients.config.bootstrap_servers
    for index in range(_first_wait.get(broker, 0), len(FETCH_WAITS)):
        if not pending or time.monotonic() >= deadline:
            break
        wait_ms, round_s = FETCH_WAITS[index]
        round_end = deadline if round_s is None else min(deadline, time.monotonic() + round_s)
        refused |= _read_round(clients, {tp: positions[tp] for tp in pending}, pending, answered,
                               {**_END_READER, "fetch.wait.max.ms": wait_ms, **(settings or {})}, round_end)
        if not pending:
            _first_wait[broker] = index
    return pending | refused


def _read_round(clients: "KafkaClients", positions: dict[TP, int], pending: set[TP],
                answered: Callable[[TP, Any, Consumer], bool], settings: dict[str, Any], until: float) -> set[TP]:
    """One round of read_until_answered; returns the partitions it may not read, taken out of `pending`."""
    consumer, refused = clients.consumer(**settings), set()
    try:
        consumer.assign([TopicPartition(t, p, max(o, 0)) for (t, p), o in positions.items()])
        while pending and time.monotonic() < until:
            # consume() waits out its whole timeout unless it fills num_messages: short waits
            # let the loop end as soon as every partition has answered
            for msg in consumer.consume(num_messages=10_000, timeout=0.01):
                topic, partition, _ = position_of(msg)
                tp = (topic, partition)
                err = msg.error()
                if err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and tp in pending:
                    refused.add(tp)  # allowed to DESCRIBE, not to READ: the reported end stands
                    pending.discard(tp)
                    consumer.incremental_unassign([TopicPartition(*tp)])
                    continue
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    if ends_the_read(err):
                        raise KafkaException(err)
                    continue
                if tp in pending and answered(tp, msg, consumer):
                    pending.discard(tp)
                    consumer.incremental_unassign([TopicPartition(*tp)])
    except KafkaException as exc:
        raise clients.translate(exc) from None
    finally:
        consumer.close()
    return refused


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
