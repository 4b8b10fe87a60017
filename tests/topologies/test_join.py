"""The join topology end to end, every kind and how: scripted inputs with out-of-order and late
records, expected outputs worked out by hand in the comments (times: seconds after T0)."""

from __future__ import annotations

import json

import pytest

from kstool.kafka.partitioner import partition_for
from tests.conftest import cli
from tests.helpers import T0, create_topic, latest_per_key, produce_keyed, read_all
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


def _run(kafka, topic_name, left, right, *options, partitions=(1, 1)):
    create_topic(kafka, topic_name + "-l", partitions[0])
    create_topic(kafka, topic_name + "-r", partitions[1])
    produce_keyed(kafka, topic_name + "-l", left)
    produce_keyed(kafka, topic_name + "-r", right)
    return cli("run", "join", "--left", topic_name + "-l", "--right", topic_name + "-r",
               "--output", topic_name + "-out", "--app-id", topic_name + "-app", "--once", *options)


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
def test_stream_stream(kafka, spark, topic_name, how):
    # within 10s, grace 5s: each side's store holds records down to its newest - 24s
    # (retention 2 x within + grace = 25s); no record is dropped for arriving out of order
    # (KStreamKStreamJoin#process). R1@12 joins L1@5 -> (a, L1 R1, 12). L4@9 and L3@3 arrive
    # after L2@20 (stream time 20) and still join R1, which the right store holds -> (a, L4 R1, 12),
    # (a, L3 R1, 12). L5@-6 is older than the left store's 20 - 24: not stored (late: counted,
    # --late-topic); it finds no partner (|12 - -6| > 10) and its window closed long ago
    # (-6 + 10 < 20), so left/outer emit its null result at once. R2@40 closes the waiting
    # unmatched records (t + 10 + 5 < 40), in time order: R3@15 (outer only), L2@20. R2 waits.
    result = _run(kafka, topic_name, STREAM_LEFT, STREAM_RIGHT, *STREAM_STREAM, "--how", how,
                  "--late-topic", topic_name + "-late")
    assert result.exit_code == 0, result.stderr
    assert joined_output(kafka, topic_name + "-out") == STREAM_STREAM_OUTPUT[how]
    assert "1 late record(s)" in result.stderr
    assert [(m.key(), m.value()) for m in read_all(kafka, topic_name + "-late")] == [(b"a", b"L5")]
    if how == "outer":  # R2@40 still waits unmatched: time ‖ side ‖ key ‖ seqnum, decoded (it was hex)
        waiting = cli("state", "all", "--app-id", topic_name + "-app", "--store", "join-unmatched", "-o", "json")
        assert [({k: v for k, v in e["key"].items() if k != "seqnum"}, e["value"])
                for e in json.loads(waiting.stdout)] == [({"time": T0 + 40_000, "side": "right", "key": "c"}, "R2")]


@pytest.mark.embedded_tier
@pytest.mark.parametrize("how", ["inner", "left"])
def test_stream_table(kafka, spark, topic_name, how):
    # each stream record sees the table as of its time: S1 -> T1; S2@20 is before T3@22: no b;
    # S3 -> T2; S4: no c; S5@40 is after a's delete@32: no a. Table updates emit nothing.
    result = _run(kafka, topic_name, TABLE_STREAM, TABLE_UPDATES, "--kind", "stream-table", "--how", how,
                  "--joiner", "concat", "--separator", "+")
    assert result.exit_code == 0, result.stderr
    assert joined_output(kafka, topic_name + "-out") == STREAM_TABLE_OUTPUT[how]


