"""A session aggregation's batch in columns, for the keys that need no merging record by record
(SessionAggregate.process_batch; the rest go through its merger).

A key qualifies when it holds no stored session, its records come in time order, and none of
them is late. Then, as `process()` merges them one by one:
- a record's sessions near it can only be the one its previous record made or extended (that
  session ends at the previous record's time; nothing in the batch reaches further back);
- it joins that session when it is within the gap of it and the session was still open at the
  stream time before the record (a session closed by then is gone from the merge), else it
  starts a new one; so a key's sessions are runs of its records cut where either fails;
- a session's start and end are its first and last record's times, and it is put once, where
  its last record is (the record cache keeps that change only).
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


def in_order_runs(batch: KeyedBatch, ts: np.ndarray, close: np.ndarray, gap: int,
                  excluded: np.ndarray) -> tuple[list[Run], np.ndarray]:
    """The sessions of the keys that qualify (see above), and whether each key did not qualify.
    ts, close: each record's time and the close time from its position on (stream time - grace
    - gap); excluded: keys that do not qualify whatever their records (those with stored sessions)."""
    order = np.argsort(batch.key_of, kind="stable")  # by key, then position
    key, times, positions = batch.key_of[order], ts[order], order
    first = np.r_[True, key[1:] != key[:-1]]
    before = np.r_[0, times[:-1]]  # the key's previous record's time (where not first)
    open_before = before >= close[np.maximum(positions - 1, 0)]  # its session still open before this record
    cut = first | (times - before > gap) | ~open_before
    others = excluded.copy()
    others[key[(times < close[positions]) | (~first & (times < before))]] = True  # late, or out of order
    own = ~others[key]
    key, times, positions = key[own], times[own], positions[own]
    cuts = np.flatnonzero(cut[own])
    lasts = np.r_[cuts[1:], len(key)][:len(cuts)] - 1
    listed = positions.tolist()
    runs = [Run(k, start, end, listed[a:b + 1]) for k, start, end, a, b in
            zip(key[cuts].tolist(), times[cuts].tolist(), times[lasts].tolist(), cuts.tolist(), lasts.tolist())]
    return runs, others
