"""Dead letters in Kafka Streams' form (KIP-1034): written by Kafka Streams' own handler in a
reference app, shown by `kstool consume`, sent back to their source by `kstool replay
--dead-letters`."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conftest import cli
from tests.helpers import Deliveries, create_topic, end_offsets, jsonl_rows, read_all, wait_until
from tests.reference_apps import ReferenceApp

BASE = 1_767_225_600_000
# key, value, partition, timestamp, headers: the doubler fails on values that are not numbers
INPUT = [(b"a", b"1", 0, BASE, []), (b"b", b"x", 0, BASE + 1, [("trace", b"t-1")]),
         (b"c", b"3", 1, BASE + 2, []), (b"d", b"boom", 1, BASE + 3, [])]
BAD = [record for record in INPUT if not record[1].isdigit()]


def _produce(kafka, topic: str, records) -> None:
    producer, delivered = Producer(kafka.producer_conf()), Deliveries()
    for key, value, partition, timestamp, headers in records:
        producer.produce(topic, key=key, value=value, partition=partition, timestamp=timestamp,
                         headers=headers, on_delivery=delivered)
    delivered.check(producer)


def test_kafka_streams_dead_letters_are_shown_and_sent_back(apache_kafka, tmp_path):
    source, app_id = (f"dl-{name}-{uuid.uuid4().hex[:6]}" for name in ("numbers", "doubler"))
    output, dlq = app_id + "-out", app_id + "-dlq"
    create_topic(apache_kafka, source, 2)
    create_topic(apache_kafka, output, 1)
    create_topic(apache_kafka, dlq, 1)  # Kafka Streams does not create it
    _produce(apache_kafka, source, INPUT)
    config = {"processing.exception.handler": "org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler",
              "errors.dead.letter.queue.topic.name": dlq}
    with ReferenceApp("doubler", apache_kafka.bootstrap, app_id, "classic", tmp_path / app_id, source, output,
                      config):
        wait_until(lambda: len(read_all(apache_kafka, dlq)) == 2 and len(read_all(apache_kafka, output)) == 2,
                   "two doubled values and two dead letters")

    # what Kafka Streams wrote: the raw source record, its headers, then the error's
    letters = {m.key(): m for m in read_all(apache_kafka, dlq)}
    for key, value, partition, timestamp, headers in BAD:
        offset = [r for r in INPUT if r[2] == partition].index((key, value, partition, timestamp, headers))
        letter = letters[key]
        assert (letter.value(), letter.timestamp()[1]) == (value, timestamp)
        assert letter.headers()[:len(headers)] == headers
        errors = dict(letter.headers()[len(headers):])
        assert errors["__streams.errors.exception"] == b"java.lang.NumberFormatException"
        assert errors["__streams.errors.message"] == b'For input string: "' + value + b'"'
        assert errors["__streams.errors.stacktrace"].startswith(b"java.lang.NumberFormatException")
        assert (errors["__streams.errors.topic"], errors["__streams.errors.partition"],
                errors["__streams.errors.offset"]) == (source.encode(), str(partition).encode(), str(offset).encode())

    shown = cli("-b", apache_kafka.bootstrap, "consume", dlq, "-e", "-o", "jsonl")
    assert shown.exit_code == 0, shown.stderr
    assert sorted((row["key"], row["dead_letter"]) for row in jsonl_rows(shown.stdout)) == [
        ("b", {"exception": "java.lang.NumberFormatException", "message": 'For input string: "x"',
               "topic": source, "partition": 0, "offset": 1}),
        ("d", {"exception": "java.lang.NumberFormatException", "message": 'For input string: "boom"',
               "topic": source, "partition": 1, "offset": 1})]
    table = cli("-b", apache_kafka.bootstrap, "consume", dlq, "-e", "-o", "table")
    assert f'java.lang.NumberFormatException: For input string: "x" (from {source}:0 offset 1)' in table.stdout
    assert "\tat " not in table.stdout, "the stack trace stays out of the table"

    before = end_offsets(apache_kafka, source)
    other = Consumer({"bootstrap.servers": apache_kafka.bootstrap, "group.id": app_id + "-audit"})
    other.commit(offsets=[TopicPartition(source, 0, 1)], asynchronous=False)  # another app reads the source
    other.close()
    planned = cli("-b", apache_kafka.bootstrap, "replay", "--dead-letters", "--from-topic", dlq, "--dry-run",
                  "-o", "json")
    assert planned.exit_code == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert [(t["topic"], t["partition"], t["records"], t["exceptions"]) for t in plan["targets"]] == [
        (source, 0, 1, {"java.lang.NumberFormatException": 1}),
        (source, 1, 1, {"java.lang.NumberFormatException": 1})]
    # everyone reading the source gets the letters again, not only the app that failed them (#84)
    assert plan["readers"] == {source: sorted([app_id, app_id + "-audit"])}
    shown_plan = cli("-b", apache_kafka.bootstrap, "replay", "--dead-letters", "--from-topic", dlq, "--dry-run")
    assert (f"note: {source} is read by 2 group(s) ({', '.join(sorted([app_id, app_id + '-audit']))}): each gets "
            "these records again, not only the app that failed them") in shown_plan.stdout
    assert end_offsets(apache_kafka, source) == before, "a dry run writes nothing"

    sent = cli("-b", apache_kafka.bootstrap, "replay", "--dead-letters", "--from-topic", dlq, "-o", "json")
    assert sent.exit_code == 0, sent.stderr
    assert json.loads(sent.stdout)["records"] == 2
    assert end_offsets(apache_kafka, source) == {0: before[0] + 1, 1: before[1] + 1}
    back = [m for m in read_all(apache_kafka, source) if m.offset() == before[m.partition()]]
    assert [(m.key(), m.value(), m.partition(), m.timestamp()[1]) for m in back] == [r[:4] for r in BAD]
    for message, (*_, headers) in zip(back, BAD):
        own = [(k, v) for k, v in message.headers() or [] if not k.startswith("kstool.replay.")]
        assert own == headers, "the record as it was: its own headers, the error's taken off"
        assert dict(message.headers())["kstool.replay.topic"] == dlq.encode()

    again = cli("-b", apache_kafka.bootstrap, "replay", "--dead-letters", "--from-topic", dlq, "-o", "json")
    assert again.exit_code == 0, again.stderr
    assert (json.loads(again.stdout)["records"], json.loads(again.stdout)["replayed_before"]) == (0, 2)
    assert end_offsets(apache_kafka, source) == {0: before[0] + 1, 1: before[1] + 1}, "sent back once (#84)"
    forced = cli("-b", apache_kafka.bootstrap, "replay", "--dead-letters", "--from-topic", dlq, "--include-replayed",
                 "--dry-run", "-o", "json")
    assert (json.loads(forced.stdout)["records"], json.loads(forced.stdout)["replayed_before"]) == (2, 0)


def test_replay_of_records_that_are_not_dead_letters_writes_nothing(apache_kafka, topic_name):
    create_topic(apache_kafka, topic_name, 1)
    create_topic(apache_kafka, topic_name + "-target", 1)
    _produce(apache_kafka, topic_name, [(b"k", b"v", 0, BASE, [])])
    refused = cli("-b", apache_kafka.bootstrap, "replay", "--dead-letters", "--from-topic", topic_name)
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (f"kstool: error: {topic_name}:0 offset 0 is not a dead letter "
                                      "(no __streams.errors.* headers); nothing was written")
    mixed = cli("-b", apache_kafka.bootstrap, "replay", "--dead-letters", "--from-topic", topic_name,
                "--to-topic", topic_name + "-target", "--now", "--rate", "5/s")
    assert mixed.exit_code == 2
    assert "--dead-letters does not take --rate, --now" in mixed.stderr
    assert end_offsets(apache_kafka, topic_name + "-target") == {0: 0}
