"""Windowed and session aggregation (KStreamWindowAggregate, KStreamSessionWindowAggregate),
with grace, late-record dropping and the two emit modes.

Time windows: a record updates every window holding it whose end + grace is still after the
task's stream time; a record no window accepts is late. A window closes when stream time
reaches end + grace: `--emit final` emits it then (suppress(untilWindowCloses)), and the window
leaves the store (its retention is size + grace, Kafka Streams' default).
Sessions (KStreamSessionWindowAggregate since KAFKA-12718, Kafka 3.0): a record merges the
key's sessions within the gap into one; the close time is stream time - grace - gap, and a
record is late when the merged session's end is before it (a later record within the gap could
still have extended the session until then). Sessions replaced by a merge are deleted
(tombstones in the changelog, and in the output with --emit update). `--emit final` emits a
session once its end is before the close time (EmitStrategy.onWindowClose), with the session's
end as timestamp, and the session then leaves the store (retention gap + grace). A record does
not merge with a session that ends exactly at the close time before it, though that session is
not closed: Kafka Streams' session store hides it by then (RocksDB segments' fetch starts at
stream time - retention + 1), so the record starts a new session, which replaces a stored one
of the same bounds (gap 5, grace 5: a@0, a@10, a@0 writes [0,0] with 1, not 2).
"""

from __future__ import annotations

import functools
import json
import math
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, cast

from kstool.base.serdes import decode_number
from kstool.base.store_keys import (
    output_key,
    session_store_key,
    split_session_store_key,
    split_window_store_key,
    window_store_key,
)
from kstool.contract import LATE, OUTPUT, changelog_role
from kstool.streams.indexes import MIN_BUCKET_MS, KeyIndex, TimeIndex
from kstool.streams.task import Emitted, Record, RecordByRecord, StoreValue, TaskState
from kstool.streams.windows import WindowSpec

if TYPE_CHECKING:  # numpy where batches are processed, not where a topology is only named
    import numpy as np

    from kstool.streams.session_batches import Run

STORE = "aggregate"
INDEX = f"{STORE}-index"  # window ends; sessions by key and by end (kstool.streams.indexes)
ENDS, BY_KEY = b"E", b"K"  # their prefixes in the index store
AGGREGATIONS = ("count", "sum", "min", "max", "avg")
TEXT_AGGREGATIONS = ("concat", "latest")  # Kafka Streams' reduce of texts


@dataclass
class Accumulator:
    count: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    whole: bool = True  # every number so far integral: sum/min/max are longs

    def add(self, number: float | None) -> None:
        self.count += 1
        if number is not None:
            self.total += number
            self.low, self.high = min(self.low, number), max(self.high, number)
            self.whole = self.whole and float(number).is_integer()

    def add_all(self, numbers: list[float | None]) -> None:
        for number in numbers:  # in record order: sums of doubles as one by one
            self.add(number)

    def merge(self, other: "Accumulator") -> None:
        self.count += other.count
        self.total += other.total
        self.low, self.high = min(self.low, other.low), max(self.high, other.high)
        self.whole = self.whole and other.whole

    def result(self, agg: str) -> float:
        return {"count": self.count, "sum": self.total, "min": self.low, "max": self.high,
                "avg": self.total / self.count if self.count else math.nan}[agg]

    def dump(self) -> str:
        return json.dumps([self.count, self.total, _finite(self.low), _finite(self.high), self.whole])

    @classmethod
    def restored(cls, agg: str, stored: bytes, value_format: str) -> "Accumulator":
        """An accumulator from the store's value alone (a changelog restore): exact for count,
        sum, min and max; integral results are taken as whole; avg restarts from its value as
        one number (the changelog keeps no count)."""
        result = stored_number(stored, value_format)
        if agg == "count":
            return cls(count=int(result))
        return cls(1, result, result, result, result.is_integer())

    @classmethod
    def of(cls, value: StoreValue | None) -> "Accumulator":
        """The live accumulator of a store entry (decoded once per batch, then kept in it)."""
        if value is None:
            return cls()
        if isinstance(value.aux, str):
            # [:5]: checkpoints of kstool <= 0.1 kept a sixth field (a session's emitted flag)
            count, total, low, high, whole = json.loads(value.aux)[:5]
            value.aux = cls(count, total, math.inf if low is None else low,
                            -math.inf if high is None else high, whole)
        return cast(Accumulator, value.aux)


