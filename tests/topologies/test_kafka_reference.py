"""Kafka Streams' own unit tests, replayed through `kstool run ... --once`.

Each test names its source in apache/kafka (streams/src/test/java/org/apache/kafka/streams/
kstream/internals/, trunk of 2024-09, commit 1eb7644) and the line of the test method. The inputs
are produced to topics with exactly the test's timestamps (0 included: kafka-python can send 0,
librdkafka cannot), and the outputs are asserted as the test asserts them. Kafka's tests run
with record caching disabled and list every update; kstool's stores are cached per micro-batch,
so where the test lists updates the assertion is on each window's final value (the last update
the test lists for it), unless the run takes one record per batch, where the lists must match.
"""

from __future__ import annotations

import json
import struct

import pytest

from tests.conftest import cli
from tests.helpers import create_topic, pipe, read_all


def aggregate(kafka, topic_name, records, *options) -> tuple[str, object]:
    create_topic(kafka, topic_name, 1)
    pipe(kafka, topic_name, records)
    result = cli("run", "aggregate", "--input", topic_name, "--output", topic_name + "-out",
                 "--app-id", topic_name + "-app", "--once", "--late-topic", topic_name + "-late", *options)
    assert result.exit_code == 0, result.stderr
    return topic_name + "-out", result


def windows(kafka, topic) -> list[tuple]:
    """(windowed key bytes, count or None, timestamp) of the output topic."""
    return [(m.key(), None if m.value() is None else struct.unpack(">q", m.value())[0], m.timestamp()[1])
            for m in read_all(kafka, topic)]


def time_windowed(kafka, topic, size: int) -> list[tuple]:
    """In Kafka's test notation: ("[k@start/end]", count or None, timestamp)."""
    return [(f"[{k[:-8].decode()}@{struct.unpack('>q', k[-8:])[0]}/{struct.unpack('>q', k[-8:])[0] + size}]", v, ts)
            for k, v, ts in windows(kafka, topic)]


def session_windowed(kafka, topic) -> list[tuple]:
    out = []
    for k, v, ts in windows(kafka, topic):
        end, start = struct.unpack(">qq", k[-16:])
        out.append((f"[{k[:-16].decode()}@{start}/{end}]", v, ts))
    return out


def finals(updates: list[tuple]) -> dict:
    """Each window's last update: what a cached store emits for it."""
    return {window: (value, ts) for window, value, ts in updates}


def late(kafka, topic_name) -> list[tuple]:
    return [(m.key().decode(), m.timestamp()[1]) for m in read_all(kafka, topic_name + "-late")]


# -- windowed aggregations -------------------------------------------------------------------

K1_TIMES = [0, 1, 2, 1, 0, 5, 0]


def test_final_results_for_time_windows_one_record_per_batch(kafka, spark, topic_name):
    """SuppressScenarioTest#shouldSupportFinalResultsForTimeWindows (SuppressScenarioTest.java:362),
    output-raw: TimeWindows.ofSizeAndGrace(2ms, 1ms), count, caching disabled. One record per
    micro-batch, so the per-batch cache holds one update and the lists must match exactly."""
    out, result = aggregate(kafka, topic_name, [("k1", "v1", t) for t in K1_TIMES],
                            "--window", "tumbling:2ms", "--grace", "1ms", "--max-records-per-batch", "1")
    assert time_windowed(kafka, out, 2) == [
        ("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1),
        ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 5)]
    # "note this last record gets dropped because it is out of the grace period"
    assert late(kafka, topic_name) == [("k1", 0)]
    assert "7 batch(es)" in result.stderr


def test_final_results_for_time_windows_suppressed(kafka, spark, topic_name):
    """SuppressScenarioTest#shouldSupportFinalResultsForTimeWindows (SuppressScenarioTest.java:362),
    output-suppressed (suppress(untilWindowCloses) = --emit final)."""
    out, _ = aggregate(kafka, topic_name, [("k1", "v1", t) for t in K1_TIMES],
                       "--window", "tumbling:2ms", "--grace", "1ms", "--emit", "final")
    assert time_windowed(kafka, out, 2) == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 1, 2)]


