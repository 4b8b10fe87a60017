"""kstool consume: byte-identical JSONL, time bounds, last N, group commits, raw values, a terminal's
escaping and follow."""

from __future__ import annotations

import json
import os
import pty
import random
import select
import subprocess
import time

import pytest

from tests.conftest import cli, cli_subprocess
from tests.helpers import KSTOOL, T0, create_topic, field_bytes, jsonl_rows, produce_batched, produce_records

# the embedded broker's workarounds and a command group's end-to-end runs: on both brokers
pytestmark = pytest.mark.embedded_tier


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


def test_raw_value_format_writes_the_bytes_as_they_are(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    payload = bytes(range(256))
    produce_batched(kafka, topic_name, [(None, payload)])
    result = cli("consume", topic_name, "-e", "--value-format", "raw", "-f", "%s")
    assert result.stdout_bytes == payload
    as_json = json.loads(cli("consume", topic_name, "-e", "--value-format", "raw", "-o", "jsonl").stdout)
    assert as_json["value"]["base64"]


def test_consume_jsonl_is_byte_identical_with_partitions_and_offsets(kafka, topic_name):
    create_topic(kafka, topic_name, 2)
    records = [
        {"key": b"k1", "value": b"plain", "partition": 0, "timestamp": 1_700_000_000_000},
        {"key": None, "value": b"\xff\xfe not utf8", "partition": 0, "timestamp": 1_700_000_000_001},
        {"key": "ünï".encode(), "value": None, "partition": 1, "timestamp": 1_700_000_000_002,
         "headers": [("h1", b"v1"), ("bin", b"\x00\x80")]},
        {"key": b"", "value": b"", "partition": 1, "timestamp": 1_700_000_000_003},
    ]
    produce_records(kafka, topic_name, records)
    result = cli("consume", topic_name, "-e", "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    got = sorted(jsonl_rows(result.stdout), key=lambda e: (e["partition"], e["offset"]))
    assert [(e["partition"], e["offset"]) for e in got] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for env, rec in zip(got, records):
        assert field_bytes(env["key"]) == rec["key"]
        assert field_bytes(env["value"]) == rec["value"]
        assert env["timestamp"] == rec["timestamp"]
        assert [(h, field_bytes(v)) for h, v in env["headers"]] == (rec.get("headers") or [])
        assert env["topic"] == topic_name


def test_consume_from_time_returns_exactly_the_later_records(kafka, topic_name):
    create_topic(kafka, topic_name, 2)
    rng = random.Random(7)
    base = 1_710_000_000_000
    records = []
    for p in range(2):
        ts = base
        for i in range(60):
            ts += rng.randint(0, 3) * 1000  # non-decreasing, with equal neighbours
            records.append({"key": f"{p}-{i}".encode(), "value": b"v", "partition": p, "timestamp": ts})
    produce_records(kafka, topic_name, records)
    for cut in (base - 1, base + 40_000, base + 75_000, base + 10**9):
        result = cli("consume", topic_name, "--from-time", str(cut), "-e", "-o", "jsonl")
        assert result.exit_code == 0, result.stderr
        got = sorted(e["key"] for e in jsonl_rows(result.stdout))
        expected = sorted(r["key"].decode() for r in records if r["timestamp"] >= cut)
        assert got == expected, cut


def test_consume_time_range_and_last_n(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    base = 1_720_000_000_000
    produce_records(kafka, topic_name, [{"key": str(i).encode(), "value": b"x", "partition": 0,
                                      "timestamp": base + i * 1000} for i in range(30)])
    ranged = jsonl_rows(cli("consume", topic_name, "--from-time", str(base + 5000),
                        "--to-time", str(base + 9000), "-o", "jsonl").stdout)
    assert [e["key"] for e in ranged] == ["5", "6", "7", "8", "9"]
    last = jsonl_rows(cli("consume", topic_name, "--from", "-3", "-e", "-o", "jsonl").stdout)
    assert [e["offset"] for e in last] == [27, 28, 29]
    limited = jsonl_rows(cli("consume", topic_name, "--from", "10", "-n", "2", "-o", "jsonl").stdout)
    assert [e["offset"] for e in limited] == [10, 11]


def test_consume_with_group_commits_progress(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    produce_records(kafka, topic_name, [{"key": None, "value": b"x", "partition": 0,
                                      "timestamp": 1_000 + i} for i in range(4)])
    group = topic_name + "-reader"
    assert cli("consume", topic_name, "-e", "--group", group).exit_code == 0
    doc = json.loads(cli("groups", "describe", group, "-o", "json").stdout)
    assert [(p["committed"], p["lag"]) for p in doc["partitions"]] == [(4, 0)]


def test_a_terminal_gets_control_bytes_escaped_and_a_follow_says_how_it_ends(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    value = b"red \x1b[31malert\x07 \xff end"
    produce_records(kafka, topic_name, [{"key": b"k", "value": value, "partition": 0, "timestamp": 1}])
    shown = _on_a_terminal("consume", topic_name, "-e", "--value-format", "raw", until=b"consumed 1 record")
    assert b"red \\x1b[31malert\\x07 \\xff end" in shown and b"\x1b[31m" not in shown
    piped = cli_subprocess("consume", topic_name, "-e", "--value-format", "raw")
    assert piped.stdout_bytes == value + b"\n"  # a pipe gets the bytes as they are
    followed = _on_a_terminal("consume", topic_name, "--from", "-1", until=b"Ctrl-C")
    assert b"following new records (-e stops at the end" in followed


def test_records_deleted_while_a_bounded_read_runs_end_it_instead_of_hanging(on_apache_kafka, topic_name,
                                                                              monkeypatch):
    """Retention or DeleteRecords may take records between the plan (start, stop) and the first
    fetch: the read starts at the new log start and ends at the partition's end, with what is
    left. It used to wait for ever for a record at the stop offset (a restore hung so on
    Apache Kafka, whose cleaner had applied a window changelog's retention)."""
    import threading

    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from kstool.config import build_client_config
    from kstool.kafka import consume as reading
    from kstool.kafka.client import KafkaClients

    kafka = on_apache_kafka
    create_topic(kafka, topic_name, 1)
    produce_records(kafka, topic_name, [{"key": None, "value": b"v%d" % i, "partition": 0, "timestamp": T0 + i}
                                                   for i in range(10)])
    clients = KafkaClients(build_client_config())
    options = reading.ConsumeOptions(topic_name, exit_at_end=True)
    stale = reading.plan_positions(clients, options)
    assert (stale.start, stale.stop) == ({(topic_name, 0): 0}, {(topic_name, 0): 10})
    deleted = TopicPartition(topic_name, 0, 7)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})  # kept: its futures die with it
    admin.delete_records([deleted])[deleted].result(10)
    monkeypatch.setattr(reading, "plan_positions", lambda *_: stale)  # the plan made before the deletion
    read: list = []
    reader = threading.Thread(target=lambda: read.extend(reading.consume(clients, options)), daemon=True)
    reader.start()
    reader.join(60)  # a hang guard
    assert not reader.is_alive(), "the read never ended"
    assert [r.offset for r in read] == [7, 8, 9]
