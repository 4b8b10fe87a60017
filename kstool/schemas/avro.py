"""Avro payloads with fastavro: binary to JSON-able values and back. Bytes and fixed values
travel as strings of their ISO-8859-1 code points, as Avro's own JSON encoding writes them, so a
decoded record encodes back to the same bytes."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro

from kstool.schemas.exceptions import SchemaError, SchemaFileError


class AvroCodec:
    def __init__(self, schema_str: str, origin: str = "the schema"):
        self.schema_str = schema_str
        try:
            self.schema = fastavro.parse_schema(json.loads(schema_str))
        except Exception as exc:  # not JSON, or fastavro's UnknownType, SchemaParseException, ...
            raise SchemaFileError(f"{origin}: not an Avro schema ({exc})") from None

    def decode(self, payload: bytes, framed: bool = True) -> Any:
        """framed: the payload followed a wire-format header (no difference for Avro)."""
        buffer = io.BytesIO(payload)
        try:
            value = fastavro.schemaless_reader(buffer, self.schema, None)
        except Exception as exc:  # fastavro raises EOFError, ValueError, ... on bad bytes
            raise SchemaError(f"not Avro of this schema ({type(exc).__name__}: {exc})") from None
        if buffer.tell() != len(payload):
            raise SchemaError(f"not Avro of this schema ({len(payload) - buffer.tell()} bytes left over)")
        return _to_json(value)

    def encode(self, value: Any, framed: bool = True) -> bytes:
        buffer = io.BytesIO()
        try:
            fastavro.schemaless_writer(buffer, self.schema, _from_json(value, self.schema))
        except Exception as exc:
            raise SchemaError(f"does not match the Avro schema ({type(exc).__name__}: {exc})") from None
        return buffer.getvalue()


def _to_json(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any, schema: Any) -> Any:
    """Strings back to bytes where the schema says bytes or fixed."""
    if isinstance(schema, str):
        return value.encode("latin-1") if schema == "bytes" and isinstance(value, str) else value
    if isinstance(schema, list):  # a union: the first branch the value fits
        for branch in schema:
            if fastavro.validation.validate(_from_json(value, branch), branch, raise_errors=False):
                return _from_json(value, branch)
        return value
    kind = schema.get("type")
    if kind == "fixed" and isinstance(value, str):
        return value.encode("latin-1")
    if kind == "record" and isinstance(value, dict):
        return {f["name"]: _from_json(value.get(f["name"]), f["type"]) for f in schema["fields"]
                if f["name"] in value}
    if kind == "array" and isinstance(value, list):
        return [_from_json(v, schema["items"]) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: _from_json(v, schema["values"]) for k, v in value.items()}
    if isinstance(kind, (dict, list)) or kind == "bytes":
        return _from_json(value, kind)
    return value
