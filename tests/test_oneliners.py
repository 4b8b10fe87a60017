"""Kafka one-liners against the real broker: topics, produce/consume round trips, time
bounds, groups and lag, and the errors users hit."""

from __future__ import annotations

import base64
import json
import os
import pty
import random
import re
import select
import struct
import subprocess
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import KSTOOL, cli, cli_subprocess
from tests.helpers import read_all


def _create(kafka, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=10)


def _produce_raw(kafka, topic: str, records: list[dict]) -> None:
    producer = Producer(kafka.producer_conf())
    for r in records:
        producer.produce(topic, key=r["key"], value=r["value"], partition=r["partition"],
                         timestamp=r["timestamp"], headers=r.get("headers") or None)
    assert producer.flush(10) == 0


def _jsonl(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _bytes(field):
    if field is None:
        return None
    if isinstance(field, dict):
        return base64.b64decode(field["base64"])
    return field.encode("utf-8")


def test_consume_jsonl_is_byte_identical_with_partitions_and_offsets(kafka, topic_name):
    _create(kafka, topic_name, 2)
    records = [
        {"key": b"k1", "value": b"plain", "partition": 0, "timestamp": 1_700_000_000_000},
        {"key": None, "value": b"\xff\xfe not utf8", "partition": 0, "timestamp": 1_700_000_000_001},
        {"key": "ünï".encode(), "value": None, "partition": 1, "timestamp": 1_700_000_000_002,
         "headers": [("h1", b"v1"), ("bin", b"\x00\x80")]},
        {"key": b"", "value": b"", "partition": 1, "timestamp": 1_700_000_000_003},
    ]
    _produce_raw(kafka, topic_name, records)
    result = cli("consume", topic_name, "-e", "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    got = sorted(_jsonl(result.stdout), key=lambda e: (e["partition"], e["offset"]))
    assert [(e["partition"], e["offset"]) for e in got] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for env, rec in zip(got, records):
        assert _bytes(env["key"]) == rec["key"]
        assert _bytes(env["value"]) == rec["value"]
        assert env["timestamp"] == rec["timestamp"]
        assert [(h, _bytes(v)) for h, v in env["headers"]] == (rec.get("headers") or [])
        assert env["topic"] == topic_name


def test_produce_jsonl_round_trip_is_identical(kafka, topic_name):
    source, copy = topic_name, topic_name + "-copy"
    _create(kafka, source, 2)
    _create(kafka, copy, 2)
    _produce_raw(kafka, source, [
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
    assert [s[2] for s in strip(_jsonl(dump))] == [s[2] for s in strip(_jsonl(again))]


def test_produce_text_with_key_delimiter_and_number_formats(kafka, topic_name):
    _create(kafka, topic_name, 1)
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
    decoded = _jsonl(cli("consume", topic_name, "-e", "-o", "jsonl", "--value-format", "long").stdout)
    assert [e["value"] for e in decoded] == [1, -2]


def test_consume_from_time_returns_exactly_the_later_records(kafka, topic_name):
    _create(kafka, topic_name, 2)
    rng = random.Random(7)
    base = 1_710_000_000_000
    records = []
    for p in range(2):
        ts = base
        for i in range(60):
            ts += rng.randint(0, 3) * 1000  # non-decreasing, with equal neighbours
            records.append({"key": f"{p}-{i}".encode(), "value": b"v", "partition": p, "timestamp": ts})
    _produce_raw(kafka, topic_name, records)
    for cut in (base - 1, base + 40_000, base + 75_000, base + 10**9):
        result = cli("consume", topic_name, "--from-time", str(cut), "-e", "-o", "jsonl")
        assert result.exit_code == 0, result.stderr
        got = sorted(e["key"] for e in _jsonl(result.stdout))
        expected = sorted(r["key"].decode() for r in records if r["timestamp"] >= cut)
        assert got == expected, cut


def test_consume_time_range_and_last_n(kafka, topic_name):
    _create(kafka, topic_name, 1)
    base = 1_720_000_000_000
    _produce_raw(kafka, topic_name, [{"key": str(i).encode(), "value": b"x", "partition": 0,
                                      "timestamp": base + i * 1000} for i in range(30)])
    ranged = _jsonl(cli("consume", topic_name, "--from-time", str(base + 5000),
                        "--to-time", str(base + 9000), "-o", "jsonl").stdout)
    assert [e["key"] for e in ranged] == ["5", "6", "7", "8", "9"]
    last = _jsonl(cli("consume", topic_name, "--from", "-3", "-e", "-o", "jsonl").stdout)
    assert [e["offset"] for e in last] == [27, 28, 29]
    limited = _jsonl(cli("consume", topic_name, "--from", "10", "-n", "2", "-o", "jsonl").stdout)
    assert [e["offset"] for e in limited] == [10, 11]


def test_groups_describe_shows_lag_of_committed_offsets(kafka, topic_name):
    _create(kafka, topic_name, 2)
    _produce_raw(kafka, topic_name, [{"key": None, "value": b"x", "partition": i % 2,
                                      "timestamp": 1_000 + i} for i in range(10)])
    group = topic_name + "-g"
    consumer = Consumer({**kafka.consumer_conf(), "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 2), TopicPartition(topic_name, 1, 5)],
                    asynchronous=False)
    consumer.close()
    result = cli("groups", "describe", group, "-o", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    parts = {p["partition"]: p for p in doc["partitions"]}
    assert (parts[0]["committed"], parts[0]["end_offset"], parts[0]["lag"]) == (2, 5, 3)
    assert (parts[1]["committed"], parts[1]["end_offset"], parts[1]["lag"]) == (5, 5, 0)
    assert doc["total_lag"] == 3
    listed = json.loads(cli("groups", "list", "-o", "json").stdout)
    assert group in [g["group"] for g in listed]


def test_groups_describe_time_lag_is_the_age_of_the_oldest_unprocessed_record(kafka, topic_name):
    _create(kafka, topic_name, 2)
    base = int(time.time() * 1000) - 3_600_000  # an hour ago
    _produce_raw(kafka, topic_name, [{"key": None, "value": b"x", "partition": 0, "timestamp": base + i * 60_000}
                                     for i in range(3)]  # p0: records 60 and 59 min old, and 58
                 + [{"key": None, "value": b"y", "partition": 1, "timestamp": base}])
    group = topic_name + "-g"
    consumer = Consumer({**kafka.consumer_conf(), "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 1), TopicPartition(topic_name, 1, 1)],
                    asynchronous=False)
    consumer.close()
    before = int(time.time() * 1000)
    result = cli("groups", "describe", group, "--time-lag", "-o", "json")
    after = int(time.time() * 1000)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    parts = {p["partition"]: p for p in doc["partitions"]}
    oldest = base + 60_000  # p0 committed 1: offset 1 waits; p1 is caught up
    assert before - oldest <= parts[0]["time_lag_ms"] <= after - oldest
    assert parts[1]["time_lag_ms"] == 0 and doc["max_time_lag_ms"] == parts[0]["time_lag_ms"]
    plain = json.loads(cli("groups", "describe", group, "-o", "json").stdout)
    assert "max_time_lag_ms" not in plain and "time_lag_ms" not in plain["partitions"][0]
    table = cli("groups", "describe", group, "--time-lag").stdout  # for people: minutes and seconds
    assert "TIME LAG" in table and re.search(r"max time lag 59m\d\ds", table) and re.search(r" 59m\d\ds\n", table)


def test_consume_with_group_commits_progress(kafka, topic_name):
    _create(kafka, topic_name, 1)
    _produce_raw(kafka, topic_name, [{"key": None, "value": b"x", "partition": 0,
                                      "timestamp": 1_000 + i} for i in range(4)])
    group = topic_name + "-reader"
    assert cli("consume", topic_name, "-e", "--group", group).exit_code == 0
    doc = json.loads(cli("groups", "describe", group, "-o", "json").stdout)
    assert [(p["committed"], p["lag"]) for p in doc["partitions"]] == [(4, 0)]


def test_topics_describe_counts_records_and_configs(kafka, topic_name):
    assert cli("topics", "create", topic_name, "-p", "2", "--config", "cleanup.policy=compact").exit_code == 0
    cli("produce", topic_name, "--partition", "1", input="a\nb\nc\n")
    doc = json.loads(cli("topics", "describe", topic_name, "-o", "json").stdout)
    assert [p["records"] for p in doc["partitions"]] == [0, 3]
    assert doc["total_records"] == 3
    assert doc["configs"].get("cleanup.policy") == "compact"


def test_errors_are_one_line(kafka, topic_name):
    unknown = cli("consume", "no-such-topic-" + topic_name, "-e")
    assert unknown.exit_code == 1 and "does not exist" in unknown.stderr
    assert unknown.stderr.count("\n") == 1
    _create(kafka, topic_name, 1)
    bad = cli("produce", topic_name, "--format", "jsonl", input='{"value": "ok"}\n{oops\n{"value": "never"}\n')
    assert bad.exit_code == 1 and "line 2" in bad.stderr and "1 record(s) before it" in bad.stderr
    written = _jsonl(cli("consume", topic_name, "-e", "-o", "jsonl").stdout)
    assert [e["value"] for e in written] == ["ok"]
    bad_time = cli("consume", topic_name, "--from-time", "yesterday-ish", "-e")
    assert bad_time.exit_code == 2 and "invalid time" in bad_time.stderr
    assert "Traceback" not in bad.stderr + bad_time.stderr + unknown.stderr


def test_produce_skip_reports_bad_lines(kafka, topic_name):
    _create(kafka, topic_name, 1)
    result = cli("produce", topic_name, "--format", "jsonl", "--on-error", "skip",
                 input='{"value": "a"}\n[1]\n{"value": "b"}\n')
    assert result.exit_code == 0
    assert "skipped line 2" in result.stderr and "wrote 2 record(s)" in result.stderr


def test_kafka_tool_spellings_and_kcat_habits_work_or_say_what_to_type(kafka, topic_name):
    """#41: `--topic`/`--group` as kafka-topics.sh and kafka-consumer-groups.sh spell them; kcat's
    `-o -3` (an offset) names --from; a group's state is the same in list and describe."""
    created = cli("topics", "create", topic_name, "-p", "1")
    assert created.exit_code == 0 and f"created topic {topic_name} (1 partition)\n" == created.stderr
    cli("produce", topic_name, input="a\nb\nc\n")
    by_flag = cli("topics", "describe", "--topic", topic_name, "-o", "json")
    assert by_flag.exit_code == 0 and json.loads(by_flag.stdout)["total_records"] == 3
    assert by_flag.stdout == cli("topics", "describe", topic_name, "-o", "json").stdout
    both = cli("topics", "describe", topic_name, "--topic", "other")
    assert both.exit_code == 2 and "give the topic once" in both.stderr
    neither = cli("topics", "describe")
    assert neither.exit_code == 2 and "missing TOPIC (or --topic TOPIC)" in neither.stderr

    kcat = cli("consume", topic_name, "-o", "-3")
    assert kcat.exit_code == 2 and "give the start as --from -3" in kcat.stderr
    assert cli("consume", topic_name, "-o", "yaml").stderr.count("--from") == 0  # no offset, no hint

    group = topic_name + "-g"
    consumer = Consumer({**kafka.consumer_conf(), "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
    consumer.close()
    described = json.loads(cli("groups", "describe", "--group", group, "-o", "json").stdout)
    listed = {g["group"]: g["state"] for g in json.loads(cli("groups", "list", "-o", "json").stdout)}
    assert described["total_lag"] == 2 and listed[group] == described["state"] != "UNKNOWN"


def test_tables_show_times_for_people_and_json_keeps_the_numbers(kafka, topic_name):
    _create(kafka, topic_name, 1)
    _produce_raw(kafka, topic_name, [{"key": b"k", "value": b"v", "partition": 0, "timestamp": 1_000}])
    assert "1970-01-01T00:00:01.000Z" in cli("consume", topic_name, "-e", "-o", "table").stdout
    assert [r["timestamp"] for r in _jsonl(cli("consume", topic_name, "-e", "-o", "jsonl").stdout)] == [1_000]
    described = cli("changelog", "describe", topic_name).stdout
    assert described.count("1970-01-01T00:00:01.000Z") == 2  # oldest and newest
    # --tz: tables in that zone (Asia/Kolkata is UTC+05:30 all year), JSON still epoch ms
    assert "1970-01-01T05:30:01.000+05:30" in cli("consume", topic_name, "-e", "-o", "table", "--tz", "Asia/Kolkata").stdout
    assert [r["timestamp"] for r in _jsonl(cli("consume", topic_name, "-e", "-o", "jsonl", "--tz", "Asia/Kolkata").stdout)] == [1_000]
    assert "1970-01-01T00:00:01.000Z" in cli("consume", topic_name, "-e", "-o", "table").stdout  # one invocation's
    unknown = cli("--tz", "Mars/Base", "consume", topic_name, "-e")
    assert unknown.exit_code == 2 and "unknown time zone 'Mars/Base'" in unknown.stderr


def test_state_get_of_a_missing_key_prints_only_the_error(kafka, topic_name):
    changelog = topic_name + "-changelog"
    _create(kafka, changelog, 1)
    _produce_raw(kafka, changelog, [{"key": b"k1", "value": (7).to_bytes(8, "big"), "partition": 0,
                                     "timestamp": 1_000}])
    source = ("--changelog-topic", changelog, "--key-format", "string", "--value-format", "long")
    missing = cli("state", "get", *source, "nope")
    assert (missing.exit_code, missing.stdout, missing.stderr) == (1, "", "kstool: error: not found: nope\n")
    as_json = cli("state", "get", *source, "nope", "-o", "json")
    assert as_json.exit_code == 1 and json.loads(as_json.stdout) == []
    found = cli("state", "get", *source, "k1", "nope", "-o", "json")
    assert found.exit_code == 1 and [e["value"] for e in json.loads(found.stdout)] == [7]


def test_windowed_keys_decode_and_round_trip_and_another_layout_is_an_error(kafka, topic_name):
    # Kafka Streams' output keys: TimeWindowedSerializer -> WindowKeySchema.toBinary(Windowed, ..)
    # writes key ‖ start (8 bytes); SessionWindowedSerializer -> SessionKeySchema.toBinary writes
    # key ‖ end ‖ start (apache/kafka streams/.../state/internals/WindowKeySchema.java, SessionKeySchema.java)
    windowed, sessions, copy = f"{topic_name}-w", f"{topic_name}-s", f"{topic_name}-copy"
    for topic in (windowed, sessions, copy):
        _create(kafka, topic, 1)
    keys = [b"user42" + struct.pack(">q", 1_700_000_100_000), "ü".encode() + struct.pack(">q", 0)]
    _produce_raw(kafka, windowed, [{"key": k, "value": struct.pack(">q", n), "partition": 0,
                                    "timestamp": 1_700_000_200_000} for n, k in enumerate(keys)])
    session_key = b"user42" + struct.pack(">qq", 1_700_000_160_000, 1_700_000_100_000)
    _produce_raw(kafka, sessions, [{"key": session_key, "value": b"x", "partition": 0, "timestamp": 5}])

    shown = cli("consume", windowed, "-e", "-o", "jsonl", "--key-format", "windowed:string", "--value-format", "long")
    assert shown.exit_code == 0, shown.stderr
    assert [e["key"] for e in _jsonl(shown.stdout)] == [{"key": "user42", "start": 1_700_000_100_000},
                                                        {"key": "ü", "start": 0}]
    written = cli("produce", copy, "--format", "jsonl", "--key-format", "windowed:string", "--value-format", "long",
                  input=shown.stdout)
    assert written.exit_code == 0, written.stderr
    assert [m.key() for m in read_all(kafka, copy)] == keys  # the same bytes back

    session = cli("consume", sessions, "-e", "-o", "jsonl", "--key-format", "session:string")
    assert _jsonl(session.stdout)[0]["key"] == {"key": "user42", "start": 1_700_000_100_000, "end": 1_700_000_160_000}

    # a time-windowed key read as a session key: an error in its place and a warning, not garbage
    wrong = cli("consume", windowed, "-e", "-o", "jsonl", "--key-format", "session:string")
    assert wrong.exit_code == 0
    assert all(set(e["key"]) == {"error", "hex"} for e in _jsonl(wrong.stdout))
    assert "2 key(s)/value(s) did not decode" in wrong.stderr
    # ... and as a window store's key (key ‖ start ‖ seqnum) by changelog dump: hex, a warning naming the way
    dumped = cli("changelog", "dump", windowed, "--key-format", "windowed:string", "--value-format", "long",
                 "-o", "jsonl")
    assert [r["key"] for r in _jsonl(dumped.stdout)] == [{"hex": k.hex()} for k in keys]
    assert "time-windowed:FMT" in dumped.stderr
    dumped = cli("changelog", "dump", windowed, "--key-format", "time-windowed:string", "--value-format", "long",
                 "-o", "jsonl")
    assert [(r["key"], r["window_start"]) for r in _jsonl(dumped.stdout)] == [("user42", 1_700_000_100_000),
                                                                              ("ü", 0)]

    bad = cli("produce", copy, "--format", "jsonl", "--key-format", "session:string",
              input='{"key": {"key": "k", "start": 10, "end": 5}, "value": "v"}\n')
    assert bad.exit_code != 0 and "ends at or after its start" in bad.stderr


def _on_a_terminal(*args: str, until: bytes, timeout: float = 60) -> bytes:
    """kstool with stdout and stderr on a pseudo-terminal, as an operator's shell runs it: what it
    wrote there up to `until` (or until it ended)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*KSTOOL, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + timeout
    try:
        while until not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the process ended and closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    return seen


def test_a_terminal_gets_control_bytes_escaped_and_a_follow_says_how_it_ends(kafka, topic_name):
    _create(kafka, topic_name, 1)
    value = b"red \x1b[31malert\x07 \xff end"
    _produce_raw(kafka, topic_name, [{"key": b"k", "value": value, "partition": 0, "timestamp": 1}])
    shown = _on_a_terminal("consume", topic_name, "-e", "--value-format", "raw", until=b"consumed 1 record")
    assert b"red \\x1b[31malert\\x07 \\xff end" in shown and b"\x1b[31m" not in shown
    piped = cli_subprocess("consume", topic_name, "-e", "--value-format", "raw")
    assert piped.stdout_bytes == value + b"\n"  # a pipe gets the bytes as they are
    followed = _on_a_terminal("consume", topic_name, "--from", "-1", until=b"Ctrl-C")
    assert b"following new records (-e stops at the end" in followed


def test_a_refused_connection_fails_at_once(fresh_home):
    # --timeout 600: were it waited out, cli_subprocess's own 60 s limit would fail the test
    result = cli_subprocess("-b", "127.0.0.1:1", "--timeout", "600", "topics", "list", timeout=60)
    assert result.exit_code == 1 and "connection refused" in result.stderr
    assert result.stderr.count("\n") == 1


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
