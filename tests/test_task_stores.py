"""A task's stores during a batch (kstool.topologies.tasks.MapStateStore): a small batch reads
only the entries it touches from Spark's state, never the whole store (windowed processors and
stream-stream joins through their index stores), and gives the same results and the same
write-back as a store held whole. Spark's MapState is stood in for by a
dict with the same methods, counting the calls."""

from __future__ import annotations

from typing import cast

import pytest

from kstool.streams.aggregate import SessionAggregate, WindowedAggregate
from kstool.streams.joins import StreamStreamJoin, StreamTableJoin, TableTableJoin, make_joiner
from kstool.streams.task import LEFT, RIGHT, Record, StoreValue, TaskState, run_task, task_stores
from kstool.streams.windows import WindowSpec
from kstool.topologies.map_state import MapStateStore


class CountingMapState:
    """The MapState methods MapStateStore uses, over a dict of (key,) -> (value, ts, aux)."""

    def __init__(self, entries: dict[bytes, StoreValue]):
        self.data = {(k,): (v.value, v.timestamp, v.aux) for k, v in entries.items()}
        self.lookups = self.scans = 0

    def exists(self) -> bool:
        return bool(self.data)

    def getValue(self, key: tuple) -> tuple | None:
        self.lookups += 1
        return self.data.get(key)

    def iterator(self):
        self.scans += 1
        return iter(list(self.data.items()))

    def get_many(self, keys: list[bytes]) -> dict[bytes, tuple | None]:  # PipelinedMapState's
        self.lookups += len(keys)
        return {key: self.data.get((key,)) for key in keys}


TABLE = {f"k{i}".encode(): StoreValue(f"v{i}".encode(), i) for i in range(10_000)}
BATCH = [Record(b"k7", b"L7", 100, LEFT), Record(b"k8", b"R8", 101, RIGHT), Record(b"new", b"Lnew", 102, LEFT),
         Record(b"k9", None, 103, RIGHT)]


def _run(processor, read_all: bool):
    maps = {name: CountingMapState(TABLE) for name in processor.stores}
    held = TaskState({name: dict(TABLE) for name in processor.stores})
    lazy = TaskState({name: MapStateStore(maps[name], read_all, maps[name]) for name in processor.stores})
    expected, got = run_task(processor, held, list(BATCH)), run_task(processor, lazy, list(BATCH))
    assert got == expected
    for name, keys in held.changed.items():  # what the batch's end writes back is the same
        assert lazy.changed[name] == keys
        assert {k: lazy.stores[name].get(k) for k in keys} == {k: held.stores[name].get(k) for k in keys}
    return maps


@pytest.mark.parametrize("processor", [TableTableJoin("outer", make_joiner("concat", "+")),
                                       StreamTableJoin("left", make_joiner("concat", "+"))])
def test_a_small_batch_looks_up_only_the_keys_it_touches(processor):
    maps = _run(processor, read_all=False)
    assert sum(m.scans for m in maps.values()) == 0
    assert sum(m.lookups for m in maps.values()) <= 2 * len({r.key for r in BATCH})  # not 10,000


def test_a_large_batch_reads_each_store_once():
    maps = _run(TableTableJoin("inner", make_joiner("concat", "+")), read_all=True)
    assert [m.scans for m in maps.values()] == [1, 1]
    assert sum(m.lookups for m in maps.values()) == 0


def test_iterating_a_store_reads_it_whole_and_keeps_the_batch_changes():
    state = CountingMapState(TABLE)
    store = MapStateStore(state, False, state)
    store[b"k1"] = StoreValue(b"changed", 5)
    del store[b"k2"]
    store[b"added"] = StoreValue(b"x", 6)
    keys = set(store)
    assert state.scans == 1 and len(keys) == len(TABLE)  # k2 gone, "added" in
    assert b"k2" not in keys and b"added" in keys and store[b"k1"].value == b"changed"


def _windowed_state_of(processor, records: list[Record]) -> dict[str, dict[bytes, StoreValue]]:
    state = TaskState.empty(task_stores(processor))
    run_task(processor, state, records)
    # as Spark keeps them: live accumulators encoded (two runs must not share one)
    return {name: {k: StoreValue(v.value, v.timestamp, v.stored_aux()) for k, v in entries.items()}
            for name, entries in state.stores.items()}


@pytest.mark.parametrize("processor, side", [
    (WindowedAggregate(WindowSpec.parse("tumbling:1m"), "count", 0, "update"), LEFT),
    (WindowedAggregate(WindowSpec.parse("hopping:1m,10s"), "count", 0, "final"), LEFT),
    (SessionAggregate(WindowSpec.parse("session:10m"), "count", 0, "update"), LEFT),
    (StreamStreamJoin("outer", 300_000, 0, make_joiner("concat", "+")), RIGHT),
])
def test_a_small_batch_does_not_read_the_windows_or_join_records_it_does_not_touch(processor, side):
    """Window ends, sessions and join records are found through the index store: 10,000 keys'
    open windows (join records) cost a 5-record batch a few lookups per record, not a read."""
    big = _windowed_state_of(processor, [Record(b"k%d" % i, b"1", 1_000, LEFT, 1.0, 0, i) for i in range(10_000)])
    batch = [Record(b"k%d" % i, b"1", 2_000 + i, side, 1.0, 0, 10_000 + i) for i in range(5)]
    maps = {name: CountingMapState(entries) for name, entries in big.items()}
    held = TaskState({name: {k: StoreValue(v.value, v.timestamp, v.aux) for k, v in entries.items()}
                      for name, entries in big.items()})
    lazy = TaskState({name: MapStateStore(maps[name], False, maps[name]) for name in task_stores(processor)})
    for name, keys in processor.reads(batch).items():  # as the engine asks before the batch
        cast(MapStateStore, lazy.stores[name]).prefetch(keys)
    assert run_task(processor, lazy, list(batch)) == run_task(processor, held, list(batch))
    assert lazy.changed == held.changed
    assert sum(m.scans for m in maps.values()) == 0
    assert sum(m.lookups for m in maps.values()) <= 10 * len(batch)
