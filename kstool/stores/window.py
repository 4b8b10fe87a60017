"""Kafka Streams' window store (RocksDBWindowStore; WindowKeySchema.toStoreKeyBinary and
extractStoreTimestamp): key ‖ windowStart (8) ‖ seqnum (4), big-endian. The seqnum tells apart
the records of one key and time in a store that keeps duplicates (a stream-stream join's sides);
an aggregate's windows keep 0. Its changelog is compacted and deleted after the store's
retention plus a day (WindowedChangelogTopicConfig; StreamsConfig's
windowstore.changelog.additional.retention.ms)."""

from __future__ import annotations

import struct

_START_AND_SEQNUM = struct.Struct(">qi")
EXTRA_RETENTION_MS = 86_400_000  # Kafka Streams' additional changelog retention: one day
# a window bound Kafka Streams can write: windows start at 0 or later (TimeWindows.windowsFor);
# the bytes of a key read with the wrong layout give times far beyond the year 9999
LATEST_WINDOW_TIME = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def usable_window_time(ms: int) -> bool:
    return 0 <= ms <= LATEST_WINDOW_TIME


def windowed_changelog_configs(retention_ms: int | None) -> dict[str, str]:
    configs = {"cleanup.policy": "compact,delete"}
    if retention_ms is not None:
        configs["retention.ms"] = str(retention_ms + EXTRA_RETENTION_MS)
    return configs


class WindowStore:
    name = "window"
    suffix = _START_AND_SEQNUM.size  # bytes after the record key
    restore_reads_history = False

    def key(self, key: bytes, start: int, seqnum: int = 0) -> bytes:
        return key + _START_AND_SEQNUM.pack(start, seqnum)

    def split(self, store_key: bytes) -> tuple[bytes, int, int]:
        """-> record key, window start, seqnum (the caller checks len(store_key) >= suffix)."""
        start, seqnum = _START_AND_SEQNUM.unpack(store_key[-self.suffix:])
        return store_key[:-self.suffix], start, seqnum

    def record_key(self, store_key: bytes) -> bytes:
        return store_key[:-self.suffix]

    def start(self, store_key: bytes) -> int:
        return int(_START_AND_SEQNUM.unpack(store_key[-self.suffix:])[0])

    def seqnum(self, store_key: bytes) -> int:
        return int(_START_AND_SEQNUM.unpack(store_key[-self.suffix:])[1])

    def bounds(self, data: bytes) -> tuple[bytes, int, int | None, int | None] | None:
        """(key, start, None, seqnum), or None when the bytes are no window store key (too short,
        or a time no window has: another layout's key)."""
        if len(data) < self.suffix:
            return None
        key, start, seqnum = self.split(data)
        return (key, start, None, seqnum) if usable_window_time(start) and seqnum >= 0 else None

    def changelog_configs(self, retention_ms: int | None, history_ms: int | None) -> dict[str, str]:
        return windowed_changelog_configs(retention_ms)


WINDOW_STORE = WindowStore()
