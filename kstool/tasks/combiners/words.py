"""wordcount's words of ASCII lines counted per word."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kstool.tasks.combiners import NON_WORD
from kstool.tasks.combiners.partials import FIELDS, headerless, merge, partials_table

ASCII = r"^[\x00-\x7f]*$"


class WordCombiner:
    def combine(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Table]:
        values = batch.column("value")
        takes = pc.and_(pc.fill_null(pc.match_substring_regex(values, ASCII), False), headerless(batch))
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
        kept = batch.filter(pc.invert(takes))
        return kept, partials_table(grouped.column("key"), grouped.column("timestamp_max"),
                                    grouped.column("offset_max"), partial)

    merge = staticmethod(merge)
