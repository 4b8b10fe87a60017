"""Kafka Streams' record cache of a KTable's store (CachingKeyValueStore over its ThreadCache,
KIP-770's statestore.cache.max.bytes), for processors that write a table's updates themselves:
within a micro-batch (Kafka Streams: a commit interval) each key's last update is kept, and
forwarded once when the cache is flushed, in the order of the keys' last updates
(NamedCache.dirtyKeys). A key made and deleted since the last flush forwards nothing
(CachingKeyValueStore.putAndMaybeForward: no new and no old value). When the cache outgrows its
bytes, Kafka Streams evicts the least recently used entry of the store being written, which
flushes all of that store's dirty entries (NamedCache.evict); here `put` says when the pending
updates of the task's stores outgrow the budget (each its key's and value's bytes and
ENTRY_BYTES; clean entries, headers and topic names are not counted), and the processor
flushes."""

from __future__ import annotations

from dataclasses import dataclass, field

from kstool.streams.headers import Headers
from kstool.streams.task import Record

# what Kafka Streams counts for an entry besides its key and value: LRUNode's three references
# (24) and LRUCacheEntry's flag, timestamp, offset and partition (21)
ENTRY_BYTES = 45


@dataclass(slots=True)
class Pending:
    """A key's last update since its store's cache was last flushed."""
    value: bytes | None
    timestamp: int
    headers: Headers
    existed: bool  # whether the store held the key at that flush (Kafka Streams' old value)


@dataclass
class RecordCache:
    """The caches of a task's stores (numbered from 0) in one budget of `budget` bytes."""
    budget: int
    stores: int
    pending: list[dict[bytes, Pending]] = field(init=False)
    sizes: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.pending = [{} for _ in range(self.stores)]
        self.sizes = [0] * self.stores

    def put(self, store: int, key: bytes, value: bytes | None, timestamp: int, headers: Headers, existed: bool) -> bool:
        """Keeps the update; True when the pending updates outgrow the budget: the caller flushes."""
        pending = self.pending[store]
        last = pending.pop(key, None)  # re-inserted: the order is that of the last update
        if last is not None:
            existed = last.existed
            self.sizes[store] -= len(key) + len(last.value or b"") + ENTRY_BYTES
        pending[key] = Pending(value, timestamp, headers, existed)
        self.sizes[store] += len(key) + len(value or b"") + ENTRY_BYTES
        return sum(self.sizes) > self.budget

    def holds_all(self, records: list[Record], last: list[Record]) -> bool:
        """Whether every update of the batch fits at once (no flush before its end): at most
        each store's keys (`last`: last_per_key(records)) with the batch's longest key and value."""
        longest_key = max((len(r.key) for r in last if r.key is not None), default=0)
        longest_value = max(map(len, filter(None, [r.value for r in records])), default=0)
        return len(last) * (longest_key + longest_value + ENTRY_BYTES) <= self.budget

    def flush(self, store: int) -> list[tuple[bytes, Pending]]:
        """The store's updates to forward, in the order of their last update."""
        pending, self.pending[store], self.sizes[store] = self.pending[store], {}, 0
        return [(key, update) for key, update in pending.items() if update.value is not None or update.existed]


def last_per_key(records: list[Record]) -> list[Record]:
    """Each store's (side's) key's last record, in the order of those last records: what a
    cache that is not flushed before the batch's end keeps of it."""
    last = {(r.side, r.key): index for index, r in enumerate(records)}
    return [records[index] for index in sorted(last.values())]
