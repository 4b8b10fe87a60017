"""table-table joins (KTableKTableJoin and its left/outer variants): every change on either side
emits the new join result (a tombstone when the result is gone), with the later timestamp of the
two sides."""

from __future__ import annotations

from dataclasses import dataclass

from kstool.contract import OUTPUT
from kstool.streams.joins.joiners import Joiner, joined
from kstool.streams.task import LEFT, RIGHT, Emitted, Record, RecordByRecord, StoreValue, StoreWriter, TableStores, TaskState


@dataclass
class TableTableJoin(TableStores, RecordByRecord):
    how: str
    joiner: Joiner
    stores: tuple[str, ...] = ("join-left-table", "join-right-table")
    indexes: tuple[str, ...] = ()
    cached_roles: frozenset[str] = frozenset()  # "every update on either side emits"

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        keys = {r.key for r in records if r.key is not None}
        return {name: keys for name in self.stores}

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        """`process()` per record, in one loop (as StreamTableJoin's); its oracle is `process()`."""
        if state.cached_roles:
            super().process_batch(records, state)
            return
        tables = (StoreWriter(state, self.stores[LEFT]), StoreWriter(state, self.stores[RIGHT]))
        gets = (tables[LEFT].table.get, tables[RIGHT].table.get)
        out, joiner, how = state.out, self.joiner, self.how
        for record in records:
            key, value, side, ts = record.key, record.value, record.side, record.timestamp
            if key is None or not tables[side].write(key, value, ts):
                continue
            other = gets[1 - side](key)
            if other is None:
                if how == "inner" or (how == "left" and side == RIGHT):
                    continue  # no join result before, none now
                other_value = None
            else:
                other_value = other.value
                ts = max(ts, other.timestamp)
            if value is None and (how == "inner" or (how == "left" and side == LEFT) or other_value is None):
                out.append(Emitted(OUTPUT, key, None, ts, headers=record.headers))  # the join result is gone
            else:
                out.append(Emitted(OUTPUT, key, joined(joiner, side, value, other_value), ts,
                                   headers=record.headers))

    def process(self, record: Record, state: TaskState) -> None:
        if record.key is None:
            return
        this_store, other_store = self.stores[record.side], self.stores[1 - record.side]
        old = state.get(this_store, record.key)
        if record.value is None and old is None:
            return  # deleting a key the table does not have changes nothing
        if record.value is None:
            state.delete(this_store, record.key, record.timestamp)
        else:
            state.put(this_store, record.key, StoreValue(record.value, record.timestamp))
        other = state.get(other_store, record.key)
        if other is None and (self.how == "inner" or (self.how == "left" and record.side == RIGHT)):
            return  # no join result before, none now
        ts = max(record.timestamp, other.timestamp) if other else record.timestamp
        other_value = other.value if other else None
        left_needed = self.how == "inner" or (self.how == "left" and record.side == LEFT)
        if record.value is None and (left_needed or other_value is None):
            state.emit(record.key, None, ts, headers=record.headers)  # the join result is gone
            return
        state.emit(record.key, joined(self.joiner, record.side, record.value, other_value), ts,
                   headers=record.headers)
