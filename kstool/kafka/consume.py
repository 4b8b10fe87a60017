"""Consume records with start positions, time bounds and stop conditions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from operator import methodcaller
from typing import Generator, Iterator, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from kstool.base.errors import UsageError
from kstool.base.timeutil import check_time_range
from kstool.kafka.client import BULK_READ_SETTINGS, KafkaClients, require_partitions
from kstool.kafka.groups import committed_offsets
from kstool.kafka.offsets import offsets_for_time
from kstool.kafka.read_errors import ends_the_read
from kstool.kafka.records import Record, position_of

TP = tuple[str, int]
BATCH = 1000  # records librdkafka hands over at most per call


@dataclass(frozen=True)
class StartSpec:
    """Where to start: beginning | end | stored | an absolute offset | the last N records."""

    kind: str
    value: int = 0

    @classmethod
    def parse(cls, text: str) -> "StartSpec":
        text = text.strip().lower()
        if text in ("beginning", "earliest"):
            return cls("beginning")
        if text in ("end", "latest"):
            return cls("end")
        if text == "stored":
            return cls("stored")
        if re.fullmatch(r"\d+", text):
            return cls("offset", int(text))
        if re.fullmatch(r"-\d+", text):
            return cls("last", -int(text))
        raise UsageError(f"invalid --from {text!r}: use beginning, end, stored, an offset, or -N")


@dataclass
class ConsumeOptions:
    topic: str
    start: StartSpec = field(default_factory=lambda: StartSpec("beginning"))
    from_time: int | None = None
    to_time: int | None = None
    partitions: list[int] | None = None
    exit_at_end: bool = False
    max_messages: int | None = None
    group: str | None = None
    start_offsets: dict[int, int] | None = None  # per partition, overrides start/from_time
    stop_offsets: dict[int, int] | None = None  # per partition, exclusive


@dataclass
class Plan:
    start: dict[TP, int]
    stop: dict[TP, int]  # exclusive; absent = follow


def plan_positions(clients: KafkaClients, options: ConsumeOptions) -> Plan:
    available = clients.topic_partitions(options.topic)
    wanted = options.partitions if options.partitions is not None else available
    require_partitions(options.topic, wanted, available)
    check_time_range(options.from_time, options.to_time)
    if options.start.kind == "stored" and not options.group:
        raise UsageError("--from stored needs --group")
    tps = [(options.topic, p) for p in sorted(wanted)]
    marks = clients.watermarks(tps)
    if options.from_time is not None:
        start = offsets_for_time(clients, tps, options.from_time)
    else:
        start = _start_offsets(clients, options, tps, marks)
    bounded_partitions = set(options.start_offsets or {}) | set(options.stop_offsets or {})
    if bounded_partitions - set(wanted):
        raise UsageError(f"topic {options.topic!r} has no partition "
                         f"{sorted(bounded_partitions - set(wanted))[0]} among those read")
    for partition, offset in (options.start_offsets or {}).items():
        low, high = marks[(options.topic, partition)]
        start[(options.topic, partition)] = min(max(offset, low), high)
    stop: dict[TP, int] = {}
    if options.exit_at_end:
        stop = {tp: marks[tp][1] for tp in tps}
    if options.to_time is not None:
        bounded = offsets_for_time(clients, tps, options.to_time + 1)
        stop = {tp: min(bounded[tp], stop.get(tp, bounded[tp])) for tp in tps}
    for partition, offset in (options.stop_offsets or {}).items():
        tp = (options.topic, partition)
        stop[tp] = min(offset, stop.get(tp, offset))
    return Plan(start, stop)


def _start_offsets(clients: KafkaClients, options: ConsumeOptions, tps: list[TP],
                   marks: dict[TP, tuple[int, int]]) -> dict[TP, int]:
    kind, value = options.start.kind, options.start.value
    if kind == "stored":
        committed = committed_offsets(clients, options.group or "", [options.topic])
        # like Kafka's default auto.offset.reset=latest for partitions without a commit
        return {tp: committed.get(tp, marks[tp][1]) for tp in tps}
    out = {}
    for tp in tps:
        low, high = marks[tp]
        out[tp] = {"beginning": low, "end": high,
                   "offset": min(max(value, low), high),
                   "last": max(high - value, low)}[kind]
    return out


def consume(clients: KafkaClients, options: ConsumeOptions) -> Iterator[Record]:
    """Yield records in per-partition order until every bounded partition is done, the
    message limit is reached, or the caller stops iterating (Ctrl-C)."""
    taken: dict[TP, int] = {}
    batches = consume_batches(clients, options, taken)
    try:
        for batch in batches:
            for msg in batch:
                topic, partition, offset = position = position_of(msg)
                yield Record.from_message(msg, position)
                taken[(topic, partition)] = offset + 1
    finally:
        batches.close()


def consume_batches(clients: KafkaClients, options: ConsumeOptions,
                    taken: dict[TP, int] | None = None) -> Generator[list[Message], None, None]:
    """consume()'s records as librdkafka hands them over, in lists of its messages (records only,
    each within its partition's bounds): for who renders whole batches, with no Python object
    per record of its own. A --group commits what was taken: each batch handed over, whole, or
    what the caller records in `taken` (the next offset per partition) as it takes records."""
    plan = plan_positions(clients, options)
    pending = {tp for tp in plan.start if tp not in plan.stop or plan.start[tp] < plan.stop[tp]}
    follow = options.to_time is None and not options.exit_at_end
    if not pending and not follow:
        return
    # EOF events: a partition whose records below the stop offset were deleted while it was read
    # (retention, DeleteRecords) ends there, where no record would ever arrive to tell it; and a
    # start the log no longer holds reads on from the log's start
    consumer = clients.consumer(group_id=options.group, **BULK_READ_SETTINGS,
                                **{"enable.partition.eof": True, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(t, p, o) for (t, p), o in plan.start.items() if (t, p) in pending])
    left = options.max_messages
    progress: dict[TP, int] = {} if taken is None else taken
    try:
        while pending or follow:
            # consume() waits out its whole timeout unless it fills num_messages: a short wait
            # lets `-e` end as soon as the last partition is done (10 records: 0.7 -> 0.2 s)
            batch = consumer.consume(num_messages=BATCH, timeout=0.05)
            if not batch:
                _finish_drained(consumer, pending, plan.stop)
            records: list[Message] = []
            if (left is None or len(batch) < left) and _inside_bounds(batch, options.topic, plan.stop):
                records, batch = batch, []
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof, at = (cast(str, msg.topic()), cast(int, msg.partition())), msg.offset()
                        if eof in plan.stop and at is not None and at >= plan.stop[eof]:
                            _finish(consumer, pending, eof)
                        continue
                    if ends_the_read(err, uses_group=options.group is not None):
                        raise clients.translate(KafkaException(err), topic=("READ", msg.topic()),
                                                group=("READ", options.group))
                    continue
                topic, partition, offset = position_of(msg)
                tp = (topic, partition)
                end = plan.stop.get(tp)
                if end is not None and offset >= end:
                    _finish(consumer, pending, tp)
                    continue
                records.append(msg)
                if end is not None and offset + 1 >= end:
                    _finish(consumer, pending, tp)
                if left is not None and len(records) >= left:
                    break
            if records:
                yield records
                if taken is None and options.group:
                    progress.update(((t, p), o + 1) for t, p, o in map(position_of, records))
            if left is not None:
                left -= len(records)
                if left <= 0:
                    return
            if not pending and not follow:
                return
    except KafkaException as exc:
        raise clients.translate(exc) from None
    finally:
        try:
            if progress and options.group:  # explicit offsets: finished partitions are no longer assigned
                consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in progress.items()],
                                asynchronous=False)
        finally:
            consumer.close()


_ERROR, _PARTITION, _OFFSET = methodcaller("error"), methodcaller("partition"), methodcaller("offset")


def _inside_bounds(batch: list[Message], topic: str, stop: dict[TP, int]) -> bool:
    """Records only, none of them the last before its partition's stop offset or past it: the
    whole batch is taken as it is (found with no Python call per record; else record by record)."""
    if any(map(_ERROR, batch)):
        return False
    last = dict(zip(map(_PARTITION, batch), map(_OFFSET, batch)))  # a partition's offsets rise in a batch
    return all(offset + 1 < stop.get((topic, partition), offset + 2) for partition, offset in last.items())


def _finish_drained(consumer: Consumer, pending: set[TP], stop: dict[TP, int]) -> None:
    """Partitions whose position passed the stop offset without a record there (transaction
    markers, compacted gaps) are done too."""
    bounded = [TopicPartition(*tp) for tp in pending if tp in stop]
    for tp in consumer.position(bounded) if bounded else []:
        if tp.offset >= 0 and tp.offset >= stop[(tp.topic, tp.partition)]:
            _finish(consumer, pending, (tp.topic, tp.partition))


def _finish(consumer: Consumer, pending: set[TP], tp: TP) -> None:
    if tp in pending:
        pending.discard(tp)
        consumer.incremental_unassign([TopicPartition(*tp)])
