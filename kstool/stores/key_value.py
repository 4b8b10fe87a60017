"""Kafka Streams' key-value store (RocksDBStore, its changelog ChangeLoggingKeyValueBytesStore):
the record key is the store key, and the changelog is compacted: a restore reads each key's
latest value, and a tombstone removes the key."""

from __future__ import annotations

COMPACTED = {"cleanup.policy": "compact"}


class KeyValueStore:
    name = "key-value"
    suffix = 0  # bytes after the record key in a store key
    restore_reads_history = False  # a restore reads the compacted view: each key's latest value

    def changelog_configs(self, retention_ms: int | None, history_ms: int | None) -> dict[str, str]:
        return dict(COMPACTED)


KEY_VALUE_STORE = KeyValueStore()
