"""Kafka Streams' own word count (tests/reference_apps.py) under kstool's group commands, run
with the streams rebalance protocol (KIP-1071: a streams group) and with the classic one (a
consumer group): `groups list` and `groups describe` agree with kafka-streams-groups.sh run
from the jars."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from tests.apache_kafka import kafka_tool
from tests.conftest import cli
from tests.helpers import counts_in, create_topic, produce_values, wait_until
from tests.oracles import word_counts
from tests.reference_apps import ReferenceApp

STREAMS_GROUPS = "org.apache.kafka.tools.streams.StreamsGroupCommand"
LINES = ["the cat sat", "The dog sat on the cat", "a cat a dog", "sat sat sat"]


@pytest.fixture(scope="module")
def apps(apache_kafka, tmp_path_factory):
    """One word count app per protocol, on the same input, each run until its output holds every
    count; left running for the tests, stopped at the module's end."""
    workdir = tmp_path_factory.mktemp("kafka-streams-apps")
    source = f"ref-lines-{uuid.uuid4().hex[:6]}"
    create_topic(apache_kafka, source, 2)
    produce_values(apache_kafka, source, [line.encode() for line in LINES])
    running = {}
    try:
        for protocol in ("streams", "classic"):
            app_id = f"ref-wordcount-{protocol}-{uuid.uuid4().hex[:6]}"
            app = ReferenceApp("wordcount", apache_kafka.bootstrap, app_id, protocol, workdir / app_id,
                               source, app_id + "-out").start()
            running[protocol] = app
            wait_until(lambda app_id=app_id: counts_in(apache_kafka, app_id + "-out") == word_counts(LINES),
                       f"{app_id}'s counts")
        yield {"source": source, "kafka": apache_kafka, **running}
    finally:
        for app in running.values():
            app.stop()


def _tool(kafka, *args: str) -> str:
    ran = kafka_tool(STREAMS_GROUPS, "--bootstrap-server", kafka.bootstrap, *args)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    return ran.stdout


def test_groups_list_shows_each_app_with_its_type(apps):
    listed = cli("groups", "list", "-o", "json")
    assert listed.exit_code == 0, listed.stderr
    rows = {row["group"]: row for row in json.loads(listed.stdout)}
    streams, classic = apps["streams"].application_id, apps["classic"].application_id
    assert (rows[streams]["type"], rows[streams]["state"]) == ("streams", "STABLE")
    assert (rows[classic]["type"], rows[classic]["state"]) == ("classic", "STABLE")
    theirs = _tool(apps["kafka"], "--list").split()
    assert streams in theirs and classic not in theirs


def test_apps_list_finds_both_as_kafka_streams_apps(apps):
    listed = cli("-b", apps["kafka"].bootstrap, "apps", "list", "--kafka-streams", "-o", "json")
    assert listed.exit_code == 0, listed.stderr
    rows = {row["app_id"]: row for row in json.loads(listed.stdout)}
    for protocol in ("streams", "classic"):
        app_id = apps[protocol].application_id
        assert rows[app_id] == {  # streams: from its topology; classic: from its topics' names and commits
            "app_id": app_id, "protocol": protocol, "state": "STABLE", "members": 1, "input_topics": [apps["source"]],
            "internal_topics": [f"{app_id}-counts-changelog", f"{app_id}-counts-repartition"], "kstool_app": False}


def test_groups_describe_of_a_streams_group_agrees_with_kafka_streams_groups(apps):
    kafka, app_id = apps["kafka"], apps["streams"].application_id
    described = cli("groups", "describe", app_id, "-o", "json")
    assert described.exit_code == 0, described.stderr
    ours = json.loads(described.stdout)
    streams = ours["streams"]
    assert (ours["type"], ours["state"], len(ours["members"])) == ("streams", "STABLE", 1)
    # two subtopologies: the words' repartition, then the count
    by_id = {s["subtopology"]: s for s in streams["subtopologies"]}
    assert sorted(by_id) == ["0", "1"]
    assert by_id["0"]["source_topics"] == [apps["source"]]
    assert by_id["1"]["changelog_topics"] == [f"{app_id}-counts-changelog"]
    assert by_id["1"]["repartition_source_topics"] == [f"{app_id}-counts-repartition"]
    member = streams["members"][0]
    assert member["active_tasks"] == {"0": [0, 1], "1": [0, 1]}
    assert sorted(ours["members"][0]["assignment"]) == sorted(
        [f"{apps['source']}:0", f"{apps['source']}:1", f"{app_id}-counts-repartition:0",
         f"{app_id}-counts-repartition:1"])

    state = _tool(kafka, "--describe", "--group", app_id, "--state", "--verbose")
    header, row = [line.split() for line in state.strip().splitlines()[-2:]]
    fields = dict(zip(header, row))  # "COORDINATOR (ID)" and "host:port (id)" are two words each
    assert (fields["STATE"], int(fields["#MEMBERS"])) == ("Stable", 1)
    assert int(fields["GROUP-EPOCH"]) == streams["group_epoch"]
    assert int(fields["TARGET-ASSIGNMENT-EPOCH"]) == streams["assignment_epoch"]

    members = _tool(kafka, "--describe", "--group", app_id, "--members", "--verbose")
    header, row = members.strip().splitlines()[:2]
    fields = dict(zip(header.split(), row.split()))
    assert (fields["MEMBER"], fields["PROCESS"], fields["CLIENT-ID"]) == (
        member["member_id"], member["process_id"], member["client_id"])
    assert (int(fields["MEMBER-EPOCH"]), int(fields["TOPOLOGY-EPOCH"])) == (member["member_epoch"], member["topology_epoch"])
    active = re.search(r"ACTIVE: (.*?)(?:TARGET-ACTIVE|$)", row).group(1)
    assert {s: [int(p) for p in ps.split(",")] for s, ps in re.findall(r"(\d+):\[([\d,]*)\]", active)} == member["active_tasks"]

    # Kafka's tool lists every partition of the active tasks, "-" where nothing is committed yet;
    # kstool lists the committed ones, as for a consumer group
    offsets = _tool(kafka, "--describe", "--group", app_id, "--offsets", "--verbose")
    header, *rows = [line.split() for line in offsets.strip().splitlines()]
    theirs = {(r[1], int(r[2])): dict(zip(header, r)) for r in rows}
    committed = {tp: row for tp, row in theirs.items() if row["CURRENT-OFFSET"] != "-"}
    ours_offsets = {(p["topic"], p["partition"]): p for p in ours["partitions"]}
    assert set(committed) == set(ours_offsets) and committed
    for tp, partition in ours_offsets.items():
        assert (partition["committed"], partition["end_offset"], partition["lag"]) == (
            int(committed[tp]["CURRENT-OFFSET"]), int(committed[tp]["LOG-END-OFFSET"]), int(committed[tp]["OFFSET-LAG"]))


def test_reset_refuses_a_streams_group_with_members_and_changes_nothing(apps):
    app_id = apps["streams"].application_id
    before = json.loads(cli("groups", "describe", app_id, "-o", "json").stdout)["partitions"]
    refused = cli("reset", "--app-id", app_id, "--input-topics", apps["source"], "--to-earliest",
                  "--keep-local-state", "--yes")
    assert refused.exit_code == 75, refused.stderr
    assert refused.stderr == (f"kstool: error: streams group '{app_id}' is STABLE with 1 member(s): stop every "
                              "instance of the application first (a streams group's members leave as their app "
                              "stops)\n")
    assert json.loads(cli("groups", "describe", app_id, "-o", "json").stdout)["partitions"] == before
