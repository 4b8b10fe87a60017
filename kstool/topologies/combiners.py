"""Records combined where the source reads them (kstool.contract.CombinerSpec): per group and
partition range one partial row (count, sum, min, max, whether all numbers were whole, newest
timestamp, last offset) crosses into Spark instead of every record.

NumberCombiner (the keyed aggregation) takes a record when its number reads the same here as in
Spark SQL: a key, a value, and for sum/min/max a plain decimal text (no spaces, no special
words) or an 8-byte long or double, finite. WordCombiner (wordcount) takes the lines that are
ASCII, where Arrow's lower-casing and word split are Spark's. WindowCombiner (counts in time
windows) takes a record with a key, a value and a timestamp that has an open window. Every
other record stays a row of its own and takes the Spark path as before (--on-error included),
so the results do not depend on which records were combined."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kstool.contract import PARTIAL, CombinerSpec
from kstool.streams.windows import WindowSpec

# what Java's Double.parseDouble and Arrow's parser read alike, to the same double
PLAIN_NUMBER = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
FIELDS = ("count", "sum", "min", "max", "whole")
ASCII = r"^[\x00-\x7f]*$"
# wordcount's word separators: one pattern that Java (Spark's split) and RE2 (Arrow's) read alike
NON_WORD = r"[^\p{L}\p{N}_]+"
COMBINED_FORMATS = ("text", "long", "double")
COMBINED_AGGREGATIONS = ("count", "sum", "min", "max")  # avg: Spark keeps its own sum and count


WORD_SPEC = CombinerSpec(f"{__name__}:WordCombiner", {})


def number_spec(agg: str, group_by: str, input_value_format: str) -> CombinerSpec | None:
    if group_by != "key" or agg not in COMBINED_AGGREGATIONS or input_value_format not in COMBINED_FORMATS:
        return None
    return CombinerSpec(f"{__name__}:NumberCombiner", {"agg": agg, "input_value_format": input_value_format})


def window_spec(window: WindowSpec, grace: int, agg: str, group_by: str, time: str,
                input_value_format: str) -> CombinerSpec | None:
    """Counts in time windows of the record's timestamp, per record key (the task is the input
    partition, whose records the source reads in order)."""
    if (window.kind == "session" or agg != "count" or group_by != "key" or time != "record"
            or input_value_format not in COMBINED_FORMATS):
        return None
    return CombinerSpec(f"{__name__}:WindowCombiner",
                        {"size": window.size, "advance": window.advance, "grace": grace}, counts_late=True)


def merge(tables: list[pa.Table]) -> pa.Table:
    """Partials of one range combined further: counts and sums add up, and so on."""
    table = pa.concat_tables(tables)
    flat = table.flatten()
    grouped = flat.group_by("key", use_threads=False).aggregate(
        [(f"{PARTIAL}.count", "sum"), (f"{PARTIAL}.sum", "sum"), (f"{PARTIAL}.min", "min"),
         (f"{PARTIAL}.max", "max"), (f"{PARTIAL}.whole", "min"), ("timestamp", "max"), ("offset", "max")])
    partial = pa.StructArray.from_arrays(
        [grouped.column(f"{PARTIAL}.{field}_{how}").combine_chunks() for field, how in
         (("count", "sum"), ("sum", "sum"), ("min", "min"), ("max", "max"), ("whole", "min"))], names=FIELDS)
    return _partials(grouped.column("key"), grouped.column("timestamp_max"), grouped.column("offset_max"), partial)


class NumberCombiner:
    def __init__(self, agg: str, input_value_format: str):
        self.agg, self.input_value_format = agg, input_value_format

    def numbers(self, values: pa.Array) -> pa.Array:
        """Each value's number as Spark reads it, null where it might read otherwise."""
        if self.input_value_format == "text":
            plain = pc.fill_null(pc.match_substring_regex(values, PLAIN_NUMBER), False)
            parsed = pc.cast(pc.cast(values.filter(plain), pa.string()), pa.float64())
            return _scatter(parsed.to_numpy(zero_copy_only=False), np.asarray(plain), len(values))
        return _fixed_width(values, ">i8" if self.input_value_format == "long" else ">f8")

    def combine(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Table]:
        keys, values = batch.column("key"), batch.column("value")
        takes = pc.and_(keys.is_valid(), values.is_valid())
        numbers = self.numbers(values) if self.agg != "count" else pa.nulls(len(values), pa.float64())
        if self.agg != "count":
            takes = pc.and_(takes, pc.fill_null(pc.is_finite(numbers), False))
        taken = pa.table({"key": keys.filter(takes), "n": numbers.filter(takes),
                          "timestamp": batch.column("timestamp").filter(takes), "offset": batch.column("offset").filter(takes)})
        whole = pc.fill_null(pc.equal(pc.floor(taken.column("n")), taken.column("n")), True)
        grouped = taken.append_column("whole", whole).group_by("key", use_threads=False).aggregate(
            [("offset", "count"), ("n", "sum"), ("n", "min"), ("n", "max"), ("whole", "min"), ("timestamp", "max"),
             ("offset", "max")])
        partial = pa.StructArray.from_arrays(
            [grouped.column(c).combine_chunks() for c in ("offset_count", "n_sum", "n_min", "n_max", "whole_min")],
            names=FIELDS)
        return batch.filter(pc.invert(takes)), _partials(grouped.column("key"), grouped.column("timestamp_max"),
                                                         grouped.column("offset_max"), partial)

    merge = staticmethod(merge)


