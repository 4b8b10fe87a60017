"""kstool consume: byte-identical JSONL, time bounds, last N, group commits, raw values, a terminal's
escaping and follow."""

from __future__ import annotations

import json
import os
import pty
import random
import select
import shutil
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


# keys, nulls, binary bytes, headers (a null one among them) and text that is not ASCII; and what
# kcat 1.7.1 (librdkafka 2.0.2, Debian's) printed for them with `-C -e -f FORMAT`
KCAT_CORPUS = [(b"k1", b"plain value", None), (None, b"null key", None), (b"k3", None, None),
               (b"bin\x00\xff", b"\x00\x01\xfe\xff", None), (b"k5", b"with headers", [("h1", b"v1"), ("h2", b"v2")]),
               (b"", b"", [("only", None)]), (b"k7", "ünïcode ✓".encode(), None)]
KCAT_PRINTED = {
    "%k|%s|%p|%o|%T|%K|%S\\n": b"k1|plain value|0|0|1000|2|11\n|null key|0|1|1001|-1|8\nk3||0|2|1002|2|-1\n"
                               b"bin\x00\xff|\x00\x01\xfe\xff|0|3|1003|5|4\nk5|with headers|0|4|1004|2|12\n"
                               b"||0|5|1005|0|0\nk7|\xc3\xbcn\xc3\xafcode \xe2\x9c\x93|0|6|1006|2|13\n",
    "%h\\n": b"\n\n\n\nh1=v1,h2=v2\nonly=NULL\n\n",
    "key=%k %S%%\\t%T\\n": b"key=k1 11%\t1000\nkey= 8%\t1001\nkey=k3 -1%\t1002\nkey=bin\x00\xff 4%\t1003\n"
                          b"key=k5 12%\t1004\nkey= 0%\t1005\nkey=k7 13%\t1006\n",
}


def test_a_format_prints_what_kcat_prints(kafka, topic_name):
    """Byte for byte, with raw keys and values as kcat shows them; and with kstool's default
    (string) where every one is text. Against the live kcat too where one is installed."""
    create_topic(kafka, topic_name, 1)
    produce_records(kafka, topic_name, [{"key": key, "value": value, "partition": 0, "timestamp": 1000 + i,
                                         "headers": headers} for i, (key, value, headers) in enumerate(KCAT_CORPUS)])
    kcat = shutil.which("kcat")
    for fmt, printed in KCAT_PRINTED.items():
        raw = cli_subprocess("consume", topic_name, "-e", "-f", fmt, "--key-format", "raw", "--value-format", "raw")
        assert (raw.exit_code, raw.stdout_bytes) == (0, printed), fmt
        if kcat is not None and not kafka.embedded:  # Debian's kcat fails on the embedded broker (README)
            live = subprocess.run([kcat, "-b", kafka.bootstrap, "-C", "-t", topic_name, "-e", "-q", "-f",
                                   fmt.replace("\\n", "\n")], capture_output=True, timeout=60)
            assert live.stdout == printed, fmt
    text = cli_subprocess("consume", topic_name, "-e", "-f", "%k|%s|%p|%o|%T|%K|%S\\n", "--to-time", "1002")
    assert text.stdout_bytes == KCAT_PRINTED["%k|%s|%p|%o|%T|%K|%S\\n"].split(b"\nbin")[0] + b"\n"


def test_a_bounded_read_across_many_batches_prints_and_commits_exactly_its_records(kafka, topic_name):
    """-n and -e cut inside librdkafka's batches; what --group commits is what was printed."""
    create_topic(kafka, topic_name, 3)
    produce_batched(kafka, topic_name, [(f"k{i % 50}".encode(), f"v{i}".encode()) for i in range(7_000)])
    every = cli_subprocess("consume", topic_name, "-e", "-f", "%p %o %s\\n")
    assert every.exit_code == 0 and len(set(every.stdout.splitlines())) == 7_000
    assert sorted(line.split()[2] for line in every.stdout.splitlines()) == sorted(f"v{i}" for i in range(7_000))
    group = topic_name + "-reader"
    first = cli_subprocess("consume", topic_name, "-n", "2345", "--group", group, "-f", "%p %o\\n")
    assert first.exit_code == 0 and len(first.stdout.splitlines()) == 2345
    printed: dict[int, int] = {}
    for line in first.stdout.splitlines():
        partition, offset = map(int, line.split())
        printed[partition] = max(printed.get(partition, -1), offset + 1)
    doc = json.loads(cli("groups", "describe", group, "-o", "json").stdout)
    assert {p["partition"]: p["committed"] for p in doc["partitions"] if p["committed"]} == printed
    rest = cli_subprocess("consume", topic_name, "-e", "--from", "stored", "--group", group, "-f", "%p %o\\n")
    # a partition without a commit is read from its end (auto.offset.reset=latest)
    positions = [tuple(map(int, line.split()[:2])) for line in every.stdout.splitlines()]
    assert sorted(tuple(map(int, line.split())) for line in rest.stdout.splitlines()) == sorted(
        (p, o) for p, o in positions if p in printed and o >= printed[p])
