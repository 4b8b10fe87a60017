"""Window specs and Kafka Streams' window assignment and key layouts."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from kstool.errors import UsageError
from kstool.timeutil import parse_duration


@dataclass(frozen=True)
class WindowSpec:
    kind: str  # tumbling | hopping | session
    size: int  # ms; the inactivity gap for sessions
    advance: int  # ms; == size for tumbling, unused for sessions

    @classmethod
    def parse(cls, text: str) -> "WindowSpec":
        """tumbling:SIZE | hopping:SIZE,ADVANCE | session:GAP (durations: 5m, 30s, 1h, ...)."""
        kind, _, rest = text.partition(":")
        try:
            if kind == "tumbling" and rest:
                size = parse_duration(rest)
                spec = cls(kind, size, size)
            elif kind == "hopping" and rest.count(",") == 1:
                size, advance = (parse_duration(part) for part in rest.split(","))
                spec = cls(kind, size, advance)
            elif kind == "session" and rest:
                spec = cls(kind, parse_duration(rest), 0)
            else:
                raise ValueError
        except (ValueError, UsageError):
            raise UsageError(f"invalid --window {text!r}: use tumbling:SIZE, hopping:SIZE,ADVANCE "
                             "or session:GAP (e.g. tumbling:5m)") from None
        if spec.size <= 0 or (kind == "hopping" and not 0 < spec.advance <= spec.size):
            raise UsageError(f"invalid --window {text!r}: sizes must be > 0 and the advance "
                             "at most the size")
        return spec

    def text(self) -> str:
        if self.kind == "hopping":
            return f"hopping:{self.size}ms,{self.advance}ms"
        return f"{self.kind}:{self.size}ms"

    def starts_for(self, timestamp: int) -> list[int]:
        """Starts of the epoch-aligned time windows holding `timestamp` (TimeWindows.windowsFor)."""
        first = max(0, timestamp - self.size + self.advance)
        first -= first % self.advance
        return list(range(first, timestamp + 1, self.advance))


def _ms(value: int) -> bytes:
    return struct.pack(">q", value)


def window_store_key(key: bytes, start: int, seqnum: int = 0) -> bytes:
    """Window store changelog key: key ‖ start(8) ‖ seqnum(4)."""
    return key + _ms(start) + struct.pack(">i", seqnum)


def session_store_key(key: bytes, start: int, end: int) -> bytes:
    """Session store changelog key: key ‖ end(8) ‖ start(8) (end first)."""
    return key + _ms(end) + _ms(start)


def split_window_store_key(data: bytes) -> tuple[bytes, int]:
    return data[:-12], struct.unpack(">q", data[-12:-4])[0]


def split_session_store_key(data: bytes) -> tuple[bytes, int, int]:
    """-> key, start, end."""
    end, start = struct.unpack(">qq", data[-16:])
    return data[:-16], start, end


def output_key(key: bytes, start: int, end: int, session: bool, key_format: str) -> bytes:
    """Windowed output keys: TimeWindowedSerializer (key ‖ start), SessionWindowedSerializer
    (key ‖ end ‖ start), or `json`: {"key", "start", "end"}."""
    if key_format == "json":
        text = key.decode("utf-8", "replace")
        return json.dumps({"key": text, "start": start, "end": end}, separators=(",", ":")).encode()
    return key + (_ms(end) + _ms(start) if session else _ms(start))
