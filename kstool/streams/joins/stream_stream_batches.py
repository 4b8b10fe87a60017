"""A stream-stream join's batch at once (StreamStreamJoin.process_batch): which records are
late, which stored records each record finds, and what expires, worked out in columns; then
the store writes and results in processing order, as `process()` per record makes them. Left
and outer joins then keep their unmatched records as `process()` does, through the same
methods (partner_found, no_partner, emit_unmatched), in that walk.

Per record, `process()` costs ~40 µs, mostly lookups in its stores and indexes; here each
record key's stored records are asked for once per batch. Equal to `process()` record by record (the test's
oracle), because:
- a side's newest timestamp is the running maximum of its records (a late record is older);
- a record is late when it is older than its side's newest before it - retention + 1;
- a side expires what is older than its newest - retention + 1 at each of its stored records,
  so an entry of side o is still held when a record at position j probes it iff it is not older
  than (o's running maximum at j) - retention + 1, or o stored no record before j in the batch;
- which records find partners does not depend on what waits unmatched: only the null results
  and the unmatched store do, and the walk keeps them in order;
- a late record that waits unmatched takes a seqnum (`_late_key`), numbered here with the
  stored records before any store key is made.
The batch's stored records go into their stores at once before the walk, which never reads
them back (a partner from the same batch is read from its record). A batch whose seqnums would
meet a stored entry's, or whose keys and times do not fit one int64 sort key, returns False and
goes record by record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from kstool.contract import LATE
from kstool.stores import WINDOW_STORE
from kstool.streams.task import LEFT, RIGHT, Record, StoreValue, TaskState

if TYPE_CHECKING:
    from kstool.streams.indexes import OwnedKeys
    from kstool.streams.joins.stream_stream import JoinIndexes, StreamStreamJoin

SEQUENCES = 2**31  # seqnums wrap as the record path's do
NOT_YET = np.iinfo(np.int64).min // 4  # no horizon: nothing expired yet this batch


def join_batch(join: "StreamStreamJoin", records: list[Record], state: TaskState) -> bool:
    """Process the batch as `join.process` would record by record; False (nothing done) when
    it cannot be done at once."""
    if not records:
        return True
    batch = _Batch.of(records)
    if not batch.valid.any():  # skipped records: they only move stream time (or get null results)
        if join.how != "inner":
            return False
        state.stream_time = max(state.stream_time, int(batch.times.max()))
        return True
    indexes = join.join_indexes(state)
    keep = join.retention - 1
    newest, horizon = batch.store_or_drop(indexes, keep)
    batch.number(state.sequence)
    matches = _matches(join, batch, horizon, indexes)
    if matches is None:
        return False
    stream_times = np.maximum.accumulate(np.maximum(batch.times, state.stream_time))
    waiting = batch.late_and_waiting(join, matches, stream_times)
    if len(waiting):  # they take seqnums too: the stored records' move on, and may reorder partners
        batch.number(state.sequence, waiting)
        matches = _matches(join, batch, horizon, indexes)
    if matches is None:
        return False
    store_keys = batch.store_keys()
    if not state.put_all_new(batch.stored_entries(join.stores, store_keys)):
        return False  # a seqnum meets a stored entry's: the record path takes the next free one
    state.stream_time = int(stream_times[-1])
    _write(join, batch, state, store_keys, matches, stream_times, indexes)
    state.sequence = batch.last_sequence
    _expire(join, batch, state, indexes, store_keys, newest, keep)
    return True


def _matches(join: "StreamStreamJoin", batch: "_Batch", horizon: dict[int, np.ndarray],
             indexes: "JoinIndexes") -> list[tuple[int, int, bytes | None]] | None:
    found = [batch.matches(side, join.probe(side), horizon[1 - side], indexes.by_key[1 - side])
             for side in (LEFT, RIGHT)]
    if found[0] is None or found[1] is None:
        return None
    return _in_processing_order(found[0], found[1])


Matches = tuple[np.ndarray, list[int], list[bytes | None]]


@dataclass
class _Batch:
    """A batch's records (in processing order) and their columns."""

    records: list[Record]
    times: np.ndarray
    sides: np.ndarray
    valid: np.ndarray  # with a key and a value: joined, and stored unless late
    # set by store_or_drop and number
    late: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    positions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # of the records stored
    sequences: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # their seqnums
    waiting_seqs: dict[int, int] = field(default_factory=dict)  # late records' that wait unmatched
    last_sequence: int = 0  # the batch's last seqnum, or the one before it

    @classmethod
    def of(cls, records: list[Record]) -> "_Batch":
        n = len(records)
        return cls(records, np.fromiter((r.timestamp for r in records), np.int64, n),
                   np.fromiter((r.side for r in records), np.int8, n),
                   np.fromiter((r.key is not None and r.value is not None for r in records), bool, n))

    def store_or_drop(self, indexes: "JoinIndexes", keep: int) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """Which records are late and which are stored; per side, its newest timestamp at each
        position and the oldest timestamp it still holds there."""
        times, n = self.times, len(self.times)
        late, stored = np.zeros(n, bool), np.zeros(n, bool)
        newest, horizon = {}, {}
        for side in (LEFT, RIGHT):
            mine = self.valid & (self.sides == side)
            prior = indexes.expiries[side].newest
            running = np.maximum.accumulate(np.maximum(np.where(mine, times, NOT_YET), prior))
            before = np.r_[prior, running[:-1]]
            late |= mine & (times < before - keep)
            stored |= mine & (times >= before - keep)
            newest[side] = running
            # nothing expires before the side's first stored record of the batch
            horizon[side] = np.where(np.cumsum(mine & stored) > 0, running - keep, NOT_YET)
        self.late, self.positions = late, np.flatnonzero(stored)
        return newest, horizon

    def number(self, sequence: int, waiting: np.ndarray | None = None) -> None:
        """Seqnums after `sequence`, in processing order, for the stored records and the late
        records that wait unmatched (as `_late_key` numbers them)."""
        numbered = self.positions if waiting is None else np.union1d(self.positions, waiting)
        sequences = (sequence + 1 + np.arange(len(numbered), dtype=np.int64)) % SEQUENCES
        self.sequences = sequences[np.isin(numbered, self.positions)]
        self.waiting_seqs = {} if waiting is None else dict(zip(waiting.tolist(), sequences[np.isin(numbered, waiting)].tolist()))
        self.last_sequence = int(sequences[-1]) if len(numbered) else sequence

    def store_keys(self) -> dict[int, bytes]:
        """Each stored record's window store key (position -> key)."""
        records = self.records
        return {position: WINDOW_STORE.key(cast(bytes, records[position].key), records[position].timestamp, seqnum)
                for position, seqnum in zip(self.positions.tolist(), self.sequences.tolist())}

    def stored_entries(self, stores: tuple[str, ...], store_keys: dict[int, bytes]) -> dict[str, list[tuple[bytes, StoreValue]]]:
        """What each side's window store gets: its stored records."""
        entries: dict[str, list[tuple[bytes, StoreValue]]] = {stores[LEFT]: [], stores[RIGHT]: []}
        for position, store_key in store_keys.items():
            record = self.records[position]
            entries[stores[record.side]].append((store_key, StoreValue(record.value, record.timestamp)))
        return entries

    def late_and_waiting(self, join: "StreamStreamJoin", matches: list[tuple[int, int, bytes | None]],
                         stream_times: np.ndarray) -> np.ndarray:
        """Late records of a left/outer side that find no partner while their window is still
        open at stream time: they wait unmatched, under a seqnum of their own."""
        if join.how == "inner" or not self.late.any():
            return np.zeros(0, np.int64)
        matched = np.zeros(len(self.times), bool)
        matched[[position for position, _, _ in matches]] = True
        outer = np.array([join.outer_side(LEFT), join.outer_side(RIGHT)])[self.sides]
        later = np.where(self.sides == LEFT, join.probe(LEFT)[1], join.probe(RIGHT)[1])
        return np.flatnonzero(self.late & outer & ~matched & (self.times + later >= stream_times))

    def matches(self, side: int, probe: tuple[int, int], other_horizon: np.ndarray,
                other_by_key: "OwnedKeys") -> Matches | None:
        """(position, partner's position or -1, partner's store key or None) for each record of
        `side` and each entry of the other side it joins, in the record path's order; None
        when the keys and times do not fit one sort key."""
        records, times = self.records, self.times
        positions, sequences = self.positions, self.sequences
        probes = np.flatnonzero(self.valid & (self.sides == side))
        if not len(probes):
            return np.zeros(0, np.int64), [], []
        ids: dict[bytes, int] = {}
        probe_ids = np.fromiter((ids.setdefault(cast(bytes, records[p].key), len(ids)) for p in probes.tolist()),
                                np.int64, len(probes))
        # the other side's candidates: its entries from earlier batches for these keys (position
        # -1), and this batch's stored records
        held_keys, held_ids, held_times, held_seqs = [], [], [], []
        for key_id, owned in enumerate(other_by_key.get_many(list(ids))):  # ids: in key_id order
            for store_key in owned:
                _, ts, seqnum = WINDOW_STORE.split(store_key)
                held_keys.append(store_key)
                held_ids.append(key_id)
                held_times.append(ts)
                held_seqs.append(seqnum)
        theirs = self.sides[positions] == 1 - side
        fresh, fresh_seqs = positions[theirs], sequences[theirs]
        fresh_ids = np.fromiter((ids.get(cast(bytes, records[p].key), -1) for p in fresh.tolist()), np.int64, len(fresh))
        joinable = fresh_ids >= 0
        cand_ids = np.r_[np.array(held_ids, np.int64), fresh_ids[joinable]]
        if not len(cand_ids):
            return np.zeros(0, np.int64), [], []
        cand_times = np.r_[np.array(held_times, np.int64), times[fresh[joinable]]]
        cand_seqs = np.r_[np.array(held_seqs, np.int64), fresh_seqs[joinable]]
        stored_at = np.r_[np.full(len(held_keys), -1, np.int64), fresh[joinable]]
        earlier, later = probe
        low, high = times[probes] - earlier, times[probes] + later
        base = min(int(cand_times.min()), int(low.min()))
        span = max(int(cand_times.max()), int(high.max())) - base + 1
        if span * len(ids) >= 2**62:
            return None
        # candidates by (key, time, seqnum): each probe's are one slice of them
        order = np.lexsort((cand_seqs, cand_times, cand_ids))
        sort_key = cand_ids[order] * span + (cand_times[order] - base)
        starts = np.searchsorted(sort_key, probe_ids * span + (low - base), "left")
        stops = np.searchsorted(sort_key, probe_ids * span + (high - base), "right")
        counts = stops - starts
        probe_of = np.repeat(np.arange(len(probes)), counts)
        candidate = order[starts[probe_of] + np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)]
        at = probes[probe_of]
        # stored before the probe, and not yet expired by the other side
        held = (stored_at[candidate] < at) & (cand_times[candidate] >= other_horizon[at])
        at, candidate = at[held], candidate[held]
        return at, stored_at[candidate].tolist(), [held_keys[c] if c < len(held_keys) else None
                                                   for c in candidate.tolist()]


