"""The Kafka streaming source: a PySpark Python data source built on confluent-kafka.

Offsets are {topic: {partition: next offset}} (string keys: Spark stores them as JSON).
The initial offsets are the committed offsets of the application's consumer group, so a reset
of the group is what a fresh checkpoint starts from; after each batch the processed offsets are
committed to that group, so `kstool groups describe <app-id>` and every lag tool see progress.
"""

from __future__ import annotations

import faulthandler
import functools
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, cast

import numpy as np
import pyarrow as pa
from confluent_kafka import TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
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

from kstool.base.home import write_private_text
from kstool.checkpoint.logs import FIRST_BATCH_MARKER
from kstool.config import ClientConfig
from kstool.contract import PARTIAL, RESTORED, VALUE_JSON
from kstool.engine.failures import DATA_LOSS, marked
from kstool.kafka.client import BULK_READ_SETTINGS, KafkaClients, every_bootstrap_refuses
from kstool.kafka.compaction import kept_by_compaction
from kstool.kafka.read_errors import ends_the_read

SOURCE_NAME = "kstool_kafka"
# The client configuration may hold secrets (SASL passwords): it travels to the executors as
# the path of a private file, never as an option value that plans and debug logs would show.
CLIENT_CONFIG_FILE_OPTION = "client_config_file"
# Input values with a schema: their format and schema source (kstool.schemas.formats.SchemaOptions
# as JSON, without the registry's settings, which travel in the client configuration)
VALUE_SCHEMA_OPTION = "value_schema"
# A query the warm engine keeps between runs (kstool.engine.parking) reads up to the offsets this
# file names, and nothing while it is absent
GATE_FILE_OPTION = "gate_file"
# A topology's combiner (kstool.contract.CombinerSpec as JSON): the rows of one key in a range
# leave the reader as one partial row
COMBINER_OPTION = "combiner"
# Changelog topics whose compacted views a restore puts back in the stores (comma-separated)
SEED_TOPICS_OPTION = "seed_topics"
HISTORY_TOPICS_OPTION = "history_topics"  # of the seed topics: read whole (versioned stores' changelogs)
ARROW_BATCH_ROWS = 65_536
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
])
# read() must return exactly the Arrow form Spark derives from SCHEMA
HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
# a combiner's partial (kstool.contract.PARTIAL), and `records`: the input records the range's
# partial rows stand for, all on its first row (a line's words are in several rows); `pack`: records
# packed whole (kstool.topologies.combiners.packs)
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

Offsets = dict[str, dict[str, int]]


def write_client_config(config: ClientConfig, path: Path) -> Path:
    """Write the config for this run's executors (mode 0600; the caller deletes it)."""
    write_private_text(path, json.dumps(asdict(config)))
    return path


def read_client_config(path: str) -> ClientConfig:
    with open(path, encoding="utf-8") as f:
        return ClientConfig(**json.load(f))


@dataclass
class OffsetRange(InputPartition):
    topic: str
    partition: int
    start: int
    end: int  # exclusive
    # a changelog partition read for a restore: its compacted view, as store entries
    restore: bool = False


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        return SCHEMA

    def streamReader(self, schema):
        return KafkaStreamReader(self.options)

    def reader(self, schema):
        return ChangelogReader(self.options)


def _flatten(offsets: Offsets) -> dict[tuple[str, int], int]:
    return {(t, int(p)): o for t, parts in offsets.items() for p, o in parts.items()}


