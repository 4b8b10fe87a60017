"""kstool state restore (#21): an app whose checkpoint is lost gets its stores back from its
changelog topics and goes on with the results it would have had: every topology (the scripts of
the windowed and join tests, whose outputs are worked out by hand there, split in two runs;
wordcount and unwindowed aggregates against their oracles)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from kstool.stores.state_layouts import STATE_LAYOUT_OWNER_SHARDS, STATE_LAYOUT_SHARDS, STATE_LAYOUT_STAGES
from tests.conftest import cli
from tests.helpers import T0, as_long, create_topic, end_offsets, latest_per_key, produce_keyed, produce_records, produce_values, read_all
from tests.oracles import word_counts
from tests.topologies.join_cases import (
    STREAM_LEFT,
    STREAM_RIGHT,
    STREAM_STREAM,
    STREAM_STREAM_OUTPUT,
    STREAM_TABLE_OUTPUT,
    TABLE_STREAM,
    TABLE_UPDATES,
    joined_output,
)
from tests.topologies.windowed_cases import (
    INPUT,
    SESSION_OUTPUT,
    SESSION_WINDOW,
    SLIDING_INPUT,
    SLIDING_LAST,
    TWO_RUNS,
    TWO_RUNS_OUTPUT,
    TWO_RUNS_WINDOW,
    session_counts,
    windowed_counts,
)


def _checkpoint(app: str) -> Path:
    described = json.loads(cli("apps", "describe", app, "--offline", "-o", "json").stdout)
    return Path(described["state_dir"]) / "checkpoint"


def _lose_checkpoint_then_restore(app: str) -> dict:
    """Delete the checkpoint; the next run refuses; restore (plan first); returns the plan."""
    shutil.rmtree(_checkpoint(app))
    return json.loads(cli("state", "restore", "--app-id", app, "--dry-run", "-o", "json").stdout)


def _restore(app: str) -> None:
    restored = cli("state", "restore", "--app-id", app, "--yes")
    assert restored.exit_code == 0, restored.stderr


def test_a_windowed_aggregate_restored_from_its_changelog_goes_on_exactly(kafka, spark, topic_name):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)  # the records in partition 1: task 1
    create_topic(kafka, source + "-out", 1)  # one partition: the output in the order it was written
    run = ("run", "aggregate", "--input", source, "--output", source + "-out", "--app-id", app, "--once",
           *TWO_RUNS_WINDOW)
    produce_keyed(kafka, source, TWO_RUNS[0], partition=1)
    assert cli(*run).exit_code == 0
    # as Kafka Streams, a task's store is logged to the changelog partition of its task
    assert {m.partition() for m in read_all(kafka, app + "-aggregate-changelog")} == {1}

    plan = _lose_checkpoint_then_restore(app)
    assert plan["dry_run"] is True and plan["committed_batches"] == 0
    assert [(c["store"], c["entries"]) for c in plan["changelogs"]] == [("aggregate", 3)]  # 3 windows
    assert plan["input_offsets"][f"{source}:1"] == len(TWO_RUNS[0])
    produce_keyed(kafka, source, TWO_RUNS[1], partition=1)
    refused = cli(*run)  # the checkpoint is gone but the group is not: starting empty would be wrong
    assert refused.exit_code == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert f"kstool state restore --app-id {app}" in refused.stderr

    _restore(app)
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    # stream time 16 and the open window [10,20) came back: a@4 is late, [0,10) stays closed
    assert "2 late record(s)" in second.stderr
    assert windowed_counts(read_all(kafka, source + "-out")) == TWO_RUNS_OUTPUT


def test_sliding_windows_restored_from_their_changelog_go_on_exactly(kafka, spark, topic_name):
    """KGroupedStreamImplTest#shouldCountSlidingWindows' records in two runs around a restore:
    the second half's windows are copied from the first half's (the left window of A@1000 from
    that of A@999), so every window's last count is the test's only if they all came back."""
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 1)
    run = ("run", "aggregate", "--input", source, "--output", source + "-out", "--app-id", app, "--once",
           "--window", "sliding:500ms", "--grace", "2s")
    produce_keyed(kafka, source, [(k, "x", ms / 1000) for k, ms in SLIDING_INPUT[:6]])
    assert cli(*run).exit_code == 0
    _lose_checkpoint_then_restore(app)
    _restore(app)
    produce_keyed(kafka, source, [(k, "x", ms / 1000) for k, ms in SLIDING_INPUT[6:]])
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    last = {(key, start - T0): (count, ts - T0) for key, start, count, ts in windowed_counts(read_all(kafka, source + "-out"))}
    assert sorted((key, start, *value) for (key, start), value in last.items()) == SLIDING_LAST


def test_a_suppressed_table_aggregate_restored_goes_on_exactly(kafka, spark, topic_name):
    """--suppress-time 10s, one batch per run. Run 1: a, b, c counted (x 2, y 1); c@30 releases
    y; x waits since 30. Restored: the rows, the counts and the waiting x. Run 2: d@45 counts z,
    a@46 moves from x to z; x (1 now, waiting since 30) is released at 46, z waits. Without the
    rows a would not leave x; without the buffer x would wait from 46."""
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 1)
    run = ("run", "table-aggregate", "--input", source, "--output", source + "-out", "--app-id", app, "--once",
           "--suppress-time", "10s")
    produce_keyed(kafka, source, [("a", "x", 0), ("b", "y", 1), ("c", "x", 30)])
    assert cli(*run).exit_code == 0
    plan = _lose_checkpoint_then_restore(app)
    assert {c["store"]: c["entries"] for c in plan["changelogs"]} == {"table": 3, "aggregate": 2, "suppress-buffer": 1}
    _restore(app)
    produce_keyed(kafka, source, [("d", "z", 45), ("a", "z", 46)])
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    written = [(m.key(), struct.unpack(">q", m.value())[0], m.timestamp()[1] - T0) for m in read_all(kafka, source + "-out")]
    assert written == [(b"y", 1, 1000), (b"x", 1, 46000)]


def test_an_app_kept_in_the_old_state_layout_is_refused_until_restored(kafka, spark, topic_name):
    """A checkpoint begun by a kstool that kept an entry per key (its manifest has no
    state_layout) is not run on the shards; the refusal names the restore, which rebuilds it."""
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)
    create_topic(kafka, source + "-out", 1)
    run = ("run", "aggregate", "--input", source, "--output", source + "-out", "--app-id", app, "--once",
           *TWO_RUNS_WINDOW)
    produce_keyed(kafka, source, TWO_RUNS[0], partition=1)
    assert cli(*run).exit_code == 0
    manifest_path = _checkpoint(app).parent / "app.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["state_layout"]  # as kstool wrote it before the shards
    manifest_path.write_text(json.dumps(manifest))
    produce_keyed(kafka, source, TWO_RUNS[1], partition=1)
    outputs = len(read_all(kafka, source + "-out"))

    refused = cli(*run)
    assert refused.exit_code == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "older layout" in refused.stderr and f"kstool state restore --app-id {app}" in refused.stderr
    assert len(read_all(kafka, source + "-out")) == outputs  # nothing ran

    _restore(app)
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    assert windowed_counts(read_all(kafka, source + "-out")) == TWO_RUNS_OUTPUT
    assert json.loads(manifest_path.read_text())["state_layout"] == STATE_LAYOUT_STAGES


def test_a_table_aggregate_kept_in_one_task_is_refused_and_not_restored(kafka, spark, topic_name):
    """A table aggregation whose checkpoint ran both stages in one task (state_layout 3) logged
    every row to partition 0: over two partitions a restore would put rows in the wrong task, so
    the run is refused and so is the restore, each saying what to do; nothing is written."""
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)
    run = ("run", "table-aggregate", "--input", source, "--output", source + "-out", "--app-id", app, "--once")
    produce_keyed(kafka, source, [("a", "x", 0)], partition=1)
    assert cli(*run).exit_code == 0
    manifest_path = _checkpoint(app).parent / "app.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["state_layout"] = STATE_LAYOUT_OWNER_SHARDS
    manifest_path.write_text(json.dumps(manifest))
    produce_keyed(kafka, source, [("a", "y", 1)], partition=1)
    outputs = len(read_all(kafka, source + "-out"))

    refused = cli(*run)
    assert refused.exit_code == 1 and "older layout" in refused.stderr, refused.stderr
    restore = cli("state", "restore", "--app-id", app, "--yes")
    assert restore.exit_code != 0 and len(restore.stderr.strip().splitlines()) == 1, restore.stderr
    assert "in one task" in restore.stderr and f"kstool reset --app-id {app} --to-earliest" in restore.stderr
    assert len(read_all(kafka, source + "-out")) == outputs
    assert json.loads(manifest_path.read_text())["state_layout"] == STATE_LAYOUT_OWNER_SHARDS  # nothing changed


def _stream_stream_first_run(kafka, topic_name: str, *options: str) -> tuple[tuple, str, str]:
    """The stream-stream script's first half run: returns the run's arguments, app and output."""
    left, right, out, app = topic_name + "-l", topic_name + "-r", topic_name + "-out", topic_name + "-app"
    create_topic(kafka, left, 1)
    create_topic(kafka, right, 1)
    run = ("run", "join", "--left", left, "--right", right, "--output", out, "--app-id", app, "--once",
           *STREAM_STREAM, *options)
    produce_keyed(kafka, left, STREAM_LEFT[:2])
    produce_keyed(kafka, right, STREAM_RIGHT[:2])
    assert cli(*run).exit_code == 0
    return run, app, out


def test_a_stream_stream_join_kept_before_its_stores_sharded_by_key_is_refused_until_restored(
        kafka, spark, topic_name):
    """A stream-stream join whose checkpoint hashed its window stores by the whole store key
    (state_layout 2) cannot find a key's records by its shard: refused, restored, then exact."""
    run, app, out = _stream_stream_first_run(kafka, topic_name)
    left, right = topic_name + "-l", topic_name + "-r"
    manifest_path = _checkpoint(app).parent / "app.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["state_layout"] = STATE_LAYOUT_SHARDS
    manifest_path.write_text(json.dumps(manifest))
    produce_keyed(kafka, left, STREAM_LEFT[2:])
    produce_keyed(kafka, right, STREAM_RIGHT[2:])
    outputs = len(read_all(kafka, out))

    refused = cli(*run)
    assert refused.exit_code == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "older layout" in refused.stderr and f"kstool state restore --app-id {app}" in refused.stderr
    assert len(read_all(kafka, out)) == outputs  # nothing ran

    _restore(app)
    assert cli(*run).exit_code == 0
    assert joined_output(kafka, out) == STREAM_STREAM_OUTPUT["inner"]