@pytest.mark.embedded_tier
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_join_results_carry_the_headers_of_the_record_they_come_from(kafka, spark, topic_name, guarantee):
    """As Kafka Streams forwards a record's context: a stream-table join's result has the stream
    record's headers (a header without a value too), a table-table join's those of the update
    that changed it; a record without headers gives a result without them. Both sinks, both
    brokers (the embedded one's last record per partition is sent by the driver)."""
    stream = [("a", "S1", 10, [("trace", b"t1"), ("src", b"trial")]), ("b", "S2", 20, [("empty", None)]),
              ("a", "S3", 30)]
    table = [("a", "T1", 5, [("row", b"r1")]), ("b", "T2", 6, [("row", b"r2")])]
    result = _run(kafka, topic_name, stream, table, "--kind", "stream-table", "--joiner", "concat",
                  "--separator", "+", "--processing-guarantee", guarantee)
    assert result.exit_code == 0, result.stderr
    assert [(m.value().decode(), m.headers()) for m in read_all(kafka, topic_name + "-out")] == [
        ("S1+T1", [("trace", b"t1"), ("src", b"trial")]), ("S2+T2", [("empty", None)]), ("S3+T1", None)]

    tables = cli("run", "join", "--left", topic_name + "-l", "--right", topic_name + "-r", "--output",
                 topic_name + "-tt", "--app-id", topic_name + "-tt-app", "--once", "--kind", "table-table",
                 "--joiner", "concat", "--separator", "+", "--processing-guarantee", guarantee,
                 "--statestore-cache-max-bytes", "0")
    assert tables.exit_code == 0, tables.stderr
    assert [(m.value().decode(), m.headers()) for m in read_all(kafka, topic_name + "-tt")] == [
        ("S1+T1", [("trace", b"t1"), ("src", b"trial")]), ("S2+T2", [("empty", None)]), ("S3+T1", None)]


# a versioned table: key a on partition 0, b and c on partition 1 (both topics, co-partitioned)
# stream: S1 a@10, S3 a@30, S5 a@40 | S2 b@20, S4 c@35; then S6 a@60 | S7 c@70
# table: T1 a@5, T2 a@25, delete a@32 | T3 b@22, then T4 b@18 out of order
VERSIONED_STREAM = ([("a", "S1", 10), ("a", "S3", 30), ("a", "S5", 40)], [("b", "S2", 20), ("c", "S4", 35)])
VERSIONED_TABLE = ([("a", "T1", 5), ("a", "T2", 25), ("a", None, 32)], [("b", "T3", 22), ("b", "T4", 18)])


