"""Replay: plan the source slice, then copy it record by record, keeping keys, values, headers
and timestamps (unless --now), adding provenance headers, optionally rate-limited, optionally
in Kafka transactions that a rerun resumes from."""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, cast

from confluent_kafka import KafkaException

from kstool.base.errors import Interrupted, UsageError
from kstool.base.serdes import FieldEncoder, WithSchemaId, as_text
from kstool.base.timeutil import format_time
from kstool.kafka.bulk import BulkWriter
from kstool.kafka.client import KafkaClients
from kstool.kafka.consume import ConsumeOptions, consume, plan_positions
from kstool.kafka.exceptions import EnvelopeError
from kstool.kafka.groups import committed_offsets
from kstool.kafka.records import Record, from_envelope
from kstool.kafka.transactions import OutRecord, TransactionalWriter
from kstool.schemas.formats import SchemaOptions, Schemas, record_decoder, record_encoder, schemas_for

PROVENANCE = ("kstool.replay.topic", "kstool.replay.partition", "kstool.replay.offset")
FILE_PROVENANCE = ("kstool.replay.file", "kstool.replay.line")
TRANSACTION_CHUNK = 1000


@dataclass
class ReplayOptions:
    to_topic: str
    from_topic: str | None = None
    from_file: Path | None = None
    from_time: int | None = None
    to_time: int | None = None
    from_offsets: dict[int, int] = field(default_factory=dict)
    to_offsets: dict[int, int] = field(default_factory=dict)  # inclusive
    partitions: list[int] | None = None
    filter_key: str | None = None
    rate: float | None = None  # records per second
    by_key: bool | None = None  # None: keep partitions when the counts match
    now: bool = False
    provenance: bool = True
    transactional: bool = False
    dry_run: bool = False
    allow_same_topic: bool = False
    # the dump's keys and values (--from-file), and the keys --filter-key matches, decoded as text
    key_format: str = "string"
    value_format: str = "string"
    schemas: SchemaOptions | None = None  # for avro, protobuf, jsonschema


@dataclass
class PartitionSummary:
    """What was copied from one source partition: positions are source offsets, or the dump
    file's line numbers."""

    partition: int
    records: int = 0
    first: int | None = None
    last: int | None = None
    first_timestamp: int | None = None
    last_timestamp: int | None = None

    def add(self, position: int, timestamp: int | None) -> None:
        self.records += 1
        if self.first is None:
            self.first, self.first_timestamp = position, timestamp
        self.last, self.last_timestamp = position, timestamp


@dataclass
class ReplaySummary:
    source: str
    target: str
    dry_run: bool
    partitioning: str
    partitions: dict[int, PartitionSummary] = field(default_factory=dict)
    skipped_by_filter: int = 0
    resumed_from: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    from_file: bool = False
    resume_group: str | None = None  # --transactional: the group that keeps its position

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions.values())

    @property
    def position(self) -> str:
        return "line" if self.from_file else "offset"

    def to_dict(self) -> dict:
        rows = []
        for p in sorted(self.partitions.values(), key=lambda s: s.partition):
            rows.append({"partition": p.partition, "records": p.records,
                         f"first_{self.position}": p.first, f"last_{self.position}": p.last,
                         "first_timestamp": p.first_timestamp, "last_timestamp": p.last_timestamp,
                         "first_time": format_time(p.first_timestamp),
                         "last_time": format_time(p.last_timestamp)})
        return {"source": self.source, "target": self.target, "dry_run": self.dry_run,
                "partitioning": self.partitioning, "records": self.records,
                "skipped_by_filter": self.skipped_by_filter,
                "resumed_from": {str(p): o for p, o in sorted(self.resumed_from.items())},
                "resume_group": self.resume_group, "seconds": round(self.seconds, 3), "partitions": rows}


