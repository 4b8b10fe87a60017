"""Kafka's standard serde encodings, as decoders (bytes -> JSON-able value) and encoders
(user value -> bytes). Long = 8-byte big-endian, Integer = 4-byte, Double = IEEE-754 8-byte,
String = UTF-8; `number`, kstool's own (an aggregate's `--value-format auto`), is a Long for a
whole number and a Double otherwise. Bytes a decoder cannot represent become {"base64": ...}:
never mangled.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import dataclass
from typing import Any, Callable

from kstool.base.errors import UsageError

FORMATS = ("string", "bytes", "hex", "base64", "json", "long", "int", "double", "number")
# produce and consume also take `raw`: the bytes as they are, kcat's default (a decoded raw value
# is bytes, so structured outputs show it as {"base64": ...})
RECORD_FORMATS = (*FORMATS, "raw")
# formats that need a schema (kstool.schemas): from a registry, or a local file
SCHEMA_FORMATS = ("avro", "protobuf", "jsonschema")

# encodes a field's value; the schema id comes from a decoded record (None: the encoder's own)
FieldEncoder = Callable[[Any, int | None], bytes | None]


@dataclass(frozen=True)
class WithSchemaId:
    """A decoded value and the schema id its record's wire-format header named."""

    value: Any
    schema_id: int | None


class EncodeError(ValueError):
    """A user value does not fit the chosen encoding."""


def raw(data: bytes) -> dict[str, Any]:
    return {"base64": base64.b64encode(data).decode("ascii")}


def is_raw(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"base64"} and isinstance(value["base64"], str)


def unraw(value: dict[str, Any]) -> bytes:
    try:
        return base64.b64decode(value["base64"], validate=True)
    except (binascii.Error, ValueError):  # ValueError: non-ASCII text
        raise EncodeError("invalid base64 in {\"base64\": ...}") from None


def as_text(value: Any) -> str:
    """A decoded value as text (to match it against what a user typed): text as it is, bytes
    as UTF-8, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _decode_string(data: bytes) -> Any:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return raw(data)


def _decode_json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return raw(data)


def _fixed(fmt: str, size: int) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        return struct.unpack(fmt, data)[0] if len(data) == size else raw(data)
    return decode


def decode_number(data: bytes) -> int | float:
    """kstool's `number` (8 bytes): a Long where the bits read as one of |v| < 2^52 (the 12 high
    bits all equal: as a Double that is a subnormal, or NaN or infinite, which no aggregate
    writes), else a Double."""
    high = data[0] << 4 | data[1] >> 4
    number: int | float = struct.unpack(">q" if high in (0, 0xFFF) else ">d", data)[0]
    return number


def _decode_number(data: bytes) -> Any:
    return decode_number(data) if len(data) == 8 else raw(data)


def _encode_number(value: Any) -> bytes:
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        value = int(value)
    whole = isinstance(value, int) and not isinstance(value, bool)
    return (_pack(">q", int) if whole else _pack(">d", float))(value)


DECODERS: dict[str, Callable[[bytes], Any]] = {
    "string": _decode_string,
    "bytes": raw,
    "hex": lambda data: data.hex(),
    "base64": lambda data: base64.b64encode(data).decode("ascii"),
    "json": _decode_json,
    "long": _fixed(">q", 8),
    "int": _fixed(">i", 4),
    "double": _fixed(">d", 8),
    "number": _decode_number,
    "raw": lambda data: data,
}


def _number(value: Any, kind: type) -> Any:
    if isinstance(value, bool):
        raise EncodeError(f"expected a number, got {value!r}")
    try:
        return kind(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise EncodeError(f"expected {'an integer' if kind is int else 'a number'}, got {value!r}") from None


def _pack(fmt: str, kind: type) -> Callable[[Any], bytes]:
    def encode(value: Any) -> bytes:
        try:
            return struct.pack(fmt, _number(value, kind))
        except struct.error:
            raise EncodeError(f"{value!r} is out of range for this encoding") from None
    return encode


def _encode_text(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else json.dumps(value).encode("utf-8")


def _encode_json(value: Any) -> bytes:
    if isinstance(value, str):  # text input: must already be JSON
        try:
            value = json.loads(value)
        except ValueError:
            raise EncodeError(f"not valid JSON: {value[:60]!r}") from None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _encode_hex(value: Any) -> bytes:
    try:
        return bytes.fromhex(str(value))
    except ValueError:
        raise EncodeError(f"not valid hex: {str(value)[:60]!r}") from None


def _encode_base64(value: Any) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):  # ValueError: non-ASCII text
        raise EncodeError(f"not valid base64: {str(value)[:60]!r}") from None


ENCODERS: dict[str, Callable[[Any], bytes]] = {
    "string": _encode_text,
    "bytes": _encode_text,
    "hex": _encode_hex,
    "base64": _encode_base64,
    "json": _encode_json,
    "long": _pack(">q", int),
    "int": _pack(">i", int),
    "double": _pack(">d", float),
    "number": _encode_number,
    "raw": _encode_text,
}


def _known(name: str) -> None:
    if name in SCHEMA_FORMATS:
        raise UsageError(f"format {name!r} needs a schema, and this command takes none")
    if name not in DECODERS:
        raise UsageError(f"unknown format {name!r}; choose from {', '.join(FORMATS)}")


def decoder(name: str) -> Callable[[bytes | None], Any]:
    _known(name)
    inner = DECODERS[name]
    return lambda data: None if data is None else inner(data)


def encoder(name: str) -> Callable[[Any], bytes | None]:
    """Encodes a value; None stays None (a null key or a tombstone) and {"base64"} is raw bytes."""
    _known(name)
    inner = ENCODERS[name]

    def encode(value: Any) -> bytes | None:
        if value is None:
            return None
        if is_raw(value):
            return unraw(value)
        return inner(value)
    return encode


def plain_encoder(name: str) -> FieldEncoder:
    """encoder(name) as a FieldEncoder (a plain format has no schema id to use)."""
    encode = encoder(name)
    return lambda value, schema_id: encode(value)
