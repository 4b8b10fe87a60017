"""Consume records with start positions, time bounds and stop conditions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kstool.base.errors import UsageError
from kstool.base.timeutil import check_time_range
from kstool.kafka.client import BULK_READ_SETTINGS, KafkaClients, require_partitions
from kstool.kafka.groups import committed_offsets
from kstool.kafka.offsets import offsets_for_time
from kstool.kafka.read_errors import ends_the_read
from kstool.kafka.records import Record, position_of

TP = tuple[str, int]


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
    seen = 0
    progress: dict[TP, int] = {}
    try:
        while pending or follow:
            # consume() waits out its whole timeout unless it fills num_messages: a short wait
            # lets `-e` end as soon as the last partition is done (10 records: 0.7 -> 0.2 s)
            batch = consumer.consume(num_messages=500, timeout=0.05)
            if not batch:
                _finish_drained(consumer, pending, plan.stop)
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
                position = topic, partition, offset = position_of(msg)
                tp = (topic, partition)
                end = plan.stop.get(tp)
                if end is not None and offset >= end:
                    _finish(consumer, pending, tp)
                    continue
                yield Record.from_message(msg, position)
                seen += 1
                if options.group:
                    progress[tp] = offset + 1
                if end is not None and offset + 1 >= end:
                    _finish(consumer, pending, tp)
                if options.max_messages is not None and seen >= options.max_messages:
                    return
            if not pending and not follow:
                return
    except KafkaException as exc:
        raise clients.translate(exc) from None
    finally:
        try:
            if progress:  # explicit offsets: finished partitions are no longer assigned
                consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in progress.items()],
                                asynchronous=False)
        finally:
            consumer.close()


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
