"""State queries against a wordcount app's checkpoint and changelog."""

from __future__ import annotations

import json
import os
import struct

import pytest
from confluent_kafka import Producer

from tests.conftest import cli
from tests.helpers import create_topic, produce_values
from tests.oracles import word_counts as oracle

PART1 = ["apple banana apple", "cherry", "Apple pie"]
PART2 = ["banana split", "date date", "fig"]


def _query(*args) -> list[dict]:
    result = cli("state", *args, "-o", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _as_dict(rows) -> dict:
    return {r["key"]: r["value"] for r in rows}


@pytest.mark.embedded_tier
def test_state_queries_time_travel_and_change_feed(kafka, spark, topic_name):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)
    produce_values(kafka, source, [line.encode() for line in PART1])
    assert cli("run", "wordcount", "--input", source, "--output", source + "-out", "--app-id", app,
               "--once").exit_code == 0
    produce_values(kafka, source, [line.encode() for line in PART2])
    assert cli("run", "wordcount", "--input", source, "--output", source + "-out", "--app-id", app,
               "--once").exit_code == 0
    total = oracle(PART1 + PART2)

    stores = _query("stores", "--app-id", app)
    assert [(s["store"], s["kind"], s["changelog_topic"]) for s in stores] == [
        ("counts", "key-value", f"{app}-counts-changelog")]
    first, last = stores[0]["first_batch"], stores[0]["last_batch"]
    assert (first, last) == (0, 1)

    assert _as_dict(_query("all", "--app-id", app)) == dict(total)
    assert _as_dict(_query("get", "--app-id", app, "apple", "banana")) == {"apple": 3, "banana": 2}
    missing = cli("state", "get", "--app-id", app, "apple", "kiwi")
    assert missing.exit_code == 1 and "not found: kiwi" in missing.stderr
    assert _as_dict(_query("range", "--app-id", app, "--from", "b", "--to", "d")) == {
        k: v for k, v in total.items() if "b" <= k <= "d"}
    assert json.loads(cli("state", "count", "--app-id", app, "-o", "json").stdout) == {"count": len(total)}
    assert len(_query("all", "--app-id", app, "--limit", "2")) == 2

    assert _as_dict(_query("all", "--app-id", app, "--batch-id", "0")) == dict(oracle(PART1))
    feed = _query("changes", "--app-id", app, "--from-batch", "0", "--to-batch", "1")
    for batch, lines in ((0, PART1), (1, PART2)):
        changed = {r["key"]: r["value"] for r in feed if r["batch_id"] == batch}
        running = oracle(PART1 if batch == 0 else PART1 + PART2)
        assert changed == {w: running[w] for w in oracle(lines)}
    # a range beyond the committed batches, or reversed: one line each, not Spark's errors
    beyond = cli("state", "changes", "--app-id", app, "--from-batch", "3", "--to-batch", "5")
    assert (beyond.exit_code, beyond.stderr) == (1, f"kstool: error: batch 3 is not a committed batch of {app!r} "
                                                    "(committed: 0..1)\n")
    reversed_range = cli("state", "changes", "--app-id", app, "--from-batch", "1", "--to-batch", "0")
    assert (reversed_range.exit_code, reversed_range.stderr) == (2, "kstool: error: --to-batch 0 is before "
                                                                    "--from-batch 1\n")
    assert cli("state", "changes", "--app-id", app, "--from-batch", "1", "--to-batch", "4").exit_code == 1

    from_changelog = _as_dict(_query("all", "--app-id", app, "--from-changelog"))
    assert from_changelog == _as_dict(_query("all", "--app-id", app)) == dict(total)

    fast = cli("state", "get", "--app-id", app, "--from-changelog", "date", "-o", "json")
    assert fast.exit_code == 0 and _as_dict(json.loads(fast.stdout)) == {"date": 2}

    state_dir = os.path.join(os.environ["KSTOOL_HOME"], "apps")
    assert _as_dict(_query("get", "--app-id", app, "--state-dir", state_dir, "--from-changelog", "fig")) == {"fig": 1}

    kafka_streams_style = _query("get", "--changelog-topic", f"{app}-counts-changelog",
                                 "--key-format", "string", "--value-format", "long", "fig")
    assert _as_dict(kafka_streams_style) == {"fig": 1}

    fetch = cli("state", "fetch", "--app-id", app, "apple")
    assert fetch.exit_code == 2 and "window and session stores" in fetch.stderr


