"""Sliding windows (Kafka Streams' SlidingWindows, KIP-450): KStreamSlidingWindowAggregate,
apache/kafka trunk as of 2024-10, ported record by record.

A window [start, start + D] (both ends inclusive, D the time difference) exists where records
make one: each record's left window [t - D, t], and its right window [t + 1, t + 1 + D] once a
later record falls in it; records before D share the window [0, D] (processEarly). A new
window's aggregate is copied from the windows next to it, not recomputed from the records,
exactly as Kafka Streams does, and updates are forwarded in its order (the store walked
backwards from t + 1). A record is late only when its right window [t + 1, t + 1 + D] ends at or
before stream time - grace; windows that closed are not updated. The store keeps windows for 2D + grace behind the
newest window start it was given (its retention: older ones are invisible, then dropped).
`--emit final` emits each window once when its end is before stream time - grace
(EmitStrategy.onWindowClose), in (end, key) order after the record that closed it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import cast

from kstool.contract import LATE
from kstool.stores import WINDOW_STORE
from kstool.stores.windowed_keys import output_key
from kstool.streams.accumulators import Acc
from kstool.streams.headers import Headers
from kstool.streams.indexes import KeyIndex, TimeIndex
from kstool.streams.task import Record, RecordByRecord, StoreValue, TaskState
from kstool.streams.window_aggregation import INDEX, STORE, WindowAggregation

# the index store: each key's windows, windows by start (expiry; its newest start is the store's
# observed time) and by end (--emit final)
BY_KEY, STARTS, ENDS = b"K", b"S", b"E"
Window = tuple[int, StoreValue]  # (start, its entry)


@dataclass
class _Indexes:
    state: TaskState
    by_key: KeyIndex
    starts: TimeIndex
    ends: TimeIndex

    @property
    def newest_start(self) -> int:
        """The newest window start the store was given: a window store's observed time."""
        return int(self.starts.newest)

    def save(self) -> None:
        self.by_key.save()
        self.starts.save()
        self.ends.save()


