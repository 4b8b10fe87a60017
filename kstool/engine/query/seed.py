"""A restore's seed: what the first batch of the app's new checkpoint puts back in its stores.

Per-task stores (kstool.tasks.processor) get every store's compacted changelog as
transformWithState's initial state, a task's entries read by an executor from its changelog
partitions (a per-task store is logged to its task's partition). Spark's own aggregations
(wordcount, aggregate without windows) get theirs as rows of that batch: the source reads the
changelogs' compacted view (kstool.contract.RESTORED). `state restore` reads them here first, to
count the entries and check that each record belongs to its store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kstool.application.model import Manifest, StoreSpec
from kstool.base.errors import KstoolError
from kstool.kafka.client import KafkaClients
from kstool.kafka.compaction import kept_by_compaction
from kstool.kafka.consume import ConsumeOptions, consume

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from kstool.kafka.records import Record

NUMBERS = ("long", "double", "number")  # 8-byte values


class ForeignChangelogError(KstoolError):
    """A changelog record that cannot belong to the store (another topology's topic)."""


SEED_COLUMNS = pa.schema([("task", pa.int32()), ("store", pa.string()), ("key", pa.binary()),
                          ("value", pa.binary()), ("timestamp", pa.int64()), ("offset", pa.int64())])


@dataclass
class Seed:
    stores: dict[str, str]  # changelog topic -> store name
    per_task: bool  # per-task stores: an initial state; else rows of the first batch
    history: tuple[str, ...] = ()  # changelogs read whole: versioned stores' (their history)

    @property
    def changelogs(self) -> list[str]:
        return list(self.stores)


def plan_seed(manifest: Manifest, per_task: bool) -> Seed:
    return Seed({store.changelog_topic: store.name for store in manifest.stores}, per_task,
                tuple(store.changelog_topic for store in manifest.stores if store.store_kind.restore_reads_history))


def seed_entries(spark: SparkSession, client_config_file: str, seed: Seed) -> DataFrame:
    """The per-task stores' entries as a DataFrame of SEED_COLUMNS, read by the executors."""
    from pyspark.sql import functions as F

    from kstool.engine.io.source_options import CLIENT_CONFIG_FILE_OPTION, HISTORY_TOPICS_OPTION, SEED_TOPICS_OPTION, SOURCE_NAME

    store_of_topic = F.create_map(*[F.lit(text) for pair in seed.stores.items() for text in pair])
    return (spark.read.format(SOURCE_NAME).option(CLIENT_CONFIG_FILE_OPTION, client_config_file)
            .option(SEED_TOPICS_OPTION, ",".join(seed.changelogs))
            .option(HISTORY_TOPICS_OPTION, ",".join(seed.history)).load()
            .select(F.col("partition").alias("task"), store_of_topic[F.col("topic")].alias("store"), "key", "value",
                    F.unix_millis("timestamp").alias("timestamp"), "offset"))


def read_seed(clients: KafkaClients, manifest: Manifest) -> pa.Table:
    """The latest value of each key of each store's changelog, per partition; tombstones drop
    the key (Kafka's compaction, done here). A versioned store's changelog is read whole."""
    rows: list[dict[str, Any]] = []
    for store in manifest.stores:
        records = list(consume(clients, ConsumeOptions(store.changelog_topic, exit_at_end=True)))
        for record in records:
            _check_layout(store, record)
        if store.store_kind.restore_reads_history:
            kept = (r for r in records if r.key is not None)
        else:
            kept = (records[i] for i in kept_by_compaction([(r.partition, r.key) for r in records]))
            kept = (r for r in kept if r.value is not None and r.key is not None)
        rows += [{"task": r.partition, "store": store.name, "key": r.key, "value": r.value, "timestamp": r.timestamp,
                  "offset": r.offset} for r in kept]
    return pa.Table.from_pylist(rows, schema=SEED_COLUMNS)


def _check_layout(store: StoreSpec, record: Record) -> None:
    key, value = record.key, record.value
    if key is None or len(key) < store.store_kind.suffix or (value is not None and store.value_format in NUMBERS
                                                             and len(value) != 8):
        raise ForeignChangelogError(
            f"{store.changelog_topic} partition {record.partition} offset {record.offset} is not a record of "
            f"store {store.name!r} ({store.kind}, {store.value_format} values): is it this app's changelog? "
            "Nothing was changed")
