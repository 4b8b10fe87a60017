"""Session aggregation (KStreamSessionWindowAggregate since KAFKA-12718, Kafka 3.0): a record
merges the key's sessions within the gap into one; the close time is stream time - grace - gap,
and a record is late when the merged session's end is before it (a later record within the gap
could still have extended the session until then). Sessions replaced by a merge are deleted
(tombstones in the changelog, and in the output with --emit update). `--emit final` emits a
session once its end is before the close time (EmitStrategy.onWindowClose), with the session's
end as timestamp, and the session then leaves the store (retention gap + grace). A record does
not merge with a session that ends exactly at the close time before it, though that session is
not closed: Kafka Streams' session store hides it by then (RocksDB segments' fetch starts at
stream time - retention + 1), so the record starts a new session, which replaces a stored one
of the same bounds (gap 5, grace 5: a@0, a@10, a@0 writes [0,0] with 1, not 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from kstool.contract import LATE
from kstool.stores import SESSION_STORE
from kstool.stores.windowed_keys import output_key
from kstool.streams.accumulators import Acc
from kstool.streams.headers import Headers
from kstool.streams.indexes import KeyIndex, TimeIndex
from kstool.streams.task import Record, RecordByRecord, StoreValue, TaskState
from kstool.streams.window_aggregation import BY_KEY, ENDS, INDEX, STORE, WindowAggregation, timestamps

if TYPE_CHECKING:  # numpy where batches are processed, not where a topology is only named
    import numpy as np

    from kstool.streams.session_batches import Run


@dataclass
class SessionAggregate(WindowAggregation, RecordByRecord):
    def restored(self, store: str, key: bytes, value: bytes, timestamp: int, stream_time: int) -> StoreValue | None:
        """A changelog entry back in the store, unless its session had closed (and left it)."""
        if SESSION_STORE.end(key) < stream_time - self.grace - self.window.size:
            return None
        return StoreValue(value, timestamp, self.restored_acc(value))

    def reads(self, records: list[Record]) -> dict[str, set[bytes]]:
        return {INDEX: {ENDS} | {BY_KEY + cast(bytes, r.key) for r in records}}

    def _emit_session(self, state: TaskState, key: bytes, start: int, end: int, acc: Acc | None,
                      headers: Headers = None) -> None:
        """A session's update, with the headers of the record that changed it (Kafka Streams'
        record cache keeps the record's context; without the cache the update is a new record,
        without headers), or its final value, with those of the record that closed it."""
        value = None if acc is None else self.output(acc)
        state.emit(output_key(key, start, end, True, self.key_format), value, end,
                   store=STORE, store_key=SESSION_STORE.key(key, start, end), headers=headers)

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
        ts = timestamps(records)
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
        for position, _, kind, key, session in sorted(merger.changes, key=lambda change: change[:2]):
            if kind == _DELETE:
                state.delete(STORE, cast(bytes, session.stored_as), session.end)
                by_key.discard(key, cast(bytes, session.stored_as))
                if self.emit == "update":
                    self._emit_session(state, key, session.start, session.end, None, records[position].headers)
                continue
            store_key = SESSION_STORE.key(key, session.start, session.end)
            state.put(STORE, store_key, StoreValue(self.stored(session.acc), session.end, session.acc))
            if store_key not in by_key.get(key):
                by_key.add(key, store_key)
                ends.add(session.end, store_key)
            if self.emit == "update":
                self._emit_session(state, key, session.start, session.end, session.acc, records[position].headers)
        state.advance(int(ts.max()))
        self._close_in_order(state, [(position, records[position]) for position in merger.late], close, records)

    def _close_in_order(self, state: TaskState, late: list[tuple[int, Record]], close: np.ndarray,
                        records: list[Record]) -> None:
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
        for at, kind, item in events:
            if kind == 0:
                state.emit(item.key, item.value, item.timestamp, LATE, headers=item.headers)
                continue
            end, store_key = item
            self._close_session(state, by_key, end, store_key, records[at].headers)

    def process(self, record: Record, state: TaskState) -> None:
        by_key, ends = self._indexes(state)  # an unindexed store is indexed before this record changes it
        gap, ts = self.window.size, record.timestamp
        visible_after = state.stream_time - self.grace - gap  # the store's retention (see the module's doc)
        close = state.advance(ts) - self.grace - gap
        key = cast(bytes, record.key)  # records without a key never reach the aggregation
        overlapping = []
        for store_key in by_key.get(key):
            _, start, end = SESSION_STORE.split(store_key)
            if end >= ts - gap and start <= ts + gap and end > visible_after:
                overlapping.append((start, end, store_key, state.get(STORE, store_key)))
        start = min([ts] + [s for s, *_ in overlapping])
        end = max([ts] + [e for _, e, *_ in overlapping])
        if end < close:
            state.emit(record.key, record.value, ts, LATE, headers=record.headers)
            self._close_sessions(state, close, record.headers)
            return
        acc = self.new_acc()
        for old_start, old_end, store_key, value in sorted(overlapping):
            acc.merge(self.acc_of(value))  # type: ignore[arg-type]  # the same kind
            if (old_start, old_end) != (start, end):
                state.delete(STORE, store_key, old_end)
                by_key.discard(key, store_key)
                if self.emit == "update":
                    self._emit_session(state, key, old_start, old_end, None, record.headers)
        acc.add(self.input_of(record))
        store_key = SESSION_STORE.key(key, start, end)
        state.put(STORE, store_key, StoreValue(self.stored(acc), end, acc))
        if store_key not in by_key.get(key):
            by_key.add(key, store_key)
            ends.add(end, store_key)
        if self.emit == "update":
            self._emit_session(state, key, start, end, acc, record.headers)
        self._close_sessions(state, close, record.headers)

    def _indexes(self, state: TaskState) -> tuple[KeyIndex, TimeIndex]:
        """Each key's sessions, and (session end, store key): which sessions close next
        (sessions merged away are skipped when taken)."""
        found = state.index.get("sessions")
        if found is None:
            found = _SessionIndexes(KeyIndex(state, INDEX, BY_KEY), TimeIndex(state, INDEX, ENDS, self.index_bucket_ms))
            if not found.ends.exists:  # a store without its index (restored, or written before kstool kept indexes)
                for store_key in state.stores[STORE]:
                    key, _, end = SESSION_STORE.split(store_key)
                    found.by_key.add(key, store_key)
                    found.ends.add(end, store_key)
            state.index["sessions"] = found
        found = cast(_SessionIndexes, found)
        return found.by_key, found.ends

    def _close_sessions(self, state: TaskState, close: int, headers: Headers) -> None:
        """Sessions whose end is before the close time are final: emitted in final mode (in
        end order, as the time-ordered session store yields them, with the headers of the
        record that closed them), then dropped from the store as expired (no changelog
        tombstone: the topic's retention removes them)."""
        by_key, ends = self._indexes(state)
        closing = ends.take(close)
        if closing:
            state.prefetch(STORE, (store_key for _, store_key in closing))
        for end, store_key in closing:
            self._close_session(state, by_key, end, store_key, headers)

    def _close_session(self, state: TaskState, by_key: KeyIndex, end: int, store_key: bytes,
                       headers: Headers) -> None:
        """A session the stream time closed (one merged into a later session is gone already)."""
        value = state.get(STORE, store_key)
        if value is None:
            return
        key, start, _ = SESSION_STORE.split(store_key)
        if self.emit == "final":
            self._emit_session(state, key, start, end, self.acc_of(value), headers)
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
        _, start, end = SESSION_STORE.split(store_key)
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


@dataclass
class _SessionIndexes:
    by_key: KeyIndex
    ends: TimeIndex

    def save(self) -> None:
        self.by_key.save()
        self.ends.save()
