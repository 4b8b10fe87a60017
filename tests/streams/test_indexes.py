"""The processors' persisted indexes (kstool.streams.indexes) against plain models: what a
TimeIndex takes is exactly the added entries before the time, in (time, key) order, across
batches (each batch a fresh index over the same store, as each micro-batch is), including jumps
in time that make it read the index whole; a KeyIndex keeps each key's set."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kstool.stores import WINDOW_STORE
from kstool.streams.indexes import KeyIndex, OwnedKeys, TimeIndex
from kstool.streams.joins.joiners import make_joiner
from kstool.streams.joins.stream_stream import StreamStreamJoin
from kstool.streams.sessions import SessionAggregate
from kstool.streams.task import NO_TIME, Record, StoreValue, TaskState, run_task, task_stores
from kstool.streams.time_windows import WindowedAggregate
from kstool.streams.windows import WindowSpec

operations = st.lists(st.lists(st.one_of(st.tuples(st.just("add"), st.integers(-5, 50)),
                                         st.tuples(st.just("add"), st.integers(0, 5_000)),
                                         # add_many: a batch's stored records at once
                                         st.tuples(st.just("add"), st.lists(st.integers(-5, 60), max_size=9)),
                                         st.tuples(st.just("take"), st.integers(-5, 5_100))),
                               max_size=12), max_size=8)


@settings(max_examples=300)
@given(operations, st.integers(1, 7))
def test_time_index_takes_what_a_sorted_list_would(batches, bucket_ms):
    state = TaskState.empty(["index"])
    model: list[tuple[int, bytes]] = []
    newest, number = NO_TIME, 0
    for batch in batches:
        index = TimeIndex(state, "index", b"T", bucket_ms)
        assert index.newest == newest
        for op, time in batch:
            if op == "add" and isinstance(time, list):
                keys = [b"k%d" % (number + 1 + i) for i in range(len(time))]
                number += len(time)
                index.add_many(np.array(time, np.int64), keys)
                model += zip(time, keys)
                newest = max([newest, *time])
            elif op == "add":
                number += 1
                key = b"k%d" % number
                index.add(time, key)
                model.append((time, key))
                newest = max(newest, time)
            else:
                expected = sorted(e for e in model if e[0] < time)
                model = [e for e in model if e[0] >= time]
                assert index.take(time) == expected
        index.save()
    last = TimeIndex(state, "index", b"T", bucket_ms)
    assert last.take(10**9) == sorted(model)


def test_a_jump_in_time_reads_the_index_whole_instead_of_visiting_every_bucket():
    state = TaskState.empty(["index"])
    index = TimeIndex(state, "index", b"T", 1)
    index.add(5, b"a")
    index.add(10**12, b"b")
    index.save()
    looked_up = []
    get = state.get
    state.get = lambda store, key: looked_up.append(key) or get(store, key)  # type: ignore[method-assign]
    index = TimeIndex(state, "index", b"T", 1)
    assert index.take(10**12 + 1) == [(5, b"a"), (10**12, b"b")]
    assert len(looked_up) < 20  # not 10**12 bucket lookups


def test_key_index_keeps_each_keys_store_keys_across_batches():
    state = TaskState.empty(["index"])
    index = KeyIndex(state, "index", b"K")
    index.add(b"x", b"x@1")
    index.add(b"x", b"x@2")
    index.add(b"y", b"y@1")
    index.save()
    index = KeyIndex(state, "index", b"K")
    assert index.get(b"x") == {b"x@1", b"x@2"} and index.get(b"z") == set()
    index.discard(b"y", b"y@1")
    index.discard(b"x", b"x@1")
    index.save()
    assert KeyIndex(state, "index", b"K").get(b"x") == {b"x@2"}
    assert state.stores["index"] == {b"K" + b"x": state.stores["index"][b"Kx"]}  # y's entry is gone


def test_owned_keys_are_found_in_the_store_itself():
    """A join's window store keys (key ‖ time ‖ seqnum) grouped by record key; add and discard
    follow the batch's own puts and deletes; nothing is written anywhere."""
    store = {WINDOW_STORE.key(b"x", 1, 1): StoreValue(b"1", 1), WINDOW_STORE.key(b"x", 2, 2): StoreValue(b"2", 2),
             WINDOW_STORE.key(b"xy", 1, 3): StoreValue(b"3", 1)}
    before = dict(store)
    owned = OwnedKeys(store)
    assert owned.get(b"x") == {WINDOW_STORE.key(b"x", 1, 1), WINDOW_STORE.key(b"x", 2, 2)}
    assert owned.get(b"xy") == {WINDOW_STORE.key(b"xy", 1, 3)} and owned.get(b"z") == set()
    owned.add(b"z", WINDOW_STORE.key(b"z", 5, 4))
    owned.discard(b"x", WINDOW_STORE.key(b"x", 1, 1))
    assert owned.get(b"z") == {WINDOW_STORE.key(b"z", 5, 4)} and owned.get(b"x") == {WINDOW_STORE.key(b"x", 2, 2)}
    owned.save()
    assert store == before


@pytest.mark.parametrize("make", [
    lambda: WindowedAggregate(WindowSpec.parse("hopping:10ms,5ms"), "count", 2, "final"),
    lambda: SessionAggregate(WindowSpec.parse("session:5ms"), "count", 1, "update"),
    lambda: StreamStreamJoin("outer", 4, 4, 1, make_joiner("concat")),
])
def test_stores_without_their_index_are_indexed_once_and_give_the_same_results(make):
    """A checkpoint written before kstool kept indexes (or a restored store) has no index entries: the first
    batch indexes the stores it finds, and results go on as if the index had always been there."""
    first = [Record(b"k%d" % (i % 3), b"v%d" % i, 3 * i, i % 2, 1.0, 0, i) for i in range(20)]
    second = [Record(b"k%d" % (i % 3), b"v%d" % i, 3 * i - 20, i % 2, 1.0, 0, i) for i in range(20, 40)]
    indexed, unindexed = TaskState.empty(task_stores(make())), TaskState.empty(task_stores(make()))
    for state in (indexed, unindexed):
        run_task(make(), state, list(first))
    index_store = make().indexes[0]
    assert unindexed.stores[index_store]
    unindexed.stores[index_store].clear()
    assert run_task(make(), unindexed, list(second)) == run_task(make(), indexed, list(second))
    # the stores themselves (the indexes may be chunked differently)
    assert {n: e for n, e in unindexed.stores.items() if n != index_store} == \
        {n: e for n, e in indexed.stores.items() if n != index_store}
