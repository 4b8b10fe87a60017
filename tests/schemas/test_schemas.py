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
from tests.conftest import cli
from tests.helpers import create_topic, latest_per_key, produce_batched, read_all
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


KEY = json.dumps({"type": "record", "name": "OrderKey", "namespace": "shop",
                  "fields": [{"name": "region", "type": "string"}, {"name": "id", "type": "long"}]})


def _write_avro(kafka, registry_url: str, topic: str) -> list:
    """Avro keys and values as any Java or Python app writes them: confluent-kafka's serializers
    and a normally batching producer. Returns the messages as the broker keeps them."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    keys, values = AvroSerializer(client, KEY), AvroSerializer(client, ORDER)
    create_topic(kafka, topic, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50})
    for order in ORDERS:
        key = {"region": "eu", "id": order["id"]}
        producer.produce(topic, key=keys(key, SerializationContext(topic, MessageField.KEY)),
                         value=values(order, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    return read_all(kafka, topic)


def test_consume_decodes_avro_and_produce_writes_the_same_bytes_back(kafka, registry_url, topic_name):
    written = _write_avro(kafka, registry_url, topic_name)
    dumped = cli("consume", topic_name, "-e", "-o", "jsonl", "--key-format", "avro", "--value-format", "avro",
                 "--schema-registry", registry_url)
    assert dumped.exit_code == 0, dumped.stderr
    envelopes = [json.loads(line) for line in dumped.stdout.splitlines()]
    assert [e["value"]["customer"] for e in envelopes] == ["ann", "bob"]
    assert [e["key"] for e in envelopes] == [{"region": "eu", "id": 1}, {"region": "eu", "id": 2}]
    assert [e["value_schema_id"] for e in envelopes] == [wire.split(m.value())[0] for m in written]
    assert [e["key_schema_id"] for e in envelopes] == [wire.split(m.key())[0] for m in written]

    copy = topic_name + "-copy"
    create_topic(kafka, copy, 1)
    produced = cli("produce", copy, "--format", "jsonl", "--key-format", "avro", "--value-format", "avro",
                   "--schema-registry", registry_url, input=dumped.stdout)
    assert produced.exit_code == 0, produced.stderr
    assert [(m.key(), m.value()) for m in read_all(kafka, copy)] == [(m.key(), m.value()) for m in written]


def test_schema_files_framed_or_bare(kafka, registry_url, topic_name, tmp_path):
    import io

    import fastavro

    written = _write_avro(kafka, registry_url, topic_name)
    schema = tmp_path / "order.avsc"
    schema.write_text(ORDER)
    # a file's schema reads framed records without asking the registry for their ids
    dumped = cli("consume", topic_name, "-e", "-o", "jsonl", "--value-format", "avro", "--value-schema", schema)
    assert dumped.exit_code == 0, dumped.stderr
    assert [json.loads(line)["value"]["id"] for line in dumped.stdout.splitlines()] == [1, 2]
    # text lines of JSON, framed with the id the file's schema has under TOPIC-value: looked up,
    # or registered when asked (the registry gives a schema it knows the same id)
    again = topic_name + "-again"
    create_topic(kafka, again, 1)
    lines = "".join(json.dumps({**o, "raw": o["raw"].decode("latin-1")}) + "\n" for o in ORDERS)
    args = ("produce", again, "--value-format", "avro", "--value-schema", schema, "--schema-registry", registry_url)
    unknown = cli(*args, input=lines)
    assert unknown.exit_code == 1 and f"line 1: value: schema under {again}-value: not in the schema registry" \
        in unknown.stderr
    produced = cli(*args, "--register-schemas", input=lines)
    assert produced.exit_code == 0, produced.stderr
    assert [m.value() for m in read_all(kafka, again)] == [m.value() for m in written]
    # bare payloads, as fastavro writes them without a registry
    bare = topic_name + "-bare"
    create_topic(kafka, bare, 1)
    produced = cli("produce", bare, "--value-format", "avro", "--value-schema", schema, "--no-header", input=lines)
    assert produced.exit_code == 0, produced.stderr
    parsed = fastavro.parse_schema(json.loads(ORDER))
    expected = []
    for order in ORDERS:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, order)
        expected.append(buffer.getvalue())
    assert [m.value() for m in read_all(kafka, bare)] == expected
    shown = cli("consume", bare, "-e", "--value-format", "avro", "--value-schema", schema, "--no-header")
    assert [json.loads(line)["customer"] for line in shown.stdout.splitlines()] == ["ann", "bob"]
    # without a registry a file's schema has no id to frame with
    unframed = cli("produce", bare, "--value-format", "avro", "--value-schema", schema, input=lines)
    assert unframed.exit_code == 1 and "line 1: value: records need a schema id" in unframed.stderr


def test_records_that_do_not_decode_are_shown_in_place_and_counted(kafka, registry_url, topic_name):
    written = _write_avro(kafka, registry_url, topic_name)
    good = written[0].value()
    schema_id = wire.split(good)[0]
    bad = [b'{"id": 1}', wire.frame(987654, good[5:]), good[:-3]]  # no header, unknown id, cut short
    produce_batched(kafka, topic_name, [(None, value) for value in bad])
    result = cli("consume", topic_name, "-e", "-o", "jsonl", "--value-format", "avro",
                 "--schema-registry", registry_url)
    assert result.exit_code == 0, result.stderr
    values = [json.loads(line)["value"] for line in result.stdout.splitlines()]
    assert [v["customer"] for v in values[:2]] == ["ann", "bob"]
    errors = values[2:]
    assert [e["hex"] for e in errors] == [b.hex() for b in bad]
    assert "no schema registry header" in errors[0]["error"]
    assert "schema id 987654: not in the schema registry" in errors[1]["error"]
    assert "not Avro of this schema" in errors[2]["error"]
    assert result.stderr == ('kstool: warning: 3 key(s)/value(s) did not decode: shown as {"error", "hex"}\n')

    unreachable = cli("consume", topic_name, "-e", "-n", "1", "-o", "jsonl", "--value-format", "avro",
                      "--schema-registry", "http://127.0.0.1:9")
    assert unreachable.exit_code == 0 and "cannot reach the schema registry" in unreachable.stdout
    assert schema_id > 0

    target = topic_name + "-target"
    create_topic(kafka, target, 1)
    lines = (json.dumps({"value": {**ORDERS[1], "raw": ""}, "value_schema_id": schema_id}) + "\n"
             + json.dumps({"value": {"id": "two"}, "value_schema_id": schema_id}) + "\n")
    refused = cli("produce", target, "--format", "jsonl", "--value-format", "avro",
                  "--schema-registry", registry_url, input=lines)
    assert refused.exit_code == 1 and refused.stderr.count("\n") == 1
    assert "line 2: value: does not match the Avro schema" in refused.stderr
    assert len(read_all(kafka, target)) == 1, "the line before it is written, nothing of line 2"
    needs = cli("consume", target, "-e", "--value-format", "avro")
    assert needs.exit_code == 2 and "avro values need a schema: --schema-registry URL" in needs.stderr


def test_a_kafka_streams_changelog_with_avro_keys_and_values(kafka, registry_url, topic_name):
    """Changelogs as a Kafka Streams app with Avro serdes writes them: a key-value store's (the
    serialized key and value, each framed), and a window store's, whose keys are the serialized
    key, the 8-byte window start and a 4-byte sequence number (WindowKeySchema#toStoreKeyBinary,
    lines 187-196 at apache/kafka 1eb7644349c)."""
    import struct

    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    store, windows = topic_name, topic_name + "-windows"
    keys = AvroSerializer(client, KEY)
    values = AvroSerializer(client, ORDER)

    def key(n: int) -> bytes:
        return keys({"region": "eu", "id": n}, SerializationContext(store, MessageField.KEY))

    def value(order: dict) -> bytes:
        return values(order, SerializationContext(store, MessageField.VALUE))

    updated = {**ORDERS[0], "amount": 99.0}
    create_topic(kafka, store, 1, {"cleanup.policy": "compact"})
    create_topic(kafka, windows, 1, {"cleanup.policy": "compact,delete"})
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50})
    for k, v in [(key(1), value(ORDERS[0])), (key(2), value(ORDERS[1])), (key(1), value(updated)), (key(2), None)]:
        producer.produce(store, key=k, value=v)
    start = 1_735_689_600_000  # 2025-01-01T00:00:00Z
    producer.produce(windows, key=key(1) + struct.pack(">qi", start, 0), value=value(ORDERS[0]))
    producer.produce(windows, key=key(1) + struct.pack(">qi", start + 60_000, 0), value=value(updated))
    assert producer.flush(30) == 0
    avro = ("--key-format", "avro", "--value-format", "avro", "--schema-registry", registry_url)

    dumped = cli("changelog", "dump", store, *avro, "-o", "jsonl")
    assert dumped.exit_code == 0 and dumped.stderr == "", dumped.stderr
    rows = [json.loads(line) for line in dumped.stdout.splitlines()]
    assert [(r["key"]["id"], r["value"] and r["value"]["amount"], r["tombstone"]) for r in rows] == \
        [(1, 12.5, False), (2, 0.0, False), (1, 99.0, False), (2, None, True)]
    compacted = json.loads(cli("changelog", "dump", store, *avro, "--compact", "-o", "json").stdout)
    assert [(r["key"], r["value"]["amount"]) for r in compacted] == [({"region": "eu", "id": 1}, 99.0)]

    # a key typed as JSON, its fields in any order
    got = cli("state", "get", "--changelog-topic", store, *avro, '{"id": 1, "region": "eu"}', "-o", "json")
    assert got.exit_code == 0, got.stderr
    assert [e["value"]["amount"] for e in json.loads(got.stdout)] == [99.0]
    gone = cli("state", "get", "--changelog-topic", store, *avro, '{"id": 2, "region": "eu"}')
    assert gone.exit_code == 1 and "not found" in gone.stderr

    windowed = cli("changelog", "dump", windows, "--key-format", "windowed:avro", "--value-format", "avro",
                   "--schema-registry", registry_url, "-o", "jsonl")
    assert windowed.exit_code == 0 and windowed.stderr == "", windowed.stderr
    rows = [json.loads(line) for line in windowed.stdout.splitlines()]
    assert [(r["key"], r["window_start"], r["seqnum"], r["value"]["amount"]) for r in rows] == \
        [({"region": "eu", "id": 1}, start, 0, 12.5), ({"region": "eu", "id": 1}, start + 60_000, 0, 99.0)]


PROTO = """syntax = "proto3";
package shop;

