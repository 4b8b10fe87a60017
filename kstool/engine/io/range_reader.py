"""One partition range of a Kafka topic read on an executor as Arrow batches in the source's
row schema (SCHEMA, ARROW_SCHEMA: the same rows as Spark and as Arrow), values with a schema
decoded into VALUE_JSON; a changelog range's records as store entries (compacted, or keyed for
a versioned store's history)."""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, cast

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, Message, TopicPartition
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kstool.config import ClientConfig
from kstool.contract import BATCH_TIME, PARTIAL, RESTORED, VALUE_JSON
from kstool.engine.io.packs import HEADERS_TYPE
from kstool.kafka.client import BULK_READ_SETTINGS, KafkaClients, every_bootstrap_refuses
from kstool.kafka.compaction import kept_by_compaction
from kstool.kafka.read_errors import ends_the_read

ARROW_BATCH_ROWS = 65_536
BATCH_TIME_TYPE = pa.timestamp("us", tz="UTC")
# A range's records are known to be there: a longer fetch wait costs nothing where the broker
# returns them at once, and lets one that gathers many small batches slowly return them (the
# embedded one answers a fetch empty when its wait runs out first: a 50 ms wait stalled reads).
RANGE_READ_SETTINGS = {**BULK_READ_SETTINGS, "fetch.wait.max.ms": 500}
REFUSED_CHECK_AFTER_S = 3.0  # a read that has stalled this long asks whether the broker is gone

SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("offset", LongType(), False),
    StructField("timestamp", TimestampType()),
    StructField("timestamp_type", IntegerType(), False),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
    # a store entry from a changelog, not an input record (only in a restore's first batch)
    StructField(RESTORED, BooleanType(), False),
    StructField(VALUE_JSON, StringType()),
    StructField(PARTIAL, StructType([StructField("count", LongType()), StructField("sum", DoubleType()),
                                     StructField("min", DoubleType()), StructField("max", DoubleType()),
                                     StructField("whole", BooleanType()), StructField("window", LongType()),
                                     StructField("latest", LongType()), StructField("range", LongType()),
                                     StructField("records", LongType()), StructField("pack", BinaryType())])),
    StructField(BATCH_TIME, TimestampType()),
])
# read() must return exactly the Arrow form Spark derives from SCHEMA: ARROW_SCHEMA's rows, which
# the range readers make, with the batch's time appended (with_batch_time)
# a combiner's partial (kstool.contract.PARTIAL), and `records`: the input records the range's
# partial rows stand for, all on its first row (a line's words are in several rows); `pack`: records
# packed whole (kstool.tasks.combiners.packs)
PARTIAL_TYPE = pa.struct([("count", pa.int64()), ("sum", pa.float64()), ("min", pa.float64()),
                          ("max", pa.float64()), ("whole", pa.bool_()), ("window", pa.int64()),
                          ("latest", pa.int64()), ("range", pa.int64()), ("records", pa.int64()),
                          ("pack", pa.binary())])
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.binary()), pa.field("value", pa.binary()),
    pa.field("topic", pa.string(), nullable=False), pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False), pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestamp_type", pa.int32(), nullable=False), pa.field("headers", HEADERS_TYPE),
    pa.field(RESTORED, pa.bool_(), nullable=False), pa.field(VALUE_JSON, pa.string()),
    pa.field(PARTIAL, PARTIAL_TYPE),
])


@dataclass
class OffsetRange(InputPartition):
    topic: str
    partition: int
    start: int
    end: int  # exclusive
    # a changelog partition read for a restore: its compacted view, as store entries
    restore: bool = False
    planned_us: int | None = None  # BATCH_TIME


def with_batch_time(batches: Iterator[pa.RecordBatch], planned_us: int | None) -> Iterator[pa.RecordBatch]:
    """ARROW_SCHEMA's batches as the source's rows: BATCH_TIME appended."""
    for batch in batches:
        times = (pa.nulls(batch.num_rows, BATCH_TIME_TYPE) if planned_us is None
                 else pa.array(np.full(batch.num_rows, planned_us, np.int64), BATCH_TIME_TYPE))
        yield batch.append_column(pa.field(BATCH_TIME, BATCH_TIME_TYPE), times)


@functools.lru_cache(maxsize=8)
def _value_json_cached(spec: str, registry: tuple[tuple[str, str], ...]) -> Callable[[bytes | None], str | None]:
    from kstool.schemas.formats import SchemaOptions, value_json_decoder

    given = json.loads(spec)
    return value_json_decoder(given.pop("format"), SchemaOptions(registry=dict(registry), **given))


def value_json_decoder_for(spec: str, config: ClientConfig) -> Callable[[bytes | None], str | None]:
    """The decoder of a run's values with a schema, one per executor process (its registry
    client caches the schemas it fetched)."""
    return _value_json_cached(spec, tuple(sorted(config.schema_registry.items())))


