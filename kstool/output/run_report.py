"""What a running app tells the operator, batch by batch, on stderr."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from kstool.output.listings import stderr_is_tty

if TYPE_CHECKING:
    from kstool.engine import BatchStatus


def format_counts(counts: dict[str, int]) -> str:
    """Records per topic for progress lines: "out: 3, changelog: 3", or "nothing"."""
    return ", ".join(f"{topic}: {n}" for topic, n in counts.items()) or "nothing"


def batch_line(status: BatchStatus) -> str:
    parts = [f"batch {status.batch_id}", f"{status.input_records} records in",
             f"{status.duration_ms / 1000:.1f}s ({status.records_per_second:,.0f}/s)",
             f"out {format_counts(status.written)} ({status.sink_seconds:.1f}s)"]
    if status.lag is not None:
        parts.append(f"lag {status.lag}")
    if status.errors:
        parts.append(f"bad records {status.errors}")
    if status.late:
        parts.append(f"late records {status.late}")
    return " | ".join(parts)


class RunReporter:
    """What a running app tells the operator (a kstool.engine.progress.Progress): a live
    status line on a TTY, one log line per batch when piped. Always on stderr; stdout stays
    free for data."""

    def __init__(self, app_id: str):
        self.app_id = app_id
        self.tty = stderr_is_tty()
        self._live: Any = None

    def message(self, text: str) -> None:
        self._print(f"kstool: {self.app_id}: {text}")

    def batch(self, status: BatchStatus) -> None:
        if self.tty:
            self._live_update(f"{self.app_id}: {batch_line(status)}")
        else:
            self._print(f"kstool: {self.app_id}: {batch_line(status)}")

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
