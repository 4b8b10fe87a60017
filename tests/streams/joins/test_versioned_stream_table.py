"""Stream-table joins against a versioned table (`--table-history`, `--grace`) replayed from
apache/kafka's own tests (streams/src/test/java/org/apache/kafka/streams/, trunk as of
2024-10): each piped record goes through kstool's VersionedStreamTableJoin on its own, in the
test's order (TopologyTestDriver processes each piped record at once), and the results after
each step are the ones the test checks."""

from __future__ import annotations

from kstool.contract import OUTPUT, changelog_role
from kstool.streams.joins.joiners import make_joiner
from kstool.streams.joins.versioned_stream_table import TABLE, VersionedStreamTableJoin
from kstool.streams.task import LEFT, RIGHT, Record, TaskState, run_task, task_stores

MINUTE = 60_000


def _replay(join: VersionedStreamTableJoin, steps: list[tuple[int, object, str | None, int]]) -> list[list[tuple]]:
    """steps: (side, key, value, timestamp) -> per step the (key, value, timestamp) joined."""
    state, offsets, results = TaskState.empty(task_stores(join)), {LEFT: 0, RIGHT: 0}, []
    for side, key, value, ts in steps:
        out = run_task(join, state, [Record(str(key).encode(), None if value is None else value.encode(), ts, side,
                                            offset=offsets[side])])
        offsets[side] += 1
        results.append([(int(e.key), e.value.decode(), e.timestamp) for e in out if e.role == OUTPUT])
    return results


# AbstractJoinIntegrationTest.input (AbstractJoinIntegrationTest.java:63): one key throughout,
# out-of-order table updates at 7 and 3 and 9 after newer ones; baseTimestamp taken as 0
INPUT = [(LEFT, None, 1), (RIGHT, None, 2), (LEFT, "A", 3), (RIGHT, "a", 4), (LEFT, "B", 5), (RIGHT, "b", 6),
         (LEFT, None, 7), (RIGHT, None, 8), (LEFT, "C", 9), (RIGHT, "c", 10), (RIGHT, None, 11), (LEFT, None, 12),
         (RIGHT, None, 13), (RIGHT, "d", 7), (LEFT, "D", 6), (LEFT, None, 2), (RIGHT, None, 3), (RIGHT, "e", 14),
         (LEFT, "E", 15), (LEFT, None, 10), (RIGHT, None, 9), (LEFT, "F", 4), (RIGHT, "f", 3)]


def _expected(at: dict[int, tuple[str, int]]) -> list[list[tuple]]:
    """The test's expectedResult: step index -> (joined value, timestamp), nothing elsewhere."""
    return [[(0, *at[i])] if i in at else [] for i in range(len(INPUT))]


def _integration(how: str) -> list[list[tuple]]:
    join = VersionedStreamTableJoin(how, 5 * MINUTE, 0, make_joiner("concat", "-"))  # value1 + "-" + value2
    return _replay(join, [(side, 0, value, ts) for side, value, ts in INPUT])


def test_inner_join_with_a_versioned_table():
    """StreamTableJoinIntegrationTest#testInnerWithVersionedStore (StreamTableJoinIntegrationTest.java:127):
    D@6 joins b (valid 6..7), not d@7 that came later; F@4 joins a, the version of 4."""
    assert _integration("inner") == _expected({4: ("B-a", 5), 14: ("D-b", 6), 18: ("E-e", 15), 21: ("F-a", 4)})


def test_left_join_with_a_versioned_table():
    """StreamTableJoinIntegrationTest#testLeftWithVersionedStore (StreamTableJoinIntegrationTest.java:167):
    C@9 finds the tombstone of 8."""
    assert _integration("left") == _expected({2: ("A-null", 3), 4: ("B-a", 5), 8: ("C-null", 9), 14: ("D-b", 6),
                                              18: ("E-e", 15), 21: ("F-a", 4)})


