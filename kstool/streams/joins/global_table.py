"""A stream joined with a GlobalKTable (Kafka Streams' KStreamGlobalKTableJoin:
KStreamKTableJoinProcessor with the global table's value getter, apache/kafka trunk as of
2024-10): each stream record's join key comes from a key mapper (its key, or a field of its
value), so the two topics need not be co-partitioned: every task holds the whole table.

Kafka Streams fills a global table before it processes any record and then keeps it current
apart from stream time; here each batch's table records go into the table before the batch's
stream records are joined. A stream record with a null value, or whose mapper gives no key, is
skipped, except that a left join keeps a record without a key of its own; table tombstones
delete; table updates emit nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from kstool.streams.joins.joiners import Joiner
from kstool.streams.key_mappers import KeyMapper
from kstool.streams.task import LEFT, Record, StoreValue, TableStores, TaskState

GLOBAL = "join-global-table"


@dataclass
class GlobalTableJoin(TableStores):
    how: str  # inner | left
    mapper: KeyMapper  # the table key a stream record joins (--global-key)
    joiner: Joiner
    stores: tuple[str, ...] = (GLOBAL,)
    indexes: tuple[str, ...] = ()
    cached_roles: frozenset[str] = frozenset()  # join results are a KStream

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        return {GLOBAL: {r.key for r in records if r.side != LEFT and r.key is not None}}

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        for record in records:
            if record.side != LEFT:
                self._update(record, state)
        # the rows the stream records name are known once mapped: asked for here, at once
        stream = [(r, self.mapper(r.key, r.value)) for r in records if r.side == LEFT and r.value is not None]
        state.prefetch(GLOBAL, {mapped for _, mapped in stream if mapped is not None})
        for record, mapped in stream:
            self._join(record, mapped, state)

    def _update(self, record: Record, state: TaskState) -> None:
        if record.key is None:
            return
        if record.value is None:
            state.delete(GLOBAL, record.key, record.timestamp)
        else:
            state.put(GLOBAL, record.key, StoreValue(record.value, record.timestamp))

    def _join(self, record: Record, mapped: bytes | None, state: TaskState) -> None:
        """A stream record with a value (KStreamKTableJoinProcessor#maybeDropRecord, #doJoin)."""
        if mapped is None and not (self.how == "left" and record.key is None):
            return
        right = state.get(GLOBAL, mapped) if mapped is not None else None
        if right is not None or self.how == "left":
            state.emit(record.key, self.joiner(cast(bytes, record.value), right.value if right else None),
                       record.timestamp, headers=record.headers)
