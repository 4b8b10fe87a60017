"""Windowed aggregation end to end: scripted out-of-order input with late records, expected
output computed by hand (each step's stream time is worked out in the comments)."""

from __future__ import annotations

import json
import re
import struct

import pytest
from kafka.partitioner.default import murmur2 as kafka_murmur2

from tests.conftest import cli
from tests.helpers import T0, create_topic, produce_keyed, read_all
from tests.topologies.windowed_cases import (
    INPUT,
    SESSION_OUTPUT,
    SESSION_WINDOW,
    SLIDING_INPUT,
    SLIDING_LAST,
    TWO_RUNS,
    TWO_RUNS_OUTPUT,
    TWO_RUNS_WINDOW,
    at,
    session_counts,
    windowed_counts,
)


def _run(kafka, topic_name, *options) -> tuple[str, object]:
    source = topic_name
    create_topic(kafka, source, 1)
    produce_keyed(kafka, source, INPUT)
    result = cli("run", "aggregate", "--input", source, "--output", source + "-out", "--app-id", source + "-app",
                 "--once", *options)
    assert result.exit_code == 0, result.stderr
    return source, result


@pytest.mark.embedded_tier
def test_tumbling_emit_update_and_late_records(kafka, spark, topic_name):
    # size 10s, grace 5s, 3 records per batch; each batch emits the latest value of each window
    # it changed (Kafka Streams' record cache), in the order of their last update.
    # stream time (st), close = st - 5:
    # batch 0: a@1 a@3 -> [0,10) a=2 | a@12 st12 -> [10,20) a=1
    # batch 1: b@2 (close 7 < end 10) -> [0,10) b=1 | a@16 st16 close 11 -> [10,20) a=2, and
    #          [0,10) closes | a@4 late
    # batch 2: b@25 -> [20,30) b=1, [10,20) closes | a@9 late | a@22 -> [20,30) a=1
    source, result = _run(kafka, topic_name, "--window", "tumbling:10s", "--grace", "5s",
                          "--max-records-per-batch", "3", "--late-topic", topic_name + "-late")
    assert windowed_counts(read_all(kafka, source + "-out")) == [
        ("a", at(0), 2, at(3)), ("a", at(10), 1, at(12)),
        ("b", at(0), 1, at(2)), ("a", at(10), 2, at(16)),
        ("b", at(20), 1, at(25)), ("a", at(20), 1, at(22))]
    assert "3 batch(es)" in result.stderr and "2 late record(s)" in result.stderr
    late = read_all(kafka, topic_name + "-late")
    assert [(m.key(), m.value(), m.timestamp()[1]) for m in late] == [(b"a", b"1", at(4)), (b"a", b"1", at(9))]
    # the window store's changelog: key ‖ start ‖ seqnum 0, the same updates
    changelog = read_all(kafka, source + "-app-aggregate-changelog")
    assert len(changelog) == 6 and all(m.key()[-4:] == b"\0\0\0\0" for m in changelog)
    assert (changelog[-1].key()[:-12], struct.unpack(">q", changelog[-1].key()[-12:-4])[0]) == (b"a", at(20))
    # the store holds the windows still open at stream time 25 (retention size + grace): [20,30)
    fetched = cli("state", "fetch", "--app-id", source + "-app", "a", "--from", str(at(0)), "--to", str(at(60)),
                  "-o", "json")
    assert fetched.exit_code == 0, fetched.stderr
    assert json.loads(fetched.stdout) == [{"key": "a", "value": 1, "window_start": at(20), "window_end": at(30),
                                           "partition": 0}]
    outside = cli("state", "fetch", "--app-id", source + "-app", "a", "--from", str(at(0)), "--to", str(at(19)),
                  "-o", "json")
    assert (outside.exit_code, json.loads(outside.stdout)) == (1, [])
    assert outside.stderr == "kstool: error: not found: no window of 'a' in that range (1 outside it)\n"
    never = cli("state", "fetch", "--app-id", source + "-app", "never-seen")  # as `get` of a missing key: exit 1
    assert (never.exit_code, never.stdout) == (1, "")
    assert never.stderr == ("kstool: error: not found: no window of 'never-seen' in the store; closed windows leave "
                            "it (its retention is size + grace): --from-changelog reads them\n")
    # the store's change feed, applied batch by batch, gives the store as read at each batch
    # (both read from the checkpoint, the feed by comparing each batch's shards with the batch before)
    feed = json.loads(cli("state", "changes", "--app-id", source + "-app", "--from-batch", "0", "-o", "json").stdout)
    held: dict[tuple, int] = {}
    for batch in range(3):
        for change in (c for c in feed if c["batch_id"] == batch):
            slot = (change["key"], change["window_start"])
            if change["change_type"] == "delete":
                del held[slot]
            else:
                held[slot] = change["value"]
        if batch == 0:
            assert held == {("a", at(0)): 2, ("a", at(10)): 1}
        snapshot = cli("state", "all", "--app-id", source + "-app", "--batch-id", str(batch), "-o", "json")
        assert held == {(e["key"], e["window_start"]): e["value"] for e in json.loads(snapshot.stdout)}
    assert held == {("a", at(20)): 1, ("b", at(20)): 1}


