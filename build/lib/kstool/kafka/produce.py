"""Produce records from lines of text or jsonl envelopes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from confluent_kafka import KafkaException

from kstool.errors import KstoolError, UsageError
from kstool.kafka.client import KafkaClients, produce
from kstool.kafka.exceptions import KafkaOperationError
from kstool.kafka.records import EnvelopeError, Record, from_envelope
from kstool.serdes import EncodeError, encoder


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
    on_error: str = "fail"  # fail | skip


@dataclass
class ProduceResult:
    topic: str
    written: int = 0
    skipped: list[dict] = field(default_factory=list)
    per_partition: dict[int, int] = field(default_factory=dict)


class BadInputLine(KstoolError):
    pass


def _text_parser(options: ProduceOptions) -> Callable[[bytes], Record]:
    encode_key = encoder(options.key_format)
    encode_value = encoder(options.value_format)
    binary_safe = options.value_format in ("string", "bytes")

    def parse(line: bytes) -> Record:
        key: bytes | None = None
        body = line
        if options.key_delimiter is not None:
            delim = options.key_delimiter.encode("utf-8")
            if delim not in body:
                raise EncodeError(f"no key delimiter {options.key_delimiter!r} in line")
            raw_key, body = body.split(delim, 1)
            key = raw_key if options.key_format in ("string", "bytes") else encode_key(raw_key.decode("utf-8"))
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


def produce_lines(clients: KafkaClients, options: ProduceOptions, stream: Iterable[bytes]) -> ProduceResult:
    """Write one record per input line. With on_error=fail the first bad line stops the run:
    every record before it is written (and flushed), nothing from it on."""
    if options.input_format not in ("text", "jsonl"):
        raise UsageError(f"unknown input format {options.input_format!r}")
    partitions = clients.topic_partitions(options.topic)
    parse = _text_parser(options) if options.input_format == "text" else _jsonl_parser(options)
    fixed_key = encoder(options.key_format)(options.key) if options.key is not None else None
    headers = [(k, v.encode("utf-8")) for k, v in options.headers]
    result = ProduceResult(options.topic)
    failures: list[str] = []

    def delivered(err, msg):
        if err is not None:
            failures.append(err.str())
        else:
            result.written += 1
            result.per_partition[msg.partition()] = result.per_partition.get(msg.partition(), 0) + 1

    producer = clients.producer()
    try:
        for lineno, line in _lines(stream):
            if options.input_format == "jsonl" and not line.strip():
                continue
            try:
                record = parse(line)
                partition = options.partition if options.partition is not None else record.partition
                if partition is not None and partition not in partitions:
                    raise EncodeError(f"partition {partition} does not exist "
                                      f"(topic has {len(partitions)})")
            except (EncodeError, EnvelopeError, UnicodeDecodeError) as exc:
                reason = str(exc) if not isinstance(exc, UnicodeDecodeError) else "not valid UTF-8"
                if options.on_error == "skip":
                    result.skipped.append({"line": lineno, "error": reason})
                    continue
                producer.flush(clients.timeout)
                raise BadInputLine(
                    f"line {lineno}: {reason}; {result.written} record(s) before it were written, "
                    "none from this line on") from None
            _send(producer, options, record, fixed_key, headers, partition, delivered)
        remaining = producer.flush(max(clients.timeout, 30))
    except KafkaException as exc:
        raise clients.translate(exc) from None
    if remaining or failures:
        raise KafkaOperationError(
            f"{result.written} record(s) written; {len(failures) + remaining} not delivered "
            f"({failures[0] if failures else 'flush timed out'})")
    return result


def _send(producer, options: ProduceOptions, record: Record, fixed_key, headers, partition, cb) -> None:
    kwargs = {"value": record.value, "key": fixed_key if fixed_key is not None else record.key,
              "headers": headers + record.headers or None, "on_delivery": cb}
    timestamp = record.timestamp if record.timestamp is not None else options.timestamp
    if timestamp is not None:
        kwargs["timestamp"] = timestamp
    if partition is not None:
        kwargs["partition"] = partition
    produce(producer, options.topic, **kwargs)
    producer.poll(0)
