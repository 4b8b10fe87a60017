"""Protobuf payloads through protobuf's runtime, with descriptors built at run time: from .proto
text compiled by protoc (grpcio-tools), or from a base64 FileDescriptorProto (what
confluent-kafka's Python serializer registers). Values are protobuf's JSON mapping with the
.proto's field names, so a decoded record encodes back to the same bytes (protobuf's
deterministic serialization, as every Confluent serializer writes).

Framed payloads start with the message indexes (Confluent's wire format): the path of the
message in the file, zigzag varints with their count first, and [0] (the first message) as one
0 byte. Bare payloads are the file's first message."""

from __future__ import annotations

import base64
import binascii
import io
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kstool.schemas.exceptions import SchemaError, SchemaFileError

_NAME = "schema.proto"


class ProtobufCodec:
    def __init__(self, schema_str: str, origin: str = "the schema"):
        self.schema_str = schema_str
        self.origin = origin
        self.file = _file_descriptor(schema_str, origin)
        if not self.file.message_types_by_name:
            raise SchemaFileError(f"{origin}: the .proto defines no message")

    def _message_class(self, indexes: list[int]):
        from google.protobuf import message_factory

        try:
            descriptor = self.file.message_types_by_name[list(self.file.message_types_by_name)[indexes[0]]]
            for index in indexes[1:]:
                descriptor = descriptor.nested_types[index]
        except (IndexError, KeyError):
            raise SchemaError(f"no message at index {indexes} in {self.origin}") from None
        return message_factory.GetMessageClass(descriptor)

    def decode(self, payload: bytes, framed: bool = True) -> Any:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        indexes, body = read_indexes(payload) if framed else ([0], payload)
        try:
            message = self._message_class(indexes).FromString(body)
        except DecodeError as exc:
            raise SchemaError(f"not protobuf of this schema ({exc})") from None
        return json_format.MessageToDict(message, preserving_proto_field_name=True)

    def encode(self, value: Any, framed: bool = True) -> bytes:
        from google.protobuf import json_format

        message = self._message_class([0])()
        try:
            json_format.ParseDict(value, message)
        except (json_format.ParseError, TypeError, AttributeError) as exc:
            raise SchemaError(f"does not match the protobuf schema ({exc})") from None
        body = message.SerializeToString(deterministic=True)
        return (b"\x00" if framed else b"") + body  # [0]: the first message


def read_indexes(data: bytes) -> tuple[list[int], bytes]:
    buffer = io.BytesIO(data)
    count = _zigzag(buffer)
    if count == 0:
        return [0], buffer.read()
    if not 0 < count < 100:
        raise SchemaError(f"not protobuf in Confluent's wire format (message index count {count})")
    return [_zigzag(buffer) for _ in range(count)], buffer.read()


def _zigzag(buffer: io.BytesIO) -> int:
    value = shift = 0
    while True:
        byte = buffer.read(1)
        if not byte:
            raise SchemaError("not protobuf in Confluent's wire format (message indexes cut short)")
        value |= (byte[0] & 0x7F) << shift
        shift += 7
        if not byte[0] & 0x80:
            return (value >> 1) ^ -(value & 1)


def _file_descriptor(schema_str: str, origin: str):
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    proto = _from_base64(schema_str)
    if proto is not None:
        if proto.dependency:
            raise SchemaFileError(f"{origin}: imports ({', '.join(proto.dependency)}) are not supported yet")
        proto.name = _NAME
        pool.Add(proto)
        return pool.FindFileByName(_NAME)
    files = descriptor_pb2.FileDescriptorSet.FromString(_compile(schema_str, origin))
    for file in files.file:
        pool.Add(file)
    return pool.FindFileByName(_NAME)


def _from_base64(schema_str: str):
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema_str, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None


def _compile(proto_text: str, origin: str) -> bytes:
    """protoc's FileDescriptorSet of the text (with what it imports from protobuf's own files);
    run as a process so that its errors come back as text, not on our stderr."""
    import grpc_tools

    with tempfile.TemporaryDirectory(prefix="kstool-proto-") as folder:
        Path(folder, _NAME).write_text(proto_text, encoding="utf-8")
        out = Path(folder, "set.pb")
        result = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{folder}", f"-I{Path(grpc_tools.__file__).parent / '_proto'}",
             f"--descriptor_set_out={out}", "--include_imports", _NAME],
            capture_output=True, text=True)
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["protoc failed"])[0]
            where = first.replace(f"{folder}/", "").replace(f"{_NAME}:", "line ")
            raise SchemaFileError(f"{origin}: not a .proto protoc accepts ({where})")
        return out.read_bytes()
