"""A processor's lookup aids, kept in one index store of its task next to its stores, so that a
batch reads only what it needs: the entries stream time has passed (windows to close, join
records to expire) and the entries of the keys it touches, never a whole store.

TimeIndex: store keys by a time (a window's end, a record's timestamp). Times fall into
buckets of `bucket_ms`; each batch adds its keys as one new chunk per bucket, so a batch writes
what it added, not the bucket. Taking everything before a time visits the buckets stream time
has passed since the last take (point lookups, one per bucket) and reads their chunks whole:
the entries that expire, plus at most one partly passed bucket. Entries whose store entry is
already gone (a merged session, a matched join record) stay until their time passes; callers
skip them.

KeyIndex: record key -> the store keys it owns (a key's sessions), one entry per record key,
read when the key is first touched in a batch. OwnedKeys: the same for a window store whose
shards keep each record key's entries together (a join's records), found in the store itself.

Both write to the index store without logging: indexes are derived data, never changelogged
(a restore rebuilds them with `rebuild`). Index entries live under a one-byte prefix per
index, so one store holds all of a processor's indexes.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import MutableMapping, Set as AbstractSet
from typing import Iterable, Iterator

import numpy as np

from kstool.stores import WINDOW_STORE
from kstool.streams.task import NO_TIME, StoreValue, TaskState

META = struct.Struct(">qqq")  # next bucket to visit, live buckets, newest time added
COUNT = struct.Struct(">q")  # bucket -> chunks
CHUNK = struct.Struct(">qi")  # (bucket, chunk number) -> entries
ENTRY = struct.Struct(">qI")  # time, store key length; then the store key
# the smallest bucket: a partly passed bucket is read and rewritten, so it should hold little
MIN_BUCKET_MS = 1000
# a take that would visit more buckets than this (times the live buckets) reads the index whole
SCAN_FACTOR = 4
_NOTHING: frozenset[bytes] = frozenset()


def _bytes(entry: StoreValue) -> bytes:
    return entry.value or b""


def _encode(entries: Iterable[tuple[int, bytes]]) -> bytes:
    return b"".join(ENTRY.pack(time, len(key)) + key for time, key in entries)


def _decode(data: bytes) -> Iterator[tuple[int, bytes]]:
    position = 0
    while position < len(data):
        time, length = ENTRY.unpack_from(data, position)
        position += ENTRY.size
        yield time, data[position:position + length]
        position += length


class TimeIndex:
    def __init__(self, state: TaskState, store: str, prefix: bytes, bucket_ms: int):
        self.state, self.store, self.prefix, self.bucket_ms = state, store, prefix, bucket_ms
        meta = state.get(store, prefix)
        self.exists = meta is not None
        self.next_bucket, self.live, self.newest = META.unpack(_bytes(meta)) if meta else (None, 0, NO_TIME)
        self.heap: list[tuple[int, bytes]] = []  # entries of visited buckets
        self.pending: dict[int, list[tuple[int, bytes]]] = {}  # this batch's adds to unvisited buckets

    def _bucket(self, time: int) -> int:
        return time // self.bucket_ms

    def add(self, time: int, store_key: bytes) -> None:
        self.newest = max(self.newest, time)
        bucket = self._bucket(time)
        if self.next_bucket is not None and bucket < self.next_bucket:
            heapq.heappush(self.heap, (time, store_key))
        else:
            self.pending.setdefault(bucket, []).append((time, store_key))

    def add_many(self, times: np.ndarray, store_keys: list[bytes]) -> None:
        """add() of each (time, store key) in order, a run of one bucket at a time."""
        if not len(times):
            return
        self.newest = max(self.newest, int(times.max()))
        buckets = times // self.bucket_ms
        starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]]).tolist()
        entries = list(zip(times.tolist(), store_keys))
        for start, stop in zip(starts, [*starts[1:], len(entries)]):
            bucket = int(buckets[start])
            if self.next_bucket is not None and bucket < self.next_bucket:
                for entry in entries[start:stop]:
                    heapq.heappush(self.heap, entry)
            else:
                self.pending.setdefault(bucket, []).extend(entries[start:stop])

    def take(self, before: int) -> list[tuple[int, bytes]]:
        """The entries with time < before, in (time, store key) order, removed from the index."""
        last = (before - 1) // self.bucket_ms
        if self.next_bucket is None or last >= self.next_bucket:
            self._visit(last)
        heap = self.heap
        if not heap or heap[0][0] >= before:
            return []  # most calls: nothing expires
        taken = []
        while heap and heap[0][0] < before:
            taken.append(heapq.heappop(heap))
        return taken

    def _visit(self, last: int) -> None:
        """Bring every entry of buckets <= last into the heap."""
        for bucket in [b for b in self.pending if b <= last]:
            for entry in self.pending.pop(bucket):
                heapq.heappush(self.heap, entry)
        if self.next_bucket is not None and self.live:
            if last - self.next_bucket + 1 > SCAN_FACTOR * self.live + 64:  # a jump in time
                buckets: Iterable[int] = [COUNT.unpack(k[1:])[0] for k in list(self.state.stores[self.store])
                                          if k[:1] == self.prefix and len(k) == 1 + COUNT.size]
            else:
                buckets = range(self.next_bucket, last + 1)
            buckets = [bucket for bucket in buckets if bucket <= last]
            self._prefetch(buckets)
            for bucket in buckets:
                self._load(bucket)
        self.next_bucket = last + 1

    def _prefetch(self, buckets: list[int]) -> None:
        """Ask for the buckets' chunk counts, then their chunks, at once (see TaskState.prefetch)."""
        count_keys = [self.prefix + COUNT.pack(bucket) for bucket in buckets]
        self.state.prefetch(self.store, count_keys)
        counts = {bucket: self.state.get(self.store, key) for bucket, key in zip(buckets, count_keys)}
        self.state.prefetch(self.store, (self.prefix + CHUNK.pack(bucket, number)
                                         for bucket, count in counts.items() if count is not None
                                         for number in range(COUNT.unpack(_bytes(count))[0])))

    def _load(self, bucket: int) -> None:
        count_key = self.prefix + COUNT.pack(bucket)
        count = self.state.get(self.store, count_key)
        if count is None:
            return
        for number in range(COUNT.unpack(_bytes(count))[0]):
            chunk_key = self.prefix + CHUNK.pack(bucket, number)
            chunk = self.state.get(self.store, chunk_key)
            if chunk is not None:
                for entry in _decode(_bytes(chunk)):
                    heapq.heappush(self.heap, entry)
                self.state.delete(self.store, chunk_key, 0, log=False)
        self.state.delete(self.store, count_key, 0, log=False)
        self.live -= 1

    def save(self) -> None:
        """Write this batch's changes: new chunks for the adds, and the visited entries not
        taken back into their buckets (the next take visits them again)."""
        for time, key in self.heap:
            self.pending.setdefault(self._bucket(time), []).append((time, key))
        self.heap = []
        for bucket, entries in self.pending.items():
            count_key = self.prefix + COUNT.pack(bucket)
            count = self.state.get(self.store, count_key)
            number = COUNT.unpack(_bytes(count))[0] if count else 0
            if count is None:
                self.live += 1
            self.state.put(self.store, self.prefix + CHUNK.pack(bucket, number), StoreValue(_encode(entries), 0),
                           log=False)
            self.state.put(self.store, count_key, StoreValue(COUNT.pack(number + 1), 0), log=False)
        if self.pending:  # the next take must visit them
            lowest = min(self.pending)
            self.next_bucket = lowest if self.next_bucket is None else min(self.next_bucket, lowest)
        self.pending = {}
        meta = META.pack(0 if self.next_bucket is None else self.next_bucket, self.live, self.newest)
        self.state.put(self.store, self.prefix, StoreValue(meta, 0), log=False)
        self.exists = True