@dataclass
class TextAccumulator:
    """A text aggregate (Kafka Streams' reduce): `concat` joins the values with the separator in
    processing order; `latest` (no separator) keeps the last. Merging (sessions) appends the
    other's text, as Kafka Streams' session merger does for a reduce."""

    separator: bytes | None
    text: bytes | None = None

    def add(self, value: Any) -> None:
        self.text = value if self.text is None or self.separator is None else self.text + self.separator + value

    def add_all(self, values: list[Any]) -> None:
        for value in values:
            self.add(value)

    def merge(self, other: "TextAccumulator") -> None:
        if other.text is not None:
            self.add(other.text)

    def dump(self) -> str:
        return ""  # the text is the store's value


Acc = Accumulator | TextAccumulator


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def store_format(agg: str, value_format: str) -> str:
    """The aggregate store's and its changelog's serde: the output's (Kafka Streams' Materialized
    serde), so that the store, the changelog and the output show one number alike."""
    if value_format != "auto":
        return value_format  # string | json: the number as text
    return "long" if agg == "count" else "number"


def stored_number(data: bytes, value_format: str) -> float:
    """The number a store value (output_value's bytes) holds. 8-byte values are read as
    kstool's `number` serde, so a changelog written before the store took the output's serde
    (8-byte Doubles) reads the same."""
    return float(data) if value_format != "auto" else float(decode_number(data))


def output_value(agg: str, result: float, whole: bool, value_format: str) -> bytes:
    """auto: 8-byte long for counts and for sum/min/max of whole numbers, else 8-byte double;
    string/json: the number as text."""
    integral = agg == "count" or (agg != "avg" and whole and -2**63 <= result < 2**63)
    if value_format == "auto":
        return struct.pack(">q", int(result)) if integral else struct.pack(">d", float(result))
    return (str(int(result)) if integral else repr(float(result))).encode()


@dataclass
class WindowAggregation:
    """What time-window and session aggregation share: the window (for sessions, its size is the
    inactivity gap), the aggregate, grace, the emit mode and the store layout."""
    window: WindowSpec
    agg: str
    grace: int
    emit: str  # update | final
    value_format: str = "auto"
    key_format: str = "windowed"  # | json
    index_bucket_ms: int = MIN_BUCKET_MS
    stores: tuple[str, ...] = (STORE,)
    indexes: tuple[str, ...] = (INDEX,)
    separator: str = ","  # --agg concat

    # numbers (Accumulator) or texts (TextAccumulator), the store's value and the output's
    @property
    def text(self) -> bool:
        return self.agg in TEXT_AGGREGATIONS

    def new_acc(self) -> Acc:
        return TextAccumulator(None if self.agg == "latest" else self.separator.encode()) if self.text else Accumulator()

    def acc_of(self, entry: StoreValue | None) -> Acc:
        """A store entry's live accumulator (decoded once per batch, then kept in it)."""
        if not self.text:
            if entry is not None and entry.aux == "":  # a count's entry: its value is the count
                entry.aux = self.restored_acc(cast(bytes, entry.value))
            return Accumulator.of(entry)
        if entry is None:
            return self.new_acc()
        if not isinstance(entry.aux, TextAccumulator):
            entry.aux = self.new_acc()
            entry.aux.text = entry.value
        return cast(TextAccumulator, entry.aux)

    def restored_acc(self, stored: bytes) -> Acc:
        if not self.text:
            return Accumulator.restored(self.agg, stored, self.value_format)
        acc = cast(TextAccumulator, self.new_acc())
        acc.text = stored
        return acc

    def input_of(self, record: Record) -> Any:
        return record.value if self.text else record.number

    def stored(self, acc: Acc) -> bytes:
        if isinstance(acc, TextAccumulator):
            return cast(bytes, acc.text)
        return self.output(acc)

    def output(self, acc: Acc) -> bytes:
        if isinstance(acc, TextAccumulator):
            return cast(bytes, acc.text)
        return output_value(self.agg, acc.result(self.agg), acc.whole, self.value_format)

    @property
    def retention(self) -> int:
        """How long the store keeps a window: Kafka Streams' default, size + grace (sessions: gap + grace)."""
        return self.window.size + self.grace

    @property
    def cached_roles(self) -> frozenset[str]:
        """The store is a cached store (Kafka Streams' default): per batch its changelog, and with
        --emit update the output, get each window's latest value only."""
        return frozenset({changelog_role(STORE)} | ({OUTPUT} if self.emit == "update" else set()))


