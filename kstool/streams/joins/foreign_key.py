"""A foreign-key table-table join (Kafka Streams' KTable#join(other, foreignKeyExtractor, joiner),
KIP-213; apache/kafka trunk as of 2024-10, kstream/internals/foreignkeyjoin): a left row joins
the right row its foreign key names, and a right row's change reaches every left row that names
it.

Kafka Streams runs it as messages between two tasks: a left change sends subscription
instructions to the foreign key's task (SubscriptionSendProcessorSupplier), which keeps the
subscription and answers with the right value (SubscriptionJoinProcessorSupplier); a right
change answers every subscription of its key (ForeignTableJoinProcessorSupplier); the left task
turns answers into results (ResponseJoinProcessorSupplier, which drops answers to a left value
that has changed since). kstool runs three stages of tasks, and no answer is ever stale:

- ForeignKeyRows, a task per input partition (the left rows): each left change's subscription
  instructions, carrying the left row as it now is, to the foreign key's task; each right record
  on to its key's task.
- ForeignKeySubscriptions, a task per foreign key's partition (Kafka's partitioner): the right
  rows and the subscriptions (each keeping its left row), which answer with results.
- LatestResults, a task per left key's partition: each left key's last result of the batch.

Every message carries its input record's place in the order one task would process the batch in
(kstool.streams.task.processing_order: its partition's newest time so far, then the side, the
partition and the offset, which sorts as that merge pops), so each stage processes its share in
that order and the last result of a left key is the one a single task would write last.
ForeignKeyJoin runs the three in one task: the oracle the spread run is checked against.

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

from kstool.contract import OUTPUT, REPARTITION, changelog_role
from kstool.streams.headers import Headers
from kstool.streams.indexes import KeyIndex
from kstool.streams.joins.joiners import Joiner
from kstool.streams.task import LEFT, Record, StoreValue, TableStores, TaskState
from kstool.streams.versioned_table import VersionedTable

LEFT_TABLE, RIGHT_TABLE, SUBSCRIPTIONS, INDEX = "join-left-table", "join-right-table", "join-subscriptions", "join-fk-index"
# the index store: a foreign key -> its subscriptions; whether it was built (a restored store has
# none); versioned tables' observed times
BY_FOREIGN_KEY, BUILT, LEFT_TIME, RIGHT_TIME = b"F", b"built", b"TL", b"TR"
# SubscriptionWrapper.Instruction
DELETE_AND_PROPAGATE, DELETE_NO_PROPAGATE, PROPAGATE_NULL, PROPAGATE_IF_FOUND = range(4)
ForeignKey = Callable[[bytes], bytes | None]
# a message's place: its record's partition's newest time so far, -side, partition, offset, and
# which of the record's messages it is
Order = tuple[int, int, int, int, int]
ORDER = struct.Struct(">qbiqh")
RIGHT_ROW, SUBSCRIBE = 0, 1  # a message's kind
MESSAGE = struct.Struct(">BbBBi")  # kind, instruction, has a key, has a value, the left key's length
RESULT = struct.Struct(">B")  # has a value


def subscription_key(foreign_key: bytes, key: bytes) -> bytes:
    """CombinedKeySchema: the foreign key's length (4 bytes), the foreign key, the left key."""
    return struct.pack(">i", len(foreign_key)) + foreign_key + key


def split_subscription_key(data: bytes) -> tuple[bytes, bytes]:
    size = struct.unpack(">i", data[:4])[0]
    return data[4:4 + size], data[4 + size:]


@dataclass(frozen=True, slots=True)
class Message:
    """From the rows' stage to the subscriptions' task of `key`: a right record (key: the right
    key), or a subscription instruction (key: the foreign key; None: the left row has none)
    with the left row as it now is."""

    order: Order
    kind: int
    key: bytes | None
    left_key: bytes
    instruction: int
    value: bytes | None
    timestamp: int
    headers: Headers  # its record's, which Kafka Streams forwards through every step

    def route(self) -> bytes:
        return self.key if self.key is not None else self.left_key

    def encode(self) -> bytes:
        """The message's value; its record's key is route() (the key, when it has one)."""
        return ORDER.pack(*self.order) + MESSAGE.pack(self.kind, self.instruction, self.key is not None,
                                                      self.value is not None, len(self.left_key)) \
            + self.left_key + (self.value or b"")

    @classmethod
    def decode(cls, record: Record) -> Message:
        data = cast(bytes, record.value)
        kind, instruction, has_key, has_value, size = MESSAGE.unpack_from(data, ORDER.size)
        start = ORDER.size + MESSAGE.size
        return cls(ORDER.unpack_from(data), kind, record.key if has_key else None, data[start:start + size],
                   instruction, data[start + size:] if has_value else None, record.timestamp, record.headers)


