"""Text aggregates (`aggregate --agg concat|latest`, with and without windows) replayed from
apache/kafka's own KGroupedStreamImplTest and TimeWindowedKStreamImplTest
(streams/src/test/java/org/apache/kafka/streams/kstream/internals/, trunk as of 2024-10): their
records through kstool's processors one at a time, as TopologyTestDriver processes them."""

from __future__ import annotations

import json

import pytest

from kstool.contract import OUTPUT
from kstool.streams.reduce import TextReduce
from kstool.streams.sessions import SessionAggregate
from kstool.streams.sliding import SlidingWindowAggregate
from kstool.streams.task import Record, TaskState, run_task, task_stores
from kstool.streams.time_windows import WindowedAggregate
from kstool.streams.windows import WindowSpec

# KGroupedStreamImplTest#processData (KGroupedStreamImplTest.java:700): the last record has no value
PROCESS_DATA = [("1", "A", 5), ("2", "B", 1), ("1", "C", 3), ("1", "D", 10), ("3", "E", 8), ("3", "F", 9),
                ("3", None, 9)]


def _last_per_key(reduce: TextReduce) -> dict[str, tuple[str, int]]:
    state, last = TaskState.empty(task_stores(reduce)), {}
    for offset, (key, value, ts) in enumerate(PROCESS_DATA):
        for e in run_task(reduce, state, [Record(key.encode(), value and value.encode(), ts, offset=offset)]):
            if e.role == OUTPUT:
                last[e.key.decode()] = (e.value.decode(), e.timestamp)
    return last


def test_concat_joins_a_keys_values_in_processing_order():
    """KGroupedStreamImplTest#shouldReduceAndMaterializeResults (KGroupedStreamImplTest.java:599):
    reduce(MockReducer.STRING_ADDER), value1 + "+" + value2; the timestamp is the later one
    (A@5, C@3, D@10: 10), the null value skipped."""
    assert _last_per_key(TextReduce("concat", b"+")) == {"1": ("A+C+D", 10), "2": ("B", 1), "3": ("E+F", 9)}


def test_latest_keeps_the_last_value_processed():
    """reduce((value1, value2) -> value2) over the same records (KStreamReduce#process: the
    later timestamp of the two, so C@3 after A@5 is written at 5)."""
    reduce = TextReduce("latest")
    state = TaskState.empty(task_stores(reduce))
    out = []
    for offset, (key, value, ts) in enumerate(PROCESS_DATA[:3]):
        out += run_task(reduce, state, [Record(key.encode(), value and value.encode(), ts, offset=offset)])
    assert [(e.key, e.value, e.timestamp) for e in out if e.role == OUTPUT] == [
        (b"1", b"A", 5), (b"2", b"B", 1), (b"1", b"C", 5)]
    assert _last_per_key(TextReduce("latest")) == {"1": ("D", 10), "2": ("B", 1), "3": ("F", 9)}


def _windowed(aggregation, piped: list[tuple[str, str, int]]) -> list[tuple]:
    """(key, value, ts) piped one at a time -> (key, window start, text, timestamp) written."""
    state, out = TaskState.empty(task_stores(aggregation)), []
    for offset, (key, value, ts) in enumerate(piped):
        out += run_task(aggregation, state, [Record(key.encode(), value.encode(), ts, offset=offset)])
    return [(json.loads(e.key)["key"], json.loads(e.key)["start"], e.value and e.value.decode(), e.timestamp)
            for e in out if e.role == OUTPUT]


# TimeWindowedKStreamImplTest#processData (TimeWindowedKStreamImplTest.java:484)
WINDOWED_DATA = [("1", "1", 10), ("1", "2", 15), ("1", "3", 500), ("2", "10", 550), ("2", "20", 500), ("2", "30", 1000)]


@pytest.mark.parametrize("emit", ["update", "final"])
def test_windowed_concat(emit):
    """TimeWindowedKStreamImplTest#shouldReduceWindowed (TimeWindowedKStreamImplTest.java:144):
    TimeWindows.ofSizeWithNoGrace(500ms), reduce(MockReducer.STRING_ADDER)."""
    window = WindowedAggregate(WindowSpec("tumbling", 500, 500), "concat", 0, emit, "string", "json", separator="+")
    expected = {"final": [("1", 0, "1+2", 15), ("1", 500, "3", 500), ("2", 500, "10+20", 550)],
                "update": [("1", 0, "1", 10), ("1", 0, "1+2", 15), ("1", 500, "3", 500), ("2", 500, "10", 550),
                           ("2", 500, "10+20", 550), ("2", 1000, "30", 1000)]}
    assert _windowed(window, WINDOWED_DATA) == expected[emit]


def test_session_concat_merges_sessions_before_adding_the_record():
    """KGroupedStreamImplTest#shouldReduceSessionWindows (KGroupedStreamImplTest.java:445):
    SessionWindows.ofInactivityGapWithNoGrace(30ms), reduce(value1 + ":" + value2); C@90 falls
    into the session [70, 100] "A:B" and is appended after it; the last value of each session."""
    sessions = SessionAggregate(WindowSpec("session", 30, 0), "concat", 0, "update", "string", "json", separator=":")
    state, last = TaskState.empty(task_stores(sessions)), {}
    piped = [("1", "A", 10), ("2", "Z", 15), ("1", "B", 30), ("1", "A", 70), ("1", "B", 100), ("1", "C", 90)]
    for offset, (key, value, ts) in enumerate(piped):
        for e in run_task(sessions, state, [Record(key.encode(), value.encode(), ts, offset=offset)]):
            if e.role == OUTPUT:
                window = json.loads(e.key)
                last[window["key"], window["start"], window["end"]] = e.value and (e.value.decode(), e.timestamp)
    assert {k: v for k, v in last.items() if v} == {("1", 10, 30): ("A:B", 30), ("2", 15, 15): ("Z", 15),
                                                     ("1", 70, 100): ("A:B:C", 100)}


def test_sliding_latest():
    """reduce((value1, value2) -> value2) in SlidingWindows.ofTimeDifferenceWithNoGrace(10): C@12
    comes after B@15, so the windows holding both ([5, 15], [6, 16]) end with C; C's right window
    [13, 23] is copied from [6, 16] as it was before C (B); its left window [2, 12] had closed
    (stream time 15, no grace)."""
    window = SlidingWindowAggregate(WindowSpec("sliding", 10, 0), "latest", 0, "update", "string", "json")
    last = {}
    for _, start, value, ts in _windowed(window, [("k", "A", 5), ("k", "B", 15), ("k", "C", 12)]):
        last[start] = (value, ts)
    assert last == {0: ("A", 5), 5: ("C", 15), 6: ("C", 15), 13: ("B", 15)}
