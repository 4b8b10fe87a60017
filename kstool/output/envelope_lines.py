"""`consume -o jsonl` for whole batches of fetched messages (confluent-kafka's): each line the
envelope of kstool.kafka.records.to_envelope (its one definition) as dumps() writes it, made
straight from the message without the Record, the dict and the encoder's walk over it: 0.9-1.3
µs a record rendered instead of 4.2-4.5 (bench/notes/one-liners.md). Only where keys and values are shown
as text or as raw bytes and no record has headers (whose values, and a dead letter's, the
envelope decodes); any other batch is rendered envelope by envelope. Byte for byte the same
(tests/test_output.py)."""

from __future__ import annotations

import base64
from json.encoder import encode_basestring  # the encoder of dumps (ensure_ascii=False), in C
from typing import Any, Callable, Sequence

from kstool.kafka.records import TIMESTAMP_TYPES


def _base64(data: bytes) -> str:
    return '{"base64":"' + base64.b64encode(data).decode("ascii") + '"}'


def _text_or_base64(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        return encode_basestring(data.decode("utf-8"))
    except UnicodeDecodeError:
        return _base64(data)


def _raw(data: bytes | None) -> str:
    return "null" if data is None else _base64(data)


_FIELD = {"string": _text_or_base64, "raw": _raw}  # raw: the bytes, as {"base64": ...} in an envelope
_TIMESTAMP_TYPES = {kind: f'"{name}"' for kind, name in TIMESTAMP_TYPES.items()}
_NO_TIMESTAMP_TYPE = '"NoTimestampType"'


def compile_batch_jsonl(key_format: str, value_format: str) -> Callable[[Sequence[Any]], bytes | None] | None:
    """What a batch renders to (None: render it envelope by envelope), or None when a format is
    neither `string` nor `raw`."""
    if key_format not in _FIELD or value_format not in _FIELD:
        return None
    key_json, value_json = _FIELD[key_format], _FIELD[value_format]
    topics: dict[str, str] = {}

    def render(messages: Sequence[Any]) -> bytes | None:
        lines = []
        for m in messages:
            if m.headers() is not None:
                return None
            topic = m.topic()
            if topic not in topics:
                topics[topic] = encode_basestring(topic)
            ts_type, ts = m.timestamp()
            lines.append(f'{{"topic":{topics[topic]},"partition":{m.partition()},"offset":{m.offset()},'
                         f'"timestamp":{ts if ts_type else "null"},'
                         f'"timestamp_type":{_TIMESTAMP_TYPES.get(ts_type, _NO_TIMESTAMP_TYPE)},'
                         f'"key":{key_json(m.key())},"value":{value_json(m.value())},"headers":[]}}\n')
        return "".join(lines).encode("utf-8")
    return render
