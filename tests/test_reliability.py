"""Fault injection: kill a running wordcount while a batch is in flight, as input is produced,
restart it each time, and check the final output against an oracle. A kill is aimed at a batch
by watching the query's checkpoint (Spark writes offsets/N when batch N starts and commits/N when
it is done), not the clock, and the test counts the kills that did interrupt a batch."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import KSTOOL, cli
from tests.helpers import as_long, create_topic, latest_per_key, produce_values, read_all
from tests.oracles import word_counts as oracle

KILLS = int(os.environ.get("KSTOOL_FAULT_KILLS", "8"))
RECORDS = int(os.environ.get("KSTOOL_FAULT_RECORDS", "50000"))


def _descendants(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/task/{current}/children") as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            children = []
        found += children
        stack += children
    return found


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the driver and everything it started (the JVM runs in its own session)."""
    victims = [proc.pid, *_descendants(proc.pid)]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(30)
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") and open(f"/proc/{p}/stat").read().split()[2] != "Z"
              for p in victims if os.path.exists(f"/proc/{p}")) and time.monotonic() < deadline:
        time.sleep(0.1)


def _batches(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()


def _in_flight(checkpoint: Path) -> int | None:
    """The batch that started (offsets/N) and is not committed (no commits/N), if any."""
    pending = _batches(checkpoint / "offsets") - _batches(checkpoint / "commits")
    return max(pending) if pending else None


def _kill_mid_batch(args: list[str], checkpoint: Path, rng: random.Random) -> bool:
    """Start the app, wait until its query runs (a batch left over from the last kill runs
    again at once) and, every other time, until it has committed one more batch; then wait for
    a batch in flight, let it run a random moment and SIGKILL everything. True when the kill
    interrupted that batch (it had not committed)."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ready = threading.Event()

    def watch() -> None:
        for line in proc.stderr:
            if "Spark ready" in line:
                ready.set()
    threading.Thread(target=watch, daemon=True).start()
    deadline = time.monotonic() + 180  # hang guards, not timing checks

    def wait_for(condition) -> None:
        while not condition() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    wait_for(ready.is_set)
    if rng.random() < 0.5:  # let this run make progress first
        done = len(_batches(checkpoint / "commits"))
        wait_for(lambda: len(_batches(checkpoint / "commits")) > done)
    wait_for(lambda: _in_flight(checkpoint) is not None)
    time.sleep(rng.uniform(0.0, 1.0))
    batch = _in_flight(checkpoint)
    _kill_tree(proc)
    return batch is not None and batch not in _batches(checkpoint / "commits")


def _chaos(kafka, topic_name, guarantee: str) -> tuple[list[str], str]:
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    rng = random.Random(12)
    lines = [f"w{rng.randrange(50)} w{rng.randrange(50)} common" for _ in range(RECORDS)]
    chunks = [lines[i:i + len(lines) // 10] for i in range(0, len(lines), len(lines) // 10)]
    produce_values(kafka, source, [line.encode() for line in chunks[0]])

    def feed():  # input keeps arriving while the app is killed and restarted
        for chunk in chunks[1:]:
            time.sleep(2)
            produce_values(kafka, source, [line.encode() for line in chunk])

    feeder = threading.Thread(target=feed)
    feeder.start()
    args = [*KSTOOL, "run", "wordcount", "--input", source, "--output", sink, "--app-id", app,
            "--trigger", "300ms", "--max-records-per-batch", "2000", "--processing-guarantee", guarantee]
    checkpoint = Path(os.environ["KSTOOL_HOME"]) / "apps" / app / "checkpoint"
    interrupted = 0
    for _ in range(KILLS):
        interrupted += _kill_mid_batch(args, checkpoint, rng)
    feeder.join()
    assert interrupted >= KILLS / 2, f"only {interrupted} of {KILLS} kills landed in a batch"
    final = subprocess.run([*args, "--once"], capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    return lines, sink


def test_at_least_once_survives_random_kills(kafka, topic_name):
    lines, sink = _chaos(kafka, topic_name, "at_least_once")
    got = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, sink)).items()}
    assert got == dict(oracle(lines))


def test_exactly_once_v2_survives_random_kills_without_duplicates(kafka, topic_name):
    if kafka.embedded:
        pytest.skip("the embedded broker returns aborted transactions to read_committed readers "
                    "(see test_replay), so duplicates from aborted batches would show; run with "
                    "KSTOOL_TEST_BOOTSTRAP")
    from confluent_kafka import Consumer, TopicPartition

    lines, sink = _chaos(kafka, topic_name, "exactly_once_v2")
    reader = Consumer({**kafka.consumer_conf(), "isolation.level": "read_committed"})
    reader.assign([TopicPartition(sink, p, 0) for p in range(2)])
    updates, idle = [], 0
    while idle < 5:
        msgs = reader.consume(1000, 1.0)
        idle = idle + 1 if not msgs else 0
        updates += [(m.key(), m.value()) for m in msgs if not m.error()]
    reader.close()
    assert not [u for u, n in Counter(updates).items() if n > 1], "a read_committed reader saw duplicates"
    latest = {}
    for key, value in updates:
        latest[key.decode()] = as_long(value)
    assert latest == dict(oracle(lines))


def test_exactly_once_v2_output_and_offsets_commit_together(kafka, spark, topic_name):
    from confluent_kafka import Consumer, TopicPartition

    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    lines = ["a b", "b c", "c d d"]
    produce_values(kafka, source, [line.encode() for line in lines])
    result = cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", app, "--once",
                 "--processing-guarantee", "exactly_once_v2")
    assert result.exit_code == 0, result.stderr
    reader = Consumer({**kafka.consumer_conf(), "isolation.level": "read_committed"})
    reader.assign([TopicPartition(sink, p, 0) for p in range(2)])
    got, idle = {}, 0
    while idle < 3:
        msgs = reader.consume(100, 1.0)
        idle = idle + 1 if not msgs else 0
        got.update({m.key().decode(): as_long(m.value()) for m in msgs if not m.error()})
    reader.close()
    assert got == dict(oracle(lines))
    import json

    group = json.loads(cli("groups", "describe", app, "-o", "json").stdout)
    assert group["total_lag"] == 0


def test_retention_gap_fails_loudly(kafka, spark, topic_name):
    if kafka.embedded:
        pytest.skip("the embedded broker resets the connection on DeleteRecords (checked), so "
                    "records cannot be deleted below the log start; run with KSTOOL_TEST_BOOTSTRAP")
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"x"] * 10)
    assert cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", app, "--once").exit_code == 0
    produce_values(kafka, source, [b"y"] * 10)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.delete_records([TopicPartition(source, 0, 15)])[TopicPartition(source, 0, 15)].result(10)
    failed = cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", app, "--once")
    assert failed.exit_code == 1 and f"{source}:0 offsets 10..14 (5 records)" in failed.stderr
    assert cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", app, "--once",
               "--on-data-loss", "earliest").exit_code == 0
