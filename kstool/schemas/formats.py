"""Keys and values with schemas, for the commands that read and write records: decoders that
give the value and the schema id its header named (kstool.base.serdes.WithSchemaId), and encoders
that write a decoded value back to the same bytes.

Schemas come from a Schema Registry (by the id in each record's header, cached for the command)
or from a local file (--key-schema / --value-schema). Records carry the Confluent wire-format
header unless `framed` is off (bare payloads, e.g. written by a serializer without a registry)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from kstool.base.errors import UsageError
from kstool.base.serdes import SCHEMA_FORMATS, EncodeError, FieldEncoder, WithSchemaId, decoder, plain_encoder
from kstool.schemas import wire
from kstool.schemas.avro import AvroCodec
from kstool.schemas.exceptions import RegistryError, SchemaError, SchemaFileError
from kstool.schemas.json_schema import JsonSchemaCodec
from kstool.schemas.protobuf import ProtobufCodec
from kstool.schemas.registry import Registry
from kstool.schemas.windowed import WindowedDecoder, split_format, windowed_encoder

SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "jsonschema": "JSON"}  # the registry's names
CODECS: dict[str, Callable[[str, str], Codec]] = {"avro": AvroCodec, "protobuf": ProtobufCodec,
                                                  "jsonschema": JsonSchemaCodec}
FILE_SUFFIXES = {"avro": (".avsc", ".json"), "protobuf": (".proto",), "jsonschema": (".json",)}


@dataclass(frozen=True)
class SchemaOptions:
    registry: dict[str, str] = field(default_factory=dict)  # SchemaRegistryClient settings; {}: none
    key_schema: str | None = None  # local schema files
    value_schema: str | None = None
    framed: bool = True  # records carry the wire-format header (magic byte, schema id)
    register: bool = False  # produce: register a file's schema under its subject if it is new
    value_schema_text: str | None = None  # the value schema file's text, read where it is (executors may lack it)

    def with_texts(self) -> "SchemaOptions":
        """The value schema file read now, for a process elsewhere."""
        if self.value_schema is None or self.value_schema_text is not None:
            return self
        return dataclasses.replace(self, value_schema_text=_read_text(self.value_schema))


class Codec(Protocol):
    schema_str: str

    def decode(self, payload: bytes, framed: bool = True) -> Any: ...

    def encode(self, value: Any, framed: bool = True) -> bytes: ...


def schemas_for(formats: dict[str, str], options: SchemaOptions) -> "Schemas | None":
    """The command's schemas when one of its formats needs them; formats: {"key": ..., "value": ...}
    (a windowed key's schema is its inner key's)."""
    inner = {part: split_format(fmt)[1] for part, fmt in formats.items()}
    return Schemas(options, inner) if any(f in SCHEMA_FORMATS for f in inner.values()) else None


class Schemas:
    """One command's schemas: the registry client and the local files, each parsed once."""

    def __init__(self, options: SchemaOptions, formats: dict[str, str]):
        self.options, self.formats = options, formats
        self.registry = Registry(options.registry) if options.registry.get("url") else None
        self._by_id: dict[int, Codec] = {}
        self._unusable: dict[int, str] = {}  # ids whose schema could not be had or used, and why
        self._files = {part: _codec_of_file(path, formats.get(part, ""), text) for part, path, text in
                       (("key", options.key_schema, None), ("value", options.value_schema, options.value_schema_text))
                       if path}
        self._subject_ids: dict[str, int] = {}

    def file_codec(self, part: str) -> Codec | None:
        return self._files.get(part)

    def codec(self, schema_id: int, part: str) -> Codec:
        if schema_id in self._unusable:  # asked once per command, not per record
            raise SchemaError(self._unusable[schema_id])
        try:
            return self._codec(schema_id, part)
        except (SchemaError, RegistryError) as exc:
            self._unusable[schema_id] = str(exc)
            raise

    def _codec(self, schema_id: int, part: str) -> Codec:
        if schema_id not in self._by_id:
            if self.registry is None:
                raise SchemaError(f"schema id {schema_id}: give --schema-registry, or --{part}-schema FILE")
            schema = self.registry.by_id(schema_id)
            fmt = self.formats[part]
            if schema.schema_type != SCHEMA_TYPES[fmt]:
                raise SchemaError(f"schema id {schema_id} is {schema.schema_type}, not {SCHEMA_TYPES[fmt]}")
            try:
                self._by_id[schema_id] = CODECS[fmt](schema.schema_str, f"schema id {schema_id}")
            except SchemaFileError as exc:  # a registry schema kstool cannot use: a per-record error
                raise SchemaError(str(exc)) from None
        return self._by_id[schema_id]

    def subject_id(self, part: str, subject: str, codec: Codec) -> int:
        """The id of a file's schema under its subject (TopicNameStrategy: TOPIC-key, TOPIC-value)."""
        if subject not in self._subject_ids:
            if self.registry is None:
                raise SchemaError("records need a schema id in their header: give --schema-registry to look "
                                  "the schema up, or --no-header for bare payloads")
            ask = self.registry.register if self.options.register else self.registry.lookup
            self._subject_ids[subject] = ask(subject, SCHEMA_TYPES[self.formats[part]], codec.schema_str)
        return self._subject_ids[subject]


