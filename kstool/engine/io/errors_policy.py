"""--on-error for input records a topology cannot process: fail | skip | dlq:TOPIC.

fail raises inside the Spark task (nothing of the batch is written or committed) and names
the record; skip drops it; dlq writes the original record to a dead-letter topic in Kafka
Streams' form (kstool.kafka.dead_letters) and drops it. Bad records are counted in the progress
output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, cast

from kstool.base.errors import UsageError
from kstool.config import ClientConfig
from kstool.engine.failures import BAD_RECORD, SINK, marked
from kstool.kafka.client import KafkaClients
from kstool.kafka.dead_letters import APP, error_headers

if TYPE_CHECKING:
    import pyarrow as pa
    from confluent_kafka import Producer
    from pyspark.sql import Column, DataFrame

METRICS_NAME = "kstool_errors"
# a dead letter's __streams.errors.exception: what Kafka Streams fills with the Java exception's class
INVALID_RECORD = "kstool.InvalidRecord"


@dataclass(frozen=True)
class ErrorPolicy:
    kind: str  # fail | skip | dlq
    dlq_topic: str | None = None

    @classmethod
    def parse(cls, text: str) -> "ErrorPolicy":
        if text in ("fail", "skip"):
            return cls(text)
        if text.startswith("dlq:") and len(text) > 4:
            return cls("dlq", text[4:])
        raise UsageError(f"invalid --on-error {text!r}: use fail, skip or dlq:TOPIC")


VALID = "_kstool_valid"


def apply(source: DataFrame, valid: Column, policy: ErrorPolicy, config: ClientConfig, app_id: str, reason: str) -> DataFrame:
    """Mark each record valid or not (a Spark column), then fail, skip or dead-letter the bad."""
    from pyspark.sql import functions as F

    flagged = source.withColumn(VALID, valid)
    if policy.kind == "fail":
        message = F.concat(F.lit(f"{BAD_RECORD} {reason} at "), F.col("topic"), F.lit(":"),
                           F.col("partition").cast("string"), F.lit(" offset "),
                           F.col("offset").cast("string"),
                           F.lit("; use --on-error skip or dlq:TOPIC to go past it"))
        checked = flagged.withColumn("value", F.when(F.col(VALID), F.col("value")).otherwise(F.raise_error(message)))
        return checked.drop(VALID)
    counted = flagged.observe(METRICS_NAME, F.sum(F.when(F.col(VALID), 0).otherwise(1)).alias("bad_records"))
    if policy.kind == "dlq":
        counted = counted.mapInArrow(dlq_tap(config, cast(str, policy.dlq_topic), app_id, reason), counted.schema)
    return counted.filter(F.col(VALID)).drop(VALID)


def dlq_tap(config: ClientConfig, topic: str, app_id: str, reason: str
            ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Runs on executors: dead-letters the rows marked invalid and passes the batch on."""
    def tap(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        producer = None
        failures: list[str] = []
        for batch in batches:
            valid = batch.column(VALID)
            if pc.all(valid).as_py() is not False:
                yield batch
                continue
            producer = producer or KafkaClients(config).producer(**{"enable.idempotence": True})
            for ok, row in zip(valid.to_pylist(), batch.to_pylist()):
                if not ok:
                    _send_dead_letter(producer, topic, row, app_id, reason, failures)
            yield batch
        if producer is not None and (producer.flush(max(config.timeout_s, 60)) or failures):
            raise marked(SINK, f"dead-letter records to {topic} not delivered")
    return tap


def _send_dead_letter(producer: Producer, topic: str, row: dict[str, Any], app_id: str, reason: str,
                      failures: list[str]) -> None:
    headers = [(h["key"], h["value"]) for h in row["headers"] or []]
    headers += error_headers(INVALID_RECORD, reason, f"{INVALID_RECORD}: {reason}", row["topic"],
                             row["partition"], row["offset"])
    headers.append((APP, app_id.encode()))
    ts = row["timestamp"]
    producer.produce(topic, key=row["key"], value=row["value"], headers=headers,
                     timestamp=0 if ts is None else int(ts.timestamp() * 1000),
                     on_delivery=lambda err, _m: failures.append(err.str()) if err else None)
    producer.poll(0)
