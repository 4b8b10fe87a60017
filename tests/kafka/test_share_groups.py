"""Share groups (KIP-932) in `groups list`, `groups describe`, `reset` and `groups delete`,
against Kafka's own `kafka-share-groups.sh` (ShareGroupCommand) on the same group, whose member
is Kafka's console share consumer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.apache_kafka import _die_with_parent, _java, kafka_jars, kafka_tool
from tests.conftest import cli
from tests.helpers import create_topic, produce_values, wait_until

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
CONSOLE_SHARE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"


def _tool(kafka, *args: str) -> list[list[str]]:
    """The tool's table rows (after its header), split on whitespace."""
    ran = kafka_tool(SHARE_GROUPS, "--bootstrap-server", kafka.bootstrap, *args)
    assert ran.returncode == 0, ran.stderr[-2000:]
    lines = [line.split() for line in ran.stdout.splitlines() if line.strip()]
    return lines[1:] if lines and lines[0][0] == "GROUP" else lines


def _described(group: str) -> dict:
    described = cli("groups", "describe", group, "-o", "json")
    assert described.exit_code == 0, described.stderr
    return json.loads(described.stdout)


def test_a_share_group_is_listed_and_described_as_kafka_share_groups_shows_it(on_apache_kafka, topic_name, tmp_path):
    kafka, group = on_apache_kafka, topic_name + "-sg"
    create_topic(kafka, topic_name, 2)
    _start_at_the_earliest_offset(kafka, group)
    produce_values(kafka, topic_name, [f"v{i}".encode() for i in range(6)], partition=0)  # before it joined
    printed = tmp_path / "consumed.txt"
    with open(printed, "w") as out:
        consumer = subprocess.Popen(
            [_java(), "-Xmx256m", "-cp", f"{kafka_jars()}/*", CONSOLE_SHARE_CONSUMER, "--bootstrap-server",
             kafka.bootstrap, "--topic", topic_name, "--group", group], stdout=out, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    try:
        wait_until(lambda: any(m["assignment"] for m in _member_rows(group)), "the share consumer's assignment",
                   limit_s=120)
        produce_values(kafka, topic_name, [f"v{i}".encode() for i in range(6)], partition=1)
        wait_until(lambda: len(Path(printed).read_text().split()) >= 12, "12 records delivered", limit_s=120)

        listed = json.loads(cli("groups", "list", "-o", "json").stdout)
        assert {"group": group, "type": "share", "state": "STABLE", "simple": False} in listed
        assert [group] in _tool(kafka, "--list")
        state = _tool(kafka, "--describe", "--group", group, "--state")
        described = _described(group)
        assert (described["type"], described["state"], len(described["members"])) == (
            "share", state[0][-2].upper(), int(state[0][-1]))
        members = _tool(kafka, "--describe", "--group", group, "--members")
        assert [(m["member_id"], m["client_id"], m["assignment"]) for m in described["members"]] == [
            (row[1], row[3], _assignment(row[5])) for row in members]

        def offsets_agree() -> bool:  # acknowledgements move them: two reads agree once they settle
            tool = {(row[1], int(row[2])): (None if row[3] == "-" else int(row[3]), None if row[4] == "-" else int(row[4]))
                    for row in _tool(kafka, "--describe", "--group", group, "--offsets")}
            ours = {(p["topic"], p["partition"]): (p["committed"], p["lag"]) for p in _described(group)["partitions"]}
            return ours == tool and set(tool) == {(topic_name, 0), (topic_name, 1)}
        wait_until(offsets_agree, "kstool's and kafka-share-groups' start offsets and lag alike", limit_s=60)
        table = cli("groups", "describe", group)
        assert table.exit_code == 0 and f"group {group}: share group, epoch" in table.stdout, table.stdout
        assert "START OFFSET" in table.stdout.splitlines()[1], table.stdout

        refused = cli("reset", "--app-id", group, "--to-earliest", "--yes")
        assert refused.exit_code == 75 and "stop its consumers first" in refused.stderr, refused.stderr
    finally:
        consumer.terminate()
        consumer.wait(30)
    wait_until(lambda: not _described(group)["members"], "the consumer gone from the group", limit_s=120)

    # a reset kstool plans and applies, read back by Kafka's tool
    planned = cli("reset", "--app-id", group, "--to-offset", "2", "--dry-run", "-o", "json")
    assert planned.exit_code == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert (plan["app_kind"], plan["topics_to_delete"], plan["local_state"]) == ("share-group", [], None)
    assert {(o["topic"], o["partition"]): o["target"] for o in plan["offsets"]} == {
        (topic_name, 0): 2, (topic_name, 1): 2}
    applied = cli("reset", "--app-id", group, "--to-offset", "2", "--yes")
    assert applied.exit_code == 0, applied.stderr
    tool = {(row[1], int(row[2])): row[3] for row in _tool(kafka, "--describe", "--group", group, "--offsets")}
    assert tool == {(topic_name, 0): "2", (topic_name, 1): "2"}

    assert cli("groups", "delete", group, "--dry-run").exit_code == 0
    assert [group] in _tool(kafka, "--list")
    deleted = cli("groups", "delete", group)  # not on a terminal: --yes needed
    assert deleted.exit_code == 2 and "--yes" in deleted.stderr
    assert cli("groups", "delete", group, "--yes").exit_code == 0
    assert [group] not in _tool(kafka, "--list")
    assert group not in {g["group"] for g in json.loads(cli("groups", "list", "-o", "json").stdout)}


def _start_at_the_earliest_offset(kafka, group: str) -> None:
    """A new share group starts at the latest offset, fixed when a partition's first fetch reaches its
    leader: on a busy machine that can come after the member shows an assignment and after the test's
    records, which it would then never deliver."""
    reset = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.incremental_alter_configs([reset])[reset].result(30)


def _member_rows(group: str) -> list[dict]:
    try:
        return _described(group)["members"]
    except AssertionError:  # not a group yet
        return []


def _assignment(text: str) -> list[str]:
    """ShareGroupCommand's `topic:0,1` as kstool's ["topic:0", "topic:1"]."""
    topic, partitions = text.rsplit(":", 1)
    return [f"{topic}:{p}" for p in partitions.split(",")]