def test_a_stream_table_join_restored_from_its_changelog_goes_on_exactly(kafka, spark, topic_name):
    left, right, out, app = topic_name + "-l", topic_name + "-r", topic_name + "-out", topic_name + "-app"
    create_topic(kafka, left, 1)
    create_topic(kafka, right, 1)
    run = ("run", "join", "--left", left, "--right", right, "--output", out, "--app-id", app, "--once",
           "--kind", "stream-table", "--how", "left", "--joiner", "concat", "--separator", "+")
    produce_keyed(kafka, left, TABLE_STREAM[:2])  # split in time, as the cluster test does
    produce_keyed(kafka, right, TABLE_UPDATES[:2])
    assert cli(*run).exit_code == 0

    _lose_checkpoint_then_restore(app)
    _restore(app)
    produce_keyed(kafka, left, TABLE_STREAM[2:])
    produce_keyed(kafka, right, TABLE_UPDATES[2:])
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    assert joined_output(kafka, out) == STREAM_TABLE_OUTPUT["left"]


def test_a_versioned_stream_table_join_restored_keeps_the_table_history_and_the_waiting_records(
        kafka, spark, topic_name):
    """--table-history 1m --grace 10s. First run: T1 a@5, T2 a@25, then S1 a@30, which waits
    (30 - 10 reaches nothing). Restored from the changelogs: the table's whole history (a
    compacted view would keep T2 only) and the waiting S1. Second run: S2 a@12 is older than
    30 - 10, so it joins at once, with the version of 12: T1; S3 a@45 releases S1 -> T2."""
    left, right, out, app = topic_name + "-l", topic_name + "-r", topic_name + "-out", topic_name + "-app"
    create_topic(kafka, left, 1)
    create_topic(kafka, right, 1)
    run = ("run", "join", "--left", left, "--right", right, "--output", out, "--app-id", app, "--once",
           "--kind", "stream-table", "--how", "left", "--table-history", "1m", "--grace", "10s",
           "--joiner", "concat", "--separator", "+")
    produce_keyed(kafka, right, [("a", "T1", 5), ("a", "T2", 25)])
    produce_keyed(kafka, left, [("a", "S1", 30)])
    assert cli(*run).exit_code == 0
    assert read_all(kafka, out) == []

    plan = _lose_checkpoint_then_restore(app)
    assert {c["topic"]: c["entries"] for c in plan["changelogs"]} == {
        f"{app}-join-right-table-changelog": 2, f"{app}-join-stream-buffer-changelog": 1}
    _restore(app)
    produce_keyed(kafka, left, [("a", "S2", 12), ("a", "S3", 45)])
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    assert joined_output(kafka, out) == [("a", "S2+T1", 12), ("a", "S1+T2", 30)]


