"""A session aggregation's batch in columns, for the keys that need no merging record by record
(SessionAggregate.process_batch; the rest go through its merger).

A key qualifies when it holds at most one stored session, its records come in time order (the
first not before the stored session's end), and none of them is late. Then, as `process()`
merges them one by one:
- a record's sessions near it can only be the one its previous record made or extended (that
  session ends at the previous record's time; nothing in the batch reaches further back), or,
  for the key's first record, the stored session;
- it joins that session when it is within the gap of it and the store still shows the session
  at the stream time before the record (it ends after that close time), else it starts a new
  one; so a key's sessions are runs of its records cut where either fails;
- a session's start and end are its first and last record's times (the stored session's start
  when the first run joins it), and it is put once, where its last record is (the record cache
  keeps that change only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass
class KeyedBatch:
    keys: list[bytes]  # the batch's distinct keys
    key_of: np.ndarray  # each record's: an index into keys


def keyed(record_keys: list[bytes]) -> KeyedBatch:
    encoded = pa.array(record_keys, pa.binary()).dictionary_encode()
    return KeyedBatch(encoded.dictionary.to_pylist(), np.asarray(encoded.indices, np.int64))


@dataclass
class Run:
    key: int  # an index into KeyedBatch.keys
    start: int
    end: int
    positions: list[int]  # its records' positions in the batch, in order
    joins_stored: bool = False  # the key's stored session is its first record's


NO_SESSION = np.iinfo(np.int64).min  # a key's stored session end where it has none


def in_order_runs(batch: KeyedBatch, ts: np.ndarray, close: np.ndarray, close_before: int, gap: int,
                  stored_end: np.ndarray, excluded: np.ndarray) -> tuple[list[Run], np.ndarray]:
    """The sessions of the keys that qualify (see above), and whether each key did not qualify.
    ts, close: each record's time and the close time from its position on (stream time - grace
    - gap), close_before: before the batch; per key: its stored session's end (NO_SESSION:
    none), and whether it is excluded whatever its records (more than one stored session)."""
    order = np.argsort(batch.key_of, kind="stable")  # by key, then position
    key, times, positions = batch.key_of[order], ts[order], order
    first = np.r_[True, key[1:] != key[:-1]]
    before = np.r_[0, times[:-1]]  # the key's previous record's time (where not first)
    open_before = before > close[np.maximum(positions - 1, 0)]  # its session still seen before this record
    cut = first | (times - before > gap) | ~open_before
    ends = stored_end[key]
    others = excluded.copy()
    others[key[(times < close[positions]) | (~first & (times < before)) | (first & (times < ends))]] = True
    own = ~others[key]
    key, times, positions, ends = key[own], times[own], positions[own], ends[own]
    cuts = np.flatnonzero(cut[own])
    lasts = np.r_[cuts[1:], len(key)][:len(cuts)] - 1
    # a key's first run joins its stored session: within the gap, and seen before the run
    at, starts, stored = positions[cuts], times[cuts], ends[cuts]
    has = first[own][cuts] & (stored != NO_SESSION)
    stored = np.where(has, stored, starts)  # no NO_SESSION in the arithmetic below
    joins = has & (starts - stored <= gap) & (stored > np.where(at == 0, close_before, close[np.maximum(at - 1, 0)]))
    listed = positions.tolist()
    return [Run(k, start, end, listed[a:b + 1], join) for k, start, end, a, b, join in
            zip(key[cuts].tolist(), starts.tolist(), times[lasts].tolist(), cuts.tolist(), lasts.tolist(),
                joins.tolist())], others
