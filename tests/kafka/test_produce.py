"""kstool produce: batching with exact per-partition counts, text and JSONL input, keys, bad and
oversized records, a missing topic."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from kstool.kafka.partitioner import partition_for
from tests.conftest import cli
from tests.helpers import create_topic, jsonl_rows, produce_records, read_all

# the embedded broker's workarounds and a command group's end-to-end runs: on both brokers
pytestmark = pytest.mark.embedded_tier


def test_produce_batches_and_reports_exact_per_partition_counts(kafka, topic_name):
    create_topic(kafka, topic_name, 3)
    lines = "".join(f"key{i % 37}:value{i}\n" for i in range(20_000))
    result = cli("produce", topic_name, "-K", ":", input=lines)
    assert result.exit_code == 0, result.stderr
    assert "wrote 20000 record(s)" in result.stderr
    messages = read_all(kafka, topic_name)
    assert len(messages) == 20_000
    for msg in messages:  # the Java client's partitioner, as Kafka Streams apps expect
        assert msg.partition() == partition_for(msg.key(), 3)
    assert sorted(m.value().decode() for m in messages) == sorted(f"value{i}" for i in range(20_000))


def test_produce_line_without_key_delimiter_gets_a_null_key_as_kcat(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    assert cli("produce", topic_name, "-K", ":", input="a:1\nno delimiter\nb:2\n").exit_code == 0
    got = [(m.key(), m.value()) for m in read_all(kafka, topic_name)]
    assert got == [(b"a", b"1"), (None, b"no delimiter"), (b"b", b"2")]


def test_oversized_record_is_named_with_the_limit_and_the_rest_is_counted(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    result = cli("produce", topic_name, input="small\n" + "x" * 1_048_576 + "\nafter\n")
    assert result.exit_code == 1
    assert "line 2" in result.stderr and "1048576 bytes" in result.stderr
    assert "message.max.bytes" in result.stderr and "2 record(s) written, 1 not delivered" in result.stderr
    assert [m.value() for m in read_all(kafka, topic_name)] == [b"small", b"after"]


def test_produce_jsonl_round_trip_is_identical(kafka, topic_name):
    source, copy = topic_name, topic_name + "-copy"
    create_topic(kafka, source, 2)
    create_topic(kafka, copy, 2)
    produce_records(kafka, source, [
        {"key": bytes([i]), "value": bytes(range(i, i + 5)) if i % 3 else None,
         "partition": i % 2, "timestamp": 1_600_000_000_000 + i,
         "headers": [("n", str(i).encode())]} for i in range(20)])
    dump = cli("consume", source, "-e", "-o", "jsonl").stdout
    produced = cli("produce", copy, "--format", "jsonl", input=dump)
    assert produced.exit_code == 0, produced.stderr
    assert "wrote 20 record(s)" in produced.stderr
    again = cli("consume", copy, "-e", "-o", "jsonl").stdout

    def strip(lines):
        return sorted((e["partition"], e["offset"], json.dumps([e["key"], e["value"], e["headers"],
                                                                 e["timestamp"]])) for e in lines)
    assert [s[2] for s in strip(jsonl_rows(dump))] == [s[2] for s in strip(jsonl_rows(again))]


def test_produce_text_with_key_delimiter_and_number_formats(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    result = cli("produce", topic_name, "-K", ":", "--value-format", "long",
                 "--timestamp", "2024-01-01T00:00:00", input="a:1\nb:-2\n")
    assert result.exit_code == 0, result.stderr
    consumer = Consumer(kafka.consumer_conf())
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    msgs = [consumer.poll(10) for _ in range(2)]
    consumer.close()
    assert [(m.key(), m.value()) for m in msgs] == [
        (b"a", (1).to_bytes(8, "big", signed=True)), (b"b", (-2).to_bytes(8, "big", signed=True))]
    assert all(m.timestamp()[1] == 1_704_067_200_000 for m in msgs)
    decoded = jsonl_rows(cli("consume", topic_name, "-e", "-o", "jsonl", "--value-format", "long").stdout)
    assert [e["value"] for e in decoded] == [1, -2]


def test_produce_skip_reports_bad_lines(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    result = cli("produce", topic_name, "--format", "jsonl", "--on-error", "skip",
                 input='{"value": "a"}\n[1]\n{"value": "b"}\n')
    assert result.exit_code == 0
    assert "skipped line 2" in result.stderr and "wrote 2 record(s)" in result.stderr


def test_produce_creates_a_missing_topic_when_asked_and_says_how_otherwise(kafka, topic_name):
    missing = cli("produce", topic_name, input="a\n")
    assert missing.exit_code == 1 and "--create" in missing.stderr and f"kstool topics create {topic_name}" in missing.stderr
    created = cli("produce", topic_name, "--create", "--partitions", "3", "-K", ":", input="k1:a\nk2:b\n")
    assert created.exit_code == 0, created.stderr
    assert f"created topic {topic_name} (3 partitions)" in created.stderr
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    assert len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 3
    again = cli("produce", topic_name, "--create", input="c\n")  # exists: written to, not created
    assert again.exit_code == 0 and "created" not in again.stderr
    assert sorted(m.value() for m in read_all(kafka, topic_name)) == [b"a", b"b", b"c"]


def test_a_time_the_topic_refuses_names_the_topics_limit(on_apache_kafka, topic_name):
    """Apache Kafka refuses a record more than message.timestamp.after.max.ms (1 h) ahead of its
    clock (KIP-937): the line says which limit, and nothing is written."""
    create_topic(on_apache_kafka, topic_name, 1, {"message.timestamp.after.max.ms": "3600000"})
    produced = cli("produce", topic_name, "--timestamp", "2030-01-01", input="a\n")
    assert produced.exit_code == 1
    assert produced.stderr.strip().splitlines() == [
        "kstool: error: 0 record(s) written, 1 not delivered (first: line 1: Broker: Invalid timestamp); topic "
        f"{topic_name} takes record times within its message.timestamp.after.max.ms=3600000 of the broker's clock"]
    assert read_all(on_apache_kafka, topic_name) == []


def _per_partition(kafka, topic: str) -> dict[int, list[tuple[bytes | None, bytes]]]:
    got: dict[int, list[tuple[bytes | None, bytes]]] = {}
    for m in read_all(kafka, topic):
        got.setdefault(m.partition(), []).append((m.key(), m.value()))
    return got


def test_lines_written_a_batch_at_a_time_are_the_records_line_by_line_writes(kafka, topic_name):
    """Plain lines go through librdkafka's batch call; a header sends them line by line (the
    old path, the oracle): keyed records land in the same partitions, each in the order of its
    lines; null keys fill a partition 10,000 records at a time, in line order too. CRLF, empty
    lines, a line without the delimiter (a null key) and a last line without a newline."""
    batched, by_line = topic_name, topic_name + "-by-line"
    for topic in (batched, by_line):
        create_topic(kafka, topic, 3)
    lines = [f"k{i % 23}:v{i}" if i % 7 else f"no delimiter {i}" for i in range(30_000)]
    lines[5], lines[8] = "", "k1:crlf\r"
    text = "\n".join(lines)  # no newline after the last
    for topic, extra in ((batched, ()), (by_line, ("-H", "via=lines"))):
        written = cli("produce", topic, "-K", ":", *extra, input=text)
        assert (written.exit_code, written.stderr) == (0, f"wrote 30000 record(s) to {topic}\n")
    expected = [(line.split(":", 1)[0].encode(), line.split(":", 1)[1].rstrip("\r").encode()) if ":" in line
                else (None, line.encode()) for line in lines]
    got, oracle = _per_partition(kafka, batched), _per_partition(kafka, by_line)
    assert {p: [r for r in records if r[0] is not None] for p, records in got.items()} == {
        p: [r for r in records if r[0] is not None] for p, records in oracle.items()}
    nulls = [r for r in expected if r[0] is None]  # fewer than 10,000: one partition takes them, in order
    if not kafka.embedded:  # whose tail profile writes line by line, null keys in turn
        assert [[r for r in records if r[0] is None] for records in got.values() if any(r[0] is None for r in records)] == [
            nulls]
    assert sorted((r for records in got.values() for r in records), key=repr) == sorted(expected, key=repr)


def test_null_keys_fill_a_partition_at_a_time_in_line_order(on_apache_kafka, topic_name):
    """As the Java client's sticky partitioner (KIP-480) does; librdkafka would pick one per record."""
    kafka = on_apache_kafka
    create_topic(kafka, topic_name, 3)
    written = cli("produce", topic_name, input="".join(f"line {i}\n" for i in range(25_000)))
    assert written.exit_code == 0 and "wrote 25000 record(s)" in written.stderr
    runs = []  # each partition's runs of consecutive lines
    for records in _per_partition(kafka, topic_name).values():
        numbers = [int(value.split()[1]) for _, value in records]
        assert numbers == sorted(numbers)
        runs.append(1)
        for before, after in zip(numbers, numbers[1:]):
            runs[-1:] = [runs[-1] + 1] if after == before + 1 else [runs[-1], 1]
    assert sorted(runs) == [5_000, 10_000, 10_000]


def test_a_record_refused_after_megabytes_is_named_by_its_line_and_the_rest_counted(on_apache_kafka, topic_name):
    """The batch path flushes every 8 MB or so (kstool.kafka.bulk_lines): the error still names
    the line and counts every record written before and after it."""
    create_topic(on_apache_kafka, topic_name, 2)
    lines = [f"line {i:07d} of the input" for i in range(450_000)]  # 11 MB
    lines.insert(430_000, "x" * 1_048_576)
    result = cli("produce", topic_name, input="\n".join(lines) + "\n")
    assert result.exit_code == 1
    assert ("450000 record(s) written, 1 not delivered (first: line 430001: the record is 1048576 bytes"
            in result.stderr), result.stderr
    assert len(read_all(on_apache_kafka, topic_name)) == 450_000
