"""Kafka Streams' suppression buffer changelog (`<app>-<name>-store-changelog` of a
`suppress()`), whose records carry the header v=3: the value is a BufferValue
(ProcessorRecordContext.serialize: timestamp(8) ‖ offset(8) ‖ topic(len 4 + UTF-8) ‖
partition(4) ‖ headers(count 4, each key(len 4 + UTF-8) ‖ value(len 4 or -1 + bytes));
then prior ‖ old ‖ new values (len 4 or -1 + bytes; old -2: the same as prior); then the
buffer time(8), the time the record leaves the buffer (InMemoryTimeOrderedKeyValueChangelogBuffer)."""

from __future__ import annotations

import struct
from typing import Any, Callable

FORMAT_PREFIX = "suppress-buffer"
HEADER = ("v", b"\x03")
_LONG, _INT = struct.Struct(">q"), struct.Struct(">i")
_NULL, _SAME_AS_PRIOR = -1, -2


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def int64(self) -> int:
        (value,) = _LONG.unpack_from(self.data, self.pos)
        self.pos += _LONG.size
        return value

    def int32(self) -> int:
        (value,) = _INT.unpack_from(self.data, self.pos)
        self.pos += _INT.size
        return value

    def sized(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError("a length past the end")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def nullable(self) -> bytes | None:
        size = self.int32()
        return None if size == _NULL else self.sized(size)


def parse(data: bytes) -> dict[str, Any]:
    """The parts of one buffered value; ValueError or struct.error when the bytes are not one."""
    read = _Reader(data)
    timestamp, offset = read.int64(), read.int64()
    topic = read.sized(read.int32()).decode("utf-8")
    partition = read.int32()
    headers = [(read.sized(read.int32()).decode("utf-8"), read.nullable()) for _ in range(read.int32())]
    prior = read.nullable()
    old_size = read.int32()
    old = prior if old_size == _SAME_AS_PRIOR else None if old_size == _NULL else read.sized(old_size)
    new = read.nullable()
    buffer_time = read.int64()
    if read.pos != len(data):
        raise ValueError("bytes left over")
    return {"buffer_time": buffer_time, "prior": prior, "old": old, "new": new,
            "record": {"timestamp": timestamp, "topic": topic, "partition": partition, "offset": offset,
                       "headers": headers}}


def value_decoder(inner: Callable[[bytes | None], tuple[Any, bool]]) -> Callable[[bytes | None], tuple[Any, bool]]:
    """`suppress-buffer:FMT`: the buffered change, its values decoded with FMT."""
    def decode(data: bytes | None) -> tuple[Any, bool]:
        if data is None:
            return None, True
        try:
            parts = parse(data)
        except (ValueError, struct.error, UnicodeDecodeError):
            return {"hex": data.hex()}, False
        decoded = {name: inner(parts[name]) for name in ("new", "old", "prior")}
        record = parts["record"]
        record["headers"] = [[name, None if value is None else value.decode("utf-8", "replace")]
                             for name, value in record["headers"]]
        return ({"value": decoded["new"][0], "old_value": decoded["old"][0], "prior_value": decoded["prior"][0],
                 "buffer_time": parts["buffer_time"], "record": record},
                all(ok for _, ok in decoded.values()))
    return decode


def is_buffer(sample_headers: list[list[tuple[str, bytes | None]]]) -> bool:
    """Every sampled record carries the buffer's header."""
    return bool(sample_headers) and all(HEADER in headers for headers in sample_headers)


def new_values(values: list[bytes | None]) -> list[bytes | None]:
    """The buffered values themselves, to detect their format."""
    out = []
    for value in values:
        try:
            out.append(None if value is None else parse(value)["new"])
        except (ValueError, struct.error, UnicodeDecodeError):
            continue
    return out