@dataclass
class WindowedAggregate(WindowAggregation):
    def restored(self, store: str, key: bytes, value: bytes, timestamp: int, stream_time: int) -> StoreValue | None:
        """A changelog entry back in the store, unless its window had closed (and left it)."""
        if split_window_store_key(key)[1] + self.window.size <= stream_time - self.grace:
            return None
        return StoreValue(value, timestamp, self.restored_acc(value))

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        plain = [r for r in records if r.partial is None]
        record_of, starts = self.window.assign(_timestamps(plain))
        wanted = {window_store_key(cast(bytes, plain[index].key), start)
                  for index, start in zip(record_of.tolist(), starts.tolist())}
        wanted.update(window_store_key(r.key, r.partial[0]) for r in records
                      if r.partial is not None and r.key is not None and r.partial[0] is not None)
        return {STORE: wanted, INDEX: {ENDS}}

    def _emit_window(self, state: TaskState, key: bytes, start: int, acc: Acc, ts: int) -> None:
        end = start + self.window.size
        state.emit(output_key(key, start, end, False, self.key_format), self.output(acc), ts)

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        """The batch at once, with the results of processing it record by record: stream time
        is a running maximum; a record counts in each of its windows whose end + grace is still
        after the stream time as of that record (none: it is late); then each window is updated
        once, with its records in order; windows the final stream time closed leave the store
        (`--emit final` emits them, in processing order)."""
        import numpy as np

        if not records:
            return
        if any(r.partial is not None for r in records):
            self._process_combined(records, state)
            return
        ends = self._ends(state)  # indexes an unindexed store before the batch changes it
        size = self.window.size
        ts = _timestamps(records)
        close = np.maximum.accumulate(np.maximum(ts, state.stream_time)) - self.grace
        record_of, starts = self.window.assign(ts)
        open_ = starts + size > close[record_of]
        record_of, starts = record_of[open_], starts[open_]
        late = np.flatnonzero(np.bincount(record_of, minlength=len(records)) == 0)
        updates: dict[tuple[bytes, int], list[int]] = {}  # window -> its records, in order
        for index, start in zip(record_of.tolist(), starts.tolist()):
            updates.setdefault((cast(bytes, records[index].key), start), []).append(index)
        # each window once, in the order of its last update: the record cache's order
        for (key, start), indexes in sorted(updates.items(), key=lambda item: (item[1][-1], item[0][1])):
            inputs = [self.input_of(records[index]) for index in indexes]
            self._update_window(state, ends, key, start, max(records[index].timestamp for index in indexes),
                                functools.partial(_add_all, inputs))
        state.advance(int(ts.max()))
        self._close_windows(state, [(int(i), records[i]) for i in late], np.arange(len(records)), close)

    def _update_window(self, state: TaskState, ends: TimeIndex, key: bytes, start: int, newest: int,
                       add: Callable[[Any], object]) -> None:
        """A window's entry updated once per batch: `add` adds the batch's records to it."""
        store_key = window_store_key(key, start)
        old = state.get(STORE, store_key)
        acc = self.acc_of(old)
        add(acc)
        value_ts = max(newest, old.timestamp) if old else newest
        state.put(STORE, store_key, StoreValue(self.stored(acc), value_ts, acc))
        if old is None:
            ends.add(start + self.window.size, store_key)
        if self.emit == "update":
            self._emit_window(state, key, start, acc, value_ts)

    def _process_combined(self, records: list[Record], state: TaskState) -> None:
        """A batch the source combined (kstool.topologies.combiners.window_counts.WindowCombiner), with the
        results of its records one by one: a partial's window counts its records unless the
        stream time before its range had closed it (then those whose newest window it is are
        late); records the source found late come as themselves; each range's newest time
        (a row without a key) moves stream time on. The partials are grouped per window in
        numpy, and each window's entry is written in one pass (a count's entry keeps no aux:
        its value is the count)."""
        import numpy as np

        ends = self._ends(state)
        size = self.window.size
        newest_of_range = {r.partial[3]: (r.timestamp, r.offset) for r in records
                           if r.partial is not None and r.key is None}
        range_starts = sorted(newest_of_range)
        carried, newest, at = [], state.stream_time, 0  # stream time before each range: the batch's, then its ranges'
        for range_start in range_starts:
            carried.append(newest)
            if newest_of_range[range_start][0] > newest:
                newest, at = newest_of_range[range_start]
        late: list[tuple[int, Record]] = [(r.offset, r) for r in records if r.partial is None]  # late in their range
        partials = [r for r in records if r.partial is not None and r.key is not None and r.partial[0] is not None]
        if partials:
            starts, counts, latest, ranges = np.array([r.partial for r in partials], np.int64).T
            stamps = np.fromiter((r.timestamp for r in partials), np.int64, len(partials))
            offsets = np.fromiter((r.offset for r in partials), np.int64, len(partials))
            before = np.array(carried, np.int64)[np.searchsorted(np.array(range_starts, np.int64), ranges)]
            closed = starts + size + self.grace <= before  # closed before its range began
            for i in np.flatnonzero(closed & (latest > 0)).tolist():
                late += [(int(offsets[i]), Record(None, None, int(stamps[i])))] * int(latest[i])
            open_ = np.flatnonzero(~closed)
            if len(open_):
                keys = [cast(bytes, partials[i].key) for i in open_.tolist()]
                self._update_windows(state, ends, *_windows_of(keys, starts[open_], counts[open_], stamps[open_],
                                                              offsets[open_]))
        state.advance(newest)
        self._close_windows(state, late, np.array([at]), np.array([newest - self.grace]))

    def _update_windows(self, state: TaskState, ends: TimeIndex, keys: list[bytes], starts: list[int],
                        counts: list[int], newest: list[int]) -> None:
        """Add each window's count to its entry, in order: the entry, its changelog record, its
        output record with --emit update, and the end of a new window in the index."""
        table = state.stores[STORE]
        changed = state.changed.setdefault(STORE, {})
        role, size, update, emitted = changelog_role(STORE), self.window.size, self.emit == "update", []
        for key, start, count, stamp in zip(keys, starts, counts, newest):
            store_key = window_store_key(key, start)
            old = table.get(store_key)
            if old is None:
                changed.setdefault(store_key, False)
                ends.add(start + size, store_key)
            else:
                changed.setdefault(store_key, True)
                count += cast(Accumulator, self.acc_of(old)).count
                stamp = max(stamp, old.timestamp)
            value = output_value(self.agg, count, True, self.value_format)
            table[store_key] = StoreValue(value, stamp)
            emitted.append(Emitted(role, store_key, value, stamp, STORE, store_key))
            if update:
                emitted.append(Emitted(OUTPUT, output_key(key, start, start + size, False, self.key_format),
                                       value, stamp))
        state.record_all(emitted)

    def _ends(self, state: TaskState) -> TimeIndex:
        """(window end, store key) of the open windows: which close next."""
        if "ends" not in state.index:
            # time windows end on multiples of the advance (+ size): a bucket per end
            ends = TimeIndex(state, INDEX, ENDS, max(self.window.advance, self.index_bucket_ms))
            if not ends.exists:  # a store without its index (restored, or written before kstool kept indexes)
                for store_key in state.stores[STORE]:
                    ends.add(split_window_store_key(store_key)[1] + self.window.size, store_key)
            state.index["ends"] = ends
        return cast(TimeIndex, state.index["ends"])

    def _close_windows(self, state: TaskState, late: list[tuple[int, Record]], positions: np.ndarray,
                       close: np.ndarray) -> None:
        """Late records and closed windows in processing order: a record's late copy, then the
        windows its stream time closed (suppress' order: window end, then key). `close[i]` is
        the close time from position `positions[i]` of the batch on; `late`: (position, record)."""
        import numpy as np

        closing = self._ends(state).take(int(close[-1]) + 1)
        if closing:
            state.prefetch(STORE, (store_key for _, store_key in closing))
        events: list[tuple[int, int, Any]] = [(at, 0, record) for at, record in late]
        if self.emit == "final" and closing:
            closed_at = positions[np.searchsorted(close, np.array([end for end, _ in closing], np.int64), "left")]
            events += [(at, 1, store_key) for at, (_, store_key) in zip(closed_at.tolist(), closing)]
            events.sort(key=lambda event: event[:2])  # stable: closings keep take()'s order
        for _, kind, item in events:
            if kind == 0:
                state.emit(item.key, item.value, item.timestamp, LATE)
                continue
            store_key = item
            value = state.get(STORE, store_key)
            if value is not None:
                key, start, _ = split_window_store_key(store_key)
                self._emit_window(state, key, start, self.acc_of(value), value.timestamp)
        for _, store_key in closing:
            value = state.get(STORE, store_key)
            if value is not None:
                state.delete(STORE, store_key, value.timestamp, log=False)  # expired, like a dropped segment


