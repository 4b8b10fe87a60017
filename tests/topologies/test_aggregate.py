"""The aggregate topology (unwindowed): every aggregation against a plain-Python oracle."""

from __future__ import annotations

import json
import struct
from collections import defaultdict

import pytest
from confluent_kafka import Producer

from tests.conftest import cli
from tests.helpers import create_topic, latest_per_key, produce_keyed, read_all, source_rows

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
    # one serde for the store and the output: the changelog holds the output's bytes (a whole sum a long)
    assert latest_per_key(read_all(kafka, f"{topic_name}-app-aggregate-changelog")) == got


def test_aggregates_carry_the_headers_of_the_last_record_of_their_key(kafka, spark, topic_name):
    """A key's aggregate has the headers of its last record (none when it had none: records
    without headers are summed where the source reads them, those with headers in Spark), as
    Kafka Streams forwards the update's record; the changelog's records carry none."""
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 1)
    produce_keyed(kafka, source, [("a", "1", 1, [("n", b"1")]), ("b", "2", 2), ("a", "3", 3),
                                  ("b", "4", 4, [("n", b"4")]), ("c", "5", 5, [("n", b"5")])])
    result = cli("run", "aggregate", "--input", source, "--output", sink, "--agg", "sum", "--app-id", app, "--once")
    assert result.exit_code == 0, result.stderr
    assert {m.key().decode(): (_decode(m.value(), True), m.headers()) for m in read_all(kafka, sink)} == {
        "a": (4, None), "b": (6, [("n", b"4")]), "c": (5, [("n", b"5")])}
    assert all(m.headers() is None for m in read_all(kafka, f"{app}-aggregate-changelog"))


@pytest.mark.embedded_tier
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


def test_group_by_a_delimited_field_of_a_text_value(kafka, spark, topic_name):
    # as Kafka's own tests re-key, value.split("|")[1]; a value without that field has no key: ignored
    source, sink = topic_name, topic_name + "-out"
    create_topic(kafka, source, 2)
    _produce(kafka, source, [(b"a", b"home|u1"), (b"b", b"cart|u2"), (b"c", b"home|u1"), (b"d", b"nofield"),
                             (b"e", b"pay|u1|extra")])
    result = cli("run", "aggregate", "--input", source, "--output", sink, "--group-by", "split:|:1",
                 "--app-id", topic_name + "-app", "--once", "--report", "json")
    assert result.exit_code == 0, result.stderr
    got = latest_per_key(read_all(kafka, sink))
    assert {key: _decode(value, True) for key, value in got.items()} == {b"u1": 3, b"u2": 1}


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


@pytest.mark.parametrize("agg,fmt", [("count", "text"), ("sum", "text"), ("min", "text"), ("max", "text"),
                                     ("sum", "long"), ("max", "double")])
def test_the_source_combiner_takes_exactly_the_records_spark_reads_alike(agg, fmt):
    """What NumberCombiner combines equals a record-by-record reduction of the same records;
    what it leaves (no key, no value, text with spaces or words, not 8 bytes, not finite) is
    every other record, unchanged."""
    import random

    from kstool.tasks.combiners.numbers import NumberCombiner

    rng = random.Random(7)
    texts = ["1", "-3", "2.5", "+4", ".5", "1e3", "007", "x", " 1", "1 ", "NaN", "Infinity", "1e999", "", "1d"]
    encode = {"text": lambda t: t.encode(),
              "long": lambda t: struct.pack(">q", int(float(t))) if t[-1:].isdigit() and "e" not in t else t.encode(),
              "double": lambda t: struct.pack(">d", float(t)) if t in ("1", "-3", "2.5", "NaN", "Infinity") else b"xy"}[fmt]
    keys = [rng.choice([b"a", b"b", b"c", None]) for _ in range(3000)]
    values = [None if rng.random() < 0.05 else encode(rng.choice(texts)) for _ in keys]
    combiner = NumberCombiner(agg, fmt)
    halves = [combiner.combine(source_rows(keys[i:i + 1500], values[i:i + 1500], list(range(i, i + 1500))))
              for i in (0, 1500)]
    merged = combiner.merge([partial for _, partial in halves]).to_pylist()
    kept = [row["offset"] for batch, _ in halves for row in batch.to_pylist()]

    def number(raw):
        if fmt == "long":
            return float(struct.unpack(">q", raw)[0]) if len(raw) == 8 else None
        if fmt == "double":
            return struct.unpack(">d", raw)[0] if len(raw) == 8 else None
        text = raw.decode(errors="replace")
        plain = text and text.strip() == text and all(c in "0123456789+-.eE" for c in text) and text != "1e999"
        return float(text) if plain else None

    expected_kept, groups = [], defaultdict(list)
    for offset, (key, value) in enumerate(zip(keys, values)):
        n = number(value) if value is not None and agg != "count" else 0.0
        if key is None or value is None or n is None or n != n or n in (float("inf"), float("-inf")):
            expected_kept.append(offset)
        else:
            groups[key].append((offset, n))
    assert kept == expected_kept
    got = {row["key"]: row for row in merged}
    assert set(got) == set(groups)
    for key, rows in groups.items():
        numbers = [n for _, n in rows]
        partial = got[key]["partial"]
        assert partial["count"] == len(rows) and got[key]["offset"] == max(o for o, _ in rows)
        assert got[key]["timestamp"].timestamp() * 1000 == 1000 * (max(o for o, _ in rows) + 1)
        if agg != "count":
            assert (partial["min"], partial["max"]) == (min(numbers), max(numbers))
            assert partial["sum"] == pytest.approx(sum(numbers), rel=1e-12)  # doubles: any order, as Spark's sum
            assert partial["whole"] == all(n.is_integer() for n in numbers)


