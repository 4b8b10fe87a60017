"""stream-table joins (KStreamKTableJoin): a stream record joins the table's value for its key at
that point (the table side is processed in timestamp order with the stream, so "at the
record's time"); table updates emit nothing. Against a versioned table:
kstool.streams.joins.versioned_stream_table."""

from __future__ import annotations

from dataclasses import dataclass

from kstool.contract import OUTPUT
from kstool.streams.joins.joiners import Joiner
from kstool.streams.task import RIGHT, Emitted, Record, RecordByRecord, StoreValue, StoreWriter, TableStores, TaskState


@dataclass
class StreamTableJoin(TableStores, RecordByRecord):
    how: str  # inner | left
    joiner: Joiner
    stores: tuple[str, ...] = ("join-right-table",)
    indexes: tuple[str, ...] = ()
    cached_roles: frozenset[str] = frozenset()

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        return {self.stores[0]: {r.key for r in records if r.key is not None}}

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        """`process()` per record, in one loop without TaskState's calls per record; its oracle
        is `process()` (tests/streams/joins/test_joiners.py)."""
        if state.cached_roles:  # not this join's (a KStream's results are not cached): as defined
            super().process_batch(records, state)
            return
        table = StoreWriter(state, self.stores[0])
        get, out, joiner, left = table.table.get, state.out, self.joiner, self.how == "left"
        for record in records:
            key, value = record.key, record.value
            if key is None:  # a left join keeps a stream record without a key (KIP-962), a table drops it
                if left and record.side != RIGHT and value is not None:
                    out.append(Emitted(OUTPUT, None, joiner(value, None), record.timestamp, headers=record.headers))
                continue
            if record.side == RIGHT:
                table.write(key, value, record.timestamp)
            elif value is not None:
                right = get(key)
                if right is not None:
                    out.append(Emitted(OUTPUT, key, joiner(value, right.value), record.timestamp,
                                           headers=record.headers))
                elif left:
                    out.append(Emitted(OUTPUT, key, joiner(value, None), record.timestamp, headers=record.headers))

    def process(self, record: Record, state: TaskState) -> None:
        if record.key is None:  # a left join keeps a stream record without a key (KIP-962), a table drops it
            if self.how == "left" and record.side != RIGHT and record.value is not None:
                state.emit(None, self.joiner(record.value, None), record.timestamp, headers=record.headers)
            return
        table = self.stores[0]
        if record.side == RIGHT:
            if record.value is None:
                state.delete(table, record.key, record.timestamp)
            else:
                state.put(table, record.key, StoreValue(record.value, record.timestamp))
            return
        if record.value is None:
            return
        right = state.get(table, record.key)
        if right is not None or self.how == "left":
            state.emit(record.key, self.joiner(record.value, right.value if right else None), record.timestamp,
                       headers=record.headers)
