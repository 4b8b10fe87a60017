"""Produce records from lines of text or jsonl envelopes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from confluent_kafka import KafkaException

from kstool.errors import UsageError
from kstool.kafka.bulk import BulkWriter
from kstool.kafka.client import KafkaClients, require_partitions
from kstool.kafka.exceptions import BadInputLine, EnvelopeError
from kstool.kafka.records import Record, from_envelope
from kstool.serdes import EncodeError, encoder

INPUT_FORMATS = ("text", "jsonl")  # a record per text line | `consume -o jsonl` envelopes
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


@dataclass
class ProduceResult:
    topic: str
    written: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    per_partition: dict[int, int] = field(default_factory=dict)


# formats whose text lines are the bytes to send, unchanged
BINARY_SAFE = ("string", "bytes", "raw")


def _text_parser(options: ProduceOptions) -> Callable[[bytes], Record]:
    encode_key = encoder(options.key_format)
    encode_value = encoder(options.value_format)
    binary_safe = options.value_format in BINARY_SAFE
    delim = options.key_delimiter.encode("utf-8") if options.key_delimiter is not None else None

    def parse(line: bytes) -> Record:
        key: bytes | None = None
        body = line
        if delim is not None and delim in body:  # no delimiter: a null key, as kcat -K does
            raw_key, body = body.split(delim, 1)
            key = raw_key if options.key_format in BINARY_SAFE else encode_key(raw_key.decode("utf-8"))
        value = body if binary_safe else encode_value(body.decode("utf-8"))
        return Record(options.topic, None, None, None, key, value)
    return parse


def _jsonl_parser(options: ProduceOptions) -> Callable[[bytes], Record]:
    def parse(line: bytes) -> Record:
        try:
            return from_envelope(line.decode("utf-8"), options.key_format, options.value_format)
        except UnicodeDecodeError:
            raise EnvelopeError("not valid UTF-8") from None
    return parse


def _lines(stream: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    for lineno, line in enumerate(stream, 1):
        yield lineno, line.rstrip(b"\n").rstrip(b"\r")


def _fixed_key(options: ProduceOptions) -> bytes | None:
    if options.key is None:
        return None
    try:
        return encoder(options.key_format)(options.key)
    except EncodeError as exc:
        raise UsageError(f"--key {options.key!r} is not a valid {options.key_format}: {exc}") from None


def produce_lines(clients: KafkaClients, options: ProduceOptions, stream: Iterable[bytes]) -> ProduceResult:
    """Write one record per input line, in batches. With on_error=fail the first bad line stops
    the run: every record before it is written (and flushed), nothing from it on."""
    if options.input_format not in INPUT_FORMATS:
        raise UsageError(f"unknown input format {options.input_format!r}")
    partitions = clients.topic_partitions(options.topic)
    if options.partition is not None:
        require_partitions(options.topic, [options.partition], partitions)
    parse = _text_parser(options) if options.input_format == "text" else _jsonl_parser(options)
    fixed_key = _fixed_key(options)
    headers = [(k, v.encode("utf-8")) for k, v in options.headers]
    result = ProduceResult(options.topic)
    writer = BulkWriter(clients, {options.topic: len(partitions)})

    def finish() -> None:
        try:
            writer.flush()
        finally:
            result.per_partition = {p: n for (_, p), n in sorted(writer.per_partition.items())}
            result.written = sum(result.per_partition.values())

    try:
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

