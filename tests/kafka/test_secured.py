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

from tests.apache_kafka import ALLOWED_URLS, KafkaBroker, kafka_tool
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


@pytest.mark.parametrize("kind", ["JKS", "PKCS12"])
def test_a_client_certificate_in_java_key_stores_is_the_principal_the_acls_name(cluster, kind):
    """The SSL listener takes client certificates (the principal: their CN, by the broker's
    ssl.principal.mapping.rules). One client.properties as Kafka's tools take it, with JKS (the
    key under a password of its own) or PKCS12 stores and their passwords: kstool's librdkafka
    clients and its own wire client (a record of timestamp 0) both present the certificate, and
    Kafka's kafka-topics lists what kstool lists through the same file. Without an ACL for its
    CN, a certificate gets one line naming it; no password appears anywhere."""
    alice, mallory = cluster.certificate_properties("alice", kind), cluster.certificate_properties("mallory", kind)
    topic = cluster.prefix + "certified-" + kind.lower()
    created = cli("--command-config", alice, "topics", "create", topic, "--partitions", "2")
    assert created.exit_code == 0, created.stderr
    produced = cli("--command-config", alice, "produce", topic, "--partition", "0", input="a\nb\n")
    zero = cli("--command-config", alice, "produce", topic, "--partition", "1", "--timestamp", "0", input="epoch\n")
    assert (produced.exit_code, zero.exit_code) == (0, 0), produced.stderr + zero.stderr
    consumed = cli("--command-config", alice, "consume", topic, "-e", "-o", "jsonl")
    assert sorted((r["value"], r["timestamp"] == 0) for r in map(json.loads, consumed.stdout.splitlines())) == [
        ("a", False), ("b", False), ("epoch", True)]
    listed = cli("--command-config", alice, "topics", "list", "-o", "json")
    theirs = kafka_tool(TOPICS, "--bootstrap-server", str(cluster.kafka.mtls_bootstrap), "--command-config", str(alice),
                        "--list")
    assert theirs.returncode == 0, theirs.stderr[-2000:]
    assert sorted(row["topic"] for row in json.loads(listed.stdout)) == sorted(theirs.stdout.split())
    assert topic in theirs.stdout.split()

    refused = cli("--command-config", mallory, "topics", "create", cluster.prefix + "not-mallorys")
    assert (refused.exit_code, refused.stdout) == (1, "")
    assert refused.stderr == (f"kstool: error: not authorized to CREATE topic '{cluster.prefix}not-mallorys' as the "
                              "client certificate's CN=mallory,O=kstool tests (no ACL of the broker allows it)\n")
    shown = cli("--command-config", alice, "config", "show")
    assert cluster.leaked(created.stderr, produced.stderr, zero.stderr, consumed.stdout, consumed.stderr,
                          listed.stdout, refused.stderr, shown.stdout, shown.stderr) == []
    assert "PRIVATE KEY" not in shown.stdout + consumed.stderr


def test_a_wrong_store_password_or_an_untrusted_client_certificate_is_one_line(cluster, tmp_path):
    alice = cluster.certificate_properties("alice", "JKS")
    for wrong, said in (("ssl.keystore.password", "cannot open ssl.keystore.location {}: wrong password (the "
                                                  "store's integrity check failed)"),
                        ("ssl.key.password", "cannot open the private key in ssl.keystore.location {}: wrong key "
                                             "password (ssl.key.password)"),
                        ("ssl.truststore.password", "cannot open ssl.truststore.location {}: wrong password (the "
                                                    "store's integrity check failed)")):
        properties = tmp_path / f"wrong-{wrong}.properties"
        lines = [f"{line}-not" if line.startswith(wrong + "=") else line for line in alice.read_text().splitlines()]
        properties.write_text("\n".join(lines) + "\n")
        store = next(line.split("=", 1)[1] for line in lines
                     if line.startswith(("ssl.truststore.location=" if "truststore" in wrong else "ssl.keystore.location=")))
        result = cli("--command-config", properties, "topics", "list")
        assert (result.exit_code, result.stdout) == (2, ""), result.stderr
        assert result.stderr == f"kstool: error: {said.format(store)}\n"
        assert cluster.leaked(result.stderr) == []

    # a certificate of a CA the broker does not trust
    from tests.certificates import client_stores, make_ca

    stranger = client_stores(make_ca(tmp_path / "other-ca"), "alice", cluster.kafka.ca_pem, tmp_path / "stranger",
                             "changeit", "changeit")
    properties = tmp_path / "stranger.properties"
    swapped = {"ssl.keystore.location": str(stranger["keystore.jks"]), "ssl.keystore.password": "changeit",
               "ssl.key.password": "changeit"}
    properties.write_text("".join(f"{name}={swapped.get(name, value)}\n" for name, value in
                                  (line.split("=", 1) for line in alice.read_text().splitlines())))
    result = cli("--command-config", properties, "--timeout", "60", "topics", "list")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr == (f"kstool: error: the broker at {cluster.kafka.mtls_bootstrap} refused the client "
                             "certificate CN=alice,O=kstool tests (TLS alert: certificate unknown)\n")


