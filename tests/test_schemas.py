"""The schema layer (#24, first part): the Confluent wire format, schemas by id from a registry
(the test stand-in, or KSTOOL_TEST_SCHEMA_REGISTRY), and Avro values byte-exact both ways
against confluent-kafka's own AvroSerializer as the independent writer."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from kstool.schemas import wire
from kstool.schemas.avro import AvroCodec
from kstool.schemas.exceptions import RegistryError, SchemaError, SchemaFileError, SchemaNotFoundError
from kstool.schemas.registry import Registry
from tests.schema_registry import StandInRegistry

ORDER = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
               {"name": "amount", "type": "double"}, {"name": "tags", "type": {"type": "array", "items": "string"}},
               {"name": "note", "type": ["null", "string"], "default": None},
               {"name": "raw", "type": "bytes"}],
})
ORDERS = [{"id": 1, "customer": "ann", "amount": 12.5, "tags": ["new"], "note": None, "raw": b"\x00\xff"},
          {"id": 2, "customer": "bob", "amount": 0.0, "tags": [], "note": "rush", "raw": b""}]


@pytest.fixture(scope="module")
def registry_url():
    real = os.environ.get("KSTOOL_TEST_SCHEMA_REGISTRY")
    if real:
        yield real
        return
    stand_in = StandInRegistry()
    yield stand_in.url
    stand_in.close()


def test_avro_values_written_by_confluent_kafka_decode_and_encode_back_to_the_same_bytes(registry_url):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = f"orders-{uuid.uuid4().hex[:6]}"
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), ORDER)
    written = [serializer(order, SerializationContext(topic, MessageField.VALUE)) for order in ORDERS]
    registry = Registry({"url": registry_url})
    for order, data in zip(ORDERS, written):
        schema_id, payload = wire.split(data)
        schema = registry.by_id(schema_id)
        assert schema.schema_type == "AVRO"
        codec = AvroCodec(schema.schema_str)
        value = codec.decode(payload)
        assert value == {**order, "raw": order["raw"].decode("latin-1")}  # bytes as Avro's JSON writes them
        assert json.loads(json.dumps(value)) == value  # JSON-able, for -o jsonl
        assert wire.frame(schema_id, codec.encode(value)) == data
    # the id is the subject's: looking the schema up finds it, registering it again keeps it
    assert registry.lookup(f"{topic}-value", "AVRO", ORDER) == wire.split(written[0])[0]
    assert registry.register(f"{topic}-value", "AVRO", ORDER) == wire.split(written[0])[0]


def test_unknown_ids_subjects_and_an_unreachable_registry_say_so(registry_url):
    registry = Registry({"url": registry_url})
    with pytest.raises(SchemaNotFoundError, match=r"schema id 987654: not in the schema registry at "):
        registry.by_id(987654)
    with pytest.raises(SchemaNotFoundError, match=r"schema under nope-\w+-value: not in the schema registry"):
        registry.lookup(f"nope-{uuid.uuid4().hex[:6]}-value", "AVRO", ORDER)
    with pytest.raises(RegistryError, match=r"schema id 1: cannot reach the schema registry at http://127.0.0.1:9"):
        Registry({"url": "http://127.0.0.1:9"}).by_id(1)


def test_records_that_are_not_what_their_schema_says_fail_one_by_one():
    codec = AvroCodec(ORDER)
    with pytest.raises(SchemaError, match="no schema registry header .* starts with 0x7b"):
        wire.split(b'{"id": 1}')
    with pytest.raises(SchemaError, match="not Avro of this schema"):
        codec.decode(b"\x02\x06ann")  # cut short
    with pytest.raises(SchemaError, match="bytes left over"):
        codec.decode(codec.encode({**ORDERS[1], "raw": ""}) + b"\x00")
    with pytest.raises(SchemaError, match="does not match the Avro schema"):
        codec.encode({"id": "one", "customer": "x", "amount": 1.0, "tags": [], "raw": ""})
    with pytest.raises(SchemaFileError, match="orders.avsc: not an Avro schema"):
        AvroCodec('{"type": "record", "name": "X", "fields": [{"name": "a"}]}', "orders.avsc")
