"""kstool reset: plans, dry runs, members, Kafka Streams apps, kstool apps end to end."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.conftest import cli
from tests.helpers import app_digest, as_long, create_topic, end_offsets, latest_per_key, produce_values, read_all
from tests.oracles import word_counts as oracle

# the embedded broker's workarounds and a command group's end-to-end runs: on both brokers
pytestmark = pytest.mark.embedded_tier


def _commit(kafka, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({**kafka.consumer_conf(), "group.id": group})
    consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    consumer.close()


def _group_offsets(group: str) -> dict:
    result = cli("groups", "describe", group, "-o", "json")
    if result.exit_code != 0:
        return {}
    return {(p["topic"], p["partition"]): p["committed"] for p in json.loads(result.stdout)["partitions"]}


def _topics() -> set[str]:
    return {t["topic"] for t in json.loads(cli("topics", "list", "-o", "json").stdout)}


def test_kstool_app_reset_to_datetime_reprocesses_exactly_the_later_records(kafka, spark, topic_name):
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    base = 1_730_000_000_000
    lines = [f"alpha beta w{i % 7} t{i}" if i < 40 else f"gamma w{i % 5}" for i in range(80)]
    stamps = [base + i * 1000 for i in range(80)]
    for p in range(2):
        idx = [i for i in range(80) if i % 2 == p]
        produce_values(kafka, source, [lines[i].encode() for i in idx], partition=p,
                       timestamps=[stamps[i] for i in idx])
    assert cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", app, "--once").exit_code == 0
    after_first = end_offsets(kafka, sink)

    cut = base + 50_000
    result = cli("reset", "--app-id", app, "--to-datetime", str(cut), "-o", "json", "--yes")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["app_kind"] == "kstool"
    assert sorted(plan["topics_to_delete"]) == [f"{app}-counts-changelog"] and plan["internal_topics_from"] == "names"
    assert plan["local_state"]["kind"] == "kstool"
    assert {"checkpoint", "metrics.jsonl", "app.json"} <= set(plan["local_state"]["entries"])
    assert not (Path(plan["local_state"]["path"]) / "metrics.jsonl").exists(), "apps top starts over too"
    expected_targets = {p: sum(1 for i in range(80) if i % 2 == p and stamps[i] < cut) for p in range(2)}
    assert {o["partition"]: o["target"] for o in plan["offsets"]} == expected_targets
    assert {p: o for (t, p), o in _group_offsets(app).items()} == expected_targets
    assert f"{app}-counts-changelog" not in _topics()

    assert cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", app, "--once").exit_code == 0
    new = [m for m in read_all(kafka, sink) if m.offset() >= after_first[m.partition()]]
    got = {k.decode(): as_long(v) for k, v in latest_per_key(new).items()}
    assert got == dict(oracle(line for line, ts in zip(lines, stamps) if ts >= cut))


def test_dry_run_changes_nothing(kafka, spark, topic_name):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"a b", b"c"])
    assert cli("run", "wordcount", "--input", source, "--output", source + "-out", "--app-id", app,
               "--once").exit_code == 0
    state = Path(json.loads(cli("apps", "describe", app, "-o", "json", "--offline").stdout)["state_dir"])
    before = (app_digest(state), _group_offsets(app), _topics())
    result = cli("reset", "--app-id", app, "--to-earliest", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "dry run: nothing was changed" in result.stderr
    assert f"{app}-counts-changelog" in result.stdout  # the plan names what it would delete
    assert (app_digest(state), _group_offsets(app), _topics()) == before


def test_active_members_refuse_and_force_removes_them(kafka, topic_name):
    source, app = topic_name, topic_name + "-ks"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"x"] * 3)
    member = Consumer({**kafka.consumer_conf(), "group.id": app, "client.id": "still-running",
                       "session.timeout.ms": 6000, "heartbeat.interval.ms": 3000})
    member.subscribe([source])
    deadline = time.monotonic() + 30
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.5)
    assert member.assignment(), "the test member did not join"
    try:
        refused = cli("reset", "--app-id", app, "--input-topics", source)
        assert refused.exit_code == 75  # the app runs: cron may try again later
        assert "active member" in refused.stderr and "stop all running" in refused.stderr
        planned = cli("reset", "--app-id", app, "--input-topics", source, "--to-latest", "--dry-run", "-o", "json")
        assert planned.exit_code == 0, planned.stderr  # a dry run shows the plan, with a warning
        plan = json.loads(planned.stdout)
        assert [(o["topic"], o["target"]) for o in plan["offsets"]] == [(source, 3)]
        assert any("the reset itself is refused until every instance has stopped" in w for w in plan["warnings"])
        forced = cli("reset", "--app-id", app, "--input-topics", source, "--force", "--to-latest", "--yes")
        if kafka.embedded:
            # The embedded broker answers DescribeGroups with the state but no members, so
            # there is no member id to remove: --force says so and changes nothing.
            assert forced.exit_code == 75 and "does not name its members" in forced.stderr
            assert _group_offsets(app) == {}
        else:
            assert "still-running" in refused.stderr
            assert forced.exit_code == 0, forced.stderr
            assert _group_offsets(app) == {(source, 0): 3}
    finally:
        member.close()


def test_kafka_streams_app_reset_deletes_only_its_internal_topics(kafka, topic_name, tmp_path):
    app = topic_name + "-ks"
    inputs = [f"{app}-in", f"{app}-lookalike-changelog"]  # an input that looks internal stays
    internal = [f"{app}-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog",
                f"{app}-counts-repartition", f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007-topic"]
    survivors = [f"{app}-changelog-archive", f"other-{app}-store-changelog", f"{app}x-store-changelog",
                 f"{app}-out"]
    for t in inputs + internal + survivors:
        create_topic(kafka, t, 2)
    for t in inputs:
        for p in range(2):
            produce_values(kafka, t, [b"v"] * (5 + p), partition=p)
    _commit(kafka, app, {(inputs[0], 0): 5, (inputs[0], 1): 6, (inputs[1], 0): 5, (inputs[1], 1): 6})
    state_dir = tmp_path / "kafka-streams"
    (state_dir / app / "0_0" / "rocksdb").mkdir(parents=True)
    (state_dir / app / "0_0" / "rocksdb" / "data").write_bytes(b"state")
    (state_dir / "other-app" / "0_0").mkdir(parents=True)

    result = cli("reset", "--application-id", app, "--input-topics", ",".join(inputs), "--to-offset", "2",
                 "--state-dir", str(state_dir), "-o", "json", "--yes")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["app_kind"] == "kafka-streams"
    assert sorted(plan["topics_to_delete"]) == sorted(internal)
    assert _group_offsets(app) == {(t, p): 2 for t in inputs for p in range(2)}
    remaining = _topics()
    assert not set(internal) & remaining
    assert set(survivors + inputs) <= remaining
    assert not (state_dir / app).exists() and (state_dir / "other-app" / "0_0").is_dir()


def test_export_then_from_file_round_trips(kafka, topic_name, tmp_path):
    source, app = topic_name, topic_name + "-ks"
    create_topic(kafka, source, 3)
    for p in range(3):
        produce_values(kafka, source, [b"v"] * 10, partition=p)
    _commit(kafka, app, {(source, p): 10 for p in range(3)})
    exported = tmp_path / "plan.csv"
    result = cli("reset", "--app-id", app, "--input-topics", source, "--shift-by", "-4", "--dry-run",
                 "--export", str(exported), "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert exported.read_text() == "".join(f"{source},{p},6\n" for p in range(3))
    doc = json.loads(result.stdout)
    assert set(doc) == {"app_id", "app_kind", "spec", "offsets", "topics_to_delete", "internal_topics_from",
                        "local_state", "members", "warnings", "dry_run"}
    assert doc["offsets"][0] == {"topic": source, "partition": 0, "kind": "input", "current": 10,
                                 "target": 6, "delta": -4, "note": None}
    assert _group_offsets(app) == {(source, p): 10 for p in range(3)}  # dry run
    applied = cli("reset", "--app-id", app, "--input-topics", source, "--from-file", str(exported), "--yes")
    assert applied.exit_code == 0, applied.stderr
    assert _group_offsets(app) == {(source, p): 6 for p in range(3)}


def test_out_of_range_offsets_are_clamped_with_a_warning(kafka, topic_name):
    source, app = topic_name, topic_name + "-ks"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"v"] * 4)
    result = cli("reset", "--app-id", app, "--input-topics", source, "--to-offset", "99", "--yes")
    assert result.exit_code == 0, result.stderr
    assert "past the log end" in result.stderr
    assert _group_offsets(app) == {(source, 0): 4}


def test_bad_reset_input(kafka, topic_name):
    missing = cli("reset", "--app-id", topic_name, "--input-topics", "no-such-" + topic_name)
    assert missing.exit_code == 1 and "does not exist" in missing.stderr
    two = cli("reset", "--app-id", topic_name, "--to-latest", "--to-earliest")
    assert two.exit_code == 2 and "only one" in two.stderr
    for bad in ("../x", "a/b", ".", ""):
        result = cli("reset", "--app-id", bad)
        assert result.exit_code == 2, bad


def test_an_app_id_nothing_has_is_refused_naming_the_nearest(kafka, topic_name):
    """A typo (wcc for wc): no group, internal topic or state has the id, and no input topic was
    named: exit 1 naming the nearest group, nothing changed (not "nothing to do", exit 0)."""
    source = topic_name + "-in"
    create_topic(kafka, source, 1)
    _commit(kafka, topic_name, {(source, 0): 0})
    typo = cli("reset", "--app-id", topic_name + "x", "--yes")
    assert typo.exit_code == 1
    assert typo.stderr.strip().splitlines()[-1] == (
        f"kstool: error: no application {topic_name + 'x'!r}: no consumer group, internal topic or local state "
        f"(in {Path(os.environ['KSTOOL_HOME']) / 'apps'}) has that id; nothing was changed; did you mean {topic_name!r}?")
    assert _group_offsets(topic_name) == {(source, 0): 0}


def test_a_kafka_streams_apps_reset_without_state_dir_says_to_give_it(kafka, topic_name):
    source, app = topic_name, topic_name + "-ks"
    create_topic(kafka, source, 1)
    _commit(kafka, app, {(source, 0): 0})
    planned = cli("reset", "--app-id", app, "--input-topics", source, "--dry-run", "-o", "json")
    assert planned.exit_code == 0, planned.stderr
    assert any(w.startswith("its local state is not deleted: give --state-dir with the app's state.dir")
               for w in json.loads(planned.stdout)["warnings"])
