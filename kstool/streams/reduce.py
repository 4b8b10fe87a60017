"""Text aggregates per key (Kafka Streams' KStreamReduce, apache/kafka trunk as of 2024-10):
`concat` joins a key's values with a separator in processing order (reduce((a, b) -> a + sep +
b)), `latest` keeps the last one (reduce((a, b) -> b)). A record with a null key or value is
skipped; an update's timestamp is the later of the record's and the aggregate's, its headers the
record's. Per batch each key's latest update is written (the record cache)."""

from __future__ import annotations

from dataclasses import dataclass

from kstool.contract import OUTPUT, changelog_role
from kstool.streams.accumulators import TextAccumulator
from kstool.streams.task import Record, RecordByRecord, StoreValue, TableStores, TaskState
from kstool.streams.window_aggregation import STORE


@dataclass
class TextReduce(TableStores, RecordByRecord):
    agg: str  # concat | latest
    separator: bytes = b","
    stores: tuple[str, ...] = (STORE,)
    indexes: tuple[str, ...] = ()
    cached_roles: frozenset[str] = frozenset({OUTPUT, changelog_role(STORE)})

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        return {STORE: {r.key for r in records if r.key is not None}}

    def process(self, record: Record, state: TaskState) -> None:
        if record.key is None or record.value is None:
            return
        old = state.get(STORE, record.key)
        acc = TextAccumulator(None if self.agg == "latest" else self.separator, old.value if old else None)
        acc.add(record.value)
        timestamp = max(record.timestamp, old.timestamp) if old else record.timestamp
        state.put(STORE, record.key, StoreValue(acc.text, timestamp))
        state.emit(record.key, acc.text, timestamp, headers=record.headers)