def _grace_join() -> VersionedStreamTableJoin:
    """KStreamKTableJoinTest#makeJoin (KStreamKTableJoinTest.java:131): a versioned table of 5
    minutes' history, Joined.withGracePeriod(2 ms), MockValueJoiner.TOSTRING_JOINER."""
    return VersionedStreamTableJoin("inner", 5 * MINUTE, 2, make_joiner("concat", "+"))


def _stream(prefix: str, count: int = 4) -> list[tuple]:
    """pushToStream: key i at time i."""
    return [(LEFT, i, f"{prefix}{i}", i) for i in range(count)]


def _table(prefix: str) -> list[tuple]:
    """pushToTableNonRandom: keys 0..3 at time 0."""
    return [(RIGHT, i, f"{prefix}{i}", 0) for i in range(4)]


def _steps(results: list[list[tuple]], sizes: list[int]) -> list[list[tuple]]:
    """The results grouped as the test checks them: after each of its pushes."""
    grouped, at = [], 0
    for size in sizes:
        grouped.append([r for step in results[at:at + size] for r in step])
        at += size
    return grouped


def test_join_waits_for_the_grace_period():
    """KStreamKTableJoinTest#shouldDelayJoinByGracePeriod (KStreamKTableJoinTest.java:240): a
    stream record joins when the buffer's time - 2 reaches it; X0@0 of the second round is
    already that late and joins at once; 5@7 releases the X2s and X3s of both rounds, which
    join YY (the version of time 0 that replaced Y), in time, key, arrival order."""
    steps = _table("Y") + _stream("X") + _table("YY") + _stream("X") + [(LEFT, 5, "test", 7)] + _table("YYY")
    assert _steps(_replay(_grace_join(), steps), [4, 4, 4, 4, 1, 4]) == [
        [], [(0, "X0+Y0", 0), (1, "X1+Y1", 1)], [], [(0, "X0+YY0", 0), (1, "X1+YY1", 1)],
        [(2, "X2+YY2", 2), (2, "X2+YY2", 2), (3, "X3+YY3", 3), (3, "X3+YY3", 3)], []]


def test_a_record_later_than_the_grace_joins_at_once():
    """KStreamKTableJoinTest#shouldHandleLateJoinsWithGracePeriod (KStreamKTableJoinTest.java:278)."""
    steps = _table("Y") + _stream("X") + _stream("X", 1)
    assert _steps(_replay(_grace_join(), steps), [4, 4, 1]) == [
        [], [(0, "X0+Y0", 0), (1, "X1+Y1", 1)], [(0, "X0+Y0", 0)]]


def test_every_table_record_is_logged_and_the_history_answers_within_its_retention():
    """ChangeLoggingVersionedKeyValueBytesStore#put logs every record, also one the store drops
    as older than its history (RocksDBVersionedStore.java:134); get(key, t) for t older than the
    observed time - history answers only the latest version (RocksDBVersionedStore.java:207)."""
    join = VersionedStreamTableJoin("left", 10, 0, make_joiner("concat", "+"))
    state = TaskState.empty(task_stores(join))
    steps = [(RIGHT, "a", 0), (RIGHT, "b", 20), (RIGHT, "c", 5), (RIGHT, "d", 12),  # c: older than 20 - 10
             (LEFT, "S", 11), (LEFT, "T", 9), (LEFT, "U", 25), (LEFT, "V", 0)]
    out = []
    for number, (side, value, ts) in enumerate(steps):
        out += run_task(join, state, [Record(b"k", value.encode(), ts, side, offset=number)])
    logged = [(e.value.decode(), e.timestamp) for e in out if e.role == changelog_role(TABLE)]
    assert logged == [("a", 0), ("b", 20), ("c", 5), ("d", 12)]
    # S@11: history (11 >= 20 - 10) has a@0 until 12; T@9: older than the history, the latest (b@20) began later
    assert [(e.value.decode(), e.timestamp) for e in out if e.role == OUTPUT] == [
        ("S+a", 11), ("T+null", 9), ("U+b", 25), ("V+null", 0)]
