"""Continuous runs through broker faults on a three-node Apache Kafka cluster (#83), as Kafka
Streams' own system tests bounce brokers (StreamsBrokerBounceTest,
tests/kafkatest/tests/streams/streams_broker_bounce_test.py in apache/kafka: clean and hard
shutdowns and bounces of a partition's leader, of the group coordinator's node and of the
controller; two nodes at once; every node in turn). A producer writes at a steady rate, acks=all
and idempotent, while nodes are stopped or killed and started again. The run never needs a
person: it goes on through each fault, and its output holds every record (at least once) or each
update exactly once (exactly_once_v2, read committed), its changelogs the final state. The time
from each fault to the run's first committed batch begun after it is printed (pytest -s) and kept
as the test's `failover_s` property."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.conftest import cli, home_sharing_jvm_archive
from tests.faults import ContinuousRun, batches
from tests.helpers import as_long, end_offsets, read_all, wait_until
from tests.isolation import read_committed

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z: event times, 100 ms apart
RATE = 100  # records a second, while the faults happen
PARTITIONS = 3
# a batch every 2 s: each one costs the busy test machine CPU, and failover times are measured to
# the first batch committed after a fault (a shorter trigger measured them 0.5-2 s finer)
TRIGGER = "2s"


@pytest.fixture
def cluster_home(cluster, jvm_archive, tmp_path, monkeypatch):
    """The cluster, and a kstool home of the test's own with the session's JVM class-data
    archive (its runs start as fast as the others)."""
    for name, value in home_sharing_jvm_archive(tmp_path).items():
        monkeypatch.setenv(name, value)
    return cluster


class SteadyProducer:
    """Writes record i = make(i) -> (key, value) with timestamp T0 + 100 ms * i, RATE a second
    from a thread, as applications write (acks=all, idempotent, batching); `delivered` holds
    what Kafka acknowledged, in order. What a run must have processed is the topic as written
    (`written`): Apache Kafka 4.4 once kept an idempotent producer's retried batch twice (same
    producer id, epoch and sequence, at leader epochs 3 and 6: kafka-dump-log of the input)
    while this test's faults moved the partition's leader."""

    def __init__(self, bootstrap: str, topic: str, make):
        self.topic, self.make = topic, make
        # murmur2: keys in the partitions a Java producer (and kstool) puts them in: joins need that.
        # linger.ms as Kafka Streams' producers (StreamsConfig's PRODUCER_DEFAULT_OVERRIDES): at 5 ms
        # nearly every record was a request of its own, and the three nodes took 42.7 CPU-s a minute
        # to serve 100 records/s, 12.4 at 100 ms
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 100,
                                  "partitioner": "murmur2_random", "log_level": 0})
        self.delivered: list[tuple[bytes, bytes, int]] = []
        self.failed: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.delivered.append((msg.key(), msg.value(), msg.timestamp()[1]))
        else:
            self.failed.append(err.str())

    def _write(self) -> None:
        started, i = time.monotonic(), 0
        while not self.stopping.is_set():
            time.sleep(max(0.0, started + i / RATE - time.monotonic()))
            key, value = self.make(i)
            self.producer.produce(self.topic, key=key, value=value, timestamp=T0 + 100 * i,
                                  on_delivery=self._on_delivery)
            self.producer.poll(0)
            i += 1

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        assert self.producer.flush(180) == 0
        assert not self.failed, self.failed[:3]

    def written(self, kafka) -> list[tuple[bytes, bytes, int]]:
        """The topic's records (key, value, timestamp), per partition in offset order, checked
        to hold every acknowledged record (by key and value: a delivery report of librdkafka
        2.16 once gave a record another record's timestamp); duplicates Kafka kept are printed."""
        log = [(m.key(), m.value(), m.timestamp()[1]) for m in read_all(kafka, self.topic)]
        missing = Counter((k, v) for k, v, _ in self.delivered) - Counter((k, v) for k, v, _ in log)
        assert not missing, f"acknowledged records missing from the topic: {list(missing)[:3]}"
        kept_twice = [record for record, n in Counter(log).items() if n > 1]
        if kept_twice:
            print(f"the topic holds {len(kept_twice)} acknowledged record(s) twice: {kept_twice[:3]}")
        return log


class Faults:
    """Nodes stopped, killed and started again under a run; the failover time of each."""

    def __init__(self, cluster, run: ContinuousRun, record_property):
        self.cluster, self.run, self.record_property = cluster, run, record_property
        self.timings: dict[str, float] = {}

    def _begun(self) -> int:
        return max(batches(self.run.checkpoint / "offsets"), default=-1)

    def _committed_after(self, batch: int) -> bool:
        return any(b > batch for b in batches(self.run.checkpoint / "commits"))

    def failover(self, label: str, which: Callable[[], int], hard: bool) -> None:
        """Stop (or kill) the node `which` names once the run has begun a batch, wait for a batch
        begun after that to commit (the run went on without it), then start it again."""
        self.run.wait_for(lambda: self._begun() >= 0, "a first batch")
        node = which()
        begun, lost = self._begun(), time.monotonic()
        (self.cluster.kill_node if hard else self.cluster.stop_node)(node)
        self.run.wait_for(lambda: self._committed_after(begun), f"a batch committed after {label}")
        self._took(label, lost)
        self.cluster.start_node(node)
        self._in_sync_again()

    def _in_sync_again(self) -> None:
        """Wait until every partition's replicas are all in sync again before the next fault:
        Kafka keeps an acknowledged record while one replica that was in sync lives (Kafka's
        documentation, Replication), and a node started again rejoins the ISRs only once it has
        caught up. Without this wait, 'two nodes lost' came right after the controller's node was
        started again, and Kafka 4.4 lost an acknowledged record (kafka-dump-log: producer sequence
        5704 missing, 5705 at its offset, on all three replicas): the two nodes killed were, most
        likely, the whole ISR."""
        wait_until(lambda: not json.loads(cli("topics", "list", "--under-replicated-partitions", "--internal",
                                              "-o", "json").stdout), "every partition in sync again")

    def below_min_insync(self, label: str) -> None:
        """Two of the three nodes killed at once: partitions fall below min.insync.replicas and
        the controller quorum is lost; the run waits. Both back: it goes on. (With one back,
        Kafka 4.4 leaves a partition offline while the replica it last had in sync is down, as
        `kstool topics describe` shows: KIP-966's eligible leader replicas.)"""
        self.run.wait_for(lambda: self._begun() >= 0, "a first batch")
        lost_nodes = [n for n in self.cluster.NODES if n != self.cluster.NODES[0]]
        begun, lost = self._begun(), time.monotonic()
        for node in lost_nodes:
            self.cluster.kill_node(node)
        time.sleep(5)  # down for longer than a node's session (3 s): what a run cannot write waits
        for node in lost_nodes:
            self.cluster.start_node(node)
        self.run.wait_for(lambda: self._committed_after(begun), f"a batch committed after {label}")
        self._took(label, lost)
        self._in_sync_again()

    def rolling_restart(self) -> None:
        """Every node in turn, cleanly, each after the partitions are fully replicated again (as
        operators restart a cluster)."""
        for node in self.cluster.NODES:
            self.failover(f"rolling restart of node {node}", lambda node=node: node, hard=False)

    def _took(self, label: str, since: float) -> None:
        self.timings[label] = round(time.monotonic() - since, 1)
        print(f"failover: {label}: {self.timings[label]} s")
        self.record_property("failover_s", self.timings)


def _caught_up(run: ContinuousRun, kafka, topics: list[str]) -> bool:
    """The run's last committed batch read every input record."""
    committed = batches(run.checkpoint / "commits")
    if not committed:
        return False
    offsets = json.loads((run.checkpoint / "offsets" / str(max(committed))).read_text().splitlines()[-1])
    return all(offsets.get(t, {}).get(str(p), 0) >= end for t in topics for p, end in end_offsets(kafka, t).items())


def _finish(run: ContinuousRun, kafka, inputs: list[str]) -> None:
    run.wait_for(lambda: _caught_up(run, kafka, inputs), "the run caught up with its input", seconds=300)
    assert run.finish() == 0, "".join(run.lines[-5:])
    assert not run.said("Traceback"), run.lines[-20:]


def _changelog(kafka, app: str, store: str) -> dict[bytes, bytes]:
    """The latest value of each key of the store's changelog, read committed."""
    described = json.loads(cli("apps", "describe", app, "-o", "json").stdout)
    topic = next(s["changelog_topic"] for s in described["stores"] if s["name"] == store)
    return {r.key: r.value for r in read_committed(kafka, topic)[0]}


def test_an_exactly_once_windowed_count_runs_through_coordinators_and_the_controller_lost_and_two_nodes_down(
        cluster_home, topic_name, record_property):
    """The transaction coordinator's node killed, the group coordinator's stopped, the active
    controller killed, and two nodes lost at once: each window's count is read committed once
    per update, rising, its last the input's count; the changelog holds the same counts."""
    cluster, source, app = cluster_home, topic_name, topic_name + "-app"
    assert cli("topics", "create", source, "-p", str(PARTITIONS)).exit_code == 0
    writer = SteadyProducer(cluster.bootstrap, source, lambda i: (f"k{i % 8}".encode(), b"1"))
    run = ContinuousRun(cluster.bootstrap, app, "aggregate", "--input", source, "--output", source + "-out",
                        "--window", "tumbling:10s", "--grace", "1h", "--trigger", TRIGGER,
                        "--processing-guarantee", "exactly_once_v2")
    faults = Faults(cluster, run, record_property)
    try:
        faults.failover("transaction coordinator killed", cluster.transaction_coordinator, hard=True)
        faults.failover("group coordinator stopped", cluster.group_coordinator, hard=False)
        faults.failover("active controller killed", cluster.active_controller, hard=True)
        faults.below_min_insync("two nodes lost")
        writer.stop()
        _finish(run, cluster.kafka, [source])
    finally:
        writer.stopping.set()
        run.finish()

    expected = Counter((key, (ts - ts % 10_000)) for key, _, ts in writer.written(cluster.kafka))
    updates: dict[tuple[bytes, int], list[int]] = defaultdict(list)
    for record in read_committed(cluster.kafka, source + "-out")[0]:
        updates[(record.key[:-8], as_long(record.key[-8:]))].append(as_long(record.value))
    assert {window: counts[-1] for window, counts in updates.items()} == dict(expected)
    repeated_or_falling = {w: c for w, c in updates.items() if any(b <= a for a, b in zip(c, c[1:]))}
    assert not repeated_or_falling
    changelog = _changelog(cluster.kafka, app, "aggregate")  # key ‖ window start ‖ sequence number
    assert {(k[:-12], as_long(k[-12:-4])): as_long(v) for k, v in changelog.items()} == dict(expected)


def test_an_at_least_once_stream_table_join_loses_nothing_through_a_leader_killed_and_a_rolling_restart(
        cluster_home, topic_name, record_property):
    cluster, orders, customers, app = cluster_home, topic_name, topic_name + "-customers", topic_name + "-app"
    for topic in (orders, customers):
        assert cli("topics", "create", topic, "-p", str(PARTITIONS)).exit_code == 0
    # the table's rows before the orders in event time, so that every order joins one
    table = cli("produce", customers, "-K", ":", "--timestamp", "2025-12-31T00:00:00Z",
                input="".join(f"k{k}:c{k}\n" for k in range(8)))
    assert table.exit_code == 0, table.stderr
    writer = SteadyProducer(cluster.bootstrap, orders, lambda i: (f"k{i % 8}".encode(), f"o{i}".encode()))
    run = ContinuousRun(cluster.bootstrap, app, "join", "--left", orders, "--right", customers,
                        "--output", orders + "-out", "--kind", "stream-table", "--trigger", TRIGGER)
    faults = Faults(cluster, run, record_property)
    try:
        faults.failover("the node leading most input partitions killed", lambda: Counter(
            cluster.leader(orders, p) for p in range(PARTITIONS)).most_common(1)[0][0], hard=True)
        faults.rolling_restart()
        writer.stop()
        _finish(run, cluster.kafka, [orders, customers])
    finally:
        writer.stopping.set()
        run.finish()
    joined = {json.loads(r.value)["left"] for r in read_committed(cluster.kafka, orders + "-out")[0]}
    assert joined == {value.decode() for _, value, _ in writer.written(cluster.kafka)}


def test_an_exactly_once_table_aggregation_goes_on_after_the_group_coordinator_bounced(
        cluster_home, topic_name, record_property):
    """Users moving between regions (a table) while the group coordinator's node is killed and
    started again: the count per region, read committed, ends at each region's users, and so
    does the groups' changelog."""
    cluster, users, app = cluster_home, topic_name, topic_name + "-app"
    assert cli("topics", "create", users, "-p", str(PARTITIONS)).exit_code == 0
    writer = SteadyProducer(cluster.bootstrap, users, lambda i: (f"u{i % 40}".encode(), f"r{i % 7}".encode()))
    run = ContinuousRun(cluster.bootstrap, app, "table-aggregate", "--input", users, "--output", users + "-out",
                        "--trigger", TRIGGER, "--processing-guarantee", "exactly_once_v2")
    faults = Faults(cluster, run, record_property)
    try:
        faults.failover("group coordinator killed", cluster.group_coordinator, hard=True)
        writer.stop()
        _finish(run, cluster.kafka, [users])
    finally:
        writer.stopping.set()
        run.finish()
    rows = {key: value for key, value, _ in writer.written(cluster.kafka)}  # a key's records: one partition
    expected = Counter(rows.values())
    output = {r.key: as_long(r.value) for r in read_committed(cluster.kafka, users + "-out")[0]}
    assert {region: count for region, count in output.items() if count} == dict(expected)
    groups = {k: as_long(v) for k, v in _changelog(cluster.kafka, app, "aggregate").items() if v is not None}
    assert {region: count for region, count in groups.items() if count} == dict(expected)


def _replication(cluster, topic: str) -> set[int]:
    described = json.loads(cli("topics", "describe", topic, "-o", "json").stdout)
    return {len(p["replicas"]) for p in described["partitions"]}


def test_a_run_replicates_its_topics_as_the_cluster_says_and_names_those_that_need_attention(
        cluster, spark, topic_name):
    """Outputs and changelogs get the broker's default.replication.factor (3), or
    --replication-factor's, which the app keeps; with a node lost, a run says once per topic
    which of its partitions are under-replicated."""
    source = topic_name
    assert cli("topics", "create", source, "-p", "2").exit_code == 0
    assert cli("produce", source, input="a b\nb c\n").exit_code == 0
    for app, given in ((topic_name + "-default", ()), (topic_name + "-two", ("--replication-factor", "2"))):
        ran = cli("run", "wordcount", "--input", source, "--output", app + "-out", "--app-id", app, "--once", *given)
        assert ran.exit_code == 0, ran.stderr
        factor = 2 if given else 3
        assert _replication(cluster, app + "-out") == _replication(cluster, app + "-counts-changelog") == {factor}
    kept = json.loads((Path(os.environ["KSTOOL_HOME"]) / "apps" / (topic_name + "-two") / "app.json").read_text())
    assert kept["run_settings"]["replication_factor"] == 2  # what `reprocess` runs the app with

    app = topic_name + "-default"
    lost = cluster.leader(app + "-counts-changelog", 0)
    cluster.kill_node(lost)
    wait_until(lambda: cluster.out_of_sync(app + "-counts-changelog", lost), f"node {lost} out of the ISRs")
    assert cli("produce", source, input="c d\n").exit_code == 0
    ran = cli("run", "wordcount", "--input", source, "--output", app + "-out", "--app-id", app, "--once")
    assert ran.exit_code == 0, ran.stderr
    named = [line for line in ran.stderr.splitlines() if "need attention" in line]
    assert len([line for line in named if f"topic {app}-counts-changelog:" in line]) == 1, ran.stderr
    assert "2 of 2 partition(s) need attention (0 under-replicated, 1 under-replicated)" in "".join(
        line for line in named if f"topic {app}-counts-changelog:" in line)

