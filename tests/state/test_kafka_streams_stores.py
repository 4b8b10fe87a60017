"""The stores of Kafka Streams' own apps (tests/reference_apps.py), rebuilt by kstool from their
changelog topics, hold what the apps' Interactive Queries return."""

from __future__ import annotations

import json
import uuid

from tests.conftest import cli
from tests.helpers import counts_in, create_topic, produce_values, wait_until
from tests.oracles import word_counts
from tests.reference_apps import ReferenceApp

LINES = ["the cat sat", "The dog sat on the cat", "a cat a dog", "sat sat sat"]


def test_a_timestamped_key_value_store_is_what_interactive_queries_return(apache_kafka, tmp_path):
    source, app_id = (f"ref-{name}-{uuid.uuid4().hex[:6]}" for name in ("lines", "wordcount"))
    create_topic(apache_kafka, source, 2)
    produce_values(apache_kafka, source, [line.encode() for line in LINES])
    with ReferenceApp("wordcount", apache_kafka.bootstrap, app_id, "classic", tmp_path / app_id, source,
                      app_id + "-out") as app:
        wait_until(lambda: counts_in(apache_kafka, app_id + "-out") == word_counts(LINES), "the app's counts")
        queried = app.query("counts")
    assert queried == dict(word_counts(LINES))
    got = cli("-b", apache_kafka.bootstrap, "state", "all", "--changelog-topic", f"{app_id}-counts-changelog",
              "--key-format", "string", "--value-format", "long", "-o", "json")
    assert got.exit_code == 0, got.stderr
    assert {row["key"]: row["value"] for row in json.loads(got.stdout)} == queried
