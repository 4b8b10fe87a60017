"""A per-task topology's records packed where the source reads them: each Arrow batch's records
cross into Spark as one row (an Arrow IPC stream of key, value, timestamp, offset and headers) that the
task unpacks (kstool.tasks.processor), instead of a row per record (large records: a row per
few MB of them). PySpark hands a transformWithState task its rows one at a time (~3 µs a row
whatever the processor does); a pack is one row. For processors that need every record
(sessions, joins), where nothing can be combined."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kstool.contract import PARTIAL
from kstool.engine import HEADERS_TYPE, PACK_BYTES, ipc, pieces

PACK_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("timestamp", pa.int64()),
                         ("offset", pa.int64()), ("headers", HEADERS_TYPE)])


class RecordPacker:
    """Takes the records Spark would pass on as they are: a usable timestamp (>= 0), and with
    `keyed_values` a key and a value too (an aggregation drops the others); every other record
    stays a row of its own, for --on-error and the topology's filters."""

    def __init__(self, keyed_values: bool, pack_bytes: int = PACK_BYTES):
        self.keyed_values, self.pack_bytes = keyed_values, pack_bytes

    def combine(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Table]:
        micros = batch.column("timestamp").cast(pa.int64())
        takes = pc.greater_equal(micros, 0)
        stamps = pc.divide(micros, 1000)  # exact: Kafka's times are ms
        if self.keyed_values:
            takes = pc.and_(takes, pc.and_(batch.column("key").is_valid(), batch.column("value").is_valid()))
        takes = pc.fill_null(takes, False)
        taken = pa.record_batch([batch.column("key").filter(takes), batch.column("value").filter(takes),
                                 stamps.filter(takes), batch.column("offset").filter(takes),
                                 batch.column("headers").filter(takes)], schema=PACK_SCHEMA)
        kept = batch.filter(pc.invert(takes))
        cut = pieces(taken, self.pack_bytes)
        # each row's own time and offset: its newest record's time (a valid one), its last offset
        return kept, _packs([pc.max(piece.column("timestamp")).as_py() for piece in cut],
                            [piece.column("offset")[-1].as_py() for piece in cut], [ipc(piece) for piece in cut])

    @staticmethod
    def merge(tables: list[pa.Table]) -> pa.Table:
        return pa.concat_tables(tables)  # packs are whole: nothing to merge


def _packs(stamps_ms: list[int], offsets: list[int], packs: list[bytes]) -> pa.Table:
    partial = pa.StructArray.from_arrays([pa.array(packs, pa.binary())], names=["pack"])
    return pa.table({"key": pa.nulls(len(packs), pa.binary()),
                     "timestamp": pa.array([t * 1000 for t in stamps_ms], pa.timestamp("us", tz="UTC")),
                     "offset": pa.array(offsets, pa.int64()), PARTIAL: partial})


def unpack(pack: bytes) -> tuple[list[bytes | None], list[bytes | None], list[int], list[int], list[Any]]:
    """A pack's (keys, values, timestamps in ms, offsets, headers), in offset order."""
    table = pa.ipc.open_stream(pack).read_all()
    return tuple(table.column(name).to_pylist() for name in PACK_SCHEMA.names)  # type: ignore[return-value]