def _in_processing_order(left: Matches, right: Matches) -> list[tuple[int, int, bytes | None]]:
    at = np.r_[left[0], right[0]]
    partners, keys = left[1] + right[1], left[2] + right[2]
    order = np.argsort(at, kind="stable")  # a record's own partners stay in their order
    return [(int(at[i]), partners[i], keys[i]) for i in order.tolist()]


def _write(join: "StreamStreamJoin", batch: _Batch, state: TaskState, store_keys: dict[int, bytes],
           matches: list[tuple[int, int, bytes | None]], stream_times: np.ndarray, indexes: "JoinIndexes") -> None:
    """Store puts (changelog records), late records and join results, in processing order;
    in left and outer joins also what waits unmatched and the null results."""
    records, stores, next_match = batch.records, join.stores, 0
    late, stream_time_at = batch.late.tolist(), stream_times.tolist()  # read per record: lists, not numpy scalars
    inner = join.how == "inner"
    # an inner join skips records without key or value; left/outer ones may give null results
    walked = np.flatnonzero(batch.valid).tolist() if inner else range(len(records))
    for position in walked:
        record = records[position]
        if not inner:
            if join.keyless_result(state, record) or record.key is None or record.value is None:
                continue
            if record.timestamp == stream_time_at[position]:
                join.emit_unmatched(state, indexes.unmatched, record.timestamp, record.headers)
        store_key = store_keys.get(position)
        if store_key is not None:  # put before the walk: log it in its place
            state.log_put(stores[record.side], store_key, record.value, record.timestamp)
        elif late[position]:
            state.emit(record.key, record.value, record.timestamp, LATE)
        matched = False
        while next_match < len(matches) and matches[next_match][0] == position:
            _, partner, partner_key = matches[next_match]
            next_match += 1
            matched = True
            if partner >= 0:
                other_value, other_ts, partner_key = records[partner].value, records[partner].timestamp, store_keys[partner]
            else:
                held = cast(StoreValue, state.get(stores[1 - record.side], cast(bytes, partner_key)))
                other_value, other_ts = held.value, held.timestamp
            join.partner_found(state, record, other_ts, cast(bytes, partner_key), other_value)
        if not matched and not inner and join.outer_side(record.side):
            if store_key is None and position in batch.waiting_seqs:
                store_key = WINDOW_STORE.key(cast(bytes, record.key), record.timestamp, batch.waiting_seqs[position])
            join.no_partner(state, record, store_key, stream_time_at[position], indexes.unmatched)


def _expire(join: "StreamStreamJoin", batch: _Batch, state: TaskState, indexes: "JoinIndexes",
            store_keys: dict[int, bytes], newest: dict[int, np.ndarray], keep: int) -> None:
    """The batch's stored records into the expiry indexes, then what each side no longer holds
    out of its store (not logged: a window store's expiry writes no tombstone). The batch is
    done: nothing asks `indexes.by_key` again."""
    stored = batch.positions
    for side in (LEFT, RIGHT):
        mine = stored[batch.sides[stored] == side]
        if not len(mine):
            continue
        indexes.expiries[side].add_many(batch.times[mine], [store_keys[position] for position in mine.tolist()])
        expired = indexes.expiries[side].take(int(newest[side][-1]) - keep)
        if expired:
            state.prefetch(join.stores[side], (store_key for _, store_key in expired))
        for _, store_key in expired:
            state.delete(join.stores[side], store_key, 0, log=False)