@dataclass
class SlidingWindowAggregate(WindowAggregation, RecordByRecord):
    @property
    def retention(self) -> int:
        return 2 * self.window.size + self.grace  # SlidingWindowStoreMaterializer#retentionPeriod

    def restored(self, store: str, key: bytes, value: bytes, timestamp: int, stream_time: int) -> StoreValue | None:
        return StoreValue(value, timestamp, self.restored_acc(value))

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        return {INDEX: {STARTS, ENDS} | {BY_KEY + cast(bytes, r.key) for r in records}}

    def process(self, record: Record, state: TaskState) -> None:
        if record.key is None:
            return
        ts, diff = record.timestamp, self.window.size
        indexes = self._indexes(state)
        close = state.advance(ts) - self.grace
        if ts + diff < close:
            state.emit(record.key, record.value, ts, LATE, headers=record.headers)
            return
        self._expire(state, indexes)
        if ts < diff:
            self._process_early(state, indexes, record, close)
            return
        self._process(state, indexes, record, close)
        if self.emit == "final":
            self._emit_closed(state, indexes, close, record.headers)

    def _process(self, state: TaskState, indexes: _Indexes, record: Record, close: int) -> None:
        """processReverse: the key's windows from t + 1 down to t - 2D."""
        key, ts, diff = cast(bytes, record.key), record.timestamp, self.window.size
        starts: set[int] = set()
        left_agg: StoreValue | None = None
        right_agg: StoreValue | None = None
        left_created = right_created = False
        previous: int | None = None
        for start, entry in self._fetch(state, indexes, key, max(0, ts - 2 * diff), ts + 1, newest_first=True):
            starts.add(start)
            end = start + diff
            if start == ts + 1:
                right_created = True
            elif end > ts:
                right_agg = right_agg or entry
                self._update(state, indexes, record, start, entry, close)
            elif end == ts:
                left_created = True
                self._update(state, indexes, record, start, entry, close)
                if entry.timestamp >= ts:
                    return  # every window of this time exists already
                previous = entry.timestamp
            else:
                left_agg, previous = entry, entry.timestamp
                break
        if previous is not None and previous + 1 not in starts and previous + 1 + diff >= ts:
            self._update(state, indexes, record, previous + 1, StoreValue(None, ts, self.new_acc()), close)
        if not left_created:
            not_empty = previous is not None and left_agg is not None and ts - diff <= previous
            base = copy.copy(self.acc_of(left_agg)) if not_empty else self.new_acc()
            self._update(state, indexes, record, ts - diff, StoreValue(None, ts, base), close)
        if not right_created and right_agg is not None and right_agg.timestamp > ts:
            self._put(state, indexes, key, ts + 1, right_agg, record.headers)

    def _process_early(self, state: TaskState, indexes: _Indexes, record: Record, close: int) -> None:
        """processEarly: a record before D goes into the window [0, D]."""
        key, ts = cast(bytes, record.key), record.timestamp
        combined: StoreValue | None = None
        right_agg: StoreValue | None = None
        right_created = False
        starts: set[int] = set()
        previous: int | None = None
        for start, entry in self._fetch(state, indexes, key, 0, ts + 1, newest_first=False):
            starts.add(start)
            if start == 0:
                combined = entry
                if entry.timestamp < ts:
                    previous = entry.timestamp
            elif start <= ts:
                right_agg = entry
                self._update(state, indexes, record, start, entry, close)
            elif start == ts + 1:
                right_created = True
        if right_agg is None and combined is not None and combined.timestamp > ts:
            right_agg = combined
        if not right_created and right_agg is not None and right_agg.timestamp > ts:
            self._put(state, indexes, key, ts + 1, right_agg, record.headers)
        if previous is not None and previous + 1 not in starts:
            self._update(state, indexes, record, previous + 1, StoreValue(None, ts, self.new_acc()), close)
        self._update(state, indexes, record, 0, combined or StoreValue(None, ts, self.new_acc()), close)

    def _update(self, state: TaskState, indexes: _Indexes, record: Record, start: int, entry: StoreValue,
                close: int) -> None:
        """updateWindowAndForward: the record added to a copy of the window's aggregate, unless
        the window has closed."""
        if start + self.window.size < close:
            return
        acc = copy.copy(self.acc_of(entry))
        acc.add(self.input_of(record))
        self._put(state, indexes, cast(bytes, record.key), start,
                  StoreValue(None, max(record.timestamp, entry.timestamp), acc), record.headers)

    def _put(self, state: TaskState, indexes: _Indexes, key: bytes, start: int, entry: StoreValue,
             headers: Headers) -> None:
        """The window's entry put; with --emit update forwarded with the headers of the record
        being processed (its context, as KStreamSlidingWindowAggregate forwards)."""
        acc = copy.copy(self.acc_of(entry))
        store_key = WINDOW_STORE.key(key, start)
        if state.get(STORE, store_key) is None:
            indexes.by_key.add(key, store_key)
            indexes.starts.add(start, store_key)
            if self.emit == "final":
                indexes.ends.add(start + self.window.size, store_key)
        state.put(STORE, store_key, StoreValue(self.stored(acc), entry.timestamp, acc))
        if self.emit == "update":
            self._emit(state, key, start, acc, entry.timestamp, headers)

    def _emit(self, state: TaskState, key: bytes, start: int, acc: Acc, ts: int, headers: Headers) -> None:
        state.emit(output_key(key, start, start + self.window.size, False, self.key_format), self.output(acc), ts,
                   headers=headers)

    def _fetch(self, state: TaskState, indexes: _Indexes, key: bytes, low: int, high: int,
               newest_first: bool) -> list[Window]:
        """The key's windows starting in [low, high] (those past the retention left the store
        before the record: _expire)."""
        found = []
        for store_key in indexes.by_key.get(key):
            start = WINDOW_STORE.start(store_key)
            entry = state.get(STORE, store_key) if low <= start <= high else None
            if entry is not None:
                found.append((start, entry))
        return sorted(found, key=lambda window: window[0], reverse=newest_first)

    def _expire(self, state: TaskState, indexes: _Indexes) -> None:
        """Windows past the store's retention leave it (without a tombstone, as a dropped segment)."""
        for _, store_key in indexes.starts.take(indexes.newest_start - self.retention + 1):
            key = WINDOW_STORE.record_key(store_key)
            indexes.by_key.discard(key, store_key)
            state.delete(STORE, store_key, 0, log=False)

    def _emit_closed(self, state: TaskState, indexes: _Indexes, close: int, headers: Headers) -> None:
        """The windows `close` closed, with the headers of the record that closed them."""
        closed = indexes.ends.take(close)
        if closed:
            state.prefetch(STORE, (store_key for _, store_key in closed))
        for _, store_key in sorted(closed):
            entry = state.get(STORE, store_key)
            if entry is not None:
                key, start, _ = WINDOW_STORE.split(store_key)
                self._emit(state, key, start, self.acc_of(entry), entry.timestamp, headers)

    def _indexes(self, state: TaskState) -> _Indexes:
        found = state.index.get("sliding")
        if found is None:
            bucket = max(self.window.size, self.index_bucket_ms)
            found = _Indexes(state, KeyIndex(state, INDEX, BY_KEY), TimeIndex(state, INDEX, STARTS, bucket),
                             TimeIndex(state, INDEX, ENDS, bucket))
            if not found.starts.exists:  # a store without its indexes (restored)
                for store_key in list(state.stores[STORE]):
                    key, start, _ = WINDOW_STORE.split(store_key)
                    found.by_key.add(key, store_key)
                    found.starts.add(start, store_key)
                    if self.emit == "final" and start + self.window.size >= state.stream_time - self.grace:
                        found.ends.add(start + self.window.size, store_key)  # not closed before the restore
            state.index["sliding"] = found
        return cast(_Indexes, found)
