"""Kafka Streams' store key layouts, the one home of them: window and session store keys as
their changelogs hold them, and the windowed keys of an aggregation's output topic.

key-value store:  key
window store:     key ‖ windowStart (8) ‖ seqnum (4)   (WindowKeySchema)
session store:    key ‖ sessionEnd (8) ‖ sessionStart (8), end first   (SessionKeySchema)
output keys:      key ‖ start (8) (TimeWindowedSerializer), key ‖ end ‖ start (SessionWindowedSerializer)
All integers big-endian; timestamps epoch ms.
"""

from __future__ import annotations

import json
import struct

WINDOW_SUFFIX = 12  # bytes after the key in a window store key
SESSION_SUFFIX = 16
TIME_WINDOWED_SUFFIX = 8  # after the key in an output topic's time-windowed key
# a window bound Kafka Streams can write: windows start at 0 or later (TimeWindows.windowsFor);
# the bytes of a key read with the wrong layout give times far beyond the year 9999
LATEST_WINDOW_TIME = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def window_store_key(key: bytes, start: int, seqnum: int = 0) -> bytes:
    return key + struct.pack(">qi", start, seqnum)


def session_store_key(key: bytes, start: int, end: int) -> bytes:
    return key + struct.pack(">qq", end, start)


def usable_window_time(ms: int) -> bool:
    return 0 <= ms <= LATEST_WINDOW_TIME


def split_window_store_key(data: bytes) -> tuple[bytes, int, int]:
    """-> key, window start, seqnum (the caller checks len(data) >= WINDOW_SUFFIX)."""
    start, seqnum = struct.unpack(">qi", data[-WINDOW_SUFFIX:])
    return data[:-WINDOW_SUFFIX], start, seqnum


def split_session_store_key(data: bytes) -> tuple[bytes, int, int]:
    """-> key, session start, session end (the caller checks len(data) >= SESSION_SUFFIX)."""
    end, start = struct.unpack(">qq", data[-SESSION_SUFFIX:])
    return data[:-SESSION_SUFFIX], start, end


def output_key(key: bytes, start: int, end: int, session: bool, key_format: str) -> bytes:
    """Windowed output keys: TimeWindowedSerializer (key ‖ start), SessionWindowedSerializer
    (key ‖ end ‖ start), or `json`: {"key", "start", "end"}."""
    if key_format == "json":
        text = key.decode("utf-8", "replace")
        return json.dumps({"key": text, "start": start, "end": end}, separators=(",", ":")).encode()
    return key + (struct.pack(">qq", end, start) if session else struct.pack(">q", start))
