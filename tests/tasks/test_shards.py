"""A task's stores during a batch (kstool.tasks.shards.ShardedStore): a small batch reads
only the shards of the entries it touches from Spark's state, never the whole store (windowed
processors and stream-stream joins through their index stores), and gives the same results and
the same changes as a store held whole in a dict (the oracle). Spark's MapState is stood in for
by a dict with the same methods, counting the calls."""

from __future__ import annotations

import random
from typing import cast

import pyarrow as pa
import pytest

from kstool.contract import owner_suffixes
from kstool.engine.io import packs
from kstool.stores import WINDOW_STORE
from kstool.streams.indexes import OwnedKeys
from kstool.streams.joins.joiners import make_joiner
from kstool.streams.joins.stream_stream import StreamStreamJoin
from kstool.streams.joins.stream_table import StreamTableJoin
from kstool.streams.joins.table_table import TableTableJoin
from kstool.streams.sessions import SessionAggregate
from kstool.streams.task import LEFT, RIGHT, Record, StoreValue, TaskState, run_task, task_stores
from kstool.streams.time_windows import WindowedAggregate
from kstool.streams.windows import WindowSpec
from kstool.tasks import shards
from kstool.tasks.shards import SHARD_ENTRIES, Directory, ShardedStore, decode_shard, encode_shard


class CountingMapState:
    """The MapState methods ShardedStore uses, over a dict of shard id -> (blob,)."""

    def __init__(self):
        self.data: dict[bytes, tuple] = {}
        self.lookups = self.scans = self.writes = 0

    def iterator(self):
        self.scans += 1
        return iter([((k,), v) for k, v in self.data.items()])

    def get_many(self, keys: list[bytes]) -> dict[bytes, tuple | None]:  # PipelinedMapState's
        self.lookups += len(keys)
        return {key: self.data.get(key) for key in keys}

    def write_many(self, changes) -> None:
        for key, value in changes:
            self.writes += 1
            if value is None:
                del self.data[key]
            else:
                self.data[key] = value


def sharded(entries: dict[bytes, StoreValue], suffix: int = 0) -> tuple[CountingMapState, Directory]:
    """A store as Spark's state would hold it after a batch wrote these entries."""
    state, directory = CountingMapState(), Directory(suffix=suffix)
    store = ShardedStore(state, directory, False, state)
    store.update(entries)
    store.write_back()
    state.lookups = state.scans = state.writes = 0
    return state, directory


def store_of(state: CountingMapState, directory: Directory, read_all: bool = False) -> ShardedStore:
    return ShardedStore(state, Directory(*directory.to_list()), read_all, state)


TABLE = {f"k{i}".encode(): StoreValue(f"v{i}".encode(), i) for i in range(10_000)}
BATCH = [Record(b"k7", b"L7", 100, LEFT), Record(b"k8", b"R8", 101, RIGHT), Record(b"new", b"Lnew", 102, LEFT),
         Record(b"k9", None, 103, RIGHT)]


def _run(processor, read_all: bool):
    maps = {name: sharded(TABLE) for name in processor.stores}
    held = TaskState({name: dict(TABLE) for name in processor.stores})
    lazy = TaskState({name: store_of(*maps[name], read_all) for name in processor.stores})
    expected, got = run_task(processor, held, list(BATCH)), run_task(processor, lazy, list(BATCH))
    assert got == expected
    for name, keys in held.changed.items():  # what the batch's end writes back is the same
        assert lazy.changed[name] == keys
        assert {k: lazy.stores[name].get(k) for k in keys} == {k: held.stores[name].get(k) for k in keys}
    return {name: state for name, (state, _) in maps.items()}


@pytest.mark.parametrize("processor", [TableTableJoin("outer", make_joiner("concat", "+")),
                                       StreamTableJoin("left", make_joiner("concat", "+"))])
def test_a_small_batch_looks_up_only_the_shards_of_the_keys_it_touches(processor):
    maps = _run(processor, read_all=False)
    assert sum(m.scans for m in maps.values()) == 0
    assert sum(m.lookups for m in maps.values()) <= 2 * len({r.key for r in BATCH})  # not 10,000 keys' shards