def _customer(customer: str) -> str:
    return json.dumps({"customer": customer})


# (run options, first run's left / right records, second run's, the last value per key expected)
KEYED_RESTORES = {
    # a right change reaches o1 only through its restored subscription and row
    "foreign-key": (("--kind", "table-table", "--foreign-key", "field:customer", "--how", "left"),
                    [("o1", _customer("c1"), 2)], [("c1", "Ada", 1)], [], [("c1", "Ada L.", 5)],
                    {b"o1": _customer("c1").encode() + b"|Ada L."}),
    # o2 finds c1 only in the restored global table (its topic's offsets are past c1)
    "stream-global": (("--kind", "stream-global", "--global-key", "field:customer", "--how", "left"),
                      [("o1", _customer("c1"), 2)], [("c1", "Ada", 1)], [("o2", _customer("c1"), 5)], [],
                      {b"o1": _customer("c1").encode() + b"|Ada", b"o2": _customer("c1").encode() + b"|Ada"}),
}


@pytest.mark.parametrize("kind", KEYED_RESTORES)
def test_keyed_joins_restored_from_their_changelogs_go_on_exactly(kafka, spark, topic_name, kind):
    options, left_1, right_1, left_2, right_2, expected = KEYED_RESTORES[kind]
    left, right, out, app = topic_name + "-l", topic_name + "-r", topic_name + "-out", topic_name + "-app"
    create_topic(kafka, left, 1)
    create_topic(kafka, right, 1)
    run = ("run", "join", "--left", left, "--right", right, "--output", out, "--app-id", app, "--once",
           "--joiner", "concat", "--separator", "|", *options)
    produce_keyed(kafka, right, right_1)
    produce_keyed(kafka, left, left_1)
    assert cli(*run).exit_code == 0
    _lose_checkpoint_then_restore(app)
    _restore(app)
    produce_keyed(kafka, right, right_2)
    produce_keyed(kafka, left, left_2)
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    assert latest_per_key(read_all(kafka, out)) == expected