def nest_offsets(flat: dict[tuple[str, int], int]) -> Offsets:
    """{(topic, partition): offset} as the source's offset options take it: {topic: {"partition": offset}}."""
    out: Offsets = {}
    for (t, p), o in sorted(flat.items()):
        out.setdefault(t, {})[str(p)] = o
    return out


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side: plans offset ranges. read() runs on executors from a pickled copy."""

    def __init__(self, options):
        if not faulthandler.is_enabled():  # a crash of Spark's source process then leaves its Python stack in the log
            faulthandler.enable()
        self.config = read_client_config(options[CLIENT_CONFIG_FILE_OPTION])
        self.topics = [t for t in options["topics"].split(",") if t]
        self.group = options["group"]
        self.starting = options.get("starting", "earliest")
        self.on_data_loss = options.get("on_data_loss", "fail")
        max_batch = int(options.get("max_records_per_batch", "0"))
        self.max_records_per_batch = max_batch or None
        self.max_records_per_task = int(options.get("max_records_per_task", "500000"))
        self._stop = _flatten(json.loads(options.get("stop_offsets", "{}")))  # reprocess --to-time
        self.commit_offsets = options.get("commit_offsets", "true") == "true"
        # a restore: the first batch of the new checkpoint seeds the state and reads no input;
        # for Spark's own aggregations its rows are these changelogs' entries
        self.seed_batch = options.get("seed_batch", "false") == "true"
        self.seed_topics = [t for t in options.get(SEED_TOPICS_OPTION, "").split(",") if t]
        self.value_schema = options.get(VALUE_SCHEMA_OPTION)
        self.gate = options.get(GATE_FILE_OPTION)
        self.combiner = options.get(COMBINER_OPTION)
        self._target: dict[tuple[str, int], int] | None = None
        self._latest: dict[tuple[str, int], int] | None = None
        self._kafka: KafkaClients | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_kafka": None}  # the executors' copies make their own clients

    # -- driver ----------------------------------------------------------------------------
    def _clients(self) -> KafkaClients:
        """One set of clients for the query's life. A new AdminClient per call, as this was,
        crashed Spark's source process now and then: a segfault inside the first list_offsets
        of a new client under CPU contention (confluent-kafka 2.16; 3 of 3 loops of new clients
        crashed within 40 s with another process busy, 0 of 3 reusing one over ~200k calls)."""
        if self._kafka is None:
            self._kafka = KafkaClients(self.config)
        return self._kafka

    def _partitions(self) -> list[tuple[str, int]]:
        return _partitions_of(self._clients(), self.topics)

    def initialOffset(self) -> Offsets:
        from kstool.kafka.groups import starting_offsets

        return nest_offsets(starting_offsets(self._clients(), self.group, self._partitions(), self.starting))

    def getDefaultReadLimit(self):
        if self.max_records_per_batch:
            return ReadMaxRows(self.max_records_per_batch)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = input_ends(self._clients(), self.topics)

    def latestOffset(self, start: Offsets, limit) -> Offsets:
        if self.gate is not None:
            gate = _read_gate(self.gate)
            if gate is None:
                return start  # parked: no run asks for anything, and Kafka is not asked either
            self._target = gate
        current = _flatten(start)
        marks = self._clients().watermarks(self._partitions())
        latest = dict(self._target) if self._target is not None else {tp: h for tp, (_, h) in marks.items()}
        latest = {tp: min(o, self._stop.get(tp, o)) for tp, o in latest.items()}
        self._latest = latest
        behind = {tp: (current[tp], high) for tp, (_, high) in marks.items()
                  if tp in current and current[tp] > high}
        if behind and self.on_data_loss == "fail":
            detail = ", ".join(f"{t}:{p} is at offset {o} but the log ends at {h}"
                               for (t, p), (o, h) in sorted(behind.items()))
            raise marked(DATA_LOSS, f"input offsets are past the end of the log ({detail}): was "
                         "the topic deleted and recreated? Rerun with --on-data-loss earliest to "
                         "start over from the log start")
        for tp in latest:
            current.setdefault(tp, 0)  # a partition added since the last batch starts at 0
        end = {tp: latest.get(tp, o) if tp in behind else max(latest.get(tp, o), o)
               for tp, o in current.items()}
        if self.seed_batch and FIRST_BATCH_MARKER not in current:
            return nest_offsets({**current, FIRST_BATCH_MARKER: 1})
        if isinstance(limit, ReadMaxRows):
            end = _cap(current, end, limit.max_rows)
        return nest_offsets(end)

    def reportLatestOffset(self):
        return nest_offsets(self._latest) if self._latest else None

    def partitions(self, start: Offsets, end: Offsets):
        begin, finish = _flatten(start), _kafka_only(_flatten(end))
        firsts = self._first_offsets(begin, finish)
        ranges = []
        if self.seed_topics and FIRST_BATCH_MARKER in _flatten(end) and FIRST_BATCH_MARKER not in begin:
            ranges += changelog_ranges(self._clients(), self.seed_topics)
        for tp, stop in sorted(finish.items()):
            for chunk_start in range(firsts.get(tp, stop), stop, self.max_records_per_task):
                ranges.append(OffsetRange(tp[0], tp[1], chunk_start,
                                          min(chunk_start + self.max_records_per_task, stop)))
        return ranges

    def _first_offsets(self, begin, finish) -> dict[tuple[str, int], int]:
        """Where each range starts: the batch start, or the log start when records before it
        are gone (retention) or the log was recreated (only with --on-data-loss earliest)."""
        todo = [tp for tp, stop in finish.items() if stop != begin.get(tp, 0)]
        if not todo:
            return {}
        starts = self._clients().log_starts(todo)
        firsts, lost = {}, {}
        for tp in todo:
            first, low = begin.get(tp, 0), starts[tp]
            if first > finish[tp]:  # recreated: latestOffset let this through on purpose
                first = low
            elif first < low:
                lost[tp] = (first, low)
                first = low
            firsts[tp] = first
        if lost and self.on_data_loss == "fail":
            detail = ", ".join(f"{t}:{p} offsets {a}..{b - 1} ({b - a} records)"
                               for (t, p), (a, b) in sorted(lost.items()))
            raise marked(DATA_LOSS, f"records were deleted (retention) before they were processed: "
                         f"{detail}; rerun with --on-data-loss earliest to continue from the log start")
        return firsts

    def commit(self, end: Offsets) -> None:
        from kstool.kafka.groups import commit_offsets

        if self.commit_offsets:
            commit_offsets(self._clients(), self.group, _kafka_only(_flatten(end)))

    # -- executors -------------------------------------------------------------------------
    def read(self, partition: OffsetRange):  # type: ignore[override]  # our plan's partitions
        if partition.restore:
            yield from compacted(read_range(self.config, partition))
            return
        to_json = _value_json(self.value_schema, self.config) if self.value_schema else None
        records = read_range(self.config, partition, to_json)
        yield from combined(_combiner(self.combiner), partition, records) if self.combiner else records


class ChangelogReader(DataSourceReader):
    """A batch read of changelogs' compacted views, each partition by an executor: a restore's
    seed of per-task stores (kstool.engine.seed), so that no store entry passes the driver."""

    def __init__(self, options):
        self.config = read_client_config(options[CLIENT_CONFIG_FILE_OPTION])
        self.topics = [t for t in options[SEED_TOPICS_OPTION].split(",") if t]
        self.history = {t for t in options.get(HISTORY_TOPICS_OPTION, "").split(",") if t}

    def partitions(self):
        return changelog_ranges(KafkaClients(self.config), self.topics)

    def read(self, partition: OffsetRange):  # type: ignore[override]  # our plan's partitions
        batches = read_range(self.config, partition)
        yield from (keyed(batches) if partition.topic in self.history else compacted(batches))


def changelog_ranges(clients: KafkaClients, topics: list[str]) -> list[OffsetRange]:
    """Every partition of the changelogs, whole, to be read as store entries."""
    found = clients.require_topics(topics)
    marks = clients.watermarks([(t, p) for t in topics for p in found[t]])
    return [OffsetRange(t, p, low, high, restore=True) for (t, p), (low, high) in sorted(marks.items())]


@functools.lru_cache(maxsize=8)
def _value_json_cached(spec: str, registry: tuple[tuple[str, str], ...]) -> Callable[[bytes | None], str | None]:
    from kstool.schemas.formats import SchemaOptions, value_json_decoder

    given = json.loads(spec)
    return value_json_decoder(given.pop("format"), SchemaOptions(registry=dict(registry), **given))


def _value_json(spec: str, config: ClientConfig) -> Callable[[bytes | None], str | None]:
    """The decoder of a run's values with a schema, one per executor process (its registry
    client caches the schemas it fetched)."""
    return _value_json_cached(spec, tuple(sorted(config.schema_registry.items())))


def _partitions_of(clients: KafkaClients, topics: list[str]) -> list[tuple[str, int]]:
    found = clients.require_topics(topics)
    return [(t, p) for t in topics for p in found[t]]


def input_ends(clients: KafkaClients, topics: list[str]) -> dict[tuple[str, int], int]:
    """Each input partition's true end now: what a --once run reads up to."""
    return {tp: high for tp, (_, high) in clients.watermarks(_partitions_of(clients, topics)).items()}


