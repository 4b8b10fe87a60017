"""kstool replay --dead-letters: send dead letters (Kafka Streams' KIP-1034 form, as Kafka Streams'
handlers and `kstool run --on-error dlq:` write them) back to the topic and partition each came
from, as the record it was: raw key and value, timestamp, its own headers without the error's.

A first pass reads the slice and plans where each record goes; a record that is not a dead letter,
or a target that does not exist, fails the replay before anything is written. The second pass
reads the same offsets and writes. What was sent back is remembered, as a consumer group
remembers what it read: the group `kstool-replayed-DLQ` (`-DLQ--TARGET` with --to-topic) holds
the offset after the last letter sent, per partition, and a later replay skips the letters
before it unless told to include them. Every group that reads a target gets the letters again,
not only the app that failed them: the plan names those groups."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator

from confluent_kafka import KafkaException

from kstool.base.errors import UsageError
from kstool.base.timeutil import format_time
from kstool.kafka.bulk import BulkWriter
from kstool.kafka.client import KafkaClients
from kstool.kafka.consume import ConsumeOptions, consume, plan_positions
from kstool.kafka.dead_letters import PARTITION, TOPIC, DeadLetter, without_error_headers
from kstool.kafka.groups import commit_offsets, committed_offsets, groups_reading
from kstool.kafka.records import Record
from kstool.replay.copy import PROVENANCE


@dataclass
class DeadLetterReplay:
    from_topic: str  # the dead-letter topic
    to_topic: str | None = None  # None: each record's source topic
    from_time: int | None = None
    to_time: int | None = None
    partitions: list[int] | None = None
    provenance: bool = True
    dry_run: bool = False
    include_replayed: bool = False  # send the letters a replay sent before again too

    @property
    def replayed_group(self) -> str:
        return f"kstool-replayed-{self.from_topic}" + (f"--{self.to_topic}" if self.to_topic else "")


@dataclass
class Target:
    topic: str
    partition: int
    records: int = 0
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    exceptions: Counter[str] = field(default_factory=Counter)

    def add(self, record: Record, letter: DeadLetter) -> None:
        self.records += 1
        if self.first_timestamp is None:
            self.first_timestamp = record.timestamp
        self.last_timestamp = record.timestamp
        self.exceptions[letter.exception or "-"] += 1

    def to_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "records": self.records,
                "first_timestamp": self.first_timestamp, "last_timestamp": self.last_timestamp,
                "first_time": format_time(self.first_timestamp), "last_time": format_time(self.last_timestamp),
                "exceptions": dict(sorted(self.exceptions.items()))}


@dataclass
class DeadLetterSummary:
    source: str
    dry_run: bool
    targets: dict[tuple[str, int], Target] = field(default_factory=dict)
    seconds: float = 0.0
    replayed_before: int = 0  # letters of the slice a replay sent before: skipped
    readers: dict[str, list[str]] = field(default_factory=dict)  # target topic -> groups that read it

    @property
    def records(self) -> int:
        return sum(t.records for t in self.targets.values())

    def to_dict(self) -> dict:
        return {"source": self.source, "dry_run": self.dry_run, "records": self.records,
                "replayed_before": self.replayed_before, "readers": self.readers,
                "seconds": round(self.seconds, 3),
                "targets": [t.to_dict() for _, t in sorted(self.targets.items())]}


def replay_dead_letters(clients: KafkaClients, options: DeadLetterReplay,
                        progress: Callable[[int], None] | None = None) -> DeadLetterSummary:
    if options.to_topic == options.from_topic:
        raise UsageError(f"the dead letters of {options.from_topic!r} would go back into it")
    # both passes read up to the same offsets: records that arrive meanwhile wait for the next replay
    plan = plan_positions(clients, ConsumeOptions(options.from_topic, from_time=options.from_time,
                                                  to_time=options.to_time, partitions=options.partitions,
                                                  exit_at_end=True))
    bounds = ConsumeOptions(options.from_topic, partitions=sorted(p for _, p in plan.start), exit_at_end=True,
                            start_offsets={p: o for (_, p), o in plan.start.items()},
                            stop_offsets={p: o for (_, p), o in plan.stop.items()})
    replayed = {p: o for (_, p), o in committed_offsets(clients, options.replayed_group,
                                                         [options.from_topic]).items()}
    summary = DeadLetterSummary(options.from_topic, options.dry_run)
    started = time.monotonic()
    try:
        for record, letter, target in _routed(clients, bounds, options.to_topic):
            if not options.include_replayed and (record.offset or 0) < replayed.get(record.partition or 0, 0):
                summary.replayed_before += 1
                continue
            summary.targets.setdefault(target, Target(*target)).add(record, letter)
        partition_counts = _check_targets(clients, summary.targets)
        summary.readers = groups_reading(clients, sorted(partition_counts),
                                         but=lambda group: group.startswith("kstool-replay"))
        if not options.include_replayed:  # the write pass starts after what was sent before
            stops = bounds.stop_offsets or {}
            bounds.start_offsets = {p: min(max(o, replayed.get(p, 0)), stops.get(p, o))
                                    for p, o in (bounds.start_offsets or {}).items()}
        if not options.dry_run and summary.targets:
            _write(clients, bounds, options, partition_counts, progress)
            sent_up_to = {(options.from_topic, p): max(o, replayed.get(p, 0))
                          for p, o in (bounds.stop_offsets or {}).items()}
            commit_offsets(clients, options.replayed_group, sent_up_to)
    except KafkaException as exc:
        raise clients.translate(exc) from None
    summary.seconds = time.monotonic() - started
    return summary


def _routed(clients: KafkaClients, bounds: ConsumeOptions,
            to_topic: str | None) -> Iterator[tuple[Record, DeadLetter, tuple[str, int]]]:
    for record in consume(clients, bounds):
        letter = DeadLetter.of(record.headers)
        where = f"{record.topic}:{record.partition} offset {record.offset}"
        if letter is None:
            raise UsageError(f"{where} is not a dead letter (no __streams.errors.* headers); nothing was written")
        if letter.topic is None or letter.partition is None or letter.partition < 0:
            raise UsageError(f"{where} does not say where it came from ({TOPIC}, {PARTITION}: an error "
                             "outside a source record); nothing was written")
        yield record, letter, (to_topic or letter.topic, letter.partition)


def _check_targets(clients: KafkaClients, targets: dict[tuple[str, int], Target]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for topic, partition in sorted(targets):
        if topic not in counts:
            counts[topic] = len(clients.topic_partitions(topic))
        if partition >= counts[topic]:
            raise UsageError(f"{targets[(topic, partition)].records} dead letter(s) came from {topic}:{partition}, "
                             f"which does not exist ({counts[topic]} partitions); nothing was written")
    return counts


def _write(clients: KafkaClients, bounds: ConsumeOptions, options: DeadLetterReplay,
           partition_counts: dict[str, int], progress: Callable[[int], None] | None) -> None:
    writer = BulkWriter(clients, partition_counts)
    for record, _letter, (topic, partition) in _routed(clients, bounds, options.to_topic):
        headers = without_error_headers(record.headers)
        if options.provenance:
            headers += [(PROVENANCE[0], bounds.topic.encode()), (PROVENANCE[1], str(record.partition).encode()),
                        (PROVENANCE[2], str(record.offset).encode())]
        writer.send(topic, record.key, record.value, record.timestamp, headers, partition,
                    ref=f"{record.topic}:{record.partition} offset {record.offset}")
        if progress:
            progress(1)
    writer.flush()
