"""What a processor reads, writes and keeps: records in, emitted records out, task state."""

from __future__ import annotations

import gc
import heapq
from collections.abc import MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Protocol, cast

from kstool.contract import OUTPUT, changelog_role
from kstool.streams.headers import Headers

LEFT, RIGHT = 0, 1
NO_TIME = -1  # stream time before the task's first record


@dataclass(slots=True)  # not frozen: a frozen dataclass is twice as slow to build
class Record:
    key: bytes | None
    value: bytes | None
    timestamp: int  # event time, epoch ms
    side: int = LEFT
    number: float | None = None  # the aggregate's input number
    partition: int = 0
    offset: int = 0
    # a row the source combined (kstool.tasks.combiners.window_counts.WindowCombiner): (window
    # start, or None for the range's newest time; count; latest; range start); None for a record
    partial: tuple[int | None, int, int, int] | None = None
    headers: Headers = None


@dataclass(slots=True)
class Emitted:
    role: str  # OUTPUT, LATE, or changelog_role(store)
    key: bytes | None
    value: bytes | None
    timestamp: int
    store: str | None = None  # the store entry it reflects (for the record cache)
    store_key: bytes | None = None
    headers: Headers = None  # those of the record it came from (output records only)


@dataclass
class StoreValue:
    value: bytes | None
    timestamp: int
    # processor bookkeeping: as stored, a string; during a batch the processor may keep a live
    # object there instead (anything with dump() -> str), encoded once when the batch ends
    aux: Any = ""

    def stored_aux(self) -> str:
        return self.aux if isinstance(self.aux, str) else self.aux.dump()