def test_a_large_batch_reads_each_store_once():
    maps = _run(TableTableJoin("inner", make_joiner("concat", "+")), read_all=True)
    assert [m.scans for m in maps.values()] == [1, 1]
    assert sum(m.lookups for m in maps.values()) == 0


def test_iterating_a_store_reads_it_whole_and_keeps_the_batch_changes():
    state, directory = sharded(TABLE)
    store = store_of(state, directory)
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
    (StreamStreamJoin("outer", 300_000, 300_000, 0, make_joiner("concat", "+")), RIGHT),
])
def test_a_small_batch_does_not_read_the_windows_or_join_records_it_does_not_touch(processor, side):
    """Window ends, sessions and join records are found through the index store: 10,000 keys'
    open windows (join records) cost a 5-record batch a few lookups per record, not a read."""
    big = _windowed_state_of(processor, [Record(b"k%d" % i, b"1", 1_000, LEFT, 1.0, 0, i) for i in range(10_000)])
    batch = [Record(b"k%d" % i, b"1", 2_000 + i, side, 1.0, 0, 10_000 + i) for i in range(5)]
    suffixes = owner_suffixes(processor)
    maps = {name: sharded(entries, suffixes.get(name, 0)) for name, entries in big.items()}
    held = TaskState({name: {k: StoreValue(v.value, v.timestamp, v.aux) for k, v in entries.items()}
                      for name, entries in big.items()})
    lazy = TaskState({name: store_of(*maps[name]) for name in task_stores(processor)})
    for name, keys in processor.reads(batch).items():  # as the engine asks before the batch
        cast(ShardedStore, lazy.stores[name]).prefetch(keys)
    assert run_task(processor, lazy, list(batch)) == run_task(processor, held, list(batch))
    assert lazy.changed == held.changed
    assert sum(state.scans for state, _ in maps.values()) == 0
    assert sum(state.lookups for state, _ in maps.values()) <= 10 * len(batch)


def test_a_growing_store_splits_into_shards_of_a_few_thousand_entries_each_one_state_entry():
    entries = {b"key-%d" % i: StoreValue(b"%d" % i, i, "aux" if i % 2 else "") for i in range(50_000)}
    state, directory = sharded(entries)
    assert directory.entries == 50_000
    assert len(state.data) == directory.shards >= 50_000 / SHARD_ENTRIES
    assert max(len(decode_shard(blob)) for (blob,) in state.data.values()) <= 3 * SHARD_ENTRIES
    read_back = store_of(state, directory, read_all=True)
    assert {k: read_back[k] for k in read_back} == entries


def test_a_store_grown_and_shrunk_by_small_batches_keeps_each_entry_where_its_directory_looks(monkeypatch):
    """Batches that each add or delete a few keys of a store they have not read (shards of 16
    entries here, so that it splits often): a batch's growth splits shards it must read first,
    and every entry must end up in the shard its key hashes to, once."""
    monkeypatch.setattr(shards, "SHARD_ENTRIES", 16)
    rng, expected = random.Random(1), {}
    state, directory = sharded({})
    for batch in range(300):
        store = store_of(state, directory)
        for _ in range(rng.randrange(1, 30)):
            key = b"k%d" % rng.randrange(3_000)
            if rng.random() < 0.2 and key in store:
                del store[key]
                del expected[key]
            else:
                store[key] = expected[key] = StoreValue(b"v", batch)
        store.write_back()
        directory = store.directory
    assert directory.shards > 64  # it did split, many times
    assert directory.entries == len(expected) <= directory.shards * 16
    for shard_id, (blob,) in state.data.items():
        shard = int.from_bytes(shard_id, "big")
        assert all(directory.shard_of(key) == shard for key, *_ in decode_shard(blob))
    assert sum(len(decode_shard(blob)) for (blob,) in state.data.values()) == len(expected)
    read_back = store_of(state, directory, read_all=True)
    assert {k: read_back[k] for k in read_back} == expected