def test_tumbling_emit_final_emits_each_closed_window_once(kafka, spark, topic_name):
    # the same input: [0,10) closes at a@16 (a=2, b=1, in key order), [10,20) at b@25 (a=2);
    # [20,30) is still open at stream time 25 (end 30 + grace 5 > 25): not emitted
    source, result = _run(kafka, topic_name, "--window", "tumbling:10s", "--grace", "5s", "--emit", "final")
    assert windowed_counts(read_all(kafka, source + "-out")) == [
        ("a", at(0), 2, at(3)), ("b", at(0), 1, at(2)), ("a", at(10), 2, at(16))]
    assert "2 late record(s)" in result.stderr


def test_hopping_windows_with_json_keys(kafka, spark, topic_name):
    # size 10s, advance 5s, grace 0: a record is in the windows starting at floor(t/5)*5 and
    # 5s before (T0 is a multiple of 5s). a@1,a@3 -> [-5,5),[0,10) | a@12 -> [5,15),[10,20)
    # ([-5,5) and [0,10) close) | b@2 -> [-5,5),[0,10): closed, late | a@16 -> [10,20) a=2,
    # [15,25) a=1 ([5,15) closes) | a@4 late | b@25 -> [20,30),[25,35) ([10,20) and [15,25)
    # close) | a@9 -> [0,10),[5,15): late | a@22 -> [15,25) closed, [20,30) a=1
    source, result = _run(kafka, topic_name, "--window", "hopping:10s,5s", "--key-format", "json")
    # one batch: each window once, with its last value, in the order of last update
    got = [(json.loads(m.key()), struct.unpack(">q", m.value())[0], m.timestamp()[1])
           for m in read_all(kafka, source + "-out")]
    expected = [("a", -5, 2, 3), ("a", 0, 2, 3), ("a", 5, 1, 12), ("a", 10, 2, 16), ("a", 15, 1, 16),
                ("b", 20, 1, 25), ("b", 25, 1, 25), ("a", 20, 1, 22)]
    assert got == [({"key": k, "start": at(s), "end": at(s + 10)}, n, at(t)) for k, s, n, t in expected]
    assert "3 late record(s)" in result.stderr


def test_hopping_emit_final(kafka, spark, topic_name):
    source, _ = _run(kafka, topic_name, "--window", "hopping:10s,5s", "--emit", "final")
    # closed by the input, in window-end order: [-5,5) a=2 and [0,10) a=2 at a@12, [5,15) a=1
    # at a@16, [10,20) a=2 and [15,25) a=1 at b@25
    assert windowed_counts(read_all(kafka, source + "-out")) == [
        ("a", at(-5), 2, at(3)), ("a", at(0), 2, at(3)), ("a", at(5), 1, at(12)),
        ("a", at(10), 2, at(16)), ("a", at(15), 1, at(16))]


@pytest.mark.parametrize("emit", ["update", "final"])
def test_session_windows(kafka, spark, topic_name, emit):
    # gap 5s, grace 2s: close = stream time - grace - gap = st - 7 (KStreamSessionWindowAggregate
    # since KAFKA-12718); late when the merged session ends before close. Two records per batch:
    # batch 0: a@1 -> [1,1] | a@3 merges -> [1,3]=2; [1,1] came and went in the batch: no tombstone
    # batch 1: a@12 st12 close5 -> [12,12]=1 ([1,3] closes: 3 < 5) | b@2: [2,2] ends before 5: late
    # batch 2: a@16 close9 merges -> [12,16]=2, tombstone for [12,12] (written in batch 1)
    #          | a@4: [4,4] (too far from [12,16] to merge) ends before 9: late
    # batch 3: b@25 close18 -> [25,25] ([12,16] closes: 16 < 18) | a@9: late
    # batch 4: a@22: [22,22] ends after close 18: on time (a later a@<=27 could still extend
    #          it); with the pre-3.0 rule (close = st - grace = 23) it was dropped
    source, result = _run(kafka, topic_name, *SESSION_WINDOW, "--emit", emit, "--late-topic", topic_name + "-late")
    assert session_counts(read_all(kafka, source + "-out")) == SESSION_OUTPUT[emit]
    S = at
    assert "3 late record(s)" in result.stderr
    assert [(m.key(), m.timestamp()[1]) for m in read_all(kafka, topic_name + "-late")] == [
        (b"b", S(2)), (b"a", S(4)), (b"a", S(9))]
    # the session store holds the open sessions: b's [25,25] and a's [22,22]
    for key, session in (("b", (S(25), S(25), 1)), ("a", (S(22), S(22), 1))):
        fetched = cli("state", "fetch", "--app-id", source + "-app", key, "-o", "json")
        assert [(e["window_start"], e["window_end"], e["value"]) for e in json.loads(fetched.stdout)] == [
            session]