def test_final_results_for_time_windows_with_large_jump(kafka, spark, topic_name):
    """SuppressScenarioTest#shouldSupportFinalResultsForTimeWindowsWithLargeJump
    (SuppressScenarioTest.java:413): size 2ms, grace 2ms; "this update should get dropped, since
    the previous event advanced the stream time and closed the window"."""
    records = [("k1", "v1", t) for t in [0, 1, 2, 0, 3, 0, 4, 0, 30]]
    raw = [("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1),
           ("[k1@2/4]", 2, 3), ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 4), ("[k1@30/32]", 1, 30)]
    out, _ = aggregate(kafka, topic_name, records, "--window", "tumbling:2ms", "--grace", "2ms")
    assert finals(time_windowed(kafka, out, 2)) == finals(raw)
    assert late(kafka, topic_name) == [("k1", 0)]
    suppressed, _ = aggregate(kafka, topic_name + "-f", records, "--window", "tumbling:2ms", "--grace", "2ms",
                              "--emit", "final")
    assert time_windowed(kafka, suppressed, 2) == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 2, 3), ("[k1@4/6]", 1, 4)]


def test_hopping_window_skips_expired_windows_only(kafka, spark, topic_name):
    """KStreamWindowAggregateTest#shouldLogAndMeterWhenSkippingExpiredWindow
    (KStreamWindowAggregateTest.java:494): TimeWindows.ofSizeAndGrace(10ms, 90ms).advanceBy(5ms);
    k@100, then k@0..k@6 at stream time 100, then k@105, k@106. Kafka's dropped-records metric is 7:
    each of 0..6 is dropped from the closed window [0,10); 5 and 6 still count in [5,15), so
    kstool's late records (dropped whole) are 0..4. Counts stand for the test's "+v" strings."""
    records = [("k", str(t), t) for t in [100, 0, 1, 2, 3, 4, 5, 6, 105, 106]]
    out, _ = aggregate(kafka, topic_name, records, "--window", "hopping:10ms,5ms", "--grace", "90ms")
    assert finals(time_windowed(kafka, out, 10)) == {  # each window's last update in the test
        "[k@95/105]": (1, 100), "[k@100/110]": (3, 106), "[k@5/15]": (2, 6), "[k@105/115]": (2, 106)}
    assert late(kafka, topic_name) == [("k", t) for t in (0, 1, 2, 3, 4)]
    final, _ = aggregate(kafka, topic_name + "-f", records, "--window", "hopping:10ms,5ms", "--grace", "90ms",
                         "--emit", "final")
    # "Window close time is 15 when timestamp is 105"
    assert time_windowed(kafka, final, 10) == [("[k@5/15]", 2, 6)]


SESSION_INPUT = [("k1", "v1", 0), ("k1", "v1", 5), ("k1", "v1", 1), ("k2", "v1", 11), ("k1", "v1", 5),
                 ("k1", "v1", 30)]


