"""Outages (#22): a full disk under a run's state, and Kafka going away under a continuous run,
on an embedded broker of the test's own that is stopped and started again on the same port. The embedded broker keeps everything in
memory, so a restart loses topics, records and groups: the test recreates them from its own
source of truth (the input lines, produced to fixed partitions so they get the same offsets
again). A persistent broker cannot be restarted from here: with KSTOOL_TEST_BOOTSTRAP these
tests are skipped."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from kstool.config import build_client_config
from kstool.engine.query.outage import Outage
from kstool.kafka.client import KafkaClients
from tests.conftest import Kafka, cli_subprocess, home_sharing_jvm_archive
from tests.faults import ContinuousRun, batches, in_flight
from tests.helpers import as_long, create_topic, end_offsets, latest_per_key, produce_values, read_all
from tests.isolation import LogWatch, read_committed
from tests.oracles import word_counts

BEFORE = [f"w{i % 7} w{i % 11} common" for i in range(40)]
AFTER = [f"w{i % 5} later" for i in range(30)]
# many words per line: a batch's transaction takes a while to write
WIDE = [" ".join(f"w{i}x{j}" for j in range(20)) for i in range(400)]


class _Broker:
    """An embedded broker in the test's own home, restartable on its port."""

    def __init__(self):
        started = cli_subprocess("broker", "start", "--port", "0", timeout=60)
        assert started.exit_code == 0, started.stderr
        self.kafka = Kafka(started.stdout.strip(), embedded=True)
        self.port = self.kafka.bootstrap.rsplit(":", 1)[1]

    def stop(self) -> None:
        assert cli_subprocess("broker", "stop").exit_code == 0

    def start_again(self, topics: dict[str, int], inputs: dict[str, list[str]]) -> None:
        """Start on the same port with the topics and input records it had (memory only)."""
        started = cli_subprocess("broker", "start", "--port", self.port, timeout=60)
        assert started.exit_code == 0, started.stderr
        for topic, partitions in topics.items():
            create_topic(self.kafka, topic, partitions)
        for topic, lines in inputs.items():
            _produce(self.kafka, topic, lines)


def _produce(kafka, topic: str, lines: list[str]) -> None:
    """To fixed partitions (line i to i % 2), so a recreated topic has the same offsets."""
    for partition in (0, 1):
        produce_values(kafka, topic, [line.encode() for line in lines[partition::2]], partition=partition)


class _App(ContinuousRun):
    """kstool run wordcount, continuous."""

    def __init__(self, kafka, source: str, app: str, *options: str):
        super().__init__(kafka.bootstrap, app, "wordcount", "--input", source, "--output", source + "-out",
                         "--trigger", "500ms", *options)


def _counts(kafka, topic: str) -> dict[str, int]:
    try:
        return {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, topic)).items()}
    except KeyError:  # not created yet
        return {}