def test_event_time_from_a_json_field_with_sum(kafka, spark, topic_name):
    # event time from field ts (ISO-8601 or epoch ms), not the record timestamp (all at 100s);
    # [0,10) sums 2 + 3.5 (a double), [10,20) sums 1 (whole: a long); [20,30) stays open.
    # The record whose ts is not a time is bad: --on-error skip drops and counts it.
    records = [("a", json.dumps({"ts": "2026-01-01T00:00:01Z", "n": 2}), 100),
               ("a", json.dumps({"ts": at(4), "n": 3.5}), 100),
               ("a", json.dumps({"ts": "2026-01-01T00:00:12Z", "n": 1}), 100),
               ("b", json.dumps({"ts": "yesterday", "n": 1}), 100),
               ("a", json.dumps({"ts": at(25), "n": 4}), 100)]
    create_topic(kafka, topic_name, 1)
    produce_keyed(kafka, topic_name, records)
    result = cli("run", "aggregate", "--input", topic_name, "--output", topic_name + "-out", "--once",
                 "--app-id", topic_name + "-app", "--agg", "sum", "--value-field", "n", "--time", "field:ts",
                 "--window", "tumbling:10s", "--emit", "final", "--on-error", "skip")
    assert result.exit_code == 0, result.stderr
    out = read_all(kafka, topic_name + "-out")
    assert [(m.key(), m.value()) for m in out] == [
        (b"a" + struct.pack(">q", at(0)), struct.pack(">d", 5.5)),
        (b"a" + struct.pack(">q", at(10)), struct.pack(">q", 1))]
    assert "1 bad record(s)" in result.stderr
    # one serde: the store's changelog holds each window's value as the output does (a whole sum as
    # a Long, not 1.0), and the store and changelog read back as the output's numbers
    changelog = {m.key()[1:-4]: m.value() for m in read_all(kafka, topic_name + "-app-aggregate-changelog")}
    assert changelog == {struct.pack(">q", at(0)): struct.pack(">d", 5.5), struct.pack(">q", at(10)): struct.pack(">q", 1),
                         struct.pack(">q", at(20)): struct.pack(">q", 4)}
    dumped = cli("changelog", "dump", topic_name + "-app-aggregate-changelog", "-o", "jsonl").stdout.splitlines()
    assert [json.loads(line)["value"] for line in dumped][-3:] == [5.5, 1, 4]
    held = json.loads(cli("state", "all", "--app-id", topic_name + "-app", "-o", "json").stdout)
    assert [(e["window_start"], e["value"]) for e in held] == [(at(20), 4)]  # the open window: 4, not 4.0


def test_stream_time_and_windows_survive_a_restart_exactly_once(kafka, spark, topic_name):
    create_topic(kafka, topic_name, 1)
    args = ("run", "aggregate", "--input", topic_name, "--output", topic_name + "-out", "--app-id",
            topic_name + "-app", "--once", *TWO_RUNS_WINDOW, "--processing-guarantee", "exactly_once_v2")
    produce_keyed(kafka, topic_name, TWO_RUNS[0])
    first = cli(*args)
    assert first.exit_code == 0, first.stderr
    produce_keyed(kafka, topic_name, TWO_RUNS[1])
    second = cli(*args)
    assert second.exit_code == 0, second.stderr
    assert "late" not in first.stderr and "2 late record(s)" in second.stderr
    assert windowed_counts(read_all(kafka, topic_name + "-out")) == TWO_RUNS_OUTPUT


