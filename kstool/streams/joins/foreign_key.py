"""A foreign-key table-table join (Kafka Streams' KTable#join(other, foreignKeyExtractor, joiner),
KIP-213; apache/kafka trunk as of 2024-10, kstream/internals/foreignkeyjoin): a left row joins
the right row its foreign key names, and a right row's change reaches every left row that names
it.

Kafka Streams runs it as messages between two tasks: a left change sends subscription
instructions to the foreign key's task (SubscriptionSendProcessorSupplier), which keeps the
subscription and answers with the right value (SubscriptionJoinProcessorSupplier); a right
change answers every subscription of its key (ForeignTableJoinProcessorSupplier); the left task
turns answers into results (ResponseJoinProcessorSupplier, which drops answers to a left value
that has changed since). Here both tables and the subscriptions live in one task and every
message is handled at once, in the same order, so no answer is ever stale.

Over versioned tables (`history`: both tables Stores.persistentVersionedKeyValueStore, KIP-914),
an update older than its key's latest version (a tombstone's too), or than its table's newest
update - history, is kept as a version and changes no result (SubscriptionSendProcessorSupplier
and ForeignTableJoinProcessorSupplier skip a change that is not the latest); with no record
cache in front of a versioned store, a delete of nothing is passed on like any change.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable, cast

from kstool.contract import OUTPUT, changelog_role
from kstool.streams.indexes import KeyIndex
from kstool.streams.joins.joiners import Joiner
from kstool.streams.task import LEFT, Record, RecordByRecord, StoreValue, TableStores, TaskState
from kstool.streams.versioned_table import VersionedTable

LEFT_TABLE, RIGHT_TABLE, SUBSCRIPTIONS, INDEX = "join-left-table", "join-right-table", "join-subscriptions", "join-fk-index"
# the index store: a foreign key -> its subscriptions; whether it was built (a restored store has
# none); versioned tables' observed times
BY_FOREIGN_KEY, BUILT, LEFT_TIME, RIGHT_TIME = b"F", b"built", b"TL", b"TR"
# SubscriptionWrapper.Instruction
DELETE_AND_PROPAGATE, DELETE_NO_PROPAGATE, PROPAGATE_NULL, PROPAGATE_IF_FOUND = range(4)
ForeignKey = Callable[[bytes], bytes | None]


def subscription_key(foreign_key: bytes, key: bytes) -> bytes:
    """CombinedKeySchema: the foreign key's length (4 bytes), the foreign key, the left key."""
    return struct.pack(">i", len(foreign_key)) + foreign_key + key


def split_subscription_key(data: bytes) -> tuple[bytes, bytes]:
    size = struct.unpack(">i", data[:4])[0]
    return data[4:4 + size], data[4 + size:]