def test_a_store_hashed_without_a_suffix_keeps_each_owners_entries_in_one_shard():
    """A join's window store (key ‖ time ‖ seqnum) hashed by record key: after the splits of
    50,000 entries, each record key's entries sit in the shard owner_entries reads, and
    nowhere else; a store hashed by the whole key refuses the question."""
    entries = {WINDOW_STORE.key(b"key-%d" % (i % 5_000), i, i): StoreValue(b"v", i) for i in range(50_000)}
    state, directory = sharded(entries, WINDOW_STORE.suffix)
    assert directory.shards >= 50_000 / SHARD_ENTRIES
    for owner in (b"key-0", b"key-4999", b"key-1234"):
        store = store_of(state, directory)
        shard, found = store.owner_entries(owner)
        owned = {k for k in entries if k[:-WINDOW_STORE.suffix] == owner}
        assert len(owned) == 10 and owned <= set(found)
        assert state.lookups == 1  # one shard read
        state.lookups = 0
    with pytest.raises(RuntimeError):
        store_of(*sharded(entries)).owner_entries(b"key-0")


def test_a_batch_that_changes_ten_keys_of_a_large_store_rewrites_at_most_ten_shards():
    entries = {b"key-%d" % i: StoreValue(b"x", i) for i in range(100_000)}
    state, directory = sharded(entries)
    store = store_of(state, directory)
    touched = [b"key-%d" % i for i in random.Random(7).sample(range(100_000), 10)]
    store.prefetch(touched)
    for key in touched[:5]:
        store[key] = StoreValue(b"changed", 1)
    for key in touched[5:]:
        del store[key]
    store.write_back()
    assert state.lookups <= 10 and state.writes <= 10 and state.scans == 0
    after = store_of(state, store.directory, read_all=True)
    expected = {**{k: v for k, v in entries.items() if k not in touched[5:]},
                **{k: StoreValue(b"changed", 1) for k in touched[:5]}}
    assert len(after) == len(expected) and {k: after[k] for k in after} == expected


def test_a_store_emptied_leaves_no_shard_behind():
    entries = {b"k%d" % i: StoreValue(None if i % 3 else b"v", i) for i in range(9_000)}
    state, directory = sharded(entries)
    store = store_of(state, directory, read_all=True)
    for key in list(store):
        del store[key]
    store.write_back()
    assert state.data == {} and store.directory.entries == 0


def test_a_shard_round_trips_values_timestamps_and_bookkeeping():
    entries = {b"": StoreValue(None, 0), b"\x00k": StoreValue(b"", -5, "{\"a\": 1}"), b"k": StoreValue(b"v", 2**62)}
    assert {k: StoreValue(v, t, a) for k, v, t, a in decode_shard(encode_shard(entries))} == entries


def test_a_shard_written_uncompressed_reads_and_is_rewritten_compressed(monkeypatch):
    """Apps whose shards were written before they were compressed go on: a batch reads them as
    they are, and the shards it changes are written compressed (under half their size here)."""
    entries = {WINDOW_STORE.key(b"k%d" % i, 1_700_000_000_000 + i, i): StoreValue(b"v%d" % i, 1_700_000_000_000 + i)
               for i in range(SHARD_ENTRIES)}
    with monkeypatch.context() as before:  # as kstool wrote a shard before
        before.setattr(packs, "COMPRESSED", pa.ipc.IpcWriteOptions())
        plain = encode_shard(entries)
    state, directory = CountingMapState(), Directory(entries=len(entries))
    state.data[shards.SHARD_ID.pack(0)] = (plain,)
    store = store_of(state, directory)
    assert dict(store) == entries
    first = next(iter(entries))
    store[first] = StoreValue(b"changed", 1)
    store.write_back()
    (blob,) = state.data[shards.SHARD_ID.pack(0)]
    assert 2 * len(blob) < len(plain)
    assert {k: StoreValue(v, t, a) for k, v, t, a in decode_shard(blob)} == {**entries, first: StoreValue(b"changed", 1)}


