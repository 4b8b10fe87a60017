"""A task's store as few large entries in Spark's state: shards of a few thousand store entries.

Every PySpark state call costs 30-70 µs however little it carries (pickling, the state server's
protobuf message, the JVM's conversion, RocksDB), so a store kept as one state entry per key
spent most of a large batch on calls. Here a store's entries are grouped into shards by a
hash of their key, and a shard is one state entry: a compressed Arrow IPC stream (key,
value, timestamp, aux; kstool.engine.io.packs.ipc) under its 4-byte shard number. A batch reads
and rewrites the shards it touches, so a large batch makes tens of state calls and a 10-record
batch touches at most about ten shards, however large the store.

Shards follow linear hashing: shard numbers are the low bits of the key's CRC-32, `level` of
them, except that shards below `split` have already been split by the next bit. When the
store holds more than SHARD_ENTRIES per shard on average, the shard at `split` splits in two
(its entries that the next bit moves go to shard `split + 2^level`): the store grows a shard
at a time, and no key ever has to be looked for in two places. The directory (level, split,
entries, suffix) is kept with the task's metadata, not in the store.

A store may hash its keys without their last `suffix` bytes: a stream-stream join's window
stores (key ‖ time ‖ seqnum) hash the record key only, so that a record key's entries share
a shard, and the join finds them by reading that shard (`owner_entries`) instead of keeping an
index entry per record key.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import pyarrow as pa

from kstool.engine import ipc
from kstool.streams.task import StoreValue
from kstool.tasks.map_state import BulkState, PipelinedMapState

# a shard this size encodes in ~4 ms and decodes in well under 1 ms
SHARD_ENTRIES = 4096
SHARD_ID = struct.Struct(">I")
SHARD_SCHEMA = pa.schema([pa.field("key", pa.binary(), nullable=False), ("value", pa.binary()),
                          pa.field("timestamp", pa.int64(), nullable=False), pa.field("aux", pa.string(), nullable=False)])


@dataclass
class Directory:
    level: int = 0
    split: int = 0
    entries: int = 0
    suffix: int = 0  # bytes at the end of a store key that its hash leaves out

    @property
    def shards(self) -> int:
        return (1 << self.level) + self.split

    def shard_of(self, key: bytes) -> int:
        return self._shard(zlib.crc32(key[:-self.suffix] if self.suffix else key))

    def owner_shard(self, owner: bytes) -> int:
        """The shard of the store keys that are `owner` and then `suffix` bytes."""
        return self._shard(zlib.crc32(owner))

    def _shard(self, hashed: int) -> int:
        low = (1 << self.level) - 1
        shard = hashed & low
        return hashed & (2 * low + 1) if shard < self.split else shard

    def to_list(self) -> list[int]:
        return [self.level, self.split, self.entries] + ([self.suffix] if self.suffix else [])


def encode_shard(entries: dict[bytes, StoreValue]) -> bytes:
    values = entries.values()
    batch = pa.record_batch([
        pa.array(list(entries), pa.binary()), pa.array([v.value for v in values], pa.binary()),
        pa.array([v.timestamp for v in values], pa.int64()), pa.array([v.stored_aux() for v in values], pa.string()),
    ], schema=SHARD_SCHEMA)
    return ipc(batch)


def decode_shard(blob: bytes) -> list[tuple[bytes, bytes | None, int, str]]:
    """A shard's entries: (store key, value, timestamp, aux)."""
    table = pa.ipc.open_stream(blob).read_all()
    return list(zip(*(table.column(name).to_pylist() for name in SHARD_SCHEMA.names)))


