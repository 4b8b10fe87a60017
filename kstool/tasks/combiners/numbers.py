"""The keyed aggregation's numbers combined per key (count, sum, min, max, whether whole)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kstool.tasks.combiners.partials import FIELDS, headerless, merge, partials_table

# what Java's Double.parseDouble and Arrow's parser read alike, to the same double
PLAIN_NUMBER = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"


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
        takes = pc.and_(pc.and_(keys.is_valid(), values.is_valid()), headerless(batch))
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
        kept = batch.filter(pc.invert(takes))
        return kept, partials_table(grouped.column("key"), grouped.column("timestamp_max"),
                                    grouped.column("offset_max"), partial)

    merge = staticmethod(merge)


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
