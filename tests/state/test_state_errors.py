"""A state read of a missing key prints only the error."""

from __future__ import annotations

import json

from tests.conftest import cli
from tests.helpers import create_topic, produce_records


def test_state_get_of_a_missing_key_prints_only_the_error(kafka, topic_name):
    changelog = topic_name + "-changelog"
    create_topic(kafka, changelog, 1)
    produce_records(kafka, changelog, [{"key": b"k1", "value": (7).to_bytes(8, "big"), "partition": 0,
                                     "timestamp": 1_000}])
    source = ("--changelog-topic", changelog, "--key-format", "string", "--value-format", "long")
    missing = cli("state", "get", *source, "nope")
    assert (missing.exit_code, missing.stdout, missing.stderr) == (1, "", "kstool: error: not found: nope\n")
    as_json = cli("state", "get", *source, "nope", "-o", "json")
    assert as_json.exit_code == 1 and json.loads(as_json.stdout) == []
    found = cli("state", "get", *source, "k1", "nope", "-o", "json")
    assert found.exit_code == 1 and [e["value"] for e in json.loads(found.stdout)] == [7]