def transactional_id(options: ReplayOptions) -> str:
    """Stable per replay (same arguments, same id): a rerun fences the old run and resumes."""
    key = repr((options.from_topic, options.to_topic, options.from_time, options.to_time,
                sorted(options.from_offsets.items()), sorted(options.to_offsets.items()),
                options.partitions, options.filter_key, options.by_key, options.now))
    return "kstool-replay-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def replay(clients: KafkaClients, options: ReplayOptions,
           progress: Callable[[int], None] | None = None) -> ReplaySummary:
    if (options.from_topic is None) == (options.from_file is None):
        raise UsageError("give exactly one of --from-topic and --from-file")
    if options.from_topic == options.to_topic and not options.allow_same_topic:
        raise UsageError(f"replaying {options.to_topic!r} into itself duplicates its records; "
                         "add --yes if that is what you want")
    if options.transactional and options.from_topic is None:
        raise UsageError("--transactional resumes from the source topic's offsets: use it with --from-topic")
    try:
        key_filter = re.compile(options.filter_key) if options.filter_key else None
    except re.error as exc:
        raise UsageError(f"invalid --filter-key regex: {exc}") from None
    schemas = schemas_for({"key": options.key_format, "value": options.value_format},
                          options.schemas or SchemaOptions())
    key_text = _key_text(options.key_format, schemas)
    encoders = (record_encoder(options.key_format, schemas, "key", options.to_topic),
                record_encoder(options.value_format, schemas, "value", options.to_topic))
    target_partitions = len(clients.topic_partitions(options.to_topic))
    # made first: a transactional writer's init ends an earlier run's transaction (committed or
    # aborted) before the offsets it committed are read
    writer = _Writer(clients, options, target_partitions) if not options.dry_run else None
    if options.from_topic is not None:
        source_partitions = len(clients.topic_partitions(options.from_topic))
        by_key = options.by_key if options.by_key is not None else source_partitions != target_partitions
        if not by_key and source_partitions > target_partitions:
            raise UsageError(f"{options.from_topic!r} has {source_partitions} partitions, "
                             f"{options.to_topic!r} only {target_partitions}: use --by-key")
        records, resumed = _from_topic(clients, options)
    else:
        resumed = {}
        by_key = bool(options.by_key)
        # a whole first pass: a bad line or partition fails the replay before anything is written
        source_file = cast(Path, options.from_file)  # a replay has a topic or a file
        _check_file(source_file, encoders, None if by_key else target_partitions, options.to_topic)
        records = _from_file(source_file, encoders)
    summary = ReplaySummary(options.from_topic or str(options.from_file), options.to_topic,
                            options.dry_run, "by-key" if by_key else "keep-partitions",
                            resumed_from=resumed, from_file=options.from_file is not None,
                            resume_group=transactional_id(options) if options.transactional else None)
    started = time.monotonic()
    limiter = _RateLimiter(options.rate)
    try:
        for record, position in records:
            if key_filter is not None and not key_filter.search(key_text(record.key)):
                summary.skipped_by_filter += 1
                continue
            if writer is not None:
                limiter.wait()
                writer.send(record, position, None if by_key else record.partition)
            part = record.partition if record.partition is not None else -1
            summary.partitions.setdefault(part, PartitionSummary(part)).add(position, record.timestamp)
            if progress:
                progress(1)
        if writer is not None:
            writer.close()
    except KafkaException as exc:
        raise clients.translate(exc) from None
    except KeyboardInterrupt:
        raise Interrupted(_where_it_stopped(writer, summary, options)) from None
    summary.seconds = time.monotonic() - started
    return summary


def _where_it_stopped(writer: _Writer | None, summary: ReplaySummary, options: ReplayOptions) -> str:
    """What a replay cut short by Ctrl-C wrote, and what running it again does."""
    if writer is None:
        return f"interrupted: a dry run, {summary.records} record(s) counted, nothing written"
    if writer.bulk is None:
        return (f"interrupted: {writer.committed} record(s) committed to {options.to_topic} (the chunk being "
                "written is not); the same command resumes after them")
    writer.bulk.flush()  # what was sent is delivered, and counted
    written = sum(writer.bulk.per_partition.values())
    return (f"interrupted: {written} record(s) written to {options.to_topic}; running the same replay again "
            "writes them again (duplicates): start past them (--from-offset, --from-time), or use "
            "--transactional, which resumes where it stopped")


def planned_count(clients: KafkaClients, options: ReplayOptions) -> int | None:
    """How many source records the slice holds (for a progress bar); None for files."""
    if options.from_topic is None:
        return None
    plan = plan_positions(clients, _consume_options(options))
    return sum(max(plan.stop[tp] - start, 0) for tp, start in plan.start.items())


def _consume_options(options: ReplayOptions, resume: dict[int, int] | None = None) -> ConsumeOptions:
    starts = {**options.from_offsets, **(resume or {})}
    return ConsumeOptions(
        cast(str, options.from_topic), from_time=options.from_time, to_time=options.to_time,
        partitions=options.partitions, exit_at_end=True,
        start_offsets=starts or None,
        stop_offsets={p: o + 1 for p, o in options.to_offsets.items()} or None)


