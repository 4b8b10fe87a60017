"""The three join kinds with Kafka Streams' semantics (KStreamKStreamJoin, KStreamKTableJoin,
KTableKTableJoin and their left/outer variants). Records with a null key are dropped, and so
are stream records with a null value; on a table side a null value deletes the key.

stream-stream: a record joins the other side's records of the same key within `within` ms
either way; the result's timestamp is the later of the two. A record is late (dropped) when
its timestamp + within + grace is before the task's stream time (shared by both sides).
left/outer: a record that found no partner waits in the `unmatched` store and is emitted with
null once its timestamp + within + grace is before stream time, unless a partner came first.
stream-table: a stream record joins the table's value for its key at that point (the table
side is processed in timestamp order with the stream, so "at the record's time"); table
updates emit nothing. table-table: every change on either side emits the new join result
(a tombstone when the result is gone), with the later timestamp of the two sides.
"""

from __future__ import annotations

import heapq
import json
import struct
from dataclasses import dataclass
from typing import Callable

from kstool.streams.task import LATE, LEFT, RIGHT, Record, StoreValue, TaskState
from kstool.streams.windows import window_store_key, split_window_store_key

KINDS = ("stream-stream", "stream-table", "table-table")
HOWS = ("inner", "left", "outer")
JOINERS = ("json", "concat")
SIDES = {LEFT: "left", RIGHT: "right"}

Joiner = Callable[[bytes | None, bytes | None], bytes]


def make_joiner(kind: str, separator: str = ",") -> Joiner:
    """json: {"left": ..., "right": ...}, each side parsed as JSON when it is JSON, else text;
    concat: left + separator + right, a missing side as `null` (as Java's string concat)."""
    if kind == "concat":
        sep = separator.encode()
        return lambda left, right: (b"null" if left is None else left) + sep + (b"null" if right is None else right)

    def as_json(data: bytes | None):
        if data is None:
            return None
        text = data.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            return text

    return lambda left, right: json.dumps({"left": as_json(left), "right": as_json(right)},
                                          separators=(",", ":"), ensure_ascii=False).encode()


def _joined(joiner: Joiner, side: int, this: bytes | None, other: bytes | None) -> bytes:
    return joiner(this, other) if side == LEFT else joiner(other, this)


@dataclass
class StreamStreamJoin:
    how: str
    within: int
    grace: int
    joiner: Joiner
    stores: tuple[str, ...] = ("join-left", "join-right", "join-unmatched")
    cached_roles: frozenset[str] = frozenset()  # join results are a KStream: every one is written

    def process(self, record: Record, state: TaskState) -> None:
        if record.key is None or record.value is None:
            return
        by_key, expiries, unmatched = self._indexes(state)
        ts = record.timestamp
        stream_time = state.advance(ts)
        if ts + self.within + self.grace < stream_time:
            state.emit(record.key, record.value, ts, LATE)
            return
        self._emit_unmatched(state, unmatched, stream_time)
        this_store, other_store = self.stores[record.side], self.stores[1 - record.side]
        state.sequence = (state.sequence + 1) % 2**31
        this_key = window_store_key(record.key, ts, state.sequence)
        state.put(this_store, this_key, StoreValue(record.value, ts))
        by_key[record.side].setdefault(record.key, set()).add(this_key)
        heapq.heappush(expiries, (ts, record.side, this_key))
        matched = False
        for other_ts, store_key in sorted((split_window_store_key(k)[1], k)
                                          for k in by_key[1 - record.side].get(record.key, ())):
            if abs(other_ts - ts) > self.within:
                continue
            matched = True
            state.delete("join-unmatched", _unmatched_key(1 - record.side, record.key, other_ts, store_key[-4:]),
                         other_ts)
            other = state.get(other_store, store_key)
            state.emit(record.key, _joined(self.joiner, record.side, record.value, other.value),
                       max(ts, other_ts))
        waits = self.how == "outer" or (self.how == "left" and record.side == LEFT)
        if waits and not matched:
            waiting = _unmatched_key(record.side, record.key, ts, this_key[-4:])
            state.put("join-unmatched", waiting, StoreValue(record.value, ts))
            heapq.heappush(unmatched, waiting)
        self._expire(state, by_key, expiries, stream_time)

    def _indexes(self, state: TaskState):
        """Per side: key -> its window store keys; a heap of (ts, side, store key) for expiry;
        a heap of the unmatched store's keys (which sort by time)."""
        if "by_key" not in state.index:
            by_key: list[dict[bytes, set[bytes]]] = [{}, {}]
            expiries = []
            for side in (LEFT, RIGHT):
                for store_key in state.stores[self.stores[side]]:
                    key, ts = split_window_store_key(store_key)
                    by_key[side].setdefault(key, set()).add(store_key)
                    expiries.append((ts, side, store_key))
            heapq.heapify(expiries)
            unmatched = list(state.stores["join-unmatched"])
            heapq.heapify(unmatched)
            state.index.update(by_key=by_key, expiries=expiries, unmatched=unmatched)
        return state.index["by_key"], state.index["expiries"], state.index["unmatched"]

    def _emit_unmatched(self, state: TaskState, unmatched: list[bytes], stream_time: int) -> None:
        while unmatched:
            ts, side, key = _split_unmatched_key(unmatched[0])
            if ts + self.within + self.grace >= stream_time:
                return
            store_key = heapq.heappop(unmatched)
            value = state.get("join-unmatched", store_key)
            if value is not None:  # else a partner came
                state.emit(key, _joined(self.joiner, side, value.value, None), ts)
                state.delete("join-unmatched", store_key, ts)

    def _expire(self, state: TaskState, by_key, expiries, stream_time: int) -> None:
        """Window stores keep records for 2 * within + grace (Kafka Streams' retention)."""
        horizon = stream_time - 2 * self.within - self.grace
        while expiries and expiries[0][0] < horizon:
            _, side, store_key = heapq.heappop(expiries)
            state.delete(self.stores[side], store_key, 0, log=False)
            key = split_window_store_key(store_key)[0]
            by_key[side].get(key, set()).discard(store_key)


def _unmatched_key(side: int, key: bytes, ts: int, seqnum: bytes) -> bytes:
    """Kafka Streams' TimestampedKeyAndJoinSide, ts(8) ‖ side(1: 1 = left) ‖ key, plus the
    record's seqnum(4) so records alike in all three wait side by side."""
    return struct.pack(">q?", ts, side == LEFT) + key + seqnum


def _split_unmatched_key(data: bytes) -> tuple[int, int, bytes]:
    ts, is_left = struct.unpack(">q?", data[:9])
    return ts, LEFT if is_left else RIGHT, data[9:-4]


@dataclass
class StreamTableJoin:
    how: str  # inner | left
    joiner: Joiner
    stores: tuple[str, ...] = ("join-right-table",)
    cached_roles: frozenset[str] = frozenset()

    def process(self, record: Record, state: TaskState) -> None:
        if record.key is None:
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
            state.emit(record.key, self.joiner(record.value, right.value if right else None), record.timestamp)


@dataclass
class TableTableJoin:
    how: str
    joiner: Joiner
    stores: tuple[str, ...] = ("join-left-table", "join-right-table")
    cached_roles: frozenset[str] = frozenset()  # "every update on either side emits"

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
            state.emit(record.key, None, ts)  # the join result is gone
            return
        state.emit(record.key, _joined(self.joiner, record.side, record.value, other_value), ts)
