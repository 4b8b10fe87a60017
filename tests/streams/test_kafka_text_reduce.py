"""Text aggregates (`aggregate --agg concat|latest`) replayed from apache/kafka's own
KGroupedStreamImplTest (streams/src/test/java/org/apache/kafka/streams/kstream/internals/,
trunk as of 2024-10): its processData records through kstool's TextReduce one at a time, as
TopologyTestDriver processes them."""

from __future__ import annotations

from kstool.contract import OUTPUT
from kstool.streams.reduce import TextReduce
from kstool.streams.task import Record, TaskState, run_task, task_stores

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
