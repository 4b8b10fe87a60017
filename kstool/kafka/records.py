"""Records as kstool moves them, and the jsonl envelope `consume -o jsonl` writes and
`produce --format jsonl` / `replay --from-file` read back:

    {"topic", "partition", "offset", "timestamp" (epoch ms), "timestamp_type",
     "key", "value", "headers": [[name, value], ...]}

Keys, values and header values are decoded with the chosen serde; bytes it cannot represent
are {"base64": "..."}; null stays null. Keys and values decoded with a schema add
"key_schema_id" / "value_schema_id" (as kcat -J does), which produce uses to encode them back to
the same bytes. A dead letter (Kafka Streams' KIP-1034 headers) adds "dead_letter": {"exception",
"message", "topic", "partition", "offset"}, read from its headers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

from kstool.base.serdes import EncodeError, FieldEncoder, WithSchemaId, decoder, encoder, plain_encoder
from kstool.kafka.dead_letters import DeadLetter
from kstool.kafka.exceptions import EnvelopeError

if TYPE_CHECKING:  # its ~50 TypedDicts take ~30 ms to build, in every Spark source process that imports this
    from kstool.base.documents import RecordEnvelope

TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


@dataclass
class Record:
    topic: str | None
    partition: int | None
    offset: int | None
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_type: str = "CreateTime"

    @classmethod
    def from_message(cls, msg: Message, position: tuple[str, int, int] | None = None) -> "Record":
        """position: the message's, when the caller has it already."""
        ts_type, ts = msg.timestamp()
        topic, partition, offset = position or position_of(msg)
        headers: list[tuple[str, bytes | None]] = msg.headers() or []  # type: ignore[assignment]  # a list of its own
        return cls(topic, partition, offset, ts if ts_type else None, msg.key(), msg.value(), headers,
                   TIMESTAMP_TYPES.get(ts_type, "NoTimestampType"))


_decode_header = decoder("string")


def to_envelope(record: Record, decode_key: Callable[[bytes | None], Any],
                decode_value: Callable[[bytes | None], Any]) -> RecordEnvelope:
    key, value = decode_key(record.key), decode_value(record.value)
    envelope: RecordEnvelope = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": record.timestamp_type,
        "key": key.value if isinstance(key, WithSchemaId) else key,
        "value": value.value if isinstance(value, WithSchemaId) else value,
        "headers": [[name, _decode_header(data)] for name, data in record.headers],
    }
    if isinstance(key, WithSchemaId):
        envelope["key_schema_id"] = key.schema_id
    if isinstance(value, WithSchemaId):
        envelope["value_schema_id"] = value.schema_id
    dead_letter = DeadLetter.of(record.headers) if record.headers else None
    if dead_letter is not None:
        envelope["dead_letter"] = dead_letter.to_dict()
    return envelope


def from_envelope(line: str, encode_key: FieldEncoder = plain_encoder("string"),
                  encode_value: FieldEncoder = plain_encoder("string")) -> Record:
    """Parse one jsonl line back into a record; topic and offset are informational only."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise EnvelopeError(f"not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise EnvelopeError("expected a JSON object")
    try:
        key = encode_key(obj.get("key"), _optional_int(obj, "key_schema_id"))
        value = encode_value(obj.get("value"), _optional_int(obj, "value_schema_id"))
        headers = [_header(h) for h in obj.get("headers") or []]
    except EncodeError as exc:
        raise EnvelopeError(str(exc)) from None
    partition = _optional_int(obj, "partition")
    timestamp = _optional_int(obj, "timestamp")
    return Record(obj.get("topic"), partition, None, timestamp, key, value, headers)


def _header(item: Any) -> tuple[str, bytes | None]:
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
        raise EncodeError("headers must be [[name, value], ...]")
    return item[0], encoder("string")(item[1])


def _optional_int(obj: dict[str, Any], name: str) -> int | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EnvelopeError(f'"{name}" must be a non-negative integer, got {value!r}')
    return value


def position_of(msg: Message) -> tuple[str, int, int]:
    """(topic, partition, offset) of a fetched record or end-of-partition event (librdkafka's
    types allow None only for messages that were never fetched)."""
    return msg.topic(), msg.partition(), msg.offset()  # type: ignore[return-value]  # cast() costs a call per record
