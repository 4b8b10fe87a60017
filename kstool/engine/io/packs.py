"""Records packed into few rows: an Arrow IPC stream of a few MB of them per row, so that Spark
moves a few large rows instead of a row per record (each row costs ~3 µs on each side of the
JVM whatever it holds). The source packs input records for the tasks that need every record
(kstool.tasks.combiners.packs); every per-task topology's task packs what it emits (role,
key, value, event time, headers), and the sinks unpack it where they write."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kstool.contract import PACK

# about a pack's keys and values (Spark moves a pack as one row): a pack ends where their running
# total passes a multiple of it, so it holds less than this plus its first record
PACK_BYTES = 4 << 20
COMPRESSED = pa.ipc.IpcWriteOptions(compression="zstd")
# a record's headers, as Spark's Kafka sources give them (null: none)
HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
EMITTED_SCHEMA = pa.schema([pa.field("role", pa.string(), nullable=False), ("key", pa.binary()), ("value", pa.binary()),
                            pa.field("event_time", pa.int64(), nullable=False), ("headers", HEADERS_TYPE)])


def pieces(records: pa.RecordBatch, pack_bytes: int) -> list[pa.RecordBatch]:
    """The records in order, cut where the running total of their keys' and values' bytes
    passes a multiple of pack_bytes: each piece holds less than that plus its first record."""
    sizes = sum(np.asarray(pc.fill_null(pc.binary_length(records.column(c)), 0), np.int64) for c in ("key", "value"))
    ends = np.flatnonzero(np.diff(np.cumsum(sizes) // pack_bytes, prepend=0)).tolist()
    bounds = [0, *(end for end in ends if end), records.num_rows]
    return [records.slice(start, end - start) for start, end in zip(bounds, bounds[1:]) if end > start]


def ipc(records: pa.RecordBatch) -> bytes:
    """The records as a zstd-compressed Arrow IPC stream (a pack, or a shard of a task's state):
    each of its bytes is copied several times on its way (into the JVM's rows, the shuffle, and
    for state pickled, into a protobuf message, RocksDB and its changelog file). zstd takes a
    shard of 4,096 join entries from 188 to 82 KB for ~0.5 ms; a cold stream-stream join over
    2 x 1M records ran ~12% faster (bench/README.md). A stream written uncompressed reads the same."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, records.schema, options=COMPRESSED) as writer:
        writer.write_batch(records)
    return cast(bytes, sink.getvalue().to_pybytes())


def pack_records(roles: list[str], keys: list[bytes | None], values: list[bytes | None],
                 event_times: np.ndarray, headers: list[Any] | None = None) -> list[bytes]:
    """A task's emitted records, in their order, as packs of about PACK_BYTES each (headers:
    each record's, None for none of them)."""
    records = pa.record_batch([pa.array(roles, pa.string()), pa.array(keys, pa.binary()),
                               pa.array(values, pa.binary()), pa.array(event_times, pa.int64()),
                               pa.array(headers, HEADERS_TYPE) if headers is not None else pa.nulls(len(roles), HEADERS_TYPE)],
                              schema=EMITTED_SCHEMA)
    return [ipc(piece) for piece in pieces(records, PACK_BYTES)]


def unpacked(table: pa.Table) -> pa.Table:
    """The sink's table (role, key, value, timestamp, task, pack) with each packed row's records
    in its place, in order, and their headers (a column added: a row not packed has none); a
    table without packs as it is (without the pack column)."""
    if PACK not in table.column_names:
        return table
    packs = table.column(PACK)
    rows = table.drop_columns([PACK])
    rows = rows.append_column("headers", pa.nulls(rows.num_rows, HEADERS_TYPE))
    if packs.null_count == len(packs):
        return rows
    parts = []
    for row, pack in enumerate(packs.to_pylist()):
        if pack is None:
            parts.append(rows.slice(row, 1))
            continue
        records = pa.ipc.open_stream(pack).read_all()
        times = pc.multiply(records.column("event_time"), 1000).cast(pa.timestamp("us", tz="UTC"))
        parts.append(pa.table({"role": records.column("role"), "key": records.column("key"),
                               "value": records.column("value"), "timestamp": times,
                               "task": pa.repeat(rows.column("task")[row], records.num_rows),
                               "headers": records.column("headers")})
                     .select(rows.column_names).cast(rows.schema))
    return pa.concat_tables(parts)