def test_tasks_get_shuffle_partitions_of_their_own(spark):
    """Spark places a task's group by hash(task) mod partitions; the count kstool picks must
    give each task its own partition (else tasks run one after the other)."""
    from pyspark.sql import functions as F

    from kstool.engine.query.shuffle import shuffle_partitions_for

    for tasks in (1, 2, 3, 6):
        partitions = shuffle_partitions_for(tasks)
        placed = spark.range(tasks).select(F.pmod(F.hash(F.col("id").cast("int")), F.lit(partitions))).collect()
        assert len({row[0] for row in placed}) == tasks


def test_group_by_field_merges_source_partitions_by_time(kafka, spark, topic_name):
    # re-keyed by field g, the records of both partitions meet in one task, in timestamp order
    # (as a repartition topic would interleave them): 1, 3, 12, 25. Concatenated partition by
    # partition, 3 would come after 12 and be late. tumbling 10s, grace 0, final:
    # [0,10) x=2 closes at 12, [10,20) x=1 closes at 25. A record without g is ignored.
    create_topic(kafka, topic_name, 2)
    produce_keyed(kafka, topic_name, [("k1", '{"g":"x"}', 1), ("k2", '{"g":"x"}', 12), ("k3", '{"h":1}', 13)], partition=0)
    produce_keyed(kafka, topic_name, [("k4", '{"g":"x"}', 3), ("k5", '{"g":"x"}', 25)], partition=1)
    result = cli("run", "aggregate", "--input", topic_name, "--output", topic_name + "-out", "--once",
                 "--app-id", topic_name + "-app", "--group-by", "field:g", "--window", "tumbling:10s",
                 "--emit", "final")
    assert result.exit_code == 0, result.stderr
    assert sorted(windowed_counts(read_all(kafka, topic_name + "-out"))) == [
        ("x", at(0), 2, at(3)), ("x", at(10), 1, at(12))]
    assert "late" not in result.stderr


def test_tumbling_emit_update_combined_in_the_source(kafka, spark, topic_name):
    """The first test's input and expected output without --late-topic: the source combines each
    batch (kstool.tasks.combiners.window_counts.WindowCombiner). a@4 and a@9 are late by the stream time of
    earlier batches, which the source reading the batch does not know."""
    source, result = _run(kafka, topic_name, "--window", "tumbling:10s", "--grace", "5s",
                          "--max-records-per-batch", "3")
    assert windowed_counts(read_all(kafka, source + "-out")) == [
        ("a", at(0), 2, at(3)), ("a", at(10), 1, at(12)),
        ("b", at(0), 1, at(2)), ("a", at(10), 2, at(16)),
        ("b", at(20), 1, at(25)), ("a", at(20), 1, at(22))]
    assert "3 batch(es)" in result.stderr and "2 late record(s)" in result.stderr


@pytest.mark.parametrize("window, emit", [("hopping:10s,5s", "update"), ("tumbling:10s", "final"),
                                          ("session:1s", "update")])
def test_combined_and_record_by_record_runs_write_the_same(kafka, spark, topic_name, window, emit):
    """The source's window combiner (sessions: its record packer) against every record on its own
    (KSTOOL_COMBINE=off): two partitions written by a normally batching producer, times out of order (late records),
    several batches. Each window's updates in the output, each task's changelog record for record
    (the output interleaves the tasks as their rows reach the sink), and the counts."""
    import random

    from confluent_kafka import Producer

    create_topic(kafka, topic_name, 2)
    rng = random.Random(5)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20})
    for i in range(3000):  # time moves on ~40 ms a record, one in ten comes up to a minute behind
        behind = rng.randrange(60_000) if rng.random() < 0.1 else rng.randrange(2_000)
        key = rng.randrange(30)  # a key's records in one partition, as a keyed producer writes them
        producer.produce(topic_name, key=f"k{key}".encode(), value=b"1", partition=key % 2,
                         timestamp=T0 + 40 * i - behind)
    assert producer.flush(30) == 0
    outcomes = {}
    for mode in ("on", "off"):
        app = f"{topic_name}-{mode}"
        result = cli("run", "aggregate", "--input", topic_name, "--output", app + "-out", "--app-id", app, "--once",
                     "--window", window, "--grace", "2s", "--emit", emit, "--max-records-per-batch", "1000",
                     "--report", "json", env={"KSTOOL_COMBINE": mode})
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)

        def written(topic):
            return [(m.partition(), m.key(), m.value(), m.timestamp()[1]) for m in read_all(kafka, topic)]

        per_window: dict[bytes, list] = {}
        for record in written(app + "-out"):
            per_window.setdefault(record[1], []).append(record)
        outcomes[mode] = (per_window, written(app + "-aggregate-changelog"),
                          report["input_records"], report["late_records"], report["batches"])
    assert outcomes["on"] == outcomes["off"]
    output, _, records, late, batches = outcomes["on"]
    assert output and records == 3000 and late > 0 and batches >= 3


