"""Time-window aggregation (KStreamWindowAggregate): tumbling and hopping windows, with grace,
late-record dropping and the two emit modes. A record updates every window holding it whose
end + grace is still after the task's stream time; a record no window accepts is late. A window
closes when stream time reaches end + grace: `--emit final` emits it then
(suppress(untilWindowCloses)), and the window leaves the store (its retention is size + grace,
Kafka Streams' default).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, cast

from kstool.contract import LATE, OUTPUT, changelog_role
from kstool.stores import WINDOW_STORE
from kstool.stores.windowed_keys import output_key
from kstool.streams.accumulators import Acc, Accumulator, output_value
from kstool.streams.headers import Headers
from kstool.streams.indexes import TimeIndex
from kstool.streams.task import Emitted, Record, StoreValue, TaskState
from kstool.streams.window_aggregation import ENDS, INDEX, STORE, WindowAggregation, timestamps

if TYPE_CHECKING:  # numpy where batches are processed, not where a topology is only named
    import numpy as np


@dataclass
class WindowedAggregate(WindowAggregation):
    def restored(self, store: str, key: bytes, value: bytes, timestamp: int, stream_time: int) -> StoreValue | None:
        """A changelog entry back in the store, unless its window had closed (and left it)."""
        if WINDOW_STORE.start(key) + self.window.size <= stream_time - self.grace:
            return None
        return StoreValue(value, timestamp, self.restored_acc(value))

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        plain = [r for r in records if r.partial is None]
        record_of, starts = self.window.assign(timestamps(plain))
        wanted = {WINDOW_STORE.key(cast(bytes, plain[index].key), start)
                  for index, start in zip(record_of.tolist(), starts.tolist())}
        wanted.update(WINDOW_STORE.key(r.key, r.partial[0]) for r in records
                      if r.partial is not None and r.key is not None and r.partial[0] is not None)
        return {STORE: wanted, INDEX: {ENDS}}

    def _emit_window(self, state: TaskState, key: bytes, start: int, acc: Acc, ts: int, headers: Headers) -> None:
        end = start + self.window.size
        state.emit(output_key(key, start, end, False, self.key_format), self.output(acc), ts, headers=headers)

    def process_batch(self, records: list[Record], state: TaskState) -> None:
        """The batch at once, with the results of processing it record by record: stream time
        is a running maximum; a record counts in each of its windows whose end + grace is still
        after the stream time as of that record (none: it is late); then each window is updated
        once, with its records in order, and carries the last one's headers; windows the final
        stream time closed leave the store (`--emit final` emits them, in processing order, with
        the headers of the record that closed them: KStreamWindowAggregate's onWindowClose
        forwards the current record's context)."""
        import numpy as np

        if not records:
            return
        if any(r.partial is not None for r in records):
            self._process_combined(records, state)
            return
        ends = self._ends(state)  # indexes an unindexed store before the batch changes it
        size = self.window.size
        ts = timestamps(records)
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
                                functools.partial(_add_all, inputs), records[indexes[-1]].headers)
        state.advance(int(ts.max()))
        self._close_windows(state, [(int(i), records[i]) for i in late], np.arange(len(records)), close,
                            [r.headers for r in records])

    def _update_window(self, state: TaskState, ends: TimeIndex, key: bytes, start: int, newest: int,
                       add: Callable[[Any], object], headers: Headers) -> None:
        """A window's entry updated once per batch: `add` adds the batch's records to it."""
        store_key = WINDOW_STORE.key(key, start)
        old = state.get(STORE, store_key)
        acc = self.acc_of(old)
        add(acc)
        value_ts = max(newest, old.timestamp) if old else newest
        state.put(STORE, store_key, StoreValue(self.stored(acc), value_ts, acc))
        if old is None:
            ends.add(start + self.window.size, store_key)
        if self.emit == "update":
            self._emit_window(state, key, start, acc, value_ts, headers)

    def _process_combined(self, records: list[Record], state: TaskState) -> None:
        """A batch the source combined (kstool.tasks.combiners.window_counts.WindowCombiner), with the
        results of its records one by one: a partial's window counts its records unless the
        stream time before its range had closed it (then those whose newest window it is are
        late); records the source found late come as themselves; rows without a key move stream
        time on, each at a record (a final window carries the headers of the one that closed
        it). A window's update carries its last partial's headers. The partials are grouped per window in
        numpy, and each window's entry is written in one pass (a count's entry keeps no aux:
        its value is the count)."""
        import numpy as np

        ends = self._ends(state)
        size = self.window.size
        steps = sorted((r for r in records if r.partial is not None and r.key is None),
                       key=lambda r: (r.partial[3], r.offset))  # type: ignore[index]  # a partial row's
        range_starts = sorted({r.partial[3] for r in steps})  # type: ignore[index]
        carried: list[int] = []  # stream time before each range: the batch's, then its ranges'
        newest, positions, closes = state.stream_time, [], []  # stream time as each step moved it
        for step in steps:
            if len(carried) < len(range_starts) and step.partial[3] == range_starts[len(carried)]:  # type: ignore[index]
                carried.append(newest)
            newest = max(newest, step.timestamp)
            positions.append(step.offset)
            closes.append(newest - self.grace)
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
                headers = [partials[i].headers for i in open_.tolist()]
                self._update_windows(state, ends, *_windows_of(keys, headers, starts[open_], counts[open_],
                                                              stamps[open_], offsets[open_]))
        state.advance(newest)
        self._close_windows(state, late, np.array(positions), np.array(closes), [step.headers for step in steps])

    def _update_windows(self, state: TaskState, ends: TimeIndex, keys: list[bytes], headers: list[Headers],
                        starts: list[int], counts: list[int], newest: list[int]) -> None:
        """Add each window's count to its entry, in order: the entry, its changelog record, its
        output record with --emit update, and the end of a new window in the index."""
        table = state.stores[STORE]
        changed = state.changed.setdefault(STORE, {})
        role, size, update, emitted = changelog_role(STORE), self.window.size, self.emit == "update", []
        for key, window_headers, start, count, stamp in zip(keys, headers, starts, counts, newest):
            store_key = WINDOW_STORE.key(key, start)
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
                                       value, stamp, headers=window_headers))
        state.record_all(emitted)

    def _ends(self, state: TaskState) -> TimeIndex:
        """(window end, store key) of the open windows: which close next."""
        if "ends" not in state.index:
            # time windows end on multiples of the advance (+ size): a bucket per end
            ends = TimeIndex(state, INDEX, ENDS, max(self.window.advance, self.index_bucket_ms))
            if not ends.exists:  # a store without its index (restored, or written before kstool kept indexes)
                for store_key in state.stores[STORE]:
                    ends.add(WINDOW_STORE.start(store_key) + self.window.size, store_key)
            state.index["ends"] = ends
        return cast(TimeIndex, state.index["ends"])

    def _close_windows(self, state: TaskState, late: list[tuple[int, Record]], positions: np.ndarray,
                       close: np.ndarray, headers: list[Headers]) -> None:
        """Late records and closed windows in processing order: a record's late copy, then the
        windows its stream time closed (suppress' order: window end, then key). `close[i]` is
        the close time from position `positions[i]` of the batch on, `headers[i]` those of the
        record there; `late`: (position, record)."""
        import numpy as np

        closing = self._ends(state).take(int(close[-1]) + 1)
        if closing:
            state.prefetch(STORE, (store_key for _, store_key in closing))
        events: list[tuple[int, int, Any, Headers]] = [(at, 0, record, record.headers) for at, record in late]
        if self.emit == "final" and closing:
            closer = np.searchsorted(close, np.array([end for end, _ in closing], np.int64), "left")
            events += [(int(positions[i]), 1, store_key, headers[i]) for i, (_, store_key) in zip(closer.tolist(), closing)]
            events.sort(key=lambda event: event[:2])  # stable: closings keep take()'s order
        for _, kind, item, item_headers in events:
            if kind == 0:
                state.emit(item.key, item.value, item.timestamp, LATE, headers=item_headers)
                continue
            store_key = item
            value = state.get(STORE, store_key)
            if value is not None:
                key, start, _ = WINDOW_STORE.split(store_key)
                self._emit_window(state, key, start, self.acc_of(value), value.timestamp, item_headers)
        for _, store_key in closing:
            value = state.get(STORE, store_key)
            if value is not None:
                state.delete(STORE, store_key, value.timestamp, log=False)  # expired, like a dropped segment


