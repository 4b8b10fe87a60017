"""Asymmetric join windows (`--before` / `--after`, Kafka Streams' JoinWindows.before/after)
replayed from apache/kafka's own tests (streams/src/test/java/org/apache/kafka/streams/kstream/
internals/, trunk as of 2024-10): each test's records go through kstool's StreamStreamJoin one
at a time, in the order the test pipes them (TopologyTestDriver processes each piped record at
once), and the results after each step are the ones the test checks, in its order.
MockValueJoiner.TOSTRING_JOINER is value1 + "+" + value2, a missing side "null"."""

from __future__ import annotations

from kstool.contract import OUTPUT
from kstool.streams.joins.joiners import make_joiner
from kstool.streams.joins.stream_stream import StreamStreamJoin
from kstool.streams.task import LEFT, RIGHT, Record, TaskState, run_task, task_stores

KEYS = (0, 1, 2, 3)


def _replay(how: str, before: int, after: int, steps: list[tuple[list[tuple], list[tuple]]]) -> None:
    """steps: ([(side, key, value, timestamp) piped], [(key, joined value, timestamp) expected])."""
    join = StreamStreamJoin(how, before, after, 0, make_joiner("concat", "+"))  # ...WithNoGrace
    state, offsets = TaskState.empty(task_stores(join)), {LEFT: 0, RIGHT: 0}
    for number, (piped, expected) in enumerate(steps):
        out = []
        for side, key, value, ts in piped:
            out += run_task(join, state, [Record(str(key).encode(), str(value).encode(), ts, side,
                                                 offset=offsets[side])])
            offsets[side] += 1
        assert [(int(e.key), e.value.decode(), e.timestamp) for e in out if e.role == OUTPUT] == expected, number


def _round(side: int, prefix: str, ts: int, keys=KEYS) -> list[tuple]:
    return [(side, k, f"{prefix}{k}", ts) for k in keys]


def _joins(prefix: str, keys, ts) -> list[tuple]:
    """(k, "A<k>+<prefix><k>", ts(k)) for each key."""
    return [(k, f"A{k}+{prefix}{k}", ts(k)) for k in keys]


# the left side of the inner tests: A0..A3 at 1000..1003
LEFT_A = [(LEFT, k, f"A{k}", 1000 + k) for k in KEYS]


def _inner_steps(rounds: list[tuple[str, int, list[int]]]) -> list[tuple[list[tuple], list[tuple]]]:
    """LEFT_A, then per (prefix, time, keys joined) a round of right records <prefix><k> at
    that time, joining A<k> of the keys listed (at the later of the two times)."""
    return [(LEFT_A, [])] + [(_round(RIGHT, prefix, ts), _joins(prefix, keys, lambda k, ts=ts: max(ts, 1000 + k)))
                             for prefix, ts, keys in rounds]


def test_inner_join_window_after_only():
    """KStreamKStreamJoinTest#testAsymmetricWindowingAfter (KStreamKStreamJoinTest.java:1369):
    ofTimeDifferenceWithNoGrace(0).after(100): A<k>@1000+k joins right records from its time to
    100 ms later."""
    _replay("inner", 0, 100, _inner_steps([
        ("a", 999, []), ("b", 1000, [0]), ("c", 1001, [0, 1]), ("d", 1002, [0, 1, 2]), ("e", 1003, [*KEYS]),
        ("f", 1100, [*KEYS]), ("g", 1101, [1, 2, 3]), ("h", 1102, [2, 3]), ("i", 1103, [3]), ("j", 1104, [])]))


def test_inner_join_window_before_only():
    """KStreamKStreamJoinTest#testAsymmetricWindowingBefore (KStreamKStreamJoinTest.java:1637):
    ofTimeDifferenceWithNoGrace(0).before(100): A<k>@1000+k joins right records from 100 ms
    earlier to its time; a join's timestamp is the later of the two."""
    _replay("inner", 100, 0, _inner_steps([
        ("a", 899, []), ("b", 900, [0]), ("c", 901, [0, 1]), ("d", 902, [0, 1, 2]), ("e", 903, [*KEYS]),
        ("f", 1000, [*KEYS]), ("g", 1001, [1, 2, 3]), ("h", 1002, [2, 3]), ("i", 1003, [3]), ("j", 1004, [])]))


