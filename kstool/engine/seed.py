"""A restore's seed: what the first batch of the app's new checkpoint puts back in its stores.

Per-task stores (kstool.topologies.tasks) get every store's compacted changelog, read back here
per task (a per-task store is logged to its task's partition), as transformWithState's initial
state. Spark's own aggregations (wordcount, aggregate without windows) get theirs as rows of
that batch: the source reads the changelogs' compacted view (kstool.contract.RESTORED)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from kstool.application.model import Manifest, StoreSpec
from kstool.base.errors import KstoolError
from kstool.kafka.client import KafkaClients
from kstool.kafka.compaction import kept_by_compaction
from kstool.kafka.consume import ConsumeOptions, consume

KEY_SUFFIX = {"window": 8, "session": 16}  # bytes after the record key: start; end and start
NUMBERS = ("long", "double")  # 8-byte values


class ForeignChangelogError(KstoolError):
    """A changelog record that cannot belong to the store (another topology's topic)."""


SEED_COLUMNS = pa.schema([("task", pa.int32()), ("store", pa.string()), ("key", pa.binary()),
                          ("value", pa.binary()), ("timestamp", pa.int64())])


@dataclass
class Seed:
    entries: pa.Table | None = None  # SEED_COLUMNS, for per-task stores
    changelogs: list[str] = field(default_factory=list)  # for the source to read, for Spark's aggregations


def plan_seed(clients: KafkaClients, manifest: Manifest, per_task: bool) -> Seed:
    if per_task:
        return Seed(entries=read_seed(clients, manifest))
    return Seed(changelogs=[store.changelog_topic for store in manifest.stores])


def read_seed(clients: KafkaClients, manifest: Manifest) -> pa.Table:
    """The latest value of each key of each store's changelog, per partition; tombstones drop
    the key (Kafka's compaction, done here)."""
    rows: list[dict] = []
    for store in manifest.stores:
        records = list(consume(clients, ConsumeOptions(store.changelog_topic, exit_at_end=True)))
        for record in records:
            _check_layout(store, record)
        kept = (records[i] for i in kept_by_compaction([(r.partition, r.key) for r in records]))
        rows += [{"task": r.partition, "store": store.name, "key": r.key, "value": r.value, "timestamp": r.timestamp}
                 for r in kept if r.value is not None and r.key is not None]
    return pa.Table.from_pylist(rows, schema=SEED_COLUMNS)


def _check_layout(store: StoreSpec, record) -> None:
    key, value = record.key or b"", record.value
    if len(key) <= KEY_SUFFIX.get(store.kind, 0) or (value is not None and store.value_format in NUMBERS
                                                      and len(value) != 8):
        raise ForeignChangelogError(
            f"{store.changelog_topic} partition {record.partition} offset {record.offset} is not a record of "
            f"store {store.name!r} ({store.kind}, {store.value_format} values): is it this app's changelog? "
            "Nothing was changed")
