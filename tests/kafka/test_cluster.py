"""kstool on a three-node Apache Kafka cluster (tests/apache_kafka.KafkaCluster: RF 3,
min.insync.replicas=2): topics replicated as the cluster says, partitions that need attention
as kafka-topics.sh lists them, the one-liners with a node lost, and kstool's own wire client
finding coordinators and leaders on other nodes and again after their node was killed."""

from __future__ import annotations

import itertools
import json
import re

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kstool.config import ClientConfig
from kstool.kafka.client import KafkaClients
from kstool.kafka.topics import CreateTopicOptions, create_topic, topic_configs
from kstool.kafka.wire.protocol import RecordWriter, leave_group
from kstool.kafka.wire.transaction import commit_transaction
from tests.apache_kafka import kafka_tool
from tests.conftest import cli
from tests.helpers import counts_in, produce_batched, read_all, wait_until
from tests.isolation import read_committed
from tests.oracles import word_counts
from tests.reference_apps import ReferenceApp

TOPICS = "org.apache.kafka.tools.TopicCommand"
LINES = ["the cat sat", "The dog sat on the cat", "a cat a dog"]


def _replicas(cluster, topic: str) -> dict[int, list[int]]:
    meta = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
    return {p.id: list(p.replicas) for p in meta.topics[topic].partitions.values()}


def test_topics_get_the_brokers_replication_factor_as_kafka_topics_gives_them(cluster, topic_name):
    created = cli("topics", "create", topic_name, "-p", "3")
    assert created.exit_code == 0, created.stderr
    assert "replication factor 3" in created.stderr
    theirs = kafka_tool(TOPICS, "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic_name + "-k",
                        "--partitions", "3")
    assert theirs.returncode == 0, theirs.stderr[-500:]
    ours, kafkas = _replicas(cluster, topic_name), _replicas(cluster, topic_name + "-k")
    assert {len(r) for r in ours.values()} == {len(r) for r in kafkas.values()} == {3}
    assert cli("topics", "create", topic_name + "-two", "-r", "2").exit_code == 0
    assert [len(r) for r in _replicas(cluster, topic_name + "-two").values()] == [2]
    listed = {t["topic"]: t for t in json.loads(cli("topics", "list", "-o", "json").stdout)}
    assert (listed[topic_name]["replication_factor"], listed[topic_name + "-two"]["replication_factor"]) == (3, 2)


def test_a_created_topic_is_served_by_every_node_when_topics_create_returns(cluster, topic_name):
    """`kstool topics create T && kstool produce T`: the produce asks any node, and a node that
    had not yet learned of T answered "does not exist" (seen in a full run). Each node's own
    metadata, asked by a client that talks to that node only, names a leader per partition."""
    for n in range(4):
        topic = f"{topic_name}-{n}"
        assert cli("topics", "create", topic, "-p", "6").exit_code == 0
        for node in cluster.NODES:
            only_there = AdminClient({"bootstrap.servers": cluster.address(node)})
            found = only_there.list_topics(timeout=10).topics.get(topic)
            assert found is not None and found.error is None, (topic, node, found and found.error)
            assert sorted(p.id for p in found.partitions.values() if p.leader >= 0) == list(range(6)), (topic, node)


def _kafka_topics_partitions(cluster, flag: str) -> set[tuple[str, int]]:
    ran = kafka_tool(TOPICS, "--bootstrap-server", cluster.bootstrap, "--describe", flag)
    assert ran.returncode == 0, ran.stderr[-500:]
    return {(t, int(p)) for t, p in re.findall(r"Topic: (\S+)\s+Partition: (\d+)", ran.stdout)}


def _ours(flag: str) -> set[tuple[str, int]]:
    listed = cli("topics", "list", flag, "--internal", "-o", "json")
    assert listed.exit_code == 0, listed.stderr
    return {(r["topic"], r["partition"]) for r in json.loads(listed.stdout)}


