"""A secured cluster as operators run it: Apache Kafka's SASL_SSL listener (SCRAM-SHA-512, a
keytool certificate) with the StandardAuthorizer. kstool connects through a --command-config
file written for Kafka's own tools (Kafka's kafka-topics reads the same file), a user without
an ACL gets one line naming the resource and the operation and nothing is done, and no
secret appears in any output or --debug log (a run through the warm engine on the same
cluster: tests/engine/daemon/test_engine.py)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AclOperation, ResourceType

from tests.apache_kafka import KafkaBroker, kafka_tool
from tests.conftest import cli

TOPICS = "org.apache.kafka.tools.TopicCommand"


@pytest.fixture
def cluster(secured_cluster, monkeypatch):
    monkeypatch.delenv("KSTOOL_BOOTSTRAP_SERVERS", raising=False)  # it would win over the file's bootstrap.servers
    return secured_cluster


def test_one_liners_through_the_file_kafkas_tools_take(cluster, tmp_path):
    topic, group = cluster.prefix + "orders", cluster.prefix + "readers"
    created = cluster.as_user("alice", "topics", "create", topic, "--partitions", "2")
    assert created.exit_code == 0, created.stderr
    produced = cluster.as_user("alice", "produce", topic, "--key-delimiter", ":", input="k1:v1\nk2:v2\nk3:v3\n")
    assert produced.exit_code == 0 and produced.stderr == f"wrote 3 record(s) to {topic}\n", produced.stderr
    consumed = cluster.as_user("alice", "--debug", "consume", topic, "--group", group, "-e", "-o", "jsonl")
    assert consumed.exit_code == 0, consumed.stderr
    assert sorted((r["key"], r["value"]) for r in map(json.loads, consumed.stdout.splitlines())) == [
        ("k1", "v1"), ("k2", "v2"), ("k3", "v3")]
    described = json.loads(cluster.as_user("alice", "groups", "describe", group, "-o", "json").stdout)
    assert sum(p["committed"] for p in described["partitions"]) == 3 and described["total_lag"] == 0

    listed = cluster.as_user("alice", "topics", "list", "-o", "json")
    ours = sorted(row["topic"] for row in json.loads(listed.stdout))
    # the same file serves Kafka's own tool, which lists what alice may describe
    theirs = kafka_tool(TOPICS, "--bootstrap-server", cluster.kafka.secured_bootstrap, "--command-config",
                        str(cluster.properties("alice")), "--list")
    assert theirs.returncode == 0, theirs.stderr[-2000:]
    assert ours == sorted(theirs.stdout.split()) and topic in ours
    assert all(name.startswith(cluster.prefix) for name in ours)  # what alice's ACLs cover, no more

    # a record of timestamp 0 goes by kstool's own client (librdkafka would stamp it): SCRAM too
    zero = cluster.as_user("alice", "produce", topic, "--partition", "0", "--timestamp", "0", input="epoch\n")
    assert zero.exit_code == 0, zero.stderr
    last = cluster.as_user("alice", "consume", topic, "--partition", "0", "--from", "-1", "-e", "-o", "jsonl")
    assert [(r["value"], r["timestamp"]) for r in map(json.loads, last.stdout.splitlines())] == [("epoch", 0)]

    shown = cluster.as_user("alice", "config", "show")
    assert "sasl.password" in shown.stdout and "********" in shown.stdout
    assert cluster.leaked(created.stdout, created.stderr, produced.stdout, produced.stderr, consumed.stderr,
                          listed.stdout, listed.stderr, zero.stderr, shown.stdout, shown.stderr) == []


def test_an_operation_without_an_acl_is_one_line_and_changes_nothing(cluster):
    """mallory may describe one of alice's topics and her group, nothing more."""
    topic, other, group = cluster.prefix + "ledger", cluster.prefix + "ledger-copy", cluster.prefix + "app"
    for name in (topic, other):
        assert cluster.as_user("alice", "topics", "create", name).exit_code == 0
    assert cluster.as_user("alice", "produce", topic, input="a\nb\n").exit_code == 0
    assert cluster.as_user("alice", "consume", topic, "--group", group, "-e", "--max-messages", "1").exit_code == 0
    cluster.allow("mallory", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    cluster.allow("mallory", ResourceType.TOPIC, other, AclOperation.ALL)
    cluster.allow("mallory", ResourceType.GROUP, group, AclOperation.DESCRIBE)
    before = json.loads(cluster.as_user("alice", "groups", "describe", group, "-o", "json").stdout)["partitions"]

    refused = {
        ("consume", topic, "-e"): f"to READ topic '{topic}'",
        ("produce", topic): f"to WRITE topic '{topic}'",
        ("topics", "create", cluster.prefix + "mine"): f"to CREATE topic '{cluster.prefix}mine'",
        ("topics", "delete", other, topic, "--yes"): f"to DELETE topic '{topic}'",
        ("groups", "describe", cluster.prefix + "elsewhere"): f"to DESCRIBE group '{cluster.prefix}elsewhere'",
        ("reset", "--app-id", group, "--input-topics", topic, "--to-earliest", "--keep-local-state", "--yes"):
            f"to READ group '{group}'",
    }
    for args, refusal in refused.items():
        result = cluster.as_user("mallory", *args, input="x\n")
        assert (result.exit_code, result.stdout) == (1, ""), (args, result.stdout, result.stderr)
        assert result.stderr == (f"kstool: error: not authorized {refusal} as User:mallory "
                                 "(no ACL of the broker allows it)\n"), args
    # nothing done: the topic mallory may delete is still there, no record was written, no offset moved
    after = json.loads(cluster.as_user("alice", "topics", "list", "-o", "json").stdout)
    assert {row["topic"] for row in after} >= {topic, other}
    ends = json.loads(cluster.as_user("alice", "topics", "describe", topic, "-o", "json").stdout)
    assert sum(p["high_offset"] for p in ends["partitions"]) == 2
    assert json.loads(cluster.as_user("alice", "groups", "describe", group, "-o", "json").stdout)["partitions"] == before
    # Kafka's describe needs DESCRIBE_CONFIGS too; given it, mallory sees the ends without reading
    described = cluster.as_user("mallory", "topics", "describe", topic, "-o", "json")
    assert described.stderr == (f"kstool: error: not authorized to DESCRIBE_CONFIGS topic '{topic}' as "
                                "User:mallory (no ACL of the broker allows it)\n")
    cluster.allow("mallory", ResourceType.TOPIC, topic, AclOperation.DESCRIBE_CONFIGS)
    described = cluster.as_user("mallory", "topics", "describe", topic, "-o", "json")
    assert described.exit_code == 0, described.stderr
    assert sum(p["high_offset"] for p in json.loads(described.stdout)["partitions"]) == 2


def test_refused_credentials_and_an_untrusted_certificate_say_so(cluster, tmp_path):
    wrong = cluster.properties("mallory", password="not-" + cluster.passwords["mallory"])
    result = cli("--command-config", wrong, "--timeout", "60", "topics", "list")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"kstool: error: the broker at {cluster.kafka.secured_bootstrap} refused the "
                                    "credentials of mallory (SCRAM-SHA-512): ")
    assert "invalid credentials" in result.stderr and cluster.leaked(result.stderr) == []
    other = KafkaBroker(tmp_path / "other")  # another broker's certificate, not the one this broker shows
    other._make_certificate()
    untrusted = tmp_path / "untrusted.properties"
    untrusted.write_text(cluster.properties("alice").read_text().replace(str(cluster.kafka.ca_pem), str(other.ca_pem)))
    result = cli("--command-config", untrusted, "--timeout", "60", "topics", "list")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"kstool: error: the TLS handshake with {cluster.kafka.secured_bootstrap} failed")
    assert "certificate verify failed" in result.stderr


def test_a_changelog_read_without_describe_configs_says_what_it_cannot_know(cluster):
    """`state --changelog-topic` reads the topic's config to know a window store's retention and
    a versioned store's history; a user who may only read the records still gets them."""
    topic = cluster.prefix + "counts-changelog"
    assert cluster.as_user("alice", "topics", "create", topic).exit_code == 0
    assert cluster.as_user("alice", "produce", topic, "--key-delimiter", ":", input="k1:v1\nk2:v2\n").exit_code == 0
    cluster.allow("mallory", ResourceType.TOPIC, topic, AclOperation.READ)
    got = cluster.as_user("mallory", "state", "all", "--changelog-topic", topic, "-o", "json")
    assert got.exit_code == 0, got.stderr
    assert [(row["key"], row["value"]) for row in json.loads(got.stdout)] == [("k1", "v1"), ("k2", "v2")]
    assert f"not authorized to DESCRIBE_CONFIGS topic '{topic}' as User:mallory" in got.stderr
    assert "give --retention" in got.stderr
