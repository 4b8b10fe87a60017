"""The Kafka sink: a foreachBatch writer. Each batch's encoded rows come to the driver as
Arrow (toArrow, no Python worker start-up) and are produced by one long-lived idempotent
bulk writer. At-least-once: Spark commits a batch only after every row was acknowledged, and
a batch re-run after a crash writes its rows again."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa

from kstool.engine.exceptions import QueryFailedError
from kstool.kafka.bulk import BulkWriter
from kstool.kafka.client import KafkaClients
from kstool.kafka.exceptions import KafkaOperationError


@dataclass(frozen=True)
class SinkTarget:
    """Write column `value_column` (binary) with the row's `key` and `timestamp` to `topic`."""

    topic: str
    value_column: str


@dataclass
class BatchReport:
    batch_id: int
    written: dict[str, int]
    seconds: float  # producing and flushing only


class KafkaSink:
    def __init__(self, clients: KafkaClients, targets: list[SinkTarget]):
        self.clients = clients
        self.targets = targets
        self._writer: BulkWriter | None = None

    def writer(self) -> BulkWriter:
        if self._writer is None:
            counts = {t: len(p) for t, p in self.clients.require_topics([t.topic for t in self.targets]).items()}
            self._writer = BulkWriter(self.clients, counts, **{"enable.idempotence": True})
        return self._writer

    def write(self, table: pa.Table) -> dict[str, int]:
        writer = self.writer()
        keys = table.column("key").to_pylist()
        stamps = [ts // 1000 if ts else 0  # us -> ms; 0 = now
                  for ts in table.column("timestamp").cast(pa.int64()).to_pylist()]
        written = {}
        for target in self.targets:
            values = table.column(target.value_column).to_pylist()
            for key, value, ts in zip(keys, values, stamps):
                writer.send(target.topic, key, value, ts)
            written[target.topic] = len(keys)
        try:
            writer.flush()
        except KafkaOperationError as exc:
            raise QueryFailedError(f"output not written: {exc}") from None
        return written

    def batch_writer(self, encode: Callable, on_batch: Callable[[BatchReport], None]):
        """The foreachBatch function (runs in the driver for each micro-batch)."""

        def write(batch_df, batch_id: int) -> None:
            table = encode(batch_df).toArrow()  # runs the batch's Spark job
            started = time.monotonic()
            written = self.write(table)
            on_batch(BatchReport(batch_id, written, time.monotonic() - started))
        return write
