"""Schemas from a Schema Registry, through confluent-kafka's client (auth, retries, HTTP), cached
for the command: a dump of a million records asks for each schema id once."""

from __future__ import annotations

from dataclasses import dataclass

from kstool.base.errors import UsageError
from kstool.schemas.exceptions import RegistryError, SchemaNotFoundError

# the registry's error code for an unknown schema id or subject (Confluent's REST API)
_NOT_FOUND = {40401, 40402, 40403}


@dataclass(frozen=True)
class RegisteredSchema:
    schema_id: int
    schema_type: str  # AVRO, PROTOBUF, JSON
    schema_str: str


class Registry:
    """settings: schema.registry.url and the client's auth keys (basic.auth.user.info, ...)."""

    def __init__(self, settings: dict[str, str]):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = settings["url"]
        try:
            self._client = SchemaRegistryClient(settings)
        except ValueError as exc:  # unknown or malformed settings
            raise UsageError(f"schema registry settings: {exc}") from None
        self._by_id: dict[int, RegisteredSchema] = {}

    def _call(self, what: str, fn, *args):
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return fn(*args)
        except SchemaRegistryError as exc:
            if exc.error_code in _NOT_FOUND or exc.http_status_code == 404:
                raise SchemaNotFoundError(f"{what}: not in the schema registry at {self.url} "
                                          f"({exc.error_message})") from None
            raise RegistryError(f"{what}: the schema registry at {self.url} answered "
                                f"{exc.http_status_code}: {exc.error_message}") from None
        except Exception as exc:  # connection refused, DNS, TLS: the client raises plain errors
            raise RegistryError(f"{what}: cannot reach the schema registry at {self.url} "
                                f"({type(exc).__name__}: {str(exc)[:200]})") from None

    def by_id(self, schema_id: int) -> RegisteredSchema:
        if schema_id not in self._by_id:
            schema = self._call(f"schema id {schema_id}", self._client.get_schema, schema_id)
            self._by_id[schema_id] = RegisteredSchema(schema_id, schema.schema_type or "AVRO", schema.schema_str)
        return self._by_id[schema_id]

    def register(self, subject: str, schema_type: str, schema_str: str) -> int:
        """The id of this schema under the subject, registering it if it is new."""
        from confluent_kafka.schema_registry import Schema

        return self._call(f"registering under {subject}", self._client.register_schema, subject,
                          Schema(schema_str, schema_type))

    def lookup(self, subject: str, schema_type: str, schema_str: str) -> int:
        """The id this exact schema has under the subject (SchemaNotFoundError if none)."""
        from confluent_kafka.schema_registry import Schema

        found = self._call(f"schema under {subject}", self._client.lookup_schema, subject,
                           Schema(schema_str, schema_type))
        return found.schema_id
