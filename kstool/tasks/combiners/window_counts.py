"""Counts in time windows combined per key, window and range, with the range's stream time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kstool.engine import HEADERS_TYPE
from kstool.streams.windows import WindowSpec
from kstool.tasks.combiners.partials import partials_table


class WindowCombiner:
    """Counts per (key, time window) of each range, with what the task needs to apply them as it
    would apply the records one by one (kstool.streams.time_windows.WindowedAggregate):

    - stream time here is the range's own running maximum; a record none of whose windows is
      open by it is late whatever came before, and stays a row of its own;
    - each partial counts the records its window was open for, and (`latest`) those for which
      it is the newest window: if the task finds the window closed by the stream time before
      the range (earlier batches, earlier ranges of the batch), those records are late;
    - rows without a key: the range's stream time as records moved it on, each at the record
      that moved it, with its headers (a window's final record carries those of the record that
      closed it); of records in a row with the same headers (none, mostly) the last stands for
      them, so without headers it is one row: the range's newest time (the task's stream time
      after it). At which record a window closed otherwise only orders it against late records,
      which go to another topic;
    - each partial has the headers of its last record (what the window's update carries).
    """

    def __init__(self, size: int, advance: int, grace: int):
        self.window, self.grace = WindowSpec("hopping", size, advance), grace

    def for_range(self, rng: Any) -> "_RangeWindows":
        return _RangeWindows(self.window, self.grace, rng.start)


class _RangeWindows:
    def __init__(self, window: WindowSpec, grace: int, range_start: int):
        self.window, self.grace, self.range_start = window, grace, range_start
        self.stream_time = -1  # no record yet (kstool.streams.task.NO_TIME)
        self.steps: list[tuple[int, int, Any]] = []  # (stream time, offset, headers) where it moved on

    def combine(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Table]:
        stamps = batch.column("timestamp").cast(pa.int64())
        valid = np.asarray(pc.fill_null(pc.and_(pc.and_(batch.column("key").is_valid(), batch.column("value").is_valid()),
                                                pc.greater_equal(stamps, 0)), False))
        rows = np.flatnonzero(valid)
        times = np.asarray(stamps.fill_null(0))[rows] // 1000  # us -> ms
        offsets = np.asarray(batch.column("offset"))[rows]
        stream = np.maximum.accumulate(np.maximum(times, self.stream_time))
        record_of, starts = self.window.assign(times)
        open_ = starts + self.window.size > stream[record_of] - self.grace
        newest_window = np.r_[record_of[1:] != record_of[:-1], True] if len(record_of) else np.zeros(0, bool)
        pairs = record_of[open_]
        headers = batch.column("headers")
        if len(stream) and stream[-1] > self.stream_time:
            moved = np.flatnonzero(stream > np.r_[self.stream_time, stream[:-1]])
            if headers.null_count == len(headers):
                self._step(int(stream[-1]), int(offsets[moved[-1]]), None)
            else:
                for i, record_headers in zip(moved.tolist(), headers.take(pa.array(rows[moved])).to_pylist()):
                    self._step(int(stream[i]), int(offsets[i]), record_headers)
            self.stream_time = int(stream[-1])
        # keys as ids into the batch's distinct keys: a record's key is hashed once, not per window
        keys = pc.dictionary_encode(batch.column("key").take(pa.array(rows)))
        table = pa.table({"key": pa.DictionaryArray.from_arrays(pa.array(np.asarray(keys.indices)[pairs]), keys.dictionary),
                          "window": starts[open_], "latest": newest_window[open_].astype(np.int64),
                          "timestamp": times[pairs], "offset": offsets[pairs],
                          "headers": headers.take(pa.array(rows[pairs])) if headers.null_count < len(headers)
                          else pa.nulls(len(pairs), HEADERS_TYPE)})
        keep = np.ones(len(valid), bool)
        keep[rows[pairs]] = False  # taken: a record with an open window
        return batch.filter(pa.array(keep)), table

    def _step(self, stream_time: int, offset: int, headers: Any) -> None:
        """Stream time moved on at a record. A window is closed by the first record that moved it
        far enough: the last of a run of records with the same headers stands for the run."""
        if self.steps and self.steps[-1][2] == headers:
            self.steps[-1] = (stream_time, offset, headers)
        else:
            self.steps.append((stream_time, offset, headers))

    def merge(self, tables: list[pa.Table]) -> pa.Table:
        table = pa.concat_tables(tables)
        keys, windows, group = self._cells(table)
        n = len(keys)
        counts = np.bincount(group, minlength=n)
        latest = np.bincount(group, weights=np.asarray(table.column("latest")), minlength=n).astype(np.int64)
        newest, last = np.full(n, np.iinfo(np.int64).min), np.full(n, -1)
        np.maximum.at(newest, group, np.asarray(table.column("timestamp")))
        np.maximum.at(last, group, np.asarray(table.column("offset")))
        steps = self.steps or [(self.stream_time, -1, None)]
        m = len(steps)
        partial = pa.StructArray.from_arrays(
            [pa.array(np.r_[counts, np.zeros(m, np.int64)]), pa.array(np.ones(n + m, bool)),
             pa.array(np.r_[windows, np.zeros(m, np.int64)], mask=np.r_[np.zeros(n, bool), np.ones(m, bool)]),
             pa.array(np.r_[latest, np.zeros(m, np.int64)]), pa.array(np.full(n + m, self.range_start, np.int64))],
            names=["count", "whole", "window", "latest", "range"])
        stamps = np.r_[newest, [step[0] for step in steps]].astype(np.int64)
        offsets = np.r_[last, [step[1] for step in steps]].astype(np.int64)
        return partials_table(pa.concat_arrays([keys, pa.nulls(m, pa.binary())]),
                              pa.array(stamps * 1000, pa.timestamp("us", tz="UTC")), pa.array(offsets), partial,
                              self._headers(table.column("headers"), group, n, [step[2] for step in steps]))

    @staticmethod
    def _headers(headers: pa.ChunkedArray, group: np.ndarray, n: int, of_steps: list[Any]) -> pa.Array:
        """Each cell's last record's headers (rows come in offset order), then the steps'."""
        if headers.null_count == len(headers) and not any(of_steps):
            return pa.nulls(n + len(of_steps), HEADERS_TYPE)
        last_row = np.full(n, -1)
        np.maximum.at(last_row, group, np.arange(len(group)))
        return pa.concat_arrays([headers.take(pa.array(last_row)).combine_chunks(),
                                 pa.array(of_steps, HEADERS_TYPE)])

    def _cells(self, table: pa.Table) -> tuple[pa.Array, np.ndarray, np.ndarray]:
        """The range's (key, window) cells: each one's key and window start, and each row's cell
        (an index into them). A cell is numbered key id * width + window slot: marked in an
        array of all cells, or sorted when the range spans too many windows for one."""
        column = table.column("key").unify_dictionaries()
        distinct = column.chunk(0).dictionary if column.num_chunks else pa.array([], pa.binary())
        if not table.num_rows:
            return distinct.slice(0, 0), np.zeros(0, np.int64), np.zeros(0, np.int64)
        key_ids = np.concatenate([np.asarray(chunk.indices, np.int64) for chunk in column.chunks])
        windows = np.asarray(table.column("window"))
        base, advance = int(windows.min()), self.window.advance
        slots = (windows - base) // advance
        width = int(slots.max()) + 1
        cell = key_ids * width + slots
        if len(distinct) * width > len(cell) + (1 << 16):  # an array of cells would outgrow the rows
            cells, group = np.unique(cell, return_inverse=True)
        else:
            seen = np.zeros(len(distinct) * width, bool)
            seen[cell] = True
            cells = np.flatnonzero(seen)
            index = np.zeros(len(seen), np.int64)
            index[cells] = np.arange(len(cells))
            group = index[cell]
        return distinct.take(pa.array(cells // width)), base + cells % width * advance, group