def test_stream_table_against_a_versioned_table_with_grace(kafka, spark, topic_name):
    # --grace 10s: a stream record joins when its task's newest stream time - 10s reaches it, with
    # the table's version of its own time. Task 0 (T1@5, S1@10, T2@25, S3@30, delete@32, S5@40):
    # S3 releases S1 -> T1; S5 releases S3 -> T2 (the delete came at 32). Task 1 (S2@20, T3@22,
    # T4@18, S4@35): S4 releases S2, which finds T4, the version of 18, that came after it (a
    # latest-value join gives S2+null). S5, S4 wait; the second run's S6@60 and S7@70 release
    # them: a was deleted at 32, c never existed.
    left, right = topic_name + "-l", topic_name + "-r"
    for topic in (left, right):
        create_topic(kafka, topic, 2)
    for partition in (0, 1):
        produce_keyed(kafka, left, VERSIONED_STREAM[partition], partition)
        produce_keyed(kafka, right, VERSIONED_TABLE[partition], partition)
    run = ("run", "join", "--left", left, "--right", right, "--output", topic_name + "-out", "--app-id",
           topic_name + "-app", "--once", "--kind", "stream-table", "--how", "left", "--table-history", "1m",
           "--grace", "10s", "--joiner", "concat", "--separator", "+")
    first = cli(*run)
    assert first.exit_code == 0, first.stderr
    joined = [("a", "S1+T1", 10), ("a", "S3+T2", 30), ("b", "S2+T4", 20)]
    assert sorted(joined_output(kafka, topic_name + "-out")) == joined
    produce_keyed(kafka, left, [("a", "S6", 60)], 0)
    produce_keyed(kafka, left, [("c", "S7", 70)], 1)
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    assert sorted(joined_output(kafka, topic_name + "-out")) == sorted(joined + [("a", "S5+null", 40), ("c", "S4+null", 35)])
    # the table's changelog has every table record, the buffer's what waited and went
    table_log = read_all(kafka, topic_name + "-app-join-right-table-changelog")
    assert [[(m.key(), m.value()) for m in table_log if m.partition() == p] for p in (0, 1)] == [
        [(k.encode(), v and v.encode()) for k, v, _ in part] for part in VERSIONED_TABLE]
    buffer_log = [m for m in read_all(kafka, topic_name + "-app-join-stream-buffer-changelog")]
    assert sum(m.value() is not None for m in buffer_log) == 7 and sum(m.value() is None for m in buffer_log) == 5
    # decoded, not hex: the buffer's keys are time ‖ key ‖ seqnum (TimeFirstWindowKeySchema)
    dumped = [json.loads(line) for line in cli("changelog", "dump", topic_name + "-app-join-stream-buffer-changelog",
                                               "-o", "jsonl").stdout.splitlines()]
    waited = sorted((row["key"]["key"], row["key"]["time"], row["value"]) for row in dumped if not row["tombstone"])
    streamed = [*VERSIONED_STREAM[0], *VERSIONED_STREAM[1], ("a", "S6", 60), ("c", "S7", 70)]
    assert waited == sorted((k, T0 + ts * 1000, v) for k, v, ts in streamed)  # each stream record waited
    assert all(isinstance(row["key"]["seqnum"], int) for row in dumped)
    # the table as a versioned store's get(key) answers: each key's newest version by time (b: T3@22,
    # not T4@18 that came later; a: deleted), from the checkpoint and from the changelog alike
    for source in ((), ("--from-changelog",)):
        table = cli("state", "all", "--app-id", topic_name + "-app", "--store", "join-right-table", *source, "-o", "json")
        assert [(e["key"], e["value"]) for e in json.loads(table.stdout)] == [("b", "T3")], table.stderr


# left table: a=La1@1, b=Lb1@3, a=La2@7, delete a@9; right table: a=Ra1@2, c=Rc1@4, b=Rb1@5, delete c@8
TABLE_LEFT = [("a", "La1", 1), ("b", "Lb1", 3), ("a", "La2", 7), ("a", None, 9)]
TABLE_RIGHT = [("a", "Ra1", 2), ("c", "Rc1", 4), ("b", "Rb1", 5), ("c", None, 8)]


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
def test_table_table(kafka, spark, topic_name, how):
    # without a record cache every change emits the key's new join result (timestamp: the later
    # side), a tombstone when the result is gone; inner needs both sides, left the left side, outer either.
    result = _run(kafka, topic_name, TABLE_LEFT, TABLE_RIGHT, "--kind", "table-table", "--how", how,
                  "--joiner", "concat", "--separator", "+", "--statestore-cache-max-bytes", "0")
    assert result.exit_code == 0, result.stderr
    expected = {
        "inner": [("a", "La1+Ra1", 2), ("b", "Lb1+Rb1", 5), ("a", "La2+Ra1", 7), ("a", None, 9)],
        "left": [("a", "La1+null", 1), ("a", "La1+Ra1", 2), ("b", "Lb1+null", 3), ("b", "Lb1+Rb1", 5),
                 ("a", "La2+Ra1", 7), ("a", None, 9)],
        "outer": [("a", "La1+null", 1), ("a", "La1+Ra1", 2), ("b", "Lb1+null", 3), ("c", "null+Rc1", 4),
                  ("b", "Lb1+Rb1", 5), ("a", "La2+Ra1", 7), ("c", None, 8), ("a", "null+Ra1", 9)],
    }
    assert joined_output(kafka, topic_name + "-out") == expected[how]
    # both tables' stores log to changelogs named <app-id>-<store>-changelog
    left_log = read_all(kafka, topic_name + "-app-join-left-table-changelog")
    assert [(m.key(), m.value()) for m in left_log] == [(k.encode(), v and v.encode()) for k, v, _ in TABLE_LEFT]


