"""A stream-table join against a versioned table (Kafka Streams' KIP-889 versioned store and
KIP-914 joins): each stream record joins the table row valid at the record's timestamp, not
the latest one, so reprocessing last week enriches old records with last week's rows.

The table (RocksDBVersionedStore, Kafka trunk 2024-10): a put older than the table's observed
time (its newest put) - history is dropped; every table record is still logged, as
ChangeLoggingVersionedKeyValueBytesStore does. get(key, t) answers the version valid at t
(the newest from <= t; none for a tombstone), but for t older than observed - history only the
latest version, if it began by t. A store entry holds a key's latest version (value None: a
tombstone) and its older versions in `aux`; versions no get can answer any more are dropped.

With a grace (Joined.withGracePeriod), stream records wait in a buffer
(RocksDBTimeOrderedKeyValueBuffer) until the buffer's observed time - grace reaches them, then
join in (time, key, seqnum) order; a record already that late joins at once. A left join writes
a stream record without a key at once, joined with nothing (KIP-962; Kafka Streams 4.4 fails the
task on one when a grace is set: its buffer takes no null key, README "Differences from Kafka
Streams").
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass, field
from typing import Iterable, cast

from kstool.contract import changelog_role
from kstool.streams.indexes import MIN_BUCKET_MS, TimeIndex
from kstool.streams.joins import Joiner
from kstool.streams.task import LEFT, NO_TIME, Record, RecordByRecord, StoreValue, TableStores, TaskState, task_stores

TABLE, BUFFER, INDEX = "join-right-table", "join-stream-buffer", "join-index"
# the index store's entries: the table's observed time, and the buffer's records by time
TABLE_TIME, BUFFERED = b"T", b"B"
TIME = struct.Struct(">q")
SEQNUM = struct.Struct(">I")


class Older(list[tuple[int, bytes | None]]):
    """A key's versions before its latest, oldest first: (valid from, value or None)."""

    def dump(self) -> str:
        return json.dumps([[ts, None if v is None else base64.b64encode(v).decode()] for ts, v in self])


def older_versions(entry: StoreValue) -> Older:
    if isinstance(entry.aux, Older):
        return entry.aux
    found = Older((ts, None if v is None else base64.b64decode(v)) for ts, v in json.loads(entry.aux or "[]"))
    entry.aux = found
    return found


def buffer_key(key: bytes, timestamp: int, seqnum: int) -> bytes:
    """Kafka Streams' TimeFirstWindowKeySchema: time ‖ key ‖ seqnum."""
    return TIME.pack(timestamp) + key + SEQNUM.pack(seqnum)


def split_buffer_key(data: bytes) -> tuple[bytes, int]:
    return data[TIME.size:-SEQNUM.size], TIME.unpack_from(data)[0]


@dataclass
class TableClock:
    """A versioned table's observed time (its newest put), saved to the index store when the batch ends."""

    state: TaskState
    index: str
    key: bytes
    time: int

    def save(self) -> None:
        self.state.put(self.index, self.key, StoreValue(TIME.pack(self.time), 0), log=False)


@dataclass
class VersionedTable:
    """A versioned key-value store (RocksDBVersionedStore) in a task's store `store`: an entry
    holds a key's latest version (value None: a tombstone) and its older ones; its observed time
    lives in the index store `index` under `clock_key`."""

    store: str
    index: str
    history: int  # ms the table keeps versions (also its grace, as in RocksDBVersionedStore)
    clock_key: bytes = TABLE_TIME

    def clock(self, state: TaskState) -> TableClock:
        found = state.index.get(f"versioned:{self.store}")
        if found is None:
            saved = state.get(self.index, self.clock_key)
            if saved is not None:
                time = TIME.unpack(cast(bytes, saved.value))[0]
            else:  # restored, or a new task: the newest version is the newest put
                time = max((e.timestamp for e in state.stores[self.store].values()), default=NO_TIME)
            found = TableClock(state, self.index, self.clock_key, time)
            state.index[f"versioned:{self.store}"] = found
        return cast(TableClock, found)

    def latest(self, state: TaskState, key: bytes) -> StoreValue | None:
        """The key's latest version, None for none or a tombstone: Kafka Streams' get(key)."""
        entry = state.get(self.store, key)
        return None if entry is None or entry.value is None else entry

    def get(self, state: TaskState, key: bytes, as_of: int) -> bytes | None:
        """The version valid at `as_of`: get(key, asOfTimestamp)."""
        entry = state.get(self.store, key)
        if entry is None:
            return None
        if entry.timestamp <= as_of:
            return entry.value
        if as_of < self.clock(state).time - self.history:
            return None  # beyond the history: only the latest version answers
        for valid_from, value in reversed(older_versions(entry)):
            if valid_from <= as_of:
                return value
        return None

    def put(self, state: TaskState, key: bytes, value: bytes | None, timestamp: int) -> bool:
        """A table record (None: a tombstone) into the key's versions, unless it is older than
        the history; a version replaces one of the same time. True when it is now the key's
        latest version (KTableSource forwards the others with isLatest false, and downstream
        processors of a versioned table skip them, KIP-914)."""
        clock = self.clock(state)
        if timestamp < clock.time - self.history:
            return False
        clock.time = max(clock.time, timestamp)
        entry = state.get(self.store, key)
        versions = [*older_versions(entry), (entry.timestamp, entry.value)] if entry is not None else []
        versions = [v for v in versions if v[0] != timestamp] + [(timestamp, value)]
        versions.sort(key=lambda v: v[0])
        horizon = clock.time - self.history
        # a version nothing can ask for: one that ended by the horizon, a tombstone that began before it
        while len(versions) > 1 and versions[1][0] <= horizon:
            versions.pop(0)
        if versions[0][1] is None and versions[0][0] < horizon:
            versions.pop(0)
        if not versions:
            state.delete(self.store, key, timestamp, log=False)
            return False
        (latest_time, latest), older = versions[-1], Older(versions[:-1])
        state.put(self.store, key, StoreValue(latest, latest_time, older), log=False)
        return int(latest_time) == timestamp


