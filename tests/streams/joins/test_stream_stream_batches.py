"""The stream-stream join's batch at once (kstool.streams.joins.stream_stream_batches) against `process()`
record by record, the oracle (itself checked against Kafka Streams' rules in
test_processors_against_oracles.py): the same records out in the same order, the same stores,
stream time and seqnums, batch after batch."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings, strategies as st

from kstool.contract import OUTPUT
from kstool.streams.joins import stream_stream_batches
from kstool.streams.joins.joiners import HOWS, make_joiner
from kstool.streams.joins.stream_stream import StreamStreamJoin
from kstool.streams.task import LEFT, RIGHT, Record, RecordByRecord, TaskState, processing_order, run_task, task_stores


class _RecordByRecord(StreamStreamJoin):
    process_batch = RecordByRecord.process_batch  # the oracle: process() per record


def _observable(out, state: TaskState) -> tuple:
    """What a batch leaves that anyone sees: its records in order, the join's stores, stream
    time and the next seqnum."""
    stores = {name: {k: (v.value, v.timestamp) for k, v in state.stores[name].items()}
              for name in ("join-left", "join-right", "join-unmatched")}
    return [(e.role, e.key, e.value, e.timestamp) for e in out], stores, state.stream_time, state.sequence


def _both(how, before, after, grace, bucket, batches) -> list[tuple]:
    """Each batch through both paths; asserts they agree; returns the fast path's observations."""
    fast = StreamStreamJoin(how, before, after, grace, make_joiner("concat"), bucket)
    slow = _RecordByRecord(how, before, after, grace, make_joiner("concat"), bucket)
    fast_state, slow_state = TaskState.empty(task_stores(fast)), TaskState.empty(task_stores(slow))
    seen = []
    for batch in batches:
        seen.append(_observable(run_task(fast, fast_state, batch), fast_state))
        assert seen[-1] == _observable(run_task(slow, slow_state, batch), slow_state)
    return seen


inputs = st.lists(st.tuples(st.sampled_from([LEFT, RIGHT]), st.sampled_from([0, 1]),  # side, partition
                            st.sampled_from([b"a", b"b", b"c", None]), st.integers(0, 50), st.booleans()),
                  max_size=60)  # the bool: a null value


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(HOWS), inputs, st.integers(0, 6), st.integers(0, 6), st.integers(0, 4), st.integers(1, 12),
       st.sampled_from([1, 3, 1000]))
# right a@8 expires when right a@10 comes (retention 2): left a@9, later in the order, no longer finds it
@example(how="inner", rows=[(RIGHT, 0, b"a", 8, False), (RIGHT, 0, b"a", 10, False), (LEFT, 0, b"b", 11, False),
                           (LEFT, 0, b"a", 9, False)], before=2, after=0, grace=0, batch=12, bucket=1000)
# two left records alike in key and time: the right one joins them in seqnum order
@example(how="inner", rows=[(LEFT, 0, b"a", 5, False), (LEFT, 1, b"a", 5, False), (RIGHT, 0, b"a", 6, False)],
         before=1, after=1, grace=0, batch=12, bucket=1000)
# with no lookback before and no grace, left a@8 is late once a@10 is stored, yet its window is open
# at stream time 10: it waits unmatched under a seqnum of its own, and a@11 takes the next
@example(how="left", rows=[(LEFT, 0, b"a", 10, False), (LEFT, 0, b"a", 8, False), (LEFT, 0, b"a", 11, False),
                           (RIGHT, 0, None, 12, False)], before=0, after=2, grace=0, batch=12, bucket=1000)
def test_join_at_once_equals_record_by_record(how, rows, before, after, grace, batch, bucket):
    """Inner, left and outer joins over out-of-order records in two partitions per side, late
    ones, records that expire within their batch, duplicates at equal key and time, null keys
    and values; batches of 1-12."""
    if before + after + grace == 0:
        grace = 1  # refused by the topology: the stores would hold nothing
    records = [Record(key, None if null else f"{'LR'[side]}{i}".encode(), ts, side, None, partition, i)
               for i, (side, partition, key, ts, null) in enumerate(rows)]
    order = list(processing_order(records))
    _both(how, before, after, grace, bucket, [order[i:i + batch] for i in range(0, len(order), batch)])


@pytest.mark.parametrize("how", HOWS)
def test_a_batch_is_done_at_once(monkeypatch, how):
    """The batch path is taken, for each kind (else the test above compares the oracle with itself)."""
    taken = []
    original = stream_stream_batches.join_batch
    monkeypatch.setattr("kstool.streams.joins.stream_stream.join_batch",
                        lambda *args: taken.append(original(*args)) or taken[-1])
    batch = [Record(b"k", b"L", 10, LEFT, offset=0), Record(b"k", b"R", 12, RIGHT, offset=0)]
    seen = _both(how, 5, 5, 0, 1000, [batch])
    assert taken == [True]
    assert [e for e in seen[0][0] if e[0] == OUTPUT] == [(OUTPUT, b"k", b"L,R", 12)]


def test_seqnums_met_after_a_restore_go_record_by_record():
    """A restore starts seqnums at 0 again (TaskProcessor.handleInitialState) while the stores
    hold the restored ones: a new record at the same key and time takes the next free seqnum,
    as KStreamKStreamJoin's store keeps duplicates. The batch path leaves that to the record path."""
    first = [Record(b"k", b"L1", 10, LEFT, offset=0), Record(b"k", b"L2", 10, LEFT, offset=1)]
    fast = StreamStreamJoin("inner", 5, 5, 0, make_joiner("concat"))
    state = TaskState.empty(task_stores(fast))
    run_task(fast, state, first)
    state.sequence = 0
    assert not stream_stream_batches.join_batch(fast, [Record(b"k", b"L3", 10, LEFT, offset=2)], state)
    out = run_task(fast, state, [Record(b"k", b"L3", 10, LEFT, offset=2), Record(b"k", b"R", 11, RIGHT, offset=0)])
    assert sorted(e.value for e in out if e.role == OUTPUT) == [b"L1,R", b"L2,R", b"L3,R"]
    assert len(state.stores["join-left"]) == 3