def test_left_join_with_zero_after_emits_a_left_record_as_soon_as_stream_time_passes_it():
    """KStreamKStreamLeftJoinTest#testLeftJoinedRecordsWithZeroAfterAreEmitted
    (KStreamKStreamLeftJoinTest.java:434): ofTimeDifferenceWithNoGrace(100).after(ZERO). A left
    record waits for a partner only up to its own time (lookback = after = 0), so each A's null
    result comes with the next A; a right record out of order still joins them after that."""
    _replay("left", 100, 0, [
        (LEFT_A, [(0, "A0+null", 1000), (1, "A1+null", 1001), (2, "A2+null", 1002)]),
        (_round(RIGHT, "a", 999), _joins("a", KEYS, lambda k: 1000 + k)),
        (_round(RIGHT, "b", 1000), _joins("b", KEYS, lambda k: 1000 + k)),
        (_round(RIGHT, "c", 1001), _joins("c", [1, 2, 3], lambda k: 1000 + k)),
        (_round(RIGHT, "d", 1002), _joins("d", [2, 3], lambda k: 1000 + k)),
        (_round(RIGHT, "e", 1003), _joins("e", [3], lambda k: 1000 + k)),
        (_round(RIGHT, "f", 1100), []),
    ])


def test_left_join_with_zero_before():
    """KStreamKStreamLeftJoinTest (KStreamKStreamLeftJoinTest.java:948):
    ofTimeDifferenceWithNoGrace(100).before(ZERO). A1@1 waits 100 ms (lookback = after); a1@102
    closes it: A1's null result, and a1 (from 102 - 100 on) cannot join it."""
    _replay("left", 0, 100, [
        ([(LEFT, 0, "A0", 0), (LEFT, 1, "A1", 1)], []),
        ([(RIGHT, 0, "a0", 100)], [(0, "A0+a0", 100)]),
        ([(RIGHT, 1, "a1", 102)], [(1, "A1+null", 1)]),
    ])


def test_outer_join_emits_each_sides_unmatched_records_after_its_own_lookback():
    """KStreamKStreamOuterJoinTest#testEmitAllNonJoinedResultsForAsymmetricWindow
    (KStreamKStreamOuterJoinTest.java:519): ofTimeDifferenceWithNoGrace(5).after(20). A right
    record waits 5 ms (before), a left one 20 ms (after); the null results come in the outer
    store's order: time, then the right side first."""
    _replay("outer", 5, 20, [
        ([(LEFT, 0, "A0", 29)], []),
        ([(LEFT, 1, "A1", 30)], []),
        ([(RIGHT, 2, 12, 31)], []),
        ([(RIGHT, 3, 13, 36)], []),
        ([(RIGHT, 4, 14, 37)], [(2, "null+12", 31)]),
        ([(RIGHT, 5, 15, 50)], [(0, "A0+null", 29), (3, "null+13", 36), (4, "null+14", 37)]),
    ])


def test_outer_join_with_zero_before():
    """KStreamKStreamOuterJoinTest#testShouldNotEmitLeftJoinResultForAsymmetricBeforeWindow
    (KStreamKStreamOuterJoinTest.java:821): ofTimeDifferenceWithNoGrace(100).before(ZERO)."""
    _replay("outer", 0, 100, [
        ([(LEFT, 0, "A0", 0), (LEFT, 1, "A1", 1)], []),
        ([(RIGHT, 0, 10, 100)], [(0, "A0+10", 100)]),
        ([(RIGHT, 1, 11, 102)], [(1, "A1+null", 1)]),
        ([(RIGHT, 2, 12, 103)], [(1, "null+11", 102)]),
        ([(LEFT, 2, "A2", 103)], [(2, "A2+12", 103)]),
    ])


def test_outer_join_with_zero_after():
    """KStreamKStreamOuterJoinTest#testShouldNotEmitLeftJoinResultForAsymmetricAfterWindow
    (KStreamKStreamOuterJoinTest.java:908): ofTimeDifferenceWithNoGrace(100).after(ZERO)."""
    _replay("outer", 100, 0, [
        ([(LEFT, 0, "A0", 0), (LEFT, 1, "A1", 1)], [(0, "A0+null", 0)]),
        ([(RIGHT, 1, 11, 1)], [(1, "A1+11", 1)]),
        ([(RIGHT, 2, 12, 101)], []),
        ([(RIGHT, 3, 13, 101)], []),
        ([(LEFT, 2, "A2", 201)], [(2, "A2+12", 201)]),
    ])
