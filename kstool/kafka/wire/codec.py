"""Kafka's wire encoding, for kstool's own client: strings, arrays and varints, in the classic
form and in flexible versions' compact one (KIP-482), and a reader of answers."""

from __future__ import annotations

import struct
from typing import Any, Callable


def encode_string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def encode_bytes(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint(value: int) -> bytes:
    """A signed varint (zigzag), as record batches carry lengths and deltas."""
    return uvarint((value << 1) ^ (value >> 63))


def compact_string(value: str | None) -> bytes:
    """A flexible version's string (KIP-482): its length + 1 as an unsigned varint, 0 for null."""
    if value is None:
        return uvarint(0)
    raw = value.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\0"  # a flexible structure's empty tagged fields


class Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str | None:
        length = self.uvarint() - 1
        if length < 0:
            return None
        value = self.data[self.pos:self.pos + length].decode("utf-8")
        self.pos += length
        return value

    def compact_array(self, item: Callable[[], Any]) -> list[Any] | None:
        count = self.uvarint() - 1
        return None if count < 0 else [item() for _ in range(count)]

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.pos += self.uvarint()

    def take(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value[0]

    def string(self) -> str | None:
        length = self.take(">h")
        if length < 0:
            return None
        value = self.data[self.pos:self.pos + length].decode("utf-8")
        self.pos += length
        return value

    def bytes(self) -> bytes:
        length = self.take(">i")
        value = self.data[self.pos:self.pos + max(length, 0)]
        self.pos += max(length, 0)
        return value