def test_partitions_that_need_attention_are_those_kafka_topics_lists(cluster, topic_name):
    """A node killed: its replicas leave the ISRs (under-replicated), a one-replica partition on
    it goes offline (unavailable, and under min.insync.replicas as every one-replica partition
    is here); each flag's partitions are kafka-topics.sh's, and `topics describe` marks them."""
    replicated, single = topic_name, topic_name + "-single"
    assert cli("topics", "create", replicated, "-p", "3").exit_code == 0
    assert cli("topics", "create", single, "-p", "3", "-r", "1").exit_code == 0
    assert _ours("--under-replicated-partitions") == set() == _ours("--unavailable-partitions")
    lost = _replicas(cluster, single)[0][0]
    cluster.kill_node(lost)
    wait_until(lambda: cluster.out_of_sync(replicated, lost), f"node {lost} out of the ISRs")
    for flag in ("--under-replicated-partitions", "--unavailable-partitions", "--under-min-isr-partitions"):
        assert _ours(flag) == _kafka_topics_partitions(cluster, flag), flag
    offline = {(single, p) for p, replicas in _replicas(cluster, single).items() if replicas == [lost]}
    assert offline and offline <= _ours("--unavailable-partitions")
    described = json.loads(cli("topics", "describe", single, "-o", "json").stdout)
    health = {p["partition"]: p["health"] for p in described["partitions"]}
    assert {p for p, h in health.items() if h == "offline"} == {p for _, p in offline}
    assert set(health.values()) <= {"offline", "under-min-isr"}  # one replica of min.insync.replicas=2
    assert all(p["low_offset"] is None for p in described["partitions"] if p["health"] == "offline")
    table = cli("topics", "describe", replicated)
    assert table.exit_code == 0 and "3 under-replicated" in table.stdout.splitlines()[0]


def _json(result):
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_the_one_liners_work_with_a_node_lost(cluster, topic_name):
    """The node coordinating the groups, killed: groups list, delete and describe, produce
    (acks=all, idempotent), consume, topics, a reset of a group's offsets, changelog dump and
    state --changelog-topic go on through the two left, and agree with what was written."""
    assert cli("topics", "create", topic_name, "-p", "3").exit_code == 0
    produce_batched(cluster.kafka, topic_name, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(300)])
    group = topic_name + "-group"
    for committing in (group, group + "-gone"):
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": committing})
        consumer.commit(offsets=[TopicPartition(topic_name, p, 10) for p in range(3)], asynchronous=False)
        consumer.close()
    cluster.kill_node(cluster.group_coordinator())
    # at once, while the group has no coordinator: the lost node leads its partition of
    # __consumer_offsets until the controller fences it (broker.session.timeout.ms, 3 s), and
    # ListGroups, asked of every node the metadata names, goes to it too (as Kafka's, the
    # listing may miss the groups of a coordinator not yet taken up by its new node)
    assert isinstance(_json(cli("groups", "list", "-o", "json")), list)
    groups = _json(cli("groups", "describe", group, "-o", "json"))
    assert {p["partition"]: p["committed"] for p in groups["partitions"]} == {0: 10, 1: 10, 2: 10}
    assert {group, group + "-gone"} <= {row["group"] for row in _json(cli("groups", "list", "-o", "json"))}
    deleted = cli("groups", "delete", group + "-gone", "--yes")
    assert deleted.exit_code == 0, deleted.stderr
    produced = cli("produce", topic_name, input="".join(f"late{i}\n" for i in range(50)))
    assert produced.exit_code == 0, produced.stderr
    consumed = cli("consume", topic_name, "-e", "-o", "jsonl")
    assert consumed.exit_code == 0, consumed.stderr
    assert len(consumed.stdout.splitlines()) == 350
    assert cli("topics", "list").exit_code == 0
    assert group + "-gone" not in {row["group"] for row in _json(cli("groups", "list", "-o", "json"))}
    described = _json(cli("topics", "describe", topic_name, "-o", "json"))
    assert described["total_records"] == 350
    reset = cli("reset", "--app-id", group, "--input-topics", topic_name, "--to-earliest", "--yes")
    assert reset.exit_code == 0, reset.stderr
    groups = _json(cli("groups", "describe", group, "-o", "json"))
    assert {p["committed"] for p in groups["partitions"]} == {0}
    keys = {f"k{i}" for i in range(300)}  # the lines produced above have none
    dumped = cli("changelog", "dump", topic_name, "--compact", "--key-format", "string", "-o", "jsonl")
    assert dumped.exit_code == 0, dumped.stderr
    assert {json.loads(line)["key"] for line in dumped.stdout.splitlines()} - {None} == keys
    table = cli("state", "all", "--changelog-topic", topic_name, "--key-format", "string", "--value-format", "string",
                "-o", "json")
    assert table.exit_code == 0, table.stderr
    assert {e["key"] for e in json.loads(table.stdout)} - {None} == keys


