"""A per-task topology's emitted records packed where its task makes them: a task's output
crosses back into Spark as a few rows (Arrow IPC streams of role, key, value and event time, a
row per few MB), which the sinks unpack where they write, instead of a row per record. Each row
the task yields Spark turns from pandas into Arrow, then into its own rows, and back into Arrow
for the sink's Python worker: ~3 µs a record on each side of the JVM. The input's packs are the
same idea the other way (kstool.topologies.combiners.packs)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kstool.contract import PACK

PACK_BYTES = 4 << 20
PACK_SCHEMA = pa.schema([pa.field("role", pa.string(), nullable=False), ("key", pa.binary()), ("value", pa.binary()),
                         pa.field("event_time", pa.int64(), nullable=False)])


def pack_records(roles: list[str], keys: list[bytes | None], values: list[bytes | None],
                 event_times: np.ndarray) -> list[bytes]:
    """The records, in their order, as packs of about PACK_BYTES of keys and values each."""
    records = pa.record_batch([pa.array(roles, pa.string()), pa.array(keys, pa.binary()),
                               pa.array(values, pa.binary()), pa.array(event_times, pa.int64())], schema=PACK_SCHEMA)
    sizes = sum(np.asarray(pc.fill_null(pc.binary_length(records.column(c)), 0), np.int64) for c in (1, 2))
    ends = np.flatnonzero(np.diff(np.cumsum(sizes) // PACK_BYTES, prepend=0)).tolist()
    bounds = [0, *(end for end in ends if end), records.num_rows]
    return [_ipc(records.slice(start, end - start)) for start, end in zip(bounds, bounds[1:]) if end > start]


def _ipc(records: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, PACK_SCHEMA) as writer:
        writer.write_batch(records)
    return sink.getvalue().to_pybytes()


def unpacked(table: pa.Table) -> pa.Table:
    """The sink's table (role, key, value, timestamp, task, pack) with each packed row's records
    in its place, in order; a table without packs as it is (without the pack column)."""
    if PACK not in table.column_names:
        return table
    packs = table.column(PACK)
    rows = table.drop_columns([PACK])
    if packs.null_count == len(packs):
        return rows
    pieces = []
    for row, pack in enumerate(packs.to_pylist()):
        if pack is None:
            pieces.append(rows.slice(row, 1))
            continue
        records = pa.ipc.open_stream(pack).read_all()
        n = records.num_rows
        times = pc.multiply(records.column("event_time"), 1000).cast(pa.timestamp("us", tz="UTC"))
        task = pa.repeat(rows.column("task")[row], n).cast(rows.schema.field("task").type)
        pieces.append(pa.table({"role": records.column("role"), "key": records.column("key"),
                                "value": records.column("value"), "timestamp": times.cast(rows.schema.field("timestamp").type),
                                "task": task}).select(rows.column_names).cast(rows.schema))
    return pa.concat_tables(pieces)