def test_new_entries_put_at_once_land_where_their_keys_hash_and_a_held_key_puts_none(monkeypatch):
    """TaskState.put_all_new (a stream-stream join's batch) against stores held whole: the
    sharded store grows for the entries before they go in (shards of 16 here), each in the
    shard its key hashes to; when one store already holds a key, neither store changes."""
    monkeypatch.setattr(shards, "SHARD_ENTRIES", 16)
    held_entry = {b"held": StoreValue(b"x", 1)}
    maps = {"l": sharded(held_entry), "r": sharded({})}
    lazy = TaskState({name: store_of(*maps[name]) for name in maps})
    whole = TaskState({"l": dict(held_entry), "r": {}})
    new = [(b"k%d" % i, StoreValue(b"v%d" % i, i)) for i in range(500)]
    for state in (lazy, whole):
        assert not state.put_all_new({"r": new, "l": [(b"held", StoreValue(b"y", 2))]})
        assert len(state.stores["r"]) == 0 and state.stores["l"][b"held"] == StoreValue(b"x", 1)
        assert state.put_all_new({"l": new[:100], "r": new})
    added = {"l": {key: False for key, _ in new[:100]}, "r": {key: False for key, _ in new}}  # none existed before
    assert lazy.changed == whole.changed == added
    for name in ("l", "r"):
        assert {k: lazy.stores[name][k] for k in lazy.stores[name]} == whole.stores[name]
        store = cast(ShardedStore, lazy.stores[name])
        store.write_back()
        state, directory = maps[name][0], store.directory
        assert directory.entries == len(whole.stores[name]) <= directory.shards * 16
        for shard_id, (blob,) in state.data.items():
            assert all(directory.shard_of(key) == int.from_bytes(shard_id, "big") for key, *_ in decode_shard(blob))


def test_many_owners_entries_are_found_with_their_shards_read_at_once():
    """OwnedKeys.get_many over a store hashed by record key: each owner's entries, as get()
    finds them in the store held whole, from one read of the shards they are in."""
    entries = {WINDOW_STORE.key(b"key-%d" % (i % 5_000), i, i): StoreValue(b"v", i) for i in range(50_000)}
    state, directory = sharded(entries, WINDOW_STORE.suffix)
    owners = [b"key-%d" % i for i in range(0, 5_000, 7)] + [b"absent", b"key-3", b"key-7"]
    calls = []
    get_many = state.get_many
    state.get_many = lambda keys: calls.append(len(keys)) or get_many(keys)  # type: ignore[method-assign]
    found = OwnedKeys(store_of(state, directory)).get_many(owners)
    whole = OwnedKeys(entries)
    assert found == [whole.get(owner) for owner in owners]
    assert sum(len(keys) for keys in found) == 10 * (len(owners) - 1)  # 10 entries each, none for "absent"
    assert len(calls) == 1 and calls[0] <= directory.shards


@pytest.mark.parametrize("how", ["inner", "outer"])
def test_a_stream_stream_join_over_sharded_stores_that_split_within_its_batches_gives_what_whole_stores_give(
        monkeypatch, how):
    """Three batches of a join whose stores grow from nothing to ~1,000 entries a side, in
    shards of 16: each batch's records find their partners (shards read under the directory
    before the batch's growth), the store grows for the batch's records and they go in at once,
    and what comes out and what the stores hold is what stores held whole in dicts give."""
    monkeypatch.setattr(shards, "SHARD_ENTRIES", 16)
    rng = random.Random(5)

    def record(batch: int, i: int) -> Record:  # the sides in turn, 900 keys, times within 900 ms of the batch's second
        side = i % 2
        return Record(b"k%d" % rng.randrange(900), b"LR"[side:side + 1] + b"%d" % i,
                      1_000 * batch + rng.randrange(900), side, None, 0, 700 * batch + i)

    batches = [[record(n, i) for i in range(700)] for n in range(3)]
    join = StreamStreamJoin(how, 2_000, 1_000, 0, make_joiner("concat"))
    maps = {name: sharded({}, owner_suffixes(join).get(name, 0)) for name in task_stores(join)}
    whole = TaskState.empty(task_stores(join))
    stream_time, sequence = whole.stream_time, 0
    for batch in batches:
        lazy = TaskState({name: store_of(*maps[name]) for name in task_stores(join)}, stream_time, sequence)
        assert run_task(join, lazy, list(batch)) == run_task(join, whole, list(batch))
        for name, store in lazy.stores.items():
            assert {k: store[k] for k in store} == whole.stores[name]
            cast(ShardedStore, store).write_back()
            maps[name] = (maps[name][0], cast(ShardedStore, store).directory)
        stream_time, sequence = lazy.stream_time, lazy.sequence
    assert maps["join-left"][1].shards > 64  # the stores did split
