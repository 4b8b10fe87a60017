"""The Kafka sinks: foreachBatch writers. at_least_once: the executors write
(kstool.engine.io.executor_sink); exactly_once_v2: the tasks write a transaction each where a task
is an input partition (kstool.engine.io.task_transactions), else the batch's rows come to the
driver as Arrow and are written in one Kafka transaction with the batch's input offsets."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from kstool.checkpoint.location import CheckpointFiles
from kstool.checkpoint.logs import batch_end_offsets
from kstool.contract import LATE, SinkTarget
from kstool.engine.exceptions import QueryFailedError
from kstool.engine.io.packs import unpacked
from kstool.kafka.bulk import BulkWriter, Headers, drop_shared_writer, shared_writer
from kstool.kafka.client import KafkaClients
from kstool.kafka.exceptions import KafkaOperationError
from kstool.kafka.partitioner import partitions_for
from kstool.kafka.transactions import OutRecord, TransactionalWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    # a batch's updates into a DataFrame of key, timestamp and value columns; foreachBatch's function
    Encode = Callable[[DataFrame], DataFrame]
    BatchWriter = Callable[[DataFrame, int], None]


@dataclass
class BatchReport:
    batch_id: int
    written: dict[str, int]
    seconds: float  # producing and flushing in the driver
    late: int = 0  # records dropped because their windows had closed
    restored: bool = False  # a restore's first batch: the stores put back, nothing written


class TargetRows(NamedTuple):
    """The records a batch writes to one target's topic, as columns."""

    topic: str
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps: list[int | None]  # ms; None: stamped when sent
    partitions: list[int] | None  # None: Kafka's partitioner
    headers: list[Headers | None] | None  # each record's (None: none); None: no record has any


def target_rows(table: pa.Table, targets: list[SinkTarget], partition_counts: dict[str, int]) -> Iterator[TargetRows]:
    """Each target's rows of the batch (its role's, or all), target by target."""
    for target in targets:
        if target.role is None:
            rows = table
        elif "role" in table.column_names:
            rows = table.filter(pc.equal(table.column("role"), target.role))
        else:
            rows = table.slice(0, 0)
        stamps = [None if ts is None else ts // 1000  # us -> ms
                  for ts in rows.column("timestamp").cast(pa.int64()).to_pylist()]
        keys = rows.column("key").to_pylist()
        partitions = rows.column("task").to_pylist() if target.by_task else None
        if target.window_bytes and keys:
            inner = [key[:-target.window_bytes] for key in keys]
            partitions = partitions_for(inner, partition_counts[target.topic]).tolist()
        yield TargetRows(target.topic, keys, rows.column(target.value_column).to_pylist(), stamps, partitions,
                         _headers(rows) if target.headers else None)


def _headers(rows: pa.Table) -> list[Headers | None] | None:
    """The rows' headers as the producer takes them, the input record's that Kafka Streams
    forwards (a per-task topology's output records carry them; changelogs none)."""
    if "headers" not in rows.column_names or rows.column("headers").null_count == rows.num_rows:
        return None
    return [None if hs is None else [(h["key"], h["value"]) for h in hs] for hs in rows.column("headers").to_pylist()]


def late_rows(table: pa.Table) -> int:
    """The batch's rows dropped as late (role LATE): what a run reports as late records."""
    if "role" not in table.column_names:
        return 0
    return pc.sum(pc.equal(table.column("role"), LATE)).as_py() or 0


def tally(results: list[dict[str, Any]], targets: list[SinkTarget]) -> tuple[dict[str, int], int]:
    """What the tasks told the driver (rows of kind "written" per topic, "late"): the records
    written per target topic, and the late rows."""
    written = {t.topic: 0 for t in targets}
    for row in results:
        if row["kind"] == "written":
            written[row["topic"]] += row["count"]
    return written, sum(row["count"] for row in results if row["kind"] == "late")


class KafkaSink:
    """What every sink shares: its targets, their partition counts and an idempotent bulk
    writer in the driver. `batch_writer` gives the foreachBatch function."""

    def __init__(self, clients: KafkaClients, targets: list[SinkTarget]):
        self.clients = clients
        self.targets = targets

    @functools.cached_property
    def partition_counts(self) -> dict[str, int]:
        return {t: len(p) for t, p in self.clients.require_topics([t.topic for t in self.targets]).items()}

    def writer(self) -> BulkWriter:
        return shared_writer(self.clients, self.partition_counts)

    def drop_writer(self) -> None:
        if "partition_counts" in self.__dict__:  # else no writer was made (and the broker may be gone)
            drop_shared_writer(self.clients, self.partition_counts)

    def batch_writer(self, encode: Encode, on_batch: Callable[[BatchReport], None]) -> BatchWriter:
        """The foreachBatch function (runs in the driver for each micro-batch). `encode` turns
        the batch's updates into a DataFrame of key, timestamp and value columns."""
        raise NotImplementedError


class TransactionalSink(KafkaSink):
    """exactly_once_v2 in the driver, for the topologies whose tasks mix input partitions, in
    Kafka Streams' way: each batch's output and changelog records and the batch's end input
    offsets (committed to the app's group with sendOffsetsToTransaction) commit in one Kafka
    transaction. The transactional id is stable per app, so a restarted run fences a zombie. A
    batch that Spark runs again after a crash is skipped when the group already holds its end
    offsets: its transaction committed before the crash."""

    def __init__(self, clients: KafkaClients, targets: list[SinkTarget], app_id: str, checkpoint: CheckpointFiles):
        super().__init__(clients, targets)
        self.app_id, self.checkpoint = app_id, checkpoint
        self.transactions = TransactionalWriter(clients, f"kstool-{app_id}", app_id, self.partition_counts)

    def batch_writer(self, encode: Encode, on_batch: Callable[[BatchReport], None]) -> BatchWriter:
        def write(batch_df: DataFrame, batch_id: int) -> None:
            table = unpacked(encode(batch_df).toArrow())  # runs the batch's Spark job
            started = time.monotonic()
            written = self.write_batch(table, batch_id)
            late = late_rows(table)
            on_batch(BatchReport(batch_id, written, time.monotonic() - started, late))
        return write

    def write_batch(self, table: pa.Table, batch_id: int) -> dict[str, int]:
        end = batch_end_offsets(self.checkpoint, batch_id)
        try:
            return commit_once(self.transactions, table, self.targets, end)
        except KafkaOperationError as exc:
            raise QueryFailedError(f"batch {batch_id} not written ({exc})") from None


def commit_once(transactions: TransactionalWriter, table: pa.Table, targets: list[SinkTarget],
                offsets: dict[tuple[str, int], int]) -> dict[str, int]:
    """Write the rows and commit `offsets` in one transaction, unless the group already holds
    them: then a crash came after that transaction committed, and Spark runs its batch again.
    Returns the records written per topic."""
    if transactions.holds(offsets):
        return {}
    rows = list(target_rows(table, targets, transactions.partition_counts))
    records = [OutRecord(r.topic, key, value, ts, (r.headers[i] or []) if r.headers else [],
                         None if r.partitions is None else r.partitions[i])
               for r in rows for i, (key, value, ts) in enumerate(zip(r.keys, r.values, r.timestamps))]
    transactions.commit(records, offsets)
    return {r.topic: len(r.keys) for r in rows}
