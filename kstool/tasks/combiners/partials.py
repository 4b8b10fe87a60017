"""Partial rows (kstool.contract.PARTIAL) as Arrow tables: how the combiners build and merge them."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kstool.contract import PARTIAL

FIELDS = ("count", "sum", "min", "max", "whole")


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
    return partials_table(grouped.column("key"), grouped.column("timestamp_max"), grouped.column("offset_max"), partial)


def headerless(batch: pa.RecordBatch) -> pa.Array:
    """Which records have no headers: those a partial may stand for where the output forwards
    the last record's headers (the others take Spark's path, where it keeps them)."""
    headers = batch.column("headers")
    return pc.fill_null(pc.equal(pc.list_value_length(headers), 0), True)


def partials_table(keys: Any, stamps: Any, offsets: Any, partial: pa.StructArray, headers: Any = None) -> pa.Table:
    """Partial rows; `headers`, each one's last record's, where what they feed forwards them."""
    columns = {"key": keys, "timestamp": stamps, "offset": offsets, PARTIAL: partial}
    if headers is not None:
        columns["headers"] = headers
    return pa.table(columns)