def test_table_table_with_its_record_cache_writes_what_kafka_streams_writes(kafka, spark, topic_name, tmp_path):
    """The default record cache (statestore.cache.max.bytes, 10 MB) against Kafka Streams' own
    outer table-table join with it (tests/reference/.../BenchApp.java): both read the inputs in
    one go and flush once (Kafka Streams at its close, before its first 30 s commit); record for
    record. By hand: the left table's cache flushes first, b only (a was made and deleted), then
    the right's in the order of their last updates, a and b (c was made and deleted)."""
    from tests.reference_apps import run_bench_app

    result = _run(kafka, topic_name, TABLE_LEFT, TABLE_RIGHT, "--kind", "table-table", "--how", "outer",
                  "--joiner", "concat", "--separator", ",")
    assert result.exit_code == 0, result.stderr
    ours = joined_output(kafka, topic_name + "-out")
    assert ours == [("b", "Lb1,Rb1", 5), ("a", "null,Ra1", 2), ("b", "Lb1,Rb1", 5)]
    run_bench_app("table-table", kafka.bootstrap, topic_name + "-ks", str(tmp_path), 10 << 20,
                  len(TABLE_LEFT) + len(TABLE_RIGHT), topic_name + "-ks-out", [topic_name + "-l", topic_name + "-r"],
                  timeout=300)
    assert joined_output(kafka, topic_name + "-ks-out") == ours
    changelog = read_all(kafka, topic_name + "-app-join-left-table-changelog")
    assert [(m.key(), m.value()) for m in changelog] == [(b"b", b"Lb1")]


@pytest.mark.parametrize("kind", [("--kind", "stream-stream", "--within", "1s", "--grace", "1s", "--how", "outer"),
                                  ("--kind", "stream-table", "--how", "left"), ("--kind", "table-table", "--how", "outer")])
def test_packed_and_record_by_record_runs_write_the_same(kafka, spark, topic_name, kind):
    """The source's record packer against every record on its own (KSTOOL_COMBINE=off): two
    partitions a side written by a normally batching producer, times out of order, tombstones and
    records without a key, several batches. Each key's results in the output (the tasks' rows
    reach the sink interleaved), each task's changelog record for record, and the counts."""
    import random

    from confluent_kafka import Producer

    rng = random.Random(7)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20})
    for side in ("l", "r"):
        create_topic(kafka, f"{topic_name}-{side}", 2)
        for i in range(1500):
            key = rng.randrange(40)
            value = None if side == "r" and rng.random() < 0.1 else f"{side}{i}".encode()
            producer.produce(f"{topic_name}-{side}", key=None if rng.random() < 0.02 else f"k{key}".encode(),
                             value=value, partition=key % 2, timestamp=T0 + 40 * i - rng.randrange(3_000))
    assert producer.flush(30) == 0
    outcomes = {}
    for mode in ("on", "off"):
        app = f"{topic_name}-{mode}"
        result = cli("run", "join", "--left", topic_name + "-l", "--right", topic_name + "-r", "--output", app + "-out",
                     "--app-id", app, "--once", *kind, "--max-records-per-batch", "1000", "--report", "json",
                     env={"KSTOOL_COMBINE": mode})
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        per_key: dict[bytes | None, list] = {}
        for m in read_all(kafka, app + "-out"):
            per_key.setdefault(m.key(), []).append((m.partition(), m.value(), m.timestamp()[1]))
        # results without a key: in any partition (the producer's choice), the tasks' interleaved
        per_key[None] = sorted((value, ts) for _, value, ts in per_key.get(None, []))
        changelogs = {topic[len(app):]: [(m.partition(), m.key(), m.value(), m.timestamp()[1])
                                         for m in read_all(kafka, topic)]
                      for topic in sorted(report["written"]) if topic.endswith("-changelog")}
        outcomes[mode] = per_key, changelogs, report["input_records"], report["batches"]
    assert outcomes["on"] == outcomes["off"]
    output, changelogs, records, batches = outcomes["on"]
    assert output and changelogs and records == 3000 and batches >= 3