message Order {
  int64 id = 1;
  string customer = 2;
  double amount = 3;
  repeated string tags = 4;
  bytes raw = 5;
  message Line { string sku = 1; int32 qty = 2; }
  repeated Line lines = 6;
}
"""


@pytest.fixture(scope="module")
def order_class(tmp_path_factory):
    """The message class protoc generates for PROTO, as an app's build would (loaded once: its
    file joins protobuf's default descriptor pool)."""
    import importlib.util
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("proto")
    (folder / "kstool_test_order.proto").write_text(PROTO)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{folder}", f"--python_out={folder}",
                    "kstool_test_order.proto"], check=True)
    spec = importlib.util.spec_from_file_location("kstool_test_order_pb2", folder / "kstool_test_order_pb2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Order


def _protobuf_orders(order_class) -> list:
    return [order_class(id=1, customer="ann", amount=12.5, tags=["new"], raw=b"\x00\xff",
                        lines=[order_class.Line(sku="a-1", qty=2)]),
            order_class(id=2, customer="bob")]


def test_protobuf_values_decode_and_encode_back_to_the_same_bytes(kafka, registry_url, topic_name, order_class):
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = ProtobufSerializer(order_class, SchemaRegistryClient({"url": registry_url}),
                                    {"use.deprecated.format": False})
    create_topic(kafka, topic_name, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50})
    for order in _protobuf_orders(order_class):
        producer.produce(topic_name, value=serializer(order, SerializationContext(topic_name, MessageField.VALUE)))
    assert producer.flush(30) == 0
    written = read_all(kafka, topic_name)

    dumped = cli("consume", topic_name, "-e", "-o", "jsonl", "--value-format", "protobuf",
                 "--schema-registry", registry_url)
    assert dumped.exit_code == 0 and dumped.stderr == "", dumped.stderr
    envelopes = [json.loads(line) for line in dumped.stdout.splitlines()]
    # protobuf's JSON mapping: int64 as a string, bytes as base64, defaults left out
    assert envelopes[0]["value"] == {"id": "1", "customer": "ann", "amount": 12.5, "tags": ["new"],
                                     "raw": "AP8=", "lines": [{"sku": "a-1", "qty": 2}]}
    assert envelopes[1]["value"] == {"id": "2", "customer": "bob"}
    assert [e["value_schema_id"] for e in envelopes] == [wire.split(m.value())[0] for m in written]

    copy = topic_name + "-copy"
    create_topic(kafka, copy, 1)
    produced = cli("produce", copy, "--format", "jsonl", "--value-format", "protobuf",
                   "--schema-registry", registry_url, input=dumped.stdout)
    assert produced.exit_code == 0, produced.stderr
    assert [m.value() for m in read_all(kafka, copy)] == [m.value() for m in written]