class _Columns:
    """The Arrow columns of one record batch of a partition range, filled record by record
    (the reader's only Python per record: a bound append per column)."""

    def __init__(self, rng: OffsetRange, to_json: Callable[[bytes | None], str | None] | None = None):
        self.rng, self.to_json = rng, to_json
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.types: list[int] = []  # librdkafka's timestamp type (0: none)
        self.stamps: list[int] = []  # ms
        self.headers: list[Any] = []

    def add(self, msg: Message, offset: int) -> None:
        ts_type, ts = msg.timestamp()
        # a consumer's headers are a list of pairs (the stub also allows a producer's dict)
        headers = cast("list[tuple[str, bytes | None]] | None", msg.headers())
        self.keys.append(msg.key())
        self.values.append(msg.value())
        self.offsets.append(offset)
        self.types.append(ts_type)
        self.stamps.append(ts)
        self.headers.append([{"key": k, "value": v} for k, v in headers] if headers else None)

    def __len__(self) -> int:
        return len(self.keys)

    def batch(self) -> pa.RecordBatch:
        n = len(self.keys)
        types = np.array(self.types, np.int32)
        arrays = [
            pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
            pa.array([self.rng.topic] * n, pa.string()), pa.array([self.rng.partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(np.array(self.stamps, np.int64) * 1000, pa.timestamp("us", tz="UTC"), mask=types == 0),
            pa.array(types), pa.array(self.headers, HEADERS_TYPE),
            pa.array(np.full(n, self.rng.restore)),
            pa.array([self.to_json(v) for v in self.values], pa.string()) if self.to_json else pa.nulls(n, pa.string()),
            pa.nulls(n, PARTIAL_TYPE),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _fail_if_stalled(config: ClientConfig, rng: OffsetRange, position: int, stalled_s: float,
                     stall_limit: float) -> None:
    """A lost broker must fail the batch, not hang it (the run's outage handling takes over):
    at once when nothing listens at the bootstrap addresses, else after `stall_limit`."""
    where = f"no records from {rng.topic}:{rng.partition} at offset {position}"
    if stalled_s > REFUSED_CHECK_AFTER_S and every_bootstrap_refuses(config):
        raise RuntimeError(f"{where}: connection refused at {config.bootstrap_servers}")
    if stalled_s > stall_limit:
        raise RuntimeError(f"{where} for {stall_limit:.0f}s (expected up to {rng.end - 1})")


def read_range(config: ClientConfig, rng: OffsetRange, to_json: Callable[[bytes | None], str | None] | None = None
               ) -> Iterator[pa.RecordBatch]:
    """Yield Arrow record batches of the records in [start, end) of one partition; to_json
    decodes values with a schema into the VALUE_JSON column."""
    if rng.start >= rng.end:
        return
    consumer = KafkaClients(config).consumer(**RANGE_READ_SETTINGS)
    consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
    columns = _Columns(rng, to_json)
    position = rng.start
    stall_limit = max(60.0, 3 * config.timeout_s)
    last_progress = time.monotonic()
    try:
        while position < rng.end:
            # never ask for more than the range holds: consume() waits for the full count
            batch = consumer.consume(num_messages=min(10_000, rng.end - position), timeout=1.0)
            if not batch:
                moved = _position(consumer, rng)
                if moved > position:
                    position, last_progress = moved, time.monotonic()
                else:
                    _fail_if_stalled(config, rng, position, time.monotonic() - last_progress, stall_limit)
                continue
            last_progress = time.monotonic()
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if not ends_the_read(err):
                        continue
                    raise RuntimeError(f"reading {rng.topic}:{rng.partition}: {err.str()}")
                offset = cast(int, msg.offset())  # a fetched record has one
                if offset >= rng.end:
                    position = rng.end
                    break
                columns.add(msg, offset)
                position = offset + 1
            if len(columns) >= ARROW_BATCH_ROWS:
                yield columns.batch()
                columns = _Columns(rng, to_json)
        if len(columns):
            yield columns.batch()
    finally:
        consumer.close()


def _position(consumer: Consumer, rng: OffsetRange) -> int:
    """Where the consumer stands, to get past offsets with no record (transaction markers)."""
    pos = consumer.position([TopicPartition(rng.topic, rng.partition)])[0].offset
    return pos if pos >= 0 else rng.start


def compacted(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A changelog partition's store entries: its records as compaction keeps them, without
    tombstones (and records without a key)."""
    import pyarrow.compute as pc  # here: Spark's driver-side source process never needs it (~0.1 s to import)

    table = pa.Table.from_batches(list(batches), schema=ARROW_SCHEMA)
    table = table.take(pa.array(kept_by_compaction(table.column("key").to_pylist()), pa.int64()))
    yield from table.filter(pc.and_(table.column("key").is_valid(), table.column("value").is_valid())).to_batches()


def keyed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A versioned store's changelog partition: every record with a key, tombstones too (its
    history, put again in order)."""
    for batch in batches:
        yield batch.filter(batch.column("key").is_valid())