@dataclass
class ForeignKeyJoin(TableStores, RecordByRecord):
    how: str  # inner | left
    foreign_key: ForeignKey
    joiner: Joiner
    history: int | None = None  # ms: both tables versioned, keeping each key's versions this long
    stores: tuple[str, ...] = (LEFT_TABLE, RIGHT_TABLE, SUBSCRIPTIONS)
    indexes: tuple[str, ...] = (INDEX,)
    cached_roles: frozenset[str] = field(init=False)
    history_stores: tuple[str, ...] = field(init=False)  # restored by replaying their changelog whole
    versions: dict[str, VersionedTable] = field(init=False)

    def __post_init__(self) -> None:
        self.versions = {} if self.history is None else {
            LEFT_TABLE: VersionedTable(LEFT_TABLE, INDEX, self.history, LEFT_TIME),
            RIGHT_TABLE: VersionedTable(RIGHT_TABLE, INDEX, self.history, RIGHT_TIME)}
        self.history_stores = tuple(self.versions)
        # the result is a KTable: per batch each key's last result (the record cache); a
        # versioned table's changelog has every record
        self.cached_roles = frozenset({OUTPUT, *(changelog_role(s) for s in (LEFT_TABLE, RIGHT_TABLE, SUBSCRIPTIONS)
                                                 if s not in self.versions)})

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        left = {r.key for r in records if r.side == LEFT and r.key is not None}
        right = {r.key for r in records if r.side != LEFT and r.key is not None}
        return {LEFT_TABLE: left, RIGHT_TABLE: right,
                INDEX: {BUILT, LEFT_TIME, RIGHT_TIME} | {BY_FOREIGN_KEY + k for k in right}}

    def replay(self, state: TaskState, store: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        """A restore: one record of a versioned table's changelog, in changelog order."""
        self.versions[store].put(state, key, value, timestamp)

    def _row(self, state: TaskState, table: str, key: bytes) -> StoreValue | None:
        """A table's row (a versioned table's latest version; None: none, or a tombstone)."""
        versions = self.versions.get(table)
        return state.get(table, key) if versions is None else versions.latest(state, key)

    def _update(self, state: TaskState, table: str, key: bytes, value: bytes | None,
                ts: int) -> tuple[bool, StoreValue | None]:
        """The record into its table: whether it changes anything (not a delete of nothing,
        which a record cache does not forward; a versioned table's latest version), and the
        row it replaced."""
        old = self._row(state, table, key)
        versions = self.versions.get(table)
        if versions is not None:
            return versions.write(state, key, value, ts), old
        if old is None and value is None:
            return False, None
        if value is None:
            state.delete(table, key, ts)
        else:
            state.put(table, key, StoreValue(value, ts))
        return True, old

    def process(self, record: Record, state: TaskState) -> None:
        if record.key is None:
            return  # KTableSource drops it
        if record.side == LEFT:
            self._left(state, record.key, record.value, record.timestamp)
        else:
            self._right(state, record.key, record.value, record.timestamp)

    def _left(self, state: TaskState, key: bytes, value: bytes | None, ts: int) -> None:
        changes, old = self._update(state, LEFT_TABLE, key, value, ts)
        if not changes:
            return
        for foreign_key, instruction in self._instructions(old.value if old else None, value):
            self._subscribe(state, key, ts, foreign_key, instruction)

    def _instructions(self, old: bytes | None, new: bytes | None) -> list[tuple[bytes | None, int]]:
        """SubscriptionSendProcessorSupplier's leftJoinInstructions / defaultJoinInstructions, as
        Kafka Streams 4.4 has them (javap; a row whose foreign key stays asks for a result only
        if the right row exists: no tombstone for a result that never was)."""
        old_fk: bytes | None = self.foreign_key(old) if old is not None else None
        new_fk = self.foreign_key(new) if new is not None else None
        if self.how == "left":
            if old is None and new is None:
                return []  # a delete of nothing (a versioned table passes it on)
            moved = [(old_fk, DELETE_NO_PROPAGATE)] if old_fk is not None and new_fk != old_fk else []
            return moved + [(new_fk, PROPAGATE_NULL)]
        if new_fk is None:  # deleted, or no foreign key now
            return [(old_fk, DELETE_AND_PROPAGATE)] if old_fk is not None else []
        if old_fk is not None and new_fk != old_fk:
            return [(old_fk, DELETE_NO_PROPAGATE), (new_fk, PROPAGATE_NULL)]
        return [(new_fk, PROPAGATE_IF_FOUND)]

    def _subscribe(self, state: TaskState, key: bytes, ts: int, foreign_key: bytes | None, instruction: int) -> None:
        """SubscriptionReceiveProcessorSupplier (keep or drop the subscription), then
        SubscriptionJoinProcessorSupplier (answer with the right value)."""
        right = self._row(state, RIGHT_TABLE, foreign_key) if foreign_key is not None else None
        if foreign_key is not None:
            subscription, by_foreign_key = subscription_key(foreign_key, key), self._index(state)
            if instruction in (DELETE_AND_PROPAGATE, DELETE_NO_PROPAGATE):
                state.delete(SUBSCRIPTIONS, subscription, ts)
                by_foreign_key.discard(foreign_key, subscription)
            else:
                state.put(SUBSCRIPTIONS, subscription, StoreValue(b"", ts))
                by_foreign_key.add(foreign_key, subscription)
        if instruction == DELETE_NO_PROPAGATE or (instruction == PROPAGATE_IF_FOUND and right is None):
            return
        answer = right.value if right is not None and instruction != DELETE_AND_PROPAGATE else None
        self._respond(state, key, answer, max(ts, right.timestamp) if right is not None else ts)

    def _right(self, state: TaskState, foreign_key: bytes, value: bytes | None, ts: int) -> None:
        """ForeignTableJoinProcessorSupplier: every subscription of the key gets the new value
        (a delete too), in the subscription store's order."""
        if not self._update(state, RIGHT_TABLE, foreign_key, value, ts)[0]:
            return
        subscriptions = sorted(self._index(state).get(foreign_key))
        if subscriptions:
            state.prefetch(LEFT_TABLE, (split_subscription_key(s)[1] for s in subscriptions))
        for subscription in subscriptions:
            self._respond(state, split_subscription_key(subscription)[1], value, ts)

    def _respond(self, state: TaskState, key: bytes, foreign: bytes | None, ts: int) -> None:
        """ResponseJoinProcessorSupplier: the join of the left row as it is now."""
        current = self._row(state, LEFT_TABLE, key)
        if foreign is None and (self.how != "left" or current is None):
            state.emit(key, None, ts)
        else:
            state.emit(key, self.joiner(current.value if current is not None else None, foreign), ts)

    def _index(self, state: TaskState) -> KeyIndex:
        found = state.index.get("fk")
        if found is None:
            found = KeyIndex(state, INDEX, BY_FOREIGN_KEY)
            if state.get(INDEX, BUILT) is None:  # restored: the subscriptions without their index
                for subscription in list(state.stores[SUBSCRIPTIONS]):
                    found.add(split_subscription_key(subscription)[0], subscription)
                state.put(INDEX, BUILT, StoreValue(b"", 0), log=False)
            state.index["fk"] = found
        return cast(KeyIndex, found)