def test_protobuf_schema_files_framed_or_bare(kafka, registry_url, topic_name, order_class, tmp_path):
    proto = tmp_path / "order.proto"
    proto.write_text(PROTO)
    bare = topic_name
    create_topic(kafka, bare, 1)
    lines = '{"id": 1, "customer": "ann", "amount": 12.5, "tags": ["new"], "raw": "AP8=", ' \
            '"lines": [{"sku": "a-1", "qty": 2}]}\n{"id": "2", "customer": "bob"}\n'
    produced = cli("produce", bare, "--value-format", "protobuf", "--value-schema", proto, "--no-header", input=lines)
    assert produced.exit_code == 0, produced.stderr
    expected = [o.SerializeToString(deterministic=True) for o in _protobuf_orders(order_class)]
    assert [m.value() for m in read_all(kafka, bare)] == expected
    shown = cli("consume", bare, "-e", "-o", "jsonl", "--value-format", "protobuf", "--value-schema", proto,
                "--no-header")
    assert [json.loads(line)["value"]["customer"] for line in shown.stdout.splitlines()] == ["ann", "bob"]

    bad = cli("produce", bare, "--value-format", "protobuf", "--value-schema", proto, "--no-header",
              input='{"id": 3, "colour": "red"}\n')
    assert bad.exit_code == 1 and "line 1: value: does not match the protobuf schema" in bad.stderr
    broken = tmp_path / "broken.proto"
    broken.write_text('syntax = "proto3"; message X { int32 a = 1 }')
    refused = cli("consume", bare, "-e", "--value-format", "protobuf", "--value-schema", broken, "--no-header")
    assert refused.exit_code == 2 and refused.stderr == (
        f'kstool: error: {broken}: not a .proto protoc accepts (line 1:44: Expected ";".)\n')
    wrong = cli("consume", bare, "-e", "--value-format", "protobuf", "--value-schema", tmp_path / "order.avsc")
    assert wrong.exit_code == 2 and "a protobuf schema is a .proto file" in wrong.stderr