def test_combined_and_record_by_record_runs_write_the_same(kafka, spark, topic_name):
    """The source's combiner against the path every record takes on its own (KSTOOL_COMBINE=off):
    a normally batching producer, two partitions, several batches, bad records dead-lettered."""
    import random

    from tests.helpers import produce_batched

    create_topic(kafka, topic_name, 2)
    rng = random.Random(11)
    records = [(f"k{rng.randrange(40)}".encode(), rng.choice(["1", "2.5", "-4", "x", "12", " 3"]).encode())
               for _ in range(3000)]
    produce_batched(kafka, topic_name, records)
    outputs = {}
    for mode in ("on", "off"):
        out, dlq = f"{topic_name}-{mode}", f"{topic_name}-{mode}-dlq"
        result = cli("run", "aggregate", "--input", topic_name, "--output", out, "--agg", "sum",
                     "--app-id", out, "--once", "--max-records-per-batch", "1000", "--on-error", f"dlq:{dlq}",
                     "--report", "json", env={"KSTOOL_COMBINE": mode})
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        dead = sorted((m.key(), m.value()) for m in read_all(kafka, dlq))
        outputs[mode] = (latest_per_key(read_all(kafka, out)), report["bad_records"], dead, report["batches"])
    assert outputs["on"][0] and outputs["on"][:3] == outputs["off"][:3]
    assert outputs["on"][1] == sum(1 for _, v in records if v == b"x") and outputs["on"][3] >= 3


# page views over two partitions: (user, page, seconds after T0); u3's views are on both
VIEWS = ([("u1", "/a", 1), ("u3", "/x", 2), ("u1", "/b", 4), ("u3", "/z", 6)],
         [("u2", "/c", 1), ("u3", "/y", 3), ("u2", "/d", 5)])


def test_concat_of_a_json_field_per_regrouped_key(kafka, spark, topic_name):
    # re-keyed by user, the two partitions merge by timestamp (as a repartition topic would):
    # u3's pages in time order across them; the second run's page goes on from the state
    create_topic(kafka, topic_name, 2)
    for partition, views in enumerate(VIEWS):
        produce_keyed(kafka, topic_name, [(f"k{i}", json.dumps({"user": u, "page": p}), s) for i, (u, p, s) in
                                          enumerate(views)], partition)
    run = ("run", "aggregate", "--input", topic_name, "--output", topic_name + "-out", "--app-id", topic_name + "-app",
           "--once", "--agg", "concat", "--separator", ">", "--group-by", "field:user", "--value-field", "page")
    first = cli(*run)
    assert first.exit_code == 0, first.stderr
    produce_keyed(kafka, topic_name, [("k9", json.dumps({"user": "u3", "page": "/w"}), 9)], 1)
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    latest = {k.decode(): v.decode() for k, v in latest_per_key(read_all(kafka, topic_name + "-out")).items()}
    assert latest == {"u1": "/a>/b", "u2": "/c>/d", "u3": "/x>/y>/z>/w"}
    store = json.loads(cli("state", "all", "--app-id", topic_name + "-app", "-o", "json").stdout)
    assert {e["key"]: e["value"] for e in store} == latest


def test_text_aggregate_usage_errors_are_one_line():
    base = ("run", "aggregate", "--input", "x", "--output", "y")
    for args, message in (((*base, "--separator", "|"), "--separator is for --agg concat"),
                          ((*base, "--agg", "latest", "--value-format", "json"), "--value-format is for numbers")):
        refused = cli(*args)
        assert refused.exit_code == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
