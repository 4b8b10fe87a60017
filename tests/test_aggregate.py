"""The aggregate topology (unwindowed): every aggregation against a plain-Python oracle."""

from __future__ import annotations

import json
import struct
from collections import defaultdict

import pytest
from confluent_kafka import Producer

from tests.conftest import cli
from tests.helpers import create_topic, latest_per_key, read_all

RECORDS = [(b"a", "1"), (b"b", "2"), (b"a", "3"), (b"c", "2.5"), (b"b", "-7"), (b"a", "10"), (b"c", "0.25")]


def _produce(kafka, topic, records):
    producer = Producer(kafka.producer_conf())
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(10) == 0


def _decode(raw: bytes, whole: bool):
    return struct.unpack(">q" if whole else ">d", raw)[0]


def _oracle(agg: str, records) -> dict:
    groups = defaultdict(list)
    for key, number in records:
        groups[key].append(number)
    out = {}
    for key, numbers in groups.items():
        value = {"count": len(numbers), "sum": sum(numbers), "min": min(numbers), "max": max(numbers),
                 "avg": sum(numbers) / len(numbers)}[agg]
        whole = agg == "count" or (agg != "avg" and all(float(n).is_integer() for n in numbers))
        out[key] = (value, whole)
    return out


@pytest.mark.parametrize("agg", ["count", "sum", "min", "max", "avg"])
def test_aggregations_match_the_oracle(kafka, spark, topic_name, agg):
    source, sink = topic_name, topic_name + "-out"
    create_topic(kafka, source, 2)
    _produce(kafka, source, RECORDS)
    result = cli("run", "aggregate", "--input", source, "--output", sink, "--agg", agg,
                 "--app-id", topic_name + "-app", "--once")
    assert result.exit_code == 0, result.stderr
    expected = _oracle(agg, [(k, float(v)) for k, v in RECORDS])
    got = latest_per_key(read_all(kafka, sink))
    assert set(got) == set(expected)
    for key, (value, whole) in expected.items():
        assert _decode(got[key], whole) == pytest.approx(value), key
    changelog = latest_per_key(read_all(kafka, f"{topic_name}-app-aggregate-changelog"))
    assert {k: _decode(v, agg == "count") for k, v in changelog.items()} == pytest.approx(
        {k: v for k, (v, _) in expected.items()})


def test_group_by_json_field_with_double_values_and_bad_records(kafka, spark, topic_name):
    source, sink, dlq = topic_name, topic_name + "-out", topic_name + "-dlq"
    create_topic(kafka, source, 1)
    rows = [{"user": "u1", "amount": 2}, {"user": "u2", "amount": 1.5}, {"user": "u1", "amount": 3},
            {"user": "u1"}, {"user": "u2", "amount": 4}]
    _produce(kafka, source, [(None, json.dumps(r)) for r in rows] + [(None, "not json")])
    result = cli("run", "aggregate", "--input", source, "--output", sink, "--agg", "sum", "--value-field",
                 "amount", "--group-by", "field:user", "--app-id", topic_name + "-app", "--once",
                 "--on-error", f"dlq:{dlq}", "--report", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["bad_records"] == 2
    got = latest_per_key(read_all(kafka, sink))
    assert _decode(got[b"u1"], True) == 5 and _decode(got[b"u2"], False) == 5.5
    assert sorted(m.value() for m in read_all(kafka, dlq)) == sorted([b'{"user": "u1"}', b"not json"])


def test_long_and_double_input_formats(kafka, spark, topic_name):
    source = topic_name
    create_topic(kafka, source, 1)
    _produce(kafka, source, [(b"k", struct.pack(">q", -5)), (b"k", struct.pack(">q", 12))])
    assert cli("run", "aggregate", "--input", source, "--output", source + "-l", "--agg", "max",
               "--input-value-format", "long", "--app-id", source + "-l", "--once").exit_code == 0
    assert _decode(latest_per_key(read_all(kafka, source + "-l"))[b"k"], True) == 12
    doubles = source + "-d"
    create_topic(kafka, doubles, 1)
    values = [0.1, -2.75, 1e300, 5e-324]
    _produce(kafka, doubles, [(b"k", struct.pack(">d", v)) for v in values])
    assert cli("run", "aggregate", "--input", doubles, "--output", doubles + "-o", "--agg", "min",
               "--input-value-format", "double", "--app-id", doubles + "-a", "--once").exit_code == 0
    assert _decode(latest_per_key(read_all(kafka, doubles + "-o"))[b"k"], False) == min(values)


def test_a_value_that_is_not_a_number_fails_naming_the_record(kafka, spark, topic_name):
    create_topic(kafka, topic_name, 1)
    assert cli("produce", topic_name, "-K", ":", input="k:1\nk:x\n").exit_code == 0
    result = cli("run", "aggregate", "--input", topic_name, "--output", topic_name + "-o", "--agg", "sum",
                     "--app-id", topic_name + "-a", "--once")
    errors = [line for line in result.stderr.splitlines() if line.startswith("kstool: error:")]
    assert result.exit_code == 1
    assert errors == [f"kstool: error: not a number (or not JSON) at {topic_name}:0 offset 1; "
                      "use --on-error skip or dlq:TOPIC to go past it"]