class ShardedStore(MutableMapping[bytes, StoreValue]):
    """One store of a task during a batch: a shard is read from Spark's state when one of its
    keys is first asked for (`prefetch` asks for many at once; iterating reads them all), and
    the shards that changed are written back whole by `write_back`."""

    def __init__(self, state: Any, directory: Directory, read_all: bool, bulk: BulkState | None = None):
        self.state = state
        self.bulk = bulk or PipelinedMapState(state)
        self.directory = directory
        self.shards: dict[int, dict[bytes, StoreValue]] = {}
        self.stored: set[int] = set()  # shards Spark's state holds
        self.dirty: set[int] = set()
        self.complete = directory.entries == 0  # every shard read (an empty store has none to read)
        self.last_key: bytes | None = None  # the key _entries found last, and its shard
        self.last_shard = 0
        if read_all:
            self._read_all()

    def prefetch(self, keys: Iterable[bytes]) -> None:
        self._load({self.directory.shard_of(key) for key in keys})

    def owner_entries(self, owner: bytes) -> tuple[int, dict[bytes, StoreValue]]:
        """The shard (number, entries) that holds every entry whose key begins with `owner`
        (a store with a `suffix`; do not change the entries: use the store)."""
        return self.owner_shards([owner])[0]

    def owner_shards(self, owners: list[bytes]) -> list[tuple[int, dict[bytes, StoreValue]]]:
        """owner_entries() of each owner, the shards read at once."""
        if not self.directory.suffix:
            raise RuntimeError("a store kept in an older layout: its keys are not sharded by owner")
        owner_shard = self.directory.owner_shard
        shards = [owner_shard(owner) for owner in owners]
        self._load(set(shards))
        return [(shard, self.shards[shard]) for shard in shards]

    def write_back(self) -> None:
        """Persist the shards this batch changed, split first while the store has outgrown them."""
        self._grow()
        writes: list[tuple[bytes, tuple[Any, ...] | None]] = []
        for shard in sorted(self.dirty):
            entries = self.shards[shard]
            if entries:
                writes.append((SHARD_ID.pack(shard), (encode_shard(entries),)))
            elif shard in self.stored:
                writes.append((SHARD_ID.pack(shard), None))
        self.bulk.write_many(writes)
        self.dirty.clear()

    def placed(self, keys: list[bytes]) -> list[int] | None:
        """The shards of keys about to be added (`add_placed`), read in at once, the store grown
        for them first so that they never move; None when the store holds one of them."""
        self._grow(len(keys))
        shard_of = self.directory.shard_of
        shards = [shard_of(key) for key in keys]
        self._load(set(shards))
        held = self.shards
        if any(key in held[shard] for shard, key in zip(shards, keys)):
            return None
        return shards

    def add_placed(self, shards: list[int], entries: Iterable[tuple[bytes, StoreValue]]) -> None:
        """Add the entries whose keys `placed` gave these shards."""
        held = self.shards
        for shard, (key, value) in zip(shards, entries):
            held[shard][key] = value
        self.directory.entries += len(shards)
        self.dirty.update(shards)

    def _grow(self, coming: int = 0) -> None:
        """Split shards while the store (with `coming` entries more) holds more than
        SHARD_ENTRIES per shard on average: the directory takes every split first, then the
        entries of the shards it split go where it now sends them, each hashed once however
        many splits a batch's growth takes."""
        directory = self.directory
        before, split = directory.shards, set()
        while directory.entries + coming > directory.shards * SHARD_ENTRIES:
            split.add(directory.split)
            directory.split += 1
            if directory.split == 1 << directory.level:
                directory.level, directory.split = directory.level + 1, 0
        if not split:
            return
        self.last_key = None  # keys move
        # shards made by this growth start empty: only the split shards that were there hold entries
        sources = {shard for shard in split if shard < before}
        self._load(sources)
        moving = [self.shards[shard] for shard in sources]
        rebuilt = sources | set(range(before, directory.shards))
        for shard in rebuilt:
            self.shards[shard] = {}
        for entries in moving:
            for key, value in entries.items():
                self.shards[directory.shard_of(key)][key] = value
        self.dirty |= rebuilt

    def _load(self, shards: set[int]) -> None:
        wanted = [shard for shard in shards if shard not in self.shards]
        if not wanted:
            return
        if self.complete:
            self.shards.update((shard, {}) for shard in wanted)
            return
        found = self.bulk.get_many([SHARD_ID.pack(shard) for shard in wanted])
        for shard in wanted:
            stored = found[SHARD_ID.pack(shard)]
            self._add(shard, stored[0] if stored is not None else None)

    def _add(self, shard: int, blob: bytes | None) -> None:
        self.shards[shard] = {} if blob is None else {
            key: StoreValue(value, timestamp, aux) for key, value, timestamp, aux in decode_shard(blob)}
        if blob is not None:
            self.stored.add(shard)

    def _read_all(self) -> None:
        if not self.complete:
            for (shard_id,), (blob,) in self.state.iterator():
                shard = SHARD_ID.unpack(shard_id)[0]
                if shard not in self.shards:  # what this batch changed wins
                    self._add(shard, blob)
            self.complete = True

    def _entries(self, key: bytes) -> tuple[int, dict[bytes, StoreValue]]:
        if key is self.last_key:  # a get and then a put of the same key: hashed once
            shard = self.last_shard
        else:
            shard = self.last_shard = self.directory.shard_of(key)
            self.last_key = key
        if shard not in self.shards:
            self._load({shard})
        return shard, self.shards[shard]

    def __getitem__(self, key: bytes) -> StoreValue:
        return self._entries(key)[1][key]

    def get(self, key: bytes, default: Any = None) -> Any:  # Mapping's raises and catches a KeyError per miss
        return self._entries(key)[1].get(key, default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and key in self._entries(key)[1]

    def __setitem__(self, key: bytes, value: StoreValue) -> None:
        shard, entries = self._entries(key)
        if key not in entries:
            self.directory.entries += 1
        entries[key] = value
        self.dirty.add(shard)

    def __delitem__(self, key: bytes) -> None:
        shard, entries = self._entries(key)
        del entries[key]
        self.directory.entries -= 1
        self.dirty.add(shard)

    def __iter__(self) -> Iterator[bytes]:
        self._read_all()
        return iter([key for entries in self.shards.values() for key in entries])

    def __len__(self) -> int:
        return self.directory.entries
