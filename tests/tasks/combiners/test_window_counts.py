"""The source's window combiner (kstool.tasks.combiners.window_counts.WindowCombiner) with the task's
combined path (WindowedAggregate._process_combined) against the record-by-record processor,
the oracle: random keys and out-of-order times (late records included), several micro-batches,
each read as several ranges (the source's tasks) in several Arrow batches. No Kafka or Spark:
the engine runs the same code (tests/topologies/test_windowed_aggregate.py runs it through Spark)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import example, given, settings, strategies as st

from kstool.contract import LATE
from kstool.engine.io.combining import combined
from kstool.engine.io.range_reader import OffsetRange
from kstool.streams.task import Record, TaskState, run_task, task_stores
from kstool.streams.time_windows import WindowedAggregate
from kstool.streams.windows import WindowSpec
from kstool.tasks.combiners import window_spec
from kstool.tasks.combiners.window_counts import WindowCombiner
from tests.helpers import source_rows

# (key, value, timestamp): no key, no value or no timestamp make a record Spark drops
inputs = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", None]), st.sampled_from([b"1", None]),
                            st.one_of(st.integers(0, 80), st.just(None), st.just(-5))), max_size=60)
cuts = st.lists(st.integers(1, 15), min_size=1, max_size=6)  # batch, range and Arrow batch sizes, cycled
# which records have headers: none, every one, or every other (the Nth: its offset's)
header_steps = st.sampled_from([0, 1, 2])


def _headers(offset: int, every: int):
    return [{"key": "n", "value": str(offset).encode()}] if every and offset % every == 0 else None


def _sizes(total: int, sizes: list[int]):
    """Consecutive [start, end) pieces of range(total), sized by `sizes` in turn."""
    start, i = 0, 0
    while start < total:
        end = min(total, start + sizes[i % len(sizes)])
        yield start, end
        start, i = end, i + 1


def _valid(key, value, ts) -> bool:
    return key is not None and value is not None and ts is not None and ts >= 0


def _combined_records(combiner: WindowCombiner, rows, first: int, last: int, range_sizes, arrow_sizes, every: int):
    """The task's input for offsets [first, last) as the engine hands it over: each range combined by
    the source, the rows Spark keeps (a value or a partial; a key or a partial; valid) as Records."""
    out = []
    for start, end in _sizes(last - first, range_sizes):
        start, end = start + first, end + first
        batches = [source_rows(*zip(*[(k, v) for k, v, _ in rows[a + start:b + start]]),
                               offsets=list(range(a + start, b + start)),
                               stamps_ms=[t for _, _, t in rows[a + start:b + start]],
                               headers=[_headers(o, every) for o in range(a + start, b + start)])
                   for a, b in _sizes(end - start, arrow_sizes)]
        for batch in combined(combiner, OffsetRange("t", 0, start, end), iter(batches)):
            for row in batch.to_pylist():
                partial = row["partial"]
                ts = None if row["timestamp"] is None else int(row["timestamp"].timestamp() * 1000)
                if partial is None and not _valid(row["key"], row["value"], ts):
                    continue
                out.append(Record(row["key"], row["value"], ts, offset=row["offset"], partial=None if partial is None else
                                  (partial["window"], partial["count"], partial["latest"], partial["range"]),
                                  headers=row["headers"]))
    return out


def _outcome(processor_of, batches):
    state, out = TaskState.empty(task_stores(processor_of())), []
    for records in batches:
        out += run_task(processor_of(), state, records)
    written = [(e.role, e.key, e.value, e.timestamp, e.headers) for e in out if e.role != LATE]
    late = sum(e.role == LATE for e in out)
    store = {k: (v.value, v.timestamp) for k, v in state.stores["aggregate"].items()}
    return written, late, store, state.stream_time


@settings(max_examples=300)
# a@12 closes [0,10) and a@30 [10,20) in one range: each final record has its closer's headers
@example(rows=[(b"a", b"1", 5), (b"a", b"1", 12), (b"a", b"1", 30)], window="tumbling:10ms", grace=0, emit="final",
         batch_sizes=[15], range_sizes=[15], arrow_sizes=[15], every=1)
@given(inputs, st.sampled_from(["tumbling:10ms", "hopping:10ms,5ms", "hopping:9ms,3ms", "tumbling:1ms"]),
       st.integers(0, 8), st.sampled_from(["update", "final"]), cuts, cuts, cuts, header_steps)
def test_combined_windows_write_what_the_records_one_by_one_write(rows, window, grace, emit, batch_sizes,
                                                                   range_sizes, arrow_sizes, every):
    """With the same headers: a window's update those of its last record, its final record
    those of the record that closed it."""
    _assert_combined_as_one_by_one(rows, window, grace, emit, batch_sizes, range_sizes, arrow_sizes, every)


# times far apart: a range spans millions of windows (the combiner sorts its cells instead of counting them in an array)
far_inputs = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]), st.just(b"1"),
                                st.one_of(st.integers(0, 80), st.integers(0, 80).map(lambda t: t + 10**7))), max_size=40)


@settings(max_examples=100)
@given(far_inputs, st.sampled_from(["hopping:10ms,5ms", "tumbling:1ms"]), st.integers(0, 8),
       st.sampled_from(["update", "final"]), cuts, cuts, cuts, header_steps)
def test_combined_windows_far_apart_in_time_write_what_the_records_one_by_one_write(
        rows, window, grace, emit, batch_sizes, range_sizes, arrow_sizes, every):
    _assert_combined_as_one_by_one(rows, window, grace, emit, batch_sizes, range_sizes, arrow_sizes, every)


def _assert_combined_as_one_by_one(rows, window, grace, emit, batch_sizes, range_sizes, arrow_sizes, every):
    spec = WindowSpec.parse(window)
    combiner = WindowCombiner(spec.size, spec.advance, grace)

    def processor():
        return WindowedAggregate(spec, "count", grace, emit)

    oracle, ours = [], []
    for first, last in _sizes(len(rows), batch_sizes):
        oracle.append([Record(k, v, t, offset=i, headers=_headers(i, every)) for i, (k, v, t) in enumerate(rows)
                       if first <= i < last and _valid(k, v, t)])
        ours.append(_combined_records(combiner, rows, first, last, range_sizes, arrow_sizes, every))
    assert _outcome(processor, ours) == _outcome(processor, oracle)


def test_a_range_of_ordered_times_crosses_as_few_rows():
    """Ordered times (as producers stamp them): one row per key and window, and one for the
    range's newest time, instead of a row per record."""
    spec = WindowSpec.parse("tumbling:1s")
    rng = random.Random(3)
    keys = [f"k{rng.randrange(50)}".encode() for _ in range(20_000)]
    stamps = [1_700_000_000_000 + i // 4 for i in range(20_000)]  # 5 s of records
    batch = source_rows(keys, keys, stamps_ms=stamps)
    rows = pa.Table.from_batches(list(combined(WindowCombiner(spec.size, spec.advance, 0), OffsetRange("t", 0, 0, 20_000),
                                               iter([batch]))))
    windows = {(k, t // 1000) for k, t in zip(keys, stamps)}
    assert rows.num_rows == len(windows) + 1  # partials, and the newest time
    assert sum(p["count"] for p in rows.column("partial").to_pylist()) == 20_000


@pytest.mark.parametrize("args, combiner", [
    (("tumbling:1s", 0, "count", "key", "record", "text"), "WindowCombiner"),
    (("hopping:5s,1s", 100, "count", "key", "record", "long"), "WindowCombiner"),
    (("session:1s", 0, "count", "key", "record", "text"), "RecordPacker"),  # a record merges sessions: one by one
    (("tumbling:1s", 0, "sum", "key", "record", "text"), None),  # doubles add up in record order
    (("tumbling:1s", 0, "count", "field:user", "record", "json"), None),  # re-keyed: tasks are not partitions
    (("tumbling:1s", 0, "count", "key", "field:ts", "json"), None),  # event time Spark reads from the value
])
def test_which_windowed_aggregations_combine(args, combiner):
    window, *rest = args
    spec = window_spec(WindowSpec.parse(window), *rest)
    assert (spec and spec.target.rpartition(":")[2]) == combiner
    assert spec is None or spec.counts_late == (combiner == "WindowCombiner")  # packs hold the records
    # so a batch of packs takes no more records than one of plain rows (kstool.engine.query.options)
    assert spec is None or spec.reduces == (combiner == "WindowCombiner")
