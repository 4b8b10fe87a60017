"""What a running app tells the operator: a live status line on a TTY, one log line per batch
when piped, nothing with --quiet. Always on stderr; stdout stays free for data."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from kstool.output import format_counts


@dataclass
class BatchStatus:
    batch_id: int
    input_records: int
    records_per_second: float
    duration_ms: int
    written: dict[str, int] = field(default_factory=dict)
    sink_seconds: float = 0.0
    lag: int | None = None
    errors: int = 0
    late: int = 0

    def line(self) -> str:
        out = format_counts(self.written)
        parts = [f"batch {self.batch_id}", f"{self.input_records} records in",
                 f"{self.duration_ms / 1000:.1f}s ({self.records_per_second:,.0f}/s)",
                 f"out {out} ({self.sink_seconds:.1f}s)"]
        if self.lag is not None:
            parts.append(f"lag {self.lag}")
        if self.errors:
            parts.append(f"bad records {self.errors}")
        if self.late:
            parts.append(f"late records {self.late}")
        return " | ".join(parts)


class Reporter:
    def __init__(self, app_id: str, quiet: bool = False):
        self.app_id = app_id
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self._live = None

    def message(self, text: str) -> None:
        if not self.quiet:
            self._print(f"kstool: {self.app_id}: {text}")

    def batch(self, status: BatchStatus) -> None:
        if self.quiet:
            return
        if self.tty:
            self._live_update(f"{self.app_id}: {status.line()}")
        else:
            self._print(f"kstool: {self.app_id}: {status.line()}")

    def _print(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text)
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def _live_update(self, text: str) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        if self._live is None:
            self._live = Live(Text(text), console=Console(stderr=True), transient=True,
                              refresh_per_second=4)
            self._live.start()
        else:
            self._live.update(Text(text))

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
