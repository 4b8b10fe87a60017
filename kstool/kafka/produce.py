"""Produce records from lines of text or jsonl envelopes."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Iterator

from confluent_kafka import KafkaException

from kstool.base.errors import NotFoundError, UsageError
from kstool.base.serdes import SCHEMA_FORMATS, EncodeError, FieldEncoder, plain_encoder
from kstool.kafka.bulk import BulkWriter
from kstool.kafka.bulk_lines import LineBatches
from kstool.kafka.client import KafkaClients, require_partitions
from kstool.kafka.exceptions import BadInputLine, EnvelopeError, KafkaOperationError, TopicNotFoundError
from kstool.kafka.records import Record, from_envelope
from kstool.kafka.topics import CreateTopicOptions, ensure_topic, timestamp_bounds, write_blockers

INPUT_FORMATS = ("text", "jsonl")  # a record per text line | `consume -o jsonl` envelopes
# seconds a record may wait to be written (at least): a lost leader's successor is elected
# after the broker session timeout (9 s by default)
WRITE_PATIENCE_S = 30
ON_ERROR = ("fail", "skip")  # a bad line: stop there | report it and go on

@dataclass
class ProduceOptions:
    topic: str
    input_format: str = "text"  # text | jsonl
    key_delimiter: str | None = None
    key: str | None = None
    partition: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    timestamp: int | None = None
    key_format: str = "string"
    value_format: str = "string"
    on_error: str = "fail"  # one of ON_ERROR
    create_partitions: int | None = None  # a missing topic is created with this many partitions


@dataclass
class ProduceResult:
    topic: str
    written: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    per_partition: dict[int, int] = field(default_factory=dict)
    created_partitions: int | None = None  # the topic was created first, with this many


# formats whose text lines are the bytes to send, unchanged
BINARY_SAFE = ("string", "bytes", "raw")


@dataclass(frozen=True)
class FieldEncoders:
    """How keys and values become bytes: by format name, or schema-aware (kstool.schemas)."""

    key: FieldEncoder
    value: FieldEncoder

    @classmethod
    def plain(cls, options: ProduceOptions) -> "FieldEncoders":
        return cls(plain_encoder(options.key_format), plain_encoder(options.value_format))


def _text_parser(options: ProduceOptions, encoders: FieldEncoders) -> Callable[[bytes], Record]:
    delim = options.key_delimiter.encode("utf-8") if options.key_delimiter is not None else None

    def encoded(data: bytes, fmt: str, encode: FieldEncoder) -> bytes | None:
        if fmt in BINARY_SAFE:
            return data
        text = data.decode("utf-8")
        if fmt in SCHEMA_FORMATS:  # the line is the record as JSON
            try:
                return encode(json.loads(text), None)
            except json.JSONDecodeError as exc:
                raise EncodeError(f"not valid JSON ({exc})") from None
        return encode(text, None)

    def parse(line: bytes) -> Record:
        key: bytes | None = None
        body = line
        if delim is not None and delim in body:  # no delimiter: a null key, as kcat -K does
            raw_key, body = body.split(delim, 1)
            key = encoded(raw_key, options.key_format, encoders.key)
        return Record(options.topic, None, None, None, key, encoded(body, options.value_format, encoders.value))
    return parse


def _jsonl_parser(encoders: FieldEncoders) -> Callable[[bytes], Record]:
    def parse(line: bytes) -> Record:
        try:
            return from_envelope(line.decode("utf-8"), encoders.key, encoders.value)
        except UnicodeDecodeError:
            raise EnvelopeError("not valid UTF-8") from None
    return parse


def _lines(stream: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    for lineno, line in enumerate(stream, 1):
        yield lineno, line.rstrip(b"\n").rstrip(b"\r")


def _fixed_key(options: ProduceOptions, encoders: FieldEncoders) -> bytes | None:
    if options.key is None:
        return None
    try:
        key = json.loads(options.key) if options.key_format in SCHEMA_FORMATS else options.key
        return encoders.key(key, None)
    except ValueError as exc:  # EncodeError, or --key not JSON
        raise UsageError(f"--key {options.key!r} is not a valid {options.key_format}: {exc}") from None


def _partitions(clients: KafkaClients, options: ProduceOptions, result: ProduceResult) -> list[int]:
    """The topic's partitions; a missing topic is created when asked (--create), else the error
    says how to make it."""
    try:
        return clients.topic_partitions(options.topic)
    except TopicNotFoundError:
        if options.create_partitions is None:
            raise NotFoundError(f"topic {options.topic!r} does not exist: add --create [--partitions N] to "
                                f"make it, or run `kstool topics create {options.topic}`") from None
    if ensure_topic(clients, CreateTopicOptions(options.topic, options.create_partitions)):
        result.created_partitions = options.create_partitions
    deadline = time.monotonic() + clients.timeout
    while True:  # a broker's metadata may show a new topic a moment after creating it
        try:
            return clients.topic_partitions(options.topic)
        except TopicNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _as_they_are(clients: KafkaClients, options: ProduceOptions) -> bool:
    """Each text line is a record as it is, stamped as it is sent and with no headers (which
    librdkafka's batch call cannot give), nor the tail profile: written a batch at a time."""
    return (options.input_format == "text" and options.key_format in BINARY_SAFE
            and options.value_format in BINARY_SAFE and not options.headers and options.timestamp is None
            and not clients.config.single_record_tail)


def produce_lines(clients: KafkaClients, options: ProduceOptions, stream: IO[bytes],
                  encoders: FieldEncoders | None = None) -> ProduceResult:
    """Write one record per input line, in batches. With on_error=fail the first bad line stops
    the run: every record before it is written (and flushed), nothing from it on."""
    encoders = encoders or FieldEncoders.plain(options)
    if options.input_format not in INPUT_FORMATS:
        raise UsageError(f"unknown input format {options.input_format!r}")
    result = ProduceResult(options.topic)
    partitions = _partitions(clients, options, result)
    clients.require_allowed([options.topic], "WRITE")  # refused now, not line by line
    if options.partition is not None:
        require_partitions(options.topic, [options.partition], partitions)
    parse = _text_parser(options, encoders) if options.input_format == "text" else _jsonl_parser(encoders)
    fixed_key = _fixed_key(options, encoders)
    headers = [(k, v.encode("utf-8")) for k, v in options.headers]
    # a write refused while replicas are down (NOT_ENOUGH_REPLICAS) is retried until its
    # timeout: long enough to ride out a leader's election, not librdkafka's 5 minutes
    patience: dict[str, Any] = {} if "message.timeout.ms" in clients.config.producer_conf() else {
        "message.timeout.ms": int(1000 * max(clients.timeout, WRITE_PATIENCE_S))}
    lines = LineBatches(options.topic, len(partitions), options.partition,
                        None if options.key_delimiter is None else options.key_delimiter.encode("utf-8"),
                        fixed_key) if _as_they_are(clients, options) else None
    writer = BulkWriter(clients, {options.topic: len(partitions)}, errors_only=lines is not None,
                        locate=lines.locate if lines is not None else None, **patience)

    def flush(written_before: int = 0) -> int:
        """Delivered since the last flush; else an error that says why, counting what earlier
        flushes delivered."""
        try:
            return writer.flush(written_before=written_before)
        except KafkaOperationError as failed:
            why = write_blockers(clients, options.topic)
            if "Invalid timestamp" in str(failed):
                why = timestamp_bounds(clients, options.topic)
            raise KafkaOperationError(f"{failed}; {why}" if why else str(failed)) from None

    def finish() -> None:
        try:
            flush(lines.written if lines is not None else 0)
        finally:
            result.per_partition = ({p: n for (_, p), n in sorted(writer.per_partition.items())} if lines is None
                                    else dict(sorted(lines.per_partition.items())))
            result.written = sum(result.per_partition.values())

    try:
        if lines is not None:
            lines.write(writer, stream, flush)
            finish()
            return result
        for lineno, line in _lines(stream):
            if options.input_format == "jsonl" and not line.strip():
                continue
            try:
                record = parse(line)
                partition = options.partition if options.partition is not None else record.partition
                if partition is not None:
                    require_partitions(options.topic, [partition], partitions)
            except (EncodeError, EnvelopeError, UsageError, UnicodeDecodeError) as exc:
                reason = str(exc) if not isinstance(exc, UnicodeDecodeError) else "not valid UTF-8"
                if options.on_error == "skip":
                    result.skipped.append({"line": lineno, "error": reason})
                    continue
                finish()
                raise BadInputLine(
                    f"line {lineno}: {reason}; {result.written} record(s) before it were written, "
                    "none from this line on") from None
            timestamp = record.timestamp if record.timestamp is not None else options.timestamp
            writer.send(options.topic, fixed_key if fixed_key is not None else record.key, record.value,
                        timestamp, headers + record.headers or None, partition, ref=f"line {lineno}")
        finish()
    except KafkaException as exc:
        raise clients.translate(exc) from None
    return result
