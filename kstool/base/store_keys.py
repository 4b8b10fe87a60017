"""Kafka Streams' store key layouts, the one home of them: window and session store keys as
their changelogs hold them, and the windowed keys of an aggregation's output topic.

key-value store:  key
window store:     key ‖ windowStart (8) ‖ seqnum (4)   (WindowKeySchema)
session store:    key ‖ sessionEnd (8) ‖ sessionStart (8), end first   (SessionKeySchema)
output keys:      key ‖ start (8) (TimeWindowedSerializer), key ‖ end ‖ start (SessionWindowedSerializer)
A key read in the wrong layout gives times past the year 9999: windowed_key_bounds refuses them.
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


def windowed_key_bounds(layout: str, data: bytes) -> tuple[bytes, int, int | None, int | None] | None:
    """(key, start, end, seqnum) of a key in a windowed layout: `window` (a window store's key),
    `session` (a session store's or output key), `time-windowed` (an output key); None when the
    bytes do not fit it (too short, or times no window has: another layout's key)."""
    if layout == "window" and len(data) >= WINDOW_SUFFIX:
        key, start, seqnum = split_window_store_key(data)
        return (key, start, None, seqnum) if usable_window_time(start) and seqnum >= 0 else None
    if layout == "session" and len(data) >= SESSION_SUFFIX:
        key, start, end = split_session_store_key(data)
        fits = usable_window_time(start) and usable_window_time(end) and start <= end
        return (key, start, end, None) if fits else None
    if layout == "time-windowed" and len(data) >= TIME_WINDOWED_SUFFIX:
        (start,) = struct.unpack(">q", data[-TIME_WINDOWED_SUFFIX:])
        return (data[:-TIME_WINDOWED_SUFFIX], start, None, None) if usable_window_time(start) else None
    return None


def output_key(key: bytes, start: int, end: int, session: bool, key_format: str) -> bytes:
    """Windowed output keys: TimeWindowedSerializer (key ‖ start), SessionWindowedSerializer
    (key ‖ end ‖ start), or `json`: {"key", "start", "end"}."""
    if key_format == "json":
        text = key.decode("utf-8", "replace")
        return json.dumps({"key": text, "start": start, "end": end}, separators=(",", ":")).encode()
    return key + (struct.pack(">qq", end, start) if session else struct.pack(">q", start))
