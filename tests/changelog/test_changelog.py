"""Changelog inspection against records built byte by byte in Kafka Streams' layouts."""

from __future__ import annotations

import json
import struct
import subprocess
import time

import pytest
from confluent_kafka import Producer

from tests.conftest import cli
from tests.helpers import KSTOOL, create_topic

# the embedded broker's workarounds and a command group's end-to-end runs: on both brokers
pytestmark = pytest.mark.embedded_tier

T0 = 1_700_000_000_000


def _long(n: int) -> bytes:
    return struct.pack(">q", n)


def _produce(kafka, topic, records):
    producer = Producer(kafka.producer_conf())
    for partition, key, value, ts in records:
        producer.produce(topic, key=key, value=value, partition=partition, timestamp=ts)
    assert producer.flush(10) == 0


def _dump(*args) -> list[dict]:
    result = cli("changelog", "dump", *args, "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_key_value_changelog_compaction_and_describe(kafka, topic_name):
    topic = f"{topic_name}-store-changelog"
    create_topic(kafka, topic, 2, {"cleanup.policy": "compact"})
    records = [
        (0, b"apple", _long(1), T0), (0, b"pear", _long(1), T0 + 1), (0, b"apple", _long(2), T0 + 2),
        (1, b"plum", _long(5), T0 + 3), (1, b"plum", None, T0 + 4), (0, b"pear", None, T0 + 5),
        (0, b"pear", _long(7), T0 + 6), (1, b"fig", _long(9), T0 + 7),
    ]
    _produce(kafka, topic, records)
    expected: dict = {}
    for partition, key, value, _ in records:  # compaction computed independently of kstool
        expected[(partition, key.decode())] = value
    compacted = _dump(topic, "--compact", "--key-format", "string", "--value-format", "long")
    assert {(r["partition"], r["key"]): r["value"] for r in compacted} == {
        k: struct.unpack(">q", v)[0] for k, v in expected.items() if v is not None}
    marked = _dump(topic, "--compact", "--show-tombstones", "--key-format", "string", "--value-format", "long")
    assert [r["key"] for r in marked if r["tombstone"]] == ["plum"]

    doc = json.loads(cli("changelog", "describe", topic, "-o", "json").stdout)
    parts = {p["partition"]: p for p in doc["partitions"]}
    assert (parts[0]["records"], parts[0]["distinct_keys"], parts[0]["tombstones"]) == (5, 2, 1)
    assert (parts[1]["records"], parts[1]["distinct_keys"], parts[1]["tombstones"]) == (3, 2, 1)
    assert doc["total"]["reclaimable_records"] == 8 - 4
    assert (doc["total"]["oldest_timestamp"], doc["total"]["newest_timestamp"]) == (T0, T0 + 7)
    assert doc["layout"]["detected"] == "key-value"

    only = _dump(topic, "--key", "apple", "--key-format", "string", "--value-format", "long")
    assert [r["value"] for r in only] == [1, 2]


def test_window_and_session_layouts_decode(kafka, topic_name):
    window = f"{topic_name}-win-changelog"
    session = f"{topic_name}-sess-changelog"
    create_topic(kafka, window, 1)
    create_topic(kafka, session, 1)
    _produce(kafka, window, [
        (0, _long(42) + struct.pack(">qi", T0, 0), struct.pack(">d", 2.5), T0),
        (0, b"user-1" + struct.pack(">qi", T0 + 60_000, 3), json.dumps({"n": 1}).encode(), T0 + 60_000),
    ])
    _produce(kafka, session, [(0, b"s1" + struct.pack(">qq", T0 + 900, T0 + 100), struct.pack(">i", 7), T0 + 900)])

    [first] = _dump(window, "--key-format", "windowed:long", "--value-format", "double", "--to", "0")
    assert (first["key"], first["window_start"], first["seqnum"], first["value"]) == (42, T0, 0, 2.5)
    second = _dump(window, "--key-format", "windowed:string", "--value-format", "json", "--from", "1")
    assert [(r["key"], r["window_start"], r["seqnum"], r["value"]) for r in second] == [
        ("user-1", T0 + 60_000, 3, {"n": 1})]
    [sess] = _dump(session, "--key-format", "session:string", "--value-format", "int")
    assert (sess["key"], sess["window_start"], sess["window_end"], sess["value"]) == ("s1", T0 + 100, T0 + 900, 7)

    win_doc = json.loads(cli("changelog", "describe", window, "-o", "json").stdout)
    assert win_doc["layout"]["detected"] == "window"
    sess_doc = json.loads(cli("changelog", "describe", session, "-o", "json").stdout)
    assert sess_doc["layout"]["detected"] == "session"


def test_garbage_is_hex_with_a_warning(kafka, topic_name):
    topic = f"{topic_name}-x-changelog"
    create_topic(kafka, topic, 1)
    _produce(kafka, topic, [(0, b"\xff\xfe", b"\x80abc", T0), (0, b"ok", b"fine", T0)])
    result = cli("changelog", "dump", topic, "--key-format", "string", "--value-format", "string", "-o", "jsonl")
    assert result.exit_code == 0
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows[0]["key"] == {"hex": "fffe"} and rows[0]["value"] == {"hex": "80616263"}
    assert rows[1]["key"] == "ok" and rows[1]["value"] == "fine"
    assert "1 key(s) and 1 value(s) could not be decoded" in result.stderr


def test_list_names_app_and_store(kafka, topic_name):
    app = topic_name + "-ks"
    create_topic(kafka, f"{app}-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog", 2,
                 {"cleanup.policy": "compact"})
    from confluent_kafka import Consumer, TopicPartition

    create_topic(kafka, f"{app}-in", 1)
    consumer = Consumer({**kafka.consumer_conf(), "group.id": app})
    consumer.commit(offsets=[TopicPartition(f"{app}-in", 0, 0)], asynchronous=False)
    consumer.close()
    rows = json.loads(cli("changelog", "list", "--app-id", app, "-o", "json").stdout)
    assert rows == [{"topic": f"{app}-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog", "app_id": app,
                     "store": "KSTREAM-AGGREGATE-STATE-STORE-0000000001", "partitions": 2, "records": 0,
                     "cleanup_policy": "compact", "kstool_app": False}]
    typo = cli("changelog", "list", "--app-id", app[:-1] + "x")  # #84: an empty table, exit 0
    assert typo.exit_code == 1 and typo.stdout == ""
    assert typo.stderr.strip() == (f"kstool: error: no application {app[:-1] + 'x'!r}: no changelog topic, consumer "
                                   f"group or kstool app has that id; did you mean {app!r}?")


def test_follow_shows_new_records(kafka, topic_name):
    topic = f"{topic_name}-f-changelog"
    create_topic(kafka, topic, 1)
    _produce(kafka, topic, [(0, b"a", b"1", T0)])
    proc = subprocess.Popen([*KSTOOL, "changelog", "dump", topic, "--follow", "-o", "jsonl"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline())["key"] == "a"
        time.sleep(0.5)
        _produce(kafka, topic, [(0, b"b", b"2", T0 + 1)])
        assert json.loads(proc.stdout.readline())["key"] == "b"
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_compacted_view_is_what_apache_kafkas_log_cleaner_leaves(suite_kafka, tmp_path, monkeypatch, topic_name):
    """`--compact` computes compaction client-side (the embedded broker has no log cleaner):
    it shows the same before Apache Kafka's cleaner runs as after, and what the cleaner left.
    On a broker of its own: the suite's run no cleaner (it would apply window changelogs' retention)."""
    from tests.apache_kafka import KafkaBroker
    from tests.conftest import Kafka

    broker = KafkaBroker(tmp_path / "broker", log_cleaner=True).start()
    try:
        monkeypatch.setenv("KSTOOL_BOOTSTRAP_SERVERS", broker.bootstrap)
        _compacted_by_the_cleaner(Kafka(broker.bootstrap, embedded=False), f"{topic_name}-store-changelog")
    finally:
        broker.stop()


def _compacted_by_the_cleaner(kafka, topic: str) -> None:
    from tests.helpers import read_all, wait_until

    # a segment rolls 100 ms after it opened, and every closed segment is cleanable at once
    create_topic(kafka, topic, 1, {"cleanup.policy": "compact", "segment.ms": "100", "min.compaction.lag.ms": "0",
                                   "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100"})
    written = [(0, b"k%d" % (i % 10), None if i % 10 == 3 and i > 50 else _long(i), T0 + i) for i in range(100)]
    _produce(kafka, topic, written)
    for i in range(3):  # each a segment of its own: the log's last is never cleaned
        time.sleep(0.3)
        _produce(kafka, topic, [(0, b"k%d" % i, _long(1000 + i), T0 + 1000 + i)])
    written += [(0, b"k%d" % i, _long(1000 + i), T0 + 1000 + i) for i in range(3)]
    latest = {key.decode(): struct.unpack(">q", value)[0] for key, value in
              {key: value for _, key, value, _ in written}.items() if value is not None}

    def view() -> dict:
        return {r["key"]: r["value"] for r in _dump(topic, "--compact", "--key-format", "string", "--value-format", "long")}

    assert view() == latest
    wait_until(lambda: len(read_all(kafka, topic)) < 20, "Apache Kafka's log cleaner to compact the topic")
    cleaned = {}
    for record in read_all(kafka, topic):
        cleaned[record.key().decode()] = record.value()
    assert {k: struct.unpack(">q", v)[0] for k, v in cleaned.items() if v is not None} == latest
    assert view() == latest


def test_dump_from_minus_n_starts_at_the_last_n_records_of_each_partition_as_consume_does(kafka, topic_name):
    topic = f"{topic_name}-store-changelog"
    create_topic(kafka, topic, 2)
    _produce(kafka, topic, [(p, f"k{i}".encode(), _long(i), T0 + i) for i in range(5) for p in (0, 1)])
    dumped = _dump(topic, "--from", "-2", "--key-format", "string", "--value-format", "long")
    assert sorted((r["partition"], r["key"]) for r in dumped) == [(0, "k3"), (0, "k4"), (1, "k3"), (1, "k4")]
    consumed = cli("consume", topic, "--from", "-2", "-e", "-o", "jsonl")
    assert sorted((r["partition"], r["offset"]) for r in map(json.loads, consumed.stdout.splitlines())) == sorted(
        (r["partition"], r["offset"]) for r in dumped)


def test_a_changelog_no_kstool_app_wrote_is_decoded_from_its_bytes_without_flags(kafka, topic_name):
    """A Kafka Streams count store's changelog: string keys, 8-byte longs (Serdes.Long)."""
    topic = f"{topic_name}-counts-changelog"
    create_topic(kafka, topic, 1, {"cleanup.policy": "compact"})
    _produce(kafka, topic, [(0, b"apple", _long(3), T0), (0, b"pear", _long(12), T0 + 1)])
    assert [(r["key"], r["value"]) for r in _dump(topic)] == [("apple", 3), ("pear", 12)]
    doc = json.loads(cli("changelog", "describe", topic, "-o", "json").stdout)
    assert doc["layout"]["formats"]["value"] == "long" and doc["layout"]["formats"]["source"] == "detected"