def test_sliding_windows_count_as_kafka_streams_does(kafka, spark, topic_name):
    # KGroupedStreamImplTest#shouldCountSlidingWindows (KGroupedStreamImplTest.java:199):
    # ofTimeDifferenceAndGrace(500ms, 2s), its records (shifted by T0) written by a batching
    # producer over two partitions (keys 1 and 3 | 2), read 4 records per batch: each batch
    # emits each window's latest count, so the last of every window is the test's last update
    create_topic(kafka, topic_name, 2)
    for partition, keys in ((0, {"1", "3"}), (1, {"2"})):
        produce_keyed(kafka, topic_name, [(k, "x", ms / 1000) for k, ms in SLIDING_INPUT if k in keys], partition)
    result = cli("run", "aggregate", "--input", topic_name, "--output", topic_name + "-out", "--app-id",
                 topic_name + "-app", "--once", "--window", "sliding:500ms", "--grace", "2s",
                 "--max-records-per-batch", "4")
    assert result.exit_code == 0, result.stderr
    assert int(re.search(r"(\d+) batch\(es\)", result.stderr).group(1)) > 1, result.stderr
    last = {}
    for key, start, count, ts in windowed_counts(read_all(kafka, topic_name + "-out")):
        last[key, start - T0] = (count, ts - T0)
    assert sorted((key, start, *value) for (key, start), value in last.items()) == SLIDING_LAST
    # the store as `state all` reads it: each window with its end (start + 500, inclusive)
    entries = json.loads(cli("state", "all", "--app-id", topic_name + "-app", "-o", "json").stdout)
    assert sorted((e["key"], e["window_start"] - T0, e["window_end"] - e["window_start"], e["value"])
                  for e in entries) == [(k, start, 500, count) for k, start, count, _ in SLIDING_LAST]


def test_concat_in_tumbling_windows_emit_final(kafka, spark, topic_name):
    # TimeWindowedKStreamImplTest#shouldReduceWindowed's rule through Kafka and Spark: each window's
    # values joined in processing order (w@2 after z@12, still within the grace), written once
    # when stream time closes it: b@25 closes [0,10) (end + grace 20); [10,20) and [20,30) stay open
    create_topic(kafka, topic_name, 1)
    produce_keyed(kafka, topic_name, [("a", "x", 1), ("a", "y", 4), ("b", "p", 3), ("a", "z", 12), ("a", "w", 2),
                                      ("b", "q", 25)])
    result = cli("run", "aggregate", "--input", topic_name, "--output", topic_name + "-out", "--app-id",
                 topic_name + "-app", "--once", "--window", "tumbling:10s", "--agg", "concat", "--separator", "|",
                 "--emit", "final", "--grace", "10s")
    assert result.exit_code == 0, result.stderr
    written = [(m.key()[:-8].decode(), struct.unpack(">q", m.key()[-8:])[0] - T0, m.value().decode())
               for m in read_all(kafka, topic_name + "-out")]
    assert written == [("a", 0, "x|y|w"), ("b", 0, "p")]


@pytest.mark.parametrize("window, times_bytes", [("tumbling:1m", 8), ("session:30s", 16)])
def test_every_window_of_a_key_is_written_to_the_keys_partition(kafka, spark, topic_name, window, times_bytes):
    """As Kafka Streams' WindowedStreamPartitioner: a windowed record goes to its inner key's
    partition (murmur2 of the key alone; kafka-python's as the second opinion), so every
    window of a key is in one partition, in order, a session merge's tombstone before the
    merged session."""
    source = topic_name
    create_topic(kafka, source, 1)
    create_topic(kafka, source + "-out", 4)
    produce_keyed(kafka, source, [(f"u{k}", "1", 45 * i + k) for i in range(12) for k in range(6)])
    ran = cli("run", "aggregate", "--input", source, "--output", source + "-out", "--app-id", source + "-app",
              "--window", window, "--once")
    assert ran.exit_code == 0, ran.stderr
    written = read_all(kafka, source + "-out")
    assert len({m.key()[:-times_bytes] for m in written}) == 6
    assert len({m.key() for m in written}) > 6  # several windows per key
    assert {(m.key(), m.partition()) for m in written} == {
        (m.key(), (kafka_murmur2(m.key()[:-times_bytes]) & 0x7FFFFFFF) % 4) for m in written}
