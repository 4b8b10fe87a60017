"""The Confluent wire format: magic byte 0, the schema id as a 4-byte big-endian int, then the
payload (Avro binary, JSON, or Protobuf message indexes and message)."""

from __future__ import annotations

import struct

from kstool.schemas.exceptions import SchemaError

MAGIC = 0
_HEADER = struct.Struct(">bI")


def has_header(data: bytes) -> bool:
    return len(data) >= _HEADER.size and data[0] == MAGIC


def split(data: bytes) -> tuple[int, bytes]:
    """(schema id, payload) of a framed record."""
    if not has_header(data):
        first = f"0x{data[0]:02x}" if data else "nothing"
        raise SchemaError(f"no schema registry header (magic byte 0 and a schema id): starts with {first}")
    _, schema_id = _HEADER.unpack_from(data)
    return schema_id, data[_HEADER.size:]


def frame(schema_id: int, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, schema_id) + payload
