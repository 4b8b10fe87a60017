"""A versioned table (Kafka Streams' KIP-889 versioned store, RocksDBVersionedStore, Kafka trunk
2024-10), as the processors over one keep it (kstool.streams.joins.versioned_stream_table,
.joins.foreign_key, .table_aggregation): a put older than the table's observed time (its newest
put) - history is dropped; every table record is still logged, as
ChangeLoggingVersionedKeyValueBytesStore does. get(key, t) answers the version valid at t (the
newest from <= t; none for a tombstone), but for t older than observed - history only the latest
version, if it began by t. A store entry holds a key's latest version (value None: a tombstone)
and its older versions in `aux`; versions no get can answer any more are dropped.
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass
from typing import Iterable, cast

from kstool.contract import changelog_role
from kstool.streams.task import NO_TIME, StoreValue, TaskState

TABLE_TIME = b"T"  # the index store's entry: the table's observed time
TIME = struct.Struct(">q")


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

    def write(self, state: TaskState, key: bytes, value: bytes | None, timestamp: int) -> bool:
        """An input record: put(), and logged whatever put() did with it, as
        ChangeLoggingVersionedKeyValueBytesStore logs every record (a restore replays them all)."""
        latest = self.put(state, key, value, timestamp)
        state.emit(key, value, timestamp, changelog_role(self.store))
        return latest

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
        # a tombstone of the latest value's own time only deletes it (the latest value store's entry,
        # RocksDBVersionedStore.maybePutToLatestValueStore) and records no tombstone of its own: the
        # history ends where the version before ended, which for a tombstone is its own time (a
        # value put after a tombstone leaves the tombstone's segment as it was, finishPut), so an
        # older put from there on becomes the latest again (#84)
        deletes_latest = value is None and bool(versions) and versions[-1][0] == timestamp \
            and versions[-1][1] is not None and (len(versions) == 1 or versions[-2][1] is None)
        if deletes_latest:
            versions.pop()
        else:
            versions = [v for v in versions if v[0] != timestamp] + [(timestamp, value)]
            versions.sort(key=lambda v: v[0])
        horizon = clock.time - self.history
        # a version nothing can ask for: one that ended by the horizon, a tombstone that began before it
        while len(versions) > 1 and versions[1][0] <= horizon:
            versions.pop(0)
        if versions and versions[0][1] is None and versions[0][0] < horizon:
            versions.pop(0)
        if not versions:
            state.delete(self.store, key, timestamp, log=False)
            return deletes_latest
        (latest_time, latest), older = versions[-1], Older(versions[:-1])
        state.put(self.store, key, StoreValue(latest, latest_time, older), log=False)
        return deletes_latest or int(latest_time) == timestamp


def latest_versions(history: int, records: Iterable[tuple[bytes, bool, int]]) -> dict[bytes, int]:
    """A versioned table's latest version of each key after a changelog partition's records
    (key, tombstone or not, timestamp), in changelog order: key -> its record's number in
    `records` (a key whose latest version is a tombstone: none)."""
    table = VersionedTable("table", "index", history)
    state = TaskState.empty(("table", "index"))
    for number, (key, tombstone, timestamp) in enumerate(records):
        table.put(state, key, None if tombstone else TIME.pack(number), timestamp)
    return {key: TIME.unpack(cast(bytes, e.value))[0] for key, e in state.stores["table"].items() if e.value is not None}
