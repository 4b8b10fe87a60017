"""table-table joins (KTableKTableJoin and its left/outer variants): every change on either side
emits the new join result (a tombstone when the result is gone), with the later timestamp of the
two sides. With a record cache (`cache_max_bytes`, Kafka Streams' statestore.cache.max.bytes) the
source tables' caches collapse each key's updates within a batch: at the batch's end the left
table's cache is flushed, then the right's (their order in the task), and each flushed key joins
the other table as it is then (Kafka Streams reads it through its cache). Where Kafka Streams
leaves a join result standing that its tables no longer give, kstool does not (on purpose,
docs/differences-from-kafka-streams.md): a full cache flushes both tables, not only the one
being written, and a row deleted since its table's last flush deletes its result even when the
other table's row went in the same interval."""

from __future__ import annotations

from dataclasses import dataclass

from kstool.contract import OUTPUT, changelog_role
from kstool.streams.headers import Headers
from kstool.streams.joins.joiners import Joiner, joined
from kstool.streams.record_cache import RecordCache, last_per_key
from kstool.streams.task import LEFT, RIGHT, Emitted, Record, RecordByRecord, StoreValue, StoreWriter, TableStores, TaskState


@dataclass
class TableTableJoin(TableStores, RecordByRecord):
    how: str
    joiner: Joiner
    cache_max_bytes: int = 0  # 0: every update joins and is written as it comes
    stores: tuple[str, ...] = ("join-left-table", "join-right-table")
    indexes: tuple[str, ...] = ()
    cached_roles: frozenset[str] = frozenset()  # its record cache is its own (_process_cached)

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        keys = {r.key for r in records if r.key is not None}
        return {name: keys for name in self.stores}

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        """`process()` per record, in one loop (as StreamTableJoin's); its oracle is `process()`."""
        if state.cached_roles:
            super().process_batch(records, state)
            return
        if self.cache_max_bytes:
            self._process_cached(records, state)
            return
        tables = (StoreWriter(state, self.stores[LEFT]), StoreWriter(state, self.stores[RIGHT]))
        gets = (tables[LEFT].table.get, tables[RIGHT].table.get)
        out = state.out
        for record in records:
            key, value, side = record.key, record.value, record.side
            if key is None or tables[side].write(key, value, record.timestamp) is None:
                continue
            result = self._result(side, key, value, record.timestamp, record.headers, gets[1 - side](key))
            if result is not None:
                out.append(result)

    def _process_cached(self, records: list[Record], state: TaskState) -> None:
        """The tables take every update at once (a lookup sees the latest, as through Kafka
        Streams' cache); their changelogs and the join see each key's last update per flush."""
        tables = (StoreWriter(state, self.stores[LEFT], logged=False), StoreWriter(state, self.stores[RIGHT], logged=False))
        cache = RecordCache(self.cache_max_bytes, 2)
        last = last_per_key(records)
        if cache.holds_all(records, last):  # flushed only at the end: each key's last update is all that counts
            records = last
        for record in records:
            key, side = record.key, record.side
            if key is None:
                continue
            existed = tables[side].write(key, record.value, record.timestamp)
            if existed is not None and cache.put(side, key, record.value, record.timestamp, record.headers, existed):
                # the other table too: a row of it that the first flush joined, then deleted
                # before its own flush, would leave that result standing (Kafka Streams' does)
                self._flush((side, 1 - side), cache, state)
        self._flush((LEFT, RIGHT), cache, state)

    def _flush(self, sides: tuple[int, int], cache: RecordCache, state: TaskState) -> None:
        # keys changed on both sides since the last flush: a row deleted on one of them deletes its
        # result even when the other row went too (Kafka Streams' inner join then writes nothing:
        # KTableKTableInnerJoin returns on a null other side)
        both = cache.pending[LEFT].keys() & cache.pending[RIGHT].keys()
        for side in sides:
            store, other = self.stores[side], state.stores[self.stores[1 - side]]
            role = changelog_role(store)
            for key, update in cache.flush(side):
                state.out.append(Emitted(role, key, update.value, update.timestamp, store, key))
                result = self._result(side, key, update.value, update.timestamp, update.headers, other.get(key))
                if result is None and update.value is None and key in both:
                    both.discard(key)
                    result = Emitted(OUTPUT, key, None, update.timestamp, headers=update.headers)
                if result is not None:
                    state.out.append(result)

    def _result(self, side: int, key: bytes, value: bytes | None, ts: int, headers: Headers,
                other: StoreValue | None) -> Emitted | None:
        """The join's output for a table update (a tombstone when the result is gone), None for none."""
        how = self.how
        if other is None:
            if how == "inner" or (how == "left" and side == RIGHT):
                return None  # no join result before, none now
            other_value = None
        else:
            other_value = other.value
            ts = max(ts, other.timestamp)
        if value is None and (how == "inner" or (how == "left" and side == LEFT) or other_value is None):
            return Emitted(OUTPUT, key, None, ts, headers=headers)  # the join result is gone
        return Emitted(OUTPUT, key, joined(self.joiner, side, value, other_value), ts, headers=headers)

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