def _read_gate(path: str) -> dict[tuple[str, int], int] | None:
    try:
        with open(path, encoding="utf-8") as f:
            return _flatten(json.load(f))
    except FileNotFoundError:
        return None


def _kafka_only(offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    return {tp: o for tp, o in offsets.items() if tp != FIRST_BATCH_MARKER}


def _cap(start: dict, end: dict, budget: int) -> dict:
    """Split a record budget across partitions in proportion to what each has available, all
    of it: what rounding down leaves goes to the largest remainders (else a backlog of two
    budgets took a third batch of a few records, ~1 s). A partition with records gets one at least."""
    available = {tp: end[tp] - start.get(tp, 0) for tp in end}
    total = sum(available.values())
    if total <= budget:
        return end
    shares = {tp: budget * n // total for tp, n in available.items()}
    by_remainder = sorted(available, key=lambda tp: budget * available[tp] % total, reverse=True)
    for tp in by_remainder[:budget - sum(shares.values())]:
        shares[tp] += 1  # its remainder is not 0: its share stays within what it has
    return {tp: start.get(tp, 0) + (max(1, share) if available[tp] else 0) for tp, share in shares.items()}


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

    def add(self, msg, offset: int) -> None:
        ts_type, ts = msg.timestamp()
        headers = msg.headers()
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


def read_range(config: ClientConfig, rng: OffsetRange, to_json: Callable[[bytes | None], str | None] | None = None):
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


@functools.lru_cache(maxsize=8)
def _combiner(spec: str) -> Any:
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
              pa.nulls(n, HEADERS_TYPE), pa.array(np.zeros(n, bool)), pa.nulls(n, pa.string()), partial]
    yield from pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA).to_batches(ARROW_BATCH_ROWS)


def compacted(batches) -> Iterator[pa.RecordBatch]:
    """A changelog partition's store entries: its records as compaction keeps them, without
    tombstones (and records without a key)."""
    import pyarrow.compute as pc  # here: Spark's driver-side source process never needs it (~0.1 s to import)

    table = pa.Table.from_batches(list(batches), schema=ARROW_SCHEMA)
    table = table.take(pa.array(kept_by_compaction(table.column("key").to_pylist()), pa.int64()))
    yield from table.filter(pc.and_(table.column("key").is_valid(), table.column("value").is_valid())).to_batches()


def keyed(batches) -> Iterator[pa.RecordBatch]:
    """A versioned store's changelog partition: every record with a key, tombstones too (its
    history, put again in order)."""
    for batch in batches:
        yield batch.filter(batch.column("key").is_valid())


def _position(consumer, rng: OffsetRange) -> int:
    """Where the consumer stands, to get past offsets with no record (transaction markers)."""
    pos = consumer.position([TopicPartition(rng.topic, rng.partition)])[0].offset
    return pos if pos >= 0 else rng.start
