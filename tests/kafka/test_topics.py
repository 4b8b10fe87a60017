"""kstool topics list and describe."""

from __future__ import annotations

import json

from tests.conftest import cli


def test_topics_list_json_contains_created_topic(kafka, topic_name):
    assert cli("topics", "create", topic_name, "-p", "3").exit_code == 0
    result = cli("topics", "list", "-o", "json")
    assert result.exit_code == 0, result.stderr
    topics = {t["topic"]: t for t in json.loads(result.stdout)}
    assert topics[topic_name]["partitions"] == 3


def test_topics_list_formats(kafka, topic_name):
    assert cli("topics", "create", topic_name).exit_code == 0
    jsonl = cli("topics", "list", "-o", "jsonl").stdout.splitlines()
    assert any(json.loads(line)["topic"] == topic_name for line in jsonl)
    csv_lines = cli("topics", "list", "-o", "csv").stdout.splitlines()
    assert csv_lines[0] == "topic,partitions,replication_factor"
    assert any(line.startswith(topic_name + ",1,") for line in csv_lines)
    table = cli("topics", "list").stdout
    assert "TOPIC" in table and topic_name in table


def test_topics_describe_counts_records_and_configs(kafka, topic_name):
    assert cli("topics", "create", topic_name, "-p", "2", "--config", "cleanup.policy=compact").exit_code == 0
    # keyed: a compacted topic refuses records without a key (Apache Kafka; the embedded broker takes them)
    assert cli("produce", topic_name, "--partition", "1", "-K", ":", input="a:1\nb:2\nc:3\n").exit_code == 0
    doc = json.loads(cli("topics", "describe", topic_name, "-o", "json").stdout)
    assert [p["records"] for p in doc["partitions"]] == [0, 3]
    assert doc["total_records"] == 3
    assert doc["configs"].get("cleanup.policy") == "compact"
