"""stream-stream joins (KStreamKStreamJoin): a left record at t joins the right side's records of
the same key from t - before to t + after (a right record: the left ones from t - after to t +
before; `--within` sets both) that the other side's window store still holds; the result's
timestamp is the later of the two (details: StreamStreamJoin)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import cast

from kstool.contract import LATE
from kstool.stores import WINDOW_STORE
from kstool.streams.headers import Headers
from kstool.streams.indexes import MIN_BUCKET_MS, OwnedKeys, TimeIndex
from kstool.streams.joins.joiners import Joiner, joined
from kstool.streams.joins.stream_stream_batches import join_batch
from kstool.streams.task import LEFT, RIGHT, Record, RecordByRecord, StoreValue, TaskState

# the stream-stream join's index store: per side, expiry times (EXPIRIES); the unmatched records
# by time. A key's records are found in its side's window store, sharded by record key.
EXPIRIES, UNMATCHED = (b"L", b"R"), b"U"


@dataclass
class StreamStreamJoin(RecordByRecord):
    """KStreamKStreamJoin (Kafka 3.x/4.x trunk, spurious-result fix on, emit interval 0).

    JoinWindows of `before` and `after` ms (`ofTimeDifference(within)`: both are `within`).
    Each side keeps a window store of its records; a store holds a record while its timestamp
    is at least the newest timestamp that side has seen - retention + 1, retention = before +
    after + grace (the store's fetch filter). A left record at t probes the right store over
    [t - before, t + after], a right record the left store over [t - after, t + before]
    (KStreamKStreamJoinLeftSide / RightSide), and joins every record it holds; no record is
    dropped for being out of order. A record older than its own side's retention is not
    stored: it still joins, but no later record can join it; it is counted as late and goes to
    --late-topic (the window store's dropped-records). left/outer: a record that found no
    partner gets its null result at once when its window has closed (t + its probe's upper
    bound < stream time), else waits in the unmatched store until t + lookback + grace < stream
    time (lookback: `after` for a left record, `before` for a right one), emitted when a record
    at stream time arrives, unless a partner comes first.
    """

    how: str
    before: int
    after: int
    grace: int
    joiner: Joiner
    index_bucket_ms: int = MIN_BUCKET_MS
    stores: tuple[str, ...] = ("join-left", "join-right", "join-unmatched")
    indexes: tuple[str, ...] = ("join-index",)
    cached_roles: frozenset[str] = frozenset()  # join results are a KStream: every one is written
    # window stores whose shards keep each record key's entries together (kstool.tasks.shards)
    suffixed_stores: tuple[tuple[str, int], ...] = (("join-left", WINDOW_STORE.suffix), ("join-right", WINDOW_STORE.suffix))

    @property
    def retention(self) -> int:
        return self.before + self.after + self.grace

    def probe(self, side: int) -> tuple[int, int]:
        """How much earlier and later than a record of `side` its partners may be."""
        return (self.before, self.after) if side == LEFT else (self.after, self.before)

    def _lookback(self, side: int) -> int:
        """How long an unmatched record of `side` waits for a partner (getOuterJoinLookBackTimeMs)."""
        return self.after if side == LEFT else self.before

    def _waiting_time(self, ts: int, side: int) -> int:
        """A waiting record's time in the unmatched index: when it closes, less the shorter
        lookback (so that one take finds the closed records of both sides; with --within, the
        record's own time)."""
        return ts + self._lookback(side) - min(self.before, self.after)

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        # a key of each record key's entries: its shard holds them all
        owners = {WINDOW_STORE.key(r.key, 0) for r in records if r.key is not None}
        return {self.indexes[0]: {*EXPIRIES, UNMATCHED}, self.stores[LEFT]: owners, self.stores[RIGHT]: owners}

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        if not join_batch(self, records, state):
            super().process_batch(records, state)

    def process(self, record: Record, state: TaskState) -> None:
        ts, side = record.timestamp, record.side
        stream_time = state.advance(ts)
        if self.keyless_result(state, record) or record.key is None or record.value is None:
            return
        indexes = self.join_indexes(state)
        by_key, unmatched = indexes.by_key, indexes.unmatched
        if ts == stream_time:
            self.emit_unmatched(state, unmatched, stream_time, record.headers)
        this_key = self._store(record, state, by_key, indexes.expiries)
        matched = False
        earlier, later = self.probe(side)
        for other_ts, store_key in sorted((WINDOW_STORE.start(k), k)
                                          for k in by_key[1 - side].get(record.key)):
            if not ts - earlier <= other_ts <= ts + later:
                continue
            matched = True
            other = cast(StoreValue, state.get(self.stores[1 - side], store_key))
            self.partner_found(state, record, other_ts, store_key, other.value)
        if not matched and self.outer_side(side):
            self.no_partner(state, record, this_key, stream_time, unmatched)

    def keyless_result(self, state: TaskState, record: Record) -> bool:
        """A record with a value but no key to join on: on a left/outer side, its null result."""
        if record.key is not None or record.value is None or not self.outer_side(record.side):
            return False
        state.emit(None, joined(self.joiner, record.side, record.value, None), record.timestamp,
                   headers=record.headers)
        return True

    def outer_side(self, side: int) -> bool:
        """A record of `side` that finds no partner gets a null result (left and outer joins)."""
        return self.how == "outer" or (self.how == "left" and side == LEFT)

    def partner_found(self, state: TaskState, record: Record, other_ts: int, other_store_key: bytes,
                      other_value: bytes | None) -> None:
        """The partner no longer waits unmatched (only an outer side's records wait); the result
        has the later of the two times."""
        if self.outer_side(1 - record.side):
            state.delete("join-unmatched", _unmatched_key(1 - record.side, cast(bytes, record.key), other_ts,
                                                          other_store_key[-4:]), other_ts)
        state.emit(record.key, joined(self.joiner, record.side, record.value, other_value),
                   max(record.timestamp, other_ts), headers=record.headers)

    def no_partner(self, state: TaskState, record: Record, store_key: bytes | None, stream_time: int,
                   unmatched: TimeIndex) -> None:
        """A left/outer record that found no partner: its null result at once when its window has
        closed (t + its probe's upper bound < stream time), else it waits, under its store key's
        seqnum (a late record, not stored, takes one)."""
        ts, side = record.timestamp, record.side
        if ts + self.probe(side)[1] < stream_time:  # no partner can come
            state.emit(record.key, joined(self.joiner, side, record.value, None), ts, headers=record.headers)
        else:  # a late record too, when its window closes just at stream time (asymmetric windows)
            waiting = _unmatched_key(side, cast(bytes, record.key), ts, (store_key or self._late_key(record, state))[-4:])
            state.put("join-unmatched", waiting, StoreValue(record.value, ts))
            unmatched.add(self._waiting_time(ts, side), waiting)

    def _store(self, record: Record, state: TaskState, by_key: tuple[OwnedKeys, OwnedKeys],
               expiries: tuple[TimeIndex, TimeIndex]) -> bytes | None:
        """Put the record in its side's window store, unless it is already past the store's
        retention (then it is late); expire what the store no longer holds. The side's newest
        timestamp is always held: it is the store's newest record."""
        side, ts = record.side, record.timestamp
        horizon = max(expiries[side].newest, ts) - self.retention + 1
        if ts < horizon:
            state.emit(record.key, record.value, ts, LATE)
            return None
        held = by_key[side].get(cast(bytes, record.key))  # keyed: see process
        while True:  # a seqnum not held with the same key and time (restored stores hold any)
            state.sequence = (state.sequence + 1) % 2**31
            this_key = WINDOW_STORE.key(cast(bytes, record.key), ts, state.sequence)
            if this_key not in held:
                break
        state.put(self.stores[side], this_key, StoreValue(record.value, ts))
        by_key[side].add(cast(bytes, record.key), this_key)
        expiries[side].add(ts, this_key)
        expired = expiries[side].take(horizon)
        if expired:
            state.prefetch(self.stores[side], (store_key for _, store_key in expired))
        for _, store_key in expired:
            state.delete(self.stores[side], store_key, 0, log=False)
            by_key[side].discard(WINDOW_STORE.record_key(store_key), store_key)
        return this_key

    def _late_key(self, record: Record, state: TaskState) -> bytes:
        """A seqnum for a late record that waits unmatched (Kafka Streams' outer join store
        takes it though the window store dropped it: KStreamKStreamJoin, `timeTo <
        streamTime` only at equality)."""
        state.sequence = (state.sequence + 1) % 2**31
        return WINDOW_STORE.key(cast(bytes, record.key), record.timestamp, state.sequence)

    def restored(self, store: str, key: bytes, value: bytes, timestamp: int, stream_time: int) -> StoreValue | None:
        """A side's record back in its window store unless the store no longer held it (older
        than its newest - retention + 1: expired records leave the store without a
        tombstone); the unmatched store's compacted view is what still waits."""
        if store != "join-unmatched" and WINDOW_STORE.start(key) < stream_time - self.retention + 1:
            return None
        return StoreValue(value, timestamp)

    def join_indexes(self, state: TaskState) -> "JoinIndexes":
        found = state.index.get("join")
        if found is None:
            index = self.indexes[0]
            found = JoinIndexes((OwnedKeys(state.stores[self.stores[LEFT]]),
                                  OwnedKeys(state.stores[self.stores[RIGHT]])),
                                 (TimeIndex(state, index, EXPIRIES[LEFT], self.index_bucket_ms),
                                  TimeIndex(state, index, EXPIRIES[RIGHT], self.index_bucket_ms)),
                                 TimeIndex(state, index, UNMATCHED, self.index_bucket_ms))
            if not found.unmatched.exists:  # stores without their index (restored, or written before kstool kept indexes)
                for side in (LEFT, RIGHT):
                    for store_key in state.stores[self.stores[side]]:
                        found.expiries[side].add(WINDOW_STORE.start(store_key), store_key)
                for store_key in state.stores["join-unmatched"]:
                    ts, side, _ = _split_unmatched_key(store_key)
                    found.unmatched.add(self._waiting_time(ts, side), store_key)
            state.index["join"] = found
        return cast(JoinIndexes, found)

    def emit_unmatched(self, state: TaskState, unmatched: TimeIndex, stream_time: int, headers: Headers) -> None:
        """Null results for waiting records whose window + grace has closed, in the store's
        order: time, then right before left, then key; with the headers of the record whose time
        closed them (Kafka Streams forwards the record being processed: a waiting record's own
        are not kept)."""
        # the store keys' order is time, side, key
        waited = sorted(unmatched.take(stream_time - min(self.before, self.after) - self.grace), key=lambda e: e[1])
        if waited:
            state.prefetch("join-unmatched", (store_key for _, store_key in waited))
        for _, store_key in waited:
            ts, side, key = _split_unmatched_key(store_key)
            value = state.get("join-unmatched", store_key)
            if value is not None:  # else a partner came
                state.emit(key, joined(self.joiner, side, value.value, None), ts, headers=headers)
                state.delete("join-unmatched", store_key, ts)


@dataclass
class JoinIndexes:
    """Per side: key -> its window store keys, and (ts, store key) for expiry; and the
    unmatched store's keys by time."""

    by_key: tuple[OwnedKeys, OwnedKeys]
    expiries: tuple[TimeIndex, TimeIndex]
    unmatched: TimeIndex

    def save(self) -> None:
        for index in (*self.by_key, *self.expiries, self.unmatched):
            index.save()


def _unmatched_key(side: int, key: bytes, ts: int, seqnum: bytes) -> bytes:
    """Kafka Streams' TimestampedKeyAndJoinSide, ts(8) ‖ side(1: 1 = left) ‖ key, plus the
    record's seqnum(4) so records alike in all three wait side by side."""
    return struct.pack(">q?", ts, side == LEFT) + key + seqnum


def _split_unmatched_key(data: bytes) -> tuple[int, int, bytes]:
    ts, is_left = struct.unpack(">q?", data[:9])
    return ts, LEFT if is_left else RIGHT, data[9:-4]
