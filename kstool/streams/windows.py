"""Window specs and Kafka Streams' window assignment (the key layouts: kstool.stores)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kstool.base.errors import UsageError
from kstool.base.timeutil import parse_duration

if TYPE_CHECKING:
    import numpy as np


WINDOW_KINDS = ("tumbling", "hopping", "sliding", "session")  # --window KIND:...


@dataclass(frozen=True)
class WindowSpec:
    kind: str  # one of WINDOW_KINDS
    size: int  # ms; the time difference for sliding windows, the inactivity gap for sessions
    advance: int  # ms; == size for tumbling, unused for sliding windows and sessions

    @classmethod
    def parse(cls, text: str) -> "WindowSpec":
        """tumbling:SIZE | hopping:SIZE,ADVANCE | sliding:DIFFERENCE | session:GAP (durations: 5m,
        30s, 1h, ...)."""
        kind, _, rest = text.partition(":")
        try:
            if kind == "tumbling" and rest:
                size = parse_duration(rest)
                spec = cls(kind, size, size)
            elif kind == "hopping" and rest.count(",") == 1:
                size, advance = (parse_duration(part) for part in rest.split(","))
                spec = cls(kind, size, advance)
            elif kind in ("sliding", "session") and rest:
                spec = cls(kind, parse_duration(rest), 0)
            else:
                raise ValueError
        except (ValueError, UsageError):
            raise UsageError(f"invalid --window {text!r}: use tumbling:SIZE, hopping:SIZE,ADVANCE, "
                             "sliding:DIFFERENCE or session:GAP (e.g. tumbling:5m)") from None
        if spec.size <= 0 or (kind == "hopping" and not 0 < spec.advance <= spec.size):
            raise UsageError(f"invalid --window {text!r}: sizes must be > 0 and the advance "
                             "at most the size")
        return spec

    def text(self) -> str:
        if self.kind == "hopping":
            return f"hopping:{self.size}ms,{self.advance}ms"
        return f"{self.kind}:{self.size}ms"

    def assign(self, timestamps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The epoch-aligned time windows holding each timestamp (TimeWindows.windowsFor), for
        many at once: (index of the timestamp, window start) pairs, by index, then start."""
        import numpy as np  # not where a topology is only named (kstool --help)

        first = np.maximum(timestamps - self.size + self.advance, 0)
        first -= first % self.advance
        per_timestamp = (timestamps - first) // self.advance + 1
        index = np.repeat(np.arange(len(timestamps)), per_timestamp)
        nth = np.arange(len(index)) - (np.cumsum(per_timestamp) - per_timestamp)[index]
        return index, first[index] + nth * self.advance
