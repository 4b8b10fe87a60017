"""table-aggregate end to end: a table's rows written by a batching producer over two
partitions, counted by region through Kafka and Spark; suppression across two runs."""

from __future__ import annotations

import json
import struct
from collections import Counter

import pytest

from kstool.kafka.partitioner import partition_for
from tests.conftest import cli
from tests.helpers import T0, create_topic, produce_keyed, read_all

# (user, region or None: the row deleted, seconds after T0) per partition, in offset order
ROWS = ([("u1", "eu", 1), ("u3", "us", 3), ("u1", "us", 5), ("u6", "asia", 2), ("u6", None, 7)],
        [("u2", "eu", 2), ("u4", "us", 1), ("u5", "asia", 4), ("u2", None, 6), ("u7", None, 8)])


def _latest_rows() -> dict[str, str | None]:
    latest: dict[str, tuple[int, str | None]] = {}
    for partition in ROWS:
        for user, region, _ in partition:
            latest[user] = (0, region)
    return {user: region for user, (_, region) in latest.items()}


def _counts(messages) -> list[tuple[str, int, int]]:
    return [(m.key().decode(), struct.unpack(">q", m.value())[0], (m.timestamp()[1] - T0) // 1000) for m in messages]


@pytest.mark.embedded_tier
def test_rows_that_move_or_go_leave_their_old_group(kafka, spark, topic_name):
    # u1 moves from eu to us, u2 and u6 are deleted, u7's tombstone deletes nothing: eu ends at
    # 0 (written as 0, not deleted, as Kafka Streams' count), us at 3, asia at 1
    create_topic(kafka, topic_name, 2)
    for partition, rows in enumerate(ROWS):
        produce_keyed(kafka, topic_name, rows, partition)
    result = cli("run", "table-aggregate", "--input", topic_name, "--output", topic_name + "-out",
                 "--app-id", topic_name + "-app", "--once", "--max-records-per-batch", "4")
    assert result.exit_code == 0, result.stderr
    expected = Counter(region for region in _latest_rows().values() if region is not None)
    last = {region: count for region, count, _ in _counts(read_all(kafka, topic_name + "-out"))}
    assert last == {"eu": 0, **expected}
    entries = json.loads(cli("state", "all", "--app-id", topic_name + "-app", "--store", "aggregate",
                             "-o", "json").stdout)
    assert {e["key"]: e["value"] for e in entries} == last
    # the rows' store: each user's latest row, the deleted ones gone
    rows = json.loads(cli("state", "all", "--app-id", topic_name + "-app", "--store", "table", "-o", "json").stdout)
    assert {e["key"]: e["value"] for e in rows} == {u: r for u, r in _latest_rows().items() if r is not None}


def test_suppressed_updates_wait_across_runs(kafka, spark, topic_name):
    # --suppress-time 10s, one batch per run (each group's latest update of the batch enters
    # the buffer, in the order of their last update: y@1, then x@30). Run 1: x@30 moves stream
    # time to 30, so y (waiting since 1) is written; x waits. Run 2: z@45 releases x (since 30).
    create_topic(kafka, topic_name, 1)
    produce_keyed(kafka, topic_name, [("a", "x", 0), ("b", "y", 1), ("c", "x", 30)])
    run = ("run", "table-aggregate", "--input", topic_name, "--output", topic_name + "-out", "--app-id",
           topic_name + "-app", "--once", "--suppress-time", "10s")
    first = cli(*run)
    assert first.exit_code == 0, first.stderr
    assert _counts(read_all(kafka, topic_name + "-out")) == [("y", 1, 1)]
    # the buffer holds x, waiting since 30 with its count: decoded, not hex
    buffer = cli("state", "all", "--app-id", topic_name + "-app", "--store", "suppress-buffer", "-o", "json")
    assert [(e["key"], e["value"]) for e in json.loads(buffer.stdout)] == [("x", {"buffered_at": T0 + 30_000, "value": 2})]
    produce_keyed(kafka, topic_name, [("d", "z", 45)])
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    assert _counts(read_all(kafka, topic_name + "-out")) == [("y", 1, 1), ("x", 2, 30)]


def test_table_aggregate_usage_errors_are_one_line(kafka, spark, topic_name):
    base = ("run", "table-aggregate", "--input", "x", "--output", "y")
    for args, message in (((*base, "--agg", "max"), "Invalid value for '--agg'"),
                          ((*base, "--group-by", "field:"), "--group-by is one of key, value, field:PATH, split:SEP:N"),
                          ((*base, "--value-field", "amount"), "--value-field is the number --agg sum adds"),
                          ((*base, "--suppress-records", "0"), "--suppress-records must be a whole number")):
        refused = cli(*args)
        assert refused.exit_code == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1


def test_a_versioned_table_ignores_out_of_order_rows_across_runs(kafka, spark, topic_name):
    # --table-history 1m: run 1 counts u1 and u2 in eu; in run 2, u1 -> us at 5s is older than
    # u1's row of 10s (changes no group, as Kafka Streams' testAggOfVersionedStore), and
    # u1 -> asia at 20s moves it; without a versioned table us would count u1 in between
    create_topic(kafka, topic_name, 1)
    produce_keyed(kafka, topic_name, [("u1", "eu", 10), ("u2", "eu", 12)])
    run = ("run", "table-aggregate", "--input", topic_name, "--output", topic_name + "-out", "--app-id",
           topic_name + "-app", "--once", "--table-history", "1m")
    first = cli(*run)
    assert first.exit_code == 0, first.stderr
    produce_keyed(kafka, topic_name, [("u1", "us", 5), ("u1", "asia", 20)])
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    assert _counts(read_all(kafka, topic_name + "-out")) == [("eu", 2, 12), ("eu", 1, 20), ("asia", 1, 20)]
    # the versioned table's changelog keeps every row update, the ignored one too
    assert len(read_all(kafka, f"{topic_name}-app-table-changelog")) == 4


def test_rows_and_groups_are_spread_over_tasks_as_kafka_streams_repartitions_them(kafka, spark, topic_name):
    """Rows over three partitions, counted by group: each row's store entry is logged to its input
    partition (the task of sub-topology 0), each group's to the partition Kafka's partitioner gives
    the group (the repartition topic's, the task of sub-topology 1), and the counts are the rows'."""
    create_topic(kafka, topic_name, 3)
    rows = {f"u{i}": f"g{i % 10}" for i in range(60)}
    moved = {f"u{i}": f"g{(i + 1) % 10}" for i in range(0, 60, 7)}
    for partition in range(3):
        mine = [u for i, u in enumerate(rows) if i % 3 == partition]
        produce_keyed(kafka, topic_name, [(u, rows[u], 1) for u in mine] + [(u, moved[u], 2) for u in mine if u in moved],
                      partition)
    app = topic_name + "-app"
    result = cli("run", "table-aggregate", "--input", topic_name, "--output", topic_name + "-out", "--app-id", app,
                 "--once")
    assert result.exit_code == 0, result.stderr
    final = {**rows, **moved}
    expected = Counter(final.values())
    assert {g: n for g, n, _ in _counts(read_all(kafka, topic_name + "-out"))} == expected
    groups = {m.key().decode(): m.partition() for m in read_all(kafka, app + "-aggregate-changelog")}
    assert groups == {g: partition_for(g.encode(), 3) for g in expected}
    assert len(set(groups.values())) == 3  # the groups' work is on every task
    logged = {m.key().decode(): m.partition() for m in read_all(kafka, app + "-table-changelog")}
    assert logged == {u: i % 3 for i, u in enumerate(rows)}
    entries = json.loads(cli("state", "all", "--app-id", app, "--store", "aggregate", "-o", "json").stdout)
    assert {e["key"]: e["value"] for e in entries} == expected