@dataclass
class VersionedStreamTableJoin(TableStores, RecordByRecord):  # the buffer's compacted view: what still waits
    how: str  # inner | left
    history: int  # ms the table keeps versions (also its grace, as in RocksDBVersionedStore)
    grace: int  # ms stream records wait for the table (0: they join at once)
    joiner: Joiner
    index_bucket_ms: int = MIN_BUCKET_MS
    stores: tuple[str, ...] = field(init=False)
    indexes: tuple[str, ...] = (INDEX,)
    cached_roles: frozenset[str] = frozenset()  # join results are a KStream
    history_stores: tuple[str, ...] = (TABLE,)  # restored by replaying their changelog whole
    table: VersionedTable = field(init=False)

    def __post_init__(self) -> None:
        self.stores = (TABLE, BUFFER) if self.grace else (TABLE,)
        self.table = VersionedTable(TABLE, INDEX, self.history)

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        return {TABLE: {r.key for r in records if r.key is not None}, INDEX: {TABLE_TIME, BUFFERED}}

    def process(self, record: Record, state: TaskState) -> None:
        if record.key is None:  # a left join keeps a stream record without a key (KIP-962), at once
            if self.how == "left" and record.side == LEFT and record.value is not None:
                state.emit(None, self.joiner(record.value, None), record.timestamp)
            return
        if record.side != LEFT:
            self.table.put(state, record.key, record.value, record.timestamp)
            state.emit(record.key, record.value, record.timestamp, changelog_role(TABLE))
            return
        if record.value is None:
            return
        buffer = self._buffered(state)
        if not self.grace or buffer.newest - self.grace > record.timestamp:
            self._join(state, record.key, record.value, record.timestamp)
            return
        state.sequence = (state.sequence + 1) % 2**31
        waiting = buffer_key(record.key, record.timestamp, state.sequence)
        state.put(BUFFER, waiting, StoreValue(record.value, record.timestamp))
        buffer.add(record.timestamp, waiting)
        due = buffer.take(buffer.newest - self.grace + 1)
        if due:
            state.prefetch(BUFFER, (store_key for _, store_key in due))
            state.prefetch(TABLE, (split_buffer_key(store_key)[0] for _, store_key in due))
        for ts, store_key in due:
            entry = cast(StoreValue, state.get(BUFFER, store_key))
            self._join(state, split_buffer_key(store_key)[0], cast(bytes, entry.value), ts)
            state.delete(BUFFER, store_key, record.timestamp)

    def _join(self, state: TaskState, key: bytes, value: bytes, timestamp: int) -> None:
        right = self.table.get(state, key, timestamp)
        if right is not None or self.how == "left":
            state.emit(key, self.joiner(value, right), timestamp)

    def replay(self, state: TaskState, store: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        """A restore: one changelog record of a history store, in changelog order."""
        self.table.put(state, key, value, timestamp)

    def _buffered(self, state: TaskState) -> TimeIndex:
        """The buffer's records by time (with its observed time)."""
        found = state.index.get("versioned-buffer")
        if found is None:
            found = TimeIndex(state, INDEX, BUFFERED, self.index_bucket_ms)
            if not found.exists and BUFFER in state.stores:
                for store_key in state.stores[BUFFER]:
                    found.add(split_buffer_key(store_key)[1], store_key)
            state.index["versioned-buffer"] = found
        return cast(TimeIndex, found)


def latest_versions(history: int, records: Iterable[tuple[bytes, bool, int]]) -> dict[bytes, int]:
    """A versioned table's latest version of each key after a changelog partition's records
    (key, tombstone or not, timestamp), in changelog order: key -> its record's number in
    `records` (a key whose latest version is a tombstone: none)."""
    table = VersionedStreamTableJoin("inner", history, 0, lambda left, right: b"")
    state = TaskState.empty(task_stores(table))
    for number, (key, tombstone, timestamp) in enumerate(records):
        table.replay(state, TABLE, key, None if tombstone else TIME.pack(number), timestamp)
    return {key: TIME.unpack(cast(bytes, e.value))[0] for key, e in state.stores[TABLE].items() if e.value is not None}