@dataclass
class TaskState:
    """One task's stores (each a dict from store key bytes to StoreValue) and stream time.
    Writes are tracked so the engine persists only what changed, and logged writes become
    changelog records, as Kafka Streams' logging stores do."""

    stores: dict[str, MutableMapping[bytes, StoreValue]]
    stream_time: int = NO_TIME
    sequence: int = 0  # join stores' seqnum (Kafka Streams' retainDuplicates)
    out: list[Emitted] = field(default_factory=list)
    # Kafka Streams' record cache: roles whose records collapse to each key's last one per
    # batch, held here in the order of last update
    cached_roles: frozenset[str] = frozenset()
    cache: dict[tuple[str, bytes | None], Emitted] = field(default_factory=dict)
    # store -> {key changed this batch: whether it existed before the batch}
    changed: dict[str, dict[bytes, bool]] = field(default_factory=dict)
    # a processor's lookup aids for this batch (kstool.streams.indexes), saved to the task's
    # index store when the batch ends
    index: dict[str, "SavedIndex"] = field(default_factory=dict)

    @classmethod
    def empty(cls, names: Iterable[str]) -> "TaskState":
        return cls({name: {} for name in names})

    def get(self, store: str, key: bytes) -> StoreValue | None:
        return self.stores[store].get(key)

    def prefetch(self, store: str, keys: Iterable[bytes]) -> None:
        """Say which entries are about to be read: a store that reads from elsewhere (Spark's
        state) asks for them at once."""
        ask = getattr(self.stores[store], "prefetch", None)
        if ask is not None:
            ask(keys)

    def _touch(self, store: str, key: bytes) -> None:
        changed = self.changed.setdefault(store, {})
        if key not in changed:
            changed[key] = key in self.stores[store]

    def existed_before_batch(self, store: str, key: bytes) -> bool:
        changed = self.changed.get(store, {})
        return changed[key] if key in changed else key in self.stores[store]

    def put(self, store: str, key: bytes, value: StoreValue, log: bool = True) -> None:
        self._touch(store, key)
        self.stores[store][key] = value
        if log:
            self.log_put(store, key, value.value, value.timestamp)

    def put_new(self, store: str, key: bytes, value: StoreValue) -> None:
        """put() of an entry the caller knows the store does not hold (no lookup first)."""
        self.changed.setdefault(store, {}).setdefault(key, False)
        self.stores[store][key] = value
        self.log_put(store, key, value.value, value.timestamp)

    def put_all_new(self, entries: dict[str, list[tuple[bytes, StoreValue]]]) -> bool:
        """put_new() of many entries into several stores at once (a sharded store hashes each
        key once), without their changelog records: the caller logs them (`log_put`) in its
        order. False, and nothing put, when a store holds one of the keys already."""
        placements: dict[str, list[int] | None] = {}
        for name, items in entries.items():
            table, keys = self.stores[name], [key for key, _ in items]
            if isinstance(table, dict):  # a store held whole (tests, the oracle)
                placements[name] = None if any(key in table for key in keys) else []
            else:
                placements[name] = table.placed(keys)  # type: ignore[attr-defined]
            if placements[name] is None:
                return False
        for name, items in entries.items():
            changed, table = self.changed.setdefault(name, {}), self.stores[name]
            for key, _ in items:
                changed.setdefault(key, False)
            if isinstance(table, dict):
                table.update(items)
            else:
                table.add_placed(placements[name], items)  # type: ignore[attr-defined]
        return True

    def log_put(self, store: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        """The changelog record of a put (see put_all_new)."""
        self._record(Emitted(changelog_role(store), key, value, timestamp, store, key))

    def delete(self, store: str, key: bytes, timestamp: int, log: bool = True) -> None:
        if key not in self.stores[store]:
            return
        self._touch(store, key)
        del self.stores[store][key]
        if log:
            self._record(Emitted(changelog_role(store), key, None, timestamp, store, key))

    def emit(self, key: bytes | None, value: bytes | None, timestamp: int, role: str = OUTPUT,
             store: str | None = None, store_key: bytes | None = None, headers: Headers = None) -> None:
        self._record(Emitted(role, key, value, timestamp, store, store_key, headers))

    def _record(self, emitted: Emitted) -> None:
        if emitted.role in self.cached_roles:
            self._cache(emitted)
        else:
            self.out.append(emitted)

    def _cache(self, emitted: Emitted) -> None:
        slot = (emitted.role, emitted.key)
        self.cache.pop(slot, None)  # re-insert: the order is that of the last update
        self.cache[slot] = emitted

    def record_all(self, emitted: Iterable[Emitted]) -> None:
        """Records in order (a processor's batch loop hands over many at once)."""
        cached, out = self.cached_roles, self.out
        for record in emitted:
            if record.role in cached:
                self._cache(record)
            else:
                out.append(record)

    def flush(self) -> list[Emitted]:
        """What the batch emitted: the uncached records in order, then the cache's, where a
        delete of an entry the batch itself created is not written."""
        flushed = self.out + [e for e in self.cache.values() if e.value is not None or not e.store
                              or self.existed_before_batch(e.store, cast(bytes, e.store_key))]
        self.out, self.cache = [], {}
        return flushed

    def advance(self, timestamp: int) -> int:
        self.stream_time = max(self.stream_time, timestamp)
        return self.stream_time


class StoreWriter:
    """TaskState.put and delete of one store, for a processor's batch loop: the same entries,
    changed keys and changelog records, without TaskState's calls per record. Only where no
    role is cached: the changelog records go straight out (logged=False: the processor writes
    them itself, as its own record cache flushes)."""

    def __init__(self, state: TaskState, name: str, logged: bool = True):
        self.state, self.name, self.table, self.logged = state, name, state.stores[name], logged
        self.role, self.changed = changelog_role(name), state.changed.get(name)

    def write(self, key: bytes, value: bytes | None, timestamp: int) -> bool | None:
        """Put the value, or delete the key for None; whether the key was there before, or None for
        a delete of a key not there (nothing done)."""
        table = self.table
        existed = key in table
        if value is None and not existed:
            return None
        changed = self.changed
        if changed is None:
            changed = self.changed = self.state.changed[self.name] = {}
        if key not in changed:
            changed[key] = existed
        if value is None:
            del table[key]
        else:
            table[key] = StoreValue(value, timestamp)
        if self.logged:
            self.state.out.append(Emitted(self.role, key, value, timestamp, self.name, key))
        return existed

class SavedIndex(Protocol):
    def save(self) -> None: ...


class Processor(Protocol):
    stores: tuple[str, ...]  # Kafka Streams' stores: changelogged, queried by `kstool state`
    indexes: tuple[str, ...]  # lookup aids for the stores (kstool.streams.indexes): derived, not logged
    @property
    def cached_roles(self) -> frozenset[str]:
        """Roles whose records go through Kafka Streams' record cache: per batch, only each key's
        last record (KTable updates); empty for KStream results (read-only: a class attribute or
        a property)."""
        ...

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        """A task's batch, in processing order."""
        ...

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        """Store keys a batch of these records will read, known before it is processed (the
        engine asks for them at once); processing may read more."""
        ...


class Restorable(Protocol):
    """A processor whose stores can be rebuilt from their changelogs (kstool state restore)."""

    def restored(self, store: str, key: bytes, value: bytes, timestamp: int, stream_time: int) -> StoreValue | None:
        """The store entry for a changelog record (the compacted view's, never a tombstone),
        or None when the entry had left the store by `stream_time`, the newest timestamp of the
        store's entries (the time it had observed, as Kafka Streams' restore takes it)."""
        ...


class Staged(Protocol):
    """A processor whose work is stages of tasks, each over its own key (Kafka Streams'
    sub-topologies joined by repartition topics): each stage's processor, in order. Its own
    process_batch runs them all in one task."""

    def stages(self) -> tuple[Processor, ...]: ...


class Replayable(Protocol):
    """A processor with history stores (versioned tables): a restore puts each of their changelog
    records again, in changelog order, instead of the compacted view's last one per key."""

    history_stores: tuple[str, ...]

    def replay(self, state: TaskState, store: str, key: bytes, value: bytes | None, timestamp: int) -> None: ...


class TableStores:
    """A processor whose stores keep every key until it is deleted (tables, buffers waiting for
    their time): a restore puts each entry of the compacted changelog back as it is."""

    def restored(self, store: str, key: bytes, value: bytes, timestamp: int, stream_time: int) -> StoreValue | None:
        return StoreValue(value, timestamp)


class RecordByRecord:
    """A processor whose semantics need each record on its own (sessions merge per record, joins
    probe stores the previous record changed)."""

    def process(self, record: Record, state: TaskState) -> None:
        raise NotImplementedError

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        for record in records:
            self.process(record, state)


def task_stores(processor: Processor) -> tuple[str, ...]:
    """The stores a task keeps for the processor: its stores and their indexes."""
    return processor.stores + processor.indexes


def processing_order(records: Iterable[Record]) -> Iterator[Record]:
    """Kafka Streams' order within a task: each input partition in offset order, and between
    partitions (the two sides of a join; the source partitions a re-key merges, as a
    repartition topic would) the one whose next record has the smallest timestamp goes first.
    Ties: the right side first (a table update at time t is seen by a stream record at t)."""
    queues: dict[tuple[int, int], list[Record]] = {}
    for record in records:
        queues.setdefault((record.side, record.partition), []).append(record)
    if len(queues) == 1:
        yield from sorted(next(iter(queues.values())), key=lambda r: r.offset)
        return
    heads = []
    for (side, partition), queue in queues.items():
        queue.sort(key=lambda r: r.offset)
        heads.append((queue[0].timestamp, -side, partition, 0))
    heapq.heapify(heads)
    while heads:
        _, negative_side, partition, index = heapq.heappop(heads)
        queue = queues[-negative_side, partition]
        yield queue[index]
        if index + 1 < len(queue):
            heapq.heappush(heads, (queue[index + 1].timestamp, negative_side, partition, index + 1))


@contextmanager
def collector_paused() -> Iterator[None]:
    """A task's batch makes many objects and no cycles: the cyclic collector only costs time
    there, and the more the larger the state, since a full collection walks every store entry
    the batch decoded (a table-table join task's read of 480k entries: 2.2 s with it, 0.5 s without)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def run_task(processor: Processor, state: TaskState, records: Iterable[Record]) -> list[Emitted]:
    """Process one batch of a task's records; returns what they emitted, in order
    (`state.changed` then holds the store keys they changed, each with whether it existed
    before the batch)."""
    state.changed, state.cached_roles = {}, processor.cached_roles
    with collector_paused():
        processor.process_batch(list(processing_order(records)), state)
    for index in state.index.values():
        index.save()
    state.index.clear()  # the next batch reads them from the index store
    return state.flush()