def _from_topic(clients: KafkaClients, options: ReplayOptions) -> tuple[Iterator[tuple[Record, int]],
                                                                         dict[int, int]]:
    """The source records with their offsets, and where a transactional rerun resumes (its
    committed offsets)."""
    resume: dict[int, int] = {}
    source = cast(str, options.from_topic)  # replays from a file do not come here
    if options.transactional and not options.dry_run:
        resume = {p: o for (_, p), o in committed_offsets(clients, transactional_id(options), [source]).items()}
    return ((r, cast(int, r.offset)) for r in consume(clients, _consume_options(options, resume))), resume


def _key_text(fmt: str, schemas: Schemas | None) -> Callable[[bytes | None], str]:
    """A key as --filter-key sees it: UTF-8 text, or decoded with its format (records as JSON)."""
    if fmt == "string":
        return lambda key: (key or b"").decode("utf-8", "replace")
    decode = record_decoder(fmt, schemas, "key")

    def text(key: bytes | None) -> str:
        value = decode(key)
        return as_text(value.value if isinstance(value, WithSchemaId) else value)
    return text


def _from_file(path: Path, encoders: tuple[FieldEncoder, FieldEncoder]) -> Iterator[tuple[Record, int]]:
    """The dump's records with their line numbers."""
    try:
        handle = open(path, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    with handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield from_envelope(line, *encoders), lineno
            except EnvelopeError as exc:
                raise UsageError(f"{path}:{lineno}: {exc}") from None


def _check_file(path: Path, encoders: tuple[FieldEncoder, FieldEncoder], target_partitions: int | None,
                target: str) -> None:
    for record, lineno in _from_file(path, encoders):
        if target_partitions is not None and (record.partition or 0) >= target_partitions:
            raise UsageError(f"{path}:{lineno}: partition {record.partition} does not exist in "
                             f"{target!r} ({target_partitions} partitions); nothing was written "
                             "(use --by-key to partition by key)")


class _RateLimiter:
    def __init__(self, rate: float | None):
        self.interval = 1.0 / rate if rate else 0.0
        self.next_at = time.monotonic()

    def wait(self) -> None:
        if not self.interval:
            return
        now = time.monotonic()
        if now < self.next_at:
            time.sleep(self.next_at - now)
        self.next_at = max(self.next_at, now) + self.interval


class _Writer:
    def __init__(self, clients: KafkaClients, options: ReplayOptions, partitions: int):
        self.options, self.clients = options, clients
        self.chunk: list[OutRecord] = []
        self.offsets: dict[tuple[str, int], int] = {}
        self.committed = 0  # records of the chunks committed (--transactional)
        if options.transactional:  # its init fences an older run
            self.transactions = TransactionalWriter(clients, transactional_id(options),
                                                    transactional_id(options), {options.to_topic: partitions})
            self.bulk = None
        else:
            self.bulk = BulkWriter(clients, {options.to_topic: partitions})

    def send(self, record: Record, position: int, partition: int | None) -> None:
        headers = list(record.headers)
        if self.options.provenance and self.options.from_topic:
            headers += [(PROVENANCE[0], self.options.from_topic.encode()),
                        (PROVENANCE[1], str(record.partition).encode()),
                        (PROVENANCE[2], str(position).encode())]
        elif self.options.provenance:
            headers += [(FILE_PROVENANCE[0], str(self.options.from_file).encode()),
                        (FILE_PROVENANCE[1], str(position).encode())]
        # None lets the producer stamp the record as it is sent
        timestamp = None if self.options.now else record.timestamp
        if self.bulk is not None:
            where = (f"line {position}" if self.options.from_file
                     else f"{self.options.from_topic}:{record.partition} offset {position}")
            self.bulk.send(self.options.to_topic, record.key, record.value, timestamp, headers, partition,
                           ref=where)
            return
        self.chunk.append(OutRecord(self.options.to_topic, record.key, record.value, timestamp, headers, partition))
        # transactional replays read a topic: its records have a partition and an offset
        self.offsets[(cast(str, self.options.from_topic), cast(int, record.partition))] = cast(int, record.offset) + 1
        if len(self.chunk) >= TRANSACTION_CHUNK:
            self._commit_chunk()

    def _commit_chunk(self) -> None:
        """Records and the source position commit together: a crash leaves no partial chunk
        visible to read_committed consumers, and a rerun resumes after the last chunk."""
        self.transactions.commit(self.chunk, self.offsets)
        self.committed += len(self.chunk)
        self.chunk = []

    def close(self) -> None:
        if self.bulk is not None:
            self.bulk.flush()
            return
        self._commit_chunk()
        self.transactions.close()
