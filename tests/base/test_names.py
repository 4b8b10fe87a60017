"""Names users give (topics, app ids) are checked before any request or file is touched (kstool.base.names)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cli
from tests.helpers import create_topic, produce_batched, read_all, tree_digest

BAD_NAMES = ["", "bad topic", "a/b", "..", "a" * 250, "ünïcode"]



@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_topic_names_are_refused_before_any_request(kafka, name):
    created = cli("topics", "create", name)
    assert created.exit_code == 2, created.stderr
    assert "invalid topic name" in created.stderr and len(created.stderr.splitlines()) == 1
    for args in (["topics", "delete", name, "--yes"], ["consume", name, "-e"], ["topics", "describe", name]):
        result = cli(*args, input="x\n")
        assert result.exit_code == 2, (args, result.stderr)
    assert name not in {t["topic"] for t in json.loads(cli("topics", "list", "-o", "json").stdout)}


def test_deleting_the_empty_topic_name_keeps_every_other_topics_records(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    produce_batched(kafka, topic_name, [(None, b"kept")] * 10)
    assert cli("topics", "delete", "", "--yes").exit_code == 2
    assert len(read_all(kafka, topic_name)) == 10


def test_hostile_app_ids_are_usage_errors_and_touch_nothing(kafka, tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep").write_text("data")
    before = tree_digest(tmp_path)
    for app_id in ("../x", "a/b", "..", "x y", "x" * 250):
        result = cli("reset", "--app-id", app_id, "--state-dir", str(tmp_path / "sub"))
        assert result.exit_code == 2, (app_id, result.stderr)
        assert "invalid application id" in result.stderr
    run = cli("run", "wordcount", "--input", "a", "--output", "b", "--app-id", "../x", "--once")
    assert run.exit_code == 2
    assert tree_digest(tmp_path) == before