def test_a_stream_stream_join_restored_from_its_changelogs_goes_on_exactly(kafka, spark, topic_name):
    """The stream-stream script split in two runs (processing order is the same: each run's
    inputs are ordered by time across sides as in the one run). Across the restore: R1 stays
    in the right buffer for L4 and L3; L5 is late against the left buffer's newest, L2@20;
    the waiting R3 and L2 come back to the unmatched store and are emitted by R2@40."""
    run, app, out = _stream_stream_first_run(kafka, topic_name, "--how", "outer")
    left, right = topic_name + "-l", topic_name + "-r"

    plan = _lose_checkpoint_then_restore(app)  # L1, L2 | R1, R3 | waiting R3, L2
    assert [c["entries"] for c in plan["changelogs"]] == [2, 2, 2]
    _restore(app)
    produce_keyed(kafka, left, STREAM_LEFT[2:])
    produce_keyed(kafka, right, STREAM_RIGHT[2:])
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    assert "1 late record(s)" in second.stderr
    assert joined_output(kafka, out) == STREAM_STREAM_OUTPUT["outer"]


def _written_since(kafka, topic: str, ends: dict[int, int]) -> dict[str, bytes]:
    """The records written after `ends` (each partition's end offset then), latest per key."""
    return {m.key().decode(): m.value() for m in read_all(kafka, topic) if m.offset() >= ends.get(m.partition(), 0)}