def test_inputs_must_be_co_partitioned_unless_repartition(kafka, spark, topic_name):
    refused = _run(kafka, topic_name, TABLE_LEFT, TABLE_RIGHT, "--kind", "table-table", partitions=(1, 2))
    assert refused.exit_code == 2 and "not co-partitioned" in refused.stderr and "--repartition" in refused.stderr
    assert read_all(kafka, topic_name + "-l") and not _topic_exists(kafka, topic_name + "-out")
    result = cli("run", "join", "--left", topic_name + "-l", "--right", topic_name + "-r", "--kind", "table-table",
                 "--output", topic_name + "-out", "--app-id", topic_name + "-app", "--once", "--repartition",
                 "--joiner", "concat", "--separator", "+", "--statestore-cache-max-bytes", "0")
    assert result.exit_code == 0, result.stderr
    # the output has 2 partitions now: each key's results in order, as before
    by_key = sorted(joined_output(kafka, topic_name + "-out"), key=lambda r: r[0])
    assert by_key == [("a", "La1+Ra1", 2), ("a", "La2+Ra1", 7), ("a", None, 9), ("b", "Lb1+Rb1", 5)]


def _topic_exists(kafka, topic) -> bool:
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10).topics


def test_late_topic_is_refused_where_nothing_is_late(kafka, spark, topic_name):
    create_topic(kafka, topic_name, 1)
    result = cli("run", "wordcount", "--input", topic_name, "--output", topic_name + "-out", "--once",
                 "--app-id", topic_name + "-app", "--late-topic", topic_name + "-late")
    assert result.exit_code == 2 and "--late-topic is for windowed aggregations and joins" in result.stderr
    assert not _topic_exists(kafka, topic_name + "-out")