@pytest.fixture
def own_broker(jvm_archive, tmp_path, monkeypatch):
    """An embedded broker in a kstool home of the test's own (with the session's JVM class-data
    archive, so its runs start as fast as the others)."""
    if os.environ.get("KSTOOL_TEST_BOOTSTRAP"):
        pytest.skip("needs a broker the test can stop and start: the embedded one")
    for name, value in home_sharing_jvm_archive(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("KSTOOL_BOOTSTRAP_SERVERS", raising=False)
    broker = _Broker()
    yield broker
    cli_subprocess("broker", "stop")


def test_a_run_waits_out_an_outage_between_batches_then_goes_on(own_broker):
    kafka, source, app = own_broker.kafka, "lines", "outage-app"
    topics = {source: 2, source + "-out": 2, app + "-counts-changelog": 2}
    for topic, partitions in topics.items():
        create_topic(kafka, topic, partitions)
    _produce(kafka, source, BEFORE)
    run = _App(kafka, source, app)
    try:
        run.wait_for(lambda: _counts(kafka, source + "-out") == dict(word_counts(BEFORE)), "counts of BEFORE")
        run.wait_for(lambda: in_flight(run.checkpoint) is None, "a moment between batches")
        written_before = _counts(kafka, source + "-out")
        own_broker.stop()
        run.wait_for(lambda: run.said("Kafka unreachable"), "outage line")
        own_broker.start_again(topics, {source: BEFORE})
        _produce(kafka, source, AFTER)
        total = word_counts(BEFORE + AFTER)
        run.wait_for(lambda: {**written_before, **_counts(kafka, source + "-out")} == dict(total), "counts of AFTER")
        assert run.said("Kafka reachable again")
    finally:
        code = run.finish()
    assert code == 0, run.lines[-3:]
    assert len([line for line in run.lines if "Kafka unreachable" in line]) == 1
    # after the outage only the new batches wrote: each word of AFTER once, at its total
    assert _counts(kafka, source + "-out") == {w: total[w] for w in word_counts(AFTER)}
    group = json.loads(cli_subprocess("groups", "describe", app, "-o", "json").stdout)
    assert {(p["topic"], p["partition"]): p["committed"] for p in group["partitions"]} == {
        (source, p): end for p, end in end_offsets(kafka, source).items()}


def test_exactly_once_v2_gives_up_after_the_broker_timeout_naming_the_last_committed_batch(own_broker):
    """The broker stops while a batch writes its transaction and stays down past
    --broker-timeout: exit 1 naming the last committed batch. The checkpoint holds: when the
    broker is back, a rerun goes on from that batch, and its committed output counts on from
    the state (each update once)."""
    kafka, source, app = own_broker.kafka, "lines", "eos-app"
    topics = {source: 2, source + "-out": 2, app + "-counts-changelog": 2}
    for topic, partitions in topics.items():
        create_topic(kafka, topic, partitions)
    _produce(kafka, source, WIDE)
    run = _App(kafka, source, app, "--processing-guarantee", "exactly_once_v2", "--broker-timeout", "15s",
               "--max-records-per-batch", "50")
    try:
        run.wait_for(lambda: len(batches(run.checkpoint / "commits")) >= 1, "a committed batch")
        run.wait_for(lambda: in_flight(run.checkpoint) is not None, "a batch in flight")
        watch = LogWatch(kafka.bootstrap, source + "-out")
        run.wait_for(watch.grew, "the batch writing")
        watch.close()
        own_broker.stop()
        code = run.proc.wait(240)
    finally:
        run.finish()
    committed_batches = batches(run.checkpoint / "commits")
    assert code == 1
    assert f"last committed batch: batch {max(committed_batches)}" in run.lines[-1], run.lines[-3:]
    assert f"cannot reach Kafka at {kafka.bootstrap}: connection refused" in run.lines[-1]  # known at once
    assert len([line for line in run.lines if "Kafka unreachable" in line]) == 2  # the warning, the end

    own_broker.start_again(topics, {source: WIDE})
    again = WIDE[:20]  # words the state has counted: they count on from there
    _produce(kafka, source, again)
    env = {"KSTOOL_BOOTSTRAP_SERVERS": kafka.bootstrap}
    final = cli_subprocess("run", "wordcount", "--input", source, "--output", source + "-out", "--app-id", app,
                           "--once", "--processing-guarantee", "exactly_once_v2", timeout=300, env=env)
    assert final.exit_code == 0, final.stderr
    committed, _ = read_committed(kafka, source + "-out")
    updates = [(r.key, r.value) for r in committed]
    assert not [u for u, n in Counter(updates).items() if n > 1]
    total = word_counts(WIDE + again)
    latest = {k.decode(): as_long(v) for k, v in updates}
    assert {w: latest.get(w) for w in word_counts(again)} == {w: 2 for w in word_counts(again)}
    assert latest.items() <= dict(total).items()


def test_a_query_failed_on_offsets_no_leader_answered_is_waited_out_and_a_bug_is_not(kafka):
    """With Kafka's 9 s broker session, a leader lost while a batch was planned was not moved
    within the client's 10 s: the source's error ended the query, and the run stopped with it
    instead of waiting for the new leader. Here the brokers answer again, so only the failure's
    message can tell the two apart."""
    clients = KafkaClients(build_client_config(kafka.bootstrap))
    no_leader = clients._no_leader_answered({("orders", 0): None})
    failed = Exception(f"[STREAM_FAILED] Query [id = 1] terminated with exception: {no_leader}\n\tat ...")
    reason = Outage(60).caused(clients, failed)
    assert reason is not None and "no leader answered for the offsets of orders:0" in reason
    assert Outage(60).caused(clients, Exception("[STREAM_FAILED] ZeroDivisionError: division by zero")) is None


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MB tmpfs (root only: skipped elsewhere)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(path: Path) -> None:
    with open(path, "wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        except OSError:  # ENOSPC: full
            pass


def test_a_full_disk_fails_the_run_in_one_line_and_the_next_run_goes_on(kafka, topic_name, small_disk):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 1)
    lines = ["a b", "b c", "c d", "d e e"]
    produce_values(kafka, source, [line.encode() for line in lines[:2]])
    run = ("run", "wordcount", "--input", source, "--output", source + "-out", "--app-id", app, "--once",
           "--state-dir", small_disk)
    first = cli_subprocess(*run, timeout=300)
    assert first.exit_code == 0, first.stderr

    _fill(small_disk / "filler")
    produce_values(kafka, source, [lines[2].encode()])
    full = cli_subprocess(*run, timeout=300)
    assert full.exit_code == 1, full.stderr
    assert "No space left on device" in full.stderr.strip().splitlines()[-1], full.stderr  # one line says it
    assert "Traceback" not in full.stderr

    (small_disk / "filler").unlink()
    produce_values(kafka, source, [lines[3].encode()])
    again = cli_subprocess(*run, timeout=300)
    assert again.exit_code == 0, again.stderr
    assert _counts(kafka, source + "-out") == dict(word_counts(lines))
