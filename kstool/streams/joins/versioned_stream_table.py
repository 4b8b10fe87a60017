"""A stream-table join against a versioned table (Kafka Streams' KIP-914 joins; the table:
kstool.streams.versioned_table): each stream record joins the table row valid at the record's
timestamp, not the latest one, so reprocessing last week enriches old records with last week's
rows.

With a grace (Joined.withGracePeriod), stream records wait in a buffer
(RocksDBTimeOrderedKeyValueBuffer) until the buffer's observed time - grace reaches them, then
join in (time, key, seqnum) order; a record already that late joins at once. A left join writes
a stream record without a key at once, joined with nothing (KIP-962; Kafka Streams 4.4 fails the
task on one when a grace is set: its buffer takes no null key, docs/differences-from-kafka-streams.md ("Differences from Kafka
Streams").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import cast

from kstool.streams.headers import Headers, headers_of, stored_headers
from kstool.streams.indexes import MIN_BUCKET_MS, TimeIndex
from kstool.streams.joins.joiners import Joiner
from kstool.streams.task import LEFT, Record, RecordByRecord, StoreValue, TableStores, TaskState
from kstool.streams.versioned_table import TABLE_TIME, TIME, VersionedTable

TABLE, BUFFER, INDEX = "join-right-table", "join-stream-buffer", "join-index"
BUFFERED = b"B"  # the index store's entry: the buffer's records by time
SEQNUM = struct.Struct(">I")


def buffer_key(key: bytes, timestamp: int, seqnum: int) -> bytes:
    """Kafka Streams' TimeFirstWindowKeySchema: time ‖ key ‖ seqnum."""
    return TIME.pack(timestamp) + key + SEQNUM.pack(seqnum)


def split_buffer_key(data: bytes) -> tuple[bytes, int]:
    return data[TIME.size:-SEQNUM.size], TIME.unpack_from(data)[0]


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
                state.emit(None, self.joiner(record.value, None), record.timestamp, headers=record.headers)
            return
        if record.side != LEFT:
            self.table.write(state, record.key, record.value, record.timestamp)
            return
        if record.value is None:
            return
        buffer = self._buffered(state)
        if not self.grace or buffer.newest - self.grace > record.timestamp:
            self._join(state, record.key, record.value, record.timestamp, record.headers)
            return
        state.sequence = (state.sequence + 1) % 2**31
        waiting = buffer_key(record.key, record.timestamp, state.sequence)
        # it keeps its headers, which its result carries (Kafka Streams' buffer keeps the record's context)
        state.put(BUFFER, waiting, StoreValue(record.value, record.timestamp, stored_headers(record.headers)))
        buffer.add(record.timestamp, waiting)
        due = buffer.take(buffer.newest - self.grace + 1)
        if due:
            state.prefetch(BUFFER, (store_key for _, store_key in due))
            state.prefetch(TABLE, (split_buffer_key(store_key)[0] for _, store_key in due))
        for ts, store_key in due:
            entry = cast(StoreValue, state.get(BUFFER, store_key))
            self._join(state, split_buffer_key(store_key)[0], cast(bytes, entry.value), ts,
                       headers_of(entry.stored_aux()))
            state.delete(BUFFER, store_key, record.timestamp)

    def _join(self, state: TaskState, key: bytes, value: bytes, timestamp: int, headers: Headers) -> None:
        right = self.table.get(state, key, timestamp)
        if right is not None or self.how == "left":
            state.emit(key, self.joiner(value, right), timestamp, headers=headers)

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