def test_join_usage_errors_are_one_line(kafka, spark, topic_name):
    no_window = cli("run", "join", "--left", "x", "--right", "y", "--output", "z", "--kind", "stream-stream")
    assert no_window.exit_code == 2 and "--within" in no_window.stderr
    outer_table = cli("run", "join", "--left", "x", "--right", "y", "--output", "z", "--kind", "stream-table",
                      "--how", "outer")
    assert outer_table.exit_code == 2 and "inner or left" in outer_table.stderr
    assert len(outer_table.stderr.strip().splitlines()) == 1
    stream_stream = ("run", "join", "--left", "x", "--right", "y", "--output", "z", "--kind", "stream-stream")
    for topic in (topic_name + "-l", topic_name + "-r"):
        create_topic(kafka, topic, 1)
    zero = ("run", "join", "--left", topic_name + "-l", "--right", topic_name + "-r", "--output", "z",
            "--kind", "stream-stream", "--app-id", topic_name)
    for args, message in (((*stream_stream, "--within", "5s", "--after", "1s"),
                           "--within, or --before and --after, not both"),
                          ((*stream_stream, "--after", "1s"), "--before and --after go together"),
                          ((*zero, "--before", "0ms", "--after", "0ms"), "needs a --grace of at least 1ms")):
        refused = cli(*args)
        assert refused.exit_code == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    table_window = cli("run", "join", "--left", "x", "--right", "y", "--output", "z", "--kind", "stream-table",
                       "--before", "1s", "--after", "1s")
    assert table_window.exit_code == 2 and "are for stream-stream joins" in table_window.stderr
    stream_table = ("run", "join", "--left", "x", "--right", "y", "--output", "z", "--kind", "stream-table")
    # KStreamKTableJoinTest#shouldFailIfTableIsNotVersioned, #shouldFailIfGracePeriodIsLongerThanHistoryRetention
    # (KStreamKTableJoinTest.java:154, 207)
    for args, message in (((*stream_table, "--grace", "1s"), "needs a versioned table: give --table-history"),
                          ((*stream_table, "--grace", "2m", "--table-history", "1m"),
                           "--table-history must be at least --grace"),
                          (("run", "join", "--left", "x", "--right", "y", "--output", "z", "--kind", "table-table",
                            "--table-history", "1m"), "--table-history is for stream-table joins and foreign-key"),
                          # InternalStreamsBuilder#globalTable: "GlobalTables cannot be versioned" (4.4.0)
                          (("run", "join", "--left", "x", "--right", "y", "--output", "z", "--kind", "stream-global",
                            "--table-history", "1m"), "a global table cannot be versioned"),
                          ((*stream_table, "--global-key", "field:id"), "--global-key is for stream-global joins"),
                          (("run", "join", "--left", "x", "--right", "y", "--output", "z", "--kind", "stream-global",
                            "--how", "outer"), "--how is inner or left for stream-global joins"),
                          ((*stream_table, "--foreign-key", "field:id"), "--foreign-key is for table-table joins"),
                          (("run", "join", "--left", "x", "--right", "y", "--output", "z", "--kind", "table-table",
                            "--foreign-key", "customer"), "--foreign-key is one of field:PATH, split:SEP:N"),
                          (("run", "join", "--left", "x", "--right", "y", "--output", "z", "--kind", "table-table",
                            "--foreign-key", "split:,:one"), "--foreign-key is one of field:PATH, split:SEP:N")):
        refused = cli(*args)
        assert refused.exit_code == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1


def test_topology_describe_covers_joins_and_windowed_aggregates():
    join = json.loads(cli("topology", "describe", "join", "--kind", "stream-stream", "--how", "outer",
                          "--input", "clicks", "-o", "json").stdout)
    assert {s["name"]: s["changelog_topic"] for s in join["stores"]} == {
        "join-left": "join-join-left-changelog", "join-right": "join-join-right-changelog",
        "join-unmatched": "join-join-unmatched-changelog"}
    assert {s["name"]: s["kind"] for s in join["stores"]}["join-left"] == "window"
    sources = [n["topics"] for n in join["sub_topologies"][0]["nodes"] if n["type"] == "source"]
    assert sources == [["clicks"], ["<right>"]]
    windowed = json.loads(cli("topology", "describe", "aggregate", "--window", "hopping:10s,5s", "--emit", "final",
                              "-o", "json").stdout)
    names = [n["name"] for n in windowed["sub_topologies"][0]["nodes"]]
    assert any(n.startswith("KTABLE-SUPPRESS") for n in names)
    assert windowed["stores"] == [{"name": "aggregate", "kind": "window", "changelog_topic": "aggregate-aggregate-changelog",
                                   "key_format": "string", "value_format": "long"}]


def _order(customer: str) -> str:
    return json.dumps({"customer": customer})