def test_aggregate_sums_a_field_of_avro_values_per_customer(kafka, spark, registry_url, topic_name):
    """aggregate --value-field over Avro values (the run's executors decode them), grouped by
    another field; a value that is not Avro goes where --on-error says, as it was."""
    import struct

    written = _write_avro(kafka, registry_url, topic_name)
    more = [{**ORDERS[0], "id": 3, "amount": 7.25}, {**ORDERS[1], "id": 4, "amount": 1.5}]
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), ORDER)
    produce_batched(kafka, topic_name, [(None, serialize(o, SerializationContext(topic_name, MessageField.VALUE)))
                                        for o in more] + [(None, b"not avro")])
    orders = ORDERS + more
    sink, dlq = topic_name + "-sums", topic_name + "-dlq"
    result = cli("run", "aggregate", "--input", topic_name, "--output", sink, "--agg", "sum",
                 "--input-value-format", "avro", "--value-field", "amount", "--group-by", "field:customer",
                 "--schema-registry", registry_url, "--app-id", topic_name + "-app", "--once",
                 "--on-error", f"dlq:{dlq}", "--report", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["bad_records"] == 1
    expected: dict[bytes, float] = {}
    for order in orders:
        expected[order["customer"].encode()] = expected.get(order["customer"].encode(), 0.0) + order["amount"]
    got = {k: struct.unpack(">d", v)[0] for k, v in latest_per_key(read_all(kafka, sink)).items()}
    assert got == expected
    assert [m.value() for m in read_all(kafka, dlq)] == [b"not avro"], "the bad record as it was"
    assert len(written) == 2

    missing = cli("run", "aggregate", "--input", topic_name, "--output", sink, "--agg", "sum",
                  "--input-value-format", "avro", "--value-field", "amount", "--app-id", topic_name + "-other",
                  "--once")
    assert missing.exit_code == 2 and "avro values need a schema" in missing.stderr


ORDER_JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "customer": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["id", "customer"]})


