"""`topology describe --group`: a streams group's topology as the broker keeps it (Kafka 4.4,
KIP-1331), for Kafka Streams' own apps (tests/reference_apps.py), against the app's describe()
and Kafka's `kafka-streams-groups.sh --describe --topology`."""

from __future__ import annotations

import re
import uuid

import pytest

from kstool.kafka.streams_groups import STREAMS_GROUP_DESCRIBE, StreamsGroupsUnsupported, TopologiesNotKept, describe_version
from tests.apache_kafka import kafka_tool
from tests.conftest import cli
from tests.helpers import create_topic, wait_until
from tests.reference_apps import ReferenceApp

STREAMS_GROUPS = "org.apache.kafka.tools.streams.StreamsGroupCommand"


def _lines(text: str) -> list[str]:
    """describe()'s lines without their indentation and blank lines (which differ by version)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def test_a_streams_groups_topology_from_the_broker_is_the_apps_describe(topologies_kafka, tmp_path):
    kafka = topologies_kafka
    source, app_id = (f"ref-{name}-{uuid.uuid4().hex[:6]}" for name in ("orders", "joins"))
    output = source + "-joined"  # not named after the app: only internal topics are
    for topic in (source, source + "-prices", source + "-regions", source + "-customers", source + "-accounts",
                  output, output + "-global", output + "-fk"):
        create_topic(kafka, topic, 1)
    # a versioned table, a global store and a foreign-key join: internal topics and a global sub-topology
    with ReferenceApp("joins", kafka.bootstrap, app_id, "streams", tmp_path / app_id, source, output) as app:
        described = lambda: cli("-b", kafka.bootstrap, "topology", "describe", "--group", app_id)  # noqa: E731
        wait_until(lambda: described().exit_code == 0, lambda: f"the stored topology: {described().stderr}")
        ours = described().stdout
        theirs = kafka_tool(STREAMS_GROUPS, "--bootstrap-server", kafka.bootstrap, "--describe", "--group", app_id,
                            "--topology")
    # the same lines as the app printed, in its order (the broker keeps nodes sorted by name)
    assert _lines(ours) == _lines(app.topology)
    assert "Sub-topology: 1 for global store (will not generate tasks)" in _lines(ours)
    assert "Sink: KTABLE-SINK-0000000015 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000013-topic)" in ours
    # Kafka's tool: the same nodes; it numbers the global store after the last sub-topology and
    # prints internal topics with the application.id prefix
    assert theirs.returncode == 0, theirs.stderr
    nodes = [re.sub(rf"\b{re.escape(app_id)}-", "", line) for line in _lines(theirs.stdout)
             if not line.startswith("Sub-topology:")]
    assert sorted(nodes) == sorted(line for line in _lines(ours) if not line.startswith("Sub-topology:"))


def test_without_a_stored_topology_the_answer_is_one_line(topologies_kafka, tmp_path):
    kafka = topologies_kafka
    source, app_id = (f"ref-{name}-{uuid.uuid4().hex[:6]}" for name in ("lines", "unpushed"))
    create_topic(kafka, source, 1)
    with ReferenceApp("wordcount", kafka.bootstrap, app_id, "streams", tmp_path / app_id, source, app_id + "-out",
                      config={"topology.description.push.enabled": "false"}):
        wait_until(lambda: cli("-b", kafka.bootstrap, "groups", "describe", app_id, "-o", "json").exit_code == 0,
                   "the streams group")
        unpushed = cli("-b", kafka.bootstrap, "topology", "describe", "--group", app_id)
        theirs = kafka_tool(STREAMS_GROUPS, "--bootstrap-server", kafka.bootstrap, "--describe", "--group", app_id,
                            "--topology")
    assert unpushed.exit_code == 1 and unpushed.stdout == ""
    assert unpushed.stderr.count("\n") == 1 and "keeps no topology of streams group" in unpushed.stderr
    assert "topology.description.push.enabled" in unpushed.stderr
    assert "No topology description is stored" in theirs.stdout + theirs.stderr
    missing = cli("-b", kafka.bootstrap, "topology", "describe", "--group", f"no-such-{uuid.uuid4().hex[:6]}")
    assert missing.exit_code == 1 and "no streams group" in missing.stderr and missing.stderr.count("\n") == 1


def test_which_streams_group_describe_a_broker_is_asked():
    """Apache Kafka 4.4 serves v1 (with the topology), 4.2 and 4.3 serve v0, older ones none."""
    assert describe_version({STREAMS_GROUP_DESCRIBE: (0, 1)}, "b:9092", with_topology=True) == 1
    assert describe_version({STREAMS_GROUP_DESCRIBE: (0, 0)}, "b:9092", with_topology=False) == 0
    with pytest.raises(TopologiesNotKept, match=r"the broker at b:9092 keeps no topology .* up to v0"):
        describe_version({STREAMS_GROUP_DESCRIBE: (0, 0)}, "b:9092", with_topology=True)
    with pytest.raises(StreamsGroupsUnsupported, match="does not serve StreamsGroupDescribe"):
        describe_version({}, "b:9092", with_topology=False)