def test_stream_global_join_needs_no_co_partitioning(kafka, spark, topic_name):
    # orders over two partitions, customers in one (a GlobalKTable: every task holds it all);
    # each batch's customer updates go in before its orders are joined. Run 2: Ada's new name
    # reaches both tasks (o5 on partition 1, o6 on partition 0); o2's customer is unknown
    left, right, out = topic_name + "-l", topic_name + "-r", topic_name + "-out"
    create_topic(kafka, left, 2)
    create_topic(kafka, right, 1)
    produce_keyed(kafka, left, [("o1", _order("c1"), 2), ("o3", _order("c2"), 6)], 0)
    produce_keyed(kafka, left, [("o2", _order("c9"), 3), ("o4", _order("c1"), 7)], 1)
    produce_keyed(kafka, right, [("c1", "Ada", 1), ("c2", "Bob", 1)])
    run = ("run", "join", "--left", left, "--right", right, "--output", out, "--app-id", topic_name + "-app", "--once",
           "--kind", "stream-global", "--global-key", "field:customer", "--how", "left", "--joiner", "concat",
           "--separator", "|")
    first = cli(*run)
    assert first.exit_code == 0, first.stderr
    produce_keyed(kafka, right, [("c1", "Ada L.", 10)])
    produce_keyed(kafka, left, [("o5", _order("c1"), 11)], 1)
    produce_keyed(kafka, left, [("o6", _order("c1"), 12)], 0)
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    joined = {key: value.split("|")[1] for key, value, _ in joined_output(kafka, out)}
    assert joined == {"o1": "Ada", "o2": "null", "o3": "Bob", "o4": "Ada", "o5": "Ada L.", "o6": "Ada L."}
    # each task's copy of the table is logged to its own changelog partition
    logged = read_all(kafka, topic_name + "-app-join-global-table-changelog")
    assert sorted((m.partition(), m.key(), m.value()) for m in logged) == sorted(
        (p, k, v) for p in (0, 1) for k, v in ((b"c1", b"Ada"), (b"c2", b"Bob"), (b"c1", b"Ada L.")))


def test_foreign_key_join_follows_rows_and_their_foreign_rows(kafka, spark, topic_name):
    # orders (two partitions) name their customer (three partitions): KIP-213's table-table join.
    # Run 1: o1 -> c1 (Ada), o2 -> c2 (none yet: null). Run 2: c2 arrives (o2 joins it), c1 is
    # renamed (o1 follows), o1 moves to c2 (leaves c1: a later c1 change no longer reaches it),
    # o3 is deleted
    left, right, out = topic_name + "-l", topic_name + "-r", topic_name + "-out"
    create_topic(kafka, left, 2)
    create_topic(kafka, right, 3)
    produce_keyed(kafka, right, [("c1", "Ada", 1)], 0)
    produce_keyed(kafka, left, [("o1", _order("c1"), 2), ("o3", _order("c1"), 3)], 0)
    produce_keyed(kafka, left, [("o2", _order("c2"), 2)], 1)
    run = ("run", "join", "--left", left, "--right", right, "--output", out, "--app-id", topic_name + "-app", "--once",
           "--kind", "table-table", "--foreign-key", "field:customer", "--how", "left", "--joiner", "concat",
           "--separator", "|")
    first = cli(*run)
    assert first.exit_code == 0, first.stderr
    assert latest_per_key(read_all(kafka, out)) == {b"o1": _order("c1").encode() + b"|Ada",
                                                    b"o2": _order("c2").encode() + b"|null",
                                                    b"o3": _order("c1").encode() + b"|Ada"}
    produce_keyed(kafka, right, [("c2", "Bob", 5)], 1)
    produce_keyed(kafka, right, [("c1", "Ada L.", 6)], 0)
    produce_keyed(kafka, left, [("o1", _order("c2"), 7), ("o3", None, 8)], 0)
    produce_keyed(kafka, right, [("c1", "Ada M.", 9)], 0)
    second = cli(*run)
    assert second.exit_code == 0, second.stderr
    assert latest_per_key(read_all(kafka, out)) == {b"o1": _order("c2").encode() + b"|Bob",
                                                    b"o2": _order("c2").encode() + b"|Bob"}
    # the subscriptions store: each order under its customer (Kafka Streams' CombinedKey layout)
    subscriptions = latest_per_key(read_all(kafka, topic_name + "-app-join-subscriptions-changelog"))
    assert sorted(subscriptions) == [b"\x00\x00\x00\x02c2o1", b"\x00\x00\x00\x02c2o2"]