def test_oauth_client_credentials_from_an_oidc_endpoint_log_in_as_the_token_subject(cluster):
    """SASL/OAUTHBEARER as Kafka's tools are set up for it (a token endpoint, the login
    handler, client id and secret in the JAAS line), the broker validating tokens with Kafka's
    own OAuthBearerValidatorCallbackHandler against the test's JWKS: the principal is the
    token's subject. kstool's librdkafka clients (librdkafka's OIDC method) and its own wire
    client (a record of timestamp 0) log in with tokens of the endpoint; kafka-topics lists what
    kstool lists through the same file; a refused secret or tokens that have already expired
    are one line naming which, at once."""
    alice = cluster.oauth_properties("alice")
    topic = cluster.prefix + "oauth"
    issued = cluster.kafka.oidc.issued
    created = cli("--command-config", alice, "topics", "create", topic)
    produced = cli("--command-config", alice, "produce", topic, input="a\n")
    zero = cli("--command-config", alice, "produce", topic, "--timestamp", "0", input="epoch\n")
    assert (created.exit_code, produced.exit_code, zero.exit_code) == (0, 0, 0), created.stderr + zero.stderr
    consumed = cli("--command-config", alice, "consume", topic, "-e", "-o", "jsonl")
    assert [(r["value"], r["timestamp"] == 0) for r in map(json.loads, consumed.stdout.splitlines())] == [
        ("a", False), ("epoch", True)]
    assert cluster.kafka.oidc.issued > issued  # the broker saw tokens of the endpoint
    listed = cli("--command-config", alice, "topics", "list", "-o", "json")
    theirs = kafka_tool(TOPICS, "--bootstrap-server", str(cluster.kafka.oauth_bootstrap), "--command-config",
                        str(alice), "--list", system={ALLOWED_URLS: f"{cluster.kafka.oidc.url}/token"})
    assert theirs.returncode == 0, theirs.stderr[-2000:]
    assert sorted(row["topic"] for row in json.loads(listed.stdout)) == sorted(theirs.stdout.split())
    assert topic in theirs.stdout.split()
    assert cluster.leaked(created.stderr, produced.stderr, zero.stderr, consumed.stderr, listed.stdout) == []

    token_url = f"{cluster.kafka.oidc.url}/token"
    wrong = cluster.oauth_properties("mallory", secret="not-mallorys-secret")
    refused = cli("--command-config", wrong, "--timeout", "60", "topics", "list")
    assert (refused.exit_code, refused.stdout) == (1, "")
    assert refused.stderr == f"kstool: error: the token endpoint {token_url} refused client mallory: HTTP 401 invalid_client\n"
    cluster.kafka.oidc.lifetime_s = -600  # an identity provider whose clock is ten minutes fast
    try:
        expired = cli("--command-config", alice, "--timeout", "60", "topics", "list")
    finally:
        cluster.kafka.oidc.lifetime_s = 3600
    assert (expired.exit_code, expired.stdout) == (1, "")
    assert expired.stderr.startswith(f"kstool: error: the token endpoint {token_url} gives client alice tokens that "
                                     "have expired (exp "), expired.stderr
    assert expired.stderr.count("\n") == 1
    assert cluster.leaked(refused.stderr, expired.stderr) == []


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