def test_final_results_for_session_windows(kafka, spark, topic_name):
    """SuppressScenarioTest#shouldSupportFinalResultsForSessionWindows (SuppressScenarioTest.java:559):
    SessionWindows.ofInactivityGapWithNoGrace(5ms), count. "arbitrarily disordered records are
    admitted, because the *window* is not closed until stream-time > window-end + grace"; k1@5
    after k2@11 is late for the first window."""
    raw = [("[k1@0/0]", 1, 0), ("[k1@0/0]", None, 0), ("[k1@0/5]", 2, 5), ("[k1@0/5]", None, 5),
           ("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11), ("[k1@30/30]", 1, 30)]
    out, _ = aggregate(kafka, topic_name, SESSION_INPUT, "--window", "session:5ms")
    # one batch: [k1@0/0] came and went inside it, so the cache writes no tombstone for it
    assert finals(session_windowed(kafka, out)) == {w: v for w, v in finals(raw).items() if w != "[k1@0/0]"}
    assert late(kafka, topic_name) == [("k1", 5)]
    suppressed, _ = aggregate(kafka, topic_name + "-f", SESSION_INPUT, "--window", "session:5ms",
                              "--emit", "final")
    assert session_windowed(kafka, suppressed) == [("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11)]


def test_session_late_records_with_zero_grace(kafka, spark, topic_name):
    """KStreamSessionWindowAggregateProcessorTest#shouldLogAndMeterWhenSkippingLateRecordWithZeroGrace
    (KStreamSessionWindowAggregateProcessorTest.java:483): gap 10ms, grace 0; "dummy record to
    advance stream time = 11, 10 for gap time plus 1 to place outside window": then Late1@0 is
    dropped (expiration 1), the one dropped record."""
    aggregate(kafka, topic_name, [("dummy", "d", 0), ("OnTime1", "1", 0), ("dummy", "d", 11), ("Late1", "1", 0)],
              "--window", "session:10ms")
    assert late(kafka, topic_name) == [("Late1", 0)]


def test_session_late_records_with_nonzero_grace(kafka, spark, topic_name):
    """KStreamSessionWindowAggregateProcessorTest#shouldLogAndMeterWhenSkippingLateRecordWithNonzeroGrace
    (KStreamSessionWindowAggregateProcessorTest.java:550): gap 10ms, grace 1ms. OnTime2@0 at
    stream time 11 is on time (0 >= 11 - 1 - 10); Late1@0 at stream time 12 is not (0 < 1)."""
    out, _ = aggregate(kafka, topic_name, [("dummy", "d", 0), ("OnTime1", "1", 0), ("dummy", "d", 11),
                                           ("OnTime2", "1", 0), ("dummy", "d", 12), ("Late1", "1", 0)],
                       "--window", "session:10ms", "--grace", "1ms")
    assert late(kafka, topic_name) == [("Late1", 0)]
    assert finals(session_windowed(kafka, out))["[OnTime2@0/0]"] == (1, 0)


# -- stream-stream joins ------------------------------------------------------------------------

def join(kafka, topic_name, left, right, how: str, within: str | None, grace: str, *options: str):
    """`within` None: the window is in `options` (--before, --after)."""
    for side, records in (("-l", left), ("-r", right)):
        create_topic(kafka, topic_name + side, 1)
        pipe(kafka, topic_name + side, records)
    window = ("--within", within) if within is not None else ()
    result = cli("run", "join", "--left", topic_name + "-l", "--right", topic_name + "-r",
                 "--output", topic_name + "-out", "--app-id", topic_name + "-app", "--once",
                 "--kind", "stream-stream", "--how", how, *window, "--grace", grace,
                 "--joiner", "concat", "--separator", "+", "--late-topic", topic_name + "-late", *options)
    assert result.exit_code == 0, result.stderr
    # MockValueJoiner.TOSTRING_JOINER: value1 + "+" + value2, keys as Integer.toString
    return [(int(m.key()), m.value().decode(), m.timestamp()[1]) for m in read_all(kafka, topic_name + "-out")]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_inner_join_at_timestamp_zero(kafka, spark, topic_name, guarantee):
    """KStreamKStreamJoinTest#testJoin (KStreamKStreamJoinTest.java:562): within 100ms, no grace,
    every record at timestamp 0. The test pipes six steps and asserts after each; one kstool run
    over all of them must give the union of those results (22 joins, all at timestamp 0). The
    order differs: records of the two topics with equal timestamps are interleaved by the
    partition grouping (kstool: the right side first), not in the order the test pipes them.
    Under exactly_once_v2 the output is written in a transaction that commits the input offsets
    too, and still keeps timestamp 0."""
    keys = (0, 1, 2, 3)
    left = [(k, f"A{k}", 0) for k in keys[:2]] + [(k, f"B{k}", 0) for k in keys] + [(k, f"C{k}", 0) for k in keys]
    right = [(k, f"a{k}", 0) for k in keys[:2]] + [(k, f"b{k}", 0) for k in keys] + [(k, f"c{k}", 0) for k in keys[:2]]
    expected = [(0, "A0+a0"), (1, "A1+a1"),
                (0, "B0+a0"), (1, "B1+a1"),
                (0, "A0+b0"), (0, "B0+b0"), (1, "A1+b1"), (1, "B1+b1"), (2, "B2+b2"), (3, "B3+b3"),
                (0, "C0+a0"), (0, "C0+b0"), (1, "C1+a1"), (1, "C1+b1"), (2, "C2+b2"), (3, "C3+b3"),
                (0, "A0+c0"), (0, "B0+c0"), (0, "C0+c0"), (1, "A1+c1"), (1, "B1+c1"), (1, "C1+c1")]
    got = join(kafka, topic_name, left, right, "inner", "100ms", "0ms", "--processing-guarantee", guarantee)
    assert sorted(got) == sorted((k, v, 0) for k, v in expected)
    group = json.loads(cli("groups", "describe", topic_name + "-app", "-o", "json").stdout)
    assert {p["topic"]: p["committed"] for p in group["partitions"]} == {
        topic_name + "-l": len(left), topic_name + "-r": len(right)}


def test_asymmetric_window_after_only(kafka, spark, topic_name):
    """KStreamKStreamJoinTest#testAsymmetricWindowingAfter (KStreamKStreamJoinTest.java:1369),
    ofTimeDifferenceWithNoGrace(0).after(100) as `--before 0ms --after 100ms`: one run over all
    the steps gives the union of their results (each step, record by record, in
    tests/streams/joins/test_stream_stream.py): A<k>@1000+k joins right records from its time
    to 100 ms later."""
    keys = (0, 1, 2, 3)
    left = [(k, f"A{k}", 1000 + k) for k in keys]
    rounds = [("a", 999), ("b", 1000), ("c", 1001), ("d", 1002), ("e", 1003),
              ("f", 1100), ("g", 1101), ("h", 1102), ("i", 1103), ("j", 1104)]
    right = [(k, f"{prefix}{k}", ts) for prefix, ts in rounds for k in keys]
    expected = [(k, f"A{k}+{prefix}{k}", ts) for prefix, ts in rounds for k in keys if 0 <= ts - (1000 + k) <= 100]
    got = join(kafka, topic_name, left, right, "inner", None, "0ms", "--before", "0ms", "--after", "100ms")
    assert sorted(got) == sorted(expected) and len(expected) == 20


def test_left_join_grace_period(kafka, spark, topic_name):
    """KStreamKStreamLeftJoinTest#testGracePeriod (KStreamKStreamLeftJoinTest.java:801): within
    100ms, grace 10ms. a0..a3@101 are 101ms after A0, A1: no join; the dummy@1201 "should only
    produce the expired non-joined records"."""
    left = [(0, "A0", 0), (1, "A1", 0)]
    right = [(k, f"a{k}", 101) for k in (0, 1, 2, 3)] + [(0, "dummy", 1201)]
    assert join(kafka, topic_name, left, right, "left", "100ms", "10ms") == [(0, "A0+null", 0), (1, "A1+null", 0)]


def test_left_expired_non_joined_records_are_emitted_by_the_left_processor(kafka, spark, topic_name):
    """KStreamKStreamLeftJoinTest#testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor
    (KStreamKStreamLeftJoinTest.java:220): within 100ms, grace 0."""
    left = [(0, "A0", 1), (1, "A1", 2), (0, "A0-0", 3), (2, "dummy", 401)]
    right = [(1, "a1", 3), (2, "dummy", 401)]
    assert join(kafka, topic_name, left, right, "left", "100ms", "0ms") == [
        (1, "A1+a1", 3), (0, "A0+null", 1), (0, "A0-0+null", 3), (2, "dummy+dummy", 401)]


def test_outer_join_grace_period(kafka, spark, topic_name):
    """KStreamKStreamOuterJoinTest#testGracePeriod (KStreamKStreamOuterJoinTest.java:453): within
    100ms, grace 10ms; the right record at 112 emits both waiting records, right side first at
    equal times (the outer store's TimestampedKeyAndJoinSide order)."""
    left = [(0, "A0", 0), (1, "A1", 101)]
    right = [(1, "11", 0), (0, "10", 101), (0, "100", 112)]
    assert join(kafka, topic_name, left, right, "outer", "100ms", "10ms") == [(1, "null+11", 0), (0, "A0+null", 0)]
