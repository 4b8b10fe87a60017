"""Fault injection: kill a running wordcount while a batch is in flight, as input is produced,
restart it each time, and check the final output against an oracle. A kill is aimed at a batch
by watching the query's checkpoint (`tests/faults.py`), not the clock, and the test counts the
kills that did interrupt a batch."""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from tests.conftest import cli
from tests.faults import batches, in_flight, kill_tree
from tests.helpers import KSTOOL, as_long, create_topic, end_offsets, latest_per_key, produce_values, read_all
from tests.isolation import LogWatch, read_committed
from tests.oracles import word_counts as oracle

# at least half must land mid-batch; a soak sets more (docs/architecture.md, Tests)
KILLS = int(os.environ.get("KSTOOL_FAULT_KILLS", "4"))
EOS_KILLS = int(os.environ.get("KSTOOL_FAULT_EOS_KILLS", "4"))
CHUNK = 1000  # input lines per feed, and per batch while the kills go on
VOCABULARY = 5000


def _kill_mid_batch(args: list[str], checkpoint: Path, rng: random.Random,
                    output: Callable[[], LogWatch] | None = None) -> bool:
    """Start the app, wait until its query runs (a batch left over from the last kill runs
    again at once) and, every other time, until it has committed one more batch; then wait for
    a batch in flight and SIGKILL everything: a random moment later, or, given a watch of the
    `output` log, as soon as the batch has started writing there. True when the kill
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
        done = len(batches(checkpoint / "commits"))
        wait_for(lambda: len(batches(checkpoint / "commits")) > done)
    wait_for(lambda: in_flight(checkpoint) is not None)
    if output is None:
        time.sleep(rng.uniform(0.0, 1.0))
    else:
        log = output()
        try:
            wait_for(log.grew)
        finally:
            log.close()
    batch = in_flight(checkpoint)
    kill_tree(proc)
    return batch is not None and batch not in batches(checkpoint / "commits")


class _Feeder:
    """Input that keeps arriving while the app is killed and restarted: a chunk of lines of a
    wide vocabulary (batches with many updates, so writing a batch takes a while) every 5 s:
    more than the runs between kills process, so a batch is always waiting."""

    def __init__(self, kafka, topic: str, rng: random.Random):
        from confluent_kafka import Producer

        self.topic, self.rng = topic, rng
        self.producer = Producer(kafka.producer_conf())
        self.lines: list[str] = []
        self.stop = threading.Event()
        self._send(CHUNK * 2)
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _send(self, n: int) -> None:
        lines = [f"w{self.rng.randrange(VOCABULARY)} w{self.rng.randrange(VOCABULARY)} common" for _ in range(n)]
        for line in lines:
            self.producer.produce(self.topic, value=line.encode())
        while self.producer.flush(10):  # a busy machine may take long: every line must be in
            pass
        self.lines += lines

    def _run(self) -> None:
        while not self.stop.wait(5.0):
            self._send(CHUNK)

    def close(self) -> list[str]:
        self.stop.set()
        self.thread.join()
        return self.lines


def _chaos(kafka, topic_name, guarantee: str, kills: int, when_writing: bool = False) -> tuple[list[str], str, str]:
    """Kill the continuous app `kills` times mid-batch (`when_writing`: once the batch has
    started writing), then finish with --once; the group must then stand at the input's end,
    and the killed runs' Spark scratch files (under the kstool home, not /tmp) must be gone.
    Returns the input lines, the output topic and the app id."""
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    create_topic(kafka, sink, 2)
    rng = random.Random(12)
    feeder = _Feeder(kafka, source, rng)
    args = [*KSTOOL, "run", "wordcount", "--input", source, "--output", sink, "--app-id", app,
            "--processing-guarantee", guarantee]
    # single-record batches: a batch writes long enough to be killed inside (batched: ms); the
    # final run, which no kill interrupts, writes batched
    killed_runs = [*args, "-X", "batch.num.messages=1"] if when_writing else args
    checkpoint = Path(os.environ["KSTOOL_HOME"]) / "apps" / app / "checkpoint"
    scratch = Path(os.environ["KSTOOL_HOME"]) / "tmp"
    earlier = set(scratch.glob("jvm-*"))
    watch = (lambda: LogWatch(kafka.bootstrap, sink)) if when_writing else None
    interrupted, killed = 0, set()
    try:
        for _ in range(kills):
            interrupted += _kill_mid_batch([*killed_runs, "--trigger", "300ms", "--max-records-per-batch", str(CHUNK)],
                                           checkpoint, rng, watch)
            killed |= {folder for folder in scratch.glob("jvm-*") if any(folder.glob("blockmgr-*"))} - earlier
    finally:
        lines = feeder.close()
    assert interrupted >= kills / 2, f"only {interrupted} of {kills} kills landed in a batch"
    assert killed, "the killed runs' Spark left no scratch files under the kstool home"
    final = subprocess.run([*args, "--once"], capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    assert not [folder for folder in killed if folder.exists()], "the next run did not remove the killed runs' scratch"
    group = json.loads(cli("groups", "describe", app, "-o", "json").stdout)
    assert {(p["topic"], p["partition"]): p["committed"] for p in group["partitions"]} == {
        (source, p): end for p, end in end_offsets(kafka, source).items()}
    return lines, sink, app


def test_at_least_once_survives_random_kills(kafka, jvm_archive, topic_name):
    lines, sink, _ = _chaos(kafka, topic_name, "at_least_once", KILLS)
    got = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, sink)).items()}
    assert got == dict(oracle(lines))


def test_exactly_once_v2_killed_while_writing_commits_each_update_once(kafka, jvm_archive, topic_name):
    """Each kill lands after the batch's transaction has started writing (the output log grew);
    the next run's producer fences and aborts it. A read_committed view (Kafka's isolation
    applied test-side, as the embedded broker does not apply it) holds each word's counts once,
    ending at the oracle's."""
    lines, sink, _ = _chaos(kafka, topic_name, "exactly_once_v2", EOS_KILLS, when_writing=True)
    committed, scans = read_committed(kafka, sink)
    updates = [(r.key, r.value) for r in committed]
    assert not [u for u, n in Counter(updates).items() if n > 1], "an update was committed twice"
    assert {k.decode(): as_long(v) for k, v in updates} == dict(oracle(lines))
    assert sum(scan.aborted_records for scan in scans) > 0  # the kills did leave writes behind, aborted
    assert sum(scan.open_records for scan in scans) == 0


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
    group = json.loads(cli("groups", "describe", app, "-o", "json").stdout)
    assert group["total_lag"] == 0


def test_retention_gap_fails_loudly(on_apache_kafka, spark, topic_name):
    """On Apache Kafka: the embedded broker resets the connection on DeleteRecords."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    kafka = on_apache_kafka
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
