"""JSON Schema payloads: JSON text, checked against its schema (the jsonschema library). Encoded
compactly, keys in the order given, as Confluent's serializers (Java's Jackson, Python's) write
it, so their records encode back to the same bytes."""

from __future__ import annotations

import json
from typing import Any

from kstool.schemas.exceptions import SchemaError, SchemaFileError


class JsonSchemaCodec:
    def __init__(self, schema_str: str, origin: str = "the schema"):
        import jsonschema

        self.schema_str = schema_str
        try:
            schema = json.loads(schema_str)
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
        except (ValueError, jsonschema.SchemaError) as exc:
            raise SchemaFileError(f"{origin}: not a JSON Schema ({str(exc).splitlines()[0]})") from None
        self._validator = cls(schema)

    def _check(self, value: Any, what: str) -> None:
        error = next(iter(self._validator.iter_errors(value)), None)
        if error is not None:
            where = "/".join(map(str, error.absolute_path)) or "the document"
            raise SchemaError(f"{what} the JSON Schema (at {where}: {error.message})")

    def decode(self, payload: bytes, framed: bool = True) -> Any:
        try:
            value = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise SchemaError(f"not JSON ({exc})") from None
        self._check(value, "does not match")
        return value

    def encode(self, value: Any, framed: bool = True) -> bytes:
        self._check(value, "does not match")
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