@dataclass
class SessionAggregate(WindowAggregation, RecordByRecord):
    def restored(self, store: str, key: bytes, value: bytes, timestamp: int, stream_time: int) -> StoreValue | None:
        """A changelog entry back in the store, unless its session had closed (and left it)."""
        if split_session_store_key(key)[2] < stream_time - self.grace - self.window.size:
            return None
        return StoreValue(value, timestamp, self.restored_acc(value))

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        return {INDEX: {ENDS} | {BY_KEY + cast(bytes, r.key) for r in records}}

    def _emit_session(self, state: TaskState, key: bytes, start: int, end: int, acc: Acc | None) -> None:
        value = None if acc is None else self.output(acc)
        state.emit(output_key(key, start, end, True, self.key_format), value, end,
                   store=STORE, store_key=session_store_key(key, start, end))

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        """The batch key by key, with the results of processing it record by record (`process`,
        the tests' oracle): the sessions of keys whose records need no merging are cut in columns
        (kstool.streams.session_batches), the other keys' merged in plain objects; the store, the
        indexes and the output then see only each session's last change, at its position in the
        batch (the record cache keeps only that one); closed sessions are found once, at the end,
        and emitted where the stream time closed them."""
        import numpy as np

        from kstool.streams.session_batches import NO_SESSION, in_order_runs, keyed

        if not records:
            return
        by_key, ends = self._indexes(state)
        ts = _timestamps(records)
        close_before = state.stream_time - self.grace - self.window.size
        close = np.maximum.accumulate(np.maximum(ts, state.stream_time)) - self.grace - self.window.size
        batch = keyed([cast(bytes, r.key) for r in records])  # records without a key never get here
        owned = [by_key.get(key) for key in batch.keys]
        state.prefetch(STORE, (store_key for store_keys in owned for store_key in store_keys))
        stored = [[_Session.stored(store_key, self.acc_of(state.get(STORE, store_key))) for store_key in store_keys]
                  for store_keys in owned]
        runs, merged = in_order_runs(batch, ts, close, close_before, self.window.size,
                                     np.array([s[0].end if len(s) == 1 else NO_SESSION for s in stored], np.int64),
                                     np.array([len(s) > 1 for s in stored], bool))
        merger = _SessionMerger(self, ts.tolist(), close.tolist(), close_before)
        for run in runs:
            merger.add_run(batch.keys[run.key], run, records, stored[run.key][0] if run.joins_stored else None)
        positions: dict[int, list[int]] = {}  # the other keys' records, merged one by one
        for position in np.flatnonzero(merged[batch.key_of]).tolist():
            positions.setdefault(int(batch.key_of[position]), []).append(position)
        for key_id, at in positions.items():
            merger.merge(batch.keys[key_id], stored[key_id], at, records)
        for _, _, kind, key, session in sorted(merger.changes, key=lambda change: change[:2]):
            if kind == _DELETE:
                state.delete(STORE, cast(bytes, session.stored_as), session.end)
                by_key.discard(key, cast(bytes, session.stored_as))
                if self.emit == "update":
                    self._emit_session(state, key, session.start, session.end, None)
                continue
            store_key = session_store_key(key, session.start, session.end)
            state.put(STORE, store_key, StoreValue(self.stored(session.acc), session.end, session.acc))
            if store_key not in by_key.get(key):
                by_key.add(key, store_key)
                ends.add(session.end, store_key)
            if self.emit == "update":
                self._emit_session(state, key, session.start, session.end, session.acc)
        state.advance(int(ts.max()))
        self._close_in_order(state, [(position, records[position]) for position in merger.late], close)

    def _close_in_order(self, state: TaskState, late: list[tuple[int, Record]], close: np.ndarray) -> None:
        """Late records and the sessions the batch closed, in processing order: a record's late
        copy, then the sessions its stream time closed (by end, then store key)."""
        import numpy as np

        by_key, ends = self._indexes(state)
        closing = ends.take(int(close[-1]))
        if closing:
            state.prefetch(STORE, (store_key for _, store_key in closing))
        closed_at = np.searchsorted(close, np.array([end for end, _ in closing], np.int64), "right").tolist()
        events: list[tuple[int, int, Any]] = [(at, 0, record) for at, record in late]
        events += [(at, 1, entry) for at, entry in zip(closed_at, closing)]
        events.sort(key=lambda event: event[:2])  # stable: closings keep take()'s order
        for _, kind, item in events:
            if kind == 0:
                state.emit(item.key, item.value, item.timestamp, LATE)
                continue
            self._close_session(state, by_key, *item)

    def process(self, record: Record, state: TaskState) -> None:
        by_key, ends = self._indexes(state)  # an unindexed store is indexed before this record changes it
        gap, ts = self.window.size, record.timestamp
        visible_after = state.stream_time - self.grace - gap  # the store's retention (see the module's doc)
        close = state.advance(ts) - self.grace - gap
        key = cast(bytes, record.key)  # records without a key never reach the aggregation
        overlapping = []
        for store_key in by_key.get(key):
            _, start, end = split_session_store_key(store_key)
            if end >= ts - gap and start <= ts + gap and end > visible_after:
                overlapping.append((start, end, store_key, state.get(STORE, store_key)))
        start = min([ts] + [s for s, *_ in overlapping])
        end = max([ts] + [e for _, e, *_ in overlapping])
        if end < close:
            state.emit(record.key, record.value, ts, LATE)
            self._close_sessions(state, close)
            return
        acc = self.new_acc()
        for old_start, old_end, store_key, value in sorted(overlapping):
            acc.merge(self.acc_of(value))  # type: ignore[arg-type]  # the same kind
            if (old_start, old_end) != (start, end):
                state.delete(STORE, store_key, old_end)
                by_key.discard(key, store_key)
                if self.emit == "update":
                    self._emit_session(state, key, old_start, old_end, None)
        acc.add(self.input_of(record))
        store_key = session_store_key(key, start, end)
        state.put(STORE, store_key, StoreValue(self.stored(acc), end, acc))
        if store_key not in by_key.get(key):
            by_key.add(key, store_key)
            ends.add(end, store_key)
        if self.emit == "update":
            self._emit_session(state, key, start, end, acc)
        self._close_sessions(state, close)

    def _indexes(self, state: TaskState) -> tuple[KeyIndex, TimeIndex]:
        """Each key's sessions, and (session end, store key): which sessions close next
        (sessions merged away are skipped when taken)."""
        found = state.index.get("sessions")
        if found is None:
            found = _SessionIndexes(KeyIndex(state, INDEX, BY_KEY), TimeIndex(state, INDEX, ENDS, self.index_bucket_ms))
            if not found.ends.exists:  # a store without its index (restored, or written before kstool kept indexes)
                for store_key in state.stores[STORE]:
                    key, _, end = split_session_store_key(store_key)
                    found.by_key.add(key, store_key)
                    found.ends.add(end, store_key)
            state.index["sessions"] = found
        found = cast(_SessionIndexes, found)
        return found.by_key, found.ends

    def _close_sessions(self, state: TaskState, close: int) -> None:
        """Sessions whose end is before the close time are final: emitted in final mode (in
        end order, as the time-ordered session store yields them), then dropped from the store
        as expired (no changelog tombstone: the topic's retention removes them)."""
        by_key, ends = self._indexes(state)
        closing = ends.take(close)
        if closing:
            state.prefetch(STORE, (store_key for _, store_key in closing))
        for end, store_key in closing:
            self._close_session(state, by_key, end, store_key)

    def _close_session(self, state: TaskState, by_key: KeyIndex, end: int, store_key: bytes) -> None:
        """A session the stream time closed (one merged into a later session is gone already)."""
        value = state.get(STORE, store_key)
        if value is None:
            return
        key, start, _ = split_session_store_key(store_key)
        if self.emit == "final":
            self._emit_session(state, key, start, end, self.acc_of(value))
        state.delete(STORE, store_key, end, log=False)
        by_key.discard(key, store_key)


