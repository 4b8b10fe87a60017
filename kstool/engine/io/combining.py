"""A range's records through its topology's combiner (kstool.contract.CombinerSpec, built by
kstool.tasks.combiners) where the source reads them: the rows it does not take, as they came,
then its partial rows in the source's row schema."""

from __future__ import annotations

import functools
import json
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from kstool.contract import PARTIAL
from kstool.engine.io.packs import HEADERS_TYPE
from kstool.engine.io.range_reader import ARROW_BATCH_ROWS, ARROW_SCHEMA, PARTIAL_TYPE, OffsetRange


@functools.lru_cache(maxsize=8)
def combiner_from_spec(spec: str) -> Any:
    import importlib

    given = json.loads(spec)
    module, _, name = given["target"].partition(":")
    return getattr(importlib.import_module(module), name)(**given["settings"])


def combined(combiner: Any, rng: OffsetRange, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A range's records as the combiner leaves them: the rows it does not take, as they came,
    then one partial row per key (its newest timestamp and last offset)."""
    if hasattr(combiner, "for_range"):
        combiner = combiner.for_range(rng)
    partials, taken = [], 0
    for batch in batches:
        kept, partial = combiner.combine(batch)
        if kept.num_rows:
            yield kept
        partials.append(partial)
        taken += batch.num_rows - kept.num_rows
    if not taken:
        return
    table = combiner.merge(partials)
    if not table.num_rows:  # records with nothing to count (blank lines): a row that says how many
        table = pa.table({"key": pa.nulls(1, pa.binary()), "timestamp": pa.nulls(1, pa.timestamp("us", tz="UTC")),
                          "offset": pa.array([rng.start], pa.int64()),
                          PARTIAL: pa.array([{"count": 0, "whole": True}], table.schema.field(PARTIAL).type)})
    n = table.num_rows
    records = np.zeros(n, np.int64)
    records[0] = taken
    given = table.column(PARTIAL).combine_chunks()
    fields = {field.name: given.field(field.name) for field in given.type}
    fields["records"] = pa.array(records)
    partial = pa.StructArray.from_arrays([fields.get(field.name, pa.nulls(n, field.type)) for field in PARTIAL_TYPE],
                                         fields=list(PARTIAL_TYPE))
    arrays = [table.column("key"), pa.nulls(n, pa.binary()), pa.array([rng.topic] * n, pa.string()),
              pa.array([rng.partition] * n, pa.int32()), table.column("offset"),
              table.column("timestamp").cast(pa.timestamp("us", tz="UTC")), pa.array(np.ones(n, np.int32)),
              table.column("headers") if "headers" in table.column_names else pa.nulls(n, HEADERS_TYPE),
              pa.array(np.zeros(n, bool)), pa.nulls(n, pa.string()), partial]
    yield from pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA).to_batches(ARROW_BATCH_ROWS)