@dataclass(frozen=True, slots=True)
class Result:
    """A left key's join result (None: a tombstone), at its message's place."""

    order: Order
    key: bytes
    value: bytes | None
    timestamp: int
    headers: Headers  # its message's

    def encode(self) -> bytes:
        return ORDER.pack(*self.order) + RESULT.pack(self.value is not None) + (self.value or b"")

    @classmethod
    def decode(cls, record: Record) -> Result:
        data = cast(bytes, record.value)
        has_value = RESULT.unpack_from(data, ORDER.size)[0]
        value = data[ORDER.size + RESULT.size:] if has_value else None
        return cls(ORDER.unpack_from(data), cast(bytes, record.key), value, record.timestamp, record.headers)


def _versioned(table: str, history: int | None) -> dict[str, VersionedTable]:
    times = {LEFT_TABLE: LEFT_TIME, RIGHT_TABLE: RIGHT_TIME}
    return {} if history is None else {table: VersionedTable(table, INDEX, history, times[table])}


class _Tables:
    """A stage's tables, plain or versioned."""

    versions: dict[str, VersionedTable]

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


@dataclass
class ForeignKeyRows(_Tables, TableStores):
    """Stage 1: the left rows of one input partition (and its right records, passed on)."""

    how: str  # inner | left
    foreign_key: ForeignKey
    history: int | None = None
    stores: tuple[str, ...] = (LEFT_TABLE,)
    indexes: tuple[str, ...] = field(init=False)
    cached_roles: frozenset[str] = field(init=False)
    history_stores: tuple[str, ...] = field(init=False)  # restored by replaying their changelog whole

    def __post_init__(self) -> None:
        self.versions = _versioned(LEFT_TABLE, self.history)
        self.indexes = (INDEX,) if self.versions else ()
        self.history_stores = tuple(self.versions)
        self.cached_roles = frozenset() if self.versions else frozenset({changelog_role(LEFT_TABLE)})

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        left = {r.key for r in records if r.side == LEFT and r.key is not None}
        return {LEFT_TABLE: left, **({INDEX: {LEFT_TIME}} if self.versions else {})}

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        for message in self.messages(records, state):
            state.emit(message.route(), message.encode(), message.timestamp, REPARTITION, headers=message.headers)

    def messages(self, records: list[Record], state: TaskState) -> list[Message]:
        """The batch's messages, each with its record's place (records in processing order)."""
        newest: dict[tuple[int, int], int] = {}  # each partition's newest time so far
        messages: list[Message] = []
        for record in records:
            queue = (record.side, record.partition)
            newest[queue] = max(newest.get(queue, record.timestamp), record.timestamp)
            if record.key is None:
                continue  # KTableSource drops it
            order = (newest[queue], -record.side, record.partition, record.offset)
            if record.side != LEFT:
                messages.append(Message((*order, 0), RIGHT_ROW, record.key, b"", 0, record.value, record.timestamp,
                                        record.headers))
                continue
            changes, old = self._update(state, LEFT_TABLE, record.key, record.value, record.timestamp)
            if changes:
                messages += [Message((*order, i), SUBSCRIBE, foreign_key, record.key, instruction, record.value,
                                     record.timestamp, record.headers)
                             for i, (foreign_key, instruction) in enumerate(
                                 self._instructions(old.value if old else None, record.value))]
        return messages

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