_DELETE, _PUT = 0, 1
_AFTER_DELETES = 1 << 62  # a put's order at its position: after the sessions merged there


@dataclass(slots=True)
class _Session:
    start: int
    end: int
    acc: Acc
    stored_as: bytes | None = None  # its store key, for a session the store held before the batch
    changed_at: int | None = None  # the position of its last change in the batch
    merged: bool = False

    @classmethod
    def stored(cls, store_key: bytes, acc: Acc) -> "_Session":
        _, start, end = split_session_store_key(store_key)
        return cls(start, end, acc, store_key)


class _SessionMerger:
    """One key's records merged into its sessions as `SessionAggregate.process` merges them, in
    plain objects; `changes` collects what the store must see: (position, order within it,
    _DELETE or _PUT, key, session): a stored session merged away is deleted where that
    happened, a session changed by the batch and still standing is put where it last changed."""

    def __init__(self, aggregation: WindowAggregation, timestamps: list[int], close: list[int], close_before: int):
        self.aggregation, self.gap, self.timestamps, self.close = aggregation, aggregation.window.size, timestamps, close
        self.close_before = close_before  # the close time before the batch
        self.changes: list[tuple[int, int, int, bytes, _Session]] = []
        self.late: list[int] = []

    def add_run(self, key: bytes, run: Run, records: list[Record], stored: _Session | None) -> None:
        """A session of a run of records (kstool.streams.session_batches), put where it last
        changed; a run that joins the stored session extends it, which `merge` would replace
        (delete, then put anew) at the first record past its end."""
        acc = self.aggregation.new_acc()
        if stored is not None:
            acc.merge(stored.acc)  # type: ignore[arg-type]  # the same kind
        acc.add_all([self.aggregation.input_of(records[position]) for position in run.positions])
        changed_at = run.positions[-1]
        if stored is None:
            session = _Session(run.start, run.end, acc, changed_at=changed_at)
        elif run.end == stored.end:  # every record at its end: the stored session stays, with them
            session, stored.acc, stored.changed_at = stored, acc, changed_at
        else:
            past = next(p for p in run.positions if self.timestamps[p] > stored.end)
            stored.merged = True
            self.changes.append((past, 0, _DELETE, key, stored))
            session = _Session(stored.start, run.end, acc, changed_at=changed_at)
        self.changes.append((changed_at, _AFTER_DELETES, _PUT, key, session))

    def merge(self, key: bytes, live: list[_Session], positions: list[int], records: list[Record]) -> None:
        gap, close, sessions = self.gap, self.close, list(live)
        for position in positions:
            ts = self.timestamps[position]
            # the store hides sessions ending at or before the close time before this record
            floor = close[position - 1] if position else self.close_before
            live = [s for s in live if s.end > floor]
            near = [s for s in live if s.end >= ts - gap and s.start <= ts + gap]
            if len(near) == 1 and near[0].stored_as is None:  # most records: one session of this batch's
                session = near[0]
                end = max(ts, session.end)
                if end < close[position]:
                    self.late.append(position)
                    continue
                session.start, session.end = min(ts, session.start), end
                session.acc.add(self.aggregation.input_of(records[position]))  # its own: no stored value shares it
                session.changed_at = position
                continue
            start = min([ts] + [s.start for s in near])
            end = max([ts] + [s.end for s in near])
            if end < close[position]:
                self.late.append(position)
                continue
            acc, kept = self.aggregation.new_acc(), None
            for order, session in enumerate(sorted(near, key=lambda s: (s.start, s.end))):
                acc.merge(session.acc)  # type: ignore[arg-type]  # the same kind
                if (session.start, session.end) == (start, end):
                    kept = session
                    continue
                session.merged = True
                live.remove(session)
                if session.stored_as is not None:
                    self.changes.append((position, order, _DELETE, key, session))
            acc.add(self.aggregation.input_of(records[position]))
            if kept is None:
                kept = _Session(start, end, acc)
                live.append(kept)
                sessions.append(kept)
            kept.acc, kept.changed_at = acc, position
        self.changes += [(s.changed_at, _AFTER_DELETES, _PUT, key, s) for s in sessions
                         if s.changed_at is not None and not s.merged]


