"""The keys of a windowed aggregation's output topic, as Kafka Streams' windowed serdes write
them: TimeWindowedSerializer (key ‖ start (8)), SessionWindowedSerializer (key ‖ end ‖ start, a
session store's layout), or kstool's `json` key format: {"key", "start", "end"}."""

from __future__ import annotations

import json
import struct

from kstool.stores.session import SESSION_STORE
from kstool.stores.window import WINDOW_STORE, usable_window_time

_START = struct.Struct(">q")
TIME_WINDOWED_SUFFIX = _START.size


def output_key(key: bytes, start: int, end: int, session: bool, key_format: str) -> bytes:
    if key_format == "json":
        text = key.decode("utf-8", "replace")
        return json.dumps({"key": text, "start": start, "end": end}, separators=(",", ":")).encode()
    return SESSION_STORE.key(key, start, end) if session else key + _START.pack(start)


def output_key_suffix(session: bool, key_format: str) -> int:
    """Bytes after the record key in an output key (none in a json key)."""
    return 0 if key_format == "json" else SESSION_STORE.suffix if session else TIME_WINDOWED_SUFFIX


def time_windowed_bounds(data: bytes) -> tuple[bytes, int, int | None, int | None] | None:
    """(key, start, None, None) of a time-windowed output key, or None when the bytes are none."""
    if len(data) < TIME_WINDOWED_SUFFIX:
        return None
    (start,) = _START.unpack(data[-TIME_WINDOWED_SUFFIX:])
    return (data[:-TIME_WINDOWED_SUFFIX], start, None, None) if usable_window_time(start) else None


def time_windowed_start(data: bytes) -> int:
    return int(_START.unpack(data[-TIME_WINDOWED_SUFFIX:])[0])


def windowed_key_bounds(layout: str, data: bytes) -> tuple[bytes, int, int | None, int | None] | None:
    """(key, start, end, seqnum) of a key in a windowed layout: `window` (a window store's key),
    `session` (a session store's or output key), `time-windowed` (an output key); None when the
    bytes do not fit it (too short, or times no window has: another layout's key)."""
    if layout == "window":
        return WINDOW_STORE.bounds(data)
    if layout == "session":
        return SESSION_STORE.bounds(data)
    if layout == "time-windowed":
        return time_windowed_bounds(data)
    return None
