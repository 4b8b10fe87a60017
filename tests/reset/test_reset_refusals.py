"""kstool reset refuses what it cannot do safely and deletes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import cli
from tests.helpers import create_topic, produce_values, tree_digest


def test_reset_with_a_state_dir_without_the_app_refuses_and_deletes_nothing(kafka, topic_name, tmp_path):
    create_topic(kafka, topic_name, 1)
    produce_values(kafka, topic_name, [b"v"] * 3)
    state = tmp_path / "state"
    (state / "other-app" / "0_0").mkdir(parents=True)
    (state / "not-kafka-streams").mkdir()
    (state / "not-kafka-streams" / "important.txt").write_text("keep me")
    (state / "not-kafka-streams" / "0_0").mkdir()
    before = tree_digest(state)
    for app_id in (topic_name, "not-kafka-streams"):
        result = cli("reset", "--app-id", app_id, "--input-topics", topic_name, "--state-dir", str(state))
        assert result.exit_code == 1, result.stderr
        assert "nothing was changed" in result.stderr
    for state_dir in ("/", str(Path.home())):
        result = cli("reset", "--app-id", "tmp", "--input-topics", topic_name, "--state-dir", state_dir)
        assert result.exit_code == 1 and "nothing was changed" in result.stderr
    assert tree_digest(state) == before
    described = cli("groups", "describe", topic_name, "-o", "json")  # no offsets were committed
    assert described.exit_code == 1 or json.loads(described.stdout)["partitions"] == []
