"""A restore's seed: every store's compacted changelog, read back per task (a per-task store is
logged to its task's partition), for transformWithState's initial state in the first batch of
the app's new checkpoint (kstool.topologies.tasks)."""

from __future__ import annotations

import pyarrow as pa

from kstool.application.model import Manifest, StoreSpec
from kstool.errors import KstoolError
from kstool.kafka.client import KafkaClients
from kstool.kafka.consume import ConsumeOptions, consume

KEY_SUFFIX = {"window": 8, "session": 16}  # bytes after the record key: start; end and start
NUMBERS = ("long", "double")  # 8-byte values


class ForeignChangelogError(KstoolError):
    """A changelog record that cannot belong to the store (another topology's topic)."""


SEED_COLUMNS = pa.schema([("task", pa.int32()), ("store", pa.string()), ("key", pa.binary()),
                          ("value", pa.binary()), ("timestamp", pa.int64())])


def read_seed(clients: KafkaClients, manifest: Manifest) -> pa.Table:
    """The latest value of each key of each store's changelog, per partition; tombstones drop
    the key (Kafka's compaction, done here)."""
    rows: list[dict] = []
    for store in manifest.stores:
        latest: dict[tuple[int | None, bytes | None], tuple] = {}
        for record in consume(clients, ConsumeOptions(store.changelog_topic, exit_at_end=True)):
            _check_layout(store, record)
            latest[(record.partition, record.key)] = (record.value, record.timestamp)
        rows += [{"task": partition, "store": store.name, "key": key, "value": value, "timestamp": ts}
                 for (partition, key), (value, ts) in latest.items() if value is not None and key is not None]
    return pa.Table.from_pylist(rows, schema=SEED_COLUMNS)


def _check_layout(store: StoreSpec, record) -> None:
    key, value = record.key or b"", record.value
    if len(key) <= KEY_SUFFIX.get(store.kind, 0) or (value is not None and store.value_format in NUMBERS
                                                      and len(value) != 8):
        raise ForeignChangelogError(
            f"{store.changelog_topic} partition {record.partition} offset {record.offset} is not a record of "
            f"store {store.name!r} ({store.kind}, {store.value_format} values): is it this app's changelog? "
            "Nothing was changed")
