"""A table's rows re-grouped and aggregated (Kafka Streams' KTable.groupBy(...).count() /
.aggregate(adder, subtractor)), optionally suppressed (suppress(untilTimeLimit(D, maxRecords(N)
.emitEarlyWhenFull()))). apache/kafka trunk as of 2024-10: KTableSource, KTableRepartitionMap,
KTableAggregate, KTableSuppressProcessor.

A row update (key, value) replaces the row in the table store; its old value's group is
subtracted from and its new value's group added to (one update when both are the same group;
else the old group first), so a row that moves leaves its old group; a tombstone only
subtracts. An aggregate's timestamp is the later of the update's and the aggregate's. Updates
are collapsed per batch (the record cache, flushed at each commit). Suppressed, each group's
latest update waits in a buffer from when the group entered it, and leaves (is written) when
stream time - D reaches that time, or, beyond N waiting groups, oldest first.

As in Kafka Streams, the work is two stages: RowChanges (sub-topology 0, a task per input
partition: the table and KTableRepartitionMap) sends each group's change to the task of the group
(the repartition topic's partition: Kafka's partitioner over the group), where GroupAggregate
(sub-topology 1: KTableAggregate, KTableSuppressProcessor) keeps the groups, so stream time (what
suppression waits on) is that task's. TableAggregate runs both in one task, as
TopologyTestDriver runs the two sub-topologies: the oracle of the spread run.

Over a versioned table (`history`: Materialized.as(Stores.persistentVersionedKeyValueStore)),
the table keeps every row's versions (kstool.streams.versioned_table), and an update older than its
row's latest version (a tombstone's too), or than the table's observed time - history, changes
no group: KTableRepartitionMap skips a change that is not the latest (KIP-914,
testAggOfVersionedStore).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import cast

from kstool.contract import OUTPUT, REPARTITION, changelog_role
from kstool.streams.accumulators import output_value, stored_number
from kstool.streams.fields import json_field
from kstool.streams.headers import Headers, headers_of, stored_headers
from kstool.streams.indexes import MIN_BUCKET_MS, TimeIndex
from kstool.streams.key_mappers import KeyMapper, key_mapper
from kstool.streams.task import Record, StoreValue, TableStores, TaskState
from kstool.streams.versioned_table import TABLE_TIME, VersionedTable

TABLE, STORE, BUFFER, INDEX = "table", "aggregate", "suppress-buffer", "suppress-index"
TABLE_INDEX = "table-index"  # a versioned table's observed time
AGGREGATIONS = ("count", "sum")  # what a subtractor can take back
BUFFERED = b"B"  # the index store: buffered groups by the time they entered
TIME = struct.Struct(">q")
# a buffered update: the time its group entered the buffer, then 1 and its value, or 0 (a tombstone)
PRESENT, ABSENT = b"\x01", b"\x00"
NO_LIMIT = 2**62
GROUP_BY_FORMS = ("key", "value", "field", "split")  # a row's group


# a change sent to the group's task: which of the old and new numbers it has, then both
CHANGE = struct.Struct(">Bdd")
HAS_OLD, HAS_NEW = 1, 2


@dataclass(frozen=True, slots=True)
class Change:
    """KTableRepartitionMap's output: a group's number taken back (old) and/or added (new)."""

    group: bytes
    new: float | None
    old: float | None
    timestamp: int
    headers: Headers = None  # the row update's: what the group's output forwards (not encoded: they travel beside)

    def encode(self) -> bytes:
        flags = (HAS_OLD if self.old is not None else 0) | (HAS_NEW if self.new is not None else 0)
        return CHANGE.pack(flags, self.old or 0.0, self.new or 0.0)

    @classmethod
    def decode(cls, record: Record) -> "Change":
        flags, old, new = CHANGE.unpack(cast(bytes, record.value))
        return cls(cast(bytes, record.key), new if flags & HAS_NEW else None, old if flags & HAS_OLD else None,
                   record.timestamp, record.headers)


@dataclass
class RowChanges(TableStores):
    """Sub-topology 0: the rows of one input partition, and each update's changes to groups."""

    agg: str  # count | sum
    group_by: str  # key | value | field:PATH | split:SEP:N (kstool.streams.key_mappers)
    value_field: str | None = None  # sum: a JSON field of the row; None: the row as a number
    history: int | None = None  # ms: a versioned table keeping each row's versions this long
    stores: tuple[str, ...] = (TABLE,)
    indexes: tuple[str, ...] = field(init=False)
    group_mapper: KeyMapper = field(init=False)
    cached_roles: frozenset[str] = field(init=False)
    history_stores: tuple[str, ...] = field(init=False)  # restored by replaying their changelog whole
    versions: VersionedTable | None = field(init=False)

    def __post_init__(self) -> None:
        self.group_mapper = key_mapper(self.group_by, "--group-by", GROUP_BY_FORMS)
        self.indexes = (TABLE_INDEX,) if self.history is not None else ()
        self.versions = None if self.history is None else VersionedTable(TABLE, TABLE_INDEX, self.history)
        self.history_stores = () if self.versions is None else (TABLE,)
        # a versioned table's changelog has every record (ChangeLoggingVersionedKeyValueBytesStore)
        self.cached_roles = frozenset({changelog_role(TABLE)} if self.versions is None else set())

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        rows = {r.key for r in records if r.key is not None}
        return {TABLE: rows} if self.versions is None else {TABLE: rows, TABLE_INDEX: {TABLE_TIME}}

    def replay(self, state: TaskState, store: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        """A restore: one record of the versioned table's changelog, in changelog order."""
        cast(VersionedTable, self.versions).put(state, key, value, timestamp)

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        for change in self.changes(records, state):
            state.emit(change.group, change.encode(), change.timestamp, REPARTITION, headers=change.headers)

    def group_of(self, key: bytes, value: bytes) -> tuple[bytes, float] | None:
        """KTableRepartitionMap's mapper: the row's group and its number (count: 1), or None
        when it has no group (or, for a sum, no number)."""
        group = self.group_mapper(key, value)
        if group is None:
            return None
        if self.agg == "count":
            return group, 1.0
        number = json_field(value, self.value_field) if self.value_field else value.decode("utf-8", "replace")
        try:
            return group, float(cast(str, number))
        except (TypeError, ValueError):
            return None

    def changes(self, records: list[Record], state: TaskState) -> list[Change]:
        """Each update's changes, in order: one when the row stays in its group, else the old
        group's (taken back) before the new group's (added)."""
        changes: list[Change] = []
        for record in records:
            if record.key is None:
                continue  # KTableSource drops it
            changes_groups, old = self._update_row(state, record)
            if not changes_groups:
                continue
            old_pair = self.group_of(record.key, old) if old is not None else None
            new_pair = self.group_of(record.key, record.value) if record.value is not None else None
            if old_pair and new_pair and old_pair[0] == new_pair[0]:
                changes.append(Change(old_pair[0], new_pair[1], old_pair[1], record.timestamp, record.headers))
                continue
            if old_pair:
                changes.append(Change(old_pair[0], None, old_pair[1], record.timestamp, record.headers))
            if new_pair:
                changes.append(Change(new_pair[0], new_pair[1], None, record.timestamp, record.headers))
        return changes

    def _update_row(self, state: TaskState, record: Record) -> tuple[bool, bytes | None]:
        """The row's update into the table: whether it changes groups (not a tombstone for no
        row; over a versioned table, the row's latest version), and the row's old value."""
        key = cast(bytes, record.key)
        if self.versions is not None:
            entry = self.versions.latest(state, key)
            latest = self.versions.write(state, key, record.value, record.timestamp)
            return latest and (entry is not None or record.value is not None), None if entry is None else entry.value
        entry = state.get(TABLE, key)
        if record.value is None and entry is None:
            return False, None
        if record.value is None:
            state.delete(TABLE, key, record.timestamp)
        else:
            state.put(TABLE, key, StoreValue(record.value, record.timestamp))
        return True, None if entry is None else entry.value


@dataclass
class GroupAggregate(TableStores):
    """Sub-topology 1: the groups of one repartition partition; the changes sent to them
    aggregated and written (suppressed: when they have waited)."""

    agg: str  # count | sum
    value_format: str = "auto"
    suppress_ms: int | None = None  # untilTimeLimit; None: no time limit (with suppress_records)
    suppress_records: int | None = None  # maxRecords(N).emitEarlyWhenFull()
    index_bucket_ms: int = MIN_BUCKET_MS
    stores: tuple[str, ...] = field(init=False)
    indexes: tuple[str, ...] = field(init=False)
    cached_roles: frozenset[str] = frozenset({changelog_role(STORE)})

    def __post_init__(self) -> None:
        self.stores = (STORE, BUFFER) if self.suppressed else (STORE,)
        self.indexes = (INDEX,) if self.suppressed else ()

    @property
    def suppressed(self) -> bool:
        return self.suppress_ms is not None or self.suppress_records is not None

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        return {STORE: {cast(bytes, r.key) for r in records}}

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        self.apply([Change.decode(record) for record in records], state)

    def apply(self, changes: list[Change], state: TaskState) -> None:
        """The changes aggregated; each group's latest value written (or buffered) once, with the
        headers of the row update that made it (the record cache's entry keeps its context)."""
        flushed: dict[bytes, tuple[bytes | None, int, Headers]] = {}  # the record cache: each group's latest
        for change in changes:
            self._aggregate(state, flushed, change)
        for group, (value, ts, headers) in flushed.items():
            if self.suppressed:
                self._suppress(state, group, value, ts, headers)
            else:
                state.emit(group, value, ts, headers=headers)

    def _aggregate(self, state: TaskState, flushed: dict[bytes, tuple[bytes | None, int, Headers]],
                   change: Change) -> None:
        """KTableAggregate#process: the old number taken back, then the new one added."""
        group, new, old, ts = change.group, change.new, change.old, change.timestamp
        entry = state.get(STORE, group)
        current = None if entry is None else stored_number(cast(bytes, entry.value), self.value_format)
        result, newest = current, ts
        if old is not None and current is not None:
            result, newest = current - old, max(ts, cast(StoreValue, entry).timestamp)
        if new is not None:
            result = (result or 0) + new
            newest = max(ts, entry.timestamp) if entry is not None else ts
        value = None if result is None else output_value(self.agg, result, float(result).is_integer(),
                                                         self.value_format)
        if value is None:
            state.delete(STORE, group, newest)
        else:
            state.put(STORE, group, StoreValue(value, newest))  # the output's serde (one for both)
        flushed.pop(group, None)  # re-inserted: the cache's order is that of the last update
        flushed[group] = (value, newest, change.headers)

    def _suppress(self, state: TaskState, group: bytes, value: bytes | None, ts: int, headers: Headers) -> None:
        """KTableSuppressProcessor#process: buffer the update (a group already waiting keeps
        its place; the entry's aux, its headers: those the evicted record carries), then evict
        what waited long enough and, beyond the record limit, the oldest."""
        buffered = self._buffer(state)
        stream_time = state.advance(ts)
        held = state.get(BUFFER, group)
        since = TIME.unpack(cast(bytes, held.value)[:TIME.size])[0] if held is not None else ts
        if held is None:
            buffered.add(since, group)
        state.put(BUFFER, group, StoreValue(TIME.pack(since) + (ABSENT if value is None else PRESENT + value), ts,
                                            stored_headers(headers)))
        due = buffered.take(stream_time - self.suppress_ms + 1) if self.suppress_ms is not None else []
        waiting = len(state.stores[BUFFER])  # the store counts its entries (a shard directory's count)
        over = waiting - len(due) - (self.suppress_records if self.suppress_records is not None else NO_LIMIT)
        if over > 0:  # emitEarlyWhenFull: the oldest of the rest too
            rest = buffered.take(NO_LIMIT)
            due, kept = due + rest[:over], rest[over:]
            for since_time, kept_group in kept:
                buffered.add(since_time, kept_group)
        for _, due_group in due:
            entry = cast(StoreValue, state.get(BUFFER, due_group))
            data = cast(bytes, entry.value)[TIME.size:]
            state.emit(due_group, data[1:] if data[:1] == PRESENT else None, entry.timestamp, OUTPUT,
                       headers=headers_of(entry.aux))
            state.delete(BUFFER, due_group, entry.timestamp)

    def _buffer(self, state: TaskState) -> TimeIndex:
        found = state.index.get("suppress")
        if found is None:
            found = TimeIndex(state, INDEX, BUFFERED, self.index_bucket_ms)
            if not found.exists:  # restored: the buffer without its index
                for group, entry in state.stores[BUFFER].items():
                    found.add(TIME.unpack(cast(bytes, entry.value)[:TIME.size])[0], group)
            state.index["suppress"] = found
        return cast(TimeIndex, found)


@dataclass
class TableAggregate(TableStores):
    """Both stages in one task, as TopologyTestDriver runs the two sub-topologies: what the
    spread run (kstool.topologies.table_aggregate) is checked against."""

    agg: str
    group_by: str
    value_field: str | None = None
    value_format: str = "auto"
    suppress_ms: int | None = None
    suppress_records: int | None = None
    history: int | None = None
    index_bucket_ms: int = MIN_BUCKET_MS
    rows: RowChanges = field(init=False)
    groups: GroupAggregate = field(init=False)
    stores: tuple[str, ...] = field(init=False)
    indexes: tuple[str, ...] = field(init=False)
    cached_roles: frozenset[str] = field(init=False)
    history_stores: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.rows = RowChanges(self.agg, self.group_by, self.value_field, self.history)
        self.groups = GroupAggregate(self.agg, self.value_format, self.suppress_ms, self.suppress_records,
                                     self.index_bucket_ms)
        self.stores = self.rows.stores + self.groups.stores
        self.indexes = self.groups.indexes + self.rows.indexes
        self.cached_roles = self.rows.cached_roles | self.groups.cached_roles
        self.history_stores = self.rows.history_stores

    def stages(self) -> tuple[RowChanges, GroupAggregate]:
        """What a task of each stage runs (kstool.tasks.processor.run_stages)."""
        return self.rows, self.groups

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        return self.rows.reads(records)

    def replay(self, state: TaskState, store: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        self.rows.replay(state, store, key, value, timestamp)

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        self.groups.apply(self.rows.changes(records, state), state)