def _windows_of(keys: list[bytes], starts: np.ndarray, counts: np.ndarray, stamps: np.ndarray,
                offsets: np.ndarray) -> tuple[list[bytes], list[int], list[int], list[int]]:
    """Partials grouped per (key, window start): each window's key, start, count and newest time,
    in the order of its last partial (by offset, then start: the record cache's order)."""
    import numpy as np
    import pyarrow as pa

    ids = np.asarray(pa.array(keys, pa.binary()).dictionary_encode().indices, np.int64)
    by_cell = np.lexsort((starts, ids))
    ids, starts = ids[by_cell], starts[by_cell]
    begins = np.flatnonzero(np.r_[True, (ids[1:] != ids[:-1]) | (starts[1:] != starts[:-1])])
    count = np.add.reduceat(counts[by_cell], begins)
    newest = np.maximum.reduceat(stamps[by_cell], begins)
    last = np.maximum.reduceat(offsets[by_cell], begins)
    order = np.lexsort((starts[begins], last))
    first = by_cell[begins][order]
    return ([keys[i] for i in first.tolist()], starts[begins][order].tolist(), count[order].tolist(),
            newest[order].tolist())


def _add_all(inputs: list[Any], acc: Acc) -> None:
    acc.add_all(inputs)


def _timestamps(records: list[Record]) -> np.ndarray:
    import numpy as np

    return np.fromiter((r.timestamp for r in records), np.int64, len(records))


@dataclass
class _SessionIndexes:
    by_key: KeyIndex
    ends: TimeIndex

    def save(self) -> None:
        self.by_key.save()
        self.ends.save()