def _windows_of(keys: list[bytes], headers: list[Headers], starts: np.ndarray, counts: np.ndarray,
                stamps: np.ndarray, offsets: np.ndarray) -> tuple[list[bytes], list[Headers], list[int], list[int],
                                                                  list[int]]:
    """Partials grouped per (key, window start): each window's key, last partial's headers, start,
    count and newest time, in the order of its last partial (by offset, then start: the record
    cache's order)."""
    import numpy as np
    import pyarrow as pa

    ids = np.asarray(pa.array(keys, pa.binary()).dictionary_encode().indices, np.int64)
    by_cell = np.lexsort((offsets, starts, ids))  # a cell's partials in offset order: its last one last
    ids, starts = ids[by_cell], starts[by_cell]
    begins = np.flatnonzero(np.r_[True, (ids[1:] != ids[:-1]) | (starts[1:] != starts[:-1])])
    count = np.add.reduceat(counts[by_cell], begins)
    newest = np.maximum.reduceat(stamps[by_cell], begins)
    last = np.maximum.reduceat(offsets[by_cell], begins)
    order = np.lexsort((starts[begins], last))
    lasts = by_cell[np.r_[begins[1:], len(by_cell)] - 1][order]
    return ([keys[i] for i in lasts.tolist()], [headers[i] for i in lasts.tolist()], starts[begins][order].tolist(),
            count[order].tolist(), newest[order].tolist())


def _add_all(inputs: list[Any], acc: Acc) -> None:
    acc.add_all(inputs)
