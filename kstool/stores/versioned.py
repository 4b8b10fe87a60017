"""Kafka Streams' versioned key-value store (RocksDBVersionedStore, KIP-889): keys as a key-value
store's, each record's timestamp the time its value became valid. Its changelog is its history:
compaction waits the history retention plus a day (VersionedChangelogTopicConfig), and a restore
replays the changelog whole, not its compacted view."""

from __future__ import annotations

from kstool.stores.key_value import COMPACTED
from kstool.stores.window import EXTRA_RETENTION_MS


class VersionedStore:
    name = "versioned"  # a manifest's StoreSpec says key-value with a history_ms
    suffix = 0
    restore_reads_history = True

    def changelog_configs(self, retention_ms: int | None, history_ms: int | None) -> dict[str, str]:
        assert history_ms is not None
        return {**COMPACTED, "min.compaction.lag.ms": str(history_ms + EXTRA_RETENTION_MS)}


VERSIONED_STORE = VersionedStore()