def test_json_schema_values_round_trip_and_a_value_off_its_schema_is_shown_in_place(kafka, registry_url, topic_name):
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = JSONSerializer(ORDER_JSON_SCHEMA, SchemaRegistryClient({"url": registry_url}))
    create_topic(kafka, topic_name, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50})
    for order in ({"id": 1, "customer": "änn", "amount": 12.5}, {"id": 2, "customer": "bob"}):
        producer.produce(topic_name, value=serializer(order, SerializationContext(topic_name, MessageField.VALUE)))
    assert producer.flush(30) == 0
    written = read_all(kafka, topic_name)
    schema_id = wire.split(written[0].value())[0]
    produce_batched(kafka, topic_name, [(None, wire.frame(schema_id, b'{"id": "three"}'))])

    dumped = cli("consume", topic_name, "-e", "-o", "jsonl", "--value-format", "jsonschema",
                 "--schema-registry", registry_url)
    assert dumped.exit_code == 0, dumped.stderr
    envelopes = [json.loads(line) for line in dumped.stdout.splitlines()]
    assert [e["value"] for e in envelopes[:2]] == [{"id": 1, "customer": "änn", "amount": 12.5},
                                                   {"id": 2, "customer": "bob"}]
    assert "does not match the JSON Schema (at id: 'three' is not of type 'integer')" in envelopes[2]["value"]["error"]
    assert "1 key(s)/value(s) did not decode" in dumped.stderr

    copy = topic_name + "-copy"
    create_topic(kafka, copy, 1)
    good = "".join(line + "\n" for line in dumped.stdout.splitlines()[:2])
    produced = cli("produce", copy, "--format", "jsonl", "--value-format", "jsonschema",
                   "--schema-registry", registry_url, input=good)
    assert produced.exit_code == 0, produced.stderr
    assert [m.value() for m in read_all(kafka, copy)] == [m.value() for m in written]


def test_replay_filters_avro_keys_and_copies_a_decoded_dump_back_byte_for_byte(kafka, registry_url, topic_name,
                                                                               tmp_path):
    written = _write_avro(kafka, registry_url, topic_name)
    avro = ("--key-format", "avro", "--schema-registry", registry_url)
    second = topic_name + "-second"
    create_topic(kafka, second, 1)
    result = cli("replay", "--from-topic", topic_name, "--to-topic", second, *avro, "--filter-key", '"id":2}',
                 "--no-provenance", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert [(m.key(), m.value()) for m in read_all(kafka, second)] == [(written[1].key(), written[1].value())]

    dump = tmp_path / "orders.jsonl"
    dumped = cli("consume", topic_name, "-e", "-o", "jsonl", *avro, "--value-format", "avro")
    dump.write_text(dumped.stdout)
    again = topic_name + "-again"
    create_topic(kafka, again, 1)
    result = cli("replay", "--from-file", dump, "--to-topic", again, *avro, "--value-format", "avro",
                 "--no-provenance", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert [(m.key(), m.value()) for m in read_all(kafka, again)] == [(m.key(), m.value()) for m in written]


def test_a_stream_table_join_of_avro_values_shows_both_sides_decoded(kafka, spark, registry_url, topic_name):
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    customer = json.dumps({"type": "record", "name": "Customer", "namespace": "shop",
                           "fields": [{"name": "name", "type": "string"}, {"name": "tier", "type": "string"}]})
    client = SchemaRegistryClient({"url": registry_url})
    orders, customers, out = topic_name, topic_name + "-customers", topic_name + "-out"
    for topic in (orders, customers):
        create_topic(kafka, topic, 1)
    order_value, customer_value = AvroSerializer(client, ORDER), AvroSerializer(client, customer)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50})
    base = 1_735_689_600_000
    producer.produce(customers, key=b"ann", timestamp=base,
                     value=customer_value({"name": "Ann", "tier": "gold"},
                                          SerializationContext(customers, MessageField.VALUE)))
    producer.produce(orders, key=b"ann", timestamp=base + 1000,
                     value=order_value(ORDERS[0], SerializationContext(orders, MessageField.VALUE)))
    producer.produce(orders, key=b"zed", timestamp=base + 2000, value=b"not avro")
    assert producer.flush(30) == 0

    result = cli("run", "join", "--left", orders, "--right", customers, "--output", out, "--kind", "stream-table",
                 "--how", "left", "--input-value-format", "avro", "--schema-registry", registry_url,
                 "--app-id", topic_name + "-app", "--once", "--on-error", "skip", "--report", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["bad_records"] == 1
    joined = [(m.key(), json.loads(m.value())) for m in read_all(kafka, out)]
    assert joined == [(b"ann", {"left": {**ORDERS[0], "raw": ORDERS[0]["raw"].decode("latin-1")},
                                "right": {"name": "Ann", "tier": "gold"}})]