def test_state_errors(kafka):
    assert cli("state", "get", "--app-id", "no-such-app", "x").exit_code == 1
    assert cli("state", "get", "x").exit_code == 2  # neither --app-id nor --changelog-topic
    assert cli("state", "stores", "--app-id", "../etc").exit_code == 2
    missing = cli("state", "get", "--changelog-topic", "no-such-changelog", "x")
    assert (missing.exit_code, missing.stderr) == (1, "kstool: error: topic 'no-such-changelog' does not exist\n")


def test_fetch_on_kafka_streams_window_and_session_changelogs(kafka, topic_name):
    t0 = 1_700_000_000_000
    window, session = f"{topic_name}-w-changelog", f"{topic_name}-s-changelog"
    create_topic(kafka, window, 1)
    create_topic(kafka, session, 1)
    producer = Producer(kafka.producer_conf())
    for start in (t0, t0 + 60_000, t0 + 120_000):
        producer.produce(window, key=b"u1" + struct.pack(">qi", start, 0), value=struct.pack(">q", start // 1000 % 7))
    producer.produce(window, key=b"u2" + struct.pack(">qi", t0, 0), value=struct.pack(">q", 1))
    producer.produce(session, key=b"u1" + struct.pack(">qq", t0 + 500, t0), value=struct.pack(">q", 3))
    producer.produce(session, key=b"u1" + struct.pack(">qq", t0 + 9_000, t0 + 8_000), value=struct.pack(">q", 2))
    assert producer.flush(10) == 0

    windows = _query("fetch", "u1", "--from", str(t0 + 30_000), "--to", str(t0 + 120_000),
                     "--changelog-topic", window, "--key-format", "windowed:string", "--value-format", "long")
    assert [(w["window_start"], w["value"]) for w in windows] == [
        (t0 + 60_000, (t0 + 60_000) // 1000 % 7), (t0 + 120_000, (t0 + 120_000) // 1000 % 7)]
    sessions = _query("fetch", "u1", "--from", str(t0 + 1_000), "--to", str(t0 + 10_000),
                      "--changelog-topic", session, "--key-format", "session:string", "--value-format", "long")
    assert [(s["window_start"], s["window_end"], s["value"]) for s in sessions] == [(t0 + 8_000, t0 + 9_000, 2)]


def test_a_kafka_streams_apps_stores_are_found_by_its_application_id(kafka, topic_name):
    """No kstool manifest: the store's changelog by Kafka Streams' naming rule, its formats from
    its bytes (string keys, 8-byte longs), for stores, get and all."""
    app = topic_name
    changelog = f"{app}-counts-changelog"
    create_topic(kafka, changelog, 2, {"cleanup.policy": "compact"})
    producer = Producer(kafka.producer_conf())
    for key, count in (("apple", 3), ("pear", 5), ("apple", 4)):
        producer.produce(changelog, key=key.encode(), value=struct.pack(">q", count), partition=0)
    assert producer.flush(10) == 0
    stores = json.loads(cli("state", "stores", "--app-id", app, "-o", "json").stdout)
    assert [(s["store"], s["changelog_topic"], s["partitions"]) for s in stores] == [("counts", changelog, 2)]
    got = cli("state", "get", "--app-id", app, "apple", "-o", "json")
    assert got.exit_code == 0, got.stderr
    assert [(e["key"], e["value"]) for e in json.loads(got.stdout)] == [("apple", 4)]
    everything = json.loads(cli("state", "all", "--app-id", app, "--store", "counts", "-o", "json").stdout)
    assert sorted((e["key"], e["value"]) for e in everything) == [("apple", 4), ("pear", 5)]
    typo = cli("state", "get", "--app-id", app + "x", "apple")
    assert typo.exit_code == 1 and "no kstool app" in typo.stderr