@dataclass
class ForeignKeySubscriptions(_Tables, TableStores):
    """Stage 2: the right rows of the foreign keys of one partition, their subscriptions, and
    the results the messages sent here give, in the order one task would give them."""

    how: str  # inner | left
    joiner: Joiner
    history: int | None = None
    stores: tuple[str, ...] = (RIGHT_TABLE, SUBSCRIPTIONS)
    indexes: tuple[str, ...] = (INDEX,)
    cached_roles: frozenset[str] = field(init=False)
    history_stores: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.versions = _versioned(RIGHT_TABLE, self.history)
        self.history_stores = tuple(self.versions)
        self.cached_roles = frozenset(changelog_role(s) for s in self.stores if s not in self.versions)

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        keys = {r.key for r in records if r.key is not None}
        return {RIGHT_TABLE: keys, INDEX: {BUILT, RIGHT_TIME} | {BY_FOREIGN_KEY + k for k in keys}}

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        for result in self.results([Message.decode(record) for record in records], state):
            state.emit(result.key, result.encode(), result.timestamp, REPARTITION, headers=result.headers)

    def results(self, messages: list[Message], state: TaskState) -> list[Result]:
        results: list[Result] = []
        for message in sorted(messages, key=lambda m: m.order):
            if message.kind == RIGHT_ROW:
                self._right(state, message, results)
            else:
                self._subscribe(state, message, results)
        return results

    def _subscribe(self, state: TaskState, message: Message, results: list[Result]) -> None:
        """SubscriptionReceiveProcessorSupplier (keep or drop the subscription, which keeps the
        left row), then SubscriptionJoinProcessorSupplier (answer with the right value)."""
        foreign_key, key, instruction, ts = message.key, message.left_key, message.instruction, message.timestamp
        right = self._row(state, RIGHT_TABLE, foreign_key) if foreign_key is not None else None
        if foreign_key is not None:
            subscription, by_foreign_key = subscription_key(foreign_key, key), self._index(state)
            if instruction in (DELETE_AND_PROPAGATE, DELETE_NO_PROPAGATE):
                state.delete(SUBSCRIPTIONS, subscription, ts)
                by_foreign_key.discard(foreign_key, subscription)
            else:
                state.put(SUBSCRIPTIONS, subscription, StoreValue(cast(bytes, message.value), ts))
                by_foreign_key.add(foreign_key, subscription)
        if instruction == DELETE_NO_PROPAGATE or (instruction == PROPAGATE_IF_FOUND and right is None):
            return
        answer = right.value if right is not None and instruction != DELETE_AND_PROPAGATE else None
        results.append(self._result(message, key, message.value, answer,
                                    max(ts, right.timestamp) if right is not None else ts))

    def _right(self, state: TaskState, message: Message, results: list[Result]) -> None:
        """ForeignTableJoinProcessorSupplier: every subscription of the key gets the new value
        (a delete too), in the subscription store's order."""
        foreign_key, value = cast(bytes, message.key), message.value
        if not self._update(state, RIGHT_TABLE, foreign_key, value, message.timestamp)[0]:
            return
        subscriptions = sorted(self._index(state).get(foreign_key))
        if subscriptions:
            state.prefetch(SUBSCRIPTIONS, subscriptions)
        for subscription in subscriptions:
            left = cast(StoreValue, state.get(SUBSCRIPTIONS, subscription)).value
            results.append(self._result(message, split_subscription_key(subscription)[1], left, value,
                                        message.timestamp))

    def _result(self, message: Message, key: bytes, left: bytes | None, foreign: bytes | None, ts: int) -> Result:
        """ResponseJoinProcessorSupplier: the join of the left row as it is now (`left`)."""
        if foreign is None and (self.how != "left" or left is None):
            return Result(message.order, key, None, ts, message.headers)
        return Result(message.order, key, self.joiner(left, foreign), ts, message.headers)

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


@dataclass
class LatestResults:
    """Stage 3: of each left key's results in a batch, the one a single task would give last
    (the record cache: per batch each key's last result, in the order of their last update)."""

    stores: tuple[str, ...] = ()
    indexes: tuple[str, ...] = ()
    cached_roles: frozenset[str] = frozenset({OUTPUT})

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        return {}

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        self.write([Result.decode(record) for record in records], state)

    def write(self, results: list[Result], state: TaskState) -> None:
        latest: dict[bytes, Result] = {}
        for result in results:
            if result.key not in latest or result.order > latest[result.key].order:
                latest[result.key] = result
        for result in sorted(latest.values(), key=lambda r: r.order):
            state.emit(result.key, result.value, result.timestamp, headers=result.headers)


@dataclass
class ForeignKeyJoin(TableStores):
    """The three stages in one task, as TopologyTestDriver runs them: what the spread run
    (kstool.topologies.join) is checked against."""

    how: str
    foreign_key: ForeignKey
    joiner: Joiner
    history: int | None = None
    rows: ForeignKeyRows = field(init=False)
    subscriptions: ForeignKeySubscriptions = field(init=False)
    latest: LatestResults = field(init=False)
    stores: tuple[str, ...] = (LEFT_TABLE, RIGHT_TABLE, SUBSCRIPTIONS)
    indexes: tuple[str, ...] = (INDEX,)
    cached_roles: frozenset[str] = field(init=False)
    history_stores: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.rows = ForeignKeyRows(self.how, self.foreign_key, self.history)
        self.subscriptions = ForeignKeySubscriptions(self.how, self.joiner, self.history)
        self.latest = LatestResults()
        self.cached_roles = self.rows.cached_roles | self.subscriptions.cached_roles | self.latest.cached_roles
        self.history_stores = self.rows.history_stores + self.subscriptions.history_stores

    def stages(self) -> tuple[ForeignKeyRows, ForeignKeySubscriptions, LatestResults]:
        """What a task of each stage runs (kstool.tasks.processor.run_stages)."""
        return self.rows, self.subscriptions, self.latest

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        rows, subscriptions = self.rows.reads(records), self.subscriptions.reads(
            [r for r in records if r.side != LEFT])
        return {**subscriptions, **rows, INDEX: subscriptions[INDEX] | rows.get(INDEX, set())}

    def replay(self, state: TaskState, store: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        (self.rows if store == LEFT_TABLE else self.subscriptions).replay(state, store, key, value, timestamp)

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        self.latest.write(self.subscriptions.results(self.rows.messages(records, state), state), state)
