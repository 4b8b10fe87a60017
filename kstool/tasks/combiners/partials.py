"""Partial rows (kstool.contract.PARTIAL) as Arrow tables: how the combiners build and merge them."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

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


def partials_table(keys: Any, stamps: Any, offsets: Any, partial: pa.StructArray) -> pa.Table:
    return pa.table({"key": keys, "timestamp": stamps, "offset": offsets, PARTIAL: partial})