def _codec_of_file(path: str, fmt: str, text: str | None) -> Codec:
    if fmt not in SCHEMA_FORMATS:
        raise UsageError(f"schema file {path}: its {fmt or 'plain'} format takes no schema")
    if not path.endswith(FILE_SUFFIXES[fmt]):
        raise SchemaFileError(f"schema file {path}: a {fmt} schema is a {' or '.join(FILE_SUFFIXES[fmt])} file")
    return CODECS[fmt](_read_text(path) if text is None else text, path)


def _read_text(path: str) -> str:
    try:
        return Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise SchemaFileError(f"cannot read schema file {path}: {exc.strerror}") from None


class RecordDecoder:
    """bytes -> WithSchemaId(value, id); a record that does not decode becomes
    {"error": ..., "hex": ...} in place, and is counted."""

    def __init__(self, schemas: Schemas, part: str):
        self.schemas, self.part, self.failures = schemas, part, 0

    def __call__(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return self._decode(data)
        except (SchemaError, RegistryError) as exc:
            self.failures += 1
            return {"error": f"{self.part}: {exc}", "hex": data.hex()}

    def _decode(self, data: bytes) -> WithSchemaId:
        own = self.schemas.file_codec(self.part)
        if not self.schemas.options.framed:
            if own is None:
                raise SchemaError("bare payloads (--no-header) need --key-schema / --value-schema")
            return WithSchemaId(own.decode(data, framed=False), None)
        schema_id, payload = wire.split(data)
        return WithSchemaId((own or self.schemas.codec(schema_id, self.part)).decode(payload), schema_id)


def record_decoder(fmt: str, schemas: Schemas | None, part: str) -> Callable[[bytes | None], Any]:
    """A decoder with `failures` counts the records it could not decode (shown as {"error", "hex"})."""
    layout, fmt = split_format(fmt)
    if layout is not None:
        return WindowedDecoder(layout, record_decoder(fmt, schemas, part))
    if fmt not in SCHEMA_FORMATS:
        return decoder(fmt)
    return RecordDecoder(_required(schemas, fmt, part), part)


def record_encoder(fmt: str, schemas: Schemas | None, part: str, topic: str) -> FieldEncoder:
    """JSON value -> bytes: framed with the id the value was decoded with, else with the id of
    the file's schema under TOPIC-key / TOPIC-value; bare with --no-header."""
    layout, fmt = split_format(fmt)
    if layout is not None:
        return windowed_encoder(layout, record_encoder(fmt, schemas, part, topic))
    if fmt not in SCHEMA_FORMATS:
        return plain_encoder(fmt)
    given = _required(schemas, fmt, part)

    def encode(value: Any, schema_id: int | None) -> bytes | None:
        if value is None:
            return None
        try:
            own = given.file_codec(part)
            if not given.options.framed:
                if own is None:
                    raise SchemaError("bare payloads (--no-header) need --key-schema / --value-schema")
                return own.encode(value, framed=False)
            if schema_id is None:
                if own is None:
                    raise SchemaError(f"no schema for this {part}: give --{part}-schema FILE, or records "
                                      f"with {part}_schema_id (as consume -o jsonl writes them)")
                schema_id = given.subject_id(part, f"{topic}-{part}", own)
            return wire.frame(schema_id, (own or given.codec(schema_id, part)).encode(value))
        except (SchemaError, RegistryError) as exc:
            raise EncodeError(f"{part}: {exc}") from None
    return encode


def _required(schemas: Schemas | None, fmt: str, part: str) -> Schemas:
    if schemas is None or (schemas.registry is None and schemas.file_codec(part) is None):
        raise UsageError(f"{fmt} {part}s need a schema: --schema-registry URL (or schema.registry.url "
                         f"in --command-config), or --{part}-schema FILE")
    return schemas


def value_json_decoder(fmt: str, options: SchemaOptions) -> Callable[[bytes | None], str | None]:
    """Topology inputs: each value as JSON text, None where it does not decode (the record then
    fails the topology's check, and --on-error decides)."""
    decode = record_decoder(fmt, Schemas(options, {"value": fmt}), "value")

    def as_json(data: bytes | None) -> str | None:
        value = decode(data)
        return json.dumps(value.value, ensure_ascii=False) if isinstance(value, WithSchemaId) else None
    return as_json