class KeyIndex:
    def __init__(self, state: TaskState, store: str, prefix: bytes):
        self.state, self.store, self.prefix = state, store, prefix
        self.keys: dict[bytes, set[bytes]] = {}
        self.changed: set[bytes] = set()

    def get(self, key: bytes) -> set[bytes]:
        """The store keys `key` owns (do not change the set: use add and discard)."""
        if key not in self.keys:
            found = self.state.get(self.store, self.prefix + key)
            self.keys[key] = {k for _, k in _decode(_bytes(found))} if found else set()
        return self.keys[key]

    def add(self, key: bytes, store_key: bytes) -> None:
        self.get(key).add(store_key)
        self.changed.add(key)

    def discard(self, key: bytes, store_key: bytes) -> None:
        owned = self.get(key)
        if store_key in owned:
            owned.discard(store_key)
            self.changed.add(key)

    def save(self) -> None:
        for key in self.changed:
            index_key = self.prefix + key
            if self.keys[key]:
                self.state.put(self.store, index_key, StoreValue(_encode((0, k) for k in sorted(self.keys[key])), 0),
                               log=False)
            else:
                self.state.delete(self.store, index_key, 0, log=False)
        self.changed = set()


class OwnedKeys:
    """Record key -> the keys of its entries in a window store (key ‖ time ‖ seqnum) whose shards
    keep each record key's entries together (kstool.tasks.shards: a `suffix`). A shard's
    entries are grouped by record key when one of its keys is first asked for in a batch;
    nothing is saved, the store is the index. A plain dict store (tests, the oracle) is one
    shard."""

    def __init__(self, store: MutableMapping[bytes, StoreValue]):
        self.store = store
        self.owners: dict[int, dict[bytes, set[bytes]]] = {}  # per shard grouped
        self.keys: dict[bytes, set[bytes]] = {}  # the keys asked for

    def get(self, key: bytes) -> set[bytes]:
        """The store keys `key` owns (do not change the set: use add and discard)."""
        found = self.keys.get(key)
        if found is not None:
            return found
        owner_entries = getattr(self.store, "owner_entries", None)
        shard, entries = owner_entries(key) if owner_entries is not None else (0, self.store)
        owners = self.owners.get(shard)
        if owners is None:
            owners = self._group(shard, entries)
        found = self.keys[key] = owners.setdefault(key, set())
        return found

    def get_many(self, keys: list[bytes]) -> list[AbstractSet[bytes]]:
        """What get() gives each key (read only), the shards of those not asked for yet read at
        once; a key that owns nothing is not remembered (get() makes it a set to add to)."""
        owner_shards = getattr(self.store, "owner_shards", None)
        if owner_shards is None:
            return [self.get(key) for key in keys]
        found = self.keys
        asked = [key for key in keys if key not in found]
        for key, (shard, entries) in zip(asked, owner_shards(asked)):
            owners = self.owners.get(shard)
            if owners is None:
                owners = self._group(shard, entries)
            owned = owners.get(key)
            if owned is not None:
                found[key] = owned
        return [found.get(key, _NOTHING) for key in keys]

    def _group(self, shard: int, entries: Iterable[bytes]) -> dict[bytes, set[bytes]]:
        owners: dict[bytes, set[bytes]] = self.owners.setdefault(shard, {})
        for store_key in entries:
            owners.setdefault(WINDOW_STORE.record_key(store_key), set()).add(store_key)
        return owners

    def add(self, key: bytes, store_key: bytes) -> None:
        self.get(key).add(store_key)

    def discard(self, key: bytes, store_key: bytes) -> None:
        self.get(key).discard(store_key)

    def save(self) -> None:
        pass  # the store holds it
