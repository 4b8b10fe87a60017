"""kstool topics list and describe."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from kstool.kafka.topics import ask_to_create
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


class _Answers:
    """An admin client whose CreateTopics answers are the given error codes in turn (None: created)."""

    def __init__(self, *codes: int | None):
        self.codes, self.asked = list(codes), 0

    def create_topics(self, topics, request_timeout):
        self.asked += 1
        code = self.codes.pop(0)

        class Answer:
            def result(self):
                if code is not None:
                    raise KafkaException(KafkaError(code))
        return {topics[0].topic: Answer()}


ASKS = [0.5, 1, 2]


@pytest.mark.parametrize("lost", [KafkaError._DESTROY_BROKER, KafkaError._TIMED_OUT])
def test_a_create_whose_answer_was_lost_is_asked_again(lost):
    """_DESTROY_BROKER: the broker handle dropped; _TIMED_OUT: no controller answered."""
    lost_then_created = _Answers(lost, None)
    ask_to_create(lambda: lost_then_created, NewTopic("t", 1), ASKS)
    assert lost_then_created.asked == 2
    # the lost answer had created it: the next ask finds it
    lost_then_exists = _Answers(lost, KafkaError.TOPIC_ALREADY_EXISTS)
    ask_to_create(lambda: lost_then_exists, NewTopic("t", 1), ASKS)
    assert lost_then_exists.asked == 2


@pytest.mark.parametrize("answers", [(KafkaError.TOPIC_ALREADY_EXISTS,), (KafkaError.POLICY_VIOLATION,),
                                     (KafkaError._DESTROY_BROKER,) * len(ASKS), (KafkaError._TIMED_OUT,) * len(ASKS)])
def test_a_refused_create_is_not_asked_again_nor_one_lost_past_the_timeout(answers):
    admin = _Answers(*answers)
    with pytest.raises(KafkaException) as raised:
        ask_to_create(lambda: admin, NewTopic("t", 1), ASKS)
    assert raised.value.args[0].code() == answers[-1] and admin.asked == len(answers)