def test_wordcount_restored_from_its_changelog_counts_on_exactly(kafka, spark, topic_name):
    """Spark's own aggregation: the store entries are the first batch's rows, and that batch
    writes nothing (its updates would restate the changelog)."""
    source, out, app = topic_name, topic_name + "-out", topic_name + "-app"
    before, after = ["the cat and the hat", "a cat"], ["the end", "the cat"]
    create_topic(kafka, source, 2)
    produce_values(kafka, source, [line.encode() for line in before])
    run = ("run", "wordcount", "--input", source, "--output", out, "--app-id", app, "--once")
    assert cli(*run).exit_code == 0
    first_run = end_offsets(kafka, out)

    plan = _lose_checkpoint_then_restore(app)
    assert [c["entries"] for c in plan["changelogs"]] == [len(word_counts(before))]
    _restore(app)
    produce_values(kafka, source, [line.encode() for line in after])
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    assert f"restored {len(word_counts(before))} store entries" in second.stderr
    total = word_counts(before + after)
    assert {w: as_long(v) for w, v in _written_since(kafka, out, first_run).items()} == {
        w: total[w] for w in word_counts(after)}
    assert latest_per_key(read_all(kafka, app + "-counts-changelog")) == {
        w.encode(): n.to_bytes(8, "big") for w, n in total.items()}


@pytest.mark.parametrize("agg,expected", [
    # a: 1 + 3 | 4; b: 2.5 | 1 (sum 3.5, not whole: a double); c: 7 | -
    ("count", {"a": 3, "b": 2}), ("sum", {"a": 8, "b": 3.5}), ("max", {"a": 4, "b": 2.5})])
def test_an_aggregate_restored_from_its_changelog_goes_on_exactly(kafka, spark, topic_name, agg, expected):
    source, out, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 1)
    run = ("run", "aggregate", "--input", source, "--output", out, "--app-id", app, "--once", "--agg", agg)
    produce_keyed(kafka, source, [("a", "1", 1), ("b", "2.5", 2), ("c", "7", 3), ("a", "3", 4)])
    assert cli(*run).exit_code == 0
    first_run = end_offsets(kafka, out)
    _lose_checkpoint_then_restore(app)
    _restore(app)
    produce_keyed(kafka, source, [("a", "4", 5), ("b", "1", 6)])
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    after = _written_since(kafka, out, first_run)
    assert {k: as_long(v) if isinstance(expected[k], int) else struct.unpack(">d", v)[0]
            for k, v in after.items()} == expected


def test_restore_refuses_what_it_cannot_do_and_changes_nothing(kafka, spark, topic_name):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"a b a"])
    assert cli("run", "wordcount", "--input", source, "--output", source + "-out", "--app-id", app,
               "--once").exit_code == 0
    assert cli("topics", "delete", app + "-counts-changelog", "--yes").exit_code == 0
    windowed = topic_name + "-windowed"  # a restorable app whose changelog gets a foreign record
    create_topic(kafka, windowed, 1)
    produce_keyed(kafka, windowed, [("k", "1", 1)])
    assert cli("run", "aggregate", "--input", windowed, "--output", windowed + "-out", "--app-id", windowed,
               "--once", "--window", "tumbling:10s").exit_code == 0
    # keyed: a compacted topic on Apache Kafka refuses a record without a key
    produce_records(kafka, windowed + "-aggregate-changelog",
                    [{"key": b"x", "value": b"not a window", "partition": 0, "timestamp": T0}])
    before = {a: sorted(p.name for p in _checkpoint(a).iterdir()) for a in (app, windowed)}
    for args, code, says in (
            (("--app-id", app, "--yes"), 1, f"{app}-counts-changelog"),  # its changelog topic is gone
            (("--app-id", "no-such-" + app, "--yes"), 1, "no kstool app"),
            (("--app-id", "bad/name", "--yes"), 2, "bad/name"),
            (("--app-id", windowed, "--yes"), 1, "is not a record of store 'aggregate'")):
        result = cli("state", "restore", *args)
        assert result.exit_code == code and says in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert {a: sorted(p.name for p in _checkpoint(a).iterdir()) for a in before} == before


@pytest.mark.parametrize("emit", ["update", "final"])
def test_a_run_restores_missing_session_state_itself_when_asked(kafka, spark, topic_name, emit):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 1)
    run = ("run", "aggregate", "--input", source, "--output", source + "-out", "--app-id", app, "--once",
           *SESSION_WINDOW, "--emit", emit)
    produce_keyed(kafka, source, INPUT[:4])  # batches 0 and 1 of the session test
    assert cli(*run).exit_code == 0
    shutil.rmtree(_checkpoint(app))
    produce_keyed(kafka, source, INPUT[4:])
    second = cli(*run, "--restore-missing-state")
    assert second.exit_code == 0, second.stderr
    assert "restoring the state from the changelogs" in second.stderr
    assert session_counts(read_all(kafka, source + "-out")) == SESSION_OUTPUT[emit]
