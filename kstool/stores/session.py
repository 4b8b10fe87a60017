"""Kafka Streams' session store (RocksDBSessionStore; SessionKeySchema.toBinary):
key ‖ sessionEnd (8) ‖ sessionStart (8), the end first, big-endian. Its changelog is a windowed
one: compacted, and deleted after the store's retention plus a day."""

from __future__ import annotations

import struct

from kstool.stores.window import usable_window_time, windowed_changelog_configs

_END_AND_START = struct.Struct(">qq")


class SessionStore:
    name = "session"
    suffix = _END_AND_START.size
    restore_reads_history = False

    def key(self, key: bytes, start: int, end: int) -> bytes:
        return key + _END_AND_START.pack(end, start)

    def split(self, store_key: bytes) -> tuple[bytes, int, int]:
        """-> record key, session start, session end (the caller checks len(store_key) >= suffix)."""
        end, start = _END_AND_START.unpack(store_key[-self.suffix:])
        return store_key[:-self.suffix], start, end

    def end(self, store_key: bytes) -> int:
        return int(_END_AND_START.unpack(store_key[-self.suffix:])[0])

    def bounds(self, data: bytes) -> tuple[bytes, int, int | None, int | None] | None:
        """(key, start, end, None), or None when the bytes are no session key."""
        if len(data) < self.suffix:
            return None
        key, start, end = self.split(data)
        fits = usable_window_time(start) and usable_window_time(end) and start <= end
        return (key, start, end, None) if fits else None

    def changelog_configs(self, retention_ms: int | None, history_ms: int | None) -> dict[str, str]:
        return windowed_changelog_configs(retention_ms)


SESSION_STORE = SessionStore()