class WordCombiner:
    def combine(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Table]:
        values = batch.column("value")
        takes = pc.fill_null(pc.match_substring_regex(values, ASCII), False)
        lines = pc.cast(values.filter(takes), pa.string())
        words = pc.split_pattern_regex(pc.ascii_lower(lines), NON_WORD)
        rows = pc.list_parent_indices(words)
        taken = pa.table({"key": pc.cast(pc.list_flatten(words), pa.binary()),
                          "timestamp": batch.column("timestamp").filter(takes).take(rows),
                          "offset": batch.column("offset").filter(takes).take(rows)})
        taken = taken.filter(pc.not_equal(pc.binary_length(taken.column("key")), 0))
        grouped = taken.group_by("key", use_threads=False).aggregate(
            [("offset", "count"), ("timestamp", "max"), ("offset", "max")])
        n = grouped.num_rows
        partial = pa.StructArray.from_arrays(
            [grouped.column("offset_count").combine_chunks(), pa.nulls(n, pa.float64()), pa.nulls(n, pa.float64()),
             pa.nulls(n, pa.float64()), pa.array(np.ones(n, bool))], names=FIELDS)
        return batch.filter(pc.invert(takes)), _partials(grouped.column("key"), grouped.column("timestamp_max"),
                                                         grouped.column("offset_max"), partial)

    merge = staticmethod(merge)


class WindowCombiner:
    """Counts per (key, time window) of each range, with what the task needs to apply them as it
    would apply the records one by one (kstool.streams.aggregate.WindowedAggregate):

    - stream time here is the range's own running maximum; a record none of whose windows is
      open by it is late whatever came before, and stays a row of its own;
    - each partial counts the records its window was open for, and (`latest`) those for which
      it is the newest window: if the task finds the window closed by the stream time before
      the range (earlier batches, earlier ranges of the batch), those records are late;
    - one row without a key: the range's newest time (the task's stream time after it), at the
      record that brought it. Which windows a batch closes follows from it; at which record
      they closed only orders them against late records, which go to another topic.
    """

    def __init__(self, size: int, advance: int, grace: int):
        self.window, self.grace = WindowSpec("hopping", size, advance), grace

    def for_range(self, rng: Any) -> "_RangeWindows":
        return _RangeWindows(self.window, self.grace, rng.start)


class _RangeWindows:
    def __init__(self, window: WindowSpec, grace: int, range_start: int):
        self.window, self.grace, self.range_start = window, grace, range_start
        self.stream_time = -1  # no record yet (kstool.streams.task.NO_TIME)
        self.newest_offset = -1  # the record that brought stream time to its value

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
        if len(stream) and stream[-1] > self.stream_time:
            self.stream_time, self.newest_offset = int(stream[-1]), int(offsets[np.argmax(stream == stream[-1])])
        table = pa.table({"key": batch.column("key").take(pa.array(rows[pairs])), "window": starts[open_],
                          "latest": newest_window[open_].astype(np.int64), "timestamp": times[pairs],
                          "offset": offsets[pairs]})
        keep = np.ones(len(valid), bool)
        keep[rows[pairs]] = False  # taken: a record with an open window
        return batch.filter(pa.array(keep)), table

    def merge(self, tables: list[pa.Table]) -> pa.Table:
        grouped = pa.concat_tables(tables).group_by(["key", "window"], use_threads=False).aggregate(
            [("offset", "count"), ("latest", "sum"), ("timestamp", "max"), ("offset", "max")])
        n = grouped.num_rows
        partial = pa.StructArray.from_arrays(
            [pa.array(np.r_[np.asarray(grouped.column("offset_count")), 0]), pa.array(np.ones(n + 1, bool)),
             pa.concat_arrays([grouped.column("window").combine_chunks(), pa.nulls(1, pa.int64())]),
             pa.array(np.r_[np.asarray(grouped.column("latest_sum")), 0]),
             pa.array(np.full(n + 1, self.range_start, np.int64))],
            names=["count", "whole", "window", "latest", "range"])
        keys = pa.concat_arrays([grouped.column("key").combine_chunks(), pa.nulls(1, pa.binary())])
        stamps = np.r_[np.asarray(grouped.column("timestamp_max")), self.stream_time].astype(np.int64)
        offsets = np.r_[np.asarray(grouped.column("offset_max")), self.newest_offset].astype(np.int64)
        return _partials(keys, pa.array(stamps * 1000, pa.timestamp("us", tz="UTC")), pa.array(offsets), partial)


def _partials(keys: Any, stamps: Any, offsets: Any, partial: pa.StructArray) -> pa.Table:
    return pa.table({"key": keys, "timestamp": stamps, "offset": offsets, PARTIAL: partial})


def _scatter(picked: np.ndarray, mask: np.ndarray, n: int) -> pa.Array:
    out = np.zeros(n, np.float64)
    out[mask] = picked
    return pa.array(out, mask=~mask)


def _fixed_width(values: pa.Array, dtype: str) -> pa.Array:
    """Kafka's 8-byte Long or Double values as doubles; null unless 8 bytes."""
    eight = np.asarray(pc.fill_null(pc.equal(pc.binary_length(values), 8), False))
    picked = values.filter(pa.array(eight))
    if len(picked) == 0:
        return pa.nulls(len(values), pa.float64())
    offsets = np.frombuffer(picked.buffers()[1], np.int32)[picked.offset:picked.offset + len(picked) + 1]
    data = np.frombuffer(picked.buffers()[2], np.uint8)[offsets[0]:offsets[-1]]
    return _scatter(data.view(dtype).astype(np.float64), eight, len(values))
