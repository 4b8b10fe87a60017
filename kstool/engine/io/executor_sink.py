"""at_least_once output written by the executors: each task produces its own rows with an
idempotent bulk writer (one per Python worker, kept for the next batch), so output throughput
grows with the cluster and no row travels through the driver. A task finishes only when its
records are acknowledged, and Spark commits the batch only when every task has finished.

A broker whose high watermark needs each partition to end with a single-record batch (the
embedded one's profile) gets it across writers: the tasks hand the record they held back for
each partition to the driver, which sends those last."""

from __future__ import annotations

import functools
import time
from collections import Counter
from typing import TYPE_CHECKING, Callable, Iterator

import pyarrow as pa

from kstool.config import ClientConfig
from kstool.contract import SinkTarget
from kstool.engine.exceptions import QueryFailedError
from kstool.engine.failures import SINK, marked
from kstool.engine.io.packs import HEADERS_TYPE, unpacked
from kstool.engine.io.sink import BatchReport, KafkaSink, late_rows, tally, target_rows
from kstool.kafka.bulk import drop_shared_writer, shared_writer
from kstool.kafka.client import KafkaClients
from kstool.kafka.exceptions import KafkaOperationError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from kstool.engine.io.sink import BatchWriter, Encode

# what each task tells the driver: rows written per topic (kind "written"), rows dropped as
# late ("late"), and the records it held back for the tail ("held")
RESULT_SCHEMA = pa.schema([("kind", pa.string()), ("topic", pa.string()), ("count", pa.int64()),
                           ("key", pa.binary()), ("value", pa.binary()), ("timestamp", pa.int64()),
                           ("partition", pa.int32()), ("headers", HEADERS_TYPE)])
def produce_partition(config: ClientConfig, targets: list[SinkTarget], partition_counts: dict[str, int],
                      batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs on an executor, once per task."""
    clients = KafkaClients(config)
    writer = shared_writer(clients, partition_counts)
    written: Counter[str] = Counter()
    late = 0
    for batch in batches:
        table = unpacked(pa.Table.from_batches([batch]))
        for target in target_rows(table, targets, partition_counts):
            writer.send_rows(target.topic, target.keys, target.values, target.timestamps, target.partitions,
                             target.headers)
            written[target.topic] += len(target.keys)
        late += late_rows(table)
    try:
        writer.flush(send_held=False)
    except KafkaOperationError as exc:
        drop_shared_writer(clients, partition_counts)
        raise marked(SINK, f"output not written: {exc}") from None
    rows = [{"kind": "written", "topic": topic, "count": n} for topic, n in written.items()]
    rows.append({"kind": "late", "count": late})
    rows += [{"kind": "held", "topic": topic, "key": key, "value": value, "timestamp": ts, "partition": partition,
              "headers": [{"key": k, "value": v} for k, v in headers] if headers else None}
             for topic, key, value, ts, partition, headers in writer.take_held()]
    yield pa.RecordBatch.from_pylist(rows, schema=RESULT_SCHEMA)


class ExecutorSink(KafkaSink):
    def batch_writer(self, encode: Encode, on_batch: Callable[[BatchReport], None]) -> BatchWriter:
        from pyspark.sql.pandas.types import from_arrow_schema

        task = functools.partial(produce_partition, self.clients.config, self.targets, self.partition_counts)
        result_type = from_arrow_schema(RESULT_SCHEMA)

        def write(batch_df: DataFrame, batch_id: int) -> None:
            result = encode(batch_df).mapInArrow(task, result_type).toArrow().to_pylist()
            started = time.monotonic()
            writer = self.writer()
            for row in result:
                if row["kind"] == "held":
                    writer.send(row["topic"], row["key"], row["value"], row["timestamp"],
                                [(h["key"], h["value"]) for h in row["headers"] or []], partition=row["partition"])
            try:
                writer.flush()
            except KafkaOperationError as exc:
                self.drop_writer()
                raise QueryFailedError(f"output not written: {exc}") from None
            written, late = tally(result, self.targets)
            on_batch(BatchReport(batch_id, written, time.monotonic() - started, late))
        return write
