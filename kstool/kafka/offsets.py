"""The one time-to-offset resolver for the whole tool.

Answers, per partition, the first offset whose record timestamp is >= T (the high watermark
when there is none), as Kafka's ListOffsets-by-timestamp specifies. The broker's answer is
asked first and verified by reading the records around it; when it is wrong or unsupported
(the embedded broker answers 0 for everything), a binary search over record timestamps finds
the offset in O(log n) single-record reads.

Assumption of the fallback: timestamps are non-decreasing within a partition (always true for
LogAppendTime, and for CreateTime when producers stamp records as they send them). With
out-of-order CreateTime timestamps the search still returns an offset o where the record at
o has timestamp >= T and the one before it < T, but earlier records may also be >= T.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kstool.kafka.client import KafkaClients
from kstool.kafka.read_errors import ends_the_read
from kstool.kafka.records import position_of

TP = tuple[str, int]
_log = logging.getLogger("kstool.offsets")
# each probe needs one record: keep prefetching small, and do not let a broker long-poll
# (fetch.wait.max.ms) delay the next probe
_PROBE_CONSUMER: dict[str, Any] = {"max.partition.fetch.bytes": 65536, "queued.max.messages.kbytes": 64,
                   "fetch.wait.max.ms": 5}


@dataclass
class Resolution:
    offset: int
    verified_broker_answer: bool  # False: the fallback search found it
    probes: int


class _Prober:
    """Reads single records at offsets: (actual offset, timestamp) of the first record at or
    after the offset, or None when there is none below the high watermark."""

    def __init__(self, consumer: Consumer, timeout: float):
        self.consumer = consumer
        self.timeout = timeout
        self.probes = 0

    def read(self, tp: TP, offset: int, high: int) -> tuple[int, int] | None:
        if offset >= high:
            return None
        self.probes += 1
        self.consumer.assign([TopicPartition(tp[0], tp[1], offset)])
        msg = self.consumer.poll(self.timeout)
        while msg is not None and (err := msg.error()) is not None:
            if ends_the_read(err):
                raise KafkaException(err)
            msg = self.consumer.poll(self.timeout)
        if msg is None or position_of(msg)[2] >= high:
            return None
        return position_of(msg)[2], msg.timestamp()[1]


def resolve_times(clients: KafkaClients, tps: list[TP], timestamp: int) -> dict[TP, Resolution]:
    marks = clients.watermarks(tps)
    consumer = clients.consumer(**_PROBE_CONSUMER)
    try:
        try:
            answers = consumer.offsets_for_times(
                [TopicPartition(t, p, timestamp) for t, p in tps], timeout=clients.timeout)
            broker = {(a.topic, a.partition): a.offset for a in answers}
        except KafkaException:
            broker = {}  # unsupported: the search decides
        prober = _Prober(consumer, clients.timeout)
        out = {}
        for tp in tps:
            low, high = marks[tp]
            before = prober.probes
            answer = broker.get(tp)
            if answer is not None and answer < 0:
                answer = high  # no record at or after T
            if answer is not None and _consistent(prober, tp, answer, timestamp, low, high):
                out[tp] = Resolution(answer, True, prober.probes - before)
            else:
                found = _search(prober, tp, timestamp, low, high)
                out[tp] = Resolution(found, False, prober.probes - before)
        return out
    except KafkaException as exc:
        raise clients.translate(exc) from None
    finally:
        consumer.close()


def _consistent(prober: _Prober, tp: TP, offset: int, ts: int, low: int, high: int) -> bool:
    if not low <= offset <= high:
        return False
    if offset < high:
        at = prober.read(tp, offset, high)
        if at is None or at[1] < ts:
            return False
    if offset > low:
        before = prober.read(tp, offset - 1, high)
        if before is not None and before[0] == offset - 1 and before[1] >= ts:
            return False
    return True


def _search(prober: _Prober, tp: TP, ts: int, low: int, high: int) -> int:
    lo, hi = low, high  # invariant: records below lo are < ts; the first record at/after hi is >= ts
    while lo < hi:
        mid = (lo + hi) // 2
        found = prober.read(tp, mid, high)
        if found is None or found[1] >= ts:
            hi = mid
        else:
            lo = found[0] + 1
    return lo


def offsets_for_time(clients: KafkaClients, tps: list[TP], timestamp: int) -> dict[TP, int]:
    resolved = resolve_times(clients, tps, timestamp)
    for (topic, partition), r in sorted(resolved.items()):
        _log.debug("time %d -> %s:%d offset %d (%s, %d probe reads)", timestamp, topic, partition, r.offset,
                   "broker answer verified" if r.verified_broker_answer else "binary search", r.probes)
    return {tp: r.offset for tp, r in resolved.items()}
