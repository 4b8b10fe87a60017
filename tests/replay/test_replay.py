"""kstool replay and kstool reprocess against the real broker (and Spark for reprocess)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.conftest import cli
from tests.helpers import KSTOOL, as_long, create_topic, end_offsets, latest_per_key, produce_values, read_all
from tests.isolation import LogWatch, read_committed
from tests.oracles import word_counts as oracle

PROVENANCE = {"kstool.replay.topic", "kstool.replay.partition", "kstool.replay.offset",
              "kstool.replay.file", "kstool.replay.line"}
BASE = 1_740_000_000_000


def _source(kafka, topic, per_partition=50, partitions=2):
    create_topic(kafka, topic, partitions)
    producer = Producer(kafka.producer_conf())
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, key=None if i % 10 == 0 else f"k{p}-{i}".encode(),
                             value=None if i % 13 == 0 else bytes([i, p, 255]), partition=p,
                             timestamp=BASE + i * 1000, headers=[("n", str(i).encode()), ("raw", b"\x00\xff")])
    assert producer.flush(10) == 0


def _user_view(msg):
    headers = [(k, v) for k, v in (msg.headers() or []) if k not in PROVENANCE]
    return msg.key(), msg.value(), headers, msg.timestamp()[1]


@pytest.mark.embedded_tier
def test_time_range_replay_is_exact_and_byte_identical(kafka, topic_name):
    source, target = topic_name, topic_name + "-copy"
    _source(kafka, source)
    create_topic(kafka, target, 2)
    low, high = BASE + 12_000, BASE + 30_000
    result = cli("replay", "--from-topic", source, "--to-topic", target, "--from-time", str(low),
                 "--to-time", str(high), "-o", "json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    expected = [m for m in read_all(kafka, source) if low <= m.timestamp()[1] <= high]
    copied = read_all(kafka, target)
    assert summary["records"] == len(expected) == len(copied) == 2 * 19
    for p in range(2):
        want = [_user_view(m) for m in expected if m.partition() == p]
        got = [_user_view(m) for m in copied if m.partition() == p]
        assert got == want  # same partition, same order, same bytes
    for msg in copied:
        headers = dict(msg.headers())
        assert headers["kstool.replay.topic"] == source.encode()
        src = [m for m in expected if m.partition() == int(headers["kstool.replay.partition"])
               and m.offset() == int(headers["kstool.replay.offset"])]
        assert len(src) == 1 and _user_view(src[0]) == _user_view(msg)
    parts = {p["partition"]: p for p in summary["partitions"]}
    assert (parts[0]["first_offset"], parts[0]["last_offset"]) == (12, 30)


def test_dump_file_replay_round_trip(kafka, topic_name, tmp_path):
    source, target = topic_name, topic_name + "-restored"
    _source(kafka, source, per_partition=20)
    create_topic(kafka, target, 2)
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(cli("consume", source, "-e", "-o", "jsonl").stdout_bytes)
    result = cli("replay", "--from-file", str(dump), "--to-topic", target)
    assert result.exit_code == 0, result.stderr
    original = [(m.partition(), _user_view(m)) for m in read_all(kafka, source)]
    restored = [(m.partition(), _user_view(m)) for m in read_all(kafka, target)]
    assert restored == original
    lines = dump.read_text().splitlines()
    for msg in read_all(kafka, target):  # provenance: the dump line each record came from
        headers = dict(msg.headers())
        assert headers["kstool.replay.file"] == str(dump).encode()
        env = json.loads(lines[int(headers["kstool.replay.line"]) - 1])
        assert (env["partition"], env["timestamp"]) == (msg.partition(), msg.timestamp()[1])


def test_rate_filter_dry_run_and_same_topic(kafka, topic_name):
    source, target = topic_name, topic_name + "-slow"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [str(i).encode() for i in range(300)])
    create_topic(kafka, target, 1)
    dry = json.loads(cli("replay", "--from-topic", source, "--to-topic", target, "--dry-run",
                         "--to-offset", "0:99", "-o", "json").stdout)
    assert dry["records"] == 100 and dry["dry_run"] is True
    assert end_offsets(kafka, target) == {0: 0}

    result = cli("replay", "--from-topic", source, "--to-topic", target, "--rate", "200/s", "--now")
    assert result.exit_code == 0, result.stderr
    stamps = [m.timestamp()[1] for m in read_all(kafka, target)]
    assert len(stamps) == 300
    # never faster than asked; a busy machine may only make it slower, so no lower bound
    rate = (len(stamps) - 1) / ((stamps[-1] - stamps[0]) / 1000)
    assert rate <= 205, rate

    same = cli("replay", "--from-topic", source, "--to-topic", source)
    assert same.exit_code == 2 and "--yes" in same.stderr


def test_filter_key(kafka, topic_name):
    source, target = topic_name, topic_name + "-f"
    _source(kafka, source, per_partition=30)
    create_topic(kafka, target, 2)
    result = cli("replay", "--from-topic", source, "--to-topic", target, "--filter-key", "^k1-", "-o", "json")
    assert result.exit_code == 0, result.stderr
    keys = sorted(m.key().decode() for m in read_all(kafka, target))
    assert keys == sorted(f"k1-{i}" for i in range(30) if i % 10)


@pytest.mark.embedded_tier
def test_transactional_replay_killed_while_writing_copies_each_record_once(kafka, topic_name):
    """Killed six times, each time as soon as it has started writing (the target's log grew),
    and rerun: each rerun resumes after its last committed transaction. The committed view
    holds every source record once."""
    source, target = topic_name, topic_name + "-tx"
    create_topic(kafka, source, 2)
    create_topic(kafka, target, 2)
    values = [str(i).encode() for i in range(10_000)]
    produce_values(kafka, source, values)
    # single-record batches: a transaction writes long enough to be killed inside (batched: ms)
    args = [*KSTOOL, "replay", "--from-topic", source, "--to-topic", target, "--transactional",
            "--rate", "2000/s", "-X", "batch.num.messages=1"]
    kills = 0
    while kills < 6:
        # the raw log, uncommitted records too: a read_committed end (Apache Kafka's last stable
        # offset) moves only once a transaction has committed, too late for a kill inside it
        watch = LogWatch(kafka.bootstrap, target)
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60  # a hang guard, not a timing check
        try:
            while not watch.grew() and proc.poll() is None:
                assert time.monotonic() < deadline, "the replay wrote nothing"
        finally:
            watch.close()
        assert proc.poll() is None, "the replay finished before six kills"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        kills += 1
    final = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    # the group it leaves is named, and why (#84: an unexplained kstool-replay-... group)
    named = re.search(r"its position is kept in consumer group (kstool-replay-\w+): ", final.stderr)
    assert named, final.stderr
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    assert named.group(1) in {g.group_id for g in admin.list_consumer_groups().result().valid}
    committed, scans = read_committed(kafka, target)
    assert sorted(r.value for r in committed) == sorted(values)
    assert sum(scan.aborted_records for scan in scans) > 0  # the kills did leave writes behind, aborted
    assert sum(scan.open_records for scan in scans) == 0


def test_reprocess_accept_partial_gives_the_counts_of_the_later_records(kafka, spark, topic_name):
    """--accept-partial is Kafka's reset to a time: the state starts over empty there."""
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 1)
    lines = [f"early w{i % 3}" if i < 20 else f"late w{i % 4}" for i in range(40)]
    produce_values(kafka, source, [line.encode() for line in lines], timestamps=[BASE + i * 1000 for i in range(40)])
    assert cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", app, "--once").exit_code == 0
    before = end_offsets(kafka, sink)
    cut = BASE + 25_000
    result = cli("reprocess", "--app-id", app, "--from-time", str(cut), "--accept-partial", "--yes", "--report", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["mode"] == "partial"
    new = [m for m in read_all(kafka, sink) if m.offset() >= before[m.partition()]]
    got = {k.decode(): as_long(v) for k, v in latest_per_key(new).items()}
    assert got == dict(oracle(line for i, line in enumerate(lines) if BASE + i * 1000 >= cut))
    busy_app = cli("reprocess", "--app-id", "no-such-app", "--from-time", str(cut))
    assert busy_app.exit_code == 1 and "no kstool app" in busy_app.stderr


def test_reprocess_up_to_a_time_and_busy_app(kafka, spark, topic_name):
    """--to-time: the outputs as an uninterrupted run that had read up to that time wrote them."""
    from kstool.application.model import AppLock, AppPaths, default_state_dir

    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    lines = [f"w{i % 5} x{i % 2}" for i in range(60)]
    for p in range(2):
        idx = [i for i in range(60) if i % 2 == p]
        produce_values(kafka, source, [lines[i].encode() for i in idx], partition=p,
                       timestamps=[BASE + i * 1000 for i in idx])
    assert cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", app, "--once").exit_code == 0
    before = end_offsets(kafka, sink)
    low, high = BASE + 10_000, BASE + 29_000
    result = cli("reprocess", "--app-id", app, "--from-time", str(low), "--to-time", str(high), "--yes")
    assert result.exit_code == 0, result.stderr
    new = [m for m in read_all(kafka, sink) if m.offset() >= before[m.partition()]]
    got = {k.decode(): as_long(v) for k, v in latest_per_key(new).items()}
    assert got == dict(oracle(line for i, line in enumerate(lines) if BASE + i * 1000 <= high))
    with AppLock(AppPaths(default_state_dir(), app), on_taken=None):
        busy = subprocess.run([*KSTOOL, "reprocess", "--app-id", app, "--from-time", str(low)],
                              capture_output=True, text=True, timeout=60)
    assert busy.returncode == 75 and "running" in busy.stderr


def test_an_interrupted_replay_says_how_many_it_wrote_and_what_running_it_again_does(kafka, topic_name):
    source, target = topic_name, topic_name + "-copy"
    create_topic(kafka, source, 1)
    create_topic(kafka, target, 1)
    produce_values(kafka, source, [b"v%d" % i for i in range(3000)])
    proc = subprocess.Popen([*KSTOOL, "replay", "--from-topic", source, "--to-topic", target, "--rate", "300/s"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120  # a hang guard
    while sum(end_offsets(kafka, target).values()) < 100:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    copied = len(read_all(kafka, target))
    assert proc.returncode == 130 and 100 <= copied < 3000
    assert stderr.strip().splitlines() == [
        f"kstool: interrupted: {copied} record(s) written to {target}; running the same replay again writes them "
        "again (duplicates): start past them (--from-offset, --from-time), or use --transactional, which resumes "
        "where it stopped"]
