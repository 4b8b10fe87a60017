"""Table aggregations (`run table-aggregate`, KTable.groupBy(...).count() with its subtractor)
and their suppression (`--suppress-time`, `--suppress-records`) replayed from apache/kafka's own
SuppressScenarioTest (streams/src/test/java/org/apache/kafka/streams/kstream/internals/,
trunk as of 2024-10): builder.table("input").groupBy((k, v) -> KeyValue(v, k)).count(), so a
row is counted in the group named by its value; "output-raw" is the count's updates and
"output-suppressed" the suppressed ones. Each piped record goes through kstool's
TableAggregate on its own, as TopologyTestDriver processes it (and commits) at once."""

from __future__ import annotations

import struct

from kstool.contract import OUTPUT
from kstool.streams.table_aggregation import TableAggregate
from kstool.streams.task import Record, TaskState, run_task, task_stores


def _replay(aggregate: TableAggregate, steps: list[list[tuple[str, str | None, int]]]) -> list[list[tuple]]:
    """steps: rows piped, (key, value, timestamp) -> per step the updates written, (group,
    count or sum, timestamp)."""
    state, offset, written = TaskState.empty(task_stores(aggregate)), 0, []
    for piped in steps:
        out = []
        for key, value, ts in piped:
            out += run_task(aggregate, state, [Record(key.encode(), value and value.encode(), ts, offset=offset)])
            offset += 1
        written.append([(e.key.decode(), struct.unpack(">q", e.value)[0], e.timestamp) for e in out if e.role == OUTPUT])
    return written


STEPS = [[("k1", "v1", 0), ("k1", "v2", 1), ("k2", "v1", 2)], [("x", "x", 3)], [("x", "y", 4)]]
# output-raw of every scenario: k1 moving from v1 to v2 takes it out of v1's count first
RAW = [[("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)], [("x", 1, 3)], [("x", 0, 4), ("y", 1, 4)]]


def test_count_takes_a_moved_row_out_of_its_old_group():
    """output-raw of SuppressScenarioTest#shouldImmediatelyEmitEventsWithZeroEmitAfter
    (SuppressScenarioTest.java:86) and its siblings: KTableRepartitionMap forwards the old
    group's subtraction before the new group's addition (KTableRepartitionMap.java, process)."""
    assert _replay(TableAggregate("count", "value"), STEPS) == RAW


def test_suppression_with_zero_time_emits_at_once():
    """SuppressScenarioTest#shouldImmediatelyEmitEventsWithZeroEmitAfter (SuppressScenarioTest.java:86):
    untilTimeLimit(ZERO, unbounded())."""
    assert _replay(TableAggregate("count", "value", suppress_ms=0), STEPS) == RAW


def test_suppression_with_a_time_limit():
    """SuppressScenarioTest#shouldSuppressIntermediateEventsWithTimeLimit (SuppressScenarioTest.java:163):
    untilTimeLimit(2ms): v1 entered the buffer at 0 and leaves at stream time 2 with its latest
    count; v2 (entered at 1) at 3; tick (entered at 3) still waits at 4."""
    steps = [STEPS[0], [("tick", "tick", 3)], [("tick", "tock", 4)]]
    assert _replay(TableAggregate("count", "value", suppress_ms=2), steps) == [
        [("v1", 1, 2)], [("v2", 1, 1)], []]


def test_suppression_with_a_record_limit():
    """SuppressScenarioTest#shouldSuppressIntermediateEventsWithRecordLimit (SuppressScenarioTest.java:228):
    untilTimeLimit(Long.MAX_VALUE, maxRecords(1).emitEarlyWhenFull()): a second waiting group
    pushes the oldest out."""
    assert _replay(TableAggregate("count", "value", suppress_records=1), STEPS[:2]) == [
        [("v1", 0, 1), ("v2", 1, 1)], [("v1", 1, 2)]]


def test_sum_grouped_by_the_row_key():
    """KTableAggregateTest#testAggBasic (KTableAggregateTest.java:75): groupBy(noOpKeyValueMapper)
    with TOSTRING_ADDER / TOSTRING_REMOVER ("0+2-2+4" is the sum 4): a row's update takes its old
    value back and adds the new one in one update, at the later of the two times."""
    rows = [("A", "1", 10), ("B", "2", 15), ("A", "3", 20), ("B", "4", 18), ("C", "5", 5), ("D", "6", 25),
            ("B", "7", 15), ("C", "8", 10)]
    assert sum(_replay(TableAggregate("sum", "key"), [rows]), []) == [
        ("A", 1, 10), ("B", 2, 15), ("A", 3, 20), ("B", 4, 18), ("C", 5, 5), ("D", 6, 25), ("B", 7, 18), ("C", 8, 10)]


def test_sum_grouped_by_the_value_with_a_tombstone():
    """KTableAggregateTest#testAggRepartition (KTableAggregateTest.java:123), its mapper
    KeyValue.pair(value, value) (the rows keyed "null" and "NULL", which its mapper maps to no
    group and which change nothing, left out): A's tombstone takes 1 out of group 1, and the
    re-added A@12 stays at the group's later time, 15."""
    rows = [("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20), ("B", "4", 23), ("B", "7", 22)]
    assert sum(_replay(TableAggregate("sum", "value"), [rows]), []) == [
        ("1", 1, 10), ("1", 0, 15), ("1", 1, 15), ("2", 2, 20), ("2", 0, 23), ("4", 4, 23), ("4", 0, 23), ("7", 7, 22)]


def test_count_grouped_by_the_value():
    """KTableAggregateTest#testCount (KTableAggregateTest.java:264, testCountHelper): groupBy(value).count()."""
    rows = [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15), ("D", "green", 11)]
    assert sum(_replay(TableAggregate("count", "value"), [rows]), []) == [
        ("green", 1, 10), ("green", 2, 10), ("green", 1, 12), ("blue", 1, 12), ("yellow", 1, 15), ("green", 2, 12)]