def test_offsets_whose_leader_was_just_killed_come_from_its_new_leader_as_get_offset_shell_gives_them(
        cluster, topic_name):
    """A partition's leader killed, `topics describe` at once: librdkafka asks ListOffsets of
    the leader its metadata names, and the lost node stays named there until the controller
    fences it; asked once for the whole timeout it answered nothing for that partition (no
    offsets shown, and a run's batch waited 10 s). Read again for the new leader, every
    partition's end is Kafka's GetOffsetShell's."""
    assert cli("topics", "create", topic_name, "-p", "3").exit_code == 0
    produce_batched(cluster.kafka, topic_name, [(f"k{i}".encode(), b"v") for i in range(300)])
    cluster.kill_node(cluster.leader(topic_name, 0))
    described = _json(cli("topics", "describe", topic_name, "-o", "json"))
    shell = kafka_tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", cluster.bootstrap,
                       "--topic", topic_name)
    assert shell.returncode == 0, shell.stderr[-500:]
    ends = {int(partition): int(end) for _, partition, end in (line.rsplit(":", 2) for line in shell.stdout.split())}
    assert {p["partition"]: p["high_offset"] for p in described["partitions"]} == ends
    assert sum(ends.values()) == 300


def test_a_topic_is_created_and_its_configs_read_while_the_metadata_names_a_killed_node_controller(
        cluster, topic_name):
    """A KRaft broker names a random live broker as controller in its metadata, and a node killed
    a moment ago is live to it until the controller fences it. librdkafka sends CreateTopics and
    DescribeConfigs to the controller it was named: asked once for the whole timeout, `topics
    describe` right after a node was killed failed with "Failed while waiting for controller"
    (seen on CI)."""
    assert cli("topics", "create", topic_name, "--config", "retention.ms=4321000").exit_code == 0
    lost = cluster.leader(topic_name, 0)
    cluster.kill_node(lost)
    config = ClientConfig(bootstrap_servers=cluster.bootstrap, bootstrap_source="test")
    # fresh clients until two name the killed node (one in three picks, within its 3 s session)
    reading, creating = itertools.islice((c for c in (KafkaClients(config) for _ in range(600))
                                          if c.metadata().controller_id == lost), 2)
    assert topic_configs(reading, topic_name)["retention.ms"] == "4321000"
    create_topic(creating, CreateTopicOptions(topic_name + "-new", 2))
    assert sorted(_replicas(cluster, topic_name + "-new")) == [0, 1]


def test_a_streams_group_is_described_through_another_node_and_after_its_coordinator_was_killed(
        cluster, topic_name, tmp_path):
    """StreamsGroupDescribe (KIP-1071) is kstool's own request (librdkafka has none): Kafka
    Streams' word count on the streams protocol, its group's coordinator on a node that is not
    the first bootstrap address; then that node killed: the group described the same from the
    two left."""
    source, app_id = topic_name, topic_name + "-wc"
    assert cli("topics", "create", source, "-p", "2").exit_code == 0
    produce_batched(cluster.kafka, source, [(None, line.encode()) for line in LINES])
    with ReferenceApp("wordcount", cluster.bootstrap, app_id, "streams", tmp_path / app_id, source, app_id + "-out"):
        wait_until(lambda: counts_in(cluster.kafka, app_id + "-out") == word_counts(LINES), "the app's counts")
    if cluster.address(cluster.group_coordinator()) == cluster.bootstrap.split(",")[0]:
        cluster.stop_node(cluster.group_coordinator())  # the coordinator moves to another node
        cluster.start_stopped()
    coordinator = cluster.group_coordinator()
    described = cli("groups", "describe", app_id, "-o", "json")
    assert described.exit_code == 0, described.stderr
    before = json.loads(described.stdout)
    assert before["type"] == "streams" and before["total_lag"] == 0
    cluster.kill_node(coordinator)
    again = cli("groups", "describe", app_id, "-o", "json")
    assert again.exit_code == 0, again.stderr
    after = json.loads(again.stdout)
    assert after["type"] == "streams"
    # the offsets are the group's durable state; a partition's member is not: the stopped app did
    # not leave, and its session expires on its own, between the two descriptions or not (a full
    # run saw the partitions differ after the kill, with no write in between; pytest cut the rest)
    assert _offsets(after) == _offsets(before), (before["partitions"], after["partitions"])


def _offsets(description: dict) -> list[tuple]:
    return [(p["topic"], p["partition"], p["committed"], p["end_offset"], p["lag"]) for p in description["partitions"]]


def _joined_member(cluster, group: str, topic: str) -> Consumer:
    member = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "session.timeout.ms": 45000})
    member.subscribe([topic])
    wait_until(lambda: member.poll(0.2) is None and bool(member.assignment()), "the member's assignment")
    return member