def test_a_foreign_key_join_spreads_its_stages_over_tasks_by_key(kafka, spark, topic_name):
    """60 orders over two partitions name 10 customers (three partitions); some move. The left
    rows are logged to their input partition (stage 1's task), the right rows and the
    subscriptions to the partition Kafka's partitioner gives their customer among the three tasks
    (stage 2's, the subscription topic's), and every order joins its customer's latest row."""
    left, right, out, app = topic_name + "-l", topic_name + "-r", topic_name + "-out", topic_name + "-app"
    create_topic(kafka, left, 2)
    create_topic(kafka, right, 3)
    customers = {f"c{i}": f"name{i}" for i in range(10)}
    produce_keyed(kafka, right, [(c, name, 1) for c, name in customers.items()], 0)
    orders = {f"o{i}": f"c{i % 10}" for i in range(60)}
    moved = {f"o{i}": f"c{(i + 3) % 10}" for i in range(0, 60, 7)}
    for partition in (0, 1):
        mine = [o for i, o in enumerate(orders) if i % 2 == partition]
        produce_keyed(kafka, left, [(o, _order(orders[o]), 2) for o in mine]
                      + [(o, _order(moved[o]), 3) for o in mine if o in moved], partition)
    result = cli("run", "join", "--left", left, "--right", right, "--output", out, "--app-id", app, "--once",
                 "--kind", "table-table", "--foreign-key", "field:customer", "--joiner", "concat", "--separator", "|")
    assert result.exit_code == 0, result.stderr
    final = {**orders, **moved}
    assert latest_per_key(read_all(kafka, out)) == {
        o.encode(): f"{_order(c)}|{customers[c]}".encode() for o, c in final.items()}
    subscriptions = {m.key(): m.partition() for m in read_all(kafka, app + "-join-subscriptions-changelog")
                     if m.value() is not None}
    assert {k[4:6] for k in subscriptions} == {c.encode() for c in customers}
    assert all(partition == partition_for(k[4:6], 3) for k, partition in subscriptions.items())
    assert len(set(subscriptions.values())) == 3  # stage 2's work is on every task
    rights = {m.key().decode(): m.partition() for m in read_all(kafka, app + "-join-right-table-changelog")}
    assert rights == {c: partition_for(c.encode(), 3) for c in customers}
    lefts = {m.key().decode(): m.partition() for m in read_all(kafka, app + "-join-left-table-changelog")}
    assert lefts == {o: i % 2 for i, o in enumerate(orders)}


def test_a_foreign_key_join_of_versioned_tables_ignores_out_of_order_rows(kafka, spark, topic_name):
    # --table-history 1m: c1 renamed at 5s, before Ada's 10s, and o1 moved to c2 at 4s, before
    # its row of 11s: neither is the latest version of its key, so o1 stays joined with Ada
    # (KTableKTableForeignKeyJoinIntegrationTest's versioned cases); plain tables take them
    left, right, out = topic_name + "-l", topic_name + "-r", topic_name + "-out"
    create_topic(kafka, left, 1)
    create_topic(kafka, right, 1)
    produce_keyed(kafka, right, [("c1", "Ada", 10), ("c2", "Bob", 1)])
    produce_keyed(kafka, left, [("o1", _order("c1"), 11)])
    produce_keyed(kafka, right, [("c1", "Old", 5)])
    produce_keyed(kafka, left, [("o1", _order("c2"), 4)])
    result = cli("run", "join", "--left", left, "--right", right, "--output", out, "--app-id", topic_name + "-app",
                 "--once", "--kind", "table-table", "--foreign-key", "field:customer", "--joiner", "concat",
                 "--separator", "|", "--table-history", "1m", "--max-records-per-batch", "1")
    assert result.exit_code == 0, result.stderr
    assert [(m.key(), m.value()) for m in read_all(kafka, out)] == [(b"o1", _order("c1").encode() + b"|Ada")]
    # each versioned table's changelog has every update, the ignored ones too
    assert len(read_all(kafka, topic_name + "-app-join-right-table-changelog")) == 3
