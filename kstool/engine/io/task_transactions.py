"""exactly_once_v2 output written by the executors, a Kafka transaction per task, for the
topologies whose task t reads partition t of each input and nothing else (Topology.
tasks_are_partitions): a task's output and changelog records commit with its own input
offsets, as a Kafka Streams task's do, so no row of the batch travels through the driver.

Each task's transactional id is stable (kstool-<app>:task-<t>; ':' is in no app id), so the
attempt Spark runs again after an executor died fences the dead one and aborts its open
transaction; one that finds the group already at its end offsets knows the dead attempt's
transaction committed, and writes nothing. The driver then commits the offsets of the tasks
that had no rows to write (nothing to keep them atomic with)."""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from kstool.base.errors import BrokerUnreachableError
from kstool.checkpoint.logs import batch_end_offsets
from kstool.config import ClientConfig
from kstool.contract import SinkTarget
from kstool.engine.exceptions import QueryFailedError
from kstool.engine.failures import SINK, marked
from kstool.engine.io.packs import unpacked
from kstool.engine.io.sink import BatchReport, TransactionalSink, commit_once, late_rows, tally
from kstool.kafka.client import KafkaClients
from kstool.kafka.exceptions import KafkaOperationError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from kstool.engine.io.sink import BatchWriter, Encode
from kstool.kafka.transactions import TransactionalWriter

KAFKA_ERRORS = (KafkaOperationError, BrokerUnreachableError)  # what a transaction or the offsets' read raise
# what each task tells the driver: records written per topic ("written"), rows dropped as late
# ("late"), and each task whose transaction holds its offsets ("committed", count = the task)
RESULT_SCHEMA = pa.schema([("kind", pa.string()), ("topic", pa.string()), ("count", pa.int64())])


def task_transactional_id(app_id: str, task: int) -> str:
    return f"kstool-{app_id}:task-{task}"


def commit_tasks(config: ClientConfig, targets: list[SinkTarget], partition_counts: dict[str, int], app_id: str,
                 end: dict[tuple[str, int], int], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs on an executor, once per partition of the batch's output: one task's rows (or, in
    a checkpoint made with fewer shuffle partitions, several tasks')."""
    by_task: dict[int, list[pa.Table]] = defaultdict(list)
    for batch in batches:
        table = unpacked(pa.Table.from_batches([batch]))
        tasks = table.column("task")
        for task in pc.unique(tasks).to_pylist():
            by_task[task].append(table.filter(pc.equal(tasks, task)))
    clients = KafkaClients(config)
    rows: list[dict[str, Any]] = []
    for task, tables in sorted(by_task.items()):
        table = pa.concat_tables(tables)
        offsets = {tp: offset for tp, offset in end.items() if tp[1] == task}
        try:
            written = commit_task(clients, app_id, task, partition_counts, table, targets, offsets)
        except KAFKA_ERRORS as exc:
            raise marked(SINK, f"task {task}'s output not written: {exc}") from None
        rows += [{"kind": "written", "topic": topic, "count": n} for topic, n in written.items()]
        rows.append({"kind": "late", "count": late_rows(table)})
        rows.append({"kind": "committed", "count": task})
    yield pa.RecordBatch.from_pylist(rows, schema=RESULT_SCHEMA)


def commit_task(clients: KafkaClients, app_id: str, task: int, partition_counts: dict[str, int], table: pa.Table,
                targets: list[SinkTarget], offsets: dict[tuple[str, int], int]) -> dict[str, int]:
    """One task's transaction, by a writer made for it: its init_transactions fences an attempt
    of the same task that died (aborting its open transaction). Not kept for the next batch: a
    task moves between Python workers, so a kept writer is often fenced by then, and the
    embedded broker answers a fenced producer only after the client's timeout (30 s, measured);
    a new one costs 0.05-0.5 s."""
    writer = TransactionalWriter(clients, task_transactional_id(app_id, task), app_id, partition_counts)
    try:
        return commit_once(writer, table, targets, offsets)
    finally:
        writer.close()


class TaskTransactionalSink(TransactionalSink):
    def batch_writer(self, encode: Encode, on_batch: Callable[[BatchReport], None]) -> BatchWriter:
        from pyspark.sql.pandas.types import from_arrow_schema

        result_type = from_arrow_schema(RESULT_SCHEMA)

        def write(batch_df: DataFrame, batch_id: int) -> None:
            end = batch_end_offsets(self.checkpoint, batch_id)
            task = functools.partial(commit_tasks, self.clients.config, self.targets, self.partition_counts,
                                     self.app_id, end)
            result = encode(batch_df).mapInArrow(task, result_type).toArrow().to_pylist()
            started = time.monotonic()
            committed = {row["count"] for row in result if row["kind"] == "committed"}
            rest = {tp: offset for tp, offset in end.items() if tp[1] not in committed}
            try:  # the tasks that wrote nothing: their offsets alone
                if rest and not self.transactions.holds(rest):
                    self.transactions.commit([], rest)
            except KafkaOperationError as exc:
                raise QueryFailedError(f"batch {batch_id}'s offsets not committed ({exc})") from None
            written, late = tally(result, self.targets)
            on_batch(BatchReport(batch_id, written, time.monotonic() - started, late))
        return write