def test_leave_group_finds_the_coordinator_on_another_node_and_again_after_it_was_killed(cluster, topic_name):
    """LeaveGroup (reset --force's) through kstool's own client: the first bootstrap address
    is not the coordinator's node; then that first node is killed, and then the coordinator's."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    first = cluster.NODES[0]
    config = ClientConfig(bootstrap_servers=cluster.bootstrap, bootstrap_source="test")
    for lost in (None, first, "coordinator"):
        if lost == "coordinator":
            lost = cluster.group_coordinator()
        if lost is not None and lost in cluster.running():
            cluster.kill_node(lost)
        group = f"{topic_name}-{lost}"
        member = _joined_member(cluster, group, topic_name)
        described = admin.describe_consumer_groups([group])[group].result(30)
        leave_group(config, group, [m.member_id for m in described.members])
        assert not admin.describe_consumer_groups([group])[group].result(30).members
        member.close()
        cluster.start_stopped()


def test_a_wire_transaction_commits_once_after_its_coordinator_was_killed(cluster, topic_name):
    """kstool's own transaction (records of timestamp 0 with a group's offsets) finds its new
    coordinator, and the new leader of the partition the lost node led: its records are read
    committed exactly once, its offsets committed."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic_name, 3)])[topic_name].result(10)
    wait_until(lambda: {cluster.leader(topic_name, p) for p in range(3)} == set(cluster.NODES),
               "a partition led by each node")
    config = ClientConfig(bootstrap_servers=cluster.bootstrap, bootstrap_source="test")
    group = topic_name + "-group"
    records = {(topic_name, p): [(f"k{p}-{i}".encode(), b"v", 0, []) for i in range(20)] for p in range(3)}

    def leaders(topic: str, partition: int) -> tuple[str, int]:
        return "127.0.0.1", cluster.ports[cluster.leader(topic, partition)]

    commit_transaction(config, topic_name + "-txn", leaders, records, group, {(topic_name, 0): 5})
    cluster.kill_node(cluster.transaction_coordinator())  # and the leader of one of the partitions
    commit_transaction(config, topic_name + "-txn", leaders, records, group, {(topic_name, 0): 10})
    committed, _ = read_committed(cluster.kafka, topic_name)
    assert sorted((r.key, r.timestamp) for r in committed) == sorted(
        (key, 0) for rs in records.values() for key, *_ in rs for _ in range(2))
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    assert consumer.committed([TopicPartition(topic_name, 0)], timeout=30)[0].offset == 10
    consumer.close()


def test_a_record_of_timestamp_zero_is_written_to_the_new_leader(cluster, topic_name):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    wait_until(lambda: cluster.leader(topic_name, 0) >= 0, "a leader")
    config = ClientConfig(bootstrap_servers=cluster.bootstrap, bootstrap_source="test")
    writer = RecordWriter(config, lambda t, p: ("127.0.0.1", cluster.ports[cluster.leader(t, p)]))
    writer.write(topic_name, 0, b"a", b"1", 0, [])
    cluster.stop_node(cluster.leader(topic_name, 0))  # a clean stop hands leadership over
    writer.write(topic_name, 0, b"b", b"2", 0, [])
    writer.close()
    assert [(m.key(), m.timestamp()[1]) for m in read_all(cluster.kafka, topic_name)] == [(b"a", 0), (b"b", 0)]


def test_produce_below_min_insync_replicas_fails_in_one_line_naming_why_and_writes_nothing(cluster, topic_name):
    """Fewer replicas in sync than the topic's min.insync.replicas: the brokers refuse acks=all
    writes (NOT_ENOUGH_REPLICAS) and librdkafka retries them until they time out; kstool says
    which partition and why, exit 1, and nothing is written."""
    assert cli("topics", "create", topic_name, "--config", "min.insync.replicas=3").exit_code == 0
    lost = next(n for n in cluster.NODES if n != cluster.leader(topic_name, 0))
    cluster.kill_node(lost)
    wait_until(lambda: cluster.out_of_sync(topic_name, lost), f"node {lost} out of the ISR")
    produced = cli("produce", topic_name, "-X", "message.timeout.ms=5000", input="a\nb\n")
    assert produced.exit_code == 1
    assert produced.stderr.strip().splitlines() == [
        "kstool: error: 0 record(s) written, 2 not delivered (first: line 1: Local: Message timed out); "
        "partition 0: NOT_ENOUGH_REPLICAS: 2 in sync, min.insync.replicas=3"]
    cluster.start_stopped()
    wait_until(lambda: not cluster.out_of_sync(topic_name, lost), "the replica back in sync")
    assert read_all(cluster.kafka, topic_name) == []
