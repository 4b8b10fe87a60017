"""`kstool reset` of a Kafka Streams app beside Kafka's own reset of a twin app: on the streams
rebalance protocol (KIP-1071) `kafka-streams-groups.sh --reset-offsets --execute
--delete-all-internal-topics`, on the classic one `kafka-streams-application-reset`
(StreamsResetter). The same offsets, the same topics left, and the app run again reprocesses its
input as a fresh app would."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.apache_kafka import kafka_tool
from tests.conftest import cli
from tests.helpers import counts_in, create_topic, produce_values, read_all, wait_until
from tests.oracles import word_counts
from tests.reference_apps import ReferenceApp

STREAMS_GROUPS = "org.apache.kafka.tools.streams.StreamsGroupCommand"
STREAMS_RESETTER = "org.apache.kafka.tools.StreamsResetter"
LINES = ["the cat sat", "The dog sat on the cat", "a cat a dog", "sat sat sat"]
UPDATES = sum(word_counts(LINES).values())  # each word an update of its count (no cache)


def _run_until_counted(kafka, app_id: str, source: str, workdir, protocol: str, records: int = UPDATES) -> None:
    """Run the app until its output holds `records` records and ends at the right counts."""
    with ReferenceApp("wordcount", kafka.bootstrap, app_id, protocol, workdir / app_id, source, app_id + "-out"):
        wait_until(lambda: _exists(kafka, app_id + "-out") and len(read_all(kafka, app_id + "-out")) >= records,
                   f"{app_id}'s {records} updates")
    assert counts_in(kafka, app_id + "-out") == word_counts(LINES)


def _exists(kafka, topic: str) -> bool:
    return topic in {row["topic"] for row in json.loads(cli("-b", kafka.bootstrap, "topics", "list", "-o", "json").stdout)}


def _kafkas_reset(protocol: str, bootstrap: str, app_id: str, source: str) -> list[str]:
    if protocol == "streams":
        return [STREAMS_GROUPS, "--bootstrap-server", bootstrap, "--reset-offsets", "--group", app_id,
                "--all-input-topics", "--to-earliest", "--execute", "--delete-all-internal-topics"]
    return [STREAMS_RESETTER, "--bootstrap-server", bootstrap, "--application-id", app_id, "--input-topics", source,
            "--to-earliest"]


@pytest.mark.parametrize("protocol", ["streams", "classic"])
def test_a_kafka_streams_app_reset_is_kafkas_reset_and_the_app_starts_over(apache_kafka, tmp_path, protocol):
    kafka = apache_kafka
    source = f"ref-lines-{uuid.uuid4().hex[:6]}"
    create_topic(kafka, source, 2)
    produce_values(kafka, source, [line.encode() for line in LINES])
    ours, theirs = (f"ref-reset-{side}-{uuid.uuid4().hex[:6]}" for side in ("kstool", "kafka"))
    for app_id in (ours, theirs):
        _run_until_counted(kafka, app_id, source, tmp_path, protocol)

    if protocol == "streams":  # its coordinator holds its topology: inputs and internal topics need no naming
        planned = cli("-b", kafka.bootstrap, "reset", "--app-id", ours, "--dry-run", "-o", "json")
        plan = json.loads(planned.stdout)
        assert ({c["topic"] for c in plan["offsets"]}, plan["topics_to_delete"], plan["internal_topics_from"]) == (
            {source}, [f"{ours}-counts-changelog", f"{ours}-counts-repartition"], "topology")
    reset = cli("-b", kafka.bootstrap, "reset", "--app-id", ours, "--input-topics", source, "--to-earliest",
                "--state-dir", str(tmp_path / ours), "--yes")
    assert reset.exit_code == 0, reset.stderr
    ran = kafka_tool(*_kafkas_reset(protocol, kafka.bootstrap, theirs, source))
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]

    def standing(app_id: str) -> tuple[dict, list[str]]:
        """Where the app starts again (a partition without a committed offset: at its log start,
        Kafka Streams' auto.offset.reset), and the app's topics left."""
        described = json.loads(cli("-b", kafka.bootstrap, "groups", "describe", app_id, "-o", "json").stdout)
        offsets = {(p["topic"], p["partition"]): p["committed"] for p in described["partitions"]}
        left = sorted(t["topic"].removeprefix(app_id) for t in json.loads(
            cli("-b", kafka.bootstrap, "topics", "list", "-o", "json").stdout) if t["topic"].startswith(app_id))
        return {(source, p): offsets.get((source, p), 0) for p in (0, 1)}, left
    assert standing(ours) == standing(theirs) == ({(source, 0): 0, (source, 1): 0}, ["-out"])
    assert not (tmp_path / ours / ours).exists()  # its local state, which Kafka's tool leaves to the app

    # again: every update once more, as a fresh app writes them, and no more
    _run_until_counted(kafka, ours, source, tmp_path, protocol, 2 * UPDATES)
    assert len(read_all(kafka, ours + "-out")) == 2 * UPDATES
